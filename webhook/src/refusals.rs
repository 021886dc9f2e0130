//! The requesters our `peeringPolicy` refused, shown to this cluster's operator without
//! anything a stranger could use to fill the cluster: folded into the ClusterConfig's
//! `status.refusedRequests` (one entry per cluster, the latest [`MAX_REFUSED_REQUESTS`]) at most
//! once per interval, and one Warning Event (folded into a series by the recorder) on the
//! requester's ForeignCluster where one exists: `PeeringRefused` for a refusal by policy,
//! `IdentityClaimed` for a request claiming an ID bound to another holder (as the auth service
//! tells a refused `/identity`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource};
use liqo_api::names::CLUSTER_CONFIG_NAME;
use liqo_api::{ClusterConfig, ForeignCluster, MAX_REFUSED_REQUESTS, RefusedRequest, merge_refusals};

use crate::denial::Requester;

/// Field manager of `status.refusedRequests`.
pub const FIELD_MANAGER: &str = "liqo-webhook";
/// How often refusals are written, at most.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// Refusals seen since the last write.
#[derive(Debug, Default)]
pub struct Refusals {
    pending: Mutex<Vec<RefusedRequest>>,
    /// The cluster IDs among them whose latest refusal was a claim on a bound ID.
    claims: Mutex<BTreeSet<String>>,
}

impl Refusals {
    /// One more refusal of `who`, now.
    pub fn record(&self, who: &Requester, message: &str) {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let one = RefusedRequest {
            cluster_id: who.cluster_id.clone(),
            cluster_name: who.cluster_name.clone(),
            message: message.to_owned(),
            first_time: now.clone(),
            last_time: now,
            count: 1,
        };
        if let Ok(mut pending) = self.pending.lock() {
            *pending = merge_refusals(&pending, &[one], MAX_REFUSED_REQUESTS);
        }
        if let Ok(mut claims) = self.claims.lock() {
            if who.claim {
                claims.insert(who.cluster_id.clone());
            } else {
                claims.remove(&who.cluster_id);
            }
        }
    }

    fn take(&self) -> Vec<RefusedRequest> {
        self.pending.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default()
    }

    /// Whether the latest refusal of `cluster_id` was a claim on a bound ID; forgets it.
    fn was_claim(&self, cluster_id: &str) -> bool {
        self.claims.lock().map(|mut c| c.remove(cluster_id)).unwrap_or(false)
    }

    fn put_back(&self, unwritten: &[RefusedRequest]) {
        if let Ok(mut pending) = self.pending.lock() {
            *pending = merge_refusals(&pending, unwritten, MAX_REFUSED_REQUESTS);
        }
    }
}

/// Writes the refusals every [`FLUSH_INTERVAL`] they are any, for the process's life.
pub fn spawn_writer(refusals: Arc<Refusals>, client: Client, config: Store<ClusterConfig>, foreign: Store<ForeignCluster>) {
    let reporter = Reporter { controller: "liqo-webhook".into(), instance: std::env::var("POD_NAME").ok() };
    let recorder = Recorder::new(client.clone(), reporter);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(FLUSH_INTERVAL);
        loop {
            tick.tick().await;
            let new = refusals.take();
            if new.is_empty() {
                continue;
            }
            if let Err(e) = write(&client, &config, &new).await {
                tracing::warn!(error = %e, cause = "write_failed", "recording refused peering requests failed; retrying");
                refusals.put_back(&new);
                continue;
            }
            for r in &new {
                let claim = refusals.was_claim(&r.cluster_id);
                tell_its_foreign_cluster(&recorder, &foreign, r, claim).await;
            }
        }
    });
}

/// Folds `new` into the ClusterConfig's `status.refusedRequests` as the store last saw it.
async fn write(client: &Client, config: &Store<ClusterConfig>, new: &[RefusedRequest]) -> kube::Result<()> {
    let current = config
        .get(&ObjectRef::new(CLUSTER_CONFIG_NAME))
        .and_then(|cc| cc.status.as_ref().map(|s| s.refused_requests.clone()))
        .unwrap_or_default();
    let merged = merge_refusals(&current, new, MAX_REFUSED_REQUESTS);
    let body = serde_json::json!({
        "apiVersion": "config.liqo.io/v1alpha1", "kind": "ClusterConfig", "status": {"refusedRequests": merged}
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Api::<ClusterConfig>::all(client.clone()).patch_status(CLUSTER_CONFIG_NAME, &params, &Patch::Apply(body)).await.map(drop)
}

/// The Warning Event's reason and note for `r`, refused as a claim on a bound ID or by policy.
fn event_of(r: &RefusedRequest, claim: bool) -> (&'static str, String) {
    if claim {
        let note = format!(
            "a request for cluster ID {} from someone other than the cluster holding it here was refused ({}× since {}): {}",
            r.cluster_id, r.count, r.first_time.0, r.message
        );
        return ("IdentityClaimed", note);
    }
    let note = format!(
        "cluster {} asked to peer and was refused ({}× since {}): {}; to accept it, set join: true here, approve its fingerprint, or add it to peeringAllowList",
        r.cluster_id, r.count, r.first_time.0, r.message
    );
    ("PeeringRefused", note)
}

async fn tell_its_foreign_cluster(recorder: &Recorder, foreign: &Store<ForeignCluster>, r: &RefusedRequest, claim: bool) {
    let Some(fc) = foreign.find(|f| f.spec.remote_cluster_id() == Some(r.cluster_id.as_str())) else { return };
    let (reason, note) = event_of(r, claim);
    let ev = Event { type_: EventType::Warning, reason: reason.into(), note: Some(note), action: "Admission".into(), secondary: None };
    if let Err(e) = recorder.publish(&ev, &fc.object_ref(&())).await {
        tracing::debug!(error = %e, reason, "publishing a refusal's Event failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(id: &str, claim: bool) -> Requester {
        Requester { cluster_id: id.into(), cluster_name: None, claim }
    }

    #[test]
    fn a_claim_on_a_bound_id_is_told_as_one_and_a_policy_refusal_as_one() {
        let r = Refusals::default();
        r.record(&who("a", true), "cluster ID a is bound ... (kubectl liqo free a)");
        r.record(&who("b", false), "refused by peeringPolicy");
        let taken = r.take();
        assert_eq!(taken.len(), 2);
        let of = |id: &str| taken.iter().find(|e| e.cluster_id == id).unwrap().clone();
        let claim = r.was_claim("a");
        let (reason, note) = event_of(&of("a"), claim);
        assert_eq!(reason, "IdentityClaimed");
        assert!(note.contains("kubectl liqo free a") && !note.contains("peeringAllowList"), "{note}");
        assert!(!r.was_claim("a"), "told once");
        let (reason, note) = event_of(&of("b"), r.was_claim("b"));
        assert_eq!(reason, "PeeringRefused");
        assert!(note.contains("peeringAllowList"), "{note}");
        // The latest refusal of an ID decides: a claim, then a policy refusal, is a policy one.
        r.record(&who("c", true), "bound");
        r.record(&who("c", false), "policy");
        assert!(!r.was_claim("c"));
    }
}
