//! The `liqo-webhook` command: its flags and the wiring of the library modules (the binary,
//! and the image's multi-call `liqo`, call [`main`]).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::policy::PolicyConfig;
use crate::server::{App, BODY_TIMEOUT, DEFAULT_MAX_BODY, admission_router, ops_router, serve_https};
use crate::state::{ClusterView, StaticView, StoreView};
use crate::tls::{CertFiles, ReloadingCert, server_config, shutdown_signal};
use anyhow::Context;
use clap::Parser;
use liqo_api::PeeringPolicy;
use liqo_serve::logging::LogFormat;

/// Liqo admission webhook: validates PeeringRequests/FederationRequests and ForeignCluster
/// changes, defaults ForeignClusters. Connects to the API server in-cluster or via KUBECONFIG.
#[derive(Parser, Debug)]
#[command(name = "liqo-webhook", version, about)]
struct Args {
    /// HTTPS address for admission reviews (/validate, /mutate).
    #[arg(long, env = "WEBHOOK_LISTEN", default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// Plain-HTTP address for /healthz, /readyz and /metrics.
    #[arg(long, env = "WEBHOOK_OPS_LISTEN", default_value = "0.0.0.0:8080")]
    ops_listen: SocketAddr,
    /// PEM certificate chain served over TLS (reloaded when it changes).
    #[arg(long, env = "WEBHOOK_TLS_CERT", default_value = "/etc/liqo/webhook-tls/tls.crt")]
    tls_cert: PathBuf,
    /// PEM private key of the certificate.
    #[arg(long, env = "WEBHOOK_TLS_KEY", default_value = "/etc/liqo/webhook-tls/tls.key")]
    tls_key: PathBuf,
    /// Seconds between checks of the certificate files.
    #[arg(long, default_value_t = 5)]
    tls_reload_seconds: u64,
    /// The Liqo namespace (where the cluster-id ConfigMap and peer ServiceAccounts live).
    #[arg(long, env = "POD_NAMESPACE", default_value = "liqo")]
    namespace: String,
    /// Largest admission body accepted, in bytes (larger → 413).
    #[arg(long, default_value_t = DEFAULT_MAX_BODY)]
    max_body_bytes: usize,
    /// Seconds in-flight admissions get to finish after SIGTERM.
    #[arg(long, default_value_t = 20)]
    shutdown_grace_seconds: u64,
    /// Create (or renew) a CA and a serving certificate for localhost/127.0.0.1 in this
    /// directory and serve it, instead of --tls-cert/--tls-key. For local development.
    #[arg(long)]
    generate_cert_dir: Option<PathBuf>,
    /// Run without an API server: admission decisions use --cluster-id and --peering-policy
    /// instead of the cluster's ConfigMap, ClusterConfig and ForeignClusters.
    #[arg(long, requires = "cluster_id")]
    standalone: bool,
    /// Our cluster ID (with --standalone).
    #[arg(long)]
    cluster_id: Option<String>,
    /// Peering policy (with --standalone).
    #[arg(long, value_enum, default_value_t = Policy::AcceptAll)]
    peering_policy: Policy,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// `spec.peeringPolicy` values, as the command line takes them.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Policy {
    #[value(name = "AcceptAll")]
    AcceptAll,
    #[value(name = "AcceptKnown")]
    AcceptKnown,
    #[value(name = "RejectAll")]
    RejectAll,
}

impl From<Policy> for PeeringPolicy {
    fn from(p: Policy) -> Self {
        match p {
            Policy::AcceptAll => PeeringPolicy::AcceptAll,
            Policy::AcceptKnown => PeeringPolicy::AcceptKnown,
            Policy::RejectAll => PeeringPolicy::RejectAll,
        }
    }
}

/// Runs `liqo-webhook` with `args` (the first is the program name), until SIGTERM.
pub fn main(args: impl IntoIterator<Item = OsString>) -> anyhow::Result<()> {
    let args = Args::parse_from(args);
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    liqo_serve::logging::init(args.log_format);
    liqo_serve::listen_for_shutdown();
    let _ = rustls::crypto::ring::default_provider().install_default();

    let metrics = Arc::new(Metrics::default());
    let files = match &args.generate_cert_dir {
        Some(dir) => {
            let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
            let outcome = liqo_certs::files::ensure(dir, &sans, time::OffsetDateTime::now_utc(), &Default::default())?;
            tracing::info!(dir = %dir.display(), ca = ?outcome.ca, serving = ?outcome.serving, "certificates ready (CA in ca.crt)");
            CertFiles { cert: dir.join("tls.crt"), key: dir.join("tls.key") }
        }
        None => CertFiles { cert: args.tls_cert.clone(), key: args.tls_key.clone() },
    };
    let cert = ReloadingCert::load(files).context("loading the serving certificate")?;
    cert.clone().spawn_reloader(Duration::from_secs(args.tls_reload_seconds.max(1)), metrics.tls_reload_observer(cert.clone()));

    let view: Arc<dyn ClusterView> = if args.standalone {
        let id = args.cluster_id.clone().unwrap_or_default();
        liqo_api::validate_cluster_id(&id).map_err(|e| anyhow::anyhow!("--cluster-id {id:?}: {e}"))?;
        let policy = PeeringPolicy::from(args.peering_policy);
        tracing::info!(cluster_id = %id, policy = policy.as_str(), "standalone: no API server");
        Arc::new(StaticView::new(&args.namespace, &id).with_policy(PolicyConfig { policy, ..Default::default() }))
    } else {
        let client = kube::Client::try_default().await.context("connecting to the API server")?;
        Arc::new(StoreView::start(client, &args.namespace))
    };
    let app = Arc::new(App { view, metrics, max_body: args.max_body_bytes, body_timeout: BODY_TIMEOUT });

    let listener = std::net::TcpListener::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    let ops = tokio::net::TcpListener::bind(args.ops_listen).await.with_context(|| format!("binding {}", args.ops_listen))?;
    tracing::info!(listen = %args.listen, ops = %args.ops_listen, namespace = %args.namespace, "liqo-webhook starting");

    let handle = axum_server::Handle::new();
    let https = tokio::spawn(serve_https(listener, server_config(cert), admission_router(app.clone()), handle.clone()));
    let ops_server = tokio::spawn(async move { axum::serve(ops, ops_router(app)).with_graceful_shutdown(shutdown_signal()).await });

    shutdown_signal().await;
    tracing::info!(grace = args.shutdown_grace_seconds, "shutting down; finishing in-flight admissions");
    handle.graceful_shutdown(Some(Duration::from_secs(args.shutdown_grace_seconds)));
    https.await.context("HTTPS server task")?.context("HTTPS server")?;
    ops_server.await.context("ops server task")?.context("ops server")?;
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_and_log_formats_parse_as_their_api_names() {
        let a = Args::try_parse_from(["liqo-webhook", "--peering-policy", "RejectAll", "--log-format", "json"]).unwrap();
        assert_eq!(PeeringPolicy::from(a.peering_policy), PeeringPolicy::RejectAll);
        assert_eq!(a.log_format, LogFormat::Json);
        assert!(Args::try_parse_from(["liqo-webhook", "--peering-policy", "rejectall"]).is_err());
    }
}
