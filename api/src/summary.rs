//! What a ForeignCluster says about a peering, summed up for people (pure): its phases in
//! order, which one stops it and what to do — the reasons and hints of `liqo_api::reasons`,
//! the same docs/troubleshooting.md's table shows.
//! Also when an Event about one last happened ([`event_last_seen`]).

use crate::ForeignCluster;
use crate::reasons::{ConditionType, Reason};
use serde::Serialize;

/// One peering phase of a ForeignCluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    /// What to do about it (empty when nothing needs doing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl Phase {
    /// Done, or not in the way: True, or a False that peering goes on with.
    pub fn passed(&self) -> bool {
        self.status == "True" || matches!(Reason::parse(&self.reason), Some(Reason::UntrustedAllowed | Reason::Anonymous))
    }

    /// False for a reason that only the user can change (waiting will not help).
    pub fn needs_user(&self) -> bool {
        self.status == "False"
            && matches!(
                Reason::parse(&self.reason),
                Some(
                    Reason::AwaitingApproval
                        | Reason::FingerprintMismatch
                        | Reason::ClusterIdTaken
                        | Reason::TokenRefused
                        | Reason::EmptyTokenRefused
                        | Reason::SelfPeering
                        | Reason::NoAuthUrl
                        | Reason::InvalidSpec
                        | Reason::TlsError
                )
            )
    }
}

/// A peer as `kubectl liqo status` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Peer {
    pub name: String,
    pub cluster_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    #[serde(rename = "type")]
    pub discovery_type: String,
    pub join: bool,
    pub outgoing: bool,
    pub incoming: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_fingerprint: Option<String>,
    /// The fingerprint the remote presents while it awaits approval (not yet trusted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presented_fingerprint: Option<String>,
    /// Our PeeringRequest on the remote, when the status says it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_peering_request: Option<String>,
    /// The peer's Advertisement here, when the status says it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertisement: Option<String>,
    /// Where this cluster keeps what is of the peer: its tenant namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_namespace: Option<String>,
    /// Where the peer keeps what is of this cluster: our request's namespace there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_tenant_namespace: Option<String>,
    pub phases: Vec<Phase>,
}

impl Peer {
    pub fn of(fc: &ForeignCluster) -> Self {
        // Borrowed, not cloned whole: a scrape of the metrics reads every peer this way.
        let status = fc.status.as_ref();
        let outgoing = status.and_then(|s| s.outgoing.as_ref());
        let conditions = status.map_or(&[][..], |s| &s.conditions[..]);
        let name = fc.metadata.name.clone().unwrap_or_default();
        let cluster_id = fc.spec.remote_cluster_id().unwrap_or_default().to_owned();
        let phases = ConditionType::PEERING
            .iter()
            .filter_map(|t| conditions.iter().find(|c| c.type_ == t.as_str()).map(|c| (t, c)))
            .map(|(t, c)| Phase {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                // The hints name this peer's objects where the table says `<remote ID>` or `<fc>`.
                hint: Reason::parse(&c.reason)
                    .map(|r| r.entry_for(*t).hint)
                    .filter(|h| !h.is_empty())
                    .map_or_else(String::new, |h| h.replace("<remote ID>", &cluster_id).replace("<fc>", &name)),
                last_transition_time: Some(c.last_transition_time.0.to_string()),
            })
            .collect::<Vec<Phase>>();
        let tenant = status.and_then(|s| s.tenant_namespace.as_ref());
        Self {
            cluster_name: fc.spec.cluster_identity.as_ref().and_then(|i| i.cluster_name.clone()),
            discovery_type: fc.spec.discovery_type().as_str().to_owned(),
            join: fc.spec.join(),
            outgoing: outgoing.is_some_and(|o| o.joined),
            incoming: status.and_then(|s| s.incoming.as_ref()).is_some_and(|i| i.joined),
            auth_url: fc.spec.auth_url.clone().filter(|u| !u.is_empty()),
            api_url: fc.spec.api_url.clone().filter(|u| !u.is_empty()),
            ca_fingerprint: status.and_then(|s| s.ca_fingerprint.clone()),
            presented_fingerprint: outgoing.and_then(|o| o.presented_fingerprint.clone()),
            remote_peering_request: outgoing.and_then(|o| o.remote_peering_request_name.clone()),
            advertisement: outgoing.and_then(|o| o.advertisement.clone()),
            tenant_namespace: tenant.and_then(|t| t.local.clone()),
            remote_tenant_namespace: tenant.and_then(|t| t.remote.clone()),
            phases,
            name,
            cluster_id,
        }
    }

    /// The CA fingerprint to show: the pinned one, else the one presented (marked so).
    pub fn fingerprint_shown(&self) -> Option<String> {
        match (&self.ca_fingerprint, &self.presented_fingerprint) {
            (_, Some(presented)) => Some(format!("{presented} (presented, not approved)")),
            (Some(pinned), None) => Some(pinned.clone()),
            (None, None) => None,
        }
    }

    /// The phase named `type_`, if the reconciler wrote it yet.
    pub fn phase(&self, type_: ConditionType) -> Option<&Phase> {
        self.phases.iter().find(|p| p.type_ == type_.as_str())
    }

    /// Joined: the peer accepted us and advertises to us.
    pub fn joined(&self) -> bool {
        self.outgoing && self.phase(ConditionType::Joined).is_some_and(|p| p.status == "True")
    }

    /// The first phase that holds the peering up (False and in the way), if any.
    pub fn failing(&self) -> Option<&Phase> {
        self.phases.iter().find(|p| p.status == "False" && !p.passed())
    }

