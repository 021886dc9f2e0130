//! What the tests that run the `liqo-reconciler` binary against real control planes share.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams};
use liqo_api::{ForeignCluster, PeeringRequest};
use liqo_testenv::{ControlPlane, eventually, free_port, install_liqo};

/// A running `liqo-reconciler`, killed on drop.
pub struct Reconciler {
    pub child: Child,
    pub auth_url: String,
    pub ops: u16,
    /// Where its stdout and stderr go.
    pub log: std::path::PathBuf,
}

impl Drop for Reconciler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `liqo-reconciler` binary: `LIQO_RECONCILER_BIN` when set; Cargo's own for this crate's tests; for another crate's (the
/// plugin's), the one built beside the running test (`cargo test --workspace` builds every
/// binary before it runs a test).
pub fn reconciler_binary() -> Option<std::path::PathBuf> {
    // Another build of it (the join bench against a debug build, say).
    if let Some(path) = std::env::var_os("LIQO_RECONCILER_BIN") {
        return Some(path.into());
    }
    if let Some(path) = option_env!("CARGO_BIN_EXE_liqo-reconciler") {
        return Some(path.into());
    }
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("liqo-reconciler");
    path.exists().then_some(path)
}

/// Installs the reconciler's RBAC from `manifests/reconciler/rbac.yaml` (and the policy on what
/// peers may write, `peer-secrets.yaml`) and returns a token of
/// its ServiceAccount, so the test runs with exactly the permissions shipped.
pub async fn reconciler_token(admin: &Client) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/reconciler/rbac.yaml")).unwrap();
    liqo_testenv::create_manifest(admin, &text, "liqo").await;
    // Its holder key's Secret in kube-system, and the Role to fill it.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/reconciler/holder-key.yaml")).unwrap();
    liqo_testenv::create_manifest(admin, &text, "liqo").await;
    // And what a peer's identity may write, as shipped beside it.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/reconciler/peer-secrets.yaml")).unwrap();
    liqo_testenv::create_manifest(admin, &text, "liqo").await;
    liqo_testenv::service_account_token(admin, "liqo", "liqo-reconciler").await
}

pub fn start_reconciler(cp: &ControlPlane, name: &str, token: &str) -> Reconciler {
    start_reconciler_with(cp, name, token, &[])
}

/// [`start_reconciler`] with extra flags (a later flag wins over the defaults here).
pub fn start_reconciler_with(cp: &ControlPlane, name: &str, token: &str, extra: &[&str]) -> Reconciler {
    start_reconciler_on(cp, name, token, extra, (free_port(), free_port()))
}

/// A reconciler started again as a Deployment would restart its pod: the same ports (its
/// Service address stays), its log appended to.
#[allow(dead_code)] // each test binary uses its own part of the helpers
pub fn restart_reconciler(cp: &ControlPlane, r: &mut Reconciler, name: &str, token: &str, extra: &[&str]) {
    let auth: u16 = r.auth_url.rsplit(':').next().unwrap().parse().unwrap();
    let _ = r.child.kill();
    let _ = r.child.wait();
    *r = start_reconciler_on(cp, name, token, extra, (auth, r.ops));
}

