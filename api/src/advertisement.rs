//! Advertisement (`sharing.liqo.io/v1alpha1`), minimal: what a peer offers. Named
//! `advertisement-<senderClusterID>`; the remote's broadcaster creates it in the requester.

use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Resources a cluster offers to a peer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<Quantity>,
}

/// An offer of resources from a peer cluster.
// kube's printcolumn(name = .., type_ = .., json_path = ..) repeats its keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "sharing.liqo.io",
    version = "v1alpha1",
    kind = "Advertisement",
    namespaced,
    plural = "advertisements",
    shortname = "adv",
    category = "liqo",
    status = "AdvertisementStatus",
    doc = "Resources a peer cluster offers to this cluster.",
    printcolumn(name = "Cluster-ID", type_ = "string", json_path = ".spec.clusterId"),
    printcolumn(name = "Status", type_ = "string", json_path = ".status.advertisementStatus"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct AdvertisementSpec {
    /// Cluster ID of the sender.
    pub cluster_id: String,
    /// Secret holding the kubeconfig the sender uses to manage this Advertisement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config_ref: Option<SecretReference>,
    #[serde(default)]
    pub resources: ResourceSummary,
    /// When the sender last refreshed this Advertisement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Time>,
}

/// State of an Advertisement.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AdvertisementState {
    Pending,
    Created,
    Accepted,
    Refused,
}

/// Observed state of an Advertisement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdvertisementStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertisement_status: Option<AdvertisementState>,
}
