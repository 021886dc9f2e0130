//! Who may be given an identity for a cluster ID here (protocol §10; pure). The first caller for an
//! ID gets it as `authConfig` allows; from then on the ID is bound to that holder: only a caller
//! proving it holds the current identity (a renewal) gets another, until every identity issued
//! for the ID has expired with no request of the peer standing, or a person frees the ID
//! (`kubectl liqo free`, which deletes the identity's ServiceAccount).

use k8s_openapi::jiff::{SignedDuration, Timestamp};
pub use liqo_api::holder::{Holder, bound_message};

/// What a `POST /identity` for a cluster ID is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Nobody holds the ID: issued as `authConfig` allows.
    First,
    /// The caller proved it holds the current identity: issued anew, whatever `authConfig` says.
    Renewal,
    /// The holder's identities have all expired; free again unless a request of the peer still
    /// stands in its tenant namespace (the caller looks: [`after_expiry`]).
    Expired,
    /// Someone else holds the ID: 409.
    Bound {
        /// When the holder's identities expire, if known.
        until: Option<Timestamp>,
    },
}

impl Claim {
    /// The stable label of this claim (metrics, logs).
    pub fn label(&self) -> &'static str {
        match self {
            Claim::First => "first",
            Claim::Renewal => "renewal",
            Claim::Expired => "expired",
            Claim::Bound { .. } => "bound",
        }
    }
}

/// The claim a caller makes on an ID whose identity is `holder` (none: never issued, or freed);
/// `proven`: the caller presented a valid token of that very identity.
pub fn decide(holder: Option<&Holder>, proven: bool, now: Timestamp) -> Claim {
    let Some(holder) = holder else { return Claim::First };
    if proven {
        return Claim::Renewal;
    }
    if holder.expired(now) {
        return Claim::Expired;
    }
    Claim::Bound { until: holder.expires() }
}

/// An [`Claim::Expired`] ID, once the caller knows whether a request of the peer still stands
/// in its tenant namespace: free again when none does; else still bound (the request's owner
/// may come back, and whoever held the ID could rewrite its kubeconfig Secret).
pub fn after_expiry(request_standing: bool) -> Claim {
    if request_standing { Claim::Bound { until: None } } else { Claim::First }
}

/// Whether an identity issued at `issued` and lasting until `expires` should be renewed at
/// `now`: once 80 % of its life has passed (protocol §10). A token whose times are unknown is not.
pub fn renew_due(issued: Timestamp, expires: Timestamp, now: Timestamp) -> bool {
    now >= due_at(issued, expires)
}

/// Whether an identity issued at `issued` and lasting until `expires` outlasts the lifetime its
/// issuer now gives (`lifetime`): its renewal lies more than a whole such lifetime after `now`.
/// It was issued by an earlier release (a year), or before the lifetime was shortened, and is
/// renewed to the current one (protocol §10). A fresh identity of the current lifetime never is.
pub fn outlives(issued: Timestamp, expires: Timestamp, lifetime: std::time::Duration, now: Timestamp) -> bool {
    let lifetime = SignedDuration::try_from(lifetime).unwrap_or(SignedDuration::MAX);
    due_at(issued, expires).duration_since(now) > lifetime
}

/// When an identity issued at `issued` and lasting until `expires` is due for renewal: at 80 %
/// of its life (an inverted one at once).
fn due_at(issued: Timestamp, expires: Timestamp) -> Timestamp {
    let life = expires.duration_since(issued);
    if life <= SignedDuration::ZERO {
        return expires;
    }
    issued + SignedDuration::from_nanos((life.as_nanos() as f64 * 0.8) as i64)
}

