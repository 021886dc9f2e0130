//! What the auth service and its clients exchange (exact key names of the seeds).

use serde::{Deserialize, Serialize};

/// `GET /ids`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Ids {
    #[serde(rename = "clusterId")]
    pub cluster_id: String,
    #[serde(rename = "clusterName")]
    pub cluster_name: String,
    #[serde(rename = "guestNamespace")]
    pub guest_namespace: String,
}

/// `POST /identity` request body.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct IdentityRequest {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(default)]
    pub token: String,
}

/// `POST /identity` answer (201).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct IdentityResponse {
    /// kubeconfig (YAML) for ServiceAccount `remote-<clusterID>` on the issuing cluster.
    pub kubeconfig: String,
    /// The issuing cluster's Liqo namespace (where the PeeringRequest's Secret goes).
    pub namespace: String,
    /// The issuing cluster's ID.
    #[serde(rename = "clusterId")]
    pub cluster_id: String,
}

/// Error bodies: `{"message": ...}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ErrorBody {
    pub message: String,
}
