//! The auth service over real HTTPS (certificate made by liqo-certs, verified by the client),
//! with a recording fake of the Kubernetes API behind it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use liqo_api::ClusterConfigSpec;
use liqo_reconciler::remote::auth::service::{ApiServer, AuthService, IdentityLabels, MAX_IDENTITY_BODY};
use liqo_reconciler::remote::auth::wire::{IdentityResponse, Ids};
use liqo_serve::{CertFiles, ReloadingCert, serve_https, server_config};
use liqo_testenv::https::{Answer, request};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};
use tokio::sync::watch;

const OWN: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

/// What the fake API server saw: method, path and query, JSON body.
type Calls = Arc<Mutex<Vec<(String, String, Value)>>>;

/// A fake API server: Secret `auth-token` holds `s3cret`; server-side apply and a create echo
/// the object; a TokenRequest gets the token `issued-token`; anything else is 404 (so a tenant
/// namespace and its quota are made).
fn fake_api() -> (Client, Calls) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let calls: Calls = Default::default();
    let seen = calls.clone();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let method = req.method().to_string();
            let path = req.uri().path_and_query().unwrap().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            seen.lock().unwrap().push((method.clone(), path.clone(), body.clone()));
            let (status, answer) = match (method.as_str(), path.split('?').next().unwrap()) {
                ("GET", "/api/v1/namespaces/liqo/secrets/auth-token") => (
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "auth-token", "namespace": "liqo"},
                           "data": {"token": "czNjcmV0"}}),
                ),
                ("PATCH", _) => (200, body),
                ("POST", p) if p.ends_with("/token") => (
                    201,
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": body["spec"],
                           "status": {"token": "issued-token", "expirationTimestamp": "2030-01-01T00:00:00Z"}}),
                ),
                ("POST", _) => (201, body),
                _ => (404, json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})),
            };
            let resp = Response::builder().status(status).body(Body::from(serde_json::to_vec(&answer).unwrap())).unwrap();
            send.send_response(resp);
        }
    });
    (Client::new(service, "default"), calls)
}

struct Running {
    addr: SocketAddr,
    api_ca: String,
    certs: tempfile::TempDir,
    calls: Calls,
    config: watch::Sender<Option<ClusterConfigSpec>>,
    _cluster_id: watch::Sender<Option<String>>,
    outcomes: Family<IdentityLabels, Counter>,
}

