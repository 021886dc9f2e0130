//! The reconciler's one error type. Every variant has a stable label used in metrics, Event
//! reasons and condition reasons.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("remote {what}: {message}")]
    Remote { what: &'static str, message: String },
    #[error("the remote presented a certificate from an unknown authority: {0}")]
    UntrustedRemote(String),
    #[error("the remote CA changed: stored fingerprint {stored}, presented {presented}")]
    CaChanged { stored: String, presented: String },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("invalid {field}: {message}")]
    Invalid { field: &'static str, message: String },
    #[error("not ready: {0}")]
    NotReady(&'static str),
    #[error("serialization: {0}")]
    Serialization(String),
    #[error("DNS: {0}")]
    Dns(String),
    #[error("mDNS: {0}")]
    Mdns(String),
}

impl Error {
    /// Stable, CamelCase label (metrics label, Event reason, condition reason).
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "KubernetesApiError",
            Error::Remote { .. } => "RemoteUnreachable",
            Error::UntrustedRemote(_) => "UntrustedRemote",
            Error::CaChanged { .. } => "RemoteCaChanged",
            Error::Tls(_) => "TlsError",
            Error::Invalid { .. } => "InvalidSpec",
            Error::NotReady(_) => "NotReady",
            Error::Serialization(_) => "SerializationError",
            Error::Dns(_) => "DnsLookupFailed",
            Error::Mdns(_) => "MdnsError",
        }
    }

    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid { field, message: message.into() }
    }

    pub fn remote(what: &'static str, message: impl ToString) -> Self {
        Error::Remote { what, message: message.to_string() }
    }
}

/// True for a Kubernetes API 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// True for a Kubernetes API 409 (already exists / conflict).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