/// A reconciler on the given auth and operations ports.
#[allow(dead_code)] // each test binary uses its own part of the helpers
pub fn start_reconciler_on(cp: &ControlPlane, name: &str, token: &str, extra: &[&str], (auth, ops): (u16, u16)) -> Reconciler {
    let auth_url = format!("https://localhost:{auth}");
    let log_path = cp.path().join(format!("{name}-reconciler.log"));
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path).unwrap();
    let mut args = vec![
        "--namespace=liqo".to_owned(),
        format!("--auth-listen=127.0.0.1:{auth}"),
        format!("--ops-listen=127.0.0.1:{ops}"),
        format!("--generate-cert-dir={}", cp.path().join(format!("{name}-auth-certs")).display()),
        format!("--api-url={}", cp.url),
        format!("--auth-url={auth_url}"),
        "--health-period-seconds=2".to_owned(),
        "--advertise-period-seconds=2".to_owned(),
        "--unjoin-grace-seconds=5".to_owned(),
        // Both reconcilers run in this machine's own network namespace: no multicast here.
        "--no-mdns".to_owned(),
    ];
    // A flag given in `extra` replaces the default of the same name.
    let flag = |a: &str| a.split('=').next().unwrap_or_default().to_owned();
    args.retain(|a| !extra.iter().any(|e| flag(e) == flag(a)));
    args.extend(extra.iter().map(|e| (*e).to_owned()));
    let child = Command::new(reconciler_binary().expect("the liqo-reconciler binary (cargo build -p liqo-reconciler)"))
        .env("KUBECONFIG", cp.kubeconfig(token))
        .env("RUST_LOG", "info,liqo_reconciler=debug")
        .args(args)
        .stdout(log.try_clone().unwrap())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("starting liqo-reconciler");
    Reconciler { child, auth_url, ops, log: log_path }
}

/// `GET <path>` on the ops port: the status line and the body.
pub async fn ops_get(r: &Reconciler, path: &str) -> Option<(String, String)> {
    liqo_testenv::plain_get(r.ops, path).await
}

/// `GET /readyz` on the ops port answers 200 (within 90 s: a loaded machine starts two control
/// planes per test). If the process exits or the deadline passes, panics with its log's tail.
pub async fn ready(r: &mut Reconciler) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        if ops_get(r, "/readyz").await.is_some_and(|(s, _)| s.contains(" 200 ")) {
            return;
        }
        if let Some(status) = r.child.try_wait().unwrap() {
            panic!("the reconciler exited ({status}) before it was ready:\n{}", log_tail(r));
        }
        assert!(tokio::time::Instant::now() < deadline, "the reconciler not ready after 90 s:\n{}", log_tail(r));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Lines of INFO and above in `r`'s log so far (the tests run it with `liqo_reconciler=debug`;
/// the level is between color codes, so the bare word is matched).
#[allow(dead_code)] // each test binary uses its own part of the helpers
pub fn info_lines(r: &Reconciler) -> usize {
    std::fs::read_to_string(&r.log).expect("the reconciler's log").lines().filter(|l| !l.contains("DEBUG") && !l.contains("TRACE")).count()
}

/// The lines of the reconciler's log that hold `text`.
pub fn log_count(r: &Reconciler, text: &str) -> usize {
    std::fs::read_to_string(&r.log).unwrap_or_default().lines().filter(|l| l.contains(text)).count()
}

/// The last 20 lines of the reconciler's log.
pub fn log_tail(r: &Reconciler) -> String {
    let log = std::fs::read_to_string(&r.log).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

pub async fn cluster_id(client: &Client) -> String {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "liqo");
    eventually("the cluster ID", || {
        let cms = cms.clone();
        async move { cms.get_opt("cluster-id").await.ok()??.data?.get("cluster-id").cloned() }
    })
    .await
}

/// Sends SIGTERM and waits for the process to exit; its exit status.
pub async fn terminate(r: &mut Reconciler) -> std::process::ExitStatus {
    assert!(Command::new("kill").args(["-TERM", &r.child.id().to_string()]).status().unwrap().success());
    exited(r).await
}