async fn start(cluster_id: Option<&str>) -> Running {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    liqo_certs::files::ensure(certs.path(), &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    // The API server CA handed out by /ca and in kubeconfigs: any real certificate will do.
    let api_ca = std::fs::read_to_string(certs.path().join("ca.crt")).unwrap();
    let cert = ReloadingCert::load(CertFiles { cert: certs.path().join("tls.crt"), key: certs.path().join("tls.key") }).unwrap();
    let (client, calls) = fake_api();
    let (cluster_id, id_rx) = watch::channel(cluster_id.map(str::to_owned));
    let mut spec = ClusterConfigSpec::default();
    spec.discovery_config.cluster_name = Some("LiqoCluster0692".into());
    let (config, cfg_rx) = watch::channel(Some(spec));
    let outcomes = Family::<IdentityLabels, Counter>::default();
    let service = Arc::new(AuthService {
        client,
        namespace: "liqo".into(),
        cluster_id: id_rx,
        config: cfg_rx,
        api_server: ApiServer { url: "https://api.home.example:6443".into(), ca_pem: api_ca.clone() },
        token_lifetime: Duration::from_secs(3600),
        limiter: liqo_reconciler::remote::auth::rate::Limiter::new(Default::default()),
        outcomes: outcomes.clone(),
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
    Running { addr, api_ca, certs, calls, config, _cluster_id: cluster_id, outcomes }
}

impl Running {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        request(self.addr, &self.certs.path().join("ca.crt"), method, path, body).await
    }
    fn writes(&self) -> Vec<(String, String, Value)> {
        self.calls.lock().unwrap().iter().filter(|(m, _, _)| m != "GET").cloned().collect()
    }
}

#[tokio::test]
async fn ids_answers_with_exactly_the_seed_keys() {
    let r = start(Some(OWN)).await;
    let a = r.call("GET", "/ids", None).await;
    assert_eq!(a.status, 200);
    // Byte-compatible with Liqo's documented `curl --insecure https://<ADDRESS>:<PORT>/ids`.
    // And the protocol spoken (protocol §3: more keys are allowed), which tells a cluster of the
    // cluster-scoped protocol apart, and the lifetime of the identities it issues (protocol §10:
    // a holder of a longer one renews it to this), and the release it runs.
    assert_eq!(
        a.text(),
        format!(
            r#"{{"clusterId":"0558de48-097b-4b7d-ba04-6bd2a0f9d24f","clusterName":"LiqoCluster0692","guestNamespace":"liqo","protocolVersion":2,"tokenLifetimeSeconds":3600,"version":"{}"}}"#,
            env!("CARGO_PKG_VERSION")
        )
    );
    let ids: Ids = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(ids.cluster_id, OWN);

    // Without a cluster name the cluster ID stands in for it.
    r.config.send_modify(|c| c.as_mut().unwrap().discovery_config.cluster_name = None);
    assert_eq!(r.call("GET", "/ids", None).await.json()["clusterName"], OWN);
}

#[tokio::test]
async fn ids_before_the_cluster_id_is_known_is_503() {
    let r = start(None).await;
    let a = r.call("GET", "/ids", None).await;
    assert_eq!(a.status, 503);
    assert!(a.json()["message"].as_str().unwrap().contains("cluster ID"));
}

#[tokio::test]
async fn ca_is_served_before_any_trust() {
    let r = start(Some(OWN)).await;
    let a = r.call("GET", "/ca", None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), r.api_ca);
}

#[tokio::test]
async fn the_right_token_gets_a_least_privilege_identity() {
    let r = start(Some(OWN)).await;
    let a = r.call("POST", "/identity", Some(json!({"clusterID": PEER, "token": "s3cret"}))).await;
    assert_eq!(a.status, 201, "{}", a.text());
    let answer: IdentityResponse = serde_json::from_slice(&a.body).unwrap();
    let tenant = format!("liqo-tenant-{PEER}");
    assert_eq!((answer.namespace.as_str(), answer.cluster_id.as_str()), (tenant.as_str(), OWN));
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&answer.kubeconfig).unwrap();
    assert_eq!(kubeconfig.contexts[0].context.as_ref().unwrap().namespace.as_deref(), Some(tenant.as_str()), "the context names it");
    let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://api.home.example:6443"));
    use secrecy::ExposeSecret;
    let token = kubeconfig.auth_infos[0].auth_info.as_ref().unwrap().token.as_ref().unwrap();
    assert_eq!(token.expose_secret(), "issued-token");

    // Exactly these writes, in this order: its tenant namespace and quota (none existed), the
    // identity there (created, not applied: of two first callers for an ID one wins), its
    // binding to the fixed requester role, then its token. Nothing cluster-wide but the
    // namespace itself.
    let sa = format!("remote-{PEER}");
    let writes = r.writes();
    let paths: Vec<(&str, String)> = writes.iter().map(|(m, p, _)| (m.as_str(), p.split('?').next().unwrap().to_owned())).collect();
    assert_eq!(
        paths,
        vec![
            ("POST", "/api/v1/namespaces".to_owned()),
            ("POST", format!("/api/v1/namespaces/{tenant}/resourcequotas")),
            ("PATCH", format!("/api/v1/namespaces/{tenant}/resourcequotas/liqo-tenant/status")),
            ("POST", format!("/api/v1/namespaces/{tenant}/serviceaccounts")),
            ("PATCH", format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{tenant}/rolebindings/liqo-peer-requester")),
            ("POST", format!("/api/v1/namespaces/{tenant}/serviceaccounts/{sa}/token")),
        ]
    );
    assert_eq!(
        writes[0].2["metadata"]["labels"],
        json!({"discovery.liqo.io/tenant-namespace": "true", "discovery.liqo.io/cluster-id": PEER})
    );
    assert!(writes[3..5].iter().all(|(_, p, _)| p.contains("fieldManager=liqo-auth")));
    assert!(writes[4].1.contains("force=true"));
    // Bound to its first holder: waiting to be used, issued now, expiring with its token.
    let account = &writes[3].2["metadata"];
    assert_eq!(account["name"], sa);
    assert_eq!(account["labels"], json!({"discovery.liqo.io/cluster-id": PEER, "discovery.liqo.io/identity": "waiting"}));
    let at = |k: &str| account["annotations"][k].as_str().unwrap().parse::<k8s_openapi::jiff::Timestamp>().unwrap();
    let life = at("discovery.liqo.io/expires-at").duration_since(at("discovery.liqo.io/issued-at"));
    assert_eq!(life.as_secs(), 3600, "the lifetime asked for");
    assert_eq!(writes[5].2["spec"]["expirationSeconds"], 3600);
    assert_eq!(
        writes[4].2["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "liqo-peer-requester"})
    );
    assert_eq!(writes[4].2["subjects"], json!([{"kind": "ServiceAccount", "name": sa, "namespace": tenant}]));
}

#[tokio::test]
async fn a_wrong_token_is_refused_and_nothing_is_written() {
    let r = start(Some(OWN)).await;
    let a = r.call("POST", "/identity", Some(json!({"clusterID": PEER, "token": "guess"}))).await;
    assert_eq!(a.status, 403);
    assert_eq!(a.json()["message"], "wrong token");
    assert!(r.writes().is_empty(), "{:?}", r.writes());
}

#[tokio::test]
async fn an_empty_token_follows_allow_empty_token_at_runtime() {
    let r = start(Some(OWN)).await;
    assert_eq!(r.call("POST", "/identity", Some(json!({"clusterID": PEER, "token": ""}))).await.status, 201);
    r.config.send_modify(|c| c.as_mut().unwrap().auth_config.allow_empty_token = false);
    let before = r.writes().len();
    let a = r.call("POST", "/identity", Some(json!({"clusterID": PEER}))).await;
    assert_eq!(a.status, 403);
    assert!(a.json()["message"].as_str().unwrap().contains("allowEmptyToken"));
    assert_eq!(r.writes().len(), before);
}

#[tokio::test]
async fn bad_identity_requests_say_what_is_wrong() {
    let r = start(Some(OWN)).await;
    let cases = [
        (json!({"clusterID": "Not A Cluster ID", "token": "s3cret"}), "clusterID"),
        (json!({"clusterID": OWN, "token": "s3cret"}), "own ID"),
        (json!({"token": "s3cret"}), "clusterID"),
        (json!(["not", "an", "object"]), "body"),
    ];
    for (body, expected) in cases {
        let a = r.call("POST", "/identity", Some(body.clone())).await;
        assert_eq!(a.status, 400, "{body}");
        let message = a.json()["message"].as_str().unwrap().to_owned();
        assert!(message.contains(expected), "{body} → {message}");
    }
    assert!(r.writes().is_empty());
}

mod client {
    //! Our client against our service, over real TLS: trust probing, pinning, the calls.
    use super::*;
    use liqo_api::TrustMode;
    use liqo_reconciler::remote::auth::client::{self, Verify};
    use liqo_reconciler::remote::auth::wire::IdentityRequest;

    fn base(r: &Running) -> String {
        format!("https://localhost:{}", r.addr.port())
    }

    fn our_ca(r: &Running) -> String {
        std::fs::read_to_string(r.certs.path().join("ca.crt")).unwrap()
    }

    #[tokio::test]
    async fn trust_follows_who_signed_the_certificate() {
        let r = start(Some(OWN)).await;
        let trusted = Verify::pinned(&our_ca(&r)).unwrap();
        assert_eq!(client::probe_trust(&base(&r), &trusted).await.unwrap(), TrustMode::Trusted);
        // The system roots do not know our test CA.
        assert_eq!(client::probe_trust(&base(&r), &Verify::system()).await.unwrap(), TrustMode::Untrusted);
        // A verified call with the wrong roots fails as untrusted; without verification it works.
        let err = client::ids(&base(&r), &Verify::system()).await.unwrap_err();
        assert_eq!(err.label(), "UntrustedRemote");
        assert_eq!(client::ids(&base(&r), &Verify::Nothing).await.unwrap().cluster_id, OWN);
        // A name the certificate does not cover is an error, not a trust decision.
        let by_ip = format!("https://127.0.0.2:{}", r.addr.port());
        assert!(client::probe_trust(&by_ip, &trusted).await.is_err());
        // Nobody listening: an error.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let err = client::probe_trust(&format!("https://localhost:{closed}"), &trusted).await.unwrap_err();
        assert_eq!(err.label(), "RemoteUnreachable");
    }

    #[tokio::test]
    async fn ids_ca_and_identity() {
        let r = start(Some(OWN)).await;
        let v = Verify::pinned(&our_ca(&r)).unwrap();
        let ids = client::ids(&base(&r), &v).await.unwrap();
        assert_eq!((ids.cluster_id.as_str(), ids.guest_namespace.as_str()), (OWN, "liqo"));
        assert_eq!(client::ca(&base(&r), &v).await.unwrap(), r.api_ca);
        let answer = client::identity(&base(&r), &v, &IdentityRequest::first(PEER, "s3cret".into())).await.unwrap();
        assert_eq!(answer.cluster_id, OWN);
        let refused = client::identity(&base(&r), &v, &IdentityRequest::first(PEER, "bad".into())).await.unwrap_err();
        assert!(refused.to_string().contains("HTTP 403: wrong token"), "{refused}");
    }

    #[tokio::test]
    async fn only_https_urls_are_called() {
        for bad in ["http://example.com:80", "not a url", "https://"] {
            let err = client::ids(bad, &Verify::Nothing).await.unwrap_err();
            assert_eq!(err.label(), "InvalidSpec", "{bad}: {err}");
        }
    }
}

/// A peer that accepts connections and never answers (a paused process, a black hole behind a
/// proxy) must not hold a reconcile forever: every call, the trust probe included, gives up
/// after the client's timeout. (The clock is paused: tokio moves it on while the call waits.)
#[tokio::test(start_paused = true)]
async fn a_peer_that_never_answers_is_unreachable_not_a_hang() {
    use liqo_reconciler::remote::auth::client::{self, Verify};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    // Accepts, keeps the connection open, says nothing.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let probe = client::probe_trust(&url, &Verify::system()).await.unwrap_err();
    assert_eq!(probe.label(), "RemoteUnreachable", "{probe}");
    assert!(probe.to_string().contains("timed out"), "{probe}");
    let ids = client::ids(&url, &Verify::Nothing).await.unwrap_err();
    assert!(ids.to_string().contains("timed out"), "{ids}");
}

/// Token guessing is slow and visible: after the burst, a source gets 429 with Retry-After —
/// before any API request — while `/ids` keeps answering.
#[tokio::test]
async fn guessing_tokens_is_rate_limited_per_source() {
    let r = start(Some(OWN)).await;
    let guess = || json!({"clusterID": PEER, "token": "guess"});
    for _ in 0..5 {
        assert_eq!(r.call("POST", "/identity", Some(guess())).await.status, 403);
    }
    let reads = r.calls.lock().unwrap().len();
    let limited = r.call("POST", "/identity", Some(guess())).await;
    assert_eq!(limited.status, 429, "{}", limited.text());
    let retry: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=6).contains(&retry), "one request every 6 s: {retry}");
    assert!(limited.json()["message"].as_str().unwrap().contains("too many identity requests from 127.0.0.1"));
    assert_eq!(r.calls.lock().unwrap().len(), reads, "a refused caller costs no API request");
    // The right token from the same source waits too; honest reads do not.
    assert_eq!(r.call("POST", "/identity", Some(json!({"clusterID": PEER, "token": "s3cret"}))).await.status, 429);
    assert_eq!(r.call("GET", "/ids", None).await.status, 200);
    let count = |result| r.outcomes.get_or_create(&IdentityLabels { result }).get();
    assert_eq!((count("wrong_token"), count("rate_limited"), count("issued")), (5, 2, 0));
}

