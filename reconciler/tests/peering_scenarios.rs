//! ForeignCluster reconcile scenarios against scripted mock API servers (home and remote) and a
//! scripted peer: each asserts the exact API calls, in order.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::client::Body;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use liqo_api::{Advertisement, AdvertisementSpec, ClusterConfigSpec, ForeignCluster, TrustMode};
use liqo_reconciler::Error;
use liqo_reconciler::context::Shared;
use liqo_reconciler::foreign_cluster::{self, Ctx, MANAGED_BY, Timing, reconcile, reconcile_through};
use liqo_reconciler::machinery::connect_first::{Gate, Silent};
use liqo_reconciler::machinery::error::Step;
use liqo_reconciler::machinery::slim_store::{SecretData, SlimStore, SlimWriter, exists, secret_data, slim_store, slim_store_by_namespace};
use liqo_reconciler::machinery::work_queue::Action;
use liqo_reconciler::remote::auth::service::ApiServer;
use liqo_reconciler::remote::auth::wire::{IdentityRequest, IdentityResponse, Ids};
use liqo_reconciler::remote::peer::{Peers, RemoteAccess, Trust};
use serde_json::{Value, json};
use tokio::sync::watch;

const HOME: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const REMOTE: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
const FC: &str = "remote-cluster";
const AUTH: &str = "https://remote.example:8443";

const FCS: &str = "/apis/discovery.liqo.io/v1alpha1/foreignclusters";
const SECRETS: &str = "/api/v1/namespaces/liqo/secrets";
/// Our requests on the remote: in our tenant namespace there (protocol §9).
const PRS: &str = "/apis/discovery.liqo.io/v1alpha1/namespaces/liqo-tenant-0558de48-097b-4b7d-ba04-6bd2a0f9d24f/peeringrequests";
/// Anonymously: in the remote's Liqo namespace.
const ANON_PRS: &str = "/apis/discovery.liqo.io/v1alpha1/namespaces/liqo/peeringrequests";
/// Our tenant namespace on the remote, and the remote's here.
const THERE: &str = "liqo-tenant-0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const HERE: &str = "liqo-tenant-9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
/// The identity the remote issues us: its context names our tenant namespace there.
const ISSUED: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: https://remote.example:6443\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: u\n    namespace: liqo-tenant-0558de48-097b-4b7d-ba04-6bd2a0f9d24f\ncurrent-context: remote\n";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// The CA of the home cluster's API server (one for the whole run: the kubeconfig a joined
/// status says we handed names it).
static HOME_API_CA: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| ca_pem("home-api-ca"));

fn ca_pem(name: &str) -> String {
    liqo_certs::issue::new_ca(name, time::OffsetDateTime::now_utc(), time::Duration::days(1)).unwrap().cert_pem
}

/// One expected call: method, path (without query), answer status and body.
#[derive(Clone, Debug)]
struct Call {
    method: &'static str,
    path: String,
    status: u16,
    body: Value,
}

/// Our holder key's Secret, as the reconciler fills it.
fn holder_key() -> Value {
    use base64::Engine;
    let pkcs8 = liqo_reconciler::cluster::holder_key::HolderKey::generate();
    serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "liqo-holder-key", "namespace": "kube-system"},
        "data": {"ed25519.pk8": base64::engine::general_purpose::STANDARD.encode(pkcs8)}
    })
}

fn call(method: &'static str, path: impl Into<String>, status: u16, body: Value) -> Call {
    Call { method, path: path.into(), status, body }
}

/// A ForeignCluster as the API server would answer a patch of it.
fn any_fc() -> Value {
    json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": FC}, "spec": {}})
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
}

/// What a scripted API server saw: method, path with query, body.
type Seen = Arc<Mutex<Vec<(String, String, Value)>>>;

/// A mock API server answering `script` in order; `None` as body echoes the request body.
/// An unexpected call is recorded and answered 500; a `status` of 0 is a transport failure.
fn scripted(script: Vec<Call>) -> (Client, Seen) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen: Seen = Default::default();
    let record = seen.clone();
    let mut script: VecDeque<Call> = script.into();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let method = req.method().to_string();
            let path = req.uri().path_and_query().unwrap().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            record.lock().unwrap().push((method.clone(), path.clone(), body.clone()));
            let bare = path.split('?').next().unwrap().to_owned();
            let answer = match script.front() {
                Some(c) if c.method == method && c.path == bare => script.pop_front(),
                _ => None,
            };
            match answer {
                Some(c) if c.status == 0 => send.send_error(std::io::Error::other("connection refused")),
                Some(c) => {
                    let out = if c.body.is_null() { body } else { c.body };
                    send.send_response(Response::builder().status(c.status).body(Body::from(serde_json::to_vec(&out).unwrap())).unwrap());
                }
                None => send.send_response(Response::builder().status(500).body(Body::from(b"{}".to_vec())).unwrap()),
            }
        }
    });
    (Client::new(service, "default"), seen)
}

fn calls_of(seen: &Seen) -> Vec<(String, String)> {
    seen.lock().unwrap().iter().map(|(m, p, _)| (m.clone(), p.split('?').next().unwrap().to_owned())).collect()
}

fn expect(seen: &Seen, script: &[Call]) {
    let want: Vec<(String, String)> = script.iter().map(|c| (c.method.to_owned(), c.path.clone())).collect();
    assert_eq!(calls_of(seen), want, "API calls differ from the script");
}

/// A scripted peer: its auth service answers from these fields.
struct FakePeer {
    trust: TrustMode,
    down: bool,
    ca: Mutex<String>,
    refuse: Option<&'static str>,
    remote: Client,
    asked: Mutex<Vec<String>>,
    /// `api_url` of every API client asked for.
    api_urls: Mutex<Vec<Option<String>>>,
    /// How each `/ids` call was to verify the peer.
    trusts: Mutex<Vec<Trust>>,
    /// The protocol its `/ids` tells (`None`: a cluster of the cluster-scoped protocol, 0.1).
    protocol: Mutex<Option<u32>>,
}

/// The fingerprint of the certificate the scripted peer presents.
const PRESENTED: &str = "abababababababababababababababababababababababababababababababab";

impl FakePeer {
    fn check(&self, what: &str) -> Result<(), Error> {
        self.asked.lock().unwrap().push(what.to_owned());
        if self.down { Err(Error::unreachable(Step::Ids, format!("{AUTH}: connection refused"))) } else { Ok(()) }
    }
}

/// What the context holds (a local type, so the trait can be implemented for it).
struct Handle(Arc<FakePeer>);

impl std::ops::Deref for Handle {
    type Target = FakePeer;
    fn deref(&self) -> &FakePeer {
        &self.0
    }
}

impl Peers for Handle {
    async fn probe_trust(&self, _: &str) -> Result<TrustMode, Error> {
        self.check("probe")?;
        Ok(self.trust)
    }
    async fn ids(&self, _: &str, trust: Trust) -> Result<Ids, Error> {
        self.check("ids")?;
        self.trusts.lock().unwrap().push(trust);
        Ok(Ids {
            cluster_id: REMOTE.into(),
            cluster_name: "remote".into(),
            guest_namespace: "liqo-remote".into(),
            protocol_version: *self.protocol.lock().unwrap(),
            token_lifetime_seconds: None,
            version: None,
        })
    }
    async fn ca(&self, _: &str, _: Trust) -> Result<String, Error> {
        self.check("ca")?;
        Ok(self.ca.lock().unwrap().clone())
    }
    async fn identity(&self, _: &str, _: Trust, req: &IdentityRequest) -> Result<IdentityResponse, Error> {
        self.check(&format!("identity:{}:{}", req.cluster_id, req.token))?;
        if let Some(m) = self.refuse {
            return Err(Error::Remote { step: Step::Identity, status: Some(403), message: format!("{AUTH}/identity: HTTP 403: {m}") });
        }
        Ok(IdentityResponse {
            kubeconfig: ISSUED.into(),
            namespace: THERE.into(),
            cluster_id: REMOTE.into(),
            holder_key_recorded: None,
            proven_by: None,
        })
    }
    async fn api_client(&self, access: &RemoteAccess) -> Result<Client, Error> {
        let shown = if access.kubeconfig == ISSUED { "issued-kubeconfig" } else { access.kubeconfig.as_str() };
        self.asked.lock().unwrap().push(format!("api_client:{shown}"));
        self.api_urls.lock().unwrap().push(access.api_url.clone());
        Ok(self.remote.clone())
    }
    async fn cluster_info_ca(&self, _: &str, _: Trust) -> Result<String, Error> {
        self.check("cluster-info")?;
        Ok(self.ca.lock().unwrap().clone())
    }
    async fn presented_fingerprints(&self, _: &str) -> Result<Vec<String>, Error> {
        self.check("fingerprints")?;
        Ok(vec![PRESENTED.into()])
    }
}

struct World {
    ctx: Arc<Ctx<Handle>>,
    peer: Arc<FakePeer>,
    home: Seen,
    remote: Seen,
    secrets: SlimWriter<Secret, SecretData>,
    adverts: SlimWriter<Advertisement, ()>,
    pinned: String,
}

fn world(home: Vec<Call>, remote: Vec<Call>, trust: TrustMode) -> World {
    let (home_client, home_seen) = scripted(home);
    let (remote_client, remote_seen) = scripted(remote);
    let pinned = ca_pem("remote-api-ca");
    let peer = Arc::new(FakePeer {
        trust,
        down: false,
        ca: Mutex::new(pinned.clone()),
        refuse: None,
        remote: remote_client,
        asked: Default::default(),
        api_urls: Default::default(),
        trusts: Default::default(),
        protocol: Mutex::new(Some(2)),
    });
    world_with(home_client, home_seen, remote_seen, peer, pinned)
}

