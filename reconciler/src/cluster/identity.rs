//! Cluster identity (protocol §2): the `cluster-id` ConfigMap in the Liqo namespace, created once
//! (UID of the first control-plane node by name, else a random UUIDv4), never rewritten,
//! re-created when deleted.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use liqo_api::names::{CLUSTER_ID_CONFIGMAP, CLUSTER_ID_KEY};

use crate::machinery::error::{Result, is_conflict};
use crate::machinery::singleton::Singleton;

/// Labels that mark a control-plane node (current and legacy).
pub const CONTROL_PLANE_LABELS: [&str; 2] = ["node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"];

/// The cluster ID held by the ConfigMap, when it holds a non-empty one.
pub fn cluster_id_of(cm: &ConfigMap) -> Option<String> {
    cm.data.as_ref()?.get(CLUSTER_ID_KEY).map(|s| s.trim()).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// The UID of the first control-plane node (sorted by name), else `fallback()`.
pub fn choose_cluster_id(nodes: &[Node], fallback: impl FnOnce() -> String) -> String {
    let mut control_plane: Vec<&Node> = nodes
        .iter()
        .filter(|n| {
            let labels = n.metadata.labels.as_ref();
            CONTROL_PLANE_LABELS.iter().any(|l| labels.is_some_and(|m| m.contains_key(*l)))
        })
        .filter(|n| n.metadata.uid.as_deref().is_some_and(|u| !u.is_empty()))
        .collect();
    control_plane.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    match control_plane.first().and_then(|n| n.metadata.uid.clone()) {
        Some(uid) => uid.to_lowercase(),
        None => fallback(),
    }
}

/// A fresh random cluster ID.
pub fn random_cluster_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The `cluster-id` ConfigMap as a [`Singleton`].
pub struct ClusterIdentity {
    pub nodes: Api<Node>,
}

impl ClusterIdentity {
    async fn pick(&self) -> String {
        let mut all = Vec::new();
        for label in CONTROL_PLANE_LABELS {
            match self.nodes.list(&ListParams::default().labels(label)).await {
                Ok(list) => all.extend(list.items),
                Err(e) => tracing::info!(error = %e, "cannot list control-plane nodes; the cluster ID will be random"),
            }
        }
        choose_cluster_id(&all, random_cluster_id)
    }
}

impl Singleton for ClusterIdentity {
    type Object = ConfigMap;
    type Value = String;

    fn name(&self) -> &str {
        CLUSTER_ID_CONFIGMAP
    }

    fn read(&self, cm: &ConfigMap) -> Option<String> {
        cluster_id_of(cm)
    }

    async fn repair(&self, api: &Api<ConfigMap>, existing: Option<&ConfigMap>) -> Result<()> {
        let id = self.pick().await;
        let data = BTreeMap::from([(CLUSTER_ID_KEY.to_owned(), id.clone())]);
        let result = match existing {
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta { name: Some(CLUSTER_ID_CONFIGMAP.into()), ..Default::default() },
                    data: Some(data),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
            Some(cm) => {
                // Present but empty: fill it in, guarded by its resourceVersion.
                let mut cm = cm.clone();
                cm.metadata.managed_fields = None;
                cm.data.get_or_insert_with(Default::default).extend(data);
                api.replace(CLUSTER_ID_CONFIGMAP, &PostParams::default(), &cm).await.map(|_| ())
            }
        };
        match result {
            Ok(()) => {
                tracing::info!(cluster_id = %id, "cluster ID set");
                Ok(())
            }
            // Somebody else (another replica) got there first: the watch brings their value.
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, uid: &str, labels: &[&str]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(uid.into()),
                labels: Some(labels.iter().map(|l| ((*l).to_owned(), String::new())).collect()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn first_control_plane_node_by_name_gives_the_id() {
        let nodes = [
            node("worker-a", "11111111-0000-0000-0000-000000000000", &[]),
            node("cp-b", "22222222-0000-0000-0000-000000000000", &["node-role.kubernetes.io/control-plane"]),
            node("cp-a", "33333333-0000-0000-0000-000000000000", &["node-role.kubernetes.io/master"]),
        ];
        assert_eq!(choose_cluster_id(&nodes, || "random".into()), "33333333-0000-0000-0000-000000000000");
    }

    #[test]
    fn without_control_plane_nodes_the_id_is_random() {
        let nodes = [node("worker", "11111111-0000-0000-0000-000000000000", &[])];
        assert_eq!(choose_cluster_id(&nodes, || "random".into()), "random");
        let id = random_cluster_id();
        liqo_api::validate_cluster_id(&id).unwrap();
        assert_ne!(id, random_cluster_id());
    }

    #[test]
    fn empty_or_missing_key_needs_a_repair() {
        let mut cm = ConfigMap::default();
        assert_eq!(cluster_id_of(&cm), None);
        cm.data = Some(BTreeMap::from([(CLUSTER_ID_KEY.to_owned(), "  ".to_owned())]));
        assert_eq!(cluster_id_of(&cm), None);
        cm.data = Some(BTreeMap::from([(CLUSTER_ID_KEY.to_owned(), "abc".to_owned())]));
        assert_eq!(cluster_id_of(&cm).as_deref(), Some("abc"));
    }
}
