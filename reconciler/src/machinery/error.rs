//! The reconciler's one error type. Every variant has a stable label used in metrics, Event
//! reasons and condition reasons; decisions read the variant, the failing step and the HTTP
//! status, never the message.

use std::fmt;

use liqo_api::reasons::Reason;
use thiserror::Error;

/// Which call to another cluster failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The TLS handshake that decides trust.
    TrustProbe,
    /// `GET /ids` of its auth service.
    Ids,
    /// `GET /ca` of its auth service.
    Ca,
    /// `POST /identity` of its auth service.
    Identity,
    /// `kube-public/cluster-info` of its API server.
    ClusterInfo,
    /// A call to its API server.
    ApiServer,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::TrustProbe => "auth service (TLS)",
            Step::Ids => "auth service /ids",
            Step::Ca => "auth service /ca",
            Step::Identity => "auth service /identity",
            Step::ClusterInfo => "API server kube-public/cluster-info",
            Step::ApiServer => "API server",
        })
    }
}

#[derive(Debug, Error)]
pub enum Error {
    /// A call to our own API server failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Another cluster did not answer (`status: None`) or answered with an error status.
    #[error("remote {step}: {message}")]
    Remote { step: Step, status: Option<u16>, message: String },
    /// Another cluster answered something malformed.
    #[error("remote {step} answered something malformed: {message}")]
    RemoteInvalid { step: Step, message: String },
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
    /// The kubeconfig Secret a PeeringRequest names is not there.
    #[error("the kubeconfig Secret {0} is missing")]
    KubeconfigMissing(String),
    #[error("serialization: {0}")]
    Serialization(String),
    /// A peer's tenant namespace is still being deleted: nothing can be stored there yet.
    #[error("the tenant namespace {0} is still being deleted")]
    TenantTerminating(String),
    /// The remote speaks the cluster-scoped protocol of 0.1.
    #[error("the remote runs the cluster-scoped peering protocol of 0.1 (no protocolVersion in its /ids)")]
    OlderProtocol,
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
            Error::Remote { .. } if self.is_refusal() => Reason::PeerRefused.as_str(),
            Error::Remote { .. } => Reason::RemoteUnreachable.as_str(),
            Error::RemoteInvalid { .. } => Reason::RemoteInvalid.as_str(),
            Error::UntrustedRemote(_) => "UntrustedRemote",
            Error::CaChanged { .. } => Reason::RemoteCaChanged.as_str(),
            Error::Tls(_) => Reason::TlsError.as_str(),
            Error::Invalid { .. } => Reason::InvalidSpec.as_str(),
            Error::NotReady(_) => "NotReady",
            Error::KubeconfigMissing(_) => Reason::KubeconfigMissing.as_str(),
            Error::Serialization(_) => "SerializationError",
            Error::TenantTerminating(_) => Reason::TenantNamespaceTerminating.as_str(),
            Error::OlderProtocol => Reason::PeerOnOlderProtocol.as_str(),
            Error::Dns(_) => Reason::DnsLookupFailed.as_str(),
            Error::Mdns(_) => "MdnsError",
        }
    }

    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid { field, message: message.into() }
    }

    /// `step` got no answer.
    pub fn unreachable(step: Step, message: impl ToString) -> Self {
        Error::Remote { step, status: None, message: message.to_string() }
    }

    /// A failed call to another cluster's API server: its answer's status when it answered.
    /// A server that took the connection and closed it before a word is told in the words a
    /// check connected first uses ([`CLOSED_BEFORE_A_WORD`]), so that a status does not flip
    /// between two texts (two writes) as its checks meet it one way or the other.
    pub fn remote_api(step: Step, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => Error::Remote { step, status: Some(s.code), message: format!("HTTP {}: {}", s.code, s.message) },
            other if closed_before_a_word(&other) => Error::unreachable(step, CLOSED_BEFORE_A_WORD),
            other => Error::unreachable(step, other),
        }
    }

    /// The other cluster answered, refusing us (401, 403): it does not (or no longer) accept
    /// our credentials, or its admission refused what we sent.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Error::Remote { status: Some(401 | 403), .. })
    }

    /// The other cluster's API server no longer knows the identity we present (401): it was
    /// revoked (its ServiceAccount deleted) or the cluster reinstalled. Only that ends what we
    /// do there; a 403 does not: a restarted API server answers 403 for a good identity until
    /// its RBAC cache is filled, and is retried like any failure.
    pub fn is_revocation(&self) -> bool {
        matches!(self, Error::Remote { status: Some(401), .. })
    }

    /// The other cluster answered with an error status (4xx, 5xx).
    pub fn answered(&self) -> Option<u16> {
        match self {
            Error::Remote { status, .. } => *status,
            _ => None,
        }
    }

    /// The condition reason of a failed call to another cluster.
    pub fn reason(&self) -> Reason {
        match self {
            Error::RemoteInvalid { .. } | Error::Serialization(_) => Reason::RemoteInvalid,
            Error::CaChanged { .. } => Reason::RemoteCaChanged,
            Error::Tls(_) => Reason::TlsError,
            Error::Invalid { .. } => Reason::InvalidSpec,
            Error::TenantTerminating(_) => Reason::TenantNamespaceTerminating,
            Error::OlderProtocol => Reason::PeerOnOlderProtocol,
            Error::Remote { .. } if self.is_refusal() => Reason::PeerRefused,
            _ => Reason::RemoteUnreachable,
        }
    }
}

