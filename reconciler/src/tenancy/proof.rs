//! A holder's proof of its cluster ID by a key of its own (protocol §10, since 0.4; pure but for
//! the random challenge).
//!
//! A token is the issuer's to void: its service-account signing key replaced, an etcd restore, a
//! reinstall. So a holder also keeps an Ed25519 key pair, and the public half is recorded with the
//! identity it is issued (annotation [`ANNOTATION_HOLDER_KEY`] on the identity's ServiceAccount).
//! A holder whose token proves nothing any more asks for a challenge (`POST /identity/challenge`),
//! signs [`message`] (the issuer's ID, the claimed ID and the challenge), and sends the signature
//! with its request: a valid one renews its identity as its token would have. A challenge is
//! single-use, lives [`CHALLENGE_LIFETIME`], is bound to the ID it was asked for, and at most
//! [`CHALLENGE_CAP`] are outstanding (a flood of askers is refused with 503, never remembered
//! beyond that).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ED25519, UnparsedPublicKey};

pub use liqo_api::names::{ANNOTATION_HOLDER_KEY, HOLDER_KEY_PREFIX as KEY_PREFIX};

/// How long a challenge may be answered.
pub const CHALLENGE_LIFETIME: Duration = Duration::from_secs(60);
/// Challenges outstanding at most.
pub const CHALLENGE_CAP: usize = 1024;

/// What a holder signs: the issuer's cluster ID, the ID it claims and the challenge, so that a
/// signature is good for that one issuer, ID and request only.
pub fn message(issuer: &str, claimed: &str, challenge: &str) -> Vec<u8> {
    format!("liqo-holder-proof/v1\n{issuer}\n{claimed}\n{challenge}").into_bytes()
}

/// The raw public key of a recorded or presented one, when it is well-formed.
pub fn public_key(recorded: &str) -> Option<Vec<u8>> {
    let bytes = STANDARD.decode(recorded.strip_prefix(KEY_PREFIX)?).ok()?;
    (bytes.len() == 32).then_some(bytes)
}

/// Why a proof was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProofRefusal {
    /// The challenge was never given, was used, expired, or was given for another ID.
    UnknownChallenge,
    /// The identity bound here carries no key (issued before 0.4, or to a holder that sent none).
    NoKeyRecorded,
    /// The signature is not the recorded key's over this issuer, ID and challenge.
    BadSignature,
}

impl ProofRefusal {
    /// The stable label (metrics, condition messages, Events).
    pub fn label(self) -> &'static str {
        match self {
            ProofRefusal::UnknownChallenge => "UnknownChallenge",
            ProofRefusal::NoKeyRecorded => "NoKeyRecorded",
            ProofRefusal::BadSignature => "BadSignature",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            ProofRefusal::UnknownChallenge => {
                "the challenge is unknown here (used, older than 60 s, or asked for another ID): ask for a new one"
            }
            ProofRefusal::NoKeyRecorded => {
                "the identity bound to this ID carries no holder key (issued before 0.4): only its token, or `kubectl liqo free` here, can renew it"
            }
            ProofRefusal::BadSignature => "the signature is not that of the key recorded for this ID",
        }
    }
}

/// Whether `signature` (base64) is `recorded`'s over `message`.
pub fn verify(recorded: Option<&str>, message: &[u8], signature: &str) -> Result<(), ProofRefusal> {
    let key = public_key(recorded.ok_or(ProofRefusal::NoKeyRecorded)?).ok_or(ProofRefusal::NoKeyRecorded)?;
    let signature = STANDARD.decode(signature).map_err(|_| ProofRefusal::BadSignature)?;
    UnparsedPublicKey::new(&ED25519, key).verify(message, &signature).map_err(|_| ProofRefusal::BadSignature)
}

/// The challenges given and not yet answered.
pub struct Challenges {
    outstanding: Mutex<HashMap<String, (String, Instant)>>,
    cap: usize,
    lifetime: Duration,
}

impl Default for Challenges {
    fn default() -> Self {
        Self::new(CHALLENGE_CAP, CHALLENGE_LIFETIME)
    }
}

impl Challenges {
    pub fn new(cap: usize, lifetime: Duration) -> Self {
        Self { outstanding: Mutex::new(HashMap::new()), cap, lifetime }
    }