/// A body over the cap is refused before it is read whole or counted against the source.
#[tokio::test]
async fn an_oversized_identity_body_is_refused() {
    let r = start(Some(OWN)).await;
    let huge = json!({"clusterID": PEER, "token": "x".repeat(MAX_IDENTITY_BODY)});
    let a = r.call("POST", "/identity", Some(huge)).await;
    assert_eq!(a.status, 413, "{}", a.text());
    assert!(r.calls.lock().unwrap().is_empty());
    assert_eq!(r.call("POST", "/identity", Some(json!({"clusterID": PEER, "token": "s3cret"}))).await.status, 201);
}

/// Every client sending an oversized body reads the 413, never a reset: 100 one after another,
/// then 20 at once, each writing its whole body before it reads (100 KiB, and 256 KiB: more
/// than loopback's buffers take in without the server reading).
#[tokio::test]
async fn oversized_bodies_always_read_413() {
    let r = start(Some(OWN)).await;
    let ca = r.certs.path().join("ca.crt");
    for size in [100 * 1024, 256 * 1024] {
        for (count, concurrent) in [(100, 1), (20, 20)] {
            let answers =
                liqo_testenv::https::oversized_requests(r.addr, &ca, "/identity", "application/json", size, count, concurrent).await;
            let wrong: Vec<&String> = answers.iter().filter(|a| *a != "HTTP/1.1 413 Payload Too Large").collect();
            assert!(
                wrong.is_empty(),
                "{size} bytes: {} of {count} ({concurrent} at a time) read no 413: {:?}",
                wrong.len(),
                &wrong[..wrong.len().min(3)]
            );
        }
    }
    assert!(r.calls.lock().unwrap().is_empty(), "no API request for any of them");
}

