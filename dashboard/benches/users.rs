//! What one more user costs the in-cluster dashboard, on a real API server (envtest
//! convention: `KUBEBUILDER_ASSETS`; prints SKIPPED without it): 1,000 ForeignClusters, the
//! shared watches synced, then 1, 10 and 50 users logged in (each with a token of their own,
//! bound to `liqo-peering-operator`) and their home page served once. Prints this process's
//! RSS at each step, the RSS per extra user, and the watches of ForeignClusters the API server
//! holds open (its own gauge).
//!
//! `cargo bench -p liqo-dashboard --bench users` (or `just bench`).

use std::path::Path;

use axum::body::Body;
use http_body_util::BodyExt;
use kube::Client;
use kube::api::{Api, PostParams};
use liqo_api::{ForeignCluster, ForeignClusterSpec};
use liqo_dashboard::sessions::Sessions;
use liqo_testenv::{ControlPlane, create_manifest, eventually, install_liqo, service_account_token};
use tower::ServiceExt;

const PEERS: usize = 1000;
const MANIFESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/dashboard");

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

/// Watches of ForeignClusters open on the API server now (its own gauge).
async fn fc_watches(admin: &Client) -> f64 {
    liqo_testenv::watches_open(admin, "foreignclusters", liqo_testenv::WatchScope::Cluster).await
}

/// A user `name` bound to `liqo-peering-operator` and the cluster-ID reader; their token.
async fn user(admin: &Client, name: &str) -> String {
    let yaml = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: liqo}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {name}-liqo}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: liqo-peering-operator}}\n\
         subjects: [{{kind: ServiceAccount, name: {name}, namespace: liqo}}]\n"
    );
    create_manifest(admin, &yaml, "liqo").await;
    service_account_token(admin, "liqo", name).await
}

/// The home page as the user holding `token` sees it (the first view opens their session).
async fn home(app: &axum::Router, token: &str) -> String {
    let request = http::Request::get("/")
        .header("host", "dashboard.example")
        .header("cookie", format!("{}={token}", liqo_dashboard::sessions::COOKIE))
        .body(Body::empty())
        .unwrap();
    let body = app.clone().oneshot(request).await.unwrap().into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    for file in ["rbac.yaml", "user-role.yaml"] {
        create_manifest(&admin, &std::fs::read_to_string(Path::new(MANIFESTS).join(file)).unwrap(), "liqo").await;
    }
    let fcs: Api<ForeignCluster> = Api::all(admin.clone());
    for i in 0..PEERS {
        let spec = ForeignClusterSpec { cluster_id: Some(format!("{i:08x}-0000-4000-8000-000000000000")), ..Default::default() };
        fcs.create(&PostParams::default(), &ForeignCluster::new(&format!("peer-{i}"), spec)).await.unwrap();
    }
    let own = service_account_token(&admin, "liqo", "liqo-dashboard").await;
    let mut tokens = Vec::new();
    for i in 0..50 {
        tokens.push(user(&admin, &format!("user-{i}")).await);
    }

    let before = rss_kib();
    let sessions = Sessions::new(cp.client(&own).unwrap(), cp.config().unwrap(), "liqo");
    let app = liqo_dashboard::server::in_cluster_router(sessions.clone());
    let first = eventually("the shared stores filled", || async {
        Some(home(&app, &tokens[0]).await)
            .filter(|page| page.contains(&format!("<p id=\"peer-counts\">{PEERS} peers")))
            .map(|page| page.len())
    })
    .await;
    let one = rss_kib();
    println!("dashboard users: {PEERS} ForeignClusters; RSS before the dashboard {before} KiB; first page {first} bytes");
    println!("  1 user: RSS {one} KiB (+{} KiB for the shared watches and the first session)", one.saturating_sub(before));
    let mut last = (1usize, one);
    for n in [10usize, 50] {
        for token in &tokens[last.0..n] {
            home(&app, token).await;
        }
        let rss = rss_kib();
        let per_user = rss.saturating_sub(last.1) as f64 / (n - last.0) as f64;
        println!("  {n} users: RSS {rss} KiB, {per_user:.0} KiB per extra user; sessions {}", sessions.len());
        last = (n, rss);
    }
    println!("  watches of ForeignClusters open on the API server: {}", fc_watches(&admin).await);
}
