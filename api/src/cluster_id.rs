//! The cluster-ID format: a lowercase DNS-1123 label of at most 63 characters.

use std::fmt;

/// Longest valid cluster ID.
pub const MAX_LEN: usize = 63;

/// Why a string is not a well-formed cluster ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterIdError {
    Empty,
    TooLong(usize),
    InvalidChar(char),
    BadEdge,
}

impl fmt::Display for ClusterIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "must not be empty"),
            Self::TooLong(n) => write!(f, "must be at most {MAX_LEN} characters (has {n})"),
            Self::InvalidChar(c) => {
                write!(f, "may contain only lowercase letters, digits and '-' (found {c:?})")
            }
            Self::BadEdge => write!(f, "must start and end with a lowercase letter or digit"),
        }
    }
}

impl std::error::Error for ClusterIdError {}

/// Checks that `id` is a lowercase DNS-1123 label (UUIDs are).
pub fn validate_cluster_id(id: &str) -> Result<(), ClusterIdError> {
    if id.is_empty() {
        return Err(ClusterIdError::Empty);
    }
    let len = id.chars().count();
    if len > MAX_LEN {
        return Err(ClusterIdError::TooLong(len));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')) {
        return Err(ClusterIdError::InvalidChar(c));
    }
    if id.starts_with('-') || id.ends_with('-') {
        return Err(ClusterIdError::BadEdge);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_and_dns_labels_are_well_formed() {
        for id in ["9a596a4b-591c-4ac6-8fd6-80258b4b3bf9", "a", "cluster-1", "0"] {
            assert_eq!(validate_cluster_id(id), Ok(()), "{id}");
        }
        assert_eq!(validate_cluster_id(&"a".repeat(63)), Ok(()));
    }

    #[test]
    fn malformed_ids_are_rejected_with_a_reason() {
        assert_eq!(validate_cluster_id(""), Err(ClusterIdError::Empty));
        assert_eq!(validate_cluster_id(&"a".repeat(64)), Err(ClusterIdError::TooLong(64)));
        assert_eq!(validate_cluster_id("Upper"), Err(ClusterIdError::InvalidChar('U')));
        assert_eq!(validate_cluster_id("a.b"), Err(ClusterIdError::InvalidChar('.')));
        assert_eq!(validate_cluster_id("a b"), Err(ClusterIdError::InvalidChar(' ')));
        assert_eq!(validate_cluster_id("é"), Err(ClusterIdError::InvalidChar('é')));
        assert_eq!(validate_cluster_id("-a"), Err(ClusterIdError::BadEdge));
        assert_eq!(validate_cluster_id("a-"), Err(ClusterIdError::BadEdge));
    }
}