/// Waits for the process to exit; its exit status.
pub async fn exited(r: &mut Reconciler) -> std::process::ExitStatus {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(status) = r.child.try_wait().unwrap() {
            return status;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for the reconciler to exit; its log ends:\n{}", log_tail(r));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Sends `signal` (e.g. `STOP`, `CONT`) to the reconciler.
pub fn signal(r: &Reconciler, signal: &str) {
    assert!(Command::new("kill").args([&format!("-{signal}"), &r.child.id().to_string()]).status().unwrap().success());
}

/// The value of the sample of `/metrics` that starts with `series` (name and labels).
pub async fn metric(r: &Reconciler, series: &str) -> f64 {
    let (_, body) = ops_get(r, "/metrics").await.unwrap_or_default();
    body.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0.0)
}

/// Waits until the reconciler has reconciled ForeignClusters `n` more times (successfully).
pub async fn reconciles_later(r: &Reconciler, n: f64) {
    const SERIES: &str = r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="ok"}"#;
    let start = metric(r, SERIES).await;
    eventually(&format!("{n} more ForeignCluster reconciles"), || async { (metric(r, SERIES).await >= start + n).then_some(()) }).await;
}

/// Events about the object named `regarding` with `reason`, counting each repetition of a
/// series (the recorder folds repeats into one Event with a count).
/// [`event_count`] once it has reached `at_least`, as it then stands (for an exact assertion):
/// an Event is sent after the status write it tells of, so a test that saw the write may list
/// the Events before the Event is there.
pub async fn events_once(client: &Client, reason: &str, regarding: &str, at_least: i32) -> i32 {
    let what = format!("{at_least} {reason} Event(s) about {regarding}");
    eventually(&what, || async {
        let n = event_count(client, reason, regarding).await;
        (n >= at_least).then_some(n)
    })
    .await
}

pub async fn event_count(client: &Client, reason: &str, regarding: &str) -> i32 {
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(client.clone()).list(&Default::default()).await.unwrap();
    events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum()
}

/// Warning Events about the object named `regarding`: (reason, note).
pub async fn warnings(client: &Client, regarding: &str) -> Vec<(String, String)> {
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(client.clone()).list(&Default::default()).await.unwrap();
    events
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning") && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Two control planes with Liqo's CRDs, each with a ready `liqo-reconciler`.
pub struct Two {
    pub home_cp: ControlPlane,
    pub remote_cp: ControlPlane,
    pub home: Client,
    pub remote: Client,
    pub home_rec: Reconciler,
    pub remote_rec: Reconciler,
    pub home_id: String,
    pub remote_id: String,
}

pub async fn two_clusters() -> Option<Two> {
    two_clusters_with(&[]).await
}

/// [`two_clusters`], the remote's reconciler started with `remote_flags` too.
pub async fn two_clusters_with(remote_flags: &[&str]) -> Option<Two> {
    two_clusters_flags(&[], remote_flags).await
}

/// [`two_clusters`], each reconciler started with its flags too.
pub async fn two_clusters_flags(home_flags: &[&str], remote_flags: &[&str]) -> Option<Two> {
    let home_cp = ControlPlane::start_or_skip().await?;
    let remote_cp = ControlPlane::start_or_skip().await?;
    let (home, remote) = (home_cp.admin(), remote_cp.admin());
    install_liqo(&home, "liqo").await;
    install_liqo(&remote, "liqo").await;
    // Each reconciler runs with the permissions of manifests/reconciler/rbac.yaml only.
    let home_rec = start_reconciler_with(&home_cp, "home", &reconciler_token(&home).await, home_flags);
    let remote_rec = start_reconciler_with(&remote_cp, "remote", &reconciler_token(&remote).await, remote_flags);
    let (mut home_rec, mut remote_rec) = (home_rec, remote_rec);
    ready(&mut home_rec).await;
    ready(&mut remote_rec).await;
    let (home_id, remote_id) = (cluster_id(&home).await, cluster_id(&remote).await);
    Some(Two { home_cp, remote_cp, home, remote, home_rec, remote_rec, home_id, remote_id })
}

/// Waits for ForeignCluster `name` to satisfy `pred`; returns it.
pub async fn fc_where(client: &Client, name: &str, what: &str, pred: impl Fn(&ForeignCluster) -> bool) -> ForeignCluster {
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    eventually(what, || {
        let fcs = fcs.clone();
        let name = name.to_owned();
        let pred = &pred;
        async move { fcs.get_opt(&name).await.ok()?.filter(|f| pred(f)) }
    })
    .await
}

/// Waits for `name` to be gone.
pub async fn gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(what, || {
        let api = api.clone();
        let name = name.to_owned();
        async move { matches!(api.get_opt(&name).await, Ok(None)).then_some(()) }
    })
    .await
}

