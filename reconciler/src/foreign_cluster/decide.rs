//! The pure decisions of the ForeignCluster lifecycle: trust, what to ask the remote, what the
//! PeeringRequest we keep there looks like, when unjoin gives up on the remote, and the status.

use std::time::Duration;

use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::ObjectMeta;
use liqo_api::names::{LABEL_CLUSTER_ID, peering_kubeconfig_secret};
use liqo_api::reasons::Reason;
use liqo_api::{
    AuthStatus, ClusterIdentity, DiscoveryConfig, DiscoveryType, ForeignClusterSpec, HandedKubeconfig, PeeringRequest, PeeringRequestSpec,
    TrustMode,
};

/// Why an untrusted remote may (or may not) be peered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrustVerdict {
    /// The remote's certificate verified.
    Trusted,
    /// Unknown authority, allowed by `spec.allowUntrustedCA`.
    AllowedBySpec,
    /// Unknown authority, allowed for a discovered (LAN/WAN) peer by `autojoinUntrusted`.
    AllowedByConfig,
    /// Unknown authority and nothing allows it.
    Refused,
    /// Not probed yet.
    Unknown,
}

impl TrustVerdict {
    pub fn allows_peering(self) -> bool {
        matches!(self, Self::Trusted | Self::AllowedBySpec | Self::AllowedByConfig)
    }
}

/// Whether peering with a remote of trust `trust` is allowed.
pub fn trust_verdict(spec: &ForeignClusterSpec, trust: TrustMode, config: &DiscoveryConfig) -> TrustVerdict {
    match trust {
        TrustMode::Unknown => TrustVerdict::Unknown,
        TrustMode::Trusted => TrustVerdict::Trusted,
        TrustMode::Untrusted if spec.allow_untrusted_ca() => TrustVerdict::AllowedBySpec,
        TrustMode::Untrusted if matches!(spec.discovery_type(), DiscoveryType::Lan | DiscoveryType::Wan) && config.autojoin_untrusted => {
            TrustVerdict::AllowedByConfig
        }
        TrustMode::Untrusted => TrustVerdict::Refused,
    }
}

/// What the remote must still tell us before we can peer: its cluster ID and namespace.
pub fn needs_identification(spec: &ForeignClusterSpec) -> bool {
    spec.remote_cluster_id().is_none() || spec.namespace.as_deref().is_none_or(str::is_empty)
}

/// The spec fields filled from the remote's `/ids` answer and the trust probe, as a JSON merge
/// patch; only fields the user left empty are filled. `None` when nothing is missing.
pub fn identification_patch(
    spec: &ForeignClusterSpec,
    probed: Option<TrustMode>,
    ids: Option<(&str, &str, &str)>,
) -> Option<serde_json::Value> {
    let mut patch = serde_json::Map::new();
    if let Some(t) = probed.filter(|_| spec.trust_mode() == TrustMode::Unknown) {
        patch.insert("trustMode".into(), t.as_str().into());
    }
    if let Some((id, name, namespace)) = ids {
        if spec.remote_cluster_id().is_none() {
            let mut identity = serde_json::json!({ "clusterID": id });
            let user_name = spec.cluster_identity.as_ref().and_then(|i| i.cluster_name.as_deref()).filter(|n| !n.is_empty());
            identity["clusterName"] = user_name.unwrap_or(name).into();
            patch.insert("clusterIdentity".into(), identity);
        }
        if spec.namespace.as_deref().is_none_or(str::is_empty) {
            patch.insert("namespace".into(), namespace.into());
        }
    }
    (!patch.is_empty()).then(|| serde_json::json!({ "spec": patch }))
}

/// [`identification_patch`] as one JSON patch with our finalizer (pure): each spec field an
/// `add` (which replaces a member already there), after the finalizer's own ops
/// ([`crate::machinery::finalizer::add_patch`], which test the list they extend). A join's
/// identification and its finalizer are then one write, not two, and one watch event.
pub fn identification_and_finalizer(identification: &serde_json::Value, finalizers: Option<&[String]>) -> serde_json::Value {
    let mut ops = match crate::machinery::finalizer::add_patch(finalizers) {
        Some(serde_json::Value::Array(ops)) => ops,
        _ => Vec::new(),
    };
    if let Some(fields) = identification.get("spec").and_then(serde_json::Value::as_object) {
        for (field, value) in fields {
            ops.push(serde_json::json!({"op": "add", "path": format!("/spec/{field}"), "value": value}));
        }
    }
    serde_json::Value::Array(ops)
}

