//! What we handed a peer follows us (protocol §10), on two real control planes with the
//! `liqo-reconciler` binary (KUBEBUILDER_ASSETS; skips loudly without it): when our API
//! server's address changes, the kubeconfig we keep on the peer is written again within a
//! health period, with no re-join (the same PeeringRequest), and the peering stays joined.
//! Identities of a year (an earlier release's, or before the lifetime was shortened) are
//! renewed to the lifetime the issuer now gives, both ways, with no re-join.
//! (Renewal over 12 minutes of 10-minute tokens: `peering_faults.rs`, where it runs beside the
//! other long tests.)

mod common;

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

/// Waits for an Event of `reason` about our ForeignCluster: it is sent after the write it tells
/// of, so it is waited for, not raced.
async fn told(t: &Two, reason: &str) {
    eventually(reason, || async { (event_count(&t.home, reason, "to-remote").await >= 1).then_some(()) }).await;
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
    told(&t, "KubeconfigRewritten").await;
    // The remote's broadcaster goes on with it.
    advertisement_status(&requests_of(&t.remote, &t.home_id), &t.home_id, liqo_api::AdvertisementState::Created, "Published").await;
    assert!(joined(&t).await);
}

/// How long the token in a kubeconfig lasts, from its own `iat` and `exp`.
fn token_life(kubeconfig: &[u8]) -> Option<std::time::Duration> {
    let token = liqo_reconciler::remote::peer::token_of(std::str::from_utf8(kubeconfig).ok()?)?;
    let (issued, expires) = liqo_reconciler::tenancy::binding::token_times(&token)?;
    Some(expires.duration_since(issued).unsigned_abs())
}

/// The life of the token we hold on the remote (our identity) and of the one we handed it.
async fn lives(t: &Two) -> Option<(std::time::Duration, std::time::Duration)> {
    let ours = Api::<Secret>::namespaced(t.home.clone(), "liqo").get_opt("to-remote-identity").await.ok()??;
    let handed = Api::<Secret>::namespaced(t.remote.clone(), &tenant_namespace(&t.home_id))
        .get_opt(&peering_kubeconfig_secret(&t.home_id))
        .await
        .ok()??;
    Some((token_life(&ours.data?.get("kubeconfig")?.0)?, token_life(&handed.data?.get("kubeconfig")?.0)?))
}

#[tokio::test]
async fn identities_of_a_year_are_renewed_to_the_lifetime_now_given_with_no_rejoin() {
    const DAY: u64 = 24 * 3600;
    let year = ["--token-lifetime-hours=8760"];
    let Some(mut t) = two_clusters_flags(&year, &year).await else { return };
    peer_by_auth_url(&t.home, "to-remote", &t.remote_rec).await;
    fc_where(&t.home, "to-remote", "joined", outgoing_joined).await;
    let (ours, handed) = eventually("both identities", || lives(&t)).await;
    assert!(ours.as_secs() > 300 * DAY && handed.as_secs() > 300 * DAY, "a year each: {ours:?}, {handed:?}");
    let request_uid = requests_of(&t.remote, &t.home_id).get(&t.home_id).await.unwrap().metadata.uid;

    // Both upgraded to the shipped lifetime (a week), the issuer first.
    let token = liqo_testenv::service_account_token(&t.remote, "liqo", "liqo-reconciler").await;
    restart_reconciler(&t.remote_cp, &mut t.remote_rec, "remote", &token, &[]);
    ready(&mut t.remote_rec).await;
    let token = reconciler_token_again(&t).await;
    restart_reconciler(&t.home_cp, &mut t.home_rec, "home", &token, &[]);
    ready(&mut t.home_rec).await;
    let week = || async {
        let (ours, handed) = lives(&t).await?;
        (ours.as_secs() <= 7 * DAY && handed.as_secs() <= 7 * DAY).then_some((ours, handed))
    };
    let renewed = eventually("both identities renewed to a week", week).await;
    eprintln!("renewed to {renewed:?}");
    let after = requests_of(&t.remote, &t.home_id).get(&t.home_id).await.unwrap().metadata.uid;
    assert_eq!(after, request_uid, "no re-join: the same PeeringRequest");
    told(&t, "IdentityRenewed").await;
    told(&t, "KubeconfigRewritten").await;
    fc_where(&t.home, "to-remote", "joined", outgoing_joined).await;
}

/// A token of the home reconciler's ServiceAccount again (the one it ran with is still valid,
/// but its value is not kept by [`two_clusters`]).
async fn reconciler_token_again(t: &Two) -> String {
    liqo_testenv::service_account_token(&t.home, "liqo", "liqo-reconciler").await
}
