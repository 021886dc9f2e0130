//! Names every component agrees on: API groups, labels, the finalizer and well-known objects.

/// API group of ForeignCluster, SearchDomain, PeeringRequest and FederationRequest.
pub const DISCOVERY_GROUP: &str = "discovery.liqo.io";
/// API group of ClusterConfig.
pub const CONFIG_GROUP: &str = "config.liqo.io";
/// API group of Advertisement.
pub const SHARING_GROUP: &str = "sharing.liqo.io";
/// The only version served by every group.
pub const VERSION: &str = "v1alpha1";

/// Label carrying the remote cluster ID of a ForeignCluster (how ForeignClusters are merged).
pub const LABEL_CLUSTER_ID: &str = "discovery.liqo.io/cluster-id";
/// Label carrying how a ForeignCluster was found (`LAN`, `WAN`, `Manual`, `IncomingPeering`).
pub const LABEL_DISCOVERY_TYPE: &str = "discovery.liqo.io/discovery-type";
/// Label carrying the SearchDomain that found a ForeignCluster.
pub const LABEL_SEARCHDOMAIN: &str = "discovery.liqo.io/searchdomain";

/// Finalizer that keeps a ForeignCluster until its remote PeeringRequest is gone.
pub const FINALIZER_PEERED: &str = "discovery.liqo.io/peered";

/// Default namespace of the Liqo components (overridden by `POD_NAMESPACE`).
pub const DEFAULT_NAMESPACE: &str = "liqo";
/// ConfigMap holding this cluster's ID, in the Liqo namespace.
pub const CLUSTER_ID_CONFIGMAP: &str = "cluster-id";
/// Key of the cluster ID inside [`CLUSTER_ID_CONFIGMAP`].
pub const CLUSTER_ID_KEY: &str = "cluster-id";
/// Name of the ClusterConfig singleton.
pub const CLUSTER_CONFIG_NAME: &str = "liqo-configuration";
/// Secret holding the tokens accepted by the auth service.
pub const AUTH_TOKEN_SECRET: &str = "auth-token";
/// Prefix of the ServiceAccount a peer gets on this cluster: `remote-<clusterID>`.
pub const PEER_SERVICE_ACCOUNT_PREFIX: &str = "remote-";

/// Name of the ServiceAccount that identifies peer `cluster_id` on this cluster.
pub fn peer_service_account(cluster_id: &str) -> String {
    format!("{PEER_SERVICE_ACCOUNT_PREFIX}{cluster_id}")
}

/// Name of the Advertisement that `sender_cluster_id` creates in the cluster it peers with.
pub fn advertisement_name(sender_cluster_id: &str) -> String {
    format!("advertisement-{sender_cluster_id}")
}

/// Name of the Secret holding the CA of the remote cluster of ForeignCluster `fc_name`.
pub fn ca_data_secret(fc_name: &str) -> String {
    format!("{fc_name}-ca-data")
}

/// Name of the Secret, in the remote Liqo namespace, holding the kubeconfig that cluster
/// `requester_cluster_id` hands the remote with its PeeringRequest.
pub fn peering_kubeconfig_secret(requester_cluster_id: &str) -> String {
    format!("pr-kubeconfig-{requester_cluster_id}")
}

/// Name of the ClusterRole (and its binding) a peer's identity gets on this cluster.
pub fn peer_role(cluster_id: &str) -> String {
    format!("liqo-remote-{cluster_id}")
}