/// True when the API server says the object does not exist (404, reason `NotFound`). A 404
/// without that reason is not: it is the API server not serving the resource at all, as a
/// freshly started one does until it has read the CRDs (taking that for "deleted" once left
/// our PeeringRequest on a restarted remote).
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

/// True for a Kubernetes API 409 (already exists / conflict).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a peer's API server that takes connections and closes them before a word is told.
pub const CLOSED_BEFORE_A_WORD: &str =
    "the remote API server took the connection and closed it before a word (a proxy or load balancer with no API server behind it?)";

/// Whether a socket's error says the peer closed the connection (reset, aborted or ended) while
/// it was being made, its TLS handshake included: told as [`CLOSED_BEFORE_A_WORD`], whichever
/// side of the connect's end the close fell on, so a peer's status keeps its words from one
/// check to the next.
pub fn io_closed_before_a_word(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(e.kind(), K::ConnectionReset | K::UnexpectedEof | K::ConnectionAborted | K::BrokenPipe)
}

/// Whether `e` is a connection closed by the server (reset or ended) while it was being made,
/// its TLS handshake included: nothing was answered.
fn closed_before_a_word(e: &kube::Error) -> bool {
    let kube::Error::Service(inner) = e else { return false };
    let Some(client) = inner.downcast_ref::<hyper_util::client::legacy::Error>() else { return false };
    if !client.is_connect() {
        return false;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(client);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if io_closed_before_a_word(io) {
                return true;
            }
            // A connector's timeout layer wraps the socket's error in one of kind Other, whose
            // `source` skips it: look inside.
            if let Some(inner) = io.get_ref() {
                cause = Some(inner);
                continue;
            }
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_while_connecting_is_a_close_before_a_word_a_refusal_is_not() {
        use std::io::{Error, ErrorKind};
        assert!(io_closed_before_a_word(&Error::from(ErrorKind::ConnectionReset)));
        assert!(io_closed_before_a_word(&Error::from(ErrorKind::ConnectionAborted)));
        assert!(!io_closed_before_a_word(&Error::from(ErrorKind::ConnectionRefused)), "refused: the check says so");
        assert!(!io_closed_before_a_word(&Error::from(ErrorKind::TimedOut)));
    }

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure("no", "Forbidden").with_code(code)))
    }

    #[test]
    fn a_refusal_is_read_from_the_status_not_the_text() {
        assert!(Error::remote_api(Step::ApiServer, api(403)).is_refusal());
        assert!(Error::remote_api(Step::ApiServer, api(401)).is_refusal());
        assert!(!Error::remote_api(Step::ApiServer, api(500)).is_refusal());
        assert!(Error::remote_api(Step::ApiServer, api(401)).is_revocation());
        assert!(!Error::remote_api(Step::ApiServer, api(403)).is_revocation(), "a 403 may pass (RBAC cache not filled yet)");
        assert!(!Error::Kube(api(401)).is_revocation(), "our own API server's 401 is not the peer's");
        assert_eq!(Error::remote_api(Step::ApiServer, api(500)).answered(), Some(500));
        // A message that merely says "HTTP 403" is not a refusal.
        assert!(!Error::unreachable(Step::Identity, "HTTP 403").is_refusal());
        // Our own API server's 403 is not the peer refusing us.
        assert!(!Error::Kube(api(403)).is_refusal());
        assert_eq!(Error::remote_api(Step::ApiServer, api(403)).reason(), Reason::PeerRefused);
        assert_eq!(Error::RemoteInvalid { step: Step::Ids, message: "x".into() }.label(), "RemoteInvalid");
        assert_eq!(Error::unreachable(Step::Ids, "refused").label(), "RemoteUnreachable");
    }

    #[test]
    fn not_found_is_an_absent_object_not_an_unserved_resource() {
        let object = kube::core::Status::failure("peeringrequests \"x\" not found", "NotFound").with_code(404);
        assert!(is_not_found(&kube::Error::Api(Box::new(object))));
        // What kube makes of "404 page not found" (the CRDs not read yet).
        let page = kube::core::Status::failure("404 page not found", "Failed to parse error data").with_code(404);
        assert!(!is_not_found(&kube::Error::Api(Box::new(page))));
    }
}
