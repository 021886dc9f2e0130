//! ClusterConfig (`config.liqo.io/v1alpha1`), singleton `liqo-configuration`: the runtime
//! toggles of discovery, the peering policy and the auth settings. The defaults reproduce the
//! Liqo's out-of-the-box behaviour (LAN peers peer as soon as they are found).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Cluster-wide Liqo settings; only the object named `liqo-configuration` is used.
// kube's printcolumn(name = .., type_ = .., json_path = ..) repeats its keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "config.liqo.io",
    version = "v1alpha1",
    kind = "ClusterConfig",
    plural = "clusterconfigs",
    category = "liqo",
    status = "ClusterConfigStatus",
    doc = "Cluster-wide Liqo settings (singleton named liqo-configuration).",
    printcolumn(name = "Discovery", type_ = "boolean", json_path = ".spec.discoveryConfig.enableDiscovery"),
    printcolumn(name = "Advertisement", type_ = "boolean", json_path = ".spec.discoveryConfig.enableAdvertisement"),
    printcolumn(name = "Policy", type_ = "string", json_path = ".spec.peeringPolicy"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConfigSpec {
    #[serde(default)]
    pub discovery_config: DiscoveryConfig,
    /// Which incoming PeeringRequests the admission webhook accepts.
    #[serde(default)]
    pub peering_policy: PeeringPolicy,
    /// Cluster IDs always accepted (unless denied), whatever the policy but `RejectAll`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peering_allow_list: Vec<String>,
    /// Cluster IDs always rejected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peering_deny_list: Vec<String>,
    #[serde(default)]
    pub auth_config: AuthConfig,
}

fn yes() -> bool {
    true
}
fn default_service() -> String {
    "_liqo._tcp".to_owned()
}
fn default_domain() -> String {
    "local.".to_owned()
}
fn default_ttl() -> u32 {
    90
}

/// Discovery toggles; every change applies at runtime.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryConfig {
    /// Name this cluster advertises (default: its cluster ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// Browse the LAN with mDNS.
    #[serde(default = "yes")]
    pub enable_discovery: bool,
    /// Advertise this cluster on the LAN with mDNS.
    #[serde(default = "yes")]
    pub enable_advertisement: bool,
    /// Join discovered clusters whose CA is trusted.
    #[serde(default = "yes")]
    pub autojoin: bool,
    /// Join discovered clusters whose CA is not trusted.
    #[serde(default = "yes")]
    pub autojoin_untrusted: bool,
    /// DNS-SD service type.
    #[serde(default = "default_service")]
    pub service: String,
    /// mDNS domain.
    #[serde(default = "default_domain")]
    pub domain: String,
    /// Seconds a LAN cluster may go unseen before it loses a strike (checked every ttl/3).
    #[serde(default = "default_ttl")]
    #[schemars(range(min = 30))]
    pub ttl: u32,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        Self {
            cluster_name: None,
            enable_discovery: true,
            enable_advertisement: true,
            autojoin: true,
            autojoin_untrusted: true,
            service: default_service(),
            domain: default_domain(),
            ttl: default_ttl(),
        }
    }
}

/// Which incoming PeeringRequests are accepted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PeeringPolicy {
    /// Any well-formed request from a matching identity.
    #[default]
    AcceptAll,
    /// Only clusters that already have a ForeignCluster here (or are in the allow list).
    AcceptKnown,
    /// No request at all.
    RejectAll,
}

impl PeeringPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AcceptAll => "AcceptAll",
            Self::AcceptKnown => "AcceptKnown",
            Self::RejectAll => "RejectAll",
        }
    }
}

/// Auth service settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthConfig {
    /// Issue identities to callers that present an empty token.
    #[serde(default = "yes")]
    pub allow_empty_token: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self { allow_empty_token: true }
    }
}