    /// A new challenge for `cluster_id`; None when [`Self::cap`] are outstanding and unexpired.
    pub fn issue(&self, cluster_id: &str, now: Instant) -> Option<String> {
        let mut outstanding = self.outstanding.lock().unwrap();
        outstanding.retain(|_, (_, given)| now.duration_since(*given) < self.lifetime);
        if outstanding.len() >= self.cap {
            return None;
        }
        let mut bytes = [0u8; 32];
        SystemRandom::new().fill(&mut bytes).expect("the system's random source");
        let challenge = URL_SAFE_NO_PAD.encode(bytes);
        outstanding.insert(challenge.clone(), (cluster_id.to_owned(), now));
        Some(challenge)
    }

    /// Uses up `challenge`: true when it was given for `cluster_id` within its lifetime.
    pub fn take(&self, challenge: &str, cluster_id: &str, now: Instant) -> bool {
        let Some((id, given)) = self.outstanding.lock().unwrap().remove(challenge) else { return false };
        id == cluster_id && now.duration_since(given) < self.lifetime
    }

    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::holder_key::HolderKey;

    const ISSUER: &str = "b0b0b0b0-0000-4000-8000-000000000000";
    const HOLDER: &str = "a0a0a0a0-0000-4000-8000-000000000000";

    #[test]
    fn a_signature_of_the_recorded_key_proves_the_holder() {
        let key = HolderKey::from_pkcs8(&HolderKey::generate()).unwrap();
        let recorded = key.public();
        assert!(recorded.starts_with(KEY_PREFIX) && public_key(&recorded).is_some());
        let signed = key.sign(&message(ISSUER, HOLDER, "c1"));
        assert_eq!(verify(Some(&recorded), &message(ISSUER, HOLDER, "c1"), &signed), Ok(()));
        // For another challenge, ID or issuer it proves nothing.
        for other in [message(ISSUER, HOLDER, "c2"), message(ISSUER, ISSUER, "c1"), message(HOLDER, HOLDER, "c1")] {
            assert_eq!(verify(Some(&recorded), &other, &signed), Err(ProofRefusal::BadSignature));
        }
        // Another key's signature, garbage, or no key recorded.
        let stranger = HolderKey::from_pkcs8(&HolderKey::generate()).unwrap();
        let theirs = stranger.sign(&message(ISSUER, HOLDER, "c1"));
        assert_eq!(verify(Some(&recorded), &message(ISSUER, HOLDER, "c1"), &theirs), Err(ProofRefusal::BadSignature));
        assert_eq!(verify(Some(&recorded), &message(ISSUER, HOLDER, "c1"), "%%%"), Err(ProofRefusal::BadSignature));
        assert_eq!(verify(None, &message(ISSUER, HOLDER, "c1"), &signed), Err(ProofRefusal::NoKeyRecorded));
        assert_eq!(verify(Some("rsa:AAAA"), &message(ISSUER, HOLDER, "c1"), &signed), Err(ProofRefusal::NoKeyRecorded));
        assert!(HolderKey::from_pkcs8(b"not a key").is_err());
    }

    #[test]
    fn a_challenge_is_single_use_bound_to_its_id_and_short_lived() {
        let challenges = Challenges::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        let c = challenges.issue(HOLDER, t0).unwrap();
        assert!(challenges.take(&c, HOLDER, t0 + Duration::from_secs(1)));
        assert!(!challenges.take(&c, HOLDER, t0 + Duration::from_secs(2)), "used once");
        let c = challenges.issue(HOLDER, t0).unwrap();
        assert!(!challenges.take(&c, ISSUER, t0), "asked for another ID");
        let c = challenges.issue(HOLDER, t0).unwrap();
        assert!(!challenges.take(&c, HOLDER, t0 + Duration::from_secs(60)), "expired");
    }

    #[test]
    fn challenges_outstanding_are_capped_until_they_expire() {
        let challenges = Challenges::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(challenges.issue(HOLDER, t0).is_some());
        assert!(challenges.issue(ISSUER, t0).is_some());
        assert_eq!(challenges.issue(HOLDER, t0 + Duration::from_secs(1)), None, "a flood is refused");
        assert!(challenges.issue(HOLDER, t0 + Duration::from_secs(61)).is_some(), "room again once they expire");
    }
}