/// Waits until PeeringRequest `name` reports `state` with condition `Advertised` of `reason`.
pub async fn advertisement_status(prs: &Api<PeeringRequest>, name: &str, state: liqo_api::AdvertisementState, reason: &str) {
    eventually(&format!("PeeringRequest {name} reporting {state:?}"), || async {
        let status = prs.get(name).await.ok()?.status?;
        let advertised = status.conditions.iter().find(|c| c.type_ == "Advertised")?;
        (status.advertisement_status == Some(state) && advertised.reason == reason).then_some(())
    })
    .await;
}

pub fn outgoing_joined(f: &ForeignCluster) -> bool {
    f.status.as_ref().and_then(|s| s.outgoing.as_ref()).is_some_and(|o| o.joined)
}

/// The condition `type_` of a ForeignCluster: (status, reason, message).
pub fn phase(f: &ForeignCluster, type_: &str) -> Option<(String, String, String)> {
    let c = liqo_reconciler::reporting::conditions::get(&f.status.as_ref()?.conditions, type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Creates ForeignCluster `name` on `home` in the auth-service form (the remote's auth service, its
/// self-signed CA allowed) with `join: true`.
pub async fn peer_by_auth_url(home: &Client, name: &str, remote: &Reconciler) {
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": name},
        "spec": {"authUrl": remote.auth_url, "join": true, "allowUntrustedCA": true}
    }))
    .unwrap();
    Api::<ForeignCluster>::all(home.clone()).create(&PostParams::default(), &fc).await.unwrap();
}

/// Our admission webhook, in this process, serving `cp`'s API server (its `url:` configurations
/// installed there, its stores fed by `admin`'s watches).
pub struct Webhook {
    certs: tempfile::TempDir,
    handle: axum_server::Handle<std::net::SocketAddr>,
    addr: std::net::SocketAddr,
    admin: Client,
    /// Its operations port (/healthz, /readyz, /metrics) on 127.0.0.1 (of its first start).
    pub ops: u16,
}

/// Serves the admission webhook with the certificate in `certs` on `listener`, its stores fed
/// by fresh watches of `admin`'s.
async fn serve_webhook(
    admin: &Client,
    certs: &std::path::Path,
    listener: std::net::TcpListener,
) -> (axum_server::Handle<std::net::SocketAddr>, std::sync::Arc<liqo_webhook::server::App>) {
    use liqo_webhook::server::{App, BODY_TIMEOUT, DEFAULT_MAX_BODY, admission_router, serve_https};
    use liqo_webhook::tls::{CertFiles, ReloadingCert, server_config};
    let cert = ReloadingCert::load(CertFiles { cert: certs.join("tls.crt"), key: certs.join("tls.key") }).unwrap();
    let view = std::sync::Arc::new(liqo_webhook::state::StoreView::start(admin.clone(), "liqo"));
    let metrics = std::sync::Arc::new(liqo_webhook::metrics::Metrics::default());
    let app = std::sync::Arc::new(App { view, metrics, max_body: DEFAULT_MAX_BODY, body_timeout: BODY_TIMEOUT });
    let handle = axum_server::Handle::new();
    app.metrics.served(&cert);
    tokio::spawn(serve_https(listener, server_config(cert), admission_router(app.clone()), handle.clone()));
    handle.listening().await.expect("webhook listening");
    (handle, app)
}

