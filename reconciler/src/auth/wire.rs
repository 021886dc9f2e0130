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
    /// The peering protocol spoken (`liqo_api::names::PROTOCOL_VERSION`); absent from a
    /// cluster of the cluster-scoped protocol (0.1).
    #[serde(rename = "protocolVersion", default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<u32>,
}

impl Ids {
    /// Whether the cluster answering keeps peers' requests in tenant namespaces (SPEC §9).
    pub fn tenant_namespaces(&self) -> bool {
        self.protocol_version.is_some_and(|v| v >= 2)
    }
}

/// `POST /identity` request body.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct IdentityRequest {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(default)]
    pub token: String,
    /// The caller's current token here, when it renews the identity it holds (SPEC §10): the
    /// proof that gets a cluster ID already bound a new identity.
    #[serde(rename = "currentToken", default, skip_serializing_if = "Option::is_none")]
    pub current_token: Option<String>,
}

/// `POST /identity` answer (201).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct IdentityResponse {
    /// kubeconfig (YAML) for ServiceAccount `remote-<clusterID>` on the issuing cluster.
    pub kubeconfig: String,
    /// Where the PeeringRequest and its Secret go on the issuing cluster: the requester's tenant
    /// namespace there (its Liqo namespace on a cluster of the cluster-scoped protocol).
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
