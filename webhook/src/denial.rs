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
    ImmutableField,
    KubeConfigRef,
    InvalidUrl,
    Policy,
    /// The webhook does not know its own cluster ID yet.
    NotReady,
    Unsupported,
}

impl Reason {
    /// Every reason, once.
    pub const ALL: [Reason; 13] = [
        Self::InvalidObject,
        Self::MissingClusterId,
        Self::MalformedClusterId,
        Self::ConflictingClusterIds,
        Self::NameMismatch,
        Self::OwnClusterId,
        Self::IdentityMismatch,
        Self::ImmutableField,
        Self::KubeConfigRef,
        Self::InvalidUrl,
        Self::Policy,
        Self::NotReady,
        Self::Unsupported,
    ];

    /// The position of this reason in [`Reason::ALL`] (a match, so a new reason must be placed).
    pub fn index(self) -> usize {
        match self {
            Self::InvalidObject => 0,
            Self::MissingClusterId => 1,
            Self::MalformedClusterId => 2,
            Self::ConflictingClusterIds => 3,
            Self::NameMismatch => 4,
            Self::OwnClusterId => 5,
            Self::IdentityMismatch => 6,
            Self::ImmutableField => 7,
            Self::KubeConfigRef => 8,
            Self::InvalidUrl => 9,
            Self::Policy => 10,
            Self::NotReady => 11,
            Self::Unsupported => 12,
        }
    }

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
            Self::ImmutableField => "immutable_field",
            Self::KubeConfigRef => "kubeconfig_ref",
            Self::InvalidUrl => "invalid_url",
            Self::Policy => "policy",
            Self::NotReady => "not_ready",
            Self::Unsupported => "unsupported",
        }
    }

    /// HTTP-style code and Kubernetes reason of the response status.
    pub fn status(self) -> (u16, &'static str) {
        match self {
            Self::IdentityMismatch | Self::OwnClusterId | Self::Policy => (403, "Forbidden"),
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
}

impl Denial {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self { reason, message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_reason_at_its_index_with_a_distinct_label() {
        let mut labels = std::collections::HashSet::new();
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
            assert!(labels.insert(r.label()), "label {} twice", r.label());
        }
    }
}