    /// Fine as far as a script is concerned: not asked to join, or joined.
    pub fn healthy(&self) -> bool {
        !self.join || self.joined()
    }

    /// One word (or two) for a table: `Joined`, `Incoming`, `-` (not joining), the failing
    /// phase and its reason, or the phase in progress.
    pub fn state(&self) -> String {
        if self.joined() {
            return "Joined".into();
        }
        if !self.join {
            return if self.incoming { "Incoming".into() } else { "-".into() };
        }
        if let Some(p) = self.failing() {
            return format!("{}: {}", p.type_, p.reason);
        }
        match self.phases.iter().find(|p| !p.passed()) {
            Some(p) => format!("{}: {}", p.type_, p.reason),
            None if self.phases.is_empty() => "Pending".into(),
            None => "Joining".into(),
        }
    }

    /// The state as summaries count it and selections name it: [`Peer::state`], with
    /// `NotJoining` for a peer neither joining nor joined.
    pub fn state_key(&self) -> String {
        match self.state() {
            s if s == "-" => "NotJoining".into(),
            s => s,
        }
    }

    /// Whether the peer is in state `want`: its [`Peer::state_key`], or the phase or the reason
    /// of it alone, any case (`Joined`, `RemoteReachable`, `TokenRefused`).
    pub fn in_state(&self, want: &str) -> bool {
        let key = self.state_key();
        let same = |a: &str| a.trim().eq_ignore_ascii_case(want.trim());
        same(&key) || key.split(':').any(same)
    }
}

/// When an Event last happened: its series' last observation, else its `eventTime`.
pub fn event_last_seen(e: &k8s_openapi::api::events::v1::Event) -> Option<k8s_openapi::jiff::Timestamp> {
    e.series.as_ref().map(|s| s.last_observed_time.0).or(e.event_time.as_ref().map(|t| t.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(join: bool, conditions: &[(&str, &str, &str)], outgoing: bool) -> ForeignCluster {
        let conditions: Vec<serde_json::Value> = conditions
            .iter()
            .map(|(t, s, r)| {
                serde_json::json!({"type": t, "status": s, "reason": r, "message": format!("{t} says {r}"),
                                   "lastTransitionTime": "2026-11-23T10:00:00Z"})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "peer-a"},
            "spec": {"clusterIdentity": {"clusterID": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9", "clusterName": "a"}, "join": join,
                     "discoveryType": "LAN", "authUrl": "https://10.0.0.2:8443"},
            "status": {"conditions": conditions, "outgoing": {"joined": outgoing}}
        }))
        .unwrap()
    }

    #[test]
    fn the_fingerprint_shown_is_the_pinned_one_or_the_one_awaiting_approval() {
        let mut p = Peer::of(&fc(true, &[], false));
        assert_eq!(p.fingerprint_shown(), None);
        p.ca_fingerprint = Some("aa".into());
        assert_eq!(p.fingerprint_shown().as_deref(), Some("aa"));
        p.presented_fingerprint = Some("bb".into());
        assert_eq!(p.fingerprint_shown().as_deref(), Some("bb (presented, not approved)"), "a mismatch shows what is presented");
    }

    #[test]
    fn a_joined_peer_is_healthy_and_says_joined() {
        let p = Peer::of(&fc(
            true,
            &[("Trusted", "False", "UntrustedAllowed"), ("Authenticated", "True", "IdentityIssued"), ("Joined", "True", "Joined")],
            true,
        ));
        assert!(p.joined() && p.healthy());
        assert_eq!(p.state(), "Joined");
        assert_eq!(p.failing(), None, "an allowed untrusted CA is not in the way");
    }

    #[test]
    fn the_failing_phase_carries_its_hint() {
        let p = Peer::of(&fc(true, &[("Trusted", "True", "Trusted"), ("Authenticated", "False", "TokenRefused")], false));
        assert!(!p.healthy());
        assert_eq!(p.state(), "Authenticated: TokenRefused");
        let failing = p.failing().unwrap();
        assert!(failing.hint.contains("remote-token-"), "{}", failing.hint);
        assert!(failing.needs_user());
        // Waiting on the remote is not the user's to fix.
        let p = Peer::of(&fc(true, &[("RemoteReachable", "False", "RemoteUnreachable")], false));
        assert!(!p.failing().unwrap().needs_user());
    }

    #[test]
    fn a_peer_not_joining_is_healthy_and_in_progress_is_named() {
        let p = Peer::of(&fc(false, &[("Joined", "False", "Unjoined")], false));
        assert!(p.healthy());
        assert_eq!(p.state(), "-");
        let p = Peer::of(&fc(true, &[("Trusted", "True", "Trusted"), ("Joined", "Unknown", "Waiting")], false));
        assert_eq!(p.state(), "Joined: Waiting");
        let p = Peer::of(&fc(true, &[], false));
        assert_eq!(p.state(), "Pending");
        assert_eq!(p.discovery_type, "LAN");
    }

    #[test]
    fn an_event_was_last_seen_at_its_series_last_observation_else_its_event_time() {
        let mut e: k8s_openapi::api::events::v1::Event = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "fc.1"},
            "eventTime": "2026-11-26T00:00:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2026-11-26T00:01:00.000000Z"}
        }))
        .unwrap();
        assert_eq!(event_last_seen(&e), Some("2026-11-26T00:01:00Z".parse().unwrap()));
        e.series = None;
        assert_eq!(event_last_seen(&e), Some("2026-11-26T00:00:00Z".parse().unwrap()));
        e.event_time = None;
        assert_eq!(event_last_seen(&e), None);
    }
}
