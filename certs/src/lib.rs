//! Certificates for the webhook and the auth service: a CA made with rcgen, serving
//! certificates signed by it with the right SANs, the checks that decide when to re-issue,
//! and the caBundle injection into webhook configurations.
//!
//! Pure functions over PEM strings; [`files`] writes them to disk (the `liqo-serve` crate serves
//! them over HTTPS with reload on change).

pub mod bundle;
pub mod cluster;
pub mod command;
pub mod files;
pub mod inspect;
pub mod issue;
pub mod renew;

pub use bundle::{inject_ca_bundle, tls_secret_yaml};
pub use inspect::{CertInfo, fingerprint_sha256, inspect, reissue_reason};
pub use issue::{Pair, issue_serving, new_ca, service_dns_names};

/// Everything that can go wrong with certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("generating a certificate failed: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("not a PEM certificate: {0}")]
    Pem(String),
    #[error("cannot parse the certificate: {0}")]
    Parse(String),
    #[error("invalid manifest: {0}")]
    Manifest(String),
    #[error("the key does not match the certificate or is unsupported: {0}")]
    Key(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl CertsError {
    /// Stable label for metrics and Events.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Generate(_) => "generate",
            Self::Pem(_) => "pem",
            Self::Parse(_) => "parse",
            Self::Manifest(_) => "manifest",
            Self::Key(_) => "key",
            Self::Io { .. } => "io",
            Self::Kube(_) => "kube",
        }
    }
}

pub type Result<T, E = CertsError> = std::result::Result<T, E>;