/// A peer whose `/ids` answers 10 MB: refused once the answer passes the client's 1 MiB cap,
/// never read whole.
#[tokio::test]
async fn a_peer_answering_ten_megabytes_is_refused() {
    use liqo_reconciler::remote::auth::client::{self, Verify};
    let certs = certificate_dir();
    let huge = format!("{{\"clusterId\":\"{}\"}}", "x".repeat(10 << 20));
    let router = axum::Router::new().route("/ids", axum::routing::get(move || std::future::ready(huge.clone())));
    let url = serve(router, certs.path()).await;
    let err = client::ids(&url, &Verify::Nothing).await.unwrap_err();
    assert!(err.to_string().contains("length limit"), "{err}");
}

/// A peer's API server that answers without end (here 64 MiB of JSON): the call fails at the
/// client's 4 MiB cap instead of filling our memory.
#[tokio::test]
async fn a_peer_api_server_answering_without_end_is_cut_off() {
    use base64::Engine;
    use kube::api::Api;
    use liqo_reconciler::remote::peer::{Network, Peers, RemoteAccess};
    let certs = certificate_dir();
    let endless = || async {
        let chunks = futures::stream::iter((0..1024).map(|_| Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b' '; 64 << 10]))));
        let head = futures::stream::once(async { Ok(axum::body::Bytes::from_static(b"{\"kind\":\"ConfigMap\",\"x\":\"")) });
        let body = futures::StreamExt::chain(head, chunks);
        ([(http::header::CONTENT_TYPE, "application/json")], axum::body::Body::from_stream(body))
    };
    let router = axum::Router::new().route("/api/v1/namespaces/liqo/configmaps/x", axum::routing::get(endless));
    let url = serve(router, certs.path()).await;

    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(certs.path().join("ca.crt")).unwrap());
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: p\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: p\n  context:\n    cluster: p\n    user: u\ncurrent-context: p\n"
    );
    let network = Network::new(liqo_reconciler::remote::auth::client::Verify::system(), Duration::from_secs(10));
    let client = network.api_client(&RemoteAccess { kubeconfig, api_url: None, ca_pem: None }).await.unwrap();
    let err = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client, "liqo").get("x").await.unwrap_err();
    assert!(err.to_string().contains("length limit"), "{err}");
}

