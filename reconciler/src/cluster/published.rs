//! What this cluster tells its peers — the auth service URL, the API server URL (each with
//! where it came from, and condition `AddressesReachable`) and the
//! fingerprint of the CA its auth service's certificate chains to — published in the status
//! of the ClusterConfig by the reconciler that holds the Lease, so that `kubectl liqo status`
//! and the dashboard show what the running reconciler serves, read with the same rights as the
//! ClusterConfig. Written by server-side apply only when the stored status says something else
//! (a new certificate, a re-created ClusterConfig); nothing in steady state.

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use liqo_api::names::CLUSTER_CONFIG_NAME;
use liqo_api::{ClusterConfig, ClusterConfigStatus};
use rustls::pki_types::CertificateDer;
use serde_json::json;
use tokio::sync::watch;

use crate::cluster::addresses::{Found, choose};
use crate::reporting::conditions::Wanted;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use liqo_api::reasons::{ConditionType, Reason, Status};

/// The field manager of the published fields of the ClusterConfig's status.
pub const FIELD_MANAGER: &str = "liqo-reconciler-published";

/// What peers are told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Told {
    pub auth_url: Option<String>,
    pub api_url: Option<String>,
    pub auth_ca_fingerprint: Option<String>,
    /// Where each URL came from (see [`crate::cluster::addresses::Source`]).
    pub auth_url_from: Option<String>,
    pub api_url_from: Option<String>,
    /// Why peers cannot reach a URL told, one sentence each.
    pub problems: Vec<String>,
    /// What peers' identities stand on and is not installed (`crate::tenancy::install`), if
    /// anything.
    pub install_missing: Option<String>,
}

impl Told {
    /// `found` as told: its URLs, their sources and their problems.
    pub fn set_addresses(&mut self, found: &Found) {
        self.api_url = Some(found.api.url.clone());
        self.api_url_from = Some(found.api.source.to_string());
        self.auth_url = found.auth.as_ref().map(|a| a.url.clone());
        self.auth_url_from = found.auth.as_ref().map(|a| a.source.to_string());
        self.problems = found.problems.iter().map(ToString::to_string).collect();
    }

    /// Condition `AddressesReachable`: a URL no peer can reach, else a missing auth URL, else
    /// found.
    pub fn condition(&self) -> Wanted {
        let t = ConditionType::AddressesReachable;
        if !self.problems.is_empty() {
            return Wanted::new(t, Status::False, Reason::AddressUnreachable, self.problems.join("; "));
        }
        let from = |v: &Option<String>| v.as_deref().unwrap_or("-").to_owned();
        match &self.auth_url {
            None => Wanted::new(
                t,
                Status::False,
                Reason::NoAuthAddress,
                format!(
                    "no address of the auth service was found (Service liqo-auth is not a NodePort or LoadBalancer, or no node has an address; no Ingress liqo-auth): mDNS tells each interface's address; set {} in ConfigMap {}",
                    choose::AUTH_URL_KEY,
                    choose::ENV_CONFIGMAP
                ),
            ),
            Some(auth) => Wanted::new(
                t,
                Status::True,
                Reason::AddressesFound,
                format!(
                    "API server {} (from {}), auth service {auth} (from {})",
                    from(&self.api_url),
                    from(&self.api_url_from),
                    from(&self.auth_url_from)
                ),
            ),
        }
    }

    /// Condition `PeerAccessInstalled`: what peers' identities stand on is there, or what is
    /// missing and how to apply it.
    pub fn install_condition(&self) -> Wanted {
        let t = ConditionType::PeerAccessInstalled;
        match &self.install_missing {
            Some(missing) => Wanted::new(t, Status::False, Reason::PeerAccessMissing, missing.clone()),
            None => Wanted::new(
                t,
                Status::True,
                Reason::PeerAccessReady,
                "the fixed peer ClusterRoles and the peer-Secret admission policy are installed",
            ),
        }
    }

    /// Our conditions as they should stand, keeping `previous`' transition times.
    fn conditions(&self, previous: &[Condition], generation: Option<i64>, now: &Time) -> Vec<Condition> {
        crate::reporting::conditions::set_all(previous, vec![self.condition(), self.install_condition()], generation, now)
    }