/// Observed state of the ClusterConfig, and what the reconciler tells peers about this
/// cluster (published by the reconciler that holds the Lease).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConfigStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The auth service URL written into our PeeringRequests and advertised on the LAN (unset:
    /// each interface's address is advertised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    /// The API server URL handed to peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// Where `authUrl` came from (ConfigMap liqo-reconciler-env, an Ingress, the NodePort on a
    /// node's address...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_url_from: Option<String>,
    /// Where `apiUrl` came from (ConfigMap liqo-reconciler-env, kube-public/cluster-info, the
    /// `kubernetes` Service's endpoint...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url_from: Option<String>,
    /// SHA-256 (lowercase hex) of the CA the auth service's certificate chains to (of that
    /// certificate when it is served alone): what a peer's operator approves when pairing by
    /// fingerprint (`kubectl liqo trust`).
    #[serde(default, rename = "authCAFingerprint", skip_serializing_if = "Option::is_none")]
    pub auth_ca_fingerprint: Option<String>,
    /// The latest PeeringRequests refused by `peeringPolicy` (written by the webhook): who
    /// asked, when and how often, the most recent first, at most [`MAX_REFUSED_REQUESTS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_requests: Vec<RefusedRequest>,
}

impl ClusterConfigStatus {
    /// Condition `AddressesReachable` when it is not `True`: why peers may not reach the URLs
    /// this cluster tells them, and the value to set.
    pub fn addresses_warning(&self) -> Option<&Condition> {
        let t = crate::reasons::ConditionType::AddressesReachable.as_str();
        self.conditions.iter().find(|c| c.type_ == t && c.status != "True")
    }
}

/// Most refused requesters the ClusterConfig's status keeps (a stranger cannot fill it).
pub const MAX_REFUSED_REQUESTS: usize = 20;

/// A cluster whose PeeringRequests our `peeringPolicy` refused.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefusedRequest {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// The webhook's words.
    pub message: String,
    pub first_time: Time,
    pub last_time: Time,
    /// Requests refused since `firstTime`.
    pub count: u64,
}

/// `current` with `new` refusals folded in (pure): one entry per cluster ID (counts added,
/// the first time kept, the last time and message the newest), the most recent first, at most
/// `max`.
pub fn merge_refusals(current: &[RefusedRequest], new: &[RefusedRequest], max: usize) -> Vec<RefusedRequest> {
    let mut out: Vec<RefusedRequest> = current.to_vec();
    for n in new {
        match out.iter_mut().find(|o| o.cluster_id == n.cluster_id) {
            Some(o) => {
                o.count += n.count;
                if n.first_time.0 < o.first_time.0 {
                    o.first_time = n.first_time.clone();
                }
                if n.last_time.0 >= o.last_time.0 {
                    o.last_time = n.last_time.clone();
                    o.message = n.message.clone();
                    o.cluster_name = n.cluster_name.clone().or(o.cluster_name.take());
                }
            }
            None => out.push(n.clone()),
        }
    }
    out.sort_by(|a, b| b.last_time.0.cmp(&a.last_time.0).then_with(|| a.cluster_id.cmp(&b.cluster_id)));
    out.truncate(max);
    out
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    fn at(s: i64, id: &str, count: u64) -> RefusedRequest {
        let t = Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        RefusedRequest { cluster_id: id.into(), cluster_name: None, message: format!("m{s}"), first_time: t.clone(), last_time: t, count }
    }

    #[test]
    fn refusals_fold_by_cluster_newest_first_and_bounded() {
        let merged = merge_refusals(&[at(10, "a", 3), at(20, "b", 1)], &[at(30, "a", 2)], 20);
        assert_eq!(merged.iter().map(|r| (r.cluster_id.as_str(), r.count)).collect::<Vec<_>>(), [("a", 5), ("b", 1)]);
        assert_eq!((merged[0].first_time.0.as_second(), merged[0].last_time.0.as_second()), (10, 30));
        assert_eq!(merged[0].message, "m30");
        let many: Vec<RefusedRequest> = (0..50).map(|i| at(i, &format!("c{i}"), 1)).collect();
        let kept = merge_refusals(&[], &many, MAX_REFUSED_REQUESTS);
        assert_eq!(kept.len(), MAX_REFUSED_REQUESTS);
        assert_eq!(kept[0].cluster_id, "c49", "the most recent kept");
    }
}
