//! Why a request is refused: a stable label (metrics, logs) plus the message the user reads.

/// The rule that refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The object cannot be decoded or a field has the wrong shape.
    InvalidObject,
    MissingClusterId,
    MalformedClusterId,
    ConflictingClusterIds,
    NameMismatch,
    OwnClusterId,
    IdentityMismatch,
    /// A request outside the tenant namespace of the cluster it claims (or, from anyone else
    /// than a peer's identity, outside the Liqo namespace too).
    WrongNamespace,
    ImmutableField,
    KubeConfigRef,
    InvalidUrl,
    Policy,
    /// The cluster ID is bound to the cluster that first took an identity for it here, and the
    /// requester is not that identity (the tenant-namespace contract's trust on first use).
    IdentityBound,
    /// The webhook does not know its own cluster ID yet.
    NotReady,
    Unsupported,
}

impl Reason {
    /// Stable label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::InvalidObject => "invalid_object",
            Self::MissingClusterId => "missing_cluster_id",
            Self::MalformedClusterId => "malformed_cluster_id",
            Self::ConflictingClusterIds => "conflicting_cluster_ids",
            Self::NameMismatch => "name_mismatch",
            Self::OwnClusterId => "own_cluster_id",
            Self::IdentityMismatch => "identity_mismatch",
            Self::WrongNamespace => "wrong_namespace",
            Self::ImmutableField => "immutable_field",
            Self::KubeConfigRef => "kubeconfig_ref",
            Self::InvalidUrl => "invalid_url",
            Self::Policy => "policy",
            Self::IdentityBound => "identity_bound",
            Self::NotReady => "not_ready",
            Self::Unsupported => "unsupported",
        }
    }

    /// HTTP-style code and Kubernetes reason of the response status.
    pub fn status(self) -> (u16, &'static str) {
        match self {
            Self::IdentityMismatch | Self::WrongNamespace | Self::OwnClusterId | Self::Policy => (403, "Forbidden"),
            Self::IdentityBound => (409, "Conflict"),
            Self::NotReady => (503, "ServiceUnavailable"),
            Self::Unsupported => (400, "BadRequest"),
            _ => (422, "Invalid"),
        }
    }
}

/// A refusal: the rule and a message naming the field and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub reason: Reason,
    pub message: String,
    /// Who asked, when our policy refused a cluster or a claim on a bound ID was refused (shown
    /// to this cluster's operator).
    pub requester: Option<Requester>,
}

/// The cluster behind a refused PeeringRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requester {
    pub cluster_id: String,
    pub cluster_name: Option<String>,
    /// Refused as a claim on an ID bound to another holder, not by our policy.
    pub claim: bool,
}

impl Denial {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self { reason, message: message.into(), requester: None }
    }

    /// The refusal of cluster `cluster_id` (named `cluster_name`) by our policy.
    pub fn asked_by(mut self, cluster_id: &str, cluster_name: Option<&str>) -> Self {
        self.requester = Some(Requester { cluster_id: cluster_id.to_owned(), cluster_name: cluster_name.map(str::to_owned), claim: false });
        self
    }

    /// The refusal of a claim on `cluster_id`, bound to another holder here.
    pub fn claiming(mut self, cluster_id: &str, cluster_name: Option<&str>) -> Self {
        self.requester = Some(Requester { cluster_id: cluster_id.to_owned(), cluster_name: cluster_name.map(str::to_owned), claim: true });
        self
    }
}