/// The PeeringRequest `<home ID>` we keep in the remote cluster.
pub struct OurRequest<'a> {
    pub home_id: &'a str,
    pub home_name: Option<&'a str>,
    pub home_namespace: &'a str,
    /// Where on the remote: the tenant namespace it gave us (its Liqo namespace, anonymously).
    pub remote_namespace: &'a str,
    pub home_auth_url: Option<&'a str>,
}

impl OurRequest<'_> {
    pub fn spec(&self) -> PeeringRequestSpec {
        PeeringRequestSpec {
            cluster_identity: Some(ClusterIdentity {
                cluster_id: self.home_id.to_owned(),
                cluster_name: self.home_name.map(str::to_owned),
            }),
            cluster_id: None,
            namespace: Some(self.home_namespace.to_owned()),
            kube_config_ref: Some(SecretReference {
                name: Some(peering_kubeconfig_secret(self.home_id)),
                namespace: Some(self.remote_namespace.to_owned()),
            }),
            auth_url: self.home_auth_url.map(str::to_owned),
        }
    }

    pub fn object(&self) -> PeeringRequest {
        let mut pr = PeeringRequest::new(self.home_id, self.spec());
        pr.metadata = ObjectMeta {
            name: Some(self.home_id.to_owned()),
            namespace: Some(self.remote_namespace.to_owned()),
            labels: Some([(LABEL_CLUSTER_ID.to_owned(), self.home_id.to_owned())].into()),
            ..Default::default()
        };
        pr
    }

    /// Whether `existing` still says what we asked (ignoring fields the remote may add).
    pub fn is_satisfied_by(&self, existing: &PeeringRequest) -> bool {
        let want = self.spec();
        let have = &existing.spec;
        existing.metadata.deletion_timestamp.is_none()
            && have.requester_cluster_id() == Some(self.home_id)
            && have.namespace == want.namespace
            && have.kube_config_ref == want.kube_config_ref
            && have.auth_url == want.auth_url
    }
}

/// Whether unjoin stops waiting for an unreachable remote and completes locally: only for a
/// ForeignCluster being deleted, once `grace` has passed since deletion was asked for.
pub fn give_up_on_remote(deletion: Option<&Time>, now: &Time, grace: Duration) -> bool {
    deletion.is_some_and(|d| now.0.as_second() - d.0.as_second() >= grace.as_secs() as i64)
}

/// When to offer our PeeringRequest again to a remote that refuses it, refusing since `since`
/// (when the stored `Joined` condition turned `PeerRefused`; `None`: refused just now): after
/// half as long as it has refused so far, at least `health` and at most `max`. A peer that
/// keeps refusing is asked less and less often, and one that accepts again is joined within
/// half the time it refused.
pub fn offer_again_after(since: Option<&Time>, now: &Time, health: Duration, max: Duration) -> Duration {
    half_so_far(since, now, health, max.max(health))
}

/// When to call a failing peer again, failing since `since` (when the stored condition of the
/// phase it fails turned so; `None`: failing just now): after half as long as it has failed so
/// far, at least `retry` (a blip is retried soon) and at most `health`. A peer down for long is
/// called once per health period, never more often; one that answers again is repaired within a
/// health period.
pub fn retry_after_failure(since: Option<&Time>, now: &Time, retry: Duration, health: Duration) -> Duration {
    half_so_far(since, now, retry.min(health), health)
}

/// Half the time since `since` (0 without it), within `least..=most`.
fn half_so_far(since: Option<&Time>, now: &Time, least: Duration, most: Duration) -> Duration {
    let so_far = since.map_or(0, |s| (now.0.as_second() - s.0.as_second()).max(0) as u64);
    Duration::from_secs(so_far / 2).clamp(least, most)
}

/// Follows the watch of one object by name (its events, in order) to tell when the object of
/// `uid` is gone: deleted, replaced by another of the same name, or absent from a new list.
#[derive(Debug)]
pub struct Gone {
    uid: Option<String>,
    /// Whether the list in progress has shown it.
    listed: bool,
}

