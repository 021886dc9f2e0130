//! The status one reconcile finds, computed whole: every peering phase gets a condition
//! (`Unknown` where a phase did not run), then it is written by server-side apply — only when it
//! differs from the stored one — and every real change of a phase becomes one Event.
//!
//! This controller owns `conditions`, `caDataRef`, `caFingerprint`, `outgoing` and
//! `authStatus`; `incoming` belongs to the incoming controller. A field left out of the applied
//! status is removed from the stored object.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use liqo_api::reasons::{ConditionType, Reason, Status};
use liqo_api::{AuthStatus, ForeignCluster, ForeignClusterStatus, OutgoingStatus, SecretRef, TenantNamespaces};

use crate::machinery::error::Result;
use crate::reporting::conditions::{self, Wanted};

/// Field manager of the status this controller writes.
pub const STATUS_MANAGER: &str = "liqo-peering";

/// What one reconcile found out, phase by phase.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    phases: Vec<Wanted>,
    pub ca_data_ref: Option<SecretRef>,
    pub ca_fingerprint: Option<String>,
    pub auth_status: Option<AuthStatus>,
    pub outgoing: Option<OutgoingStatus>,
    pub tenant_namespace: Option<TenantNamespaces>,
    /// What we handed the remote (`status.outgoing.handedKubeconfig`), for the status a joined
    /// round writes.
    pub handed: Option<liqo_api::HandedKubeconfig>,
    /// The round reached a verdict that the next one, before its requeue, could only find
    /// again: the peer answered its check, or did not. Its status write's echo starts no
    /// reconcile (`crate::machinery::own_writes`).
    settled: bool,
}

impl Report {
    /// The start of a join: what the stored status knows (pinned CA, identity, outgoing) stands
    /// until a phase finds otherwise; no phase has a condition yet.
    pub fn joining(previous: Option<&ForeignClusterStatus>) -> Self {
        // What it keeps, taken field by field (not a copy of the whole status, conditions and all).
        let outgoing = previous.and_then(|p| p.outgoing.clone());
        Self {
            phases: vec![],
            ca_data_ref: previous.and_then(|p| p.ca_data_ref.clone()),
            ca_fingerprint: previous.and_then(|p| p.ca_fingerprint.clone()),
            auth_status: previous.and_then(|p| p.auth_status),
            handed: outgoing.as_ref().and_then(|o| o.handed_kubeconfig.clone()),
            outgoing,
            tenant_namespace: previous.and_then(|p| p.tenant_namespace.clone()),
            settled: false,
        }
    }

    /// Marks the round settled: see [`Report::settled`].
    pub fn settle(&mut self) {
        self.settled = true;
    }

    /// Whether the round reached a verdict the next one could only find again before its
    /// requeue (then the echo of its status write is not reconciled again).
    pub fn settled(&self) -> bool {
        self.settled
    }

    /// Records the fingerprint the remote presents while it is not trusted (`None`: trusted, or
    /// not probed), kept in `status.outgoing.presentedFingerprint`.
    pub fn presented_fingerprint(&mut self, fingerprint: Option<String>) {
        match (&mut self.outgoing, fingerprint) {
            (Some(o), f) => o.presented_fingerprint = f,
            (None, Some(f)) => self.outgoing = Some(OutgoingStatus { presented_fingerprint: Some(f), ..Default::default() }),
            (None, None) => {}
        }
    }

    /// Records the outcome of phase `type_` (the last word wins).
    pub fn set(&mut self, type_: ConditionType, status: Status, reason: Reason, message: impl Into<String>) {
        self.phases.retain(|w| w.type_ != type_);
        self.phases.push(Wanted::new(type_, status, reason, message));
    }

    /// The condition recorded for `type_`, if any.
    pub fn phase(&self, type_: ConditionType) -> Option<&Wanted> {
        self.phases.iter().find(|w| w.type_ == type_)
    }

    /// The first recorded phase that stops the join: False, and not one peering goes on with
    /// (an untrusted CA allowed by the spec, the anonymous way).
    pub fn failing(&self) -> Option<&Wanted> {
        self.phases.iter().find(|w| w.status == Status::False && !matches!(w.reason, Reason::UntrustedAllowed | Reason::Anonymous))
    }

