//! What the tests that run the `liqo-reconciler` binary against real control planes share.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use liqo_testenv::{ControlPlane, eventually, free_port};

/// A running `liqo-reconciler`, killed on drop.
pub struct Reconciler {
    pub child: Child,
    pub auth_url: String,
    pub ops: u16,
}

impl Drop for Reconciler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Installs the reconciler's RBAC from `manifests/reconciler/rbac.yaml` and returns a token of
/// its ServiceAccount, so the test runs with exactly the permissions shipped.
pub async fn reconciler_token(admin: &Client) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/reconciler/rbac.yaml")).unwrap();
    liqo_testenv::create_manifest(admin, &text, "liqo").await;
    liqo_testenv::service_account_token(admin, "liqo", "liqo-reconciler").await
}

pub fn start_reconciler(cp: &ControlPlane, name: &str, token: &str) -> Reconciler {
    let (auth, ops) = (free_port(), free_port());
    let auth_url = format!("https://localhost:{auth}");
    let log = std::fs::File::create(cp.path().join(format!("{name}-reconciler.log"))).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_liqo-reconciler"))
        .env("KUBECONFIG", cp.kubeconfig(token))
        .env("RUST_LOG", "info,liqo_reconciler=debug")
        .args([
            "--namespace=liqo".to_owned(),
            format!("--auth-listen=127.0.0.1:{auth}"),
            format!("--ops-listen=127.0.0.1:{ops}"),
            format!("--generate-cert-dir={}", cp.path().join(format!("{name}-auth-certs")).display()),
            format!("--api-url={}", cp.url),
            format!("--advertised-auth-url={auth_url}"),
            "--health-period-seconds=2".to_owned(),
            "--advertise-period-seconds=2".to_owned(),
            "--unjoin-grace-seconds=5".to_owned(),
            // Both reconcilers run in this machine's own network namespace: no multicast here.
            "--no-mdns".to_owned(),
        ])
        .stdout(log.try_clone().unwrap())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("starting liqo-reconciler");
    Reconciler { child, auth_url, ops }
}

/// `GET <path>` on the ops port: the status line and the body.
pub async fn ops_get(r: &Reconciler, path: &str) -> Option<(String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", r.ops)).await.ok()?;
    conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.ok()?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

/// `GET /readyz` on the ops port answers 200.
pub async fn ready(r: &Reconciler) {
    eventually("the reconciler ready", || async { ops_get(r, "/readyz").await.filter(|(s, _)| s.contains(" 200 ")) }).await;
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
    let child = &mut r.child;
    eventually("the reconciler exited", || {
        let s = child.try_wait().unwrap();
        async move { s }
    })
    .await
}