/// Pairing by fingerprint over real TLS: the fingerprints read are the certificates', a call
/// verified by the leaf's or by the CA's succeeds, and one expecting another fingerprint is
/// refused at the handshake.
#[tokio::test]
async fn calls_are_verified_by_an_approved_fingerprint() {
    use liqo_reconciler::remote::auth::client::{self, Verify};
    let r = start(Some(OWN)).await;
    let url = format!("https://127.0.0.1:{}", r.addr.port());
    let fp = |file: &str| {
        let pem = std::fs::read_to_string(r.certs.path().join(file)).unwrap();
        liqo_certs::inspect::fingerprint_sha256(&pem).unwrap()
    };
    let (leaf, ca) = (fp("tls.crt"), fp("ca.crt"));
    assert_eq!(client::presented_fingerprints(&url).await.unwrap(), [leaf.clone(), ca.clone()], "the leaf, then its CA");
    assert_eq!(client::ids(&url, &Verify::Fingerprint(leaf)).await.unwrap().cluster_id, OWN);
    assert_eq!(client::ids(&url, &Verify::Fingerprint(ca)).await.unwrap().cluster_id, OWN);
    let err = client::ids(&url, &Verify::Fingerprint("00".repeat(32))).await.unwrap_err();
    assert!(err.to_string().contains("neither the approved one nor signed by it"), "{err}");
}