/// The context of a home cluster with our auth service at `https://home.example:8443`.
fn context<P: Peers>(client: Client, peers: P, secrets: SlimStore<SecretData>, adverts: SlimStore<()>) -> Ctx<P> {
    context_knowing(client, peers, secrets, adverts, reflector::store().0)
}

/// [`context`], with the ForeignClusters the controller's store holds.
fn context_knowing<P: Peers>(
    client: Client,
    peers: P,
    secrets: SlimStore<SecretData>,
    adverts: SlimStore<()>,
    foreign: Store<ForeignCluster>,
) -> Ctx<P> {
    let (_, id_rx) = watch::channel(Some(HOME.to_owned()));
    let (_, cfg_rx) = watch::channel(Some(ClusterConfigSpec::default()));
    let shared = Shared::new(client, "liqo", id_rx, cfg_rx, Arc::new(peers), foreign);
    let api_server = ApiServer { url: "https://home.example:6443".into(), ca_pem: HOME_API_CA.clone() };
    Ctx::new(shared, api_server, Some("https://home.example:8443".into()), secrets, adverts).with_token_lifetime(Duration::from_secs(3600))
}

fn world_with(home_client: Client, home: Seen, remote: Seen, peer: Arc<FakePeer>, pinned: String) -> World {
    let (secrets, secrets_w) = slim_store(secret_data);
    let (adverts, adverts_w) = slim_store_by_namespace(exists);
    let ctx = Arc::new(context(home_client, Handle(peer.clone()), secrets, adverts));
    World { ctx, peer, home, remote, secrets: secrets_w, adverts: adverts_w, pinned }
}

impl World {
    fn store_secret(&mut self, name: &str, key: &str, value: &str) {
        let s = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("liqo".into()),
                labels: Some([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())].into()),
                ..Default::default()
            },
            data: Some([(key.to_owned(), ByteString(value.as_bytes().to_vec()))].into()),
            ..Default::default()
        };
        self.secrets.apply_watcher_event(&watcher::Event::Apply(s));
    }
    fn store_joined_secrets(&mut self) {
        let pinned = self.pinned.clone();
        self.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned);
        self.store_secret(&format!("{FC}-identity"), "kubeconfig", ISSUED);
    }
    fn store_advertisement(&mut self) {
        let mut adv = Advertisement::new(
            &format!("advertisement-{REMOTE}"),
            AdvertisementSpec { cluster_id: REMOTE.into(), kube_config_ref: None, resources: Default::default(), timestamp: None },
        );
        // In its tenant namespace here: one of that name elsewhere is not the peer's.
        adv.metadata.namespace = Some(HERE.into());
        self.adverts.apply_watcher_event(&watcher::Event::Apply(adv));
    }
    async fn reconcile(&self, fc: Value) -> Result<Action, Error> {
        let fc: ForeignCluster = serde_json::from_value(fc).unwrap();
        tokio::time::timeout(Duration::from_secs(10), reconcile(Arc::new(fc), self.ctx.clone())).await.expect("reconcile hangs")
    }
    /// [`World::reconcile`] of a peer whose API server took no connection when connected to first.
    async fn reconcile_silent(&self, fc: Value) -> Result<Action, Error> {
        let fc: ForeignCluster = serde_json::from_value(fc).unwrap();
        let gate =
            Gate::Silent(Silent { address: "remote.example:6443".into(), waited: Duration::from_secs(5), closed: false, on_kept: false });
        tokio::time::timeout(Duration::from_secs(10), reconcile_through(Arc::new(fc), self.ctx.clone(), gate)).await.expect("hangs")
    }
}

fn fc(spec: Value, status: Value, finalizer: bool) -> Value {
    let mut v = json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": FC, "uid": "fc-uid", "resourceVersion": "7", "generation": 2},
        "spec": spec, "status": status
    });
    if finalizer {
        v["metadata"]["finalizers"] = json!(["discovery.liqo.io/peered"]);
    }
    v
}

fn joined_spec() -> Value {
    json!({"clusterIdentity": {"clusterID": REMOTE}, "namespace": "liqo-remote", "join": true, "authUrl": AUTH,
           "discoveryType": "Manual", "allowUntrustedCA": true, "trustMode": "Untrusted"})
}

/// The status of a peering this release made: what we handed the remote is recorded (our API
/// server, its CA, a token due in half an hour: within the context's lifetime of an hour).
fn joined_status(advertisement: bool) -> Value {
    let renew_after = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_mins(30);
    let handed = json!({"apiUrl": "https://home.example:6443",
                        "caFingerprint": liqo_certs::inspect::fingerprint_sha256(&HOME_API_CA).unwrap(),
                        "renewAfter": renew_after.to_string()});
    json!({"outgoing": {"joined": advertisement, "remotePeeringRequestName": HOME, "handedKubeconfig": handed,
                        "advertisement": if advertisement { json!(format!("advertisement-{REMOTE}")) } else { Value::Null }}})
}

/// The outgoing status written, what we handed the remote (kept as it was) taken out.
fn outgoing_but_handed(written: &Value) -> Value {
    let mut outgoing = written["status"]["outgoing"].clone();
    let handed = outgoing.as_object_mut().unwrap().remove("handedKubeconfig");
    assert!(handed.is_some_and(|h| h["apiUrl"] == "https://home.example:6443"), "what we handed kept in {written}");
    outgoing
}

fn our_pr() -> Value {
    json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest", "metadata": {"name": HOME, "namespace": THERE},
           "spec": {"clusterIdentity": {"clusterID": HOME}, "namespace": "liqo", "authUrl": "https://home.example:8443",
                    "kubeConfigRef": {"name": format!("pr-kubeconfig-{HOME}"), "namespace": THERE}}})
}

fn token_answer() -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}, "status": {"token": "adv-token", "expirationTimestamp": "2030-01-01T00:00:00Z"}})
}

fn namespace_here() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HERE}})
}

/// The peer's quota here, as this release makes it.
fn quota_here() -> Value {
    let mut quota = serde_json::to_value(liqo_reconciler::tenancy::tenant::quota(REMOTE)).unwrap();
    quota["apiVersion"] = json!("v1");
    quota["kind"] = json!("ResourceQuota");
    quota
}

/// The calls that offer peering: the peer's tenant namespace here (there already, with its
/// quota), its access there (no ClusterRole, no ClusterRoleBinding), then the remote Secret and
/// request.
fn offer_home() -> Vec<Call> {
    vec![
        call("GET", format!("/api/v1/namespaces/{HERE}"), 200, namespace_here()),
        call("GET", format!("/api/v1/namespaces/{HERE}/resourcequotas/liqo-tenant"), 200, quota_here()),
        call("PATCH", format!("/api/v1/namespaces/{HERE}/serviceaccounts/{REMOTE}"), 200, Value::Null),
        call("PATCH", format!("{RBAC}/namespaces/{HERE}/rolebindings/liqo-peer-broadcaster"), 200, Value::Null),
        call("POST", format!("/api/v1/namespaces/{HERE}/serviceaccounts/{REMOTE}/token"), 201, token_answer()),
    ]
}

fn offer_remote() -> Vec<Call> {
    vec![
        call("PATCH", format!("/api/v1/namespaces/{THERE}/secrets/pr-kubeconfig-{HOME}"), 200, Value::Null),
        call("PATCH", format!("{PRS}/{HOME}"), 200, Value::Null),
    ]
}

fn body_of<'a>(seen: &'a [(String, String, Value)], method: &str, path: &str) -> &'a Value {
    &seen.iter().find(|(m, p, _)| m == method && p.split('?').next() == Some(path)).unwrap_or_else(|| panic!("no {method} {path}")).2
}

#[tokio::test]
async fn identification_fills_the_spec_from_the_remote() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}"), 200, any_fc())];
    let w = world(home.clone(), vec![], TrustMode::Untrusted);
    let spec = json!({"join": true, "authUrl": AUTH, "discoveryType": "Manual", "allowUntrustedCA": true, "trustMode": "Unknown"});
    let action = w.reconcile(fc(spec, json!({}), false)).await.unwrap();
    assert_eq!(action, Action::await_change());
    expect(&w.home, &home);
    let seen = w.home.lock().unwrap().clone();
    assert_eq!(
        seen[0].2,
        json!([
            {"op": "add", "path": "/metadata/finalizers", "value": ["discovery.liqo.io/peered"]},
            {"op": "add", "path": "/spec/clusterIdentity", "value": {"clusterID": REMOTE, "clusterName": "remote"}},
            {"op": "add", "path": "/spec/namespace", "value": "liqo-remote"},
            {"op": "add", "path": "/spec/trustMode", "value": "Untrusted"},
        ]),
        "what the remote told and our finalizer, in one JSON patch"
    );
    assert_eq!(*w.peer.asked.lock().unwrap(), ["probe", "ids"]);
    assert!(calls_of(&w.remote).is_empty());
}

#[tokio::test]
async fn an_untrusted_remote_is_not_joined_without_permission() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}"), 200, any_fc()), call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let w = world(home.clone(), vec![], TrustMode::Untrusted);
    let spec =
        json!({"clusterIdentity": {"clusterID": REMOTE}, "namespace": "liqo", "join": true, "authUrl": AUTH, "discoveryType": "Manual"});
    w.reconcile(fc(spec, json!({}), false)).await.unwrap();
    expect(&w.home, &home);
    let seen = w.home.lock().unwrap().clone();
    assert_eq!(seen[0].2, json!({"spec": {"trustMode": "Untrusted"}}));
    let cond = &seen[1].2["status"]["conditions"][0];
    assert_eq!(
        (cond["type"].as_str(), cond["status"].as_str(), cond["reason"].as_str()),
        (Some("Trusted"), Some("False"), Some("AwaitingApproval"))
    );
    let message = cond["message"].as_str().unwrap();
    assert!(message.contains(&format!("SHA-256 {PRESENTED}; if the remote's operator reads out the same")), "{message}");
    assert!(message.contains(&format!("kubectl liqo trust {FC} --fingerprint {PRESENTED}")), "{message}");
    assert_eq!(*w.peer.asked.lock().unwrap(), ["probe", "fingerprints"], "no identity is asked of an untrusted remote");
}

