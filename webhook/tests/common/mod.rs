//! Test support: the captured fixtures, a real HTTPS webhook on 127.0.0.1 with a certificate
//! made by liqo-certs, and a client that verifies it against the CA.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use liqo_webhook::metrics::Metrics;
use liqo_webhook::server::{App, admission_router, ops_router, serve_https};
use liqo_webhook::state::StaticView;
use liqo_webhook::tls::{CertFiles, ReloadingCert, server_config};

/// Our cluster ID in the fixtures' world (the requester is 9a596a4b-...).
pub const OWN_ID: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
pub const PEER_ID: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission")
}

/// A captured AdmissionReview body, byte for byte.
/// The capture `name` as it is: PeeringRequests and FederationRequests of the cluster-scoped
/// protocol (0.1), with no namespace and a peer identity of the Liqo namespace.
pub fn captured(name: &str) -> Vec<u8> {
    std::fs::read(fixtures_dir().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// The capture `name` as a cluster of the tenant-namespace protocol (protocol §9) sends it: a
/// PeeringRequest or FederationRequest, and its kubeConfigRef, in the tenant namespace of the
/// cluster the requester is (its ServiceAccount there), or claims (anyone else). Every other
/// field as captured; other kinds untouched.
pub fn fixture(name: &str) -> Vec<u8> {
    let bytes = captured(name);
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let kind = v["request"]["kind"]["kind"].as_str().unwrap_or_default().to_owned();
    if kind != "PeeringRequest" && kind != "FederationRequest" {
        return bytes;
    }
    let user = v["request"]["userInfo"]["username"].as_str().unwrap_or_default().to_owned();
    let peer = user.strip_prefix("system:serviceaccount:liqo:remote-").map(str::to_owned);
    let object = if v["request"]["object"].is_object() { &v["request"]["object"] } else { &v["request"]["oldObject"] };
    let claimed =
        object["spec"]["clusterIdentity"]["clusterID"].as_str().or(object["spec"]["clusterID"].as_str()).unwrap_or_default().to_owned();
    let tenant = liqo_api::names::tenant_namespace(peer.as_deref().unwrap_or(&claimed));
    v["request"]["namespace"] = serde_json::json!(tenant);
    if let Some(id) = &peer {
        v["request"]["userInfo"]["username"] = serde_json::json!(format!("system:serviceaccount:{tenant}:remote-{id}"));
    }
    for which in ["object", "oldObject"] {
        let o = &mut v["request"][which];
        if o.is_object() {
            o["metadata"]["namespace"] = serde_json::json!(tenant);
            if o["spec"]["kubeConfigRef"].is_object() {
                o["spec"]["kubeConfigRef"]["namespace"] = serde_json::json!(tenant);
            }
        }
    }
    serde_json::to_vec(&v).unwrap()
}

pub fn fixture_uid(name: &str) -> String {
    let v: serde_json::Value = serde_json::from_slice(&fixture(name)).unwrap();
    v["request"]["uid"].as_str().unwrap().to_owned()
}

pub fn default_view() -> StaticView {
    StaticView::new("liqo", OWN_ID)
}

/// A running webhook: HTTPS admission port, plain ops port, certificate directory.
pub struct Running {
    pub addr: SocketAddr,
    pub ops: SocketAddr,
    pub certs: tempfile::TempDir,
    pub handle: axum_server::Handle<SocketAddr>,
    pub cert: Arc<ReloadingCert>,
}

pub fn sans() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into()]
}

pub async fn start(view: impl liqo_webhook::state::ClusterView, body_timeout: Duration) -> Running {
    start_with(view, body_timeout, liqo_webhook::server::DEFAULT_MAX_BODY).await
}

/// [`start`] with `max_body` as the largest body accepted.
pub async fn start_with(view: impl liqo_webhook::state::ClusterView, body_timeout: Duration, max_body: usize) -> Running {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    liqo_certs::files::ensure(certs.path(), &sans(), time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    let files = CertFiles { cert: certs.path().join("tls.crt"), key: certs.path().join("tls.key") };
    let cert = ReloadingCert::load(files).unwrap();
    let metrics = Arc::new(Metrics::default());
    cert.clone().spawn_reloader(Duration::from_millis(50), metrics.tls_reload_observer(cert.clone()));
    let app = Arc::new(App { view: Arc::new(view), metrics, max_body, body_timeout });

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = axum_server::Handle::new();
    tokio::spawn(serve_https(listener, server_config(cert.clone()), admission_router(app.clone()), handle.clone()));
    let ops_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ops = ops_listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(ops_listener, ops_router(app)).await });
    handle.listening().await.expect("server listening");
    Running { addr, ops, certs, handle, cert }
}

#[allow(unused_imports)] // each test binary uses its own part of the helpers
pub use liqo_testenv::https::{Answer, Conn, connector, send};

pub async fn connect(running: &Running) -> Conn {
    liqo_testenv::https::connect(running.addr, &running.certs.path().join("ca.crt")).await
}

pub async fn post(running: &Running, path: &str, body: Vec<u8>) -> Answer {
    let mut conn = connect(running).await;
    send(&mut conn, "POST", path, Some("application/json"), body).await
}

/// Applies the base64 JSON patch of `response` to `object`.
pub fn apply_patch(object: &serde_json::Value, response: &serde_json::Value) -> serde_json::Value {
    use base64::Engine;
    let mut doc = object.clone();
    if let Some(p) = response["patch"].as_str() {
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
    }
    doc
}
