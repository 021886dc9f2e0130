//! What we handed a peer follows us, and identities are renewed by their holders (SPEC §10),
//! on two real control planes with the `liqo-reconciler` binary (KUBEBUILDER_ASSETS; skips
//! loudly without it):
//! - when our API server's address changes, the kubeconfig we keep on the peer is written
//!   again within a health period, with no re-join (the same PeeringRequest), and the peering
//!   stays joined;
//! - with tokens of 10 minutes (the least a TokenRequest may ask for) on both sides, the
//!   peering is still healthy at 12 minutes: the identity the remote issued us and the
//!   kubeconfig we handed the remote were both renewed after 8.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use liqo_api::names::{peering_kubeconfig_secret, tenant_namespace};
use liqo_testenv::eventually;

/// The API server URL in the kubeconfig we keep on the remote.
async fn handed_server(t: &Two) -> Option<String> {
    let secrets = Api::<Secret>::namespaced(t.remote.clone(), &tenant_namespace(&t.home_id));
    let secret = secrets.get_opt(&peering_kubeconfig_secret(&t.home_id)).await.ok()??;
    let bytes = secret.data?.get("kubeconfig")?.0.clone();
    let config = kube::config::Kubeconfig::from_yaml(&String::from_utf8(bytes).ok()?).ok()?;
    config.clusters.first()?.cluster.as_ref()?.server.clone()
}

async fn joined(t: &Two) -> bool {
    let fc = Api::<liqo_api::ForeignCluster>::all(t.home.clone()).get_opt("to-remote").await.ok().flatten();
    fc.as_ref().is_some_and(outgoing_joined)
}

#[tokio::test]
async fn the_kubeconfig_we_keep_on_a_peer_follows_our_api_server_address() {
    let Some(mut t) = two_clusters().await else { return };
    peer_by_auth_url(&t.home, "to-remote", &t.remote_rec).await;
    fc_where(&t.home, "to-remote", "joined", outgoing_joined).await;
    let before = eventually("the kubeconfig handed", || handed_server(&t)).await;
    assert_eq!(before, t.home_cp.url);
    let request_uid = requests_of(&t.remote, &t.home_id).get(&t.home_id).await.unwrap().metadata.uid;

    // Our address changes (another name of the same API server): seen at the restart.
    let moved = t.home_cp.url.replace("127.0.0.1", "localhost");
    assert_ne!(moved, before);
    let token = reconciler_token_again(&t).await;
    restart_reconciler(&t.home_cp, &mut t.home_rec, "home", &token, &[&format!("--api-url={moved}")]);
    ready(&mut t.home_rec).await;
    // Seen by the first round of the new leader (once the killed one's Lease expired).
    eventually("the kubeconfig on the peer written again", || async { (handed_server(&t).await.as_deref() == Some(&moved)).then_some(()) })
        .await;
    let after = requests_of(&t.remote, &t.home_id).get(&t.home_id).await.unwrap().metadata.uid;
    assert_eq!(after, request_uid, "no re-join: the same PeeringRequest");
    assert!(event_count(&t.home, "KubeconfigRewritten", "to-remote").await >= 1);
    // The remote's broadcaster goes on with it.
    advertisement_status(&requests_of(&t.remote, &t.home_id), &t.home_id, liqo_api::AdvertisementState::Accepted, "Published").await;
    assert!(joined(&t).await);
}

/// A token of the home reconciler's ServiceAccount again (the one it ran with is still valid,
/// but its value is not kept by [`two_clusters`]).
async fn reconciler_token_again(t: &Two) -> String {
    liqo_testenv::service_account_token(&t.home, "liqo", "liqo-reconciler").await
}

#[tokio::test]
async fn ten_minute_identities_are_renewed_and_the_peering_outlives_them() {
    const LIFETIME: &str = "--token-lifetime-hours=0.1667";
    let Some(t) = two_clusters_flags(&[LIFETIME], &[LIFETIME]).await else { return };
    peer_by_auth_url(&t.home, "to-remote", &t.remote_rec).await;
    fc_where(&t.home, "to-remote", "joined", outgoing_joined).await;
    let joined_at = Instant::now();
    let request_uid = requests_of(&t.remote, &t.home_id).get(&t.home_id).await.unwrap().metadata.uid;
    // Past the tokens' first lifetime, checked once a minute that the peering stays.
    while joined_at.elapsed() < Duration::from_secs(12 * 60) {
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(joined(&t).await, "not joined {:?} after the join:\n{}", joined_at.elapsed(), log_tail(&t.home_rec));
    }
    let home_log = std::fs::read_to_string(&t.home_rec.log).unwrap();
    assert!(home_log.contains("renewed our identity on the remote"), "the identity renewed:\n{}", log_tail(&t.home_rec));
    assert!(event_count(&t.home, "IdentityRenewed", "to-remote").await >= 1);
    assert!(event_count(&t.home, "KubeconfigRewritten", "to-remote").await >= 1, "the kubeconfig handed renewed");
    assert!(metric(&t.remote_rec, r#"liqo_reconciler_auth_identity_requests_total{result="renewed"}"#).await >= 1.0);
    let after = requests_of(&t.remote, &t.home_id).get(&t.home_id).await.unwrap().metadata.uid;
    assert_eq!(after, request_uid, "no re-join: the same PeeringRequest");
    // Both directions of work still go: the remote advertises to us, and we reach it.
    let fc = fc_where(&t.home, "to-remote", "still joined", outgoing_joined).await;
    assert_eq!(phase(&fc, "RemoteReachable").map(|p| p.0).as_deref(), Some("True"));
    advertisement_status(&requests_of(&t.remote, &t.home_id), &t.home_id, liqo_api::AdvertisementState::Accepted, "Published").await;
}