impl Gone {
    pub fn new(uid: Option<String>) -> Self {
        Self { uid, listed: false }
    }

    /// Whether the object is gone once `event` is seen.
    pub fn after<K: kube::Resource>(&mut self, event: &kube::runtime::watcher::Event<K>) -> bool {
        use kube::runtime::watcher::Event;
        match event {
            Event::Init => {
                self.listed = false;
                false
            }
            Event::InitApply(o) | Event::Apply(o) if o.meta().uid == self.uid => {
                self.listed = true;
                false
            }
            Event::InitApply(_) | Event::Apply(_) | Event::Delete(_) => true,
            Event::InitDone => !self.listed,
        }
    }
}

/// Whether the remote answering `code` to a look at our request means it retired us (pure):
/// a 401, or, once our deletes went through (`deleted`), a 403. The remote revokes our grant
/// with our identity, and its API server keeps authenticating the token from its cache for up
/// to 10 s, refusing it by RBAC (the chaos soak saw an unjoin wait a period on that). Before
/// our deletes, a 403 may be a restarted API server whose RBAC cache is not filled yet, and is
/// retried.
pub fn retired_us(code: u16, deleted: bool) -> bool {
    code == 401 || (deleted && code == 403)
}

/// Whether the watch of our request, deleted and terminating on the remote, ends with the
/// remote retiring us ([`retired_us`]: it revokes a peer's identities only when nothing of the
/// peer is left there).
pub fn watch_refused(e: &kube::runtime::watcher::Error) -> bool {
    use kube::runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(kube::Error::Api(s)) | W::WatchStartFailed(kube::Error::Api(s)) | W::WatchFailed(kube::Error::Api(s)) => {
            retired_us(s.code, true)
        }
        W::WatchError(s) => retired_us(s.code, true),
        _ => false,
    }
}

/// The answer of a refused `/identity`: which auth status and reason it means.
pub fn refusal_status(token_was_empty: bool) -> (AuthStatus, Reason) {
    if token_was_empty { (AuthStatus::EmptyRefused, Reason::EmptyTokenRefused) } else { (AuthStatus::Refused, Reason::TokenRefused) }
}

/// The `Joined` condition once our PeeringRequest is on the remote: joined while the peer's
/// Advertisement is here. `lost_before`: the stored status had the Advertisement, or already
/// said it was deleted (so the reason stays until it comes back).
pub fn joined_reason(advertisement_present: bool, lost_before: bool) -> (bool, Reason, &'static str) {
    match (advertisement_present, lost_before) {
        (true, _) => (true, Reason::Joined, "the remote accepted our PeeringRequest and advertises to us"),
        (false, true) => (false, Reason::AdvertisementDeleted, "the remote's Advertisement was deleted: not joined"),
        (false, false) => (false, Reason::WaitingForAdvertisement, "our PeeringRequest is on the remote; waiting for its Advertisement"),
    }
}

/// What we know of our PeeringRequest on the remote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnRemote {
    /// We cannot read it (anonymous way).
    Unknown,
    Missing,
    /// Being deleted (its finalizer waits for the remote's broadcaster).
    Terminating,
    /// There, saying what we ask.
    Matching,
    /// There, saying something else.
    Differing,
}

impl OnRemote {
    /// A stable label (metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Missing => "missing",
            Self::Terminating => "terminating",
            Self::Matching => "matching",
            Self::Differing => "differing",
        }
    }

    /// What `existing` is, compared with `ours`.
    pub fn of(ours: &OurRequest<'_>, existing: Option<&PeeringRequest>) -> Self {
        match existing {
            None => Self::Missing,
            Some(pr) if pr.metadata.deletion_timestamp.is_some() => Self::Terminating,
            // The remote's broadcaster says the kubeconfig we gave is gone: put it back.
            Some(pr) if ours.is_satisfied_by(pr) && !kubeconfig_missing(pr) => Self::Matching,
            Some(_) => Self::Differing,
        }
    }
}

/// Whether the remote's broadcaster reports the kubeconfig Secret of `pr` missing (pure).
pub fn kubeconfig_missing(pr: &PeeringRequest) -> bool {
    pr.status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Advertised" && c.reason == Reason::KubeconfigMissing.as_str()))
}

