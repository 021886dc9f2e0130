//! The dashboard at size (scenario g): the `liqo-dashboard` binary as it runs in a cluster
//! (its ServiceAccount and RBAC from `manifests/dashboard/`), on the hub with every
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
        let rbac = std::fs::read_to_string(Path::new(MANIFESTS).join("rbac.yaml")).context("manifests/dashboard/rbac.yaml")?;
        create_manifest(&admin, &rbac, "liqo").await;
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
