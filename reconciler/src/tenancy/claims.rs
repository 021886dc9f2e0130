//! Claims on a bound cluster ID that the auth service refused (protocol §10), shown where refused
//! requests are: folded into the ClusterConfig's `status.refusedRequests` (one entry per cluster
//! ID, the latest [`MAX_REFUSED_REQUESTS`], so strangers cannot fill it) at most once a second,
//! with the caller's address in the message, and told in a Warning Event `IdentityClaimed` on
//! the ForeignCluster of that ID where one exists.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use liqo_api::names::CLUSTER_CONFIG_NAME;
use liqo_api::{ClusterConfig, ForeignCluster, MAX_REFUSED_REQUESTS, RefusedRequest, merge_refusals};

use crate::reporting::events::Recorder;

/// Field manager of the claims written into `status.refusedRequests`.
pub const FIELD_MANAGER: &str = "liqo-auth";
/// How often claims are written, at most.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// Claims refused since the last write.
#[derive(Debug, Default)]
pub struct Claims {
    pending: Mutex<Vec<RefusedRequest>>,
}

/// The entry of a claim on `peer` from `from` refused with `why`, at `now` (pure).
pub fn entry(peer: &str, from: IpAddr, why: &str, now: Timestamp) -> RefusedRequest {
    RefusedRequest {
        cluster_id: peer.to_owned(),
        cluster_name: None,
        message: format!(
            "an identity for this cluster ID was claimed from {from} and refused: {why}; if the caller is that cluster and it lost its identity, free the ID: kubectl liqo free {peer}"
        ),
        first_time: Time(now),
        last_time: Time(now),
        count: 1,
    }
}

impl Claims {
    /// One more claim on `peer` from `from`, refused with `why`.
    pub fn record(&self, peer: &str, from: IpAddr, why: &str) {
        let one = entry(peer, from, why, Timestamp::now());
        if let Ok(mut pending) = self.pending.lock() {
            *pending = merge_refusals(&pending, &[one], MAX_REFUSED_REQUESTS);
        }
    }

    fn take(&self) -> Vec<RefusedRequest> {
        self.pending.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default()
    }

    fn put_back(&self, unwritten: &[RefusedRequest]) {
        if let Ok(mut pending) = self.pending.lock() {
            *pending = merge_refusals(&pending, unwritten, MAX_REFUSED_REQUESTS);
        }
    }

    /// Writes the claims every [`FLUSH_INTERVAL`] there are any, until `shutdown`.
    pub async fn write_until(
        self: Arc<Self>,
        client: Client,
        foreign: Store<ForeignCluster>,
        recorder: Recorder,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let writes = async {
            let mut tick = tokio::time::interval(FLUSH_INTERVAL);
            loop {
                tick.tick().await;
                let new = self.take();
                if new.is_empty() {
                    continue;
                }
                if let Err(e) = write(&client, &new).await {
                    tracing::warn!(error = %e, cause = "write_failed", "recording refused identity claims failed; retrying");
                    self.put_back(&new);
                    continue;
                }
                for claim in &new {
                    tell_its_foreign_cluster(&recorder, &foreign, claim).await;
                }
            }
        };
        tokio::select! {
            _ = writes => {}
            _ = shutdown => {}
        }
    }
}

/// Folds `new` into the ClusterConfig's `status.refusedRequests` as it stands now (the webhook
/// writes there too).
async fn write(client: &Client, new: &[RefusedRequest]) -> kube::Result<()> {
    let api = Api::<ClusterConfig>::all(client.clone());
    let current = api.get_opt(CLUSTER_CONFIG_NAME).await?.and_then(|cc| cc.status.map(|s| s.refused_requests)).unwrap_or_default();
    let merged = merge_refusals(&current, new, MAX_REFUSED_REQUESTS);
    let body = serde_json::json!({
        "apiVersion": "config.liqo.io/v1alpha1", "kind": "ClusterConfig", "status": {"refusedRequests": merged}
    });
    api.patch_status(CLUSTER_CONFIG_NAME, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(body)).await.map(drop)
}

async fn tell_its_foreign_cluster(recorder: &Recorder, foreign: &Store<ForeignCluster>, claim: &RefusedRequest) {
    let Some(fc) = foreign.find(|f| f.spec.remote_cluster_id() == Some(claim.cluster_id.as_str())) else { return };
    let note = format!(
        "{} ({}× since {}); if that is this peer and it lost its identity, free it: kubectl liqo free {}",
        claim.message, claim.count, claim.first_time.0, claim.cluster_id
    );
    crate::reporting::events::publish(Some(recorder), &*fc, true, "Authenticate", "IdentityClaimed", note).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_names_the_id_the_address_and_the_time() {
        let now: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
        let e = entry("abc", "192.0.2.7".parse().unwrap(), "bound", now);
        assert_eq!(e.cluster_id, "abc");
        assert!(e.message.contains("192.0.2.7") && e.message.contains("bound"), "{}", e.message);
        assert!(e.message.ends_with("kubectl liqo free abc"), "the way to free it is shown wherever the claim is: {}", e.message);
        assert_eq!(e.first_time.0, now);
        let claims = Claims::default();
        for _ in 0..3 {
            claims.record("abc", "192.0.2.7".parse().unwrap(), "bound");
        }
        for i in 0..(MAX_REFUSED_REQUESTS + 5) {
            claims.record(&format!("id-{i}"), "192.0.2.8".parse().unwrap(), "bound");
        }
        let taken = claims.take();
        assert_eq!(taken.len(), MAX_REFUSED_REQUESTS, "bounded: strangers cannot fill it");
        assert!(claims.take().is_empty());
    }
}