/// Whether to (re)make our offer: grant the peer its access here, put the kubeconfig for it and
/// our PeeringRequest on the remote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Nothing to do.
    Keep,
    /// First offer of this peering: always made, even over a request of ours left on the remote
    /// by an earlier peering, whose access we revoked.
    Make,
    /// Our request went missing or changed: made again.
    Repair,
    /// A request of ours is still being deleted on the remote: offer once it is gone.
    AwaitDeletion,
    /// An anonymous offer the remote has not answered for long: made again, in case the
    /// remote lost it before it ever advertised (we cannot read it there).
    Refresh,
    /// The kubeconfig we keep on the remote no longer says our API server's address or CA, or
    /// its token is due for renewal: written again ([`rewrite_kubeconfig`]).
    Rewrite,
}

impl Offer {
    /// A stable label (metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Keep => "keep",
            Self::Make => "make",
            Self::Repair => "repair",
            Self::AwaitDeletion => "await_deletion",
            Self::Refresh => "refresh",
            Self::Rewrite => "rewrite",
        }
    }
}

/// The peer's Advertisement here, as far as the offer cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advertised {
    Present,
    /// Here at the last reconcile, gone now.
    Vanished,
    Absent,
    /// Never here since our offer, which has waited longer than the refresh interval (see
    /// [`anonymous_offer_overdue`]).
    Overdue,
}

/// Whether an offer waiting for the remote's Advertisement since `since` is overdue (pure):
/// it has waited `every` or more, and this process did not make it again within the last
/// `every` (`last`: how long ago it did). An anonymous offer is then made again, at most once
/// per `every`.
pub fn anonymous_offer_overdue(since: Option<&Time>, now: &Time, last: Option<Duration>, every: Duration) -> bool {
    let waited = since.map_or(0, |s| (now.0.as_second() - s.0.as_second()).max(0) as u64);
    waited >= every.as_secs() && last.is_none_or(|l| l >= every)
}

/// The offer to make (pure). `offered`: the stored status says our request is on the remote
/// (cleared by unjoin and by a refused offer). When our request cannot be read (anonymous
/// way), the peer's Advertisement is the only sign: present, the offer stands; vanished, the
/// remote may have dropped our request.
/// Why the kubeconfig we keep on the peer must be written again (pure): `None` while what we
/// handed says our API server's current `api_url` and CA, and its token is neither due yet nor
/// longer-lived than the tokens we now issue (`lifetime`). What an earlier release handed is
/// not recorded (`handed` is `None`): its token lasts a year, and is renewed to `lifetime`.
pub fn rewrite_kubeconfig(
    handed: Option<&HandedKubeconfig>,
    api_url: &str,
    ca_fingerprint: &str,
    lifetime: Duration,
    now: &Time,
) -> Option<&'static str> {
    let Some(handed) = handed else {
        return Some("it was handed by an earlier release, whose token lasts a year: renewed to our token lifetime");
    };
    if handed.api_url != api_url {
        return Some("our API server's address changed");
    }
    if handed.ca_fingerprint != ca_fingerprint {
        return Some("our API server's CA changed");
    }
    let renew_after = handed.renew_after.as_ref()?;
    if now.0 >= renew_after.0 {
        return Some("its token is due for renewal");
    }
    let lifetime = SignedDuration::try_from(lifetime).unwrap_or(SignedDuration::MAX);
    if renew_after.0.duration_since(now.0) > lifetime {
        return Some("its token outlasts our token lifetime (--token-lifetime-hours was shortened): renewed to it");
    }
    None
}

/// What we handed a peer in a kubeconfig whose token lasts from `issued` to `expires` (pure):
/// renewed after 80 % of that.
pub fn handed(api_url: &str, ca_fingerprint: &str, issued: Timestamp, expires: Option<Timestamp>) -> HandedKubeconfig {
    let renew_after = expires.map(|e| {
        let life = e.duration_since(issued).as_nanos().max(0) as f64;
        Time(issued + SignedDuration::from_nanos((life * 0.8) as i64))
    });
    HandedKubeconfig { api_url: api_url.to_owned(), ca_fingerprint: ca_fingerprint.to_owned(), renew_after }
}