#[tokio::test]
async fn join_from_scratch() {
    let mut home = vec![
        call("PATCH", format!("{FCS}/{FC}"), 200, any_fc()), // finalizer
        call("POST", SECRETS, 201, Value::Null),             // <fc>-ca-data
        // Our tenant namespace for the peer, before its identity is asked for: made without
        // looking first (a first join), and its quota in it with the status of an empty one.
        call("POST", "/api/v1/namespaces", 201, namespace_here()),
        call("POST", format!("/api/v1/namespaces/{HERE}/resourcequotas"), 201, quota_here()),
        call("PATCH", format!("/api/v1/namespaces/{HERE}/resourcequotas/liqo-tenant/status"), 200, quota_here()),
        call("GET", format!("{SECRETS}/remote-token-{REMOTE}"), 404, not_found()),
        call("GET", "/api/v1/namespaces/kube-system/secrets/liqo-holder-key", 200, holder_key()), // read once, then kept
        call("POST", SECRETS, 201, Value::Null),                                                  // <fc>-identity
    ];
    // The offer's grant: the tenant namespace was made sure of this round, not read again.
    home.extend(offer_home().into_iter().skip(2));
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    let mut remote = vec![call("GET", format!("{PRS}/{HOME}"), 404, not_found())];
    remote.extend(offer_remote());
    let w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    let action = w.reconcile(fc(joined_spec(), json!({}), false)).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    expect(&w.home, &home);
    expect(&w.remote, &remote);
    assert_eq!(*w.peer.asked.lock().unwrap(), ["ca".to_owned(), format!("identity:{HOME}:"), "api_client:issued-kubeconfig".to_owned()]);

    let seen = w.home.lock().unwrap().clone();
    assert_eq!(
        seen[0].2,
        json!([{"op": "add", "path": "/metadata/finalizers", "value": ["discovery.liqo.io/peered"]}]),
        "the finalizer added by a JSON patch"
    );
    let ca = &seen[1].2;
    assert_eq!(ca["metadata"]["name"], format!("{FC}-ca-data"));
    assert_eq!(ca["metadata"]["ownerReferences"][0]["kind"], "ForeignCluster");
    assert_eq!(ca["metadata"]["labels"]["discovery.liqo.io/cluster-id"], REMOTE);
    let stored: String = String::from_utf8(base64_decode(ca["data"]["ca.crt"].as_str().unwrap())).unwrap();
    assert_eq!(stored, w.pinned);
    assert_eq!(seen[2].2["metadata"]["name"], HERE, "the tenant namespace made");
    assert_eq!(seen[4].2["status"]["used"]["count/secrets"], "0", "the quota's status, so the API server admits");
    assert_eq!(seen[7].2["metadata"]["name"], format!("{FC}-identity"));
    // The advertisement access: a RoleBinding in the peer's tenant namespace to the fixed role.
    let binding = &seen[9].2;
    assert_eq!(binding["metadata"]["namespace"], HERE);
    assert_eq!(binding["roleRef"]["name"], "liqo-peer-broadcaster");
    assert_eq!(binding["subjects"][0]["name"], REMOTE);

    let status = &seen.last().unwrap().2["status"];
    let mut outgoing = status["outgoing"].clone();
    let handed = outgoing.as_object_mut().unwrap().remove("handedKubeconfig").expect("the kubeconfig handed, recorded");
    assert_eq!(outgoing, json!({"joined": false, "remotePeeringRequestName": HOME}));
    assert_eq!(handed["apiUrl"], "https://home.example:6443");
    assert!(handed["renewAfter"].is_string(), "{handed}");
    assert_eq!(status["caDataRef"]["name"], format!("{FC}-ca-data"));
    assert_eq!(status["caFingerprint"].as_str().unwrap(), liqo_certs::inspect::fingerprint_sha256(&w.pinned).unwrap());
    assert_eq!(status["authStatus"], "Accepted");
    assert_eq!(status["tenantNamespace"], json!({"local": HERE, "remote": THERE}), "where each side keeps the other's");
    let joined = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Joined").unwrap();
    assert_eq!((joined["status"].as_str(), joined["reason"].as_str()), (Some("False"), Some("WaitingForAdvertisement")));
    assert_eq!(joined["observedGeneration"], 2);

    // On the remote: the kubeconfig Secret for our API server, then our PeeringRequest.
    let remote_seen = w.remote.lock().unwrap().clone();
    let secret = body_of(&remote_seen, "PATCH", &format!("/api/v1/namespaces/{THERE}/secrets/pr-kubeconfig-{HOME}"));
    let kubeconfig = String::from_utf8(base64_decode(secret["data"]["kubeconfig"].as_str().unwrap())).unwrap();
    assert!(kubeconfig.contains("https://home.example:6443") && kubeconfig.contains("adv-token"), "{kubeconfig}");
    assert!(kubeconfig.contains(&format!("namespace: {HERE}")), "its broadcaster writes in its tenant namespace here: {kubeconfig}");
    let pr = body_of(&remote_seen, "PATCH", &format!("{PRS}/{HOME}"));
    assert_eq!(pr["spec"], our_pr()["spec"]);
    assert!(
        remote_seen
            .iter()
            .filter(|(m, _, _)| m == "PATCH")
            .all(|(_, p, _)| p.contains("fieldManager=liqo-peering") && p.contains("force=true") && p.contains("fieldValidation=Ignore"))
    );
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// Conditions as they are after a healthy reconcile, so steady state writes nothing.
fn healthy_status(w: &World) -> Value {
    let mut status = joined_status(true);
    let fp = liqo_certs::inspect::fingerprint_sha256(&w.pinned).unwrap();
    status["caDataRef"] = json!({"name": format!("{FC}-ca-data"), "namespace": "liqo"});
    status["caFingerprint"] = json!(fp);
    status["authStatus"] = json!("Accepted");
    status["tenantNamespace"] = json!({"local": HERE, "remote": THERE});
    let c = |t: &str, s: &str, r: &str, m: String| json!({"type": t, "status": s, "reason": r, "message": m, "observedGeneration": 2, "lastTransitionTime": "2026-01-01T00:00:00Z"});
    status["conditions"] = json!([
        c("Trusted", "False", "UntrustedAllowed", "unknown certificate authority, allowed by spec.allowUntrustedCA".into()),
        c("Authenticated", "True", "IdentityIssued", format!("identity stored in Secret {FC}-identity")),
        c("RemoteReachable", "True", "Reachable", "the remote API server answered".into()),
        c("CaVerified", "True", "Pinned", format!("the remote API server certificate verified against CA {fp}")),
        c("Joined", "True", "Joined", "the remote accepted our PeeringRequest and advertises to us".into()),
    ]);
    status
}

#[tokio::test]
async fn steady_state_is_one_remote_get_and_no_writes() {
    let remote = vec![call("GET", format!("{PRS}/{HOME}"), 200, our_pr()), call("GET", format!("{PRS}/{HOME}"), 200, our_pr())];
    let mut w = world(vec![], remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    w.store_advertisement();
    let status = healthy_status(&w);
    for _ in 0..2 {
        let action = w.reconcile(fc(joined_spec(), status.clone(), true)).await.unwrap();
        assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    }
    // Two health periods: one GET each on the remote, nothing written anywhere, a client made
    // for each round (none kept per peer: docs/scaling.md).
    expect(&w.remote, &remote);
    expect(&w.home, &[]);
    assert_eq!(*w.peer.asked.lock().unwrap(), ["api_client:issued-kubeconfig", "api_client:issued-kubeconfig"]);
}

#[tokio::test]
async fn a_deleted_remote_peering_request_is_recreated() {
    let mut remote = vec![call("GET", format!("{PRS}/{HOME}"), 404, not_found())];
    remote.extend(offer_remote());
    // Repaired; the status changes only to record the kubeconfig handed (the Advertisement is
    // still there).
    let mut home = offer_home();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    w.store_advertisement();
    let status = healthy_status(&w);
    w.reconcile(fc(joined_spec(), status, true)).await.unwrap();
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let written = w.home.lock().unwrap().last().unwrap().2.clone();
    assert_eq!(written["status"]["outgoing"]["handedKubeconfig"]["apiUrl"], "https://home.example:6443");
    assert_eq!(written["status"]["outgoing"]["joined"], true);
}

#[tokio::test]
async fn a_deleted_advertisement_shows_not_joined() {
    let remote = vec![call("GET", format!("{PRS}/{HOME}"), 200, our_pr())];
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let status = healthy_status(&w); // says the Advertisement was there
    w.reconcile(fc(joined_spec(), status, true)).await.unwrap();
    expect(&w.home, &home);
    let written = w.home.lock().unwrap()[0].2.clone();
    assert_eq!(outgoing_but_handed(&written), json!({"joined": false, "remotePeeringRequestName": HOME}));
    let joined = written["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Joined").unwrap().clone();
    assert_eq!((joined["status"].as_str(), joined["reason"].as_str()), (Some("False"), Some("AdvertisementDeleted")));
    assert_ne!(joined["lastTransitionTime"], "2026-01-01T00:00:00Z", "the status flipped");
}

/// A joined peer (Secrets and Advertisement in the stores, healthy status) through one health
/// round, `prepare` run on the world first; the calls must be exactly the scripts.
async fn health_round(home: Vec<Call>, remote: Vec<Call>, prepare: impl FnOnce(&World)) -> (World, Action) {
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    w.store_advertisement();
    prepare(&w);
    let status = healthy_status(&w);
    let action = w.reconcile(fc(joined_spec(), status, true)).await.unwrap();
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    (w, action)
}

/// Status and reason of condition `type_` in the status patch number `n` sent home.
fn written_condition(w: &World, n: usize, type_: &str) -> (String, String) {
    let written = w.home.lock().unwrap()[n].2.clone();
    let c = written["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == type_).unwrap().clone();
    (c["status"].as_str().unwrap().to_owned(), c["reason"].as_str().unwrap().to_owned())
}

/// The identity a cluster of the cluster-scoped protocol (0.1) issued, naming its Liqo namespace.
const ISSUED_BY_0_1: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: https://remote.example:6443\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: u\n    namespace: liqo-remote\ncurrent-context: remote\n";

/// protocol §9: a peer still on the cluster-scoped protocol is named in a condition, and asked only
/// its `/ids` once per health period, nothing else; once it tells protocol 2 (upgraded), the old
/// identity is dropped and a new one asked for.
#[tokio::test]
async fn a_peer_on_the_older_protocol_is_named_then_joined_again_once_upgraded() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let mut w = world(home.clone(), vec![], TrustMode::Untrusted);
    let pinned = w.pinned.clone();
    w.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned);
    w.store_secret(&format!("{FC}-identity"), "kubeconfig", ISSUED_BY_0_1);
    *w.peer.protocol.lock().unwrap() = None;
    let action = w.reconcile(fc(joined_spec(), healthy_status(&w), true)).await.unwrap();
    assert_eq!(action, Action::requeue(Timing::default().health), "asked again once per health period");
    expect(&w.home, &home);
    assert!(calls_of(&w.remote).is_empty(), "nothing sent to its API server");
    assert_eq!(*w.peer.asked.lock().unwrap(), ["ids"], "only its /ids");
    let (status, reason) = written_condition(&w, 0, "Joined");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "PeerOnOlderProtocol"));
    let written = w.home.lock().unwrap()[0].2.clone();
    assert_eq!(written["status"]["outgoing"], json!({"joined": false}), "not joined, whatever the status said before");

    // Upgraded: the identity of 0.1 is dropped, and the next round asks for a new one.
    let home = vec![
        call("DELETE", format!("{SECRETS}/{FC}-identity"), 200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
        call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()),
    ];
    let mut w = world(home.clone(), vec![], TrustMode::Untrusted);
    w.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned);
    w.store_secret(&format!("{FC}-identity"), "kubeconfig", ISSUED_BY_0_1);
    let action = w.reconcile(fc(joined_spec(), healthy_status(&w), true)).await.unwrap();
    assert_eq!(action, Action::requeue(Timing::default().retry));
    expect(&w.home, &home);
    assert_eq!(written_condition(&w, 1, "Authenticated"), ("False".into(), "IdentityRevoked".into()));
}

