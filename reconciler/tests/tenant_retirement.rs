//! When a peer's tenant namespace is retired, on a real API server (KUBEBUILDER_ASSETS; skips
//! loudly without it): a namespace kept by an identity issued just before a direction ended is
//! looked at again and retired once the peer had time to use it and did not (the chaos soak,
//! seed 7, found one left for good), and kept when the peer did write its request. While we
//! join that peer ourselves, the namespace stays and the identity alone is looked at again and
//! revoked (the chaos soak, seed 2, found one kept bound until it expired).

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{Store, store};
use kube::runtime::watcher;
use liqo_api::names::{ANNOTATION_ISSUED_AT, tenant_namespace};
use liqo_api::{ForeignCluster, PeeringRequest, PeeringRequestSpec};
use liqo_reconciler::tenancy::access::peer_identity;
use liqo_reconciler::tenancy::retirement::{USE_WITHIN, retire};
use liqo_testenv::{ControlPlane, install_liqo};

const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

/// Issues `PEER` an identity in its tenant namespace now, as the auth service does.
async fn issue_identity(client: &Client) {
    liqo_reconciler::tenancy::tenant::ensure(client, PEER, "test").await.unwrap();
    let mut access = peer_identity(PEER);
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    access.service_account.metadata.annotations = Some([(ANNOTATION_ISSUED_AT.to_owned(), now)].into());
    liqo_reconciler::tenancy::tenant::grant(client, "test", PEER, &access).await.unwrap();
}

async fn going(client: &Client) -> bool {
    let ns = Api::<Namespace>::all(client.clone()).get_opt(&tenant_namespace(PEER)).await.unwrap();
    ns.is_none_or(|n| n.metadata.deletion_timestamp.is_some())
}

async fn has_identity(client: &Client) -> bool {
    identities_of(client, PEER).get_opt(peer_identity(PEER).service_account_name()).await.unwrap().is_some()
}

/// A control plane where `PEER` was issued an identity a moment after a direction of its
/// peering ended (a request deleted in the same second as a join's identity: its deletion time
/// is whole seconds), and the retirement that ending asked for, with our ForeignClusters
/// `foreign`; `None` without the assets.
async fn identity_fresher_than_the_departure_with(foreign: Store<ForeignCluster>) -> Option<(ControlPlane, Client)> {
    let cp = ControlPlane::start_or_skip().await?;
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    issue_identity(&admin).await;
    let ended = k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(1);
    retire(&admin, &foreign, PEER, ended).await.unwrap();
    Some((cp, admin))
}

/// [`identity_fresher_than_the_departure_with`] no ForeignCluster: we do not join `PEER`.
async fn identity_fresher_than_the_departure() -> Option<(ControlPlane, Client)> {
    identity_fresher_than_the_departure_with(store().0).await
}

#[tokio::test]
async fn a_namespace_kept_by_an_identity_nobody_used_is_retired_once_the_peer_had_time_to_use_it() {
    let Some((_cp, admin)) = identity_fresher_than_the_departure().await else { return };
    assert!(!going(&admin).await, "kept at first: the peer may be about to write its request");
    assert!(has_identity(&admin).await);

    let started = std::time::Instant::now();
    liqo_testenv::eventually("the unused tenant namespace retired", || async { going(&admin).await.then_some(()) }).await;
    assert!(started.elapsed() >= USE_WITHIN - Duration::from_millis(1500), "not before the peer had time to use it");
    assert!(!has_identity(&admin).await, "its identity revoked");
}

#[tokio::test]
async fn a_namespace_whose_fresh_identity_wrote_its_request_stays() {
    let Some((_cp, admin)) = identity_fresher_than_the_departure().await else { return };
    // The peer writes its request with the new identity.
    let spec: PeeringRequestSpec = serde_json::from_value(serde_json::json!({
        "clusterIdentity": {"clusterID": PEER, "clusterName": "peer"}, "namespace": "liqo",
        "kubeConfigRef": {"name": format!("pr-kubeconfig-{PEER}"), "namespace": tenant_namespace(PEER)},
        "authUrl": "https://peer:8443"
    }))
    .unwrap();
    requests_of(&admin, PEER).create(&PostParams::default(), &PeeringRequest::new(PEER, spec)).await.unwrap();
    // Past the look again: still there, with the identity.
    tokio::time::sleep(USE_WITHIN + Duration::from_secs(2)).await;
    assert!(!going(&admin).await, "the namespace holds the peer's request");
    assert!(has_identity(&admin).await);
}

/// While we join the peer, its tenant namespace stays for our direction, and the identity it
/// requested with goes with its request: one issued in the same second as the request's
/// deletion is looked at again once the peer had time to use it, and revoked, so that the
/// peer's next join is a first claim again (protocol §10), not refused as bound until it expires.
#[tokio::test]
async fn while_we_join_the_peer_its_fresh_unused_identity_is_looked_at_again_and_revoked() {
    let (foreign, mut writer) = store::<ForeignCluster>();
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "to-peer", "uid": "u1"},
        "spec": {"clusterIdentity": {"clusterID": PEER}, "join": true}
    }))
    .unwrap();
    writer.apply_watcher_event(&watcher::Event::Apply(fc));
    let Some((_cp, admin)) = identity_fresher_than_the_departure_with(foreign).await else { return };
    assert!(has_identity(&admin).await, "kept at first: the peer may be about to write its request");

    let started = std::time::Instant::now();
    liqo_testenv::eventually("the unused identity revoked", || async { (!has_identity(&admin).await).then_some(()) }).await;
    assert!(started.elapsed() >= USE_WITHIN - Duration::from_millis(1500), "not before the peer had time to use it");
    assert!(!going(&admin).await, "the namespace stays for our own join");
}