/// A name or namespace meant to drive a terminal (they end up in objects and on screens):
/// the answer is `RemoteInvalid`, not used.
#[tokio::test]
async fn an_ids_answer_with_control_characters_is_invalid() {
    use liqo_certs::issue::{issue_serving, new_ca};
    use liqo_reconciler::remote::auth::client::{self, Verify};
    let now = time::OffsetDateTime::now_utc();
    let ca = new_ca("liqo-ca", now, time::Duration::days(1)).unwrap();
    let leaf = issue_serving(&ca, &["127.0.0.1".to_owned()], now, time::Duration::days(1)).unwrap();
    for (name, namespace) in [("beta\x1b]0;pwned\x07", "liqo"), ("beta", "liqo\nfake")] {
        let ids = Ids {
            cluster_id: OWN.into(),
            cluster_name: name.into(),
            guest_namespace: namespace.into(),
            protocol_version: Some(2),
            token_lifetime_seconds: Some(7 * 24 * 3600),
            version: None,
        };
        let (url, _dir) = serve_ids(&leaf.cert_pem, &leaf.key_pem, ids).await;
        let err = client::ids(&url, &Verify::Nothing).await.unwrap_err();
        assert!(matches!(err, liqo_reconciler::Error::RemoteInvalid { .. }), "{err}");
        assert!(err.to_string().contains("control characters"), "{err}");
    }
}