#[tokio::test]
async fn an_unreachable_remote_is_reported_and_retried() {
    let remote = vec![call("GET", format!("{PRS}/{HOME}"), 0, Value::Null)];
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let (w, action) = health_round(home, remote, |_| {}).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    assert_eq!(written_condition(&w, 0, "RemoteReachable"), ("False".into(), "RemoteUnreachable".into()));
    // The CA was checked (unchanged), nothing else was asked.
    assert_eq!(*w.peer.asked.lock().unwrap(), ["api_client:issued-kubeconfig", "ca"]);
}

/// A joined remote whose API server took no connection when connected to first (a black hole):
/// reported unreachable with what was waited for, and nothing called at all, neither its API
/// server nor its auth service (a black-holed check used to wait out a connect there too).
#[tokio::test]
async fn a_silent_remote_is_reported_without_any_call() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let mut w = world(home.clone(), vec![], TrustMode::Untrusted);
    w.store_joined_secrets();
    w.store_advertisement();
    let action = w.reconcile_silent(fc(joined_spec(), healthy_status(&w), true)).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(10)), "retried as any failure");
    expect(&w.remote, &[]);
    expect(&w.home, &home);
    assert!(w.peer.asked.lock().unwrap().is_empty(), "no client made, nothing asked: {:?}", w.peer.asked.lock().unwrap());
    let written = w.home.lock().unwrap()[0].2["status"].clone();
    let (status, reason, message) = condition_of(&written, "RemoteReachable");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "RemoteUnreachable"));
    assert!(message.contains("remote.example:6443 did not answer within 5 s (no answer, no refusal"), "{message}");
    assert_eq!(condition_of(&written, "CaVerified").0, "Unknown", "not checked, as when a call gets no answer");
    assert_eq!(condition_of(&written, "Authenticated").0, "True", "our identity stands");
}

/// A remote down for long is called once per health period (half the time it has been down so
/// far, at least the 10 s retry, at most the 30 s period), not every retry.
#[tokio::test]
async fn a_remote_down_for_long_is_called_once_per_health_period() {
    for (down_for, next) in [(40, 20), (600, 30)] {
        let remote = vec![call("GET", format!("{PRS}/{HOME}"), 0, Value::Null)];
        let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
        let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
        w.store_joined_secrets();
        w.store_advertisement();
        let mut status = healthy_status(&w);
        let since = Time(k8s_openapi::jiff::Timestamp::from_second(k8s_openapi::jiff::Timestamp::now().as_second() - down_for).unwrap());
        let message = "remote API server: connection refused";
        for c in status["conditions"].as_array_mut().unwrap().iter_mut().filter(|c| c["type"] == "RemoteReachable") {
            *c = json!({"type": "RemoteReachable", "status": "False", "reason": "RemoteUnreachable", "message": message,
                        "observedGeneration": 2, "lastTransitionTime": since});
        }
        let action = w.reconcile(fc(joined_spec(), status, true)).await.unwrap();
        assert_eq!(action, Action::requeue(Duration::from_secs(next)), "down for {down_for} s");
        expect(&w.remote, &remote);
        expect(&w.home, &home);
        assert_eq!(written_condition(&w, 0, "RemoteReachable"), ("False".into(), "RemoteUnreachable".into()));
    }
}

#[tokio::test]
async fn a_changed_remote_ca_is_never_accepted_silently() {
    let remote = vec![call("GET", format!("{PRS}/{HOME}"), 0, Value::Null)];
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let (w, _) = health_round(home, remote, |w| *w.peer.ca.lock().unwrap() = ca_pem("rotated-remote-ca")).await;
    assert_eq!(written_condition(&w, 0, "CaVerified"), ("False".into(), "RemoteCaChanged".into()));
    let written = w.home.lock().unwrap()[0].2.clone();
    let ca = written["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "CaVerified").unwrap().clone();
    assert!(ca["message"].as_str().unwrap().contains(&format!("delete Secret {FC}-ca-data")));
    // The pinned fingerprint stays what it was.
    assert_eq!(written["status"]["caFingerprint"].as_str().unwrap(), liqo_certs::inspect::fingerprint_sha256(&w.pinned).unwrap());
}

#[tokio::test]
async fn a_refused_token_is_reported() {
    let (home_client, home_seen) = scripted(vec![
        call("POST", SECRETS, 201, Value::Null),
        // The tenant namespace there already (made when the peer asked us for an identity):
        // the create conflicts, then it and its quota are read.
        call(
            "POST",
            "/api/v1/namespaces",
            409,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409}),
        ),
        call("GET", format!("/api/v1/namespaces/{HERE}"), 200, namespace_here()),
        call("GET", format!("/api/v1/namespaces/{HERE}/resourcequotas/liqo-tenant"), 200, quota_here()),
        call(
            "GET",
            format!("{SECRETS}/remote-token-{REMOTE}"),
            200,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "data": {"token": "d3Jvbmc="}}),
        ),
        call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()),
    ]);
    let (remote_client, remote_seen) = scripted(vec![]);
    let pinned = ca_pem("remote-api-ca");
    let peer = Arc::new(FakePeer {
        trust: TrustMode::Untrusted,
        down: false,
        ca: Mutex::new(pinned.clone()),
        refuse: Some("wrong token"),
        remote: remote_client,
        asked: Default::default(),
        api_urls: Default::default(),
        trusts: Default::default(),
        protocol: Mutex::new(Some(2)),
    });
    let w = world_with(home_client, home_seen, remote_seen, peer, pinned);
    w.reconcile(fc(joined_spec(), json!({}), true)).await.unwrap();
    assert_eq!(*w.peer.asked.lock().unwrap(), ["ca".to_owned(), format!("identity:{HOME}:wrong")]);
    let seen = w.home.lock().unwrap().clone();
    let status = &seen.last().unwrap().2["status"];
    assert_eq!(status["authStatus"], "Refused");
    let auth = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Authenticated").unwrap();
    assert_eq!(auth["reason"], "TokenRefused");
    assert!(calls_of(&w.remote).is_empty());
}

/// Our Secret on the remote, the first thing an unjoin deletes there.
fn our_secret_there() -> String {
    format!("/api/v1/namespaces/{THERE}/secrets/pr-kubeconfig-{HOME}")
}

