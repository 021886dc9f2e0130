//! The serving certificate, read from PEM files and reloaded when they change without a restart
//! (Kubernetes Secret volumes replace the files by swapping a `..data` symlink, so the files'
//! contents are compared on every poll rather than watched by inode), and the rustls server
//! configuration (ring provider).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::ServeError;

/// Where the certificate chain and key live.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    fn read(&self) -> Result<(Vec<u8>, Vec<u8>), ServeError> {
        let read = |p: &PathBuf| std::fs::read(p).map_err(|e| ServeError::Io { path: p.display().to_string(), source: e });
        Ok((read(&self.cert)?, read(&self.key)?))
    }
}

/// Builds the rustls key from PEM bytes, checking that key and certificate belong together.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8], files: &CertFiles) -> Result<CertifiedKey, ServeError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| ServeError::Pem(format!("{}: {e}", files.cert.display())))?;
    if chain.is_empty() {
        return Err(ServeError::Pem(format!("{}: no certificate in PEM", files.cert.display())));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| ServeError::Pem(format!("{}: {e}", files.key.display())))?;
    let signing = ring::sign::any_supported_type(&key).map_err(|e| ServeError::Key(e.to_string()))?;
    let ck = CertifiedKey::new(chain, signing);
    ck.keys_match().map_err(|e| ServeError::Key(e.to_string()))?;
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
    pub fn load(files: CertFiles) -> Result<Arc<Self>, ServeError> {
        let (cert, key) = files.read()?;
        let ck = certified_key(&cert, &key, &files)?;
        Ok(Arc::new(Self { files, current: RwLock::new((Arc::new(ck), cert, key)) }))
    }

    /// Re-reads the files; swaps in a changed, valid certificate. Returns whether it changed.
    /// A broken new pair is refused and the current certificate stays in use.
    pub fn reload(&self) -> Result<bool, ServeError> {
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

    /// The certificate chain served now, leaf first.
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.current.read().expect("lock never poisoned").0.cert.clone()
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

/// A TLS 1.2/1.3 server configuration (ring provider) serving `cert`, offering HTTP/1.1 only.
///
/// Not h2: hyper's HTTP/2 server has no deadline for a request's headers, so a client could
/// hold a connection by trickling them (a frame every few seconds is never silent) or by
/// sending pings and no request. Over HTTP/1.1 every request's headers must arrive within
/// `Limits::header_timeout`. Our clients (the API server calling the webhook, peers' auth
/// clients, browsers on the dashboard) all speak HTTP/1.1; a client offering only h2 is
/// refused in the handshake (`no_application_protocol`).
pub fn server_config(cert: Arc<ReloadingCert>) -> Arc<ServerConfig> {
    let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}