    /// Whether `stored` already says all of it, and nothing else of ours.
    pub fn is_in(&self, stored: Option<&ClusterConfigStatus>, generation: Option<i64>) -> bool {
        let s = stored.cloned().unwrap_or_default();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        (&s.auth_url, &s.api_url, &s.auth_ca_fingerprint, &s.auth_url_from, &s.api_url_from)
            == (&self.auth_url, &self.api_url, &self.auth_ca_fingerprint, &self.auth_url_from, &self.api_url_from)
            && s.conditions == self.conditions(&s.conditions, generation, &now)
    }

    /// The server-side apply body: every field we own, an unset one left out (and so removed).
    pub fn apply_body(&self, stored: Option<&ClusterConfigStatus>, generation: Option<i64>, now: &Time) -> serde_json::Value {
        let mut status = serde_json::Map::new();
        for (key, value) in [
            ("authUrl", &self.auth_url),
            ("apiUrl", &self.api_url),
            ("authCAFingerprint", &self.auth_ca_fingerprint),
            ("authUrlFrom", &self.auth_url_from),
            ("apiUrlFrom", &self.api_url_from),
        ] {
            if let Some(v) = value {
                status.insert(key.into(), json!(v));
            }
        }
        let previous = stored.map(|s| s.conditions.as_slice()).unwrap_or_default();
        status.insert("conditions".into(), json!(self.conditions(previous, generation, now)));
        json!({"apiVersion": "config.liqo.io/v1alpha1", "kind": "ClusterConfig",
               "metadata": {"name": CLUSTER_CONFIG_NAME}, "status": status})
    }
}

/// Keeps `told` saying the addresses `found` holds, until either side is gone.
pub async fn follow_addresses(mut found: watch::Receiver<Found>, told: std::sync::Arc<watch::Sender<Told>>) {
    loop {
        let now = found.borrow_and_update().clone();
        told.send_if_modified(|t| {
            let before = t.clone();
            t.set_addresses(&now);
            *t != before
        });
        if found.changed().await.is_err() || told.is_closed() {
            return;
        }
    }
}