fn unjoin_remote() -> Vec<Call> {
    vec![
        // The Secret first: the remote reads a request gone without it as our unjoin.
        call("DELETE", our_secret_there(), 200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
        call("DELETE", format!("{PRS}/{HOME}"), 200, our_pr()),
        // Gone: the unjoin is done only then.
        call("GET", format!("{PRS}/{HOME}"), 404, not_found()),
    ]
}

/// The peer's Advertisement here deleted (every unjoin round).
fn advertisement_deleted() -> Call {
    call("DELETE", format!("/apis/sharing.liqo.io/v1alpha1/namespaces/{HERE}/advertisements/advertisement-{REMOTE}"), 404, not_found())
}

/// The peer's access revoked (its ServiceAccount first), then its Advertisement deleted.
fn unjoin_local() -> Vec<Call> {
    vec![
        // The ServiceAccount first: the peer is refused with a 401 at once, never a 403.
        call(
            "DELETE",
            format!("/api/v1/namespaces/{HERE}/serviceaccounts/{REMOTE}"),
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
        call(
            "DELETE",
            format!("{RBAC}/namespaces/{HERE}/rolebindings/liqo-peer-broadcaster"),
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
        advertisement_deleted(),
    ]
}

/// Once no direction is left: the tenant namespace looked at (gone already here), then the
/// identity the remote issued us dropped.
fn retired() -> Vec<Call> {
    vec![
        call("GET", format!("/api/v1/namespaces/{HERE}"), 404, not_found()),
        call("DELETE", format!("{SECRETS}/{FC}-identity"), 200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
    ]
}

/// A joined ForeignCluster (our finalizer on it) whose spec now says `join: false`.
fn unjoining_fc() -> Value {
    let mut spec = joined_spec();
    spec["join"] = json!(false);
    fc(spec, joined_status(true), true)
}

/// The end of an unjoin here: the tenant namespace retired, the status, the finalizer removed.
fn unjoin_ends() -> Vec<Call> {
    let mut calls = retired();
    calls.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    calls.push(call("PATCH", format!("{FCS}/{FC}"), 200, any_fc()));
    calls
}

#[tokio::test]
async fn unjoin_cascades_remote_then_local_then_finalizer() {
    let mut home = unjoin_local();
    home.extend(unjoin_ends());
    let remote = unjoin_remote();
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let action = w.reconcile(unjoining_fc()).await.unwrap();
    assert_eq!(action, Action::await_change());
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let seen = w.home.lock().unwrap().clone();
    assert_eq!(seen[5].2["status"]["outgoing"], json!({"joined": false}));
    assert_eq!(seen[6].2, removes_the_finalizer());
}

/// Found by the chaos soak (seed 7, fault 700): our identity Secret on the remote deleted by an
/// admin just before `join: false`. Our request still stands there, so a new identity is asked
/// of the remote's auth service and the request withdrawn with it, not left behind.
#[tokio::test]
async fn an_unjoin_without_our_identity_asks_for_a_new_one_to_withdraw() {
    let token = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "data": {"token": "czNjcmV0"}});
    let mut home = vec![call("GET", format!("{SECRETS}/remote-token-{REMOTE}"), 200, token), call("POST", SECRETS, 201, Value::Null)];
    home.extend(unjoin_local());
    home.extend(unjoin_ends());
    let remote = unjoin_remote();
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    let pinned = w.pinned.clone();
    w.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned); // the CA, not the identity
    let action = w.reconcile(unjoining_fc()).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert_eq!(*w.peer.asked.lock().unwrap(), [format!("identity:{HOME}:s3cret"), "api_client:issued-kubeconfig".to_owned()]);
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let seen = w.home.lock().unwrap().clone();
    assert_eq!(body_of(&seen, "POST", SECRETS)["metadata"]["name"], format!("{FC}-identity"));
}

/// Our request on the remote, deleted and still held there by its reconciler.
fn our_pr_terminating() -> Value {
    let mut terminating = our_pr();
    terminating["metadata"]["deletionTimestamp"] = json!("2026-11-25T10:00:00Z");
    terminating
}

/// The remote's side of an unjoin whose look after the deletes finds our request terminating.
fn unjoin_remote_terminating() -> Vec<Call> {
    let mut remote = unjoin_remote();
    let look = remote.last_mut().unwrap();
    (look.status, look.body) = (200, our_pr_terminating());
    remote
}

/// Our request still Terminating on the remote (its reconciler holds it): the peer's access
/// here is revoked, but we are not unjoined yet: `UnjoinPending`, the finalizer kept.
#[tokio::test]
async fn unjoin_waits_while_our_request_is_terminating_on_the_remote() {
    let mut home = unjoin_local();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    // The next round only looks again: no DELETE repeated there, nothing revoked again here;
    // only the peer's Advertisement is deleted again (a write it made just before losing its
    // access may land after the first delete).
    home.push(advertisement_deleted());
    let mut remote = unjoin_remote_terminating();
    remote.push(call("GET", format!("{PRS}/{HOME}"), 200, our_pr_terminating()));
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let first = unjoining_fc();
    let action = w.reconcile(first.clone()).await.unwrap();
    // Woken by a watch of our request there once it is gone (the controller's); this is the
    // fallback.
    assert_eq!(action, Action::requeue(Timing::default().health), "looked at again within a health period");
    let written = w.home.lock().unwrap()[3].2.clone();
    let (status, reason, message) = condition_of(&written["status"], "Joined");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "UnjoinPending"));
    assert!(message.contains("terminating"), "{message}");
    let action = w.reconcile(stored_after(first, &written)).await.unwrap();
    assert_eq!(action, Action::requeue(Timing::default().health));
    expect(&w.remote, &remote);
    expect(&w.home, &home);
}

/// Found by the chaos soak (seed 7): our request seen terminating, then the remote released it
/// and retired us. Its API server still authenticates our token from its cache for a few
/// seconds and refuses it by RBAC: that 403, in a round after our deletes went through, is the
/// end (it waited a health period for a 401 before).
#[tokio::test]
async fn unjoin_ends_on_a_403_once_our_deletes_went_through() {
    let mut home = unjoin_local();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    home.push(advertisement_deleted());
    home.extend(unjoin_ends());
    let mut remote = unjoin_remote_terminating();
    remote.push(call("GET", format!("{PRS}/{HOME}"), 403, forbidden()));
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let first = unjoining_fc();
    assert_eq!(w.reconcile(first.clone()).await.unwrap(), Action::requeue(Timing::default().health));
    let written = w.home.lock().unwrap()[3].2.clone();
    let action = w.reconcile(stored_after(first, &written)).await.unwrap();
    assert_eq!(action, Action::await_change(), "retired by the remote: unjoined");
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let seen = w.home.lock().unwrap().clone();
    assert_eq!(seen.last().unwrap().2, removes_the_finalizer());
}

/// A remote API server just started answers "404 page not found" for a resource it has not
/// read the CRD of yet: that is not our request gone. The unjoin waits (`UnjoinPending`, the
/// finalizer kept, nothing revoked yet) and tries again within a health period.
#[tokio::test]
async fn unjoin_does_not_take_an_unserved_resource_for_our_request_gone() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    // Not a Status: what the API server's fallback handler writes.
    let remote = vec![
        call("DELETE", our_secret_there(), 200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
        call("DELETE", format!("{PRS}/{HOME}"), 404, json!("404 page not found")),
    ];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let action = w.reconcile(unjoining_fc()).await.unwrap();
    let timing = Timing::default();
    assert_eq!(action, Action::requeue(timing.retry.min(timing.health)));
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let written = w.home.lock().unwrap()[0].2.clone();
    let (status, reason, message) = condition_of(&written["status"], "Joined");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "UnjoinPending"));
    assert!(message.contains("404"), "{message}");
}

/// Our request found again on the remote, not terminating, in a round that only looks (after one
/// that saw it terminating): it is deleted again, not waited for.
#[tokio::test]
async fn unjoin_deletes_again_a_request_found_standing() {
    let mut home = unjoin_local();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    home.push(advertisement_deleted());
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    home.extend(unjoin_local());
    home.extend(unjoin_ends());
    let mut remote = unjoin_remote_terminating();
    remote.push(call("GET", format!("{PRS}/{HOME}"), 200, our_pr()));
    remote.extend(unjoin_remote());
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let first = unjoining_fc();
    let timing = Timing::default();
    assert_eq!(w.reconcile(first.clone()).await.unwrap(), Action::requeue(timing.health), "terminating: looked at again");
    let written = w.home.lock().unwrap()[3].2.clone();
    let action = w.reconcile(stored_after(first.clone(), &written)).await.unwrap();
    assert_eq!(action, Action::requeue(timing.retry.min(timing.health)), "standing: deleted again soon");
    let written = w.home.lock().unwrap()[5].2.clone();
    let (_, reason, message) = condition_of(&written["status"], "Joined");
    assert_eq!(reason, "UnjoinPending");
    assert!(message.contains("not deleted yet"), "{message}");
    let action = w.reconcile(stored_after(first, &written)).await.unwrap();
    assert_eq!(action, Action::await_change(), "deleted and gone: unjoined");
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let seen = w.home.lock().unwrap().clone();
    assert_eq!(seen.last().unwrap().2, removes_the_finalizer());
}

/// The JSON patch that removes our finalizer: it tests the finalizer is where it was, so it needs
/// no resourceVersion and a status write just before cannot make it conflict.
fn removes_the_finalizer() -> Value {
    json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "discovery.liqo.io/peered"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ])
}

fn deleted(mut v: Value, seconds_ago: i64) -> Value {
    let at = k8s_openapi::jiff::Timestamp::now().as_second() - seconds_ago;
    v["metadata"]["deletionTimestamp"] = serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::from_second(at).unwrap())).unwrap();
    v
}

#[tokio::test]
async fn deletion_while_the_remote_is_down_waits_then_completes_locally() {
    // Within the grace period: nothing local is touched, retried.
    let remote = vec![call("DELETE", our_secret_there(), 0, Value::Null)];
    let mut w = world(vec![], remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let action = w.reconcile(deleted(fc(joined_spec(), joined_status(true), true), 5)).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    expect(&w.remote, &remote);
    expect(&w.home, &[]);

    // After it: the local side is cleaned, the finalizer goes; the ForeignCluster can go.
    let mut home = unjoin_local();
    let mut retire = retired();
    // Our identity there is kept apart: the remote still binds our ID to it (protocol §10).
    retire.insert(1, call("POST", SECRETS.to_owned(), 201, Value::Null));
    home.extend(retire);
    home.push(call("DELETE", format!("{SECRETS}/{FC}-ca-data"), 200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})));
    home.push(call("PATCH", format!("{FCS}/{FC}"), 200, any_fc()));
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let action = w.reconcile(deleted(fc(joined_spec(), joined_status(true), true), 121)).await.unwrap();
    assert_eq!(action, Action::await_change());
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    assert_eq!(w.home.lock().unwrap().last().unwrap().2, removes_the_finalizer());
}

