//! Who holds a cluster ID here (the tenant-namespace contract's trust on first use; pure): the
//! ServiceAccount `remote-<id>` in `liqo-tenant-<id>` that the auth service made for the first
//! caller, and what its annotations say of the holder's tokens. The auth service (`/identity`)
//! and the admission webhook (PeeringRequests and FederationRequests) judge a claim on a bound
//! ID by these and refuse it in the same words.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::names::{ANNOTATION_EXPIRES_AT, ANNOTATION_ISSUED_AT, LEGACY_IDENTITY_LIFETIME_DAYS};

/// What the ServiceAccount of a peer's identity says of its holder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    /// When the newest token was issued.
    pub issued_at: Option<Timestamp>,
    /// When the newest token expires (absent on identities of releases before 0.3).
    pub expires_at: Option<Timestamp>,
}

fn annotation(meta: &ObjectMeta, key: &str) -> Option<Timestamp> {
    meta.annotations.as_ref()?.get(key)?.parse().ok()
}

impl Holder {
    /// The holder the metadata of a ServiceAccount `remote-<id>` records.
    pub fn of(meta: &ObjectMeta) -> Self {
        Self { issued_at: annotation(meta, ANNOTATION_ISSUED_AT), expires_at: annotation(meta, ANNOTATION_EXPIRES_AT) }
    }

    /// When every token issued to the holder has expired: the recorded expiry, or a year after
    /// an older release's issue; none when neither is known (bound until renewed or freed).
    pub fn expires(&self) -> Option<Timestamp> {
        let legacy = SignedDuration::from_hours(24 * LEGACY_IDENTITY_LIFETIME_DAYS);
        self.expires_at.or_else(|| self.issued_at.map(|at| at + legacy))
    }

    /// Whether every token issued to the holder has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires().is_some_and(|at| at <= now)
    }
}

/// The words of a refused claim on `peer`'s ID while it is bound (`/identity`'s 409, and the
/// webhook's refusal of a request for that ID from anyone but the holder).
pub fn bound_message(peer: &str, until: Option<Timestamp>) -> String {
    let until = match until {
        Some(at) => format!("until its identity expires ({at}) or "),
        None => "until ".to_owned(),
    };
    format!(
        "cluster ID {peer} is bound to the cluster that first took an identity for it here: only that cluster renews it (with its current identity), {until}this cluster's operator frees it (kubectl liqo free {peer})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn an_identity_of_an_earlier_release_is_bound_for_a_year_from_its_issue() {
        let holder = Holder::of(&meta(&[(ANNOTATION_ISSUED_AT, "2026-01-01T00:00:00Z")]));
        assert_eq!(holder.expires(), Some(at("2027-01-01T00:00:00Z")));
        assert!(!holder.expired(at("2026-12-31T00:00:00Z")));
        assert!(holder.expired(at("2027-01-01T00:00:00Z")));
        let unknown = Holder::of(&ObjectMeta::default());
        assert_eq!(unknown, Holder::default());
        assert!(!unknown.expired(at("2099-01-01T00:00:00Z")), "bound until renewed or freed");
        let garbled = Holder::of(&meta(&[(ANNOTATION_EXPIRES_AT, "soon")]));
        assert_eq!(garbled.expires(), None);
    }

    #[test]
    fn the_refusal_names_the_way_out() {
        let m = bound_message("abc", Some(at("2026-12-05T00:00:00Z")));
        assert!(m.contains("kubectl liqo free abc") && m.contains("2026-12-05T00:00:00Z"), "{m}");
        assert!(!bound_message("abc", None).contains("expires"));
    }
}
