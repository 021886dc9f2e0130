//! Who may be a cluster ID here (protocol §10), with the `liqo-reconciler` binary on a real API
//! server (KUBEBUILDER_ASSETS; skips loudly without it), its auth service called as strangers
//! and peers call it, with the shipped defaults but a 2 s health period:
//! - a cluster ID is bound to its first holder: another caller gets 409, and the claim is
//!   recorded (ClusterConfig status, metric); the holder renews with its own credential; a
//!   person frees the ID and the next caller gets it;
//! - an identity nobody uses is retired with its tenant namespace after three health periods,
//!   also when the reconciler restarted right after issuing it;
//! - identities waiting unused are capped: beyond, 503 with Retry-After, until the sweep
//!   retires them;
//! - a bound ID is claimed by no other path: our webhook refuses an anonymous request of the
//!   opt-in overlay (and an admin's) for it in `/identity`'s words, records the claim and tells
//!   it; an ID nobody holds still peers anonymously; and a request stored before its ID was bound
//!   is no longer served once it is.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;

use common::*;
use k8s_openapi::api::core::v1::{Namespace, SecretReference, ServiceAccount};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::holder::bound_message;
use liqo_api::names::LABEL_TENANT_NAMESPACE;
use liqo_api::names::peering_kubeconfig_secret;
use liqo_api::names::{CLUSTER_CONFIG_NAME, LABEL_IDENTITY, peer_service_account, tenant_namespace};
use liqo_api::{ClusterConfig, ClusterIdentity, ForeignCluster, ForeignClusterSpec, PeeringRequest, PeeringRequestSpec};
use liqo_testenv::https::{Answer, request};
use liqo_testenv::{ControlPlane, eventually, install_liqo};
use serde_json::json;

const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
const OTHER: &str = "1f3c0bd4-8a0e-4b7e-9a57-4e5a2c2d9c11";
const THIRD: &str = "7d9e2c51-3b4a-4f0e-8c2d-1a2b3c4d5e6f";

struct Hub {
    cp: ControlPlane,
    admin: Client,
    rec: Reconciler,
    token: String,
}

/// A control plane with Liqo installed and its reconciler ready, with `flags` and a burst of
/// identities large enough for one test from one address.
async fn hub(flags: &[&str]) -> Option<Hub> {
    let cp = ControlPlane::start_or_skip().await?;
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let token = reconciler_token(&admin).await;
    let mut all: Vec<&str> = flags.to_vec();
    if !flags.iter().any(|f| f.starts_with("--auth-identity-burst")) {
        all.push("--auth-identity-burst=100");
    }
    let mut rec = start_reconciler_with(&cp, "hub", &token, &all);
    ready(&mut rec).await;
    Some(Hub { cp, admin, rec, token })
}