#[tokio::test]
async fn join_false_without_finalizer_costs_nothing() {
    let w = world(vec![], vec![], TrustMode::Untrusted);
    let mut spec = joined_spec();
    spec["join"] = json!(false);
    assert_eq!(w.reconcile(fc(spec, json!({}), false)).await.unwrap(), Action::await_change());
    expect(&w.home, &[]);
    expect(&w.remote, &[]);
    assert!(w.peer.asked.lock().unwrap().is_empty());
    let _ = foreign_cluster::FIELD_MANAGER;
}

fn forbidden() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403})
}

fn unauthorized() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401})
}

#[tokio::test]
async fn a_revoked_identity_is_dropped_and_asked_for_again() {
    let remote = vec![call("GET", format!("{PRS}/{HOME}"), 401, unauthorized())];
    let home = vec![
        call("DELETE", format!("{SECRETS}/{FC}-identity"), 200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
        call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()),
    ];
    let (w, action) = health_round(home, remote, |_| {}).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    assert_eq!(w.home.lock().unwrap()[1].2["status"]["authStatus"], "Pending");
    assert_eq!(written_condition(&w, 1, "Authenticated"), ("False".into(), "IdentityRevoked".into()));
}

/// Found by the chaos soak: a restarted API server answers 403 until its RBAC cache is filled.
/// Our identity is still good: kept, and the round is retried, not a new identity asked for.
#[tokio::test]
async fn a_forbidden_answer_keeps_the_identity() {
    let remote = vec![call("GET", format!("{PRS}/{HOME}"), 403, forbidden())];
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let (w, _) = health_round(home.clone(), remote, |_| {}).await;
    expect(&w.home, &home);
    assert_ne!(written_condition(&w, 0, "Authenticated").1, "IdentityRevoked");
}

#[tokio::test]
async fn unjoin_completes_locally_when_the_remote_no_longer_knows_us() {
    // Not even being deleted: join=false, and the remote answers 401 (it forgot us).
    let remote = vec![call("DELETE", our_secret_there(), 401, unauthorized())];
    let mut home = unjoin_local();
    home.extend(unjoin_ends());
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    assert_eq!(w.reconcile(unjoining_fc()).await.unwrap(), Action::await_change());
    expect(&w.remote, &remote);
    expect(&w.home, &home);
}

/// A 403 is not the remote done with us: a restarted API server answers 403 for a good identity
/// until its RBAC cache is filled (a CI run saw our request left on the remote that way). The
/// unjoin waits and tries again within a health period; nothing is revoked yet.
#[tokio::test]
async fn unjoin_waits_when_the_remote_forbids_us() {
    let remote = vec![call("DELETE", our_secret_there(), 403, forbidden())];
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let timing = Timing::default();
    assert_eq!(w.reconcile(unjoining_fc()).await.unwrap(), Action::requeue(timing.retry.min(timing.health)));
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let written = w.home.lock().unwrap()[0].2.clone();
    assert_eq!(condition_of(&written["status"], "Joined").1, "UnjoinPending");
}

// The manual form (clusterID + apiUrl, no authUrl): peering the anonymous way.

const API: &str = "https://remote.example:6443";

fn anonymous_spec() -> Value {
    json!({"clusterID": REMOTE, "apiUrl": API, "namespace": "liqo", "join": true, "discoveryType": "Manual",
           "allowUntrustedCA": true, "trustMode": "Untrusted"})
}

fn version() -> Value {
    json!({"major": "1", "minor": "36", "gitVersion": "v1.36.0", "gitCommit": "x", "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26", "compiler": "gc", "platform": "linux/amd64"})
}

#[tokio::test]
async fn anonymous_join_takes_the_ca_from_cluster_info_and_offers_without_credentials() {
    let mut home = vec![call("POST", SECRETS, 201, Value::Null)]; // <fc>-ca-data
    home.extend(offer_home());
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    let remote = vec![
        call("GET", "/version", 200, version()),
        call("POST", "/api/v1/namespaces/liqo/secrets", 201, Value::Null),
        call("POST", ANON_PRS, 201, Value::Null),
    ];
    let w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    let action = w.reconcile(fc(anonymous_spec(), json!({}), true)).await.unwrap();
    assert_eq!(action, Action::requeue(Timing::default().health));
    expect(&w.home, &home);
    expect(&w.remote, &remote);

    let asked = w.peer.asked.lock().unwrap().clone();
    assert_eq!(asked[0], "cluster-info", "the CA comes from kube-public/cluster-info, not an auth service");
    assert_eq!(asked[1], format!("api_client:{}", liqo_reconciler::remote::peer::ANONYMOUS_KUBECONFIG), "no credentials");
    assert_eq!(*w.peer.api_urls.lock().unwrap(), [Some(API.to_owned())]);
    let home_seen = w.home.lock().unwrap().clone();
    let ca = body_of(&home_seen, "POST", SECRETS);
    assert_eq!(ca["metadata"]["name"], format!("{FC}-ca-data"));
    let remote_seen = w.remote.lock().unwrap().clone();
    let pr = body_of(&remote_seen, "POST", ANON_PRS);
    assert_eq!(pr["metadata"]["name"], HOME);
    assert_eq!(pr["spec"]["kubeConfigRef"]["name"], format!("pr-kubeconfig-{HOME}"));
    let status = &body_of(&home_seen, "PATCH", &format!("{FCS}/{FC}/status"))["status"];
    let reason = |t: &str| status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == t).map(|c| c["reason"].clone());
    assert_eq!(reason("Authenticated"), Some(json!("Anonymous")));
    assert_eq!(reason("CaVerified"), Some(json!("Pinned")));
    assert_eq!(reason("Joined"), Some(json!("WaitingForAdvertisement")));
    assert_eq!(status["outgoing"]["joined"], false);
}

#[tokio::test]
async fn anonymous_offer_refused_says_what_the_remote_needs() {
    let mut home = offer_home();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                           "message": "secrets is forbidden: User \"system:anonymous\" cannot create resource"});
    let remote = vec![call("GET", "/version", 200, version()), call("POST", "/api/v1/namespaces/liqo/secrets", 403, forbidden)];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    let pinned = w.pinned.clone();
    w.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned);
    w.reconcile(fc(anonymous_spec(), json!({}), true)).await.unwrap();
    expect(&w.home, &home);
    expect(&w.remote, &remote);
    let home_seen = w.home.lock().unwrap().clone();
    let status = &body_of(&home_seen, "PATCH", &format!("{FCS}/{FC}/status"))["status"];
    let joined = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Joined").unwrap();
    assert_eq!(joined["reason"], "AnonymousPeeringRefused");
    assert!(joined["message"].as_str().unwrap().contains("manifests/anonymous-peering/"), "{joined}");
}

#[tokio::test]
async fn anonymous_peer_already_advertising_costs_one_remote_call() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let remote = vec![call("GET", "/version", 200, version())];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    let pinned = w.pinned.clone();
    w.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned);
    w.store_advertisement();
    w.reconcile(fc(anonymous_spec(), json!({}), true)).await.unwrap();
    expect(&w.home, &home);
    expect(&w.remote, &remote);
}

#[tokio::test]
async fn anonymous_offer_is_not_repeated_while_waiting_for_the_advertisement() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let remote = vec![call("GET", "/version", 200, version())];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    let pinned = w.pinned.clone();
    w.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned);
    // Offered already (outgoing says so), the peer has not advertised yet: no token, no offer.
    w.reconcile(fc(anonymous_spec(), joined_status(false), true)).await.unwrap();
    expect(&w.home, &home);
    expect(&w.remote, &remote);
}

#[tokio::test]
async fn anonymous_offer_is_made_again_when_the_advertisement_disappears() {
    let mut home = offer_home();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    let exists = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409});
    let remote = vec![
        call("GET", "/version", 200, version()),
        call("POST", "/api/v1/namespaces/liqo/secrets", 409, exists.clone()),
        call("POST", ANON_PRS, 201, Value::Null),
    ];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    let pinned = w.pinned.clone();
    w.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned);
    // Joined before (the Advertisement was there), now it is gone: the remote may have
    // dropped our PeeringRequest, so it is offered again (an existing Secret is fine).
    w.reconcile(fc(anonymous_spec(), joined_status(true), true)).await.unwrap();
    expect(&w.home, &home);
    expect(&w.remote, &remote);
    let home_seen = w.home.lock().unwrap().clone();
    let status = &body_of(&home_seen, "PATCH", &format!("{FCS}/{FC}/status"))["status"];
    let joined = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Joined").unwrap();
    assert_eq!(joined["reason"], "AdvertisementDeleted");
}

// The status is written whole: what it says after a change is all there is, and a round that
// finds nothing new writes nothing.

/// `fc` as the API server stores it after the status apply `written` (the applied status is
/// all this controller owns).
fn stored_after(mut fc: Value, written: &Value) -> Value {
    fc["status"] = written["status"].clone();
    fc
}

/// Condition `type_` of a status: (status, reason, message).
fn condition_of(status: &Value, type_: &str) -> (String, String, String) {
    let c = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == type_).unwrap_or_else(|| panic!("no {type_}"));
    (c["status"].as_str().unwrap().into(), c["reason"].as_str().unwrap().into(), c["message"].as_str().unwrap().into())
}

