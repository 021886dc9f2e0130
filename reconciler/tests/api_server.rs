//! The reconciler against a real kube-apiserver (envtest convention: `KUBEBUILDER_ASSETS`):
//! ClusterConfig defaults and runtime changes, and the identity the auth
//! service issues used for real. Skips loudly without the assets.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use liqo_api::{ClusterConfig, ClusterIdentity as Identity, PeeringPolicy, PeeringRequest, PeeringRequestSpec};
use liqo_reconciler::cluster::config::ClusterConfigKeeper;
use liqo_reconciler::machinery::singleton::keep;
use liqo_reconciler::remote::auth::service::{ApiServer, AuthService, ensure_token_secret};
use liqo_reconciler::remote::auth::wire::IdentityResponse;
use liqo_serve::{CertFiles, ReloadingCert, serve_https, server_config};
use liqo_testenv::{ControlPlane, eventually, install_liqo};
use serde_json::json;
use tokio::sync::watch;

const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

async fn changed_to<T: Clone + PartialEq>(rx: &mut watch::Receiver<Option<T>>, what: &str, pred: impl Fn(&T) -> bool) -> T {
    tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|v| v.as_ref().is_some_and(&pred)))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap()
        .clone()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_config_gets_the_defaults_and_changes_apply_at_runtime() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let configs: Api<ClusterConfig> = Api::all(admin.clone());
    let (tx, mut rx) = watch::channel(None);
    tokio::spawn(keep(ClusterConfigKeeper, configs.clone(), tx));

    let spec = changed_to(&mut rx, "the ClusterConfig", |_| true).await;
    assert!(spec.discovery_config.enable_advertisement && spec.discovery_config.autojoin);
    assert_eq!((spec.discovery_config.ttl, spec.peering_policy), (90, PeeringPolicy::AcceptAll));
    assert!(configs.get("liqo-configuration").await.is_ok());

    // Liqo's documented command: kubectl patch clusterconfigs liqo-configuration --patch '...' --type 'merge'
    let patch = json!({"spec": {"discoveryConfig": {"enableAdvertisement": false}, "peeringPolicy": "AcceptKnown"}});
    configs.patch("liqo-configuration", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    let spec = changed_to(&mut rx, "enableAdvertisement=false", |s| !s.discovery_config.enable_advertisement).await;
    assert_eq!(spec.peering_policy, PeeringPolicy::AcceptKnown);

    // Deleted: back with the defaults.
    configs.delete("liqo-configuration", &DeleteParams::default()).await.unwrap();
    changed_to(&mut rx, "the defaults again", |s| s.discovery_config.enable_advertisement).await;
}

/// What peers are told is published in the ClusterConfig's status, under its own field
/// manager; again when it changes (a new CA) and when the ClusterConfig is re-created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_peers_are_told_is_published_in_the_cluster_config_status() {
    use liqo_reconciler::cluster::published::{self, Told};
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let configs: Api<ClusterConfig> = Api::all(admin.clone());
    let (config_tx, _config) = watch::channel(None);
    tokio::spawn(keep(ClusterConfigKeeper, configs.clone(), config_tx));
    let told = Told {
        auth_url: Some("https://10.0.0.1:30443".into()),
        api_url: Some(cp.url.clone()),
        auth_ca_fingerprint: Some("ab".repeat(32)),
        ..Default::default()
    };
    let (tx, rx) = watch::channel(told.clone());
    tokio::spawn(published::keep(admin.clone(), rx, Duration::from_millis(200)));

    let says = |t: Told| {
        let configs = configs.clone();
        move || {
            let (configs, t) = (configs.clone(), t.clone());
            async move { configs.get("liqo-configuration").await.ok().filter(|c| t.is_in(c.status.as_ref(), c.metadata.generation)) }
        }
    };
    let written = eventually("the status saying what peers are told", says(told.clone())).await;
    let status = written.status.clone().unwrap();
    assert_eq!(status.auth_ca_fingerprint.as_deref(), Some(&*"ab".repeat(32)));
    let managers: Vec<_> = written.managed_fields().iter().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.contains(&published::FIELD_MANAGER.to_owned()), "{managers:?}");

    // A change of the spec and the same told again, then a new CA: published, the spec kept.
    // (Whether a write is needed is decided by `Told::is_in`, unit-tested: an apply of the
    // same status would not even show here, the API server keeps the resourceVersion.)
    let patch = json!({"spec": {"peeringPolicy": "AcceptKnown"}});
    let patched = configs.patch("liqo-configuration", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    tx.send_modify(|_| {});
    let renewed = Told { auth_ca_fingerprint: Some("cd".repeat(32)), ..told.clone() };
    tx.send(renewed.clone()).unwrap();
    let republished = eventually("the new fingerprint published", says(renewed.clone())).await;
    let version = |c: &ClusterConfig| c.resource_version().unwrap().parse::<u64>().unwrap();
    assert_eq!(republished.spec.peering_policy, PeeringPolicy::AcceptKnown);
    assert!(version(&republished) > version(&patched), "written after the patch");

    // The ClusterConfig deleted and re-created with the defaults: published again.
    let before = configs.get("liqo-configuration").await.unwrap().uid();
    configs.delete("liqo-configuration", &DeleteParams::default()).await.unwrap();
    let again = eventually("re-created and published again", || async {
        let c = configs.get("liqo-configuration").await.ok()?;
        (c.uid() != before && renewed.is_in(c.status.as_ref(), c.metadata.generation)).then_some(c)
    })
    .await;
    assert_eq!(again.spec.peering_policy, PeeringPolicy::AcceptAll, "the defaults");
}