impl Hub {
    fn auth_addr(&self) -> SocketAddr {
        let port: u16 = self.rec.auth_url.rsplit(':').next().unwrap().parse().unwrap();
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn ca(&self) -> PathBuf {
        self.cp.path().join("hub-auth-certs").join("ca.crt")
    }

    /// `POST /identity` for `id`, with the current token of its identity when renewing.
    /// Asks for an identity with a token that is not this cluster's: refused (403) after
    /// every other check, so that it issues nothing whatever it finds.
    async fn probe(&self, id: &str) -> Answer {
        let body = json!({"clusterID": id, "token": "not-this-clusters-token"});
        request(self.auth_addr(), &self.ca(), "POST", "/identity", Some(body)).await
    }

    async fn claim(&self, id: &str, current: Option<&str>) -> Answer {
        let mut body = json!({"clusterID": id, "token": ""});
        if let Some(t) = current {
            body["currentToken"] = json!(t);
        }
        request(self.auth_addr(), &self.ca(), "POST", "/identity", Some(body)).await
    }

    fn identity(&self, id: &str) -> Api<ServiceAccount> {
        Api::namespaced(self.admin.clone(), &tenant_namespace(id))
    }

    async fn identity_state(&self, id: &str) -> Option<String> {
        let sa = self.identity(id).get_opt(&peer_service_account(id)).await.unwrap()?;
        sa.metadata.labels?.get(LABEL_IDENTITY).cloned()
    }

    async fn retired(&self, id: &str) -> bool {
        let ns = Api::<Namespace>::all(self.admin.clone()).get_opt(&tenant_namespace(id)).await.unwrap();
        let sa = self.identity(id).get_opt(&peer_service_account(id)).await.unwrap();
        ns.is_none_or(|n| n.metadata.deletion_timestamp.is_some()) && sa.is_none()
    }
}

/// An anonymous caller's request of cluster `id` in the Liqo namespace (Liqo's manual peering
/// form, through the opt-in overlay).
fn anonymous_request(id: &str) -> PeeringRequest {
    let mut pr = PeeringRequest::new(
        id,
        PeeringRequestSpec {
            cluster_identity: Some(ClusterIdentity { cluster_id: id.into(), cluster_name: Some("stranger".into()) }),
            namespace: Some("liqo".into()),
            kube_config_ref: Some(SecretReference { name: Some(peering_kubeconfig_secret(id)), namespace: Some("liqo".into()) }),
            auth_url: None,
            ..Default::default()
        },
    );
    pr.metadata.namespace = Some("liqo".into());
    pr
}

fn refusal(r: Result<PeeringRequest, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn token_of(answer: &Answer) -> String {
    let kubeconfig = answer.json()["kubeconfig"].as_str().unwrap().to_owned();
    liqo_reconciler::remote::peer::token_of(&kubeconfig).expect("a token in the kubeconfig")
}

#[tokio::test]
async fn a_cluster_id_is_bound_to_its_first_holder_renewed_by_it_and_freed_by_a_person() {
    let Some(h) = hub(&[]).await else { return };
    // The first caller takes the ID, waiting to be used.
    let first = h.claim(PEER, None).await;
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(h.identity_state(PEER).await.as_deref(), Some("waiting"));
    let holder_token = token_of(&first);

    // Anyone else asking for it: 409, its own reason, nothing issued.
    let stranger = h.claim(PEER, None).await;
    assert_eq!(stranger.status, 409, "{}", stranger.text());
    let message = stranger.json()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("bound") && message.contains(&format!("kubectl liqo free {PEER}")), "{message}");
    // A token that is not that identity's proves nothing.
    let forged = h.claim(PEER, Some("not-a-token")).await;
    assert_eq!(forged.status, 409, "{}", forged.text());
    // The claims are recorded where refused requests are shown, with the caller's address,
    // and counted.
    let configs: Api<ClusterConfig> = Api::all(h.admin.clone());
    let refused = eventually("the claim recorded in the ClusterConfig's status", || async {
        let cc = configs.get_opt(CLUSTER_CONFIG_NAME).await.ok()??;
        cc.status?.refused_requests.into_iter().find(|r| r.cluster_id == PEER)
    })
    .await;
    assert!(refused.message.contains("127.0.0.1"), "{}", refused.message);
    assert!(refused.count >= 1);
    assert_eq!(metric(&h.rec, r#"liqo_reconciler_auth_identity_requests_total{result="bound"}"#).await, 2.0);

    // The holder renews with its own credential: a new token, the same ID, marked in use.
    let renewed = h.claim(PEER, Some(&holder_token)).await;
    assert_eq!(renewed.status, 201, "{}", renewed.text());
    assert_ne!(token_of(&renewed), holder_token);
    assert_eq!(h.identity_state(PEER).await.as_deref(), Some("in-use"));
    assert_eq!(metric(&h.rec, r#"liqo_reconciler_auth_identity_requests_total{result="renewed"}"#).await, 1.0);

    // A person frees the ID (what `kubectl liqo free` does): the next caller gets it.
    h.identity(PEER).delete(&peer_service_account(PEER), &Default::default()).await.unwrap();
    let after = h.claim(PEER, None).await;
    assert_eq!(after.status, 201, "{}", after.text());
}

#[tokio::test]
async fn an_identity_nobody_uses_is_retired_even_across_a_restart() {
    let Some(mut h) = hub(&[]).await else { return };
    let kept = h.claim(OTHER, None).await;
    assert_eq!(kept.status, 201, "{}", kept.text());
    // Issued, then the reconciler restarts at once: what it decides on is stored.
    let unused = h.claim(PEER, None).await;
    assert_eq!(unused.status, 201, "{}", unused.text());
    let started = std::time::Instant::now();
    let token = h.token.clone();
    restart_reconciler(&h.cp, &mut h.rec, "hub", &token, &["--auth-identity-burst=100"]);
    ready(&mut h.rec).await;
    // OTHER is used: a request of it stands in its tenant namespace, written with its identity.
    let other = h.admin.clone();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("pr-kubeconfig-{OTHER}")}, "stringData": {"kubeconfig": "x"}});
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(secret).unwrap();
    Api::namespaced(other, &tenant_namespace(OTHER)).create(&Default::default(), &secret).await.unwrap();

    eventually("the unused identity retired with its tenant namespace", || async { h.retired(PEER).await.then_some(()) }).await;
    assert!(started.elapsed() >= std::time::Duration::from_secs(5), "not before three health periods (6 s): {:?}", started.elapsed());
    assert!(!h.retired(OTHER).await, "an identity whose peer wrote in its namespace stays");
    eventually("the used identity marked in use", || async { (h.identity_state(OTHER).await.as_deref() == Some("in-use")).then_some(()) })
        .await;
    assert!(metric(&h.rec, "liqo_reconciler_identities_retired_total").await >= 1.0);
    // The retired ID is free again (once its namespace is gone: that takes the namespace
    // controller).
    if !h.cp.controllers() {
        return;
    }
    eventually("the retired ID issued anew", || async { (h.claim(PEER, None).await.status == 201).then_some(()) }).await;
}

#[tokio::test]
async fn identities_waiting_unused_are_capped_until_the_sweep_retires_them() {
    let Some(h) = hub(&["--max-waiting-identities=2"]).await else { return };
    assert_eq!(h.claim(PEER, None).await.status, 201);
    assert_eq!(h.claim(OTHER, None).await.status, 201);
    let over = h.claim(THIRD, None).await;
    assert_eq!(over.status, 503, "{}", over.text());
    let retry: u64 = over.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=10).contains(&retry), "Retry-After {retry}");
    assert!(over.json()["message"].as_str().unwrap().contains("not used yet"));
    assert_eq!(metric(&h.rec, r#"liqo_reconciler_auth_identity_requests_total{result="capped"}"#).await, 1.0);
    assert_eq!(metric(&h.rec, "liqo_reconciler_waiting_identities_cap").await, 2.0);
    // A genuine peer retrying gets in once the strangers' identities are retired.
    eventually("a third identity issued once the unused ones are retired", || async {
        (h.claim(THIRD, None).await.status == 201).then_some(())
    })
    .await;
    eventually("both unused identities retired", || async { (h.retired(PEER).await && h.retired(OTHER).await).then_some(()) }).await;
}

#[tokio::test]
async fn a_missing_part_of_the_install_is_said_and_no_identity_is_issued_without_it() {
    let Some(h) = hub(&[]).await else { return };
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(h.admin.clone());
    let requester = roles.get("liqo-peer-requester").await.unwrap();
    // The parts are watched: the auth service learns of the deletion as the API server tells
    // it (a probe that would be refused anyway answers 503 from then on), not up to 30 s later.
    eventually("every part of the install watched", || async {
        (metric(&h.rec, "liqo_reconciler_install_parts_watched").await == 5.0).then_some(())
    })
    .await;
    assert_eq!(h.probe(PEER).await.status, 403, "whole: a probe refused for its token only");
    let deleted = std::time::Instant::now();
    roles.delete("liqo-peer-requester", &Default::default()).await.unwrap();
    eventually("the deletion seen by the auth service", || async { (h.probe(PEER).await.status == 503).then_some(()) }).await;
    let seen = deleted.elapsed();
    eprintln!("the ClusterRole's deletion seen by the auth service {:.0} ms after it", seen.as_secs_f64() * 1000.0);
    assert!(seen < std::time::Duration::from_secs(5), "seen by its watch, not a look every 30 s: {seen:?}");
    let configs: Api<ClusterConfig> = Api::all(h.admin.clone());
    let condition = |status: &'static str| {
        let configs = configs.clone();
        async move {
            let cc = configs.get_opt(CLUSTER_CONFIG_NAME).await.ok()??;
            cc.status?.conditions.into_iter().find(|c| c.type_ == "PeerAccessInstalled" && c.status == status)
        }
    };
    let said = eventually("PeerAccessInstalled False in the ClusterConfig", || condition("False")).await;
    assert_eq!(said.reason, "PeerAccessMissing");
    assert!(
        said.message.contains("ClusterRole liqo-peer-requester") && said.message.contains("manifests/reconciler/peer-roles.yaml"),
        "{}",
        said.message
    );
    let refused = h.claim(PEER, None).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(refused.json()["message"].as_str().unwrap().contains("ClusterRole liqo-peer-requester"), "{}", refused.text());
    assert!(h.identity(PEER).get_opt(&peer_service_account(PEER)).await.unwrap().is_none(), "nothing issued");

    // Applied again: said, and identities are issued.
    let mut again = requester.clone();
    again.metadata = kube::api::ObjectMeta { name: Some("liqo-peer-requester".into()), ..Default::default() };
    roles.create(&Default::default(), &again).await.unwrap();
    let fixed = eventually("PeerAccessInstalled True in the ClusterConfig", || condition("True")).await;
    assert_eq!(fixed.reason, "PeerAccessReady");
    eventually("an identity issued once the install is whole", || async { (h.claim(PEER, None).await.status == 201).then_some(()) }).await;
}

#[tokio::test]
async fn identities_of_an_earlier_release_are_swept_too_once_unused() {
    let Some(mut h) = hub(&[]).await else { return };
    // As 0.2 issued them: stamped with their issue time, no state label; one unused, one whose
    // peer peers with us (its ForeignCluster says the request was accepted).
    for id in [PEER, OTHER] {
        liqo_reconciler::tenancy::tenant::ensure(&h.admin, id, "liqo-auth").await.unwrap();
        let mut access = liqo_reconciler::tenancy::access::peer_identity(id);
        let issued = (k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_hours(1)).to_string();
        access.service_account.metadata.annotations = Some([("discovery.liqo.io/issued-at".to_owned(), issued)].into());
        liqo_reconciler::tenancy::grant::grant_in(&h.admin, "liqo-auth", &access).await.unwrap();
    }
    let fc: liqo_api::ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": OTHER, "labels": {"discovery.liqo.io/cluster-id": OTHER}},
        "spec": {"clusterIdentity": {"clusterID": OTHER}, "join": false, "discoveryType": "IncomingPeering"}
    }))
    .unwrap();
    let fcs: Api<liqo_api::ForeignCluster> = Api::all(h.admin.clone());
    fcs.create(&Default::default(), &fc).await.unwrap();
    let status = json!({"status": {"incoming": {"joined": true, "peeringRequest": OTHER}}});
    fcs.patch_status(OTHER, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(status)).await.unwrap();
    // The upgrade: the reconciler of this release starts.
    let token = h.token.clone();
    restart_reconciler(&h.cp, &mut h.rec, "hub", &token, &["--auth-identity-burst=100"]);
    ready(&mut h.rec).await;
    eventually("the unused identity of before retired", || async { h.retired(PEER).await.then_some(()) }).await;
    eventually("the used one labelled in use", || async { (h.identity_state(OTHER).await.as_deref() == Some("in-use")).then_some(()) })
        .await;
    assert!(!h.retired(OTHER).await);
}

