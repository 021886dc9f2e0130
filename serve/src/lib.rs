//! What the webhook and the reconciler share to serve: HTTPS with a certificate reloaded from
//! its files ([`tls`]), the server loop, the shutdown signal, and one logging setup
//! ([`logging`]).

pub mod logging;
pub mod tls;

use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;

pub use tls::{CertFiles, ReloadingCert, certified_key, server_config};

/// Everything that can go wrong with a serving certificate.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("not a PEM certificate: {0}")]
    Pem(String),
    #[error("the key does not match the certificate or is unsupported: {0}")]
    Key(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

impl ServeError {
    /// Stable label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Pem(_) => "pem",
            Self::Key(_) => "key",
            Self::Io { .. } => "io",
        }
    }
}

/// Serves `router` over TLS on `listener` until `handle` shuts it down. Accepted connections
/// get `TCP_NODELAY` (keep-alive request/response traffic must not wait for delayed ACKs) and
/// 10 s to send their request headers.
pub async fn serve_https(
    listener: std::net::TcpListener,
    tls: Arc<ServerConfig>,
    router: axum::Router,
    handle: axum_server::Handle<std::net::SocketAddr>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let config = axum_server::tls_rustls::RustlsConfig::from_config(tls);
    let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(config).acceptor(axum_server::accept::NoDelayAcceptor::new());
    let mut server = axum_server::from_tcp(listener)?.acceptor(acceptor).handle(handle);
    server.http_builder().http1().timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(Duration::from_secs(10));
    server.serve(router.into_make_service()).await
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
}
