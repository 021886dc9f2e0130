//! Serving HTTPS: the certificate, read from PEM files and reloaded when they change without a
//! restart (Kubernetes Secret volumes replace the files by swapping a `..data` symlink, so the
//! files' contents are compared on every poll rather than watched by inode), the rustls server
//! configuration (ring provider), the server loop and the shutdown signal.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::CertsError;

/// Where the certificate chain and key live.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    fn read(&self) -> Result<(Vec<u8>, Vec<u8>), CertsError> {
        let read = |p: &PathBuf| std::fs::read(p).map_err(|e| CertsError::Io { path: p.display().to_string(), source: e });
        Ok((read(&self.cert)?, read(&self.key)?))
    }
}

/// Builds the rustls key from PEM bytes, checking that key and certificate belong together.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8], files: &CertFiles) -> Result<CertifiedKey, CertsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| CertsError::Pem(format!("{}: {e}", files.cert.display())))?;
    if chain.is_empty() {
        return Err(CertsError::Pem(format!("{}: no certificate in PEM", files.cert.display())));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertsError::Pem(format!("{}: {e}", files.key.display())))?;
    let signing = ring::sign::any_supported_type(&key).map_err(|e| CertsError::Key(e.to_string()))?;
    let ck = CertifiedKey::new(chain, signing);
    ck.keys_match().map_err(|e| CertsError::Key(e.to_string()))?;
    Ok(ck)
}

/// Hands every new TLS connection the certificate loaded last.
#[derive(Debug)]
pub struct ReloadingCert {
    files: CertFiles,
    current: RwLock<(Arc<CertifiedKey>, Vec<u8>, Vec<u8>)>,
}

impl ReloadingCert {
    /// Loads the files once; fails when they are missing or invalid.
    pub fn load(files: CertFiles) -> Result<Arc<Self>, CertsError> {
        let (cert, key) = files.read()?;
        let ck = certified_key(&cert, &key, &files)?;
        Ok(Arc::new(Self { files, current: RwLock::new((Arc::new(ck), cert, key)) }))
    }

    /// Re-reads the files; swaps in a changed, valid certificate. Returns whether it changed.
    /// A broken new pair is refused and the current certificate stays in use.
    pub fn reload(&self) -> Result<bool, CertsError> {
        let (cert, key) = self.files.read()?;
        {
            let current = self.current.read().expect("lock never poisoned");
            if current.1 == cert && current.2 == key {
                return Ok(false);
            }
        }
        let ck = certified_key(&cert, &key, &self.files)?;
        *self.current.write().expect("lock never poisoned") = (Arc::new(ck), cert, key);
        Ok(true)
    }

    /// Polls the files every `interval` for as long as the process runs; `observe` hears
    /// `"reloaded"` or `"error"` after every poll that found a change.
    pub fn spawn_reloader(
        self: Arc<Self>,
        interval: Duration,
        observe: impl Fn(&'static str) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let this = self.clone();
                let result = tokio::task::spawn_blocking(move || this.reload()).await;
                let label = match result {
                    Ok(Ok(false)) => continue,
                    Ok(Ok(true)) => {
                        tracing::info!(cert = %self.files.cert.display(), "serving certificate reloaded");
                        "reloaded"
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "serving certificate not reloaded; keeping the current one");
                        "error"
                    }
                    Err(_) => "error",
                };
                observe(label);
            }
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("lock never poisoned").0.clone())
    }
}

/// A TLS 1.2/1.3 server configuration (ring provider) serving `cert`, offering h2 and http/1.1.
pub fn server_config(cert: Arc<ReloadingCert>) -> Arc<ServerConfig> {
    let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
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