/// The fingerprint a peer approves for a served chain: its CA's (the last certificate), or
/// the certificate's own when it is served alone.
pub fn approved_fingerprint(chain: &[CertificateDer<'_>]) -> Option<String> {
    chain.last().map(|c| liqo_certs::inspect::der_fingerprint(c.as_ref()))
}

/// Keeps the ClusterConfig's status saying what `told` holds, until the process ends: on every
/// change of the stored ClusterConfig and of `told`. A failed write is retried after `retry`.
pub async fn keep(client: Client, mut told: watch::Receiver<Told>, retry: Duration) {
    let api = Api::<ClusterConfig>::all(client);
    let by_name = watcher::Config::default().fields(&format!("metadata.name={CLUSTER_CONFIG_NAME}"));
    let mut stored = watcher(api.clone(), by_name).backoff(liqo_api::watch_backoff::WatchBackoff::default()).applied_objects().boxed();
    let mut last: Option<ClusterConfig> = None;
    let mut failed = false;
    loop {
        tokio::select! {
            next = stored.next() => match next {
                Some(Ok(object)) => last = Some(object),
                Some(Err(e)) => tracing::debug!(error = %e, "watching the ClusterConfig"),
                None => return,
            },
            changed = told.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(retry), if failed => {}
        }
        let Some(object) = &last else { continue };
        let now = told.borrow().clone();
        let generation = object.metadata.generation;
        if now.is_in(object.status.as_ref(), generation) {
            failed = false;
            continue;
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let body = now.apply_body(object.status.as_ref(), generation, &Time(k8s_openapi::jiff::Timestamp::now()));
        match api.patch_status(CLUSTER_CONFIG_NAME, &params, &Patch::Apply(body)).await {
            Ok(written) => {
                tracing::info!(auth_url = ?now.auth_url, api_url = ?now.api_url, fingerprint = ?now.auth_ca_fingerprint, "published what peers are told");
                last = Some(written);
                failed = false;
            }
            Err(e) => {
                tracing::warn!(error = %e, "publishing what peers are told in the ClusterConfig's status; retrying");
                failed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told() -> Told {
        Told {
            auth_url: Some("https://10.0.0.1:30443".into()),
            api_url: Some("https://10.0.0.1:6443".into()),
            auth_ca_fingerprint: Some("ab".into()),
            auth_url_from: Some("Service liqo-auth (NodePort) on node n (InternalIP)".into()),
            api_url_from: Some("EndpointSlice default/kubernetes".into()),
            problems: vec![],
            install_missing: None,
        }
    }

    fn t(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn stored(t: &Told, at: i64) -> ClusterConfigStatus {
        let body = t.apply_body(None, Some(1), &self::t(at));
        serde_json::from_value(body["status"].clone()).unwrap()
    }

    #[test]
    fn written_only_when_the_stored_status_says_something_else() {
        let t = told();
        assert!(!t.is_in(None, Some(1)), "nothing stored yet");
        let stored = stored(&t, 100);
        assert!(t.is_in(Some(&stored), Some(1)), "the same, written earlier");
        assert!(!t.is_in(Some(&stored), Some(2)), "a new generation is recorded");
        let renewed = Told { auth_ca_fingerprint: Some("cd".into()), ..told() };
        assert!(!renewed.is_in(Some(&stored), Some(1)), "a new CA");
        let no_auth_url = Told { auth_url: None, ..told() };
        assert!(!no_auth_url.is_in(Some(&stored), Some(1)), "a field we no longer tell is removed");
        let moved = Told { auth_url_from: Some("Ingress liqo-auth".into()), ..told() };
        assert!(!moved.is_in(Some(&stored), Some(1)), "a new source");
    }

    #[test]
    fn the_apply_body_holds_what_is_told_and_leaves_out_the_rest() {
        let body = Told { auth_url: None, auth_url_from: None, ..told() }.apply_body(None, Some(3), &t(100));
        assert_eq!(body["metadata"]["name"], CLUSTER_CONFIG_NAME);
        let status = body["status"].as_object().unwrap();
        assert_eq!(status["apiUrl"], "https://10.0.0.1:6443");
        assert_eq!(status["apiUrlFrom"], "EndpointSlice default/kubernetes");
        assert_eq!(status["authCAFingerprint"], "ab");
        assert!(!status.contains_key("authUrl") && !status.contains_key("authUrlFrom"));
        let c = &status["conditions"][0];
        assert_eq!(
            (c["type"].as_str(), c["status"].as_str(), c["reason"].as_str()),
            (Some("AddressesReachable"), Some("False"), Some("NoAuthAddress"))
        );
        assert_eq!(c["observedGeneration"], 3);
        assert!(c["message"].as_str().unwrap().contains("LIQO_AUTH_URL"));
    }

    #[test]
    fn the_condition_says_what_is_wrong_and_keeps_its_transition_time() {
        let ok = told().condition();
        assert_eq!((ok.status, ok.reason), (Status::True, Reason::AddressesFound));
        assert!(ok.message.contains("https://10.0.0.1:6443") && ok.message.contains("EndpointSlice default/kubernetes"), "{}", ok.message);
        let mut found = crate::cluster::addresses::Found::initial(&Default::default(), "https://10.96.0.1:443");
        found.problems.push(crate::cluster::addresses::Problem {
            which: choose::Which::Api,
            url: "https://10.96.0.1:443".into(),
            why: choose::Unreachable::ClusterIp,
        });
        let mut bad = told();
        bad.set_addresses(&found);
        let c = bad.condition();
        assert_eq!((c.status, c.reason), (Status::False, Reason::AddressUnreachable));
        assert!(c.message.contains("LIQO_API_URL") && c.message.contains("ClusterIP"), "{}", c.message);
        assert_eq!(bad.api_url_from.as_deref(), Some("this process's API server URL"));
        // The same condition written later keeps the first time; a flip takes the new one.
        let first = stored(&told(), 100);
        let again = told().apply_body(Some(&first), Some(1), &t(200));
        assert_eq!(again["status"]["conditions"][0]["lastTransitionTime"], json!(t(100)));
        let flipped = bad.apply_body(Some(&first), Some(1), &t(300));
        assert_eq!(flipped["status"]["conditions"][0]["lastTransitionTime"], json!(t(300)));
    }

    #[test]
    fn peers_approve_the_last_certificate_of_the_chain() {
        let (leaf, ca) = (CertificateDer::from(vec![1u8]), CertificateDer::from(vec![2u8]));
        let fp = |c: &CertificateDer<'_>| liqo_certs::inspect::der_fingerprint(c.as_ref());
        assert_eq!(approved_fingerprint(&[leaf.clone(), ca.clone()]), Some(fp(&ca)));
        assert_eq!(approved_fingerprint(std::slice::from_ref(&leaf)), Some(fp(&leaf)));
        assert_eq!(approved_fingerprint(&[]), None);
    }
}
