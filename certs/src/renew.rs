//! The renewal decisions, in memory: keep a CA or make a new one, keep a serving certificate
//! or issue a new one. [`crate::files`] applies them to a directory, [`crate::cluster`] to
//! Kubernetes Secrets.

use time::{Duration, OffsetDateTime};

use crate::Result;
use crate::inspect::{inspect, reissue_reason};
use crate::issue::{Pair, issue_serving, new_ca};

/// How long certificates live and when they are renewed.
#[derive(Clone, Debug)]
pub struct Lifetimes {
    pub ca: Duration,
    pub serving: Duration,
    pub renew_before: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self { ca: Duration::days(3650), serving: Duration::days(365), renew_before: Duration::days(30) }
    }
}

/// Why `ca` cannot stay the CA, or `None` when it can.
pub fn ca_replace_reason(ca: &Pair, now: OffsetDateTime, life: &Lifetimes) -> Option<String> {
    match inspect(&ca.cert_pem) {
        Ok(info) if !info.is_ca => Some("ca.crt is not a CA".into()),
        Ok(info) if info.not_after - now <= life.renew_before => Some(format!("CA expires at {}", info.not_after)),
        Ok(_) if rcgen::KeyPair::from_pem(&ca.key_pem).is_err() => Some("unreadable CA key".into()),
        Ok(_) => None,
        Err(e) => Some(format!("unreadable CA ({e})")),
    }
}

/// The CA to use from now on, and why it is new (`None`: `current` is kept).
pub fn renew_ca(current: Option<Pair>, now: OffsetDateTime, life: &Lifetimes) -> Result<(Pair, Option<String>)> {
    let reason = match &current {
        Some(ca) => ca_replace_reason(ca, now, life),
        None => Some("no CA".into()),
    };
    match (reason, current) {
        (None, Some(ca)) => Ok((ca, None)),
        (reason, _) => Ok((new_ca("liqo-ca", now, life.ca)?, reason)),
    }
}

/// The serving certificate for `sans` to use from now on, signed by `ca`, and why it is new
/// (`None`: `current` is kept).
pub fn renew_serving(
    ca: &Pair,
    current: Option<Pair>,
    sans: &[String],
    now: OffsetDateTime,
    life: &Lifetimes,
) -> Result<(Pair, Option<String>)> {
    let reason = match &current {
        Some(leaf) => reissue_reason(&leaf.cert_pem, &ca.cert_pem, sans, now, life.renew_before),
        None => Some("no serving certificate".into()),
    };
    match (reason, current) {
        (None, Some(leaf)) => Ok((leaf, None)),
        (reason, _) => Ok((issue_serving(ca, sans, now, life.serving)?, reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    #[test]
    fn a_valid_ca_is_kept_an_expiring_or_broken_one_replaced() {
        let life = Lifetimes::default();
        let (ca, why) = renew_ca(None, now(), &life).unwrap();
        assert_eq!(why.as_deref(), Some("no CA"));
        let (kept, why) = renew_ca(Some(ca.clone()), now(), &life).unwrap();
        assert_eq!((kept, why), (ca.clone(), None));

        let late = now() + Duration::days(3650 - 10);
        let (new, why) = renew_ca(Some(ca.clone()), late, &life).unwrap();
        assert!(why.unwrap().starts_with("CA expires at"), "expiring CA replaced");
        assert_ne!(new, ca);

        let broken = Pair { cert_pem: ca.cert_pem.clone(), key_pem: "not a key".into() };
        assert_eq!(renew_ca(Some(broken), now(), &life).unwrap().1.as_deref(), Some("unreadable CA key"));
        let leaf = issue_serving(&ca, &["x".into()], now(), Duration::days(1)).unwrap();
        assert_eq!(renew_ca(Some(leaf), now(), &life).unwrap().1.as_deref(), Some("ca.crt is not a CA"));
    }

    #[test]
    fn serving_certificate_kept_until_it_must_change() {
        let life = Lifetimes::default();
        let (ca, _) = renew_ca(None, now(), &life).unwrap();
        let sans = vec!["liqo-auth.liqo.svc".to_owned()];
        let (leaf, why) = renew_serving(&ca, None, &sans, now(), &life).unwrap();
        assert_eq!(why.as_deref(), Some("no serving certificate"));
        assert_eq!(renew_serving(&ca, Some(leaf.clone()), &sans, now(), &life).unwrap(), (leaf.clone(), None));
        let wider = vec!["liqo-auth.liqo.svc".to_owned(), "172.18.0.2".to_owned()];
        let (_, why) = renew_serving(&ca, Some(leaf.clone()), &wider, now(), &life).unwrap();
        assert_eq!(why.as_deref(), Some("does not cover 172.18.0.2"));
        let (other, _) = renew_ca(None, now(), &life).unwrap();
        let (_, why) = renew_serving(&other, Some(leaf), &sans, now(), &life).unwrap();
        assert_eq!(why.as_deref(), Some("not signed by the current CA"));
    }
}
