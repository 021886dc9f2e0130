//! Remembered choices, as a phone remembers Wi-Fi networks (the original's first listed
//! limitation): when a user sets `join` on a discovered ForeignCluster (LAN or WAN) — to join
//! it or to stay away — the choice is kept in ConfigMap `liqo-known-peers` (key: the cluster
//! ID; value: `join` or `no-join`). It outlives the ForeignCluster: when discovery finds the
//! same cluster again after it expired or left its domain, the remembered choice wins over
//! autojoin. `kubectl -n liqo get configmap liqo-known-peers -o yaml` shows them;
//! `kubectl liqo forget ID` (or deleting the key) forgets one.
//!
//! A user's choice is told from discovery's own by who last set `spec.join` (the field's
//! manager); discovery sets it only when it creates the ForeignCluster.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use liqo_api::{DiscoveryType, ForeignCluster};

use super::writer::FIELD_MANAGER as DISCOVERY;
use crate::machinery::error::{Result, is_not_found};

/// The ConfigMap of remembered choices, in the Liqo namespace.
pub const KNOWN_PEERS: &str = "liqo-known-peers";
/// Field manager of the memory's writes.
pub const FIELD_MANAGER: &str = "liqo-memory";
const JOIN: &str = "join";
const NO_JOIN: &str = "no-join";

/// The remembered choice for `cluster_id` in `data` (pure).
pub fn remembered(data: Option<&BTreeMap<String, String>>, cluster_id: &str) -> Option<bool> {
    match data?.get(cluster_id)?.as_str() {
        JOIN => Some(true),
        NO_JOIN => Some(false),
        _ => None,
    }
}

/// The choice for `cluster_id` in the memory `store` holds.
pub fn recall(store: &Store<ConfigMap>, namespace: &str, cluster_id: &str) -> Option<bool> {
    let cm = store.get(&ObjectRef::new(KNOWN_PEERS).within(namespace))?;
    remembered(cm.data.as_ref(), cluster_id)
}

/// Whether a newly discovered `cluster_id` is joined: the user's remembered choice (in the
/// memory `shared` keeps), else the autojoin rule's `autojoin`.
pub fn join_found<P: crate::remote::peer::Peers>(shared: &crate::context::Shared<P>, cluster_id: &str, autojoin: bool) -> bool {
    recall(&shared.memory, &shared.namespace, cluster_id).unwrap_or(autojoin)
}

/// A user's choice on a discovered ForeignCluster (pure): its cluster ID and `join`, when
/// someone other than discovery last set `spec.join`.
pub fn users_choice(fc: &ForeignCluster) -> Option<(String, bool)> {
    if !matches!(fc.spec.discovery_type(), DiscoveryType::Lan | DiscoveryType::Wan) || fc.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let join = fc.spec.join?;
    let setter = fc.metadata.managed_fields.iter().flatten().find(|m| crate::machinery::managers::sets_join(m))?;
    let id = fc.spec.remote_cluster_id()?;
    (setter.manager.as_deref() != Some(DISCOVERY)).then(|| (id.to_owned(), join))
}

/// The choices in `fcs` that the memory `data` does not hold yet (pure).
pub fn unrecorded<'a>(
    fcs: impl IntoIterator<Item = &'a ForeignCluster>,
    data: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    fcs.into_iter()
        .filter_map(users_choice)
        .filter(|(id, join)| remembered(data, id) != Some(*join))
        .map(|(id, join)| (id, if join { JOIN } else { NO_JOIN }.to_owned()))
        .collect()
}

/// Adds `choices` to the memory (creating it when missing).
pub async fn record(client: &Client, namespace: &str, choices: &BTreeMap<String, String>) -> Result<()> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    match api.patch(KNOWN_PEERS, &params, &Patch::Merge(serde_json::json!({ "data": choices }))).await {
        Err(e) if is_not_found(&e) => {
            let mut cm = ConfigMap { data: Some(choices.clone()), ..Default::default() };
            cm.metadata.name = Some(KNOWN_PEERS.into());
            cm.metadata.labels = Some([("app.kubernetes.io/managed-by".to_owned(), "liqo-reconciler".to_owned())].into());
            api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, &cm).await?;
            Ok(())
        }
        other => other.map(drop).map_err(Into::into),
    }
}