/// Serves `/ids` over TLS with the certificate chain `chain` (PEM) and `key`; returns the URL.
async fn serve_chain(chain: &str, key: &str) -> (String, tempfile::TempDir) {
    let ids = Ids {
        cluster_id: OWN.into(),
        cluster_name: "x".into(),
        guest_namespace: "liqo".into(),
        protocol_version: Some(2),
        token_lifetime_seconds: Some(7 * 24 * 3600),
        version: None,
    };
    serve_ids(chain, key, ids).await
}

/// Serves `ids` as `/ids` over TLS with the certificate chain `chain` (PEM) and `key`.
async fn serve_ids(chain: &str, key: &str, ids: Ids) -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), chain).unwrap();
    std::fs::write(dir.path().join("tls.key"), key).unwrap();
    let router = axum::Router::new().route("/ids", axum::routing::get(move || std::future::ready(axum::Json(ids.clone()))));
    (serve(router, dir.path()).await, dir)
}

/// A directory with a CA and a serving certificate for localhost and 127.0.0.1.
fn certificate_dir() -> tempfile::TempDir {
    let certs = tempfile::tempdir().unwrap();
    let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    liqo_certs::files::ensure(certs.path(), &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    certs
}

/// Serves `router` over TLS on loopback with `tls.crt`/`tls.key` of `certs`; returns the URL.
async fn serve(router: axum::Router, certs: &std::path::Path) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = ReloadingCert::load(CertFiles { cert: certs.join("tls.crt"), key: certs.join("tls.key") }).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let handle = axum_server::Handle::new();
    tokio::spawn(serve_https(listener, server_config(cert), router, handle.clone()));
    handle.listening().await.unwrap();
    url
}

/// A peer paired by its CA's fingerprint stays verified across a renewal of its leaf; an
/// impostor who sends its own leaf followed by a copy of that CA (a certificate is public) or
/// of the approved leaf is refused: the approved certificate must be the one the server holds
/// the key of, or have signed it.
#[tokio::test]
async fn an_approved_ca_survives_a_leaf_renewal_and_a_copied_certificate_proves_nothing() {
    use liqo_certs::issue::{issue_serving, new_ca};
    use liqo_reconciler::remote::auth::client::{self, Verify};
    let now = time::OffsetDateTime::now_utc();
    let (year, sans) = (time::Duration::days(365), ["127.0.0.1".to_owned()]);
    let fp = |pem: &str| liqo_certs::inspect::fingerprint_sha256(pem).unwrap();
    let ca = new_ca("liqo-ca", now, year).unwrap();
    let first = issue_serving(&ca, &sans, now, year).unwrap();
    let renewed = issue_serving(&ca, &sans, now, year).unwrap();
    let other_ca = new_ca("someone-else", now, year).unwrap();
    let impostor = issue_serving(&other_ca, &sans, now, year).unwrap();
    let approved_ca = Verify::Fingerprint(fp(&ca.cert_pem));

    for genuine in [&first, &renewed] {
        let (url, _dir) = serve_chain(&format!("{}{}", genuine.cert_pem, ca.cert_pem), &genuine.key_pem).await;
        assert_eq!(client::ids(&url, &approved_ca).await.unwrap().cluster_id, OWN);
    }
    let (url, _dir) = serve_chain(&format!("{}{}", impostor.cert_pem, ca.cert_pem), &impostor.key_pem).await;
    let err = client::ids(&url, &approved_ca).await.unwrap_err();
    assert!(err.to_string().contains("neither the approved one nor signed by it"), "{err}");
    assert_eq!(client::presented_fingerprints(&url).await.unwrap(), [fp(&impostor.cert_pem)], "the copied CA is not shown as proven");
    let (url, _dir) = serve_chain(&format!("{}{}", impostor.cert_pem, first.cert_pem), &impostor.key_pem).await;
    let err = client::ids(&url, &Verify::Fingerprint(fp(&first.cert_pem))).await.unwrap_err();
    assert!(err.to_string().contains("neither the approved one nor signed by it"), "{err}");
}
