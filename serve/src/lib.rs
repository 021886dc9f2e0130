//! What the webhook and the reconciler share to serve: HTTPS with a certificate reloaded from
//! its files ([`tls`]), the server loop with its limits on what one client may hold
//! ([`limits`]), the shutdown signal, one logging setup ([`logging`]), and what a process does
//! about its memory ([`memory`]).

pub mod build_info;
pub mod limits;
pub mod logging;
pub mod memory;
pub mod quiet;
pub mod tls;

use std::sync::Arc;

use rustls::ServerConfig;

pub use build_info::register_build_info;
pub use limits::{BodyBounds, BodyRefusal, ConnectionCap, DRAIN_BEYOND, Limits, Refused, SilenceCutoff, bounded_body, read_bounded};
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

/// Serves `router` over TLS on `listener` until `handle` shuts it down, with the default
/// [`Limits`] (see [`serve_https_limited`]).
pub async fn serve_https(
    listener: std::net::TcpListener,
    tls: Arc<ServerConfig>,
    router: axum::Router,
    handle: axum_server::Handle<std::net::SocketAddr>,
) -> std::io::Result<()> {
    serve_https_limited(listener, tls, router, handle, Limits::default(), Refused::default()).await
}

/// Serves `router` over TLS on `listener` until `handle` shuts it down. At most
/// `limits.max_connections` connections are open at once (the others are closed as they
/// arrive and counted in `refused`); each gets `TCP_NODELAY` (keep-alive request/response
/// traffic must not wait for delayed ACKs), `limits.header_timeout` for its TLS handshake,
/// for its first bytes after it and for each request's headers, and is closed once it stays
/// silent for `limits.idle_timeout`. Handlers can read the client's address
/// (`ConnectInfo<SocketAddr>`).
pub async fn serve_https_limited(
    listener: std::net::TcpListener,
    tls: Arc<ServerConfig>,
    router: axum::Router,
    handle: axum_server::Handle<std::net::SocketAddr>,
    limits: Limits,
    refused: Refused,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let config = axum_server::tls_rustls::RustlsConfig::from_config(tls);
    let tls = axum_server::tls_rustls::RustlsAcceptor::new(config)
        .handshake_timeout(limits.header_timeout)
        .acceptor(ConnectionCap::new(limits.max_connections, refused));
    let acceptor = SilenceCutoff::new(tls, limits.header_timeout, limits.idle_timeout);
    let mut server = axum_server::from_tcp(listener)?.acceptor(acceptor).handle(handle);
    server.http_builder().http1().timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(limits.header_timeout);
    server.serve(router.into_make_service_with_connect_info::<std::net::SocketAddr>()).await
}

/// Resolves once SIGTERM or Ctrl-C has come. The process listens from the first call on, once
/// for all callers: a signal that comes between two callers' waits (a pod told to stop while it
/// starts) is not lost, as it was when each caller listened for itself from its first poll. Call
/// it first thing in `main`, so that a signal is heard from then on.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut down = shutdown_latch().clone();
    async move {
        // A latch whose listener has gone (the runtime that ran it ended, as in tests) never
        // says "down".
        if down.wait_for(|down| *down).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Starts listening for SIGTERM and Ctrl-C (what [`shutdown_signal`] resolves on), if not yet:
/// `main` calls it before anything else, so that a pod told to stop while it starts stops.
pub fn listen_for_shutdown() {
    let _ = shutdown_latch();
}

/// The process's one listener for SIGTERM and Ctrl-C, registered at its first use.
fn shutdown_latch() -> &'static tokio::sync::watch::Receiver<bool> {
    static LATCH: std::sync::OnceLock<tokio::sync::watch::Receiver<bool>> = std::sync::OnceLock::new();
    LATCH.get_or_init(|| {
        let (tx, rx) = tokio::sync::watch::channel(false);
        // Registered now, not when the task below is first polled.
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
        let recv = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::spawn(async move {
            tokio::select! {
                _ = recv(term) => {},
                _ = recv(interrupt) => {},
            }
            let _ = tx.send(true);
        });
        rx
    })
}
