//! The `liqo-dashboard` command: the dashboard's in-cluster form (`manifests/dashboard/`). Served over
//! HTTPS; each user logs in with a bearer token and sees and acts with it. The process's own
//! ServiceAccount only creates TokenReviews.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::sessions::Sessions;
use anyhow::Context;
use clap::Parser;
use liqo_serve::{CertFiles, ReloadingCert, serve_https, server_config, shutdown_signal};

#[derive(Parser, Debug)]
#[command(name = "liqo-dashboard", version, about)]
struct Args {
    /// The Liqo namespace.
    #[arg(long, env = "POD_NAMESPACE", default_value = "liqo")]
    namespace: String,
    /// HTTPS address of the dashboard.
    #[arg(long, env = "LISTEN", default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// PEM certificate chain (reloaded when it changes).
    #[arg(long, default_value = "/etc/liqo/dashboard-tls/tls.crt")]
    tls_cert: PathBuf,
    /// PEM private key of that certificate.
    #[arg(long, default_value = "/etc/liqo/dashboard-tls/tls.key")]
    tls_key: PathBuf,
    /// Create (or renew) a CA and a certificate for localhost/127.0.0.1 in this directory and
    /// serve it, instead of --tls-cert/--tls-key.
    #[arg(long)]
    generate_cert_dir: Option<PathBuf>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: liqo_serve::logging::LogFormat,
}

/// Runs `liqo-dashboard` with `args` (the first is the program name), until SIGTERM.
pub fn main(args: impl IntoIterator<Item = OsString>) -> anyhow::Result<()> {
    let args = Args::parse_from(args);
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    liqo_serve::logging::init(args.log_format);
    liqo_serve::listen_for_shutdown();
    let _ = rustls::crypto::ring::default_provider().install_default();

    let files = match &args.generate_cert_dir {
        Some(dir) => {
            let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
            liqo_certs::files::ensure(dir, &sans, time::OffsetDateTime::now_utc(), &Default::default())?;
            CertFiles { cert: dir.join("tls.crt"), key: dir.join("tls.key") }
        }
        None => CertFiles { cert: args.tls_cert.clone(), key: args.tls_key.clone() },
    };
    let cert = ReloadingCert::load(files).context("loading the serving certificate")?;
    cert.clone().spawn_reloader(Duration::from_secs(5), |result| tracing::debug!(result, "certificate poll"));

    // Our own identity only reviews tokens; each user's client is this one with their token.
    let base = kube::Config::infer().await.context("finding the API server (in-cluster or KUBECONFIG)")?;
    let reviewer = kube::Client::try_from(base.clone()).context("the dashboard's own client")?;
    let sessions = Sessions::new(reviewer, base, &args.namespace);
    let _sweeper = sessions.sweep_every_minute();

    let listener = std::net::TcpListener::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(listen = %args.listen, namespace = %args.namespace, "liqo-dashboard starting");
    let handle = axum_server::Handle::new();
    let https = tokio::spawn(serve_https(listener, server_config(cert), crate::server::in_cluster_router(sessions), handle.clone()));
    shutdown_signal().await;
    tracing::info!("shutting down");
    // Open pages hold a live channel each: give them a moment, then close.
    handle.graceful_shutdown(Some(Duration::from_secs(5)));
    https.await.context("HTTPS server task")?.context("HTTPS server")?;
    Ok(())
}