    /// Every peering phase: the recorded one, else `Unknown` with what it waits for.
    fn wanted(&self, join: bool) -> Vec<Wanted> {
        let blocker = self.phases.iter().find(|w| w.status != Status::True);
        ConditionType::PEERING
            .into_iter()
            .map(|t| match self.phase(t) {
                Some(w) => w.clone(),
                None if !join => Wanted::new(t, Status::Unknown, Reason::NotJoined, "spec.join is false: not checked"),
                None => {
                    let message = match blocker {
                        Some(b) => format!("not checked: {} is {} ({})", b.type_, b.status.as_str(), b.reason),
                        None => "not checked yet".to_owned(),
                    };
                    Wanted::new(t, Status::Unknown, Reason::Waiting, message)
                }
            })
            .collect()
    }

    /// The status this controller owns, conditions keeping their `lastTransitionTime` from
    /// `previous` unless their status flips.
    pub fn status(&self, previous: Option<&ForeignClusterStatus>, join: bool, generation: Option<i64>, now: &Time) -> ForeignClusterStatus {
        let before = previous.map(|p| p.conditions.as_slice()).unwrap_or_default();
        ForeignClusterStatus {
            conditions: conditions::set_all(before, self.wanted(join), generation, now),
            ca_data_ref: self.ca_data_ref.clone(),
            ca_fingerprint: self.ca_fingerprint.clone(),
            outgoing: self.outgoing.clone(),
            auth_status: self.auth_status,
            tenant_namespace: self.tenant_namespace.clone(),
            ..Default::default()
        }
    }
}

/// A change of phase worth an Event: whether it is a warning, its reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub warning: bool,
    pub reason: Reason,
    pub message: String,
}

/// Reasons that are steps of normal progress, not worth a warning.
fn expected(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::Anonymous
            | Reason::UntrustedAllowed
            | Reason::WaitingForAdvertisement
            | Reason::Unjoined
            | Reason::NotJoined
            | Reason::Waiting
            | Reason::UnjoinPending
    )
}

/// The Events the move from `before` to `after` deserves (pure): one Warning per phase that
/// became False for a new reason that is not normal progress, one Normal `Joined` when the
/// peering is established.
pub fn changes(before: &[Condition], after: &[Condition]) -> Vec<Change> {
    after
        .iter()
        .filter(|c| conditions::get(before, &c.type_).is_none_or(|b| b.status != c.status || b.reason != c.reason))
        .filter_map(|c| {
            let reason = Reason::parse(&c.reason)?;
            let message = c.message.clone();
            match c.status.as_str() {
                "False" if !expected(reason) => Some(Change { warning: true, reason, message }),
                "True" if reason == Reason::Joined => Some(Change { warning: false, reason, message }),
                _ => None,
            }
        })
        .collect()
}

/// Whether `status` differs from the part of `fc`'s this controller owns (pure): only then is
/// it written.
pub fn differs(fc: &ForeignCluster, status: &ForeignClusterStatus) -> bool {
    // Field by field, not a copy of the status compared (each round of every peer asks).
    let empty = ForeignClusterStatus::default();
    let now = fc.status.as_ref().unwrap_or(&empty);
    let ForeignClusterStatus { conditions, ttl, last_seen, ca_data_ref, ca_fingerprint, outgoing, incoming, auth_status, tenant_namespace } =
        status;
    *conditions != now.conditions
        || *ttl != now.ttl
        || *last_seen != now.last_seen
        || *ca_data_ref != now.ca_data_ref
        || *ca_fingerprint != now.ca_fingerprint
        || *outgoing != now.outgoing
        || incoming.is_some()
        || *auth_status != now.auth_status
        || *tenant_namespace != now.tenant_namespace
}