/// When a Kubernetes ServiceAccount token (a JWT) was issued and when it expires, from its
/// `iat` and `exp` claims (pure; the signature is the API server's to check, not ours: these
/// only time a renewal).
pub fn token_times(token: &str) -> Option<(Timestamp, Timestamp)> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let at = |k: &str| claims.get(k)?.as_i64().and_then(|s| Timestamp::from_second(s).ok());
    Some((at("iat")?, at("exp")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use liqo_api::names::{ANNOTATION_EXPIRES_AT, ANNOTATION_ISSUED_AT};

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn sa(annotations: &[(&str, &str)]) -> k8s_openapi::api::core::v1::ServiceAccount {
        let mut sa = k8s_openapi::api::core::v1::ServiceAccount::default();
        sa.metadata.annotations = Some(annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect());
        sa
    }

    #[test]
    fn the_first_caller_takes_a_free_id() {
        assert_eq!(decide(None, false, at("2026-11-28T00:00:00Z")), Claim::First);
        assert_eq!(decide(None, true, at("2026-11-28T00:00:00Z")), Claim::First, "a token of an identity that is gone proves nothing");
    }

    #[test]
    fn a_bound_id_goes_only_to_its_holder_until_it_expires() {
        let holder =
            Holder::of(&sa(&[(ANNOTATION_ISSUED_AT, "2026-11-28T00:00:00Z"), (ANNOTATION_EXPIRES_AT, "2026-12-05T00:00:00Z")]).metadata);
        let now = at("2026-11-30T00:00:00Z");
        assert_eq!(decide(Some(&holder), false, now), Claim::Bound { until: Some(at("2026-12-05T00:00:00Z")) });
        assert_eq!(decide(Some(&holder), true, now), Claim::Renewal);
        assert_eq!(decide(Some(&holder), false, at("2026-12-05T00:00:00Z")), Claim::Expired);
        assert_eq!(after_expiry(false), Claim::First);
        assert_eq!(after_expiry(true), Claim::Bound { until: None });
    }

    #[test]
    fn renewal_is_due_after_four_fifths_of_the_life() {
        let (issued, expires) = (at("2026-11-28T00:00:00Z"), at("2026-11-28T10:00:00Z"));
        assert!(!renew_due(issued, expires, at("2026-11-28T07:59:59Z")));
        assert!(renew_due(issued, expires, at("2026-11-28T08:00:00Z")));
        assert!(renew_due(expires, issued, at("2026-11-28T00:00:00Z")), "an inverted token is renewed at once");
    }

    #[test]
    fn an_identity_longer_than_its_issuer_now_gives_is_renewed_to_that_lifetime() {
        let week = std::time::Duration::from_secs(7 * 24 * 3600);
        let now = at("2026-11-28T00:00:00Z");
        // Issued by an earlier release for a year, an hour ago: renewed now.
        assert!(outlives(at("2026-11-27T23:00:00Z"), at("2027-11-27T23:00:00Z"), week, now));
        // Issued for a week an hour ago, or a week-long one issued long ago: kept.
        assert!(!outlives(at("2026-11-27T23:00:00Z"), at("2026-12-04T23:00:00Z"), week, now));
        assert!(!outlives(at("2025-12-01T00:00:00Z"), at("2026-12-01T00:00:00Z"), week, now), "its renewal falls within a week");
        // A lifetime longer than the token's: kept.
        assert!(!outlives(at("2026-11-27T23:00:00Z"), at("2027-11-27T23:00:00Z"), 2 * 365 * week / 7, now));
        assert!(!outlives(at("2026-11-29T00:00:00Z"), at("2026-11-28T00:00:00Z"), week, now), "an inverted token");
    }

    #[test]
    fn a_tokens_times_are_read_from_its_claims() {
        use base64::Engine;
        let enc = |v: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let token = format!(
            "{}.{}.sig",
            enc(serde_json::json!({"alg": "RS256"})),
            enc(serde_json::json!({"iat": 1_800_000_000, "exp": 1_800_604_800}))
        );
        let (iat, exp) = token_times(&token).unwrap();
        assert_eq!((iat.as_second(), exp.as_second()), (1_800_000_000, 1_800_604_800));
        assert_eq!(token_times("not-a-jwt"), None);
        assert_eq!(token_times("a.b.c"), None);
        assert_eq!(token_times(&format!("x.{}.y", enc(serde_json::json!({"iat": 1})))), None, "no exp");
    }

    #[test]
    fn a_bound_claim_has_its_label() {
        assert_eq!(Claim::Bound { until: None }.label(), "bound");
    }
}
