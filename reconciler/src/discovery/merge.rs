//! One ForeignCluster per cluster ID, whatever finds it (pure). A discovered cluster is matched
//! by cluster ID (label, spec or name) and then created, upgraded or updated in place:
//!
//! - unknown → a ForeignCluster named after the cluster ID, of the finder's type, with `join`
//!   from the autojoin rule (the only time discovery decides `join`: a user's later choice is
//!   kept);
//! - `IncomingPeering` → upgraded to the finder's type, URLs filled; `join` only turns on;
//! - found again by the finder that owns it (LAN for LAN; the same SearchDomain for WAN) →
//!   addresses updated in place, which keeps an established peering;
//! - anything else (Manual, or owned by another finder) → only empty fields are filled.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::ObjectMeta;
use liqo_api::names::{LABEL_CLUSTER_ID, LABEL_DISCOVERY_TYPE, LABEL_SEARCHDOMAIN};
use liqo_api::{ClusterIdentity, DiscoveryType, ForeignCluster, ForeignClusterSpec};
use serde_json::{Map, Value, json};

use super::records::DiscoveredCluster;

/// Who found a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finder {
    /// mDNS on the local network.
    Lan,
    /// A SearchDomain (name and UID, for the owner reference).
    Wan { search_domain: String, uid: String },
}

impl Finder {
    pub fn discovery_type(&self) -> DiscoveryType {
        match self {
            Self::Lan => DiscoveryType::Lan,
            Self::Wan { .. } => DiscoveryType::Wan,
        }
    }

    /// Whether `fc`'s lifecycle belongs to this finder (it may update and delete it).
    pub fn owns(&self, fc: &ForeignCluster) -> bool {
        match self {
            Self::Lan => fc.spec.discovery_type() == DiscoveryType::Lan,
            Self::Wan { search_domain, .. } => {
                fc.spec.discovery_type() == DiscoveryType::Wan
                    && fc.labels().get(LABEL_SEARCHDOMAIN).map(String::as_str) == Some(search_domain.as_str())
            }
        }
    }

    fn owner_reference(&self) -> Option<OwnerReference> {
        match self {
            Self::Lan => None,
            Self::Wan { search_domain, uid } => Some(OwnerReference {
                api_version: "discovery.liqo.io/v1alpha1".into(),
                kind: "SearchDomain".into(),
                name: search_domain.clone(),
                uid: uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(false),
            }),
        }
    }
}

/// What to do with the ForeignClusters for one discovered cluster.
#[derive(Clone, Debug)]
pub enum Change {
    Create(Box<ForeignCluster>),
    /// A JSON merge patch of ForeignCluster `name` (metadata and spec).
    Patch {
        name: String,
        patch: Value,
    },
    Unchanged,
}

impl PartialEq for Change {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Create(a), Self::Create(b)) => serde_json::to_value(a).ok() == serde_json::to_value(b).ok(),
            (Self::Patch { name: a, patch: p }, Self::Patch { name: b, patch: q }) => a == b && p == q,
            (Self::Unchanged, Self::Unchanged) => true,
            _ => false,
        }
    }
}

/// How many of `fcs` discovery made (LAN or WAN): what [`admits`] counts.
pub fn discovered<'a>(fcs: impl IntoIterator<Item = &'a ForeignCluster>) -> usize {
    fcs.into_iter().filter(|fc| matches!(fc.spec.discovery_type(), DiscoveryType::Lan | DiscoveryType::Wan)).count()
}

/// Whether a found cluster may be recorded: one that has a ForeignCluster already always (it is
/// updated), a new one only while fewer than `max` ForeignClusters were `discovered` (counted
/// only then) — so a hostile LAN host or zone announcing thousands of cluster IDs cannot fill
/// the API server with ForeignClusters, nor have us join each of them.
pub fn admits(existing: bool, discovered: impl FnOnce() -> usize, max: usize) -> bool {
    existing || discovered() < max
}

/// The ForeignCluster that stands for `cluster_id` among `fcs`.
pub fn find<'a>(fcs: impl IntoIterator<Item = &'a ForeignCluster>, cluster_id: &str) -> Option<&'a ForeignCluster> {
    let fcs: Vec<&ForeignCluster> = fcs.into_iter().collect();
    let by = |f: &dyn Fn(&ForeignCluster) -> bool| fcs.iter().copied().find(|fc| f(fc));
    by(&|fc| fc.labels().get(LABEL_CLUSTER_ID).map(String::as_str) == Some(cluster_id))
        .or_else(|| by(&|fc| fc.spec.remote_cluster_id() == Some(cluster_id)))
        .or_else(|| by(&|fc| fc.spec.remote_cluster_id().is_none() && fc.name_any() == cluster_id))
}