#[tokio::test]
async fn a_lost_advertisement_is_written_once_then_nothing_is_written() {
    let remote = vec![call("GET", format!("{PRS}/{HOME}"), 200, our_pr()), call("GET", format!("{PRS}/{HOME}"), 200, our_pr())];
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let before = fc(joined_spec(), healthy_status(&w), true);
    w.reconcile(before.clone()).await.unwrap();
    let written = w.home.lock().unwrap()[0].2.clone();
    // Server-side apply of the whole status: the Advertisement's name is gone from it, every
    // phase is there.
    assert_eq!(written["apiVersion"], "discovery.liqo.io/v1alpha1");
    assert_eq!(outgoing_but_handed(&written), json!({"joined": false, "remotePeeringRequestName": HOME}));
    let types: Vec<&str> = written["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["Trusted", "Authenticated", "RemoteReachable", "CaVerified", "Joined"]);
    assert_eq!(condition_of(&written["status"], "Joined").1, "AdvertisementDeleted");
    let seen = w.home.lock().unwrap()[0].1.clone();
    assert!(seen.contains("fieldManager=liqo-peering") && seen.contains("force=true") && seen.contains("fieldValidation=Ignore"), "{seen}");

    // The next health round over the stored object: the remote GET, and nothing written.
    w.reconcile(stored_after(before, &written)).await.unwrap();
    expect(&w.remote, &remote);
    expect(&w.home, &home);
}

#[tokio::test]
async fn a_fresh_peering_re_offers_over_a_request_left_by_an_earlier_one() {
    // An earlier peering's request is still on the remote and says what we ask, but its
    // ForeignCluster was deleted (our access revoked): the new one grants access again and
    // refreshes the kubeconfig Secret on the remote.
    let mut home = offer_home();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    let mut remote = vec![call("GET", format!("{PRS}/{HOME}"), 200, our_pr())];
    remote.extend(offer_remote());
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    w.reconcile(fc(joined_spec(), json!({}), true)).await.unwrap();
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let status = w.home.lock().unwrap().last().unwrap().2["status"].clone();
    assert_eq!(condition_of(&status, "Joined").1, "WaitingForAdvertisement");
}

/// Found by the fleet (1,155 offers made again for 3,000 peers): an offer stands until the status
/// read says so, however late the store shows it and whatever failed in between. Here the store
/// still shows no status after a round that could not reach the remote: the matching request is
/// kept, not offered again (no grant, no token, no write to the remote).
#[tokio::test]
async fn an_offer_is_not_made_again_while_the_store_lags_behind_its_status() {
    let mut home = offer_home();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())); // unreachable
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())); // reachable again
    let mut remote = vec![call("GET", format!("{PRS}/{HOME}"), 404, not_found())];
    remote.extend(offer_remote());
    remote.push(call("GET", format!("{PRS}/{HOME}"), 0, Value::Null));
    remote.push(call("GET", format!("{PRS}/{HOME}"), 200, our_pr()));
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let lagging = fc(joined_spec(), json!({}), true);
    for _ in 0..3 {
        let _ = w.reconcile(lagging.clone()).await;
    }
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let status = w.home.lock().unwrap().last().unwrap().2["status"].clone();
    assert_eq!(status["outgoing"]["remotePeeringRequestName"], HOME);
}

fn webhook_refusal() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
           "message": "admission webhook \"peeringrequests.liqo.io\" denied the request: peeringPolicy RejectAll refuses every PeeringRequest"})
}

#[tokio::test]
async fn a_refused_repair_says_not_joined_and_then_stays_quiet() {
    // The peer withdrew (our request deleted, its Advertisement gone) and refuses a new one.
    let round = |_: usize| {
        vec![
            call("GET", format!("{PRS}/{HOME}"), 404, not_found()),
            call("PATCH", format!("/api/v1/namespaces/{THERE}/secrets/pr-kubeconfig-{HOME}"), 200, Value::Null),
            call("PATCH", format!("{PRS}/{HOME}"), 403, webhook_refusal()),
        ]
    };
    let mut home = offer_home();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    home.extend(offer_home());
    home.extend(offer_home());
    let mut remote = round(0);
    remote.extend(round(1));
    remote.extend(round(2));
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let before = fc(joined_spec(), healthy_status(&w), true);
    let action = w.reconcile(before.clone()).await.unwrap();
    assert_eq!(action, Action::requeue(Timing::default().health));
    let written = w.home.lock().unwrap().iter().find(|(_, p, _)| p.contains("/status")).unwrap().2.clone();
    let (status, reason, message) = condition_of(&written["status"], "Joined");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "PeerRefused"));
    assert!(message.contains("peeringPolicy RejectAll"), "the webhook's words: {message}");
    assert_eq!(written["status"]["outgoing"], json!({"joined": false}));

    // Next round, nothing changed: the same attempt, no status write.
    let refused = stored_after(before, &written);
    assert_eq!(w.reconcile(refused.clone()).await.unwrap(), Action::requeue(Timing::default().health));

    // Refusing for 200 s by now: asked again after 100 s, not every health period.
    let mut long_refused = refused;
    let since = k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(200);
    let conditions = long_refused["status"]["conditions"].as_array_mut().unwrap();
    let joined = conditions.iter_mut().find(|c| c["type"] == "Joined").unwrap();
    joined["lastTransitionTime"] = json!(since.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    let after = w.reconcile(long_refused).await.unwrap();
    assert!(
        [Action::requeue(Duration::from_secs(100)), Action::requeue(Duration::from_secs(101))].contains(&after),
        "half the refusal so far: {after:?}"
    );
    expect(&w.remote, &remote);
    expect(&w.home, &home);
}

#[tokio::test]
async fn a_quick_rejoin_waits_for_the_previous_request_to_go() {
    let mut terminating = our_pr();
    terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    terminating["metadata"]["finalizers"] = json!(["discovery.liqo.io/peered"]);
    let remote = vec![call("GET", format!("{PRS}/{HOME}"), 200, terminating)];
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    // As unjoin left it.
    let status = json!({"outgoing": {"joined": false}});
    let action = w.reconcile(fc(joined_spec(), status, true)).await.unwrap();
    assert_eq!(action, Action::requeue(Timing::default().health), "woken by a watch once it is gone; this is the fallback");
    expect(&w.remote, &remote);
    expect(&w.home, &home);
    let written = w.home.lock().unwrap()[0].2.clone();
    let (_, reason, message) = condition_of(&written["status"], "Joined");
    assert_eq!(reason, "WaitingForAdvertisement");
    assert!(message.contains("still being deleted"), "{message}");
}

#[tokio::test]
async fn after_unjoin_no_phase_claims_anything() {
    let mut home = unjoin_local();
    home.extend(unjoin_ends());
    let mut w = world(home.clone(), unjoin_remote(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let mut spec = joined_spec();
    spec["join"] = json!(false);
    w.reconcile(fc(spec, healthy_status(&w), true)).await.unwrap();
    let written = w.home.lock().unwrap()[5].2.clone();
    let status = &written["status"];
    for phase in ["Trusted", "Authenticated", "RemoteReachable", "CaVerified"] {
        let (s, reason, _) = condition_of(status, phase);
        assert_eq!((s.as_str(), reason.as_str()), ("Unknown", "NotJoined"), "{phase}");
    }
    assert_eq!(condition_of(status, "Joined").1, "Unjoined");
    assert_eq!(status["outgoing"], json!({"joined": false}));
    assert!(status.get("authStatus").is_none(), "no stale authStatus: {status}");
    // The pinned CA stays (its Secret is kept for a later join).
    assert_eq!(status["caFingerprint"].as_str().unwrap(), liqo_certs::inspect::fingerprint_sha256(&w.pinned).unwrap());
}

#[tokio::test]
async fn a_malformed_answer_is_not_called_unreachable() {
    // Only /ids is asked (identification): it answers something malformed.
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let w = world(home.clone(), vec![], TrustMode::Untrusted);
    let ctx = Arc::new(context(
        w.ctx.shared.client.clone(),
        Answering(Handle(w.peer.clone()), IdsAnswer::Garbled),
        w.ctx.secrets.clone(),
        w.ctx.advertisements.clone(),
    ));
    let spec = json!({"join": true, "authUrl": AUTH, "discoveryType": "Manual", "allowUntrustedCA": true, "trustMode": "Untrusted"});
    let fc: ForeignCluster = serde_json::from_value(fc(spec, json!({}), false)).unwrap();
    reconcile(Arc::new(fc), ctx).await.unwrap();
    expect(&w.home, &home);
    let written = w.home.lock().unwrap()[0].2.clone();
    let (status, reason, _) = condition_of(&written["status"], "RemoteReachable");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "RemoteInvalid"));
}

