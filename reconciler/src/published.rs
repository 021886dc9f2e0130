//! What this cluster tells its peers — the auth service URL, the API server URL and the
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

/// The field manager of the published fields of the ClusterConfig's status.
pub const FIELD_MANAGER: &str = "liqo-reconciler-published";

/// What peers are told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Told {
    pub auth_url: Option<String>,
    pub api_url: Option<String>,
    pub auth_ca_fingerprint: Option<String>,
}

impl Told {
    /// Whether `stored` already says all of it, and nothing else of ours.
    pub fn is_in(&self, stored: Option<&ClusterConfigStatus>) -> bool {
        let s = stored.cloned().unwrap_or_default();
        (&s.auth_url, &s.api_url, &s.auth_ca_fingerprint) == (&self.auth_url, &self.api_url, &self.auth_ca_fingerprint)
    }

    /// The server-side apply body: every field we own, an unset one left out (and so removed).
    pub fn apply_body(&self) -> serde_json::Value {
        let mut status = serde_json::Map::new();
        for (key, value) in [("authUrl", &self.auth_url), ("apiUrl", &self.api_url), ("authCAFingerprint", &self.auth_ca_fingerprint)] {
            if let Some(v) = value {
                status.insert(key.into(), json!(v));
            }
        }
        json!({"apiVersion": "config.liqo.io/v1alpha1", "kind": "ClusterConfig",
               "metadata": {"name": CLUSTER_CONFIG_NAME}, "status": status})
    }
}

/// The fingerprint a peer approves for a served chain: its CA's (the last certificate), or
/// the certificate's own when it is served alone.
pub fn approved_fingerprint(chain: &[CertificateDer<'_>]) -> Option<String> {
    chain.last().map(crate::auth::client::fingerprint)
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
        if now.is_in(object.status.as_ref()) {
            failed = false;
            continue;
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch_status(CLUSTER_CONFIG_NAME, &params, &Patch::Apply(now.apply_body())).await {
            Ok(written) => {
                tracing::info!(auth_url = ?now.auth_url, fingerprint = ?now.auth_ca_fingerprint, "published what peers are told");
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
        }
    }

    #[test]
    fn written_only_when_the_stored_status_says_something_else() {
        let t = told();
        assert!(!t.is_in(None), "nothing stored yet");
        let stored = ClusterConfigStatus {
            auth_url: t.auth_url.clone(),
            api_url: t.api_url.clone(),
            auth_ca_fingerprint: t.auth_ca_fingerprint.clone(),
            ..Default::default()
        };
        assert!(t.is_in(Some(&stored)));
        let renewed = Told { auth_ca_fingerprint: Some("cd".into()), ..told() };
        assert!(!renewed.is_in(Some(&stored)), "a new CA");
        let no_auth_url = Told { auth_url: None, ..told() };
        assert!(!no_auth_url.is_in(Some(&stored)), "a field we no longer tell is removed");
    }

    #[test]
    fn the_apply_body_holds_what_is_told_and_leaves_out_the_rest() {
        let body = Told { auth_url: None, ..told() }.apply_body();
        assert_eq!(body["metadata"]["name"], CLUSTER_CONFIG_NAME);
        assert_eq!(body["status"], json!({"apiUrl": "https://10.0.0.1:6443", "authCAFingerprint": "ab"}));
    }

    #[test]
    fn peers_approve_the_last_certificate_of_the_chain() {
        let (leaf, ca) = (CertificateDer::from(vec![1u8]), CertificateDer::from(vec![2u8]));
        let fp = crate::auth::client::fingerprint;
        assert_eq!(approved_fingerprint(&[leaf.clone(), ca.clone()]), Some(fp(&ca)));
        assert_eq!(approved_fingerprint(std::slice::from_ref(&leaf)), Some(fp(&leaf)));
        assert_eq!(approved_fingerprint(&[]), None);
    }
}
