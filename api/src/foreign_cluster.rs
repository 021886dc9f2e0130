//! ForeignCluster (`discovery.liqo.io/v1alpha1`): one per known remote cluster.
//!
//! Every spec field is optional on the wire so that both of Liqo's forms are accepted as
//! written: the `authUrl` form (`spec: {join, authUrl}`) and the manual form with a top-level
//! `spec.clusterID`. The mutating webhook fills defaults and copies `spec.clusterID` into
//! `spec.clusterIdentity.clusterID`; readers use the accessors, which apply the same defaults.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Identity of a cluster: its ID and a human-friendly name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ClusterIdentity {
    /// Cluster ID: a lowercase DNS-1123 label (usually a UUID).
    #[serde(rename = "clusterID", default, skip_serializing_if = "String::is_empty")]
    pub cluster_id: String,
    /// Human-friendly name of the cluster.
    #[serde(rename = "clusterName", default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
}

/// How a ForeignCluster was found.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DiscoveryType {
    /// Found by mDNS on the local network.
    #[serde(rename = "LAN")]
    Lan,
    /// Found through a SearchDomain (DNS-SD).
    #[serde(rename = "WAN")]
    Wan,
    /// Created by hand.
    Manual,
    /// Created because the remote cluster peered with us.
    IncomingPeering,
}

impl DiscoveryType {
    /// The value as written in the API and in the discovery-type label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lan => "LAN",
            Self::Wan => "WAN",
            Self::Manual => "Manual",
            Self::IncomingPeering => "IncomingPeering",
        }
    }
}

/// Whether the remote cluster's CA is trusted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum TrustMode {
    #[default]
    Unknown,
    Trusted,
    Untrusted,
}

impl TrustMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "Unknown",
            Self::Trusted => "Trusted",
            Self::Untrusted => "Untrusted",
        }
    }
}

/// Outcome of asking the remote auth service for an identity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AuthStatus {
    Pending,
    Accepted,
    Refused,
    EmptyRefused,
}

/// A remote cluster this cluster knows about, and the state of the peering with it.
// kube's printcolumn(name = .., type_ = .., json_path = ..) repeats its keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "discovery.liqo.io",
    version = "v1alpha1",
    kind = "ForeignCluster",
    plural = "foreignclusters",
    shortname = "fc",
    category = "liqo",
    status = "ForeignClusterStatus",
    doc = "A remote Liqo cluster known to this cluster (found on the LAN, through DNS, by hand, or because it peered with us).",
    printcolumn(name = "Cluster-ID", type_ = "string", json_path = ".spec.clusterIdentity.clusterID"),
    printcolumn(name = "Join", type_ = "boolean", json_path = ".spec.join"),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.discoveryType"),
    printcolumn(name = "Outgoing", type_ = "boolean", json_path = ".status.outgoing.joined"),
    printcolumn(name = "Incoming", type_ = "boolean", json_path = ".status.incoming.joined"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Tenant-Namespace", type_ = "string", json_path = ".status.tenantNamespace.local", priority = 1),
    printcolumn(name = "Presented-Fingerprint", type_ = "string", json_path = ".status.outgoing.presentedFingerprint", priority = 1)
)]
#[serde(rename_all = "camelCase")]
pub struct ForeignClusterSpec {
    /// Identity of the remote cluster (filled from `/ids` when only `authUrl` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_identity: Option<ClusterIdentity>,
    /// Remote cluster ID in the short form of Liqo's manual ForeignCluster; copied into `clusterIdentity.clusterID`.
    #[serde(rename = "clusterID", default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Namespace where Liqo runs in the remote cluster (default `liqo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Whether this cluster should peer with the remote one (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<bool>,
    /// Public URL of the remote auth service, `https://host:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    /// URL of the remote API server; the host may be a DNS name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// How this cluster was found (default `Manual`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery_type: Option<DiscoveryType>,
    /// Peer even when the remote CA cannot be verified (default false).
    #[serde(rename = "allowUntrustedCA", default, skip_serializing_if = "Option::is_none")]
    pub allow_untrusted_ca: Option<bool>,
    /// Whether the remote CA is trusted (default `Unknown`; set it to trust or distrust explicitly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_mode: Option<TrustMode>,
    /// Pairing by fingerprint: the SHA-256 (hex, colons optional) of a certificate the remote's
    /// auth service presents, as its operator read it out. An untrusted remote that presents it
    /// is trusted; one that does not is refused. The way to peer with a self-signed cluster.
    #[serde(rename = "trustedCAFingerprint", default, skip_serializing_if = "Option::is_none")]
    pub trusted_ca_fingerprint: Option<String>,
}