/// What a scripted peer's `/ids` answers instead of the truth.
enum IdsAnswer {
    /// Something that is not JSON.
    Garbled,
    /// This cluster ID.
    Claims(&'static str),
}

/// The scripted peer, but for its `/ids` answer.
struct Answering(Handle, IdsAnswer);

impl Peers for Answering {
    async fn probe_trust(&self, a: &str) -> Result<TrustMode, Error> {
        self.0.probe_trust(a).await
    }
    async fn ids(&self, a: &str, t: Trust) -> Result<Ids, Error> {
        match self.1 {
            IdsAnswer::Garbled => {
                Err(Error::RemoteInvalid { step: Step::Ids, message: format!("{AUTH}/ids: expected value at line 1 column 1") })
            }
            IdsAnswer::Claims(id) => Ok(Ids { cluster_id: id.into(), ..self.0.ids(a, t).await? }),
        }
    }
    async fn ca(&self, a: &str, t: Trust) -> Result<String, Error> {
        self.0.ca(a, t).await
    }
    async fn identity(&self, a: &str, t: Trust, r: &IdentityRequest) -> Result<IdentityResponse, Error> {
        self.0.identity(a, t, r).await
    }
    async fn api_client(&self, a: &RemoteAccess) -> Result<Client, Error> {
        self.0.api_client(a).await
    }
    async fn cluster_info_ca(&self, a: &str, t: Trust) -> Result<String, Error> {
        self.0.cluster_info_ca(a, t).await
    }
}

/// A hostile peer's claim, judged with `known` in the store: the status written (the only call).
async fn claimed(id: &'static str, known: Option<ForeignCluster>) -> (Value, Action) {
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let w = world(home.clone(), vec![], TrustMode::Untrusted);
    let (foreign, mut writer) = reflector::store();
    if let Some(k) = known {
        writer.apply_watcher_event(&watcher::Event::Apply(k));
    }
    let peers = Answering(Handle(w.peer.clone()), IdsAnswer::Claims(id));
    let ctx = Arc::new(context_knowing(w.ctx.shared.client.clone(), peers, w.ctx.secrets.clone(), w.ctx.advertisements.clone(), foreign));
    let spec = json!({"join": true, "authUrl": AUTH, "discoveryType": "Manual", "allowUntrustedCA": true, "trustMode": "Untrusted"});
    let fc: ForeignCluster = serde_json::from_value(fc(spec, json!({}), false)).unwrap();
    let action = reconcile(Arc::new(fc), ctx).await.unwrap();
    expect(&w.home, &home);
    let written = w.home.lock().unwrap()[0].2.clone();
    assert!(calls_of(&w.remote).is_empty(), "nothing asked of the remote");
    (written, action)
}

#[tokio::test]
async fn a_peer_claiming_our_own_id_is_refused_before_anything_is_written() {
    let (written, action) = claimed(HOME, None).await;
    let (status, reason, message) = condition_of(&written["status"], "Joined");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "SelfPeering"));
    assert!(message.contains(&format!("{AUTH}/ids answers this cluster's own ID {HOME}")), "{message}");
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn a_peer_claiming_another_peers_id_is_refused_before_anything_is_written() {
    let victim = ForeignCluster::new(
        "the-real-one",
        serde_json::from_value(json!({"clusterIdentity": {"clusterID": REMOTE}, "authUrl": "https://real.example:8443"})).unwrap(),
    );
    let (written, action) = claimed(REMOTE, Some(victim)).await;
    let (status, reason, message) = condition_of(&written["status"], "Joined");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "ClusterIdTaken"));
    assert!(message.contains("which ForeignCluster the-real-one already stands for"), "{message}");
    assert_ne!(action, Action::await_change(), "looked at again later (the other may go away)");
    // The same ID with no other holder is identified as usual (the spec patched).
    let home = vec![call("PATCH", format!("{FCS}/{FC}"), 200, any_fc())];
    let w = world(home.clone(), vec![], TrustMode::Untrusted);
    let spec = json!({"join": true, "authUrl": AUTH, "discoveryType": "Manual", "allowUntrustedCA": true, "trustMode": "Untrusted"});
    w.reconcile(fc(spec, json!({}), false)).await.unwrap();
    expect(&w.home, &home);
}

#[tokio::test]
async fn a_peer_paired_by_fingerprint_is_trusted_and_verified_by_it_on_every_call() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}"), 200, any_fc())];
    let w = world(home.clone(), vec![], TrustMode::Untrusted);
    let colons: Vec<String> = PRESENTED.as_bytes().chunks(2).map(|c| String::from_utf8_lossy(c).to_uppercase()).collect();
    let spec = json!({"join": true, "authUrl": AUTH, "discoveryType": "Manual", "trustMode": "Untrusted",
                      "trustedCAFingerprint": colons.join(":")});
    w.reconcile(fc(spec, json!({}), false)).await.unwrap();
    expect(&w.home, &home); // identified: the spec patched, nothing refused
    assert_eq!(*w.peer.asked.lock().unwrap(), ["fingerprints", "ids"]);
    assert_eq!(*w.peer.trusts.lock().unwrap(), [Trust::Fingerprint(PRESENTED.into())], "the call itself checks the fingerprint");
}

#[tokio::test]
async fn a_peer_presenting_another_fingerprint_is_refused() {
    let home = vec![call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc())];
    let w = world(home.clone(), vec![], TrustMode::Untrusted);
    let approved = "cd".repeat(32);
    let spec = json!({"join": true, "authUrl": AUTH, "discoveryType": "Manual", "trustMode": "Untrusted",
                      "allowUntrustedCA": true, "trustedCAFingerprint": approved});
    let action = w.reconcile(fc(spec, json!({}), false)).await.unwrap();
    expect(&w.home, &home);
    let written = w.home.lock().unwrap()[0].2.clone();
    let (status, reason, message) = condition_of(&written["status"], "Trusted");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "FingerprintMismatch"), "a fingerprint wins over allowUntrustedCA");
    assert!(message.contains(&format!("presents SHA-256 {PRESENTED}, neither the approved {approved} nor signed by it")), "{message}");
    assert_ne!(action, Action::await_change(), "looked at again later");
    assert_eq!(*w.peer.asked.lock().unwrap(), ["fingerprints"]);
}

/// A peer paired by fingerprint: the fingerprint is read off its auth service once per
/// `PROOF_PERIODS` health periods, not every round (each read is one more TLS handshake);
/// after a failed call it is read again.
#[tokio::test]
async fn an_approved_fingerprint_is_checked_once_and_again_after_a_failure() {
    let get = || call("GET", format!("{PRS}/{HOME}"), 200, our_pr());
    let down = call("GET", format!("{PRS}/{HOME}"), 503, json!({"kind": "Status", "status": "Failure", "code": 503}));
    let remote = vec![get(), get(), get(), down, get()];
    let patch = || call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc());
    // Failed, silent (its own message), healthy again.
    let home = vec![patch(), patch(), patch()];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    w.store_advertisement();
    let mut spec = joined_spec();
    spec.as_object_mut().unwrap().remove("allowUntrustedCA");
    spec["trustedCAFingerprint"] = json!(PRESENTED);
    let mut status = healthy_status(&w);
    status["conditions"][0] = json!({"type": "Trusted", "status": "True", "reason": "FingerprintApproved",
        "message": format!("{AUTH} proves the certificate of the approved fingerprint (spec.trustedCAFingerprint), or one it signed"),
        "observedGeneration": 2, "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let fingerprints = |w: &World| w.peer.asked.lock().unwrap().iter().filter(|a| *a == "fingerprints").count();
    for _ in 0..3 {
        w.reconcile(fc(spec.clone(), status.clone(), true)).await.unwrap();
    }
    assert_eq!(fingerprints(&w), 1, "three healthy rounds, one check: {:?}", w.peer.asked.lock().unwrap());
    assert!(w.home.lock().unwrap().is_empty(), "nothing written while healthy");
    w.reconcile(fc(spec.clone(), status.clone(), true)).await.unwrap();
    let failed = w.home.lock().unwrap()[0].2["status"].clone();
    assert_eq!(condition_of(&failed, "RemoteReachable").0, "False");
    // Silent when connected to first: the proof is not read again from a peer that does not answer.
    w.reconcile_silent(fc(spec.clone(), failed.clone(), true)).await.unwrap();
    assert_eq!(fingerprints(&w), 1, "no proof asked of a silent peer: {:?}", w.peer.asked.lock().unwrap());
    w.reconcile(fc(spec, failed, true)).await.unwrap();
    assert_eq!(fingerprints(&w), 2, "read again after the failed call: {:?}", w.peer.asked.lock().unwrap());
    expect(&w.remote, &remote);
    expect(&w.home, &home);
}

/// An anonymous offer the remote never answered (it may have lost our request before it ever
/// advertised; we cannot read it there): made again once it has waited `Timing::refused`, with
/// an Event saying so (`PeeringRequestRefreshed`), and not again in the next round.
#[tokio::test]
async fn a_stale_anonymous_offer_is_made_again_once_per_interval() {
    let mut home = offer_home();
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    home.push(call("PATCH", format!("{FCS}/{FC}/status"), 200, any_fc()));
    let exists = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409});
    let remote = vec![
        call("GET", "/version", 200, version()),
        call("POST", "/api/v1/namespaces/liqo/secrets", 409, exists.clone()),
        call("POST", ANON_PRS, 409, exists),
        call("GET", "/version", 200, version()),
    ];
    let mut w = world(home.clone(), remote.clone(), TrustMode::Untrusted);
    let pinned = w.pinned.clone();
    w.store_secret(&format!("{FC}-ca-data"), "ca.crt", &pinned);
    let mut status = joined_status(false);
    status["conditions"] = json!([{"type": "Joined", "status": "False", "reason": "WaitingForAdvertisement",
        "message": "our PeeringRequest is on the remote; waiting for its Advertisement",
        "observedGeneration": 2, "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
    for _ in 0..2 {
        w.reconcile(fc(anonymous_spec(), status.clone(), true)).await.unwrap();
    }
    // Made again in the first round only (a new token, the same objects: AlreadyExists is fine).
    expect(&w.remote, &remote);
    expect(&w.home, &home);
}

/// An unjoin that cannot reach the remote looks again within a health period (not after the
/// 10 s retry when the period is shorter): found by the chaos soak with a 2 s period.
#[tokio::test]
async fn an_unjoin_waiting_for_the_remote_looks_again_within_a_health_period() {
    let remote = vec![call("DELETE", our_secret_there(), 0, Value::Null)];
    let mut w = world(vec![], remote.clone(), TrustMode::Untrusted);
    w.store_joined_secrets();
    let timing = Timing { health: Duration::from_secs(2), ..Timing::default() };
    w.ctx = Arc::new(Arc::try_unwrap(w.ctx).ok().expect("the only holder").with_timing(timing));
    let action = w.reconcile(deleted(fc(joined_spec(), joined_status(true), true), 5)).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(2)));
    expect(&w.remote, &remote);
}
