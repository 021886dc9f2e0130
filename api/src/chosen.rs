//! Whether a person here chose a cluster (`AcceptKnown`): a ForeignCluster created
//! by hand (`Manual`), one whose `spec.join: true` someone other than discovery set, one with
//! an approved fingerprint (`spec.trustedCAFingerprint`), or the allow list (checked by the
//! policy itself). Never because discovery (LAN or DNS) saw it, nor because the cluster asked
//! (`IncomingPeering`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

use crate::{DiscoveryType, ForeignCluster};

/// Field manager of what discovery writes (its ForeignClusters, their `join` from autojoin).
pub const DISCOVERY_FIELD_MANAGER: &str = "liqo-discovery";

/// The managed-fields entry that owns `spec.join`, if any (pure).
pub fn join_setter(fc: &ForeignCluster) -> Option<&ManagedFieldsEntry> {
    fc.metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").and_then(|s| s.get("f:join")).is_some()))
}

/// Keeps of `fc`'s managed fields only who set `spec.join` (all [`chosen`] reads), so a cache
/// of many ForeignClusters stays small.
pub fn keep_join_setter(fc: &mut ForeignCluster) {
    let setter = join_setter(fc).map(|m| ManagedFieldsEntry {
        manager: m.manager.clone(),
        fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(serde_json::json!({"f:spec": {"f:join": {}}}))),
        ..Default::default()
    });
    fc.metadata.managed_fields = setter.map(|s| vec![s]);
}

/// Whether a person here chose the cluster `fc` stands for (pure; see the module).
pub fn chosen(fc: &ForeignCluster) -> bool {
    if fc.spec.discovery_type() == DiscoveryType::Manual || fc.spec.approved_fingerprint().is_some() {
        return true;
    }
    fc.spec.join == Some(true) && join_setter(fc).is_some_and(|m| m.manager.as_deref() != Some(DISCOVERY_FIELD_MANAGER))
}

/// Whether `fc` only stands in for a cluster that asked to peer with us (pure): made by the
/// incoming side, chosen by no one, not joined by us. The outgoing side gives way to a
/// ForeignCluster made for that cluster by a person or discovery; the incoming side records a
/// request on such a one first.
pub fn stands_in(fc: &ForeignCluster) -> bool {
    fc.spec.discovery_type() == DiscoveryType::IncomingPeering
        && !chosen(fc)
        && !fc.spec.join()
        && fc.metadata.finalizers.as_ref().is_none_or(|f| f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(kind: &str, join: bool, join_manager: Option<&str>, fingerprint: bool) -> ForeignCluster {
        let mut v = serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "a"},
            "spec": {"clusterIdentity": {"clusterID": "a"}, "discoveryType": kind, "join": join}
        });
        if let Some(m) = join_manager {
            v["metadata"]["managedFields"] = serde_json::json!([
                {"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
                {"manager": m, "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:join": {}, "f:namespace": {}}}}
            ]);
        }
        if fingerprint {
            v["spec"]["trustedCAFingerprint"] = serde_json::json!("ab".repeat(32));
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_cluster_is_chosen_by_a_person_never_by_discovery() {
        assert!(chosen(&fc("Manual", false, Some("kubectl-create"), false)), "created by hand");
        assert!(chosen(&fc("LAN", true, Some("kubectl-patch"), false)), "join set by a person");
        assert!(chosen(&fc("WAN", false, Some(DISCOVERY_FIELD_MANAGER), true)), "a fingerprint approved");
        assert!(chosen(&fc("IncomingPeering", true, Some("kubectl-liqo"), false)), "joined back by a person");
        assert!(!chosen(&fc("LAN", true, Some(DISCOVERY_FIELD_MANAGER), false)), "autojoin is not a person");
        assert!(!chosen(&fc("LAN", false, Some("kubectl-patch"), false)), "a person said no");
        assert!(!chosen(&fc("WAN", false, None, false)), "merely seen");
        assert!(!chosen(&fc("IncomingPeering", false, Some("liqo-incoming"), false)), "it asked: not chosen");
    }

    #[test]
    fn the_cache_keeps_only_who_set_join() {
        let mut a = fc("LAN", true, Some("kubectl-patch"), false);
        keep_join_setter(&mut a);
        let kept = a.metadata.managed_fields.clone().unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].manager.as_deref(), Some("kubectl-patch"));
        assert!(chosen(&a), "still told apart after trimming");
        let mut b = fc("WAN", false, None, false);
        keep_join_setter(&mut b);
        assert_eq!(b.metadata.managed_fields, None);
    }
}