/// The change that records `found`, seen by `finder`, given the ForeignCluster that already
/// stands for it (if any); `join` is what the autojoin rule says for a new one.
pub fn merge(existing: Option<&ForeignCluster>, found: &DiscoveredCluster, finder: &Finder, join: bool) -> Change {
    let Some(fc) = existing else { return Change::Create(Box::new(new_foreign_cluster(found, finder, join))) };
    let spec = &fc.spec;
    let mut s = Map::new();
    let mut labels = Map::new();
    let mut owners = None;
    let upgrade = spec.discovery_type() == DiscoveryType::IncomingPeering;
    let own = finder.owns(fc);

    // URLs: the finder that owns the ForeignCluster (or upgrades it) keeps them current;
    // anyone else only fills them in.
    for (key, current, new) in [("authUrl", &spec.auth_url, &found.auth_url), ("apiUrl", &spec.api_url, &found.api_url)] {
        let Some(new) = new else { continue };
        let empty = current.as_deref().is_none_or(str::is_empty);
        if (empty || own || upgrade) && current.as_deref() != Some(new.as_str()) {
            s.insert(key.into(), json!(new));
        }
    }
    if spec.namespace.as_deref().is_none_or(str::is_empty)
        && let Some(ns) = &found.namespace
    {
        s.insert("namespace".into(), json!(ns));
    }
    let name_missing = spec.cluster_identity.as_ref().is_none_or(|i| i.cluster_name.as_deref().is_none_or(str::is_empty));
    if spec.remote_cluster_id().is_none() || (name_missing && found.cluster_name.is_some()) {
        let mut identity = json!({"clusterID": found.cluster_id});
        if let Some(n) = found.cluster_name.as_ref().filter(|_| name_missing) {
            identity["clusterName"] = json!(n);
        }
        s.insert("clusterIdentity".into(), identity);
    }
    if fc.labels().get(LABEL_CLUSTER_ID).map(String::as_str) != Some(found.cluster_id.as_str()) {
        labels.insert(LABEL_CLUSTER_ID.into(), json!(found.cluster_id));
    }
    if upgrade {
        let t = finder.discovery_type().as_str();
        s.insert("discoveryType".into(), json!(t));
        labels.insert(LABEL_DISCOVERY_TYPE.into(), json!(t));
        if join && !spec.join() {
            s.insert("join".into(), json!(true));
        }
        if let Finder::Wan { search_domain, .. } = finder {
            labels.insert(LABEL_SEARCHDOMAIN.into(), json!(search_domain));
            let mut refs: Vec<OwnerReference> = fc.owner_references().to_vec();
            refs.extend(finder.owner_reference());
            owners = Some(refs);
        }
    }

    if s.is_empty() && labels.is_empty() && owners.is_none() {
        return Change::Unchanged;
    }
    let mut meta = Map::new();
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if let Some(refs) = owners {
        meta.insert("ownerReferences".into(), json!(refs));
    }
    let mut patch = Map::new();
    if !meta.is_empty() {
        patch.insert("metadata".into(), Value::Object(meta));
    }
    if !s.is_empty() {
        patch.insert("spec".into(), Value::Object(s));
    }
    Change::Patch { name: fc.name_any(), patch: Value::Object(patch) }
}

/// The ForeignCluster for a cluster nobody knew.
pub fn new_foreign_cluster(found: &DiscoveredCluster, finder: &Finder, join: bool) -> ForeignCluster {
    let t = finder.discovery_type();
    let mut labels = std::collections::BTreeMap::from([
        (LABEL_CLUSTER_ID.to_owned(), found.cluster_id.clone()),
        (LABEL_DISCOVERY_TYPE.to_owned(), t.as_str().to_owned()),
    ]);
    if let Finder::Wan { search_domain, .. } = finder {
        labels.insert(LABEL_SEARCHDOMAIN.to_owned(), search_domain.clone());
    }
    ForeignCluster {
        metadata: ObjectMeta {
            name: Some(found.cluster_id.clone()),
            labels: Some(labels),
            owner_references: finder.owner_reference().map(|r| vec![r]),
            ..Default::default()
        },
        spec: ForeignClusterSpec {
            cluster_identity: Some(ClusterIdentity { cluster_id: found.cluster_id.clone(), cluster_name: found.cluster_name.clone() }),
            namespace: found.namespace.clone(),
            join: Some(join),
            auth_url: found.auth_url.clone(),
            api_url: found.api_url.clone(),
            discovery_type: Some(t),
            ..Default::default()
        },
        status: None,
    }
}