impl ForeignClusterSpec {
    /// The remote cluster ID, from `clusterIdentity.clusterID` or else the short `clusterID`.
    pub fn remote_cluster_id(&self) -> Option<&str> {
        self.cluster_identity
            .as_ref()
            .map(|i| i.cluster_id.as_str())
            .filter(|id| !id.is_empty())
            .or(self.cluster_id.as_deref().filter(|id| !id.is_empty()))
    }

    pub fn join(&self) -> bool {
        self.join.unwrap_or(false)
    }

    pub fn discovery_type(&self) -> DiscoveryType {
        self.discovery_type.unwrap_or(DiscoveryType::Manual)
    }

    pub fn allow_untrusted_ca(&self) -> bool {
        self.allow_untrusted_ca.unwrap_or(false)
    }

    /// `trustedCAFingerprint`, normalised (lowercase hex, no colons), when it is one.
    pub fn approved_fingerprint(&self) -> Option<String> {
        self.trusted_ca_fingerprint.as_deref().and_then(normalize_fingerprint)
    }

    pub fn trust_mode(&self) -> TrustMode {
        self.trust_mode.unwrap_or_default()
    }

    pub fn remote_namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(crate::names::DEFAULT_NAMESPACE)
    }
}

/// Reference to the Secret holding the remote CA.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// State of the peering this cluster started towards the remote one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutgoingStatus {
    pub joined: bool,
    /// Name of our PeeringRequest in the remote cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_peering_request_name: Option<String>,
    /// Name of the Advertisement the remote cluster created here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertisement: Option<String>,
    /// SHA-256 fingerprint of the CA the remote presents while it awaits approval (or while it
    /// presents another than the approved one): the value its operator reads out, to compare
    /// and approve with `kubectl liqo trust`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presented_fingerprint: Option<String>,
    /// What we handed the remote with our PeeringRequest: the kubeconfig its broadcaster uses
    /// here. Written again on the remote when our API server's address or CA changes, and
    /// before its token expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handed_kubeconfig: Option<HandedKubeconfig>,
}

/// The kubeconfig we keep on a peer, as far as keeping it current needs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandedKubeconfig {
    /// Our API server's URL in it.
    pub api_url: String,
    /// SHA-256 of the CA in it.
    pub ca_fingerprint: String,
    /// When its token is renewed (80 % of its life); unknown for one handed by an earlier
    /// release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_after: Option<Time>,
}

/// State of the peering the remote cluster started towards this one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IncomingStatus {
    pub joined: bool,
    /// Name of the remote cluster's PeeringRequest here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peering_request: Option<String>,
}

/// Observed state of a ForeignCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForeignClusterStatus {
    /// Kubernetes-style conditions (type, status, reason, message, lastTransitionTime, observedGeneration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Seconds a discovered cluster stays without being seen again before it loses a strike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u32>,
    /// When discovery last saw this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<Time>,
    /// Secret holding the remote CA (`ca.crt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_data_ref: Option<SecretRef>,
    /// SHA-256 fingerprint of the pinned remote CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outgoing: Option<OutgoingStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incoming: Option<IncomingStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_status: Option<AuthStatus>,
    /// Where each side keeps what is of the other: the tenant namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_namespace: Option<TenantNamespaces>,
}

/// The tenant namespaces of a peering.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantNamespaces {
    /// Ours for the remote cluster (`liqo-tenant-<its ID>`): its requests, its kubeconfig
    /// Secret, its Advertisement and the identities we issued it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// The remote cluster's for us, as its identity says: where our PeeringRequest and
    /// kubeconfig Secret are (its Liqo namespace when we peer anonymously).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

/// A SHA-256 fingerprint as 64 lowercase hex digits (pure): accepts upper case, colons and
/// spaces between digits (`AB:CD:…`, as `openssl x509 -fingerprint -sha256` prints it); `None`
/// for anything else.
pub fn normalize_fingerprint(text: &str) -> Option<String> {
    let text = text.trim();
    let text = text.strip_prefix("sha256:").or_else(|| text.strip_prefix("SHA256:")).unwrap_or(text);
    let hex: String = text.chars().filter(|c| *c != ':' && *c != ' ').collect::<String>().to_ascii_lowercase();
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

#[cfg(test)]
mod fingerprint_tests {
    use super::normalize_fingerprint;

    #[test]
    fn fingerprints_are_read_as_openssl_and_people_write_them() {
        let hex = "ab".repeat(32);
        let colons = vec!["AB"; 32].join(":");
        assert_eq!(normalize_fingerprint(&hex).as_deref(), Some(&*hex));
        assert_eq!(normalize_fingerprint(&colons).as_deref(), Some(&*hex));
        assert_eq!(normalize_fingerprint(&format!("sha256:{hex}")).as_deref(), Some(&*hex));
        for bad in ["", "ab", &"ab".repeat(31), &"zz".repeat(32), &"ab".repeat(33)] {
            assert_eq!(normalize_fingerprint(bad), None, "{bad}");
        }
    }
}
