//! SearchDomain (`discovery.liqo.io/v1alpha1`): a DNS domain browsed with DNS-SD.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A DNS domain whose DNS-SD records list Liqo clusters to discover.
// kube's printcolumn(name = .., type_ = .., json_path = ..) repeats its keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "discovery.liqo.io",
    version = "v1alpha1",
    kind = "SearchDomain",
    plural = "searchdomains",
    shortname = "sd",
    category = "liqo",
    status = "SearchDomainStatus",
    doc = "A DNS domain browsed with DNS-SD for Liqo clusters.",
    printcolumn(name = "Domain", type_ = "string", json_path = ".spec.domain"),
    printcolumn(name = "Autojoin", type_ = "boolean", json_path = ".spec.autojoin"),
    printcolumn(name = "Ready", type_ = "string", json_path = r#".status.conditions[?(@.type=="Ready")].status"#),
    printcolumn(name = "Reason", type_ = "string", json_path = r#".status.conditions[?(@.type=="Ready")].reason"#),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct SearchDomainSpec {
    /// Domain to browse, e.g. `example.com`.
    #[schemars(length(min = 1, max = 253))]
    pub domain: String,
    /// Join the clusters found here; when unset, ClusterConfig's `autojoin` applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autojoin: Option<bool>,
}

/// A cluster listed by the domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FoundCluster {
    /// Name of the ForeignCluster for it.
    pub foreign_cluster: String,
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// The DNS-SD instance (PTR target) that lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// Observed state of a SearchDomain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchDomainStatus {
    /// Clusters found in the last successful lookup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_clusters: Vec<FoundCluster>,
    /// Conditions; `Ready` carries the last lookup's result, time and error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
