//! A Secret's value as a store keeps it, a certificate held once however many Secrets carry it.
//!
//! A hub keeps two Secrets per joined peer: the peer's CA (`ca.crt`, PEM) and the identity the
//! peer issued us, a kubeconfig that carries the same CA again in base64 (its
//! `certificate-authority-data`). A [`Value`] keeps a certificate's PEM in one shared
//! allocation ([`shared_pem`]), and a kubeconfig's text around the CA it carries, the CA
//! itself shared with the `ca.crt` of the same bytes: about 1.3 times the PEM less a peer
//! (0.7 KiB for an ECDSA CA, 1.5 KiB for an RSA one).
//!
//! Lossless: [`Value::bytes`] gives back exactly the bytes the Secret held; a value whose CA
//! would not come back byte for byte (another base64 alphabet, line breaks, no PEM inside) is
//! kept as it came.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// What a PEM certificate starts with.
const PEM_START: &[u8] = b"-----BEGIN CERTIFICATE-----";

/// The key a kubeconfig carries its cluster's CA under, as YAML writes it.
const CA_DATA_KEY: &str = "certificate-authority-data: ";

/// One value of a Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// As it came.
    Bytes(Box<[u8]>),
    /// A certificate's PEM, shared with every value of the same bytes.
    Pem(Arc<[u8]>),
    /// A kubeconfig's text before and after the base64 of the CA it carries, the CA's PEM
    /// shared.
    Kubeconfig { head: Box<str>, ca: Arc<[u8]>, tail: Box<str> },
}

impl Value {
    /// The value of `bytes`, kept in the smallest of the three forms that gives them back.
    pub fn of(bytes: &[u8]) -> Self {
        if bytes.starts_with(PEM_START) {
            return Value::Pem(shared_pem(bytes));
        }
        std::str::from_utf8(bytes).ok().and_then(kubeconfig).unwrap_or_else(|| Value::Bytes(bytes.into()))
    }

    /// The bytes the Secret held.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Value::Bytes(b) => b.to_vec(),
            Value::Pem(pem) => pem.to_vec(),
            Value::Kubeconfig { head, ca, tail } => {
                let mut text = String::with_capacity(head.len() + ca.len() * 4 / 3 + 4 + tail.len());
                text.push_str(head);
                STANDARD.encode_string(ca, &mut text);
                text.push_str(tail);
                text.into_bytes()
            }
        }
    }
}

/// `text` as a kubeconfig around a CA, when it carries one base64 PEM under
/// [`CA_DATA_KEY`] that encodes back to the very same characters.
fn kubeconfig(text: &str) -> Option<Value> {
    let at = text.find(CA_DATA_KEY)? + CA_DATA_KEY.len();
    let len = text[at..].find(['\n', '\r']).unwrap_or(text.len() - at);
    let encoded = &text[at..at + len];
    let pem = STANDARD.decode(encoded).ok()?;
    if !pem.starts_with(PEM_START) || STANDARD.encode(&pem) != encoded || text[at + len..].contains(CA_DATA_KEY) {
        return None;
    }
    Some(Value::Kubeconfig { head: text[..at].into(), ca: shared_pem(&pem), tail: text[at + len..].into() })
}

/// Certificates held now, by a hash of their bytes.
struct Held {
    by_hash: HashMap<u64, Weak<[u8]>>,
    /// How many were alive at the last sweep: the next one comes when the map is twice that.
    live_at_sweep: usize,
}

static HELD: LazyLock<Mutex<Held>> = LazyLock::new(|| Mutex::new(Held { by_hash: HashMap::new(), live_at_sweep: 0 }));

/// `pem` in the allocation every other holder of the same bytes shares (a new one when none
/// is held, or when another certificate holds its hash).
pub fn shared_pem(pem: &[u8]) -> Arc<[u8]> {
    let mut hasher = DefaultHasher::new();
    pem.hash(&mut hasher);
    let hash = hasher.finish();
    let mut held = HELD.lock().expect("not poisoned");
    if let Some(same) = held.by_hash.get(&hash).and_then(Weak::upgrade) {
        return if *same == *pem { same } else { pem.into() };
    }
    let shared: Arc<[u8]> = pem.into();
    held.by_hash.insert(hash, Arc::downgrade(&shared));
    if held.by_hash.len() > 2 * held.live_at_sweep + 64 {
        held.by_hash.retain(|_, w| w.strong_count() > 0);
        held.live_at_sweep = held.by_hash.len();
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem(n: u8) -> Vec<u8> {
        let mut p = PEM_START.to_vec();
        p.extend_from_slice(format!("\nMIIB{n}AAAA\n-----END CERTIFICATE-----\n").as_bytes());
        p
    }

    fn kubeconfig_with(ca: &str) -> String {
        format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    {CA_DATA_KEY}{ca}\n    server: https://10.0.0.1:6443\n  name: peer\nusers:\n- name: u\n  user:\n    token: abc\n"
        )
    }

    #[test]
    fn a_kubeconfig_comes_back_byte_for_byte_its_ca_shared_with_the_same_pem() {
        let ca = pem(1);
        let text = kubeconfig_with(&STANDARD.encode(&ca));
        let kept = Value::of(text.as_bytes());
        let Value::Kubeconfig { ca: inside, .. } = &kept else { panic!("not spliced: {kept:?}") };
        assert_eq!(kept.bytes(), text.as_bytes());
        let Value::Pem(alone) = Value::of(&ca) else { panic!("a PEM not shared") };
        assert!(Arc::ptr_eq(inside, &alone), "one allocation for the CA in both Secrets");
        assert_eq!(alone.to_vec(), ca);
    }

    #[test]
    fn a_ca_that_would_not_come_back_the_same_is_kept_as_it_came() {
        let ca = STANDARD.encode(pem(2));
        // Line breaks inside, another alphabet, no PEM inside, two CAs, no newline at the end.
        let wrapped = format!("{}\n  {}", &ca[..20], &ca[20..]);
        let url_safe = base64::engine::general_purpose::URL_SAFE.encode([0xfb_u8; 30]);
        let not_pem = STANDARD.encode(b"not a certificate");
        let two = kubeconfig_with(&ca) + &kubeconfig_with(&ca);
        for text in [kubeconfig_with(&wrapped), kubeconfig_with(&url_safe), kubeconfig_with(&not_pem), two] {
            let kept = Value::of(text.as_bytes());
            assert!(matches!(kept, Value::Bytes(_)), "{text}");
            assert_eq!(kept.bytes(), text.as_bytes());
        }
        let last = format!("{CA_DATA_KEY}{ca}");
        let kept = Value::of(last.as_bytes());
        assert!(matches!(kept, Value::Kubeconfig { .. }));
        assert_eq!(kept.bytes(), last.as_bytes());
    }

    #[test]
    fn other_values_are_kept_as_they_came() {
        for bytes in [&b""[..], b"a token", &[0xff, 0x00, 0x80]] {
            let kept = Value::of(bytes);
            assert_eq!(kept, Value::Bytes(bytes.into()));
            assert_eq!(kept.bytes(), bytes);
        }
    }

    #[test]
    fn certificates_no_one_holds_are_swept() {
        for n in 0..200u8 {
            drop(Value::of(&pem(n)));
        }
        let kept: Vec<Value> = (0..3).map(|n| Value::of(&pem(n))).collect();
        let held = HELD.lock().unwrap();
        assert!(held.by_hash.len() < 200, "{} entries held after the sweeps", held.by_hash.len());
        drop(held);
        assert_eq!(kept[2].bytes(), pem(2));
    }
}
