//! A certificate directory (`ca.crt`, `ca.key`, `tls.crt` — the leaf followed by the CA —,
//! `tls.key`) kept valid: created when missing, re-issued before expiry. Files are replaced
//! atomically (write, then rename) so a server reloading them never reads half a certificate.

use std::path::{Path, PathBuf};

use time::OffsetDateTime;

use crate::issue::{Pair, chain_pem};
pub use crate::renew::Lifetimes;
use crate::renew::{renew_ca, renew_serving};
use crate::{CertsError, Result};

/// What [`ensure`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Why a new CA was made, if one was.
    pub ca: Option<String>,
    /// Why a new serving certificate was issued, if one was.
    pub serving: Option<String>,
}

fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CertsError::Io { path: path.display().to_string(), source: e }),
    }
}

fn write_atomically(path: &Path, content: &str) -> Result<()> {
    let io = |e| CertsError::Io { path: path.display().to_string(), source: e };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// The four file paths of a certificate directory.
pub struct Paths {
    pub ca_crt: PathBuf,
    pub ca_key: PathBuf,
    pub tls_crt: PathBuf,
    pub tls_key: PathBuf,
}

impl Paths {
    pub fn new(dir: &Path) -> Self {
        Self { ca_crt: dir.join("ca.crt"), ca_key: dir.join("ca.key"), tls_crt: dir.join("tls.crt"), tls_key: dir.join("tls.key") }
    }
}

/// Makes `dir` hold a CA and a serving certificate for `sans` that stays valid for more than
/// `renew_before`; keeps whatever already qualifies.
pub fn ensure(dir: &Path, sans: &[String], now: OffsetDateTime, life: &Lifetimes) -> Result<Outcome> {
    std::fs::create_dir_all(dir).map_err(|e| CertsError::Io { path: dir.display().to_string(), source: e })?;
    let paths = Paths::new(dir);
    let mut outcome = Outcome::default();

    let pair = |cert: Option<String>, key: Option<String>| Some(Pair { cert_pem: cert?, key_pem: key? });
    let (ca, why) = renew_ca(pair(read(&paths.ca_crt)?, read(&paths.ca_key)?), now, life)?;
    if why.is_some() {
        write_atomically(&paths.ca_key, &ca.key_pem)?;
        write_atomically(&paths.ca_crt, &ca.cert_pem)?;
    }
    outcome.ca = why;
    let stored = read(&paths.tls_crt)?;
    let (leaf, why) = renew_serving(&ca, pair(stored.clone(), read(&paths.tls_key)?), sans, now, life)?;
    if why.is_some() {
        // Key first: a reader that sees the new certificate must also find its key.
        write_atomically(&paths.tls_key, &leaf.key_pem)?;
    }
    // The leaf followed by its CA (a leaf alone, from an older version, is completed).
    let chain = chain_pem(&leaf.cert_pem, &ca.cert_pem);
    if stored.as_deref() != Some(chain.as_str()) {
        write_atomically(&paths.tls_crt, &chain)?;
    }
    outcome.serving = why;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    #[test]
    fn creates_then_keeps_then_renews_before_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let now = OffsetDateTime::now_utc();
        let sans = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let life = Lifetimes::default();

        let first = ensure(dir.path(), &sans, now, &life).unwrap();
        assert_eq!(first.ca.as_deref(), Some("no CA"));
        assert_eq!(first.serving.as_deref(), Some("no serving certificate"));
        let tls = std::fs::read_to_string(dir.path().join("tls.crt")).unwrap();

        assert_eq!(ensure(dir.path(), &sans, now, &life).unwrap(), Outcome::default());
        assert_eq!(std::fs::read_to_string(dir.path().join("tls.crt")).unwrap(), tls);

        let later = now + Duration::days(340);
        let renewed = ensure(dir.path(), &sans, later, &life).unwrap();
        assert_eq!(renewed.ca, None);
        assert!(renewed.serving.unwrap().starts_with("expires"));
        assert_ne!(std::fs::read_to_string(dir.path().join("tls.crt")).unwrap(), tls);

        let wider = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "webhook.example".to_owned()];
        assert_eq!(ensure(dir.path(), &wider, later, &life).unwrap().serving.as_deref(), Some("does not cover webhook.example"));
    }

    #[test]
    fn the_serving_file_holds_the_leaf_then_the_ca_and_a_lone_leaf_is_completed() {
        let dir = tempfile::tempdir().unwrap();
        let now = OffsetDateTime::now_utc();
        let sans = vec!["localhost".to_owned()];
        ensure(dir.path(), &sans, now, &Lifetimes::default()).unwrap();
        let file = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        let (chain, ca, key) = (file("tls.crt"), file("ca.crt"), file("tls.key"));
        assert_eq!(chain.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(chain.ends_with(&ca), "the CA last");

        // A directory written by an older version: the leaf alone. Completed, same key.
        let leaf_only = &chain[..chain.find(&ca).unwrap()];
        std::fs::write(dir.path().join("tls.crt"), leaf_only).unwrap();
        assert_eq!(ensure(dir.path(), &sans, now, &Lifetimes::default()).unwrap(), Outcome::default(), "nothing re-issued");
        assert_eq!((file("tls.crt"), file("tls.key")), (chain, key));
    }

    #[test]
    fn a_new_ca_forces_a_new_serving_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let now = OffsetDateTime::now_utc();
        let sans = vec!["localhost".to_owned()];
        ensure(dir.path(), &sans, now, &Lifetimes::default()).unwrap();
        std::fs::remove_file(dir.path().join("ca.key")).unwrap();
        let outcome = ensure(dir.path(), &sans, now, &Lifetimes::default()).unwrap();
        assert_eq!(outcome.ca.as_deref(), Some("no CA"));
        assert_eq!(outcome.serving.as_deref(), Some("not signed by the current CA"));
    }
}
