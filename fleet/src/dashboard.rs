//! The dashboard at size (scenario g): the `liqo-dashboard` binary as it runs in a cluster
//! (its ServiceAccount, its RBAC and the users' Role from `manifests/dashboard/`), on the hub with every
//! ForeignCluster the run made, and a user logged in with a token, as a browser is: pages
//! fetched over TLS with the session cookie, the live channel (`/events`) held open.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use liqo_dashboard::sessions::COOKIE;
use liqo_testenv::{ControlPlane, Process, create_manifest, free_port, service_account_token};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The repository's dashboard manifests.
const MANIFESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/dashboard");

/// A running dashboard and how to reach it.
pub struct Dashboard {
    process: Process,
    addr: SocketAddr,
    tls: TlsConnector,
}

/// One page as a user got it.
pub struct Page {
    pub status: u16,
    pub text: String,
    pub took: Duration,
}

impl Dashboard {
    /// Installs the dashboard's RBAC and starts `bin/liqo-dashboard` as its ServiceAccount,
    /// serving on loopback with a certificate of its own; once it serves.
    pub async fn start(cp: &ControlPlane, bin: &Path) -> anyhow::Result<Self> {
        let admin = cp.admin();
        for file in ["rbac.yaml", "user-role.yaml"] {
            let text = std::fs::read_to_string(Path::new(MANIFESTS).join(file)).with_context(|| format!("manifests/dashboard/{file}"))?;
            create_manifest(&admin, &text, "liqo").await;
        }
        let own = service_account_token(&admin, "liqo", "liqo-dashboard").await;
        let port = free_port();
        let certs = cp.path().join("dashboard-certs");
        let child = std::process::Command::new(bin.join("liqo-dashboard"))
            .env("KUBECONFIG", cp.kubeconfig(&own))
            .args([format!("--listen=127.0.0.1:{port}"), format!("--generate-cert-dir={}", certs.display())])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(cp.path().join("dashboard.log"))?)
            .spawn()
            .context("starting liqo-dashboard")?;
        let process = Process(child);
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let ca = certs.join("ca.crt");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !(ca.exists() && TcpStream::connect(addr).await.is_ok()) {
            anyhow::ensure!(Instant::now() < deadline, "the dashboard did not serve within 60 s (see dashboard.log)");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Self { process, addr, tls: liqo_testenv::https::connector(&ca) })
    }

    /// The dashboard's resident memory now and at its peak (KiB).
    pub fn rss(&self) -> (u64, u64) {
        crate::hub::rss_of(self.process.0.id())
    }

    async fn send(&self, path: &str, token: &str) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
        let tcp = TcpStream::connect(self.addr).await?;
        let tls = self.tls.connect(rustls::pki_types::ServerName::try_from("localhost")?, tcp).await?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(conn);
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::COOKIE, format!("{COOKIE}={token}"))
            .body(Empty::<Bytes>::new())?;
        Ok(send.send_request(request).await?)
    }

    /// `path` as the user whose token is `token`: its status and text, and the time to its
    /// last byte.
    pub async fn get(&self, path: &str, token: &str) -> anyhow::Result<Page> {
        let started = Instant::now();
        let response = self.send(path, token).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Page { status, text: String::from_utf8_lossy(&body).into_owned(), took: started.elapsed() })
    }

    /// Opens the live channel as that user: each `change` event it sends is told, with when it
    /// came, on the returned channel (until the dashboard or the receiver goes).
    pub async fn live(&self, token: &str) -> anyhow::Result<tokio::sync::mpsc::UnboundedReceiver<Instant>> {
        let response = self.send("/events", token).await?;
        anyhow::ensure!(response.status() == 200, "/events answered {}", response.status());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut body = response.into_body();
        tokio::spawn(async move {
            while let Some(Ok(frame)) = body.frame().await {
                let Some(data) = frame.data_ref() else { continue };
                let changes = String::from_utf8_lossy(data).matches("event: change").count();
                for _ in 0..changes {
                    if tx.send(Instant::now()).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }
}

/// What Lighthouse scored of one page (desktop preset).
#[derive(Clone, Debug, PartialEq)]
pub struct Audit {
    pub performance: f64,
    pub accessibility: f64,
    pub best_practices: f64,
    /// First contentful paint, ms.
    pub fcp_ms: f64,
    /// The document's own bytes.
    pub document_bytes: f64,
}

impl Audit {
    /// Accessibility and best practices at 0.95 or more (performance is a timing: told).
    pub fn passes(&self) -> bool {
        self.accessibility >= 0.95 && self.best_practices >= 0.95
    }

    /// The figures of a Lighthouse JSON report (pure).
    pub fn of(report: &serde_json::Value) -> anyhow::Result<Self> {
        let score = |c: &str| report["categories"][c]["score"].as_f64().with_context(|| format!("no {c} score in the report"));
        let document = report["audits"]["network-requests"]["details"]["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["resourceType"] == "Document"))
            .and_then(|i| i["resourceSize"].as_f64())
            .unwrap_or(f64::NAN);
        Ok(Self {
            performance: score("performance")?,
            accessibility: score("accessibility")?,
            best_practices: score("best-practices")?,
            fcp_ms: report["audits"]["first-contentful-paint"]["numericValue"].as_f64().unwrap_or(f64::NAN),
            document_bytes: document,
        })
    }
}

impl std::fmt::Display for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "performance {:.2}, accessibility {:.2}, best practices {:.2}, first contentful paint {:.0} ms, {:.1} KB",
            self.performance,
            self.accessibility,
            self.best_practices,
            self.fcp_ms,
            self.document_bytes / 1000.0
        )
    }
}

impl Dashboard {
    /// The port it serves on (loopback).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

/// Lighthouse (from the npm tools in `tools`, in Debian's Chromium, headless, a fresh profile;
/// the dashboard's own certificate accepted) on `path` of the dashboard serving on loopback
/// `port`, as the user whose token is `token` (its session cookie sent with every request).
/// Blocking: minutes at most. The whole report is kept as `keep` when given.
pub fn lighthouse(port: u16, tools: &Path, path: &str, token: &str, keep: Option<&Path>) -> anyhow::Result<Audit> {
    {
        let out = tempfile::tempdir()?;
        let report = out.path().join("report.json");
        let chrome = format!(
            "--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --disable-background-networking \
             --disable-component-update --disable-sync --no-first-run --ignore-certificate-errors --user-data-dir={}",
            out.path().join("profile").display()
        );
        let headers = serde_json::json!({ "Cookie": format!("{COOKIE}={token}") }).to_string();
        let status = std::process::Command::new("node")
            .arg(tools.join("node_modules/lighthouse/cli/index.js"))
            .arg(format!("https://localhost:{port}{path}"))
            .args(["--preset=desktop", "--only-categories=performance,accessibility,best-practices", "--output=json", "--quiet"])
            .arg(format!("--output-path={}", report.display()))
            .arg(format!("--extra-headers={headers}"))
            .arg(format!("--chrome-flags={chrome}"))
            .env("CHROME_PATH", "/usr/bin/chromium")
            .stdout(std::process::Stdio::null())
            .status()
            .context("running node (Lighthouse)")?;
        anyhow::ensure!(status.success(), "Lighthouse on {path}: {status}");
        if let Some(keep) = keep {
            std::fs::copy(&report, keep).with_context(|| format!("keeping the report as {}", keep.display()))?;
        }
        Audit::of(&serde_json::from_slice(&std::fs::read(&report)?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_gives_its_scores_paint_and_document_size() {
        let report = serde_json::json!({
            "categories": {"performance": {"score": 0.99}, "accessibility": {"score": 1.0}, "best-practices": {"score": 0.96}},
            "audits": {"first-contentful-paint": {"numericValue": 251.4},
                       "network-requests": {"details": {"items": [{"resourceType": "Script", "resourceSize": 9.0}, {"resourceType": "Document", "resourceSize": 38_700.0}]}}}
        });
        let a = Audit::of(&report).unwrap();
        assert_eq!((a.performance, a.accessibility, a.best_practices, a.fcp_ms, a.document_bytes), (0.99, 1.0, 0.96, 251.4, 38_700.0));
        assert!(a.passes());
        assert!(!Audit { best_practices: 0.93, ..a.clone() }.passes(), "under 0.95 fails the row");
        assert_eq!(a.to_string(), "performance 0.99, accessibility 1.00, best practices 0.96, first contentful paint 251 ms, 38.7 KB");
        assert!(
            Audit::of(&serde_json::json!({"categories": {}})).is_err(),
            "a report without scores (a page that did not load) is an error"
        );
    }
}