/// The worst caller of `/identity`: strangers on many addresses, each within its own rate limit
/// (the shipped 5 at once), asking for fresh cluster IDs all at once. The shipped cap holds
/// them (100 waiting at most, the rest 503 with Retry-After, nothing made for those), a genuine
/// peer on its own address gets in once the sweep retired them, and three health periods later
/// nothing of the strangers is left.
#[tokio::test]
async fn a_flood_from_many_addresses_is_held_at_the_cap_and_then_costs_nothing() {
    let Some(h) = hub(&["--auth-identity-burst=5"]).await else { return };
    let (addr, ca) = (h.auth_addr(), h.ca());
    let strangers = (0..150u32).map(|i| {
        let source = std::net::IpAddr::from([127, 0, 1, 10 + (i / 5) as u8]);
        let id = format!("{i:08x}-0000-4000-8000-000000000000");
        let ca = ca.clone();
        async move { liqo_testenv::https::request_from(source, addr, &ca, "POST", "/identity", json!({"clusterID": id, "token": ""})).await }
    });
    let answers = futures::future::join_all(strangers).await;
    let issued = answers.iter().filter(|a| a.status == 201).count();
    let capped: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
    assert_eq!(issued, 100, "exactly the cap: {:?}", answers.iter().map(|a| a.status).collect::<Vec<_>>());
    assert_eq!(capped.len(), 50);
    assert!(capped.iter().all(|a| a.headers.contains_key("retry-after")));
    let namespaces = || async {
        let lp = kube::api::ListParams::default().labels(&format!("{LABEL_TENANT_NAMESPACE}=true"));
        let all = Api::<Namespace>::all(h.admin.clone()).list_metadata(&lp).await.unwrap().items;
        all.iter().filter(|n| n.metadata.deletion_timestamp.is_none()).count()
    };
    assert_eq!(namespaces().await, 100, "a namespace for each identity issued, none for those refused");

    // A genuine peer on its own address: refused while the strangers' identities wait, in once
    // they are retired.
    let genuine = std::net::IpAddr::from([127, 0, 2, 1]);
    let ask = || liqo_testenv::https::request_from(genuine, addr, &ca, "POST", "/identity", json!({"clusterID": PEER, "token": ""}));
    // As a peer retries: after the Retry-After it is told.
    let started = std::time::Instant::now();
    let mut asked = 0;
    loop {
        let a = ask().await;
        asked += 1;
        if a.status == 201 {
            break;
        }
        assert!([503, 429].contains(&a.status), "{}: {}", a.status, a.text());
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the genuine peer still refused after 60 s: {}", a.text());
        let wait: u64 = a.headers["retry-after"].to_str().unwrap().parse().unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    }
    eprintln!("the genuine peer got its identity {:?} after its first refusal, at its {asked}th try", started.elapsed());
    assert!(metric(&h.rec, r#"liqo_reconciler_auth_identity_requests_total{result="capped"}"#).await >= 51.0);
    // Three health periods later the strangers cost nothing; the genuine peer's own unused
    // identity goes the same way: every tenant namespace, within three periods and a sweep of
    // its issue (and a margin for a loaded machine).
    let issued_last = std::time::Instant::now();
    eventually("no tenant namespace left", || async { (namespaces().await == 0).then_some(()) }).await;
    let took = issued_last.elapsed();
    assert!(took <= RETIRED_WITHIN, "the last tenant namespace retired {took:?} after its identity, past {RETIRED_WITHIN:?}");
    assert_eq!(metric(&h.rec, "liqo_reconciler_identities_retired_total").await, 101.0);
}

/// Three health periods of the hub (2 s) and one sweep (a third of a period), with five
/// periods more for a loaded machine (this file's tests run at once, each with its control
/// plane): how long after its issue an unused identity's tenant namespace may stand. One that no
/// sweep looks at stands for ever; a sweep one by one took 22.6 s for the flood's hundred.
const RETIRED_WITHIN: std::time::Duration = std::time::Duration::from_millis(3 * 2000 + 667 + 5 * 2000);

/// Strangers that hang up while their identity is being issued (clients timing out on a loaded
/// hub, each after 0 to 140 ms): none is left half made (a tenant namespace without the
/// identity's ServiceAccount, which no sweep looks at), and every tenant namespace they caused is
/// retired within three periods and a sweep of the last hang-up.
#[tokio::test]
async fn strangers_hanging_up_mid_issue_leave_nothing_behind() {
    let Some(h) = hub(&["--auth-identity-burst=5"]).await else { return };
    let (addr, ca) = (h.auth_addr(), h.ca());
    const N: u32 = 40;
    let asks = (0..N).map(|i| {
        let source = std::net::IpAddr::from([127, 0, 4, 10 + (i / 5) as u8]);
        let body = json!({"clusterID": format!("{i:08x}-0000-4000-8000-00000000dead"), "token": ""});
        // Hang-ups spread from at once to 2 s, densest early (cubic): whatever this machine's
        // load, some land while the identity is being issued, and some after it was.
        let after = std::time::Duration::from_micros((2_000_000.0 * (f64::from(i) / f64::from(N - 1)).powi(3)) as u64);
        let ca = ca.clone();
        async move { liqo_testenv::https::hang_up_after_sending(source, addr, &ca, "/identity", body, after).await }
    });
    futures::future::join_all(asks).await;
    let hung_up = std::time::Instant::now();
    let namespaces = || async {
        let lp = kube::api::ListParams::default().labels(&format!("{LABEL_TENANT_NAMESPACE}=true"));
        let all = Api::<Namespace>::all(h.admin.clone()).list_metadata(&lp).await.unwrap().items;
        all.iter().filter(|n| n.metadata.deletion_timestamp.is_none()).count()
    };
    eventually("no tenant namespace left", || async { (namespaces().await == 0).then_some(()) }).await;
    let took = hung_up.elapsed();
    let issued = metric(&h.rec, r#"liqo_reconciler_auth_identity_requests_total{result="issued"}"#).await;
    eprintln!("{issued} of {N} identities issued to callers that hung up; the last namespace retired {took:?} after they did");
    assert!(issued >= 1.0, "no identity was being issued when its caller hung up: the test tests nothing");
    assert!(took <= RETIRED_WITHIN, "the last tenant namespace retired {took:?} after the last hang-up, past {RETIRED_WITHIN:?}");
    assert_eq!(metric(&h.rec, "liqo_reconciler_identities_retired_total").await, issued);
}

/// A peer whose identities have all expired (it went away, or was reinstalled and lost its
/// credential) has its requests ended by the sweep, and its ID is free again: another cluster
/// of that ID gets an identity without anyone freeing it (protocol §10).
#[tokio::test]
async fn a_peer_whose_identities_expired_is_ended_and_its_id_freed() {
    let Some(mut h) = hub(&[]).await else { return };
    assert_eq!(h.claim(PEER, None).await.status, 201);
    // Its request, as it wrote it, then nothing: the identity's life passes.
    let spec: liqo_api::PeeringRequestSpec = serde_json::from_value(json!({
        "clusterIdentity": {"clusterID": PEER}, "namespace": "liqo",
        "kubeConfigRef": {"name": format!("pr-kubeconfig-{PEER}"), "namespace": tenant_namespace(PEER)}
    }))
    .unwrap();
    requests_of(&h.admin, PEER).create(&Default::default(), &liqo_api::PeeringRequest::new(PEER, spec)).await.unwrap();
    eventually("the identity seen in use", || async { (h.identity_state(PEER).await.as_deref() == Some("in-use")).then_some(()) }).await;
    assert_eq!(h.claim(PEER, None).await.status, 409, "bound while it lasts");
    let past = (k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_hours(1)).to_string();
    let body = json!({"metadata": {"annotations": {"discovery.liqo.io/expires-at": past}}});
    h.identity(PEER).patch(&peer_service_account(PEER), &kube::api::PatchParams::default(), &kube::api::Patch::Merge(body)).await.unwrap();
    // The leader looks at identities in use for expiry at its start (then every 90 rounds).
    let token = h.token.clone();
    restart_reconciler(&h.cp, &mut h.rec, "hub", &token, &["--auth-identity-burst=100"]);
    ready(&mut h.rec).await;
    eventually("the expired peer's request ended", || async {
        requests_of(&h.admin, PEER).get_opt(PEER).await.unwrap().is_none().then_some(())
    })
    .await;
    eventually("the ID issued to its next holder", || async { (h.claim(PEER, None).await.status == 201).then_some(()) }).await;
}

/// The tenant-namespace contract's "every path": with the anonymous overlay applied, a stranger's
/// unauthenticated PeeringRequest for a cluster ID bound to the cluster that took an identity for
/// it is refused by our webhook (409, `/identity`'s words, `kubectl liqo free` named), as is an
/// admin's in the Liqo namespace (in the tenant namespace an admin is admitted); the claim is recorded in the
/// ClusterConfig's status and told by a Warning Event on that cluster's ForeignCluster. A free
/// ID still peers anonymously. A request stored before its ID was bound (its broadcaster running
/// from the stranger's kubeconfig) is not served once the ID is bound: its broadcaster stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_id_is_claimed_by_no_other_path_the_anonymous_overlay_included() {
    // A long period: no identity of this test is retired while it runs.
    let Some(h) = hub(&["--health-period-seconds=30"]).await else { return };
    let _webhook = start_webhook(&h.admin).await;
    let overlay = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/anonymous-peering/anonymous-peering.yaml");
    liqo_testenv::create_manifest(&h.admin, &std::fs::read_to_string(overlay).unwrap(), "liqo").await;
    // The cluster ID's ForeignCluster here, made by a person: where the claim is told.
    let fc = ForeignCluster::new(
        "peer",
        ForeignClusterSpec {
            cluster_identity: Some(ClusterIdentity { cluster_id: PEER.into(), cluster_name: None }),
            ..Default::default()
        },
    );
    Api::<ForeignCluster>::all(h.admin.clone()).create(&PostParams::default(), &fc).await.unwrap();
    assert_eq!(h.claim(PEER, None).await.status, 201, "PEER takes its identity");

    // No credentials at all: system:anonymous, as the overlay's peers.
    let anonymous = Api::<PeeringRequest>::namespaced(Client::try_from(h.cp.config().unwrap()).unwrap(), "liqo");
    let dry = PostParams { dry_run: true, ..Default::default() };
    // The overlay's grant and the webhook's view of the identity are each a watch away.
    eventually("the webhook refusing the claim on PEER", || async {
        let r = anonymous.create(&dry, &anonymous_request(PEER)).await;
        matches!(&r, Err(kube::Error::Api(s)) if s.code == 409).then_some(())
    })
    .await;
    let refused = refusal(anonymous.create(&PostParams::default(), &anonymous_request(PEER)).await);
    assert_eq!((refused.code, refused.reason.as_str()), (409, "Conflict"), "{refused:?}");
    let until = h.identity(PEER).get(&peer_service_account(PEER)).await.unwrap();
    let words = bound_message(PEER, liqo_api::holder::Holder::of(&until.metadata).expires());
    assert!(refused.message.contains(&words), "/identity's words: {}", refused.message);
    assert!(refused.message.contains(&format!("kubectl liqo free {PEER}")) && refused.message.contains("system:anonymous"));
    // An admin's in the Liqo namespace: refused too. In the ID's tenant namespace an admin, whom
    // RBAC lets act there as the peer anyway, is admitted (a dry run: nothing stored).
    let by_admin = Api::<PeeringRequest>::namespaced(h.admin.clone(), "liqo");
    assert_eq!(refusal(by_admin.create(&PostParams::default(), &anonymous_request(PEER)).await).code, 409);
    let mut in_tenant = anonymous_request(PEER);
    in_tenant.metadata.namespace = Some(tenant_namespace(PEER));
    in_tenant.spec.kube_config_ref.as_mut().unwrap().namespace = Some(tenant_namespace(PEER));
    let tenant_requests = Api::<PeeringRequest>::namespaced(h.admin.clone(), &tenant_namespace(PEER));
    tenant_requests.create(&dry, &in_tenant).await.expect("an admin in the tenant namespace is admitted");
    assert!(by_admin.get_opt(PEER).await.unwrap().is_none() && tenant_requests.get_opt(PEER).await.unwrap().is_none(), "nothing stored");

    // Recorded where refused requests are shown, and told on PEER's ForeignCluster.
    let configs: Api<ClusterConfig> = Api::all(h.admin.clone());
    let entry = eventually("the claim recorded in the ClusterConfig's status", || async {
        let cc = configs.get_opt(CLUSTER_CONFIG_NAME).await.ok()??;
        cc.status?.refused_requests.into_iter().find(|r| r.cluster_id == PEER && r.message.contains(&words))
    })
    .await;
    // One entry for the ID, counting every claim (the dry runs above are claims too).
    assert!(entry.count >= 3, "{entry:?}");
    eventually("a Warning IdentityClaimed on PEER's ForeignCluster", || async {
        liqo_testenv::event(&h.admin, "IdentityClaimed", "peer").await
    })
    .await;

    // An ID nobody holds still peers anonymously: admitted, and served (our finalizer).
    anonymous.create(&PostParams::default(), &anonymous_request(OTHER)).await.expect("a free ID peers anonymously");
    eventually("OTHER's anonymous request served", || async {
        let pr = by_admin.get_opt(OTHER).await.ok()??;
        pr.metadata.finalizers.filter(|f| f.iter().any(|f| f == liqo_api::names::FINALIZER_PEERED))
    })
    .await;
    // The only broadcaster of this test: PEER's requests were all refused.
    eventually("OTHER's broadcaster started", || async { (log_count(&h.rec, "broadcaster started") > 0).then_some(()) }).await;

    // OTHER's ID is then bound by a caller of /identity: its anonymous request, touched, is no
    // longer served, and its broadcaster (reading the stranger's kubeconfig) stops.
    assert_eq!(h.claim(OTHER, None).await.status, 201);
    let label = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    by_admin.patch(OTHER, &PatchParams::default(), &Patch::Merge(&label)).await.expect("an update keeping the spec claims nothing");
    eventually("OTHER's anonymous request no longer served", || async {
        (log_count(&h.rec, "broadcaster stopped: its request is no longer served") > 0).then_some(())
    })
    .await;
    let ev = liqo_testenv::event(&h.admin, "IdentityClaimed", OTHER).await.expect("told on the request");
    assert!(ev.note.unwrap_or_default().contains(&format!("kubectl liqo free {OTHER}")));
}