/// The identity `/identity` issues, used against the real API server: its own PeeringRequest
/// and Secret, in its tenant namespace only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issued_identity_manages_only_its_own_peering_request() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    ensure_token_secret(&admin, "liqo").await.unwrap();
    ensure_token_secret(&admin, "liqo").await.unwrap(); // idempotent
    let token = Api::<Secret>::namespaced(admin.clone(), "liqo").get("auth-token").await.unwrap().data.unwrap()["token"].clone();
    let token = String::from_utf8(token.0).unwrap();
    assert_eq!(token.len(), 64);

    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    liqo_certs::files::ensure(certs.path(), &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    let cert = ReloadingCert::load(CertFiles { cert: certs.path().join("tls.crt"), key: certs.path().join("tls.key") }).unwrap();
    let (_id, id_rx) = watch::channel(Some("0558de48-097b-4b7d-ba04-6bd2a0f9d24f".to_owned()));
    let (_cfg, cfg_rx) = watch::channel(Some(Default::default()));
    let service = Arc::new(AuthService {
        client: admin.clone(),
        namespace: "liqo".into(),
        cluster_id: id_rx,
        config: cfg_rx,
        api_server: ApiServer { url: cp.url.clone().into(), ca_pem: cp.ca_pem.clone() },
        token_lifetime: Duration::from_secs(3600),
        limiter: liqo_reconciler::remote::auth::rate::Limiter::new(Default::default()),
        outcomes: Default::default(),
        guard: liqo_reconciler::remote::auth::service::IdentityGuard::new(
            kube::runtime::reflector::store::<liqo_api::ForeignCluster>().0,
            100,
            std::time::Duration::from_secs(10),
        ),
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = axum_server::Handle::new();
    tokio::spawn(serve_https(listener, server_config(cert), service.router(), handle.clone()));
    handle.listening().await.unwrap();

    let ca = certs.path().join("ca.crt");
    let refused = liqo_testenv::https::request(addr, &ca, "POST", "/identity", Some(json!({"clusterID": PEER, "token": "nope"}))).await;
    assert_eq!(refused.status, 403);
    let ask = |body: serde_json::Value| liqo_testenv::https::request(addr, &ca, "POST", "/identity", Some(body));
    let first = ask(json!({"clusterID": PEER, "token": token})).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let first: IdentityResponse = serde_json::from_slice(&first.body).unwrap();
    // The ID is now bound to that holder (protocol §10): asking again with the cluster's token
    // alone is refused; with the identity's own token it is a renewal, a fresh token for the
    // same identity.
    let again = ask(json!({"clusterID": PEER, "token": token})).await;
    assert_eq!(again.status, 409, "{}", again.text());
    let current = liqo_reconciler::remote::peer::token_of(&first.kubeconfig).unwrap();
    let renewed = ask(json!({"clusterID": PEER, "token": token, "currentToken": current})).await;
    assert_eq!(renewed.status, 201, "{}", renewed.text());
    let answer: IdentityResponse = serde_json::from_slice(&renewed.body).unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&answer.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let peer = Client::try_from(config).unwrap();
    // The kubeconfig's context names the peer's tenant namespace (protocol §9).
    let tenant = format!("liqo-tenant-{PEER}");
    assert_eq!(peer.default_namespace(), tenant);

    let prs: Api<PeeringRequest> = Api::default_namespaced(peer.clone());
    let pr = |name: &str| PeeringRequest {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: PeeringRequestSpec {
            cluster_identity: Some(Identity { cluster_id: PEER.into(), cluster_name: None }),
            namespace: Some("liqo".into()),
            ..Default::default()
        },
        status: None,
    };
    prs.create(&PostParams::default(), &pr(PEER)).await.expect("creating its own PeeringRequest");
    prs.get(PEER).await.expect("reading its own PeeringRequest");
    // Another's, in the Liqo namespace: not readable, not deletable, not listable.
    Api::<PeeringRequest>::namespaced(admin.clone(), "liqo")
        .create(&PostParams::default(), &pr("11111111-2222-3333-4444-555555555555"))
        .await
        .unwrap();
    let forbidden = |r: Result<_, kube::Error>| matches!(r, Err(kube::Error::Api(s)) if s.code == 403);
    let theirs: Api<PeeringRequest> = Api::namespaced(peer.clone(), "liqo");
    assert!(forbidden(theirs.get("11111111-2222-3333-4444-555555555555").await.map(|_| ())));
    assert!(forbidden(theirs.delete("11111111-2222-3333-4444-555555555555", &DeleteParams::default()).await.map(|_| ())));
    assert!(forbidden(Api::<PeeringRequest>::all(peer.clone()).list(&Default::default()).await.map(|_| ())));

    let secrets: Api<Secret> = Api::default_namespaced(peer.clone());
    let own_secret = format!("pr-kubeconfig-{PEER}");
    let s = Secret { metadata: ObjectMeta { name: Some(own_secret.clone()), ..Default::default() }, ..Default::default() };
    secrets.create(&PostParams::default(), &s).await.expect("creating its Secret");
    secrets.get(&own_secret).await.expect("reading its Secret");
    assert!(
        forbidden(Api::<Secret>::namespaced(peer.clone(), "liqo").get("auth-token").await.map(|_| ())),
        "the peer must not read the auth token"
    );
    assert!(forbidden(Api::<ConfigMap>::namespaced(peer.clone(), "liqo").list(&Default::default()).await.map(|_| ())));
    prs.delete(PEER, &DeleteParams::default()).await.expect("deleting its own PeeringRequest");
    secrets.delete(&own_secret, &DeleteParams::default()).await.expect("deleting its Secret");
}

/// The shared store a controller follows: what was there when it started following comes
/// first, then each change, never before the store holds it (the controller reads the object
/// from that store); trimmed as asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_store_names_each_object_once_it_holds_it() {
    use futures::StreamExt;
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "liqo");
    let cm = |name: &str| ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
    cms.create(&PostParams::default(), &cm("before")).await.unwrap();
    let reflected = liqo_reconciler::machinery::stores::Reflected::start(
        cms.clone(),
        kube::runtime::watcher::Config::default(),
        |o: &mut ConfigMap| o.metadata.managed_fields = None,
    );
    reflected.store.wait_until_ready().await.unwrap();
    let mut follow = Box::pin(reflected.follow());
    let in_time = Duration::from_secs(30);
    let first = tokio::time::timeout(in_time, follow.next()).await.expect("in time").expect("open");
    assert!(reflected.store.get(&first.object).is_some());
    // Everything there before following (the namespace's own ConfigMaps too) comes first.
    let mut seen = vec![first.object.name.clone()];
    while let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(200), follow.next()).await {
        seen.push(r.object.name.clone());
    }
    assert!(seen.contains(&"before".to_owned()), "{seen:?}");
    let created = cms.create(&PostParams::default(), &cm("after")).await.unwrap();
    let changed = loop {
        let r = tokio::time::timeout(in_time, follow.next()).await.expect("the new ConfigMap in time").expect("open");
        if r.object.name == "after" {
            break r;
        }
    };
    let held = reflected.store.get(&changed.object).expect("in the store when named");
    assert!(held.metadata.managed_fields.is_none(), "trimmed as asked");
    // Each change names the version the watch showed (how the echo of our own write is told).
    assert_eq!(changed.version, created.metadata.resource_version, "the version created");
    let updated = cms.patch("after", &Default::default(), &kube::api::Patch::Merge(serde_json::json!({"data": {"k": "v"}}))).await.unwrap();
    let next = loop {
        let r = tokio::time::timeout(in_time, follow.next()).await.expect("the change in time").expect("open");
        if r.object.name == "after" {
            break r;
        }
    };
    assert_eq!(next.version, updated.metadata.resource_version, "the version patched");
}
