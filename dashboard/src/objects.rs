//! Every Liqo object, as LiqoDash showed them: the kinds, each object as YAML, and the spec a
//! person edits (checked first by a server-side dry run, shown as a diff). Pure: the stores'
//! objects in, text out; [`crate::edit`] does the I/O.

use kube::Resource;
use kube::api::ApiResource;
use serde::Serialize;

/// A kind of Liqo object the dashboard lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ForeignClusters,
    SearchDomains,
    PeeringRequests,
    Advertisements,
    ClusterConfigs,
}

impl Kind {
    pub const ALL: [Kind; 5] =
        [Kind::ForeignClusters, Kind::SearchDomains, Kind::PeeringRequests, Kind::Advertisements, Kind::ClusterConfigs];

    /// Its plural, as in the URL (`/objects/foreignclusters/…`) and the API.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::ForeignClusters => "foreignclusters",
            Kind::SearchDomains => "searchdomains",
            Kind::PeeringRequests => "peeringrequests",
            Kind::Advertisements => "advertisements",
            Kind::ClusterConfigs => "clusterconfigs",
        }
    }

    /// What a page calls it.
    pub fn title(self) -> &'static str {
        match self {
            Kind::ForeignClusters => "ForeignClusters",
            Kind::SearchDomains => "SearchDomains",
            Kind::PeeringRequests => "PeeringRequests",
            Kind::Advertisements => "Advertisements",
            Kind::ClusterConfigs => "ClusterConfig",
        }
    }

    /// What a page calls one of them.
    pub fn singular(self) -> &'static str {
        match self {
            Kind::ForeignClusters => "ForeignCluster",
            Kind::SearchDomains => "SearchDomain",
            Kind::PeeringRequests => "PeeringRequest",
            Kind::Advertisements => "Advertisement",
            Kind::ClusterConfigs => "ClusterConfig",
        }
    }

    pub fn from_plural(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.plural() == s)
    }

    /// Whether a person edits its spec here: the ClusterConfig, SearchDomains and a
    /// ForeignCluster's spec. PeeringRequests and Advertisements are written by the peers.
    pub fn editable(self) -> bool {
        matches!(self, Kind::ForeignClusters | Kind::SearchDomains | Kind::ClusterConfigs)
    }

    /// Advertisements live in tenant namespaces; the others are cluster-scoped.
    pub fn namespaced(self) -> bool {
        self == Kind::Advertisements
    }

    /// Its API resource, for a dynamic client.
    pub fn api_resource(self) -> ApiResource {
        match self {
            Kind::ForeignClusters => ApiResource::erase::<liqo_api::ForeignCluster>(&()),
            Kind::SearchDomains => ApiResource::erase::<liqo_api::SearchDomain>(&()),
            Kind::PeeringRequests => ApiResource::erase::<liqo_api::PeeringRequest>(&()),
            Kind::Advertisements => ApiResource::erase::<liqo_api::Advertisement>(&()),
            Kind::ClusterConfigs => ApiResource::erase::<liqo_api::ClusterConfig>(&()),
        }
    }
}

/// One object in a list: its name and namespace.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listed {
    pub namespace: Option<String>,
    pub name: String,
}

/// `objects`' names and namespaces, sorted (pure).
pub fn listed<K: Resource>(objects: &[std::sync::Arc<K>]) -> Vec<Listed> {
    let mut out: Vec<Listed> =
        objects.iter().map(|o| Listed { namespace: o.meta().namespace.clone(), name: o.meta().name.clone().unwrap_or_default() }).collect();
    out.sort();
    out
}

/// `o` as YAML, without the managed fields (who wrote which field: no page shows them).
pub fn yaml<K: Resource + Serialize + Clone>(o: &K) -> String {
    let mut o = o.clone();
    o.meta_mut().managed_fields = None;
    serde_yaml::to_string(&o).unwrap_or_default()
}

/// The spec of `o` as YAML: what the edit box holds.
pub fn spec_yaml<K: Serialize>(o: &K) -> String {
    let v = serde_json::to_value(o).unwrap_or_default();
    serde_yaml::to_string(&v["spec"]).unwrap_or_default()
}

/// The spec a person wrote, or where and why it does not read (pure).
pub fn parse_spec(text: &str) -> Result<serde_json::Value, String> {
    let v: serde_json::Value = serde_yaml::from_str(text).map_err(|e| match e.location() {
        Some(l) => format!("line {}, column {}: {e}", l.line(), l.column()),
        None => e.to_string(),
    })?;
    if v.is_object() { Ok(v) } else { Err("the spec is a mapping of fields (field: value), one per line".into()) }
}