pub async fn start_webhook(admin: &Client) -> Webhook {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    liqo_certs::files::ensure(certs.path(), &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (handle, app) = serve_webhook(admin, certs.path(), listener).await;
    let ops_listener = tokio::net::TcpListener::bind(("127.0.0.1", free_port())).await.unwrap();
    let ops = ops_listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(ops_listener, liqo_webhook::server::ops_router(app)).await });
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/webhook/webhook-configurations.yaml")).unwrap();
    let ca = std::fs::read_to_string(certs.path().join("ca.crt")).unwrap();
    let yaml = liqo_certs::inject_ca_bundle(&manifest, &ca, Some(&format!("https://127.0.0.1:{}", addr.port()))).unwrap();
    liqo_testenv::create_manifest(admin, &yaml, "liqo").await;
    Webhook { certs, handle, addr, admin: admin.clone(), ops }
}

impl Webhook {
    /// Stops serving at once (open connections dropped, as when its process is killed), waits
    /// `down`, then serves again on the same address with fresh stores, as its restarted pod.
    #[allow(dead_code)] // each test binary uses its own part of the helpers
    pub async fn kill_and_restart(&mut self, down: std::time::Duration) {
        self.handle.shutdown();
        tokio::time::sleep(down).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let listener = loop {
            match std::net::TcpListener::bind(self.addr) {
                Ok(l) => break l,
                Err(e) => {
                    assert!(std::time::Instant::now() < deadline, "the webhook's address {} stays taken: {e}", self.addr);
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        };
        self.handle = serve_webhook(&self.admin, self.certs.path(), listener).await.0;
    }
}

/// Sets the cluster's `peeringPolicy` (`AcceptAll`, `AcceptKnown`, `RejectAll`).
#[allow(dead_code)] // each test binary uses its own part of the helpers
pub async fn set_policy(admin: &Client, policy: &str) {
    let patch = serde_json::json!({"spec": {"peeringPolicy": policy}});
    Api::<liqo_api::ClusterConfig>::all(admin.clone())
        .patch("liqo-configuration", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch))
        .await
        .unwrap();
}

/// The PeeringRequests of cluster `id` on the cluster of `client`: in its tenant namespace
/// there (protocol §9).
pub fn requests_of(client: &Client, id: &str) -> Api<PeeringRequest> {
    Api::namespaced(client.clone(), &liqo_api::names::tenant_namespace(id))
}

/// The Advertisements of cluster `id` on the cluster of `client`: in its tenant namespace there.
pub fn advertisements_of(client: &Client, id: &str) -> Api<liqo_api::Advertisement> {
    Api::namespaced(client.clone(), &liqo_api::names::tenant_namespace(id))
}

/// The ServiceAccounts issued to cluster `id` on the cluster of `client`: in its tenant namespace.
pub fn identities_of(client: &Client, id: &str) -> Api<k8s_openapi::api::core::v1::ServiceAccount> {
    Api::namespaced(client.clone(), &liqo_api::names::tenant_namespace(id))
}

/// Waits until cluster `id`'s tenant namespace on the cluster of `client` is gone. Without the
/// controllers of `cp` (an assets folder with no kube-controller-manager) a namespace asked to go
/// never finishes going: the test finishes it as the namespace controller would (`finalize`, its
/// finalizers emptied), so that a peering made again can use it. What it held stays in storage
/// (the namespace controller would delete it first) and is found there again by a peering that
/// makes the namespace again.
pub async fn tenant_gone(cp: &ControlPlane, client: &Client, id: &str) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let name = liqo_api::names::tenant_namespace(id);
    liqo_testenv::eventually(&format!("tenant namespace {name} gone"), || async {
        match namespaces.get_opt(&name).await.ok()? {
            None => Some(()),
            Some(mut ns) if ns.metadata.deletion_timestamp.is_some() && !cp.controllers() => {
                ns.spec.get_or_insert_default().finalizers = Some(Vec::new());
                let _ = namespaces.replace_subresource("finalize", &name, &kube::api::PostParams::default(), &ns).await;
                None
            }
            Some(_) => None,
        }
    })
    .await;
}