pub fn offer(on_remote: OnRemote, offered: bool, advertised: Advertised) -> Offer {
    match on_remote {
        OnRemote::Terminating => Offer::AwaitDeletion,
        OnRemote::Unknown if advertised == Advertised::Present => Offer::Keep,
        _ if !offered => Offer::Make,
        OnRemote::Matching => Offer::Keep,
        OnRemote::Missing | OnRemote::Differing => Offer::Repair,
        OnRemote::Unknown if advertised == Advertised::Vanished => Offer::Repair,
        OnRemote::Unknown if advertised == Advertised::Overdue => Offer::Refresh,
        OnRemote::Unknown => Offer::Keep,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_kubeconfig_on_the_peer_follows_our_address_and_ca_and_is_renewed() {
        use super::{handed, rewrite_kubeconfig};
        let at = |s: &str| s.parse::<k8s_openapi::jiff::Timestamp>().unwrap();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at("2026-11-28T10:00:00Z"));
        let h = handed("https://a:6443", "ca1", at("2026-11-28T00:00:00Z"), Some(at("2026-11-28T20:00:00Z")));
        assert_eq!(h.renew_after.as_ref().unwrap().0, at("2026-11-28T16:00:00Z"));
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(rewrite_kubeconfig(Some(&h), "https://a:6443", "ca1", day, &now), None);
        assert_eq!(rewrite_kubeconfig(Some(&h), "https://b:6443", "ca1", day, &now), Some("our API server's address changed"));
        assert_eq!(rewrite_kubeconfig(Some(&h), "https://a:6443", "ca2", day, &now), Some("our API server's CA changed"));
        let later = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at("2026-11-28T16:00:00Z"));
        assert_eq!(rewrite_kubeconfig(Some(&h), "https://a:6443", "ca1", day, &later), Some("its token is due for renewal"));
        // Our lifetime shortened to 5 hours: its renewal (6 hours away) lies beyond a new token's.
        let shortened = rewrite_kubeconfig(Some(&h), "https://a:6443", "ca1", Duration::from_secs(5 * 3600), &now);
        assert!(shortened.unwrap().contains("outlasts our token lifetime"));
        // Handed by an earlier release (not recorded): renewed to our lifetime.
        let earlier = rewrite_kubeconfig(None, "https://a:6443", "ca1", day, &now);
        assert!(earlier.unwrap().contains("earlier release"));
        let unknown = handed("https://a:6443", "ca1", at("2026-11-28T00:00:00Z"), None);
        assert_eq!(
            rewrite_kubeconfig(Some(&unknown), "https://a:6443", "ca1", day, &later),
            None,
            "no expiry known: renewed on a change only"
        );
    }

    #[test]
    fn a_403_after_our_deletes_is_the_remote_retiring_us_and_before_them_is_retried() {
        use super::retired_us;
        assert!(retired_us(401, false));
        assert!(retired_us(401, true));
        assert!(retired_us(403, true), "grant revoked, token still cached by the remote's API server");
        assert!(!retired_us(403, false), "a restarted API server's RBAC cache not filled yet");
        assert!(!retired_us(404, true), "404 is an answer, not a refusal");
        assert!(!retired_us(500, true));
    }

    #[test]
    fn a_watch_refused_by_the_remote_is_told_from_other_failures() {
        use kube::runtime::watcher::Error as W;
        let api = |code: u16| kube::Error::Api(Box::new(kube::core::Status { code, ..Default::default() }));
        use super::watch_refused;
        assert!(watch_refused(&W::WatchFailed(api(401))));
        assert!(watch_refused(&W::InitialListFailed(api(403))));
        assert!(watch_refused(&W::WatchStartFailed(api(403))));
        assert!(watch_refused(&W::WatchError(Box::new(kube::core::Status { code: 401, ..Default::default() }))));
        assert!(!watch_refused(&W::WatchFailed(api(410))), "expired: the watch restarts");
        assert!(!watch_refused(&W::InitialListFailed(api(500))));
        assert!(!watch_refused(&W::NoResourceVersion));
    }

    #[test]
    fn a_request_whose_kubeconfig_the_remote_misses_is_offered_again() {
        let mut pr: PeeringRequest = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest", "metadata": {"name": "x"}, "spec": {},
            "status": {"conditions": [{"type": "Advertised", "status": "False", "reason": "KubeconfigMissing", "message": "m",
                                        "lastTransitionTime": "2026-11-25T10:00:00Z"}]}
        }))
        .unwrap();
        assert!(kubeconfig_missing(&pr));
        pr.status.as_mut().unwrap().conditions[0].reason = "Published".into();
        assert!(!kubeconfig_missing(&pr));
    }

    use super::*;

    const ID: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
    const HOME: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

    fn spec(json: serde_json::Value) -> ForeignClusterSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn trust_rules() {
        let config = DiscoveryConfig::default();
        let manual = spec(serde_json::json!({"discoveryType": "Manual"}));
        assert_eq!(trust_verdict(&manual, TrustMode::Trusted, &config), TrustVerdict::Trusted);
        assert_eq!(trust_verdict(&manual, TrustMode::Untrusted, &config), TrustVerdict::Refused);
        assert_eq!(trust_verdict(&manual, TrustMode::Unknown, &config), TrustVerdict::Unknown);
        let allowed = spec(serde_json::json!({"discoveryType": "Manual", "allowUntrustedCA": true}));
        assert_eq!(trust_verdict(&allowed, TrustMode::Untrusted, &config), TrustVerdict::AllowedBySpec);
        // Discovered peers: autojoinUntrusted decides (default true).
        let lan = spec(serde_json::json!({"discoveryType": "LAN"}));
        assert_eq!(trust_verdict(&lan, TrustMode::Untrusted, &config), TrustVerdict::AllowedByConfig);
        let strict = DiscoveryConfig { autojoin_untrusted: false, ..config.clone() };
        assert_eq!(trust_verdict(&lan, TrustMode::Untrusted, &strict), TrustVerdict::Refused);
        assert!(!TrustVerdict::Refused.allows_peering() && !TrustVerdict::Unknown.allows_peering());
    }

    #[test]
    fn identification_fills_only_what_is_missing() {
        let s = spec(serde_json::json!({"authUrl": "https://a:1"}));
        assert!(needs_identification(&s));
        let p = identification_patch(&s, Some(TrustMode::Untrusted), Some((ID, "remote", "liqo"))).unwrap();
        assert_eq!(
            p,
            serde_json::json!({"spec": {"trustMode": "Untrusted", "clusterIdentity": {"clusterID": ID, "clusterName": "remote"}, "namespace": "liqo"}})
        );
        // User-given values win; nothing missing → no patch.
        let s = spec(serde_json::json!({"clusterIdentity": {"clusterID": ID}, "namespace": "other", "trustMode": "Trusted"}));
        assert!(!needs_identification(&s));
        assert_eq!(identification_patch(&s, Some(TrustMode::Untrusted), Some(("x", "y", "z"))), None);
        // The manual form's top-level clusterID counts as known.
        let s = spec(serde_json::json!({"clusterID": ID, "namespace": "liqo"}));
        assert!(!needs_identification(&s));
    }

    /// `ops` applied to `object` as the API server would (RFC 6902).
    fn applied(mut object: serde_json::Value, ops: serde_json::Value) -> Result<serde_json::Value, String> {
        let ops: json_patch::Patch = serde_json::from_value(ops).unwrap();
        json_patch::patch(&mut object, &ops).map_err(|e| e.to_string())?;
        Ok(object)
    }

    #[test]
    fn identification_and_finalizer_are_one_write() {
        let s = spec(serde_json::json!({"authUrl": "https://a:1", "clusterIdentity": {"clusterName": "mine"}}));
        let p = identification_patch(&s, Some(TrustMode::Untrusted), Some((ID, "remote", "liqo"))).unwrap();
        let object = serde_json::json!({
            "metadata": {"name": "peer", "finalizers": ["other.io/keep"]},
            "spec": {"authUrl": "https://a:1", "join": true, "clusterIdentity": {"clusterName": "mine"}},
        });
        let kept = vec!["other.io/keep".to_owned()];
        let after = applied(object.clone(), identification_and_finalizer(&p, Some(&kept))).unwrap();
        assert_eq!(after["metadata"]["finalizers"], serde_json::json!(["other.io/keep", liqo_api::names::FINALIZER_PEERED]));
        assert_eq!(
            after["spec"],
            serde_json::json!({"authUrl": "https://a:1", "join": true, "trustMode": "Untrusted",
                "clusterIdentity": {"clusterID": ID, "clusterName": "mine"}, "namespace": "liqo"}),
            "the user's fields kept, the told ones filled"
        );
        // Finalizers changed since the object was read: the patch fails whole (retried on the
        // next read), nobody's finalizer dropped and no spec field half written.
        let raced = applied(object.clone(), identification_and_finalizer(&p, Some(&[])));
        assert!(raced.is_err(), "{raced:?}");
        // No finalizers at all: the list is made.
        let mut bare = object;
        bare["metadata"].as_object_mut().unwrap().remove("finalizers");
        let after = applied(bare, identification_and_finalizer(&p, None)).unwrap();
        assert_eq!(after["metadata"]["finalizers"], serde_json::json!([liqo_api::names::FINALIZER_PEERED]));
        // Ours already there: only the spec.
        let ours = vec![liqo_api::names::FINALIZER_PEERED.to_owned()];
        let ops = identification_and_finalizer(&p, Some(&ours));
        assert!(ops.as_array().unwrap().iter().all(|op| op["path"].as_str().unwrap().starts_with("/spec/")), "{ops}");
    }

    #[test]
    fn our_peering_request_and_what_satisfies_it() {
        let ours =
            OurRequest { home_id: HOME, home_name: Some("home"), home_namespace: "liqo", remote_namespace: "liqo-r", home_auth_url: None };
        let pr = ours.object();
        assert_eq!(pr.metadata.name.as_deref(), Some(HOME));
        let r = pr.spec.kube_config_ref.as_ref().unwrap();
        assert_eq!((r.name.as_deref(), r.namespace.as_deref()), (Some(&*format!("pr-kubeconfig-{HOME}")), Some("liqo-r")));
        assert!(ours.is_satisfied_by(&pr));
        let mut changed = pr.clone();
        changed.spec.namespace = Some("elsewhere".into());
        assert!(!ours.is_satisfied_by(&changed));
        let mut terminating = pr.clone();
        terminating.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap()));
        assert!(!ours.is_satisfied_by(&terminating));
    }

    #[test]
    fn unjoin_gives_up_only_on_deletion_after_the_grace_period() {
        let t = |s| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let grace = Duration::from_secs(120);
        assert!(!give_up_on_remote(None, &t(10_000), grace));
        assert!(!give_up_on_remote(Some(&t(1000)), &t(1119), grace));
        assert!(give_up_on_remote(Some(&t(1000)), &t(1120), grace));
    }

    #[test]
    fn a_watched_object_is_gone_when_deleted_replaced_or_absent_from_a_list() {
        type Event = kube::runtime::watcher::Event<liqo_api::PeeringRequest>;
        let pr = |uid: &str| {
            let mut p = liqo_api::PeeringRequest::new("x", Default::default());
            p.metadata.uid = Some(uid.to_owned());
            p
        };
        let mut g = Gone::new(Some("a".into()));
        assert!(!g.after(&Event::Init) && !g.after(&Event::InitApply(pr("a"))) && !g.after(&Event::InitDone), "listed: still there");
        assert!(!g.after(&Event::Apply(pr("a"))), "changed (its finalizer going): still there");
        assert!(g.after(&Event::Delete(pr("a"))), "deleted");
        assert!(Gone::new(Some("a".into())).after(&Event::Apply(pr("b"))), "another of the same name");
        let mut relisted = Gone::new(Some("a".into()));
        assert!(!relisted.after(&Event::Init) && relisted.after(&Event::InitDone), "absent from a new list");
    }

    #[test]
    fn a_refusing_peer_is_asked_less_and_less_often() {
        let t = |s| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let (health, max) = (Duration::from_secs(30), Duration::from_secs(300));
        assert_eq!(offer_again_after(None, &t(1000), health, max), health, "refused just now: one health period");
        let retry = Duration::from_secs(10);
        assert_eq!(retry_after_failure(None, &t(1000), retry, health), retry, "failing just now: the retry");
        assert_eq!(retry_after_failure(Some(&t(970)), &t(1000), retry, health), Duration::from_secs(15), "half the 30 s so far");
        assert_eq!(retry_after_failure(Some(&t(0)), &t(1000), retry, health), health, "down for long: once per health period");
        let short = Duration::from_secs(2);
        assert_eq!(retry_after_failure(None, &t(1000), retry, short), short, "never beyond the health period");
        assert_eq!(offer_again_after(Some(&t(990)), &t(1000), health, max), health);
        assert_eq!(offer_again_after(Some(&t(800)), &t(1000), health, max), Duration::from_secs(100), "half the refusal so far");
        assert_eq!(offer_again_after(Some(&t(0)), &t(10_000), health, max), max);
        assert_eq!(offer_again_after(Some(&t(2000)), &t(1000), health, max), health, "a clock step back");
    }

    #[test]
    fn joined_condition_reasons() {
        assert_eq!(joined_reason(true, false).1, Reason::Joined);
        assert_eq!(joined_reason(false, true).1, Reason::AdvertisementDeleted);
        assert_eq!(joined_reason(false, false).1, Reason::WaitingForAdvertisement);
        assert_eq!(refusal_status(true), (AuthStatus::EmptyRefused, Reason::EmptyTokenRefused));
        assert_eq!(refusal_status(false), (AuthStatus::Refused, Reason::TokenRefused));
    }

    #[test]
    fn an_anonymous_offer_is_overdue_after_the_interval_and_then_once_per_interval() {
        let at = |secs: i64| Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + secs).unwrap());
        let every = Duration::from_secs(300);
        assert!(!anonymous_offer_overdue(None, &at(0), None, every), "not waiting");
        assert!(!anonymous_offer_overdue(Some(&at(0)), &at(299), None, every));
        assert!(anonymous_offer_overdue(Some(&at(0)), &at(300), None, every));
        assert!(!anonymous_offer_overdue(Some(&at(0)), &at(400), Some(Duration::from_secs(100)), every), "made again lately");
        assert!(anonymous_offer_overdue(Some(&at(0)), &at(700), Some(Duration::from_secs(300)), every));
    }

    #[test]
    fn when_the_offer_is_made() {
        use Advertised::*;
        // A fresh peering always offers, even over a matching request left by an earlier one.
        for on_remote in [OnRemote::Missing, OnRemote::Matching, OnRemote::Differing, OnRemote::Unknown] {
            assert_eq!(offer(on_remote, false, Absent), Offer::Make, "{on_remote:?}");
        }
        // A request of ours being deleted is waited for, whoever deleted it.
        assert_eq!(offer(OnRemote::Terminating, false, Absent), Offer::AwaitDeletion);
        assert_eq!(offer(OnRemote::Terminating, true, Present), Offer::AwaitDeletion);
        // Steady state, and repairs.
        assert_eq!(offer(OnRemote::Matching, true, Present), Offer::Keep);
        assert_eq!(offer(OnRemote::Missing, true, Present), Offer::Repair);
        assert_eq!(offer(OnRemote::Differing, true, Absent), Offer::Repair);
        // Anonymous: the Advertisement tells; repaired only when it vanishes, not every round.
        assert_eq!(offer(OnRemote::Unknown, false, Present), Offer::Keep);
        assert_eq!(offer(OnRemote::Unknown, true, Absent), Offer::Keep);
        assert_eq!(offer(OnRemote::Unknown, true, Vanished), Offer::Repair);
        // An anonymous offer unanswered for long is made again; one we can read is not.
        assert_eq!(offer(OnRemote::Unknown, true, Overdue), Offer::Refresh);
        assert_eq!(offer(OnRemote::Matching, true, Overdue), Offer::Keep);
        let ours = OurRequest { home_id: HOME, home_name: None, home_namespace: "liqo", remote_namespace: "liqo", home_auth_url: None };
        let mut pr = ours.object();
        assert_eq!(OnRemote::of(&ours, Some(&pr)), OnRemote::Matching);
        assert_eq!(OnRemote::of(&ours, None), OnRemote::Missing);
        pr.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap()));
        assert_eq!(OnRemote::of(&ours, Some(&pr)), OnRemote::Terminating);
    }
}
