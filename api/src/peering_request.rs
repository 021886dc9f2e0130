//! PeeringRequest and FederationRequest (`discovery.liqo.io/v1alpha1`): created in the remote
//! cluster by a cluster that wants to peer. FederationRequest is the older name (Liqo's first releases) and
//! has exactly the same schema; both are named after the requester's cluster ID.

use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::advertisement::AdvertisementState;
use crate::foreign_cluster::ClusterIdentity;

/// What a requester tells the cluster it wants to peer with.
// kube's printcolumn(name = .., type_ = .., json_path = ..) repeats its keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "discovery.liqo.io",
    version = "v1alpha1",
    kind = "PeeringRequest",
    namespaced,
    plural = "peeringrequests",
    shortname = "pr",
    category = "liqo",
    status = "PeeringRequestStatus",
    doc = "A request from a remote cluster (named after its cluster ID) to peer with this cluster.",
    printcolumn(name = "Cluster-ID", type_ = "string", json_path = ".spec.clusterIdentity.clusterID"),
    printcolumn(name = "Cluster-Name", type_ = "string", json_path = ".spec.clusterIdentity.clusterName"),
    printcolumn(name = "Advertisement", type_ = "string", json_path = ".status.advertisementStatus"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct PeeringRequestSpec {
    /// Identity of the requester.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_identity: Option<ClusterIdentity>,
    /// Requester cluster ID in the short form of Liqo's first releases.
    #[serde(rename = "clusterID", default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Namespace where Liqo runs in the requester cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Secret (in this cluster) holding a kubeconfig that lets us manage Advertisements in the requester.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config_ref: Option<SecretReference>,
    /// The requester's auth service URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
}

impl PeeringRequestSpec {
    /// The requester's cluster ID, from `clusterIdentity.clusterID` or else the short `clusterID`.
    pub fn requester_cluster_id(&self) -> Option<&str> {
        self.cluster_identity
            .as_ref()
            .map(|i| i.cluster_id.as_str())
            .filter(|id| !id.is_empty())
            .or(self.cluster_id.as_deref().filter(|id| !id.is_empty()))
    }
}

/// Observed state of a PeeringRequest or FederationRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeeringRequestStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// State of the Advertisement this cluster sends to the requester.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertisement_status: Option<AdvertisementState>,
}

/// The older name of PeeringRequest (Liqo's first releases); same schema, same treatment.
// kube's printcolumn(name = .., type_ = .., json_path = ..) repeats its keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "discovery.liqo.io",
    version = "v1alpha1",
    kind = "FederationRequest",
    namespaced,
    plural = "federationrequests",
    shortname = "fr",
    category = "liqo",
    status = "PeeringRequestStatus",
    doc = "Older name of PeeringRequest: a request from a remote cluster to peer with this cluster.",
    printcolumn(name = "Cluster-ID", type_ = "string", json_path = ".spec.clusterID"),
    printcolumn(name = "Advertisement", type_ = "string", json_path = ".status.advertisementStatus"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(transparent)]
#[schemars(transparent)]
pub struct FederationRequestSpec(pub PeeringRequestSpec);
