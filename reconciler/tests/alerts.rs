//! The shipped alert rules (`manifests/monitoring/liqo-alerts.rules.yaml`, unchanged) in a real
//! Prometheus (`prometheus` from Debian's package; SKIPPED without it) scraping the real
//! components on two real control planes (KUBEBUILDER_ASSETS; SKIPPED without them): both
//! reconcilers (the binary, health period 2 s) and our webhook. A joined peer raises no alert;
//! when the peer's API server stops, `LiqoPeerNotHealthy` fires for it; when it returns, the
//! alert resolves.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::*;
use liqo_testenv::{eventually, free_port, skip};
use serde_json::Value;

const FC: &str = "the-remote";

/// A Prometheus on 127.0.0.1, killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prometheus_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("prometheus")).find(|p| p.is_file())
}

/// Starts Prometheus scraping `reconcilers` and `webhooks` (ports on 127.0.0.1) every second,
/// evaluating the shipped rules every second.
fn start_prometheus(binary: &Path, reconcilers: &[u16], webhooks: &[u16]) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/monitoring/liqo-alerts.rules.yaml").canonicalize().unwrap();
    let targets = |ports: &[u16]| ports.iter().map(|p| format!("'127.0.0.1:{p}'")).collect::<Vec<_>>().join(", ");
    let config = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}}\n\
         rule_files: ['{}']\n\
         scrape_configs:\n\
         - job_name: liqo-reconciler\n  static_configs: [{{targets: [{}]}}]\n\
         - job_name: liqo-webhook\n  static_configs: [{{targets: [{}]}}]\n",
        rules.display(),
        targets(reconcilers),
        targets(webhooks)
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new(binary)
        .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone().unwrap())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("starting prometheus");
    Prometheus { child, port, _dir: dir }
}

/// `GET path` on Prometheus's HTTP API: the `data` of its JSON answer.
async fn api(p: &Prometheus, path: &str) -> Option<Value> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", p.port)).await.ok()?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await.ok()?;
    tokio::spawn(conn);
    let req = hyper::Request::get(path).header("host", "127.0.0.1").body(http_body_util::Empty::<hyper::body::Bytes>::new()).ok()?;
    let resp = sender.send_request(req).await.ok()?;
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.ok()?.to_bytes();
    let answer: Value = serde_json::from_slice(&body).ok()?;
    (answer["status"] == "success").then(|| answer["data"].clone())
}

/// The `LiqoPeerNotHealthy` alert for our ForeignCluster, if Prometheus has one (pending or firing).
async fn peer_alert(p: &Prometheus) -> Option<Option<Value>> {
    let data = api(p, "/api/v1/alerts").await?;
    let alerts = data["alerts"].as_array()?;
    Some(alerts.iter().find(|a| a["labels"]["alertname"] == "LiqoPeerNotHealthy" && a["labels"]["foreign_cluster"] == FC).cloned())
}

/// The value of an instant query with one series.
async fn query(p: &Prometheus, promql: &str) -> Option<f64> {
    let data =
        api(p, &format!("/api/v1/query?query={}", url::form_urlencoded::byte_serialize(promql.as_bytes()).collect::<String>())).await?;
    let result = data["result"].as_array()?;
    result.first()?["value"][1].as_str()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_down_alert_fires_when_its_api_server_stops_and_resolves_when_it_returns() {
    let Some(binary) = prometheus_binary() else {
        skip("prometheus not found (Debian's prometheus package; .ci/run installs it): the alerts were not run");
        return;
    };
    let Some(mut t) = two_clusters_with(&["--leader-election=false"]).await else { return };
    let webhook = start_webhook(&t.home).await;
    let prometheus = start_prometheus(&binary, &[t.home_rec.ops, t.remote_rec.ops], &[webhook.ops]);

    // Both components are scraped, and say what they are.
    eventually("Prometheus scraping both reconcilers and the webhook", || async {
        let targets = api(&prometheus, "/api/v1/targets").await?;
        let active = targets["activeTargets"].as_array()?;
        let up = |job: &str| active.iter().filter(|t| t["labels"]["job"] == job && t["health"] == "up").count();
        (up("liqo-reconciler") == 2 && up("liqo-webhook") == 1).then_some(())
    })
    .await;
    let version = env!("CARGO_PKG_VERSION");
    let built =
        format!(r#"count(liqo_webhook_build_info{{version="{version}"}}) + count(liqo_reconciler_build_info{{version="{version}"}})"#);
    eventually("both components' build_info", || async { (query(&prometheus, &built).await? == 3.0).then_some(()) }).await;
    eventually("the webhook's certificate expiry", || async {
        (query(&prometheus, "liqo_webhook_certificate_expiry_timestamp_seconds - time()").await? > 86_400.0).then_some(())
    })
    .await;

    // Joined: its series says 0 seconds unhealthy, and no alert.
    peer_by_auth_url(&t.home, FC, &t.remote_rec).await;
    fc_where(&t.home, FC, "joined", outgoing_joined).await;
    let healthy = format!(r#"liqo_reconciler_peer_unhealthy_seconds{{foreign_cluster="{FC}"}}"#);
    eventually("the joined peer scraped as healthy", || async { (query(&prometheus, &healthy).await? == 0.0).then_some(()) }).await;
    let joined = r#"liqo_reconciler_peers{state="joined"}"#;
    eventually("the joined peer counted by state", || async { (query(&prometheus, joined).await? == 1.0).then_some(()) }).await;
    assert_eq!(peer_alert(&prometheus).await, Some(None), "no alert for a joined peer");

    // The peer's API server stops: the alert fires, naming the peer and its cluster.
    t.remote_cp.stop_apiserver();
    let fired =
        eventually("LiqoPeerNotHealthy firing", || async { peer_alert(&prometheus).await.flatten().filter(|a| a["state"] == "firing") })
            .await;
    assert_eq!(fired["labels"]["cluster_id"], t.remote_id.as_str(), "{fired}");
    assert_eq!(fired["labels"]["severity"], "warning", "{fired}");
    assert_eq!(fired["labels"]["job"], "liqo-reconciler", "{fired}");
    let description = fired["annotations"]["description"].as_str().unwrap_or_default();
    assert!(description.contains(&format!("kubectl liqo status {FC}")), "{description}");
    let failing = query(&prometheus, r#"sum(liqo_reconciler_peers{state="failing",phase="RemoteReachable"})"#).await;
    assert_eq!(failing, Some(1.0), "the peer counted as failing at RemoteReachable");
    let checks = r#"sum(liqo_reconciler_peer_health_check_duration_seconds_count{result!="ok"})"#;
    assert!(query(&prometheus, checks).await.unwrap_or_default() >= 1.0, "the failed health calls are counted");

    // It returns: joined again, and the alert resolves.
    t.remote_cp.restart_apiserver().await;
    fc_where(&t.home, FC, "joined again", |f| outgoing_joined(f) && phase(f, "Joined").is_some_and(|p| p.0 == "True")).await;
    eventually("LiqoPeerNotHealthy resolved", || async { peer_alert(&prometheus).await?.is_none().then_some(()) }).await;
    eventually("the peer scraped as healthy again", || async { (query(&prometheus, &healthy).await? == 0.0).then_some(()) }).await;
}