/// The ForeignClusters `finder` owns that are not in `listed` (cluster IDs): what a
/// SearchDomain deletes after a successful lookup.
pub fn no_longer_listed<'a>(
    fcs: impl IntoIterator<Item = &'a ForeignCluster>,
    finder: &Finder,
    listed: &[String],
) -> Vec<&'a ForeignCluster> {
    fcs.into_iter()
        .filter(|fc| finder.owns(fc) && fc.metadata.deletion_timestamp.is_none())
        .filter(|fc| {
            let id = fc.labels().get(LABEL_CLUSTER_ID).map(String::as_str).or(fc.spec.remote_cluster_id());
            id.is_none_or(|id| !listed.iter().any(|l| l == id))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

    fn found() -> DiscoveredCluster {
        DiscoveredCluster {
            cluster_id: ID.into(),
            cluster_name: Some("remote".into()),
            namespace: Some("liqo".into()),
            auth_url: Some("https://10.0.0.2:30443".into()),
            api_url: None,
        }
    }

    fn wan(sd: &str) -> Finder {
        Finder::Wan { search_domain: sd.into(), uid: format!("uid-{sd}") }
    }

    fn patch_of(c: Change) -> Value {
        match c {
            Change::Patch { patch, .. } => patch,
            other => panic!("expected a patch, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_cluster_gets_a_foreign_cluster_named_after_its_id() {
        let Change::Create(fc) = merge(None, &found(), &Finder::Lan, true) else { panic!() };
        assert_eq!(fc.name_any(), ID);
        assert_eq!(fc.labels()[LABEL_CLUSTER_ID], ID);
        assert_eq!(fc.labels()[LABEL_DISCOVERY_TYPE], "LAN");
        assert_eq!(fc.spec.discovery_type, Some(DiscoveryType::Lan));
        assert_eq!(fc.spec.join, Some(true));
        assert_eq!(fc.spec.remote_cluster_id(), Some(ID));
        assert_eq!(fc.spec.auth_url.as_deref(), Some("https://10.0.0.2:30443"));
        assert!(fc.owner_references().is_empty());

        let Change::Create(fc) = merge(None, &found(), &wan("example.com"), false) else { panic!() };
        assert_eq!(fc.spec.join, Some(false));
        assert_eq!(fc.labels()[LABEL_SEARCHDOMAIN], "example.com");
        let owner = &fc.owner_references()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("SearchDomain", "example.com", "uid-example.com"));
    }

    #[test]
    fn discovery_fills_the_cap_and_keeps_updating_what_it_has() {
        let Change::Create(lan) = merge(None, &found(), &Finder::Lan, true) else { panic!() };
        let Change::Create(wan) = merge(None, &found(), &wan("example.com"), true) else { panic!() };
        let manual =
            ForeignCluster::new("manual", ForeignClusterSpec { discovery_type: Some(DiscoveryType::Manual), ..Default::default() });
        assert_eq!(discovered([&*lan, &*wan, &manual]), 2, "a Manual one is not discovery's");
        assert!(admits(false, || 1, 2) && !admits(false, || 2, 2), "a new one only below the cap");
        assert!(admits(true, || unreachable!("not counted for a known one"), 2), "a known one is updated at the cap");
    }

    #[test]
    fn found_again_unchanged_writes_nothing() {
        let Change::Create(fc) = merge(None, &found(), &Finder::Lan, true) else { panic!() };
        assert_eq!(merge(Some(&fc), &found(), &Finder::Lan, true), Change::Unchanged);
        assert_eq!(merge(Some(&fc), &found(), &Finder::Lan, false), Change::Unchanged, "join is decided once");
    }

    #[test]
    fn an_address_change_updates_the_urls_in_place_and_keeps_join() {
        let Change::Create(mut fc) = merge(None, &found(), &Finder::Lan, true) else { panic!() };
        fc.spec.join = Some(false); // the user's choice
        let moved =
            DiscoveredCluster { auth_url: Some("https://10.0.0.7:30443".into()), api_url: Some("https://10.0.0.7:6443".into()), ..found() };
        let p = patch_of(merge(Some(&fc), &moved, &Finder::Lan, true));
        assert_eq!(p, json!({"spec": {"authUrl": "https://10.0.0.7:30443", "apiUrl": "https://10.0.0.7:6443"}}));
    }

    #[test]
    fn an_incoming_peering_is_upgraded_by_any_discovery() {
        let mut fc = crate::incoming::incoming_foreign_cluster(ID, &Default::default());
        fc.spec.auth_url = Some("https://old:1".into());
        let p = patch_of(merge(Some(&fc), &found(), &wan("example.com"), true));
        assert_eq!(p["spec"]["discoveryType"], "WAN");
        assert_eq!(p["spec"]["join"], true);
        assert_eq!(p["spec"]["authUrl"], "https://10.0.0.2:30443");
        assert_eq!(p["spec"]["namespace"], "liqo");
        assert_eq!(p["spec"]["clusterIdentity"], json!({"clusterID": ID, "clusterName": "remote"}));
        assert_eq!(p["metadata"]["labels"][LABEL_DISCOVERY_TYPE], "WAN");
        assert_eq!(p["metadata"]["labels"][LABEL_SEARCHDOMAIN], "example.com");
        assert_eq!(p["metadata"]["ownerReferences"][0]["name"], "example.com");

        let p = patch_of(merge(Some(&fc), &found(), &Finder::Lan, false));
        assert_eq!(p["spec"]["discoveryType"], "LAN");
        assert!(p["spec"].get("join").is_none(), "autojoin off: join stays as it was");
        assert!(p["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn a_manual_foreign_cluster_only_gets_its_empty_fields_filled() {
        let mut fc = ForeignCluster::new(
            "my-remote",
            ForeignClusterSpec {
                cluster_id: Some(ID.into()),
                api_url: Some("https://api.remote.example:6443".into()),
                discovery_type: Some(DiscoveryType::Manual),
                join: Some(true),
                ..Default::default()
            },
        );
        let moved = DiscoveredCluster { api_url: Some("https://10.9.9.9:6443".into()), ..found() };
        let p = patch_of(merge(Some(&fc), &moved, &Finder::Lan, false));
        assert_eq!(p["spec"]["authUrl"], "https://10.0.0.2:30443");
        assert!(p["spec"].get("apiUrl").is_none(), "the user's apiUrl is kept");
        assert!(p["spec"].get("discoveryType").is_none());
        assert_eq!(p["metadata"]["labels"][LABEL_CLUSTER_ID], ID);
        fc.spec.auth_url = Some("https://mine:1".into());
        fc.spec.namespace = Some("liqo".into());
        fc.spec.cluster_identity = Some(ClusterIdentity { cluster_id: ID.into(), cluster_name: Some("mine".into()) });
        fc.metadata.labels = Some([(LABEL_CLUSTER_ID.to_owned(), ID.to_owned())].into());
        assert_eq!(merge(Some(&fc), &moved, &Finder::Lan, false), Change::Unchanged);
    }

    #[test]
    fn a_cluster_owned_by_one_finder_is_not_moved_by_another() {
        let Change::Create(fc) = merge(None, &found(), &wan("a.example"), true) else { panic!() };
        let moved = DiscoveredCluster { auth_url: Some("https://10.0.0.7:30443".into()), ..found() };
        assert_eq!(merge(Some(&fc), &moved, &Finder::Lan, true), Change::Unchanged);
        assert_eq!(merge(Some(&fc), &moved, &wan("b.example"), true), Change::Unchanged);
        assert!(matches!(merge(Some(&fc), &moved, &wan("a.example"), true), Change::Patch { .. }));
    }

    #[test]
    fn matching_is_by_label_then_spec_then_name() {
        let a = ForeignCluster::new("x", ForeignClusterSpec { cluster_id: Some(ID.into()), ..Default::default() });
        let b = ForeignCluster::new(ID, ForeignClusterSpec::default());
        let other = ForeignCluster::new("y", ForeignClusterSpec { cluster_id: Some("other".into()), ..Default::default() });
        assert_eq!(find([&other, &b, &a], ID).map(|f| f.name_any()), Some("x".into()));
        assert_eq!(find([&other, &b], ID).map(|f| f.name_any()), Some(ID.into()));
        assert!(find([&other], ID).is_none());
    }

    #[test]
    fn only_the_owning_search_domain_deletes_what_it_no_longer_lists() {
        let Change::Create(mine) = merge(None, &found(), &wan("a.example"), true) else { panic!() };
        let Change::Create(other) = merge(None, &DiscoveredCluster { cluster_id: "other".into(), ..found() }, &wan("b.example"), true)
        else {
            panic!()
        };
        let Change::Create(lan) = merge(None, &DiscoveredCluster { cluster_id: "lan".into(), ..found() }, &Finder::Lan, true) else {
            panic!()
        };
        let all = [&*mine, &*other, &*lan];
        let names = |fcs: Vec<&ForeignCluster>| fcs.iter().map(|f| f.name_any()).collect::<Vec<_>>();
        assert_eq!(names(no_longer_listed(all, &wan("a.example"), &[])), vec![ID.to_owned()]);
        assert!(no_longer_listed(all, &wan("a.example"), &[ID.to_owned()]).is_empty());
        assert_eq!(names(no_longer_listed(all, &Finder::Lan, &[])), vec!["lan".to_owned()]);
    }
}