/// The JSON merge patch (RFC 7386) that turns `before` into `after` (pure): what changed,
/// what went as `null`, lists whole.
pub fn merge_patch(before: &serde_json::Value, after: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in a {
                match b.get(k) {
                    Some(old) if old == v => {}
                    Some(old) if old.is_object() && v.is_object() => {
                        out.insert(k.clone(), merge_patch(old, v));
                    }
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => after.clone(),
    }
}

/// One line of a diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Same(String),
    Gone(String),
    Added(String),
}

/// The lines that change from `before` to `after` (pure): a longest common subsequence,
/// fine for the few hundred lines of a spec.
pub fn diff(before: &str, after: &str) -> Vec<Line> {
    let (a, b): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(Line::Same(a[i].to_owned()));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // What goes before what comes, as a person reads a change.
            out.push(Line::Gone(a[i].to_owned()));
            i += 1;
        } else {
            out.push(Line::Added(b[j].to_owned()));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_name_their_urls_and_only_what_people_write_is_editable() {
        for k in Kind::ALL {
            assert_eq!(Kind::from_plural(k.plural()), Some(k));
            assert_eq!(k.api_resource().plural, k.plural());
        }
        assert_eq!(Kind::from_plural("secrets"), None, "nothing but Liqo's kinds");
        let editable: Vec<_> = Kind::ALL.into_iter().filter(|k| k.editable()).collect();
        assert_eq!(editable, [Kind::ForeignClusters, Kind::SearchDomains, Kind::ClusterConfigs]);
        assert!(Kind::Advertisements.namespaced() && !Kind::ForeignClusters.namespaced());
    }

    #[test]
    fn a_spec_reads_or_says_where_it_does_not() {
        assert_eq!(parse_spec("join: true\nauthUrl: https://x\n").unwrap(), serde_json::json!({"join": true, "authUrl": "https://x"}));
        let e = parse_spec("join: true\n  bad: [\n").unwrap_err();
        assert!(e.starts_with("line "), "{e}");
        assert!(parse_spec("- a\n- b\n").unwrap_err().contains("mapping"));
        assert!(parse_spec("").is_err(), "an empty spec is not a spec");
    }

    #[test]
    fn a_merge_patch_carries_what_changed_and_nulls_what_went() {
        let before = serde_json::json!({"join": false, "authUrl": "https://a", "clusterIdentity": {"clusterID": "x", "clusterName": "n"}, "list": [1, 2]});
        let after = serde_json::json!({"join": true, "clusterIdentity": {"clusterID": "x"}, "list": [1]});
        let p = merge_patch(&before, &after);
        assert_eq!(p, serde_json::json!({"join": true, "authUrl": null, "clusterIdentity": {"clusterName": null}, "list": [1]}));
        assert_eq!(merge_patch(&before, &before), serde_json::json!({}), "nothing changes, nothing sent");
        // Applied as RFC 7386 says, it gives `after`.
        let mut applied = before.clone();
        json_patch_merge(&mut applied, &p);
        assert_eq!(applied, after);
    }

    /// RFC 7386's merge, for the test.
    fn json_patch_merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
        if let (Some(t), Some(p)) = (target.as_object_mut(), patch.as_object()) {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else if v.is_object() && t.get(k).is_some_and(|x| x.is_object()) {
                    json_patch_merge(t.get_mut(k).unwrap(), v);
                } else {
                    t.insert(k.clone(), v.clone());
                }
            }
        }
    }

    #[test]
    fn a_diff_keeps_the_same_and_marks_what_goes_and_comes() {
        let d = diff("a: 1\nb: 2\nc: 3\n", "a: 1\nb: 5\nc: 3\nd: 4\n");
        assert_eq!(
            d,
            [
                Line::Same("a: 1".into()),
                Line::Gone("b: 2".into()),
                Line::Added("b: 5".into()),
                Line::Same("c: 3".into()),
                Line::Added("d: 4".into())
            ]
        );
        assert!(diff("x: 1\n", "x: 1\n").iter().all(|l| matches!(l, Line::Same(_))));
        assert_eq!(diff("", "a: 1"), [Line::Added("a: 1".into())]);
        assert_eq!(diff("a: 1", ""), [Line::Gone("a: 1".into())]);
    }

    #[test]
    fn yaml_leaves_out_the_managed_fields() {
        let mut sd =
            liqo_api::SearchDomain::new("example.com", liqo_api::SearchDomainSpec { domain: "example.com".into(), autojoin: Some(true) });
        sd.metadata.managed_fields = Some(vec![Default::default()]);
        let y = yaml(&sd);
        assert!(!y.contains("managedFields") && y.contains("domain: example.com"), "{y}");
        assert_eq!(spec_yaml(&sd), "autojoin: true\ndomain: example.com\n");
    }
}
