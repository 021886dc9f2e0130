//! Faults that take state away, on two real API servers (envtest convention:
//! `KUBEBUILDER_ASSETS`; skips loudly without it): the peering comes back with nothing typed on
//! either side, and no stranger gains from it (protocol §10).
//!
//! - The issuer's service-account signing key replaced with no overlap: every token it issued is
//!   void, so our identity there proves nothing; we prove we hold our cluster ID with our holder
//!   key (a challenge of the issuer, signed), and get a new identity. A stranger's proof, or a
//!   challenge used twice, is refused with 409.

mod common;

use common::{Two, fc_where, outgoing_joined, peer_by_auth_url, restart_reconciler, two_clusters};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;
use liqo_api::names::{ANNOTATION_HOLDER_KEY, peer_service_account, tenant_namespace};
use liqo_reconciler::cluster::holder_key::HolderKey;
use liqo_reconciler::remote::auth::client::{self, Verify};
use liqo_reconciler::remote::auth::wire::{IdentityRequest, Proof};
use liqo_reconciler::tenancy::proof;

const FC: &str = "the-remote";

/// The holder key recorded on our identity's ServiceAccount on the remote.
async fn recorded_key(t: &Two) -> Option<String> {
    let sas: Api<ServiceAccount> = Api::namespaced(t.remote.clone(), &tenant_namespace(&t.home_id));
    let sa = sas.get_opt(&peer_service_account(&t.home_id)).await.ok()??;
    sa.metadata.annotations?.get(ANNOTATION_HOLDER_KEY).cloned()
}

/// `call`'s answer once the auth service's per-source limit lets it through (every caller here
/// shares 127.0.0.1 with the genuine peer).
async fn past_the_limit<T, F, Fut>(what: &str, call: F) -> liqo_reconciler::machinery::error::Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = liqo_reconciler::machinery::error::Result<T>>,
{
    liqo_testenv::eventually(what, || async {
        match call().await {
            Err(e) if e.answered() == Some(429) => None,
            answer => Some(answer),
        }
    })
    .await
}

/// A stranger who knows our ID and the remote's, with a key of its own: refused with 409, and
/// a challenge answered once is not taken again.
async fn a_strangers_proof_is_refused(t: &Two) {
    let base = &t.remote_rec.auth_url;
    let stranger = HolderKey::from_pkcs8(&HolderKey::generate()).unwrap();
    let challenge = past_the_limit("a challenge", || client::challenge(base, &Verify::Nothing, &t.home_id)).await.unwrap().challenge;
    let signature = stranger.sign(&proof::message(&t.remote_id, &t.home_id, &challenge));
    let request = IdentityRequest {
        holder_key: Some(stranger.public()),
        proof: Some(Proof { challenge, signature }),
        ..IdentityRequest::first(&t.home_id, String::new())
    };
    let refused = past_the_limit("the stranger's proof", || client::identity(base, &Verify::Nothing, &request)).await.unwrap_err();
    assert_eq!(refused.answered(), Some(409), "{refused}");
    assert!(refused.to_string().contains("BadSignature"), "{refused}");
    let again = past_the_limit("the same proof again", || client::identity(base, &Verify::Nothing, &request)).await.unwrap_err();
    assert_eq!(again.answered(), Some(409), "{again}");
    assert!(again.to_string().contains("UnknownChallenge"), "a challenge is single-use: {again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_proves_its_id_by_key_after_the_issuers_signing_key_is_replaced() {
    let Some(mut t) = two_clusters().await else { return };
    peer_by_auth_url(&t.home, FC, &t.remote_rec).await;
    fc_where(&t.home, FC, "joined", outgoing_joined).await;
    // Our key is recorded with the identity the remote issued us at our first claim.
    let key = liqo_testenv::eventually("our holder key recorded on the remote", || recorded_key(&t)).await;
    assert!(proof::public_key(&key).is_some(), "{key}");

    // The remote's signing key replaced with no overlap; its reconciler restarted with a token
    // of the new key, as its pod would be.
    t.remote_cp.replace_signing_key().await;
    let token = liqo_testenv::service_account_token(&t.remote, "liqo", "liqo-reconciler").await;
    restart_reconciler(&t.remote_cp, &mut t.remote_rec, "remote", &token, &[]);
    common::ready(&mut t.remote_rec).await;

    // Our identity there is void (401): we prove we hold our ID, and are joined again with a new
    // identity, the same key recorded, nothing typed.
    liqo_testenv::eventually("IdentityReclaimed", || liqo_testenv::event(&t.home, "IdentityReclaimed", FC)).await;
    let fc = fc_where(&t.home, FC, "joined again", |f| {
        outgoing_joined(f) && common::phase(f, "Authenticated").is_some_and(|(status, _, _)| status == "True")
    })
    .await;
    assert_eq!(recorded_key(&t).await.as_deref(), Some(key.as_str()), "{:?}", fc.status);
    a_strangers_proof_is_refused(&t).await;
    assert_eq!(recorded_key(&t).await.as_deref(), Some(key.as_str()), "the stranger changed nothing");
}