/// Forgets the choice for `cluster_id`; whether there was one.
pub async fn forget(client: &Client, namespace: &str, cluster_id: &str) -> Result<bool> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let had = match api.get_opt(KNOWN_PEERS).await? {
        Some(cm) => remembered(cm.data.as_ref(), cluster_id).is_some(),
        None => return Ok(false),
    };
    let patch = serde_json::json!({ "data": { cluster_id: null } });
    match api.patch(KNOWN_PEERS, &PatchParams::default(), &Patch::Merge(patch)).await {
        Err(e) if is_not_found(&e) => Ok(false),
        other => other.map(|_| had).map_err(Into::into),
    }
}

/// Records new choices every `period`, from the shared ForeignCluster store and the memory's
/// own watch: no API request unless there is something to record.
pub async fn keep(client: Client, namespace: String, foreign: Store<ForeignCluster>, memory: Store<ConfigMap>, period: Duration) {
    loop {
        tokio::time::sleep(period).await;
        let data = memory.get(&ObjectRef::new(KNOWN_PEERS).within(&namespace)).and_then(|cm| cm.data.clone());
        let fcs = foreign.state();
        let new = unrecorded(fcs.iter().map(|f| &**f), data.as_ref());
        if new.is_empty() {
            continue;
        }
        match record(&client, &namespace, &new).await {
            Ok(()) => tracing::info!(choices = ?new, "remembered the user's choice about discovered peers"),
            Err(e) => tracing::warn!(error = %e, "remembering choices about discovered peers failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

    const ID: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

    fn discovered(kind: &str, join: bool, join_set_by: &str) -> ForeignCluster {
        let mut fc: ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "x"},
            "spec": {"clusterIdentity": {"clusterID": ID}, "discoveryType": kind, "join": join}
        }))
        .unwrap();
        fc.metadata.managed_fields = Some(vec![
            ManagedFieldsEntry {
                manager: Some(DISCOVERY.into()),
                fields_v1: Some(FieldsV1(serde_json::json!({"f:spec": {"f:discoveryType": {}}}))),
                ..Default::default()
            },
            ManagedFieldsEntry {
                manager: Some(join_set_by.into()),
                fields_v1: Some(FieldsV1(serde_json::json!({"f:spec": {"f:join": {}}}))),
                ..Default::default()
            },
        ]);
        fc
    }

    #[test]
    fn only_a_users_choice_on_a_discovered_peer_is_remembered() {
        assert_eq!(users_choice(&discovered("LAN", false, "kubectl-edit")), Some((ID.into(), false)));
        assert_eq!(users_choice(&discovered("WAN", true, "kubectl-liqo")), Some((ID.into(), true)));
        assert_eq!(users_choice(&discovered("LAN", true, DISCOVERY)), None, "autojoin's choice is not the user's");
        assert_eq!(users_choice(&discovered("Manual", true, "kubectl-edit")), None, "a peer added by hand is not discovered");
        // As the store keeps it: the same choices read the same.
        for (kind, join, by) in [("LAN", false, "kubectl-edit"), ("LAN", true, DISCOVERY)] {
            let mut kept = discovered(kind, join, by);
            crate::machinery::managers::trim(&mut kept.metadata.managed_fields);
            assert_eq!(users_choice(&kept), users_choice(&discovered(kind, join, by)), "{kind} {join} {by}");
        }
    }

    #[test]
    fn what_is_already_remembered_is_not_written_again() {
        let fcs = [discovered("LAN", false, "kubectl-edit")];
        assert_eq!(unrecorded(&fcs, None), BTreeMap::from([(ID.to_owned(), "no-join".to_owned())]));
        let data = BTreeMap::from([(ID.to_owned(), "no-join".to_owned())]);
        assert!(unrecorded(&fcs, Some(&data)).is_empty());
        let changed = BTreeMap::from([(ID.to_owned(), "join".to_owned())]);
        assert_eq!(unrecorded(&fcs, Some(&changed)).len(), 1, "a changed mind is recorded");
        assert_eq!(remembered(Some(&data), ID), Some(false));
        assert_eq!(remembered(Some(&BTreeMap::from([(ID.to_owned(), "maybe".to_owned())])), ID), None);
    }
}