/// Writes `status` whole (server-side apply, forced: this controller owns these fields);
/// returns the object as written. The API server is not asked to look for unknown or duplicate
/// fields (`fieldValidation=Ignore`): the status is made from our own types, and what it would
/// find it drops all the same; it costs the API server 0.86× a write (the `status_write` bench).
pub async fn write(client: &Client, fc: &ForeignCluster, status: &ForeignClusterStatus) -> Result<ForeignCluster> {
    let body = serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1",
        "kind": "ForeignCluster",
        "status": status,
    });
    let params = PatchParams::apply(STATUS_MANAGER).force().validation_ignore();
    Ok(Api::<ForeignCluster>::all(client.clone()).patch_status(&fc.name_any(), &params, &Patch::Apply(body)).await?)
}

/// Whether `written`, the object our status write returned, differs from `read`, the one its
/// reconcile acted on, in nothing but this controller's status: no one changed its spec, its
/// metadata or another's status in between, so the write's watch event tells nothing the
/// reconcile did not know (pure).
pub fn only_ours_changed(read: &ForeignCluster, written: &ForeignCluster) -> bool {
    let meta = |fc: &ForeignCluster| ObjectMeta { resource_version: None, managed_fields: None, ..fc.metadata.clone() };
    let others = |fc: &ForeignCluster| fc.status.as_ref().and_then(|s| s.incoming.clone());
    read.spec == written.spec && meta(read) == meta(written) && others(read) == others(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part of a stored status this controller owns: what [`differs`] compares with, field
    /// by field.
    fn owned(status: Option<&ForeignClusterStatus>) -> ForeignClusterStatus {
        let mut s = status.cloned().unwrap_or_default();
        s.incoming = None;
        s
    }

    fn t(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn phases_not_reached_are_unknown_and_say_what_stopped_them() {
        let mut r = Report::default();
        r.set(ConditionType::Trusted, Status::True, Reason::Trusted, "ok");
        r.set(ConditionType::RemoteReachable, Status::False, Reason::RemoteUnreachable, "down");
        let s = r.status(None, true, Some(3), &t(5));
        let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Trusted", "Authenticated", "RemoteReachable", "CaVerified", "Joined"]);
        let joined = conditions::get(&s.conditions, "Joined").unwrap();
        assert_eq!((joined.status.as_str(), joined.reason.as_str()), ("Unknown", "Waiting"));
        assert!(joined.message.contains("RemoteReachable is False"), "{}", joined.message);
        assert!(s.conditions.iter().all(|c| c.observed_generation == Some(3)));
        // With join false, what was not set says so.
        let s = Report::default().status(None, false, Some(3), &t(5));
        assert!(s.conditions.iter().all(|c| c.reason == "NotJoined" && c.status == "Unknown"));
    }

    #[test]
    fn the_failing_phase_is_the_first_false_one_in_the_way() {
        let mut r = Report::default();
        assert!(r.failing().is_none());
        r.set(ConditionType::Trusted, Status::False, Reason::UntrustedAllowed, "allowed by the spec");
        r.set(ConditionType::Authenticated, Status::True, Reason::IdentityIssued, "ok");
        assert!(r.failing().is_none(), "an allowed untrusted CA is not a failure");
        r.set(ConditionType::RemoteReachable, Status::False, Reason::RemoteUnreachable, "down");
        r.set(ConditionType::Joined, Status::False, Reason::PeerRefused, "refused");
        let failed = r.failing().unwrap();
        assert_eq!((failed.type_, failed.reason), (ConditionType::RemoteReachable, Reason::RemoteUnreachable));
    }

    #[test]
    fn a_joining_report_carries_what_the_status_knew() {
        let previous = ForeignClusterStatus {
            ca_fingerprint: Some("fp".into()),
            outgoing: Some(OutgoingStatus { joined: true, ..Default::default() }),
            incoming: Some(liqo_api::IncomingStatus { joined: true, peering_request: None }),
            ..Default::default()
        };
        let r = Report::joining(Some(&previous));
        let s = r.status(Some(&previous), true, None, &t(1));
        assert_eq!(s.ca_fingerprint.as_deref(), Some("fp"));
        assert!(s.outgoing.unwrap().joined);
        assert_eq!(s.incoming, None, "incoming belongs to another controller");
        assert_eq!(owned(Some(&previous)).incoming, None);
        // Whether a write is due is what comparing with the owned part says, field by field.
        let mut fc = ForeignCluster::new("peer", Default::default());
        fc.status = Some(previous.clone());
        let same = owned(Some(&previous));
        assert!(!differs(&fc, &same), "the same but for another controller's incoming");
        assert_eq!(differs(&fc, &same), owned(fc.status.as_ref()) != same);
        let changed = [
            ForeignClusterStatus { ttl: Some(3), ..same.clone() },
            ForeignClusterStatus { ca_fingerprint: None, ..same.clone() },
            ForeignClusterStatus { outgoing: None, ..same.clone() },
            ForeignClusterStatus { incoming: previous.incoming.clone(), ..same.clone() },
            ForeignClusterStatus { auth_status: Some(AuthStatus::Accepted), ..same.clone() },
            ForeignClusterStatus { tenant_namespace: Some(Default::default()), ..same.clone() },
            ForeignClusterStatus { last_seen: Some(t(9)), ..same.clone() },
            ForeignClusterStatus {
                conditions: vec![Condition {
                    type_: "Joined".into(),
                    status: "True".into(),
                    reason: "Joined".into(),
                    message: String::new(),
                    last_transition_time: t(1),
                    observed_generation: None,
                }],
                ..same.clone()
            },
        ];
        for status in &changed {
            assert!(differs(&fc, status), "{status:?}");
            assert_eq!(differs(&fc, status), owned(fc.status.as_ref()) != *status);
        }
        fc.status = None;
        assert!(!differs(&fc, &ForeignClusterStatus::default()), "nothing written, nothing to write");
    }

    #[test]
    fn one_event_per_real_change() {
        let c = |t: &str, s: &str, r: &str| Condition {
            type_: t.into(),
            status: s.into(),
            reason: r.into(),
            message: "m".into(),
            observed_generation: None,
            last_transition_time: t0(),
        };
        fn t0() -> Time {
            Time(k8s_openapi::jiff::Timestamp::from_second(0).unwrap())
        }
        let joined = [c("Joined", "True", "Joined")];
        let deleted = [c("Joined", "False", "AdvertisementDeleted")];
        assert_eq!(changes(&[], &joined), [Change { warning: false, reason: Reason::Joined, message: "m".into() }]);
        assert_eq!(changes(&joined, &deleted), [Change { warning: true, reason: Reason::AdvertisementDeleted, message: "m".into() }]);
        // Nothing changed: nothing to say.
        assert!(changes(&deleted, &deleted).is_empty());
        // Normal progress is not a warning.
        assert!(changes(&[], &[c("Joined", "False", "WaitingForAdvertisement"), c("Trusted", "Unknown", "Waiting")]).is_empty());
    }

    #[test]
    fn a_write_is_only_ours_when_no_one_changed_spec_metadata_or_incoming_between() {
        let mut read = ForeignCluster::new("peer", Default::default());
        read.metadata.resource_version = Some("5".into());
        read.metadata.finalizers = Some(vec!["f".into()]);
        let mut written = read.clone();
        written.metadata.resource_version = Some("9".into());
        written.metadata.managed_fields = Some(vec![Default::default()]);
        written.status = Some(ForeignClusterStatus { ca_fingerprint: Some("ab".into()), ..Default::default() });
        assert!(only_ours_changed(&read, &written), "our status, a new version, other managed fields");

        let mut spec = written.clone();
        spec.spec.join = Some(false);
        assert!(!only_ours_changed(&read, &spec), "someone set spec.join meanwhile");
        let mut deleting = written.clone();
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(!only_ours_changed(&read, &deleting), "deleted meanwhile");
        let mut labelled = written.clone();
        labelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        assert!(!only_ours_changed(&read, &labelled));
        let mut incoming = written.clone();
        incoming.status.as_mut().unwrap().incoming = Some(Default::default());
        assert!(!only_ours_changed(&read, &incoming), "the incoming controller wrote meanwhile");
    }
}
