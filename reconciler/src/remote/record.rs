//! TLS 1.3 application records (RFC 8446 §5.2) under one direction's traffic secret, as rustls
//! hands it over once its handshake is done ([`rustls::ExtractedSecrets`]): what a health check
//! over a kept connection seals and opens ([`crate::remote::kept`]). A kept connection holds two
//! of these (about 60 bytes each) where a rustls connection at rest holds about 8 KiB (its read
//! buffer, its record layer's keys schedules, the peer's certificates).
//!
//! Pure: no I/O. Only application data is sealed; what the peer sends besides (a session
//! ticket, a key update, an alert) is opened and told by its content type, for the caller to
//! decide (a kept connection ignores a ticket, and gives up the connection on anything else).

use ring::aead;
use rustls::ConnectionTrafficSecrets;

/// A record's header: content type, legacy version, length.
pub const HEADER: usize = 5;

/// The AEAD tag's length (every TLS 1.3 suite).
const TAG: usize = 16;

/// The largest plaintext in one record (2^14), and the largest ciphertext a peer may send
/// (2^14 + 256, RFC 8446 §5.2).
const MAX_PLAINTEXT: usize = 1 << 14;
const MAX_CIPHERTEXT: usize = MAX_PLAINTEXT + 256;

/// Content types (RFC 8446 §5.1).
pub const ALERT: u8 = 21;
pub const HANDSHAKE: u8 = 22;
pub const APPLICATION_DATA: u8 = 23;

/// Why a record could not be opened: the connection is not to be used any more.
#[derive(Debug, PartialEq, Eq)]
pub enum RecordError {
    /// Not an application-data record, or longer than TLS allows.
    Malformed,
    /// Its tag did not verify (a wrong key or sequence number, or tampering).
    Undecryptable,
    /// 2^64 records: never in practice.
    Exhausted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alg {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Alg {
    fn ring(self) -> &'static aead::Algorithm {
        match self {
            Alg::Aes128Gcm => &aead::AES_128_GCM,
            Alg::Aes256Gcm => &aead::AES_256_GCM,
            Alg::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
}

/// One direction's key, IV and next sequence number. The cipher's key schedule is made again at
/// each use (well under a microsecond), so a kept connection holds these bytes alone.
pub struct Keys {
    alg: Alg,
    key: [u8; 32],
    iv: [u8; 12],
    seq: u64,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").field("alg", &self.alg).field("seq", &self.seq).finish_non_exhaustive()
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        for byte in self.key.iter_mut().chain(self.iv.iter_mut()) {
            // SAFETY: a plain write to a byte we own; volatile so that it is not left out.
            unsafe { std::ptr::write_volatile(byte, 0) };
        }
    }
}

impl Keys {
    /// The keys of one direction as rustls extracted them (sequence number, secrets).
    pub fn of((seq, secrets): (u64, ConnectionTrafficSecrets)) -> Option<Self> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (Alg::Aes128Gcm, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (Alg::Aes256Gcm, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (Alg::Chacha20Poly1305, key, iv),
            _ => return None,
        };
        let (key, iv) = (key.as_ref(), iv.as_ref());
        if key.len() != alg.ring().key_len() || key.len() > 32 || iv.len() != 12 {
            return None;
        }
        let mut keys = Keys { alg, key: [0; 32], iv: [0; 12], seq };
        keys.key[..key.len()].copy_from_slice(key);
        keys.iv.copy_from_slice(iv);
        Some(keys)
    }

    fn cipher(&self) -> aead::LessSafeKey {
        let len = self.alg.ring().key_len();
        aead::LessSafeKey::new(aead::UnboundKey::new(self.alg.ring(), &self.key[..len]).expect("a key of the cipher's length"))
    }

    /// The next record's nonce (the IV XOR the sequence number), and the number taken.
    fn next_nonce(&mut self) -> Result<aead::Nonce, RecordError> {
        let seq = self.seq;
        self.seq = seq.checked_add(1).ok_or(RecordError::Exhausted)?;
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
            *n ^= s;
        }
        Ok(aead::Nonce::assume_unique_for_key(nonce))
    }

    /// Appends `plaintext` to `out` as application-data records (as many as its length needs).
    pub fn seal(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
        let cipher = self.cipher();
        for chunk in plaintext.chunks(MAX_PLAINTEXT) {
            let length = (chunk.len() + 1 + TAG) as u16;
            let header = [APPLICATION_DATA, 3, 3, (length >> 8) as u8, length as u8];
            let start = out.len();
            out.extend_from_slice(&header);
            out.extend_from_slice(chunk);
            out.push(APPLICATION_DATA);
            let mut body = out.split_off(start + HEADER);
            let nonce = self.next_nonce()?;
            cipher.seal_in_place_append_tag(nonce, aead::Aad::from(header), &mut body).map_err(|_| RecordError::Exhausted)?;
            out.extend_from_slice(&body);
        }
        Ok(())
    }

    /// Opens `record` (a whole one: [`record_len`]) in place: its content type and plaintext.
    pub fn open<'a>(&mut self, record: &'a mut [u8]) -> Result<(u8, &'a [u8]), RecordError> {
        if record.len() < HEADER + TAG + 1 || record[0] != APPLICATION_DATA || record.len() - HEADER > MAX_CIPHERTEXT {
            return Err(RecordError::Malformed);
        }
        let (header, body) = record.split_at_mut(HEADER);
        let aad: [u8; HEADER] = header.try_into().expect("five bytes");
        let nonce = self.next_nonce()?;
        let plain = self.cipher().open_in_place(nonce, aead::Aad::from(aad), body).map_err(|_| RecordError::Undecryptable)?;
        // The inner plaintext: content, its type, then zeros (padding).
        let end = plain.iter().rposition(|b| *b != 0).ok_or(RecordError::Malformed)?;
        Ok((plain[end], &plain[..end]))
    }
}

/// The length of the first whole record at the start of `bytes` (header included); `Ok(None)`
/// while it has not all arrived; an error for one longer than TLS allows.
pub fn record_len(bytes: &[u8]) -> Result<Option<usize>, RecordError> {
    if bytes.len() < HEADER {
        return Ok(None);
    }
    let length = usize::from(u16::from_be_bytes([bytes[3], bytes[4]]));
    if length > MAX_CIPHERTEXT {
        return Err(RecordError::Malformed);
    }
    Ok((bytes.len() >= HEADER + length).then_some(HEADER + length))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::Arc;

    /// A rustls client and server, their handshake done in memory over `suite`, with the
    /// client's secrets extracted: what the tests check our records against.
    fn connected(suite: rustls::SupportedCipherSuite) -> (rustls::ServerConnection, rustls::ExtractedSecrets) {
        let now = time::OffsetDateTime::now_utc();
        let ca = liqo_certs::issue::new_ca("records", now, time::Duration::days(1)).unwrap();
        let leaf = liqo_certs::issue::issue_serving(&ca, &["127.0.0.1".to_owned()], now, time::Duration::days(1)).unwrap();
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
        let mut provider = rustls::crypto::ring::default_provider();
        provider.cipher_suites = vec![suite];
        let provider = Arc::new(provider);
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(ca.cert_pem.as_bytes()).unwrap()).unwrap();
        let mut client = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.enable_secret_extraction = true;
        let mut server = rustls::ServerConnection::new(Arc::new(server)).unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client), "127.0.0.1".try_into().unwrap()).unwrap();
        for _ in 0..10 {
            let mut bytes = Vec::new();
            client.write_tls(&mut bytes).unwrap();
            server.read_tls(&mut &bytes[..]).unwrap();
            server.process_new_packets().unwrap();
            let mut bytes = Vec::new();
            server.write_tls(&mut bytes).unwrap();
            client.read_tls(&mut &bytes[..]).unwrap();
            client.process_new_packets().unwrap();
        }
        assert!(!client.is_handshaking() && !server.is_handshaking());
        // The server's session ticket, sent after the handshake, read by our side below.
        (server, client.dangerous_extract_secrets().unwrap())
    }

    fn suites() -> [rustls::SupportedCipherSuite; 3] {
        use rustls::crypto::ring::cipher_suite as s;
        [s::TLS13_AES_128_GCM_SHA256, s::TLS13_AES_256_GCM_SHA384, s::TLS13_CHACHA20_POLY1305_SHA256]
    }

    /// Opens every record in `bytes`, returning (content type, plaintext) of each.
    fn open_all(keys: &mut Keys, mut bytes: Vec<u8>) -> Vec<(u8, Vec<u8>)> {
        let mut opened = Vec::new();
        while let Some(len) = record_len(&bytes).unwrap() {
            let mut record: Vec<u8> = bytes.drain(..len).collect();
            let (kind, plain) = keys.open(&mut record).unwrap();
            opened.push((kind, plain.to_vec()));
        }
        assert!(bytes.is_empty(), "only whole records");
        opened
    }

    #[test]
    fn records_we_seal_and_open_are_rustls_own_in_every_suite() {
        for suite in suites() {
            let (mut server, secrets) = connected(suite);
            let (mut tx, mut rx) = (Keys::of(secrets.tx).unwrap(), Keys::of(secrets.rx).unwrap());
            // What the server sent after its handshake (its session ticket), then an answer
            // longer than one record.
            let answer = vec![b'a'; 40_000];
            server.writer().write_all(&answer).unwrap();
            let mut from_server = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut from_server).unwrap();
            }
            let opened = open_all(&mut rx, from_server);
            let data: Vec<u8> = opened.iter().filter(|(k, _)| *k == APPLICATION_DATA).flat_map(|(_, p)| p.clone()).collect();
            assert!(data == answer, "{suite:?}: {} bytes of {}", data.len(), answer.len());
            assert!(opened.iter().all(|(k, _)| *k == APPLICATION_DATA || *k == HANDSHAKE), "{suite:?}: tickets and data only");

            // A request of ours, two records long, as the server reads it.
            let request = vec![b'r'; MAX_PLAINTEXT + 10];
            let mut to_server = Vec::new();
            tx.seal(&request, &mut to_server).unwrap();
            let mut read = Vec::new();
            let mut rest = &to_server[..];
            while !rest.is_empty() {
                server.read_tls(&mut rest).unwrap();
                server.process_new_packets().unwrap();
                let mut chunk = vec![0u8; 64 * 1024];
                while let Ok(n @ 1..) = server.reader().read(&mut chunk) {
                    read.extend_from_slice(&chunk[..n]);
                }
            }
            assert!(read == request, "{suite:?}: {} bytes read of {}", read.len(), request.len());
            // And again: the sequence numbers go on.
            let mut again = Vec::new();
            tx.seal(b"again", &mut again).unwrap();
            server.read_tls(&mut &again[..]).unwrap();
            server.process_new_packets().unwrap();
            let mut read = [0u8; 5];
            server.reader().read_exact(&mut read).unwrap();
            assert_eq!(&read, b"again");
        }
    }

    #[test]
    fn a_record_tampered_with_or_out_of_order_does_not_open() {
        let (mut server, secrets) = connected(suites()[0]);
        let rx = Keys::of(secrets.rx).unwrap();
        let mut bytes = Vec::new();
        for word in [b"one", b"two"] {
            server.writer().write_all(word).unwrap();
            server.write_tls(&mut bytes).unwrap();
        }
        let first = record_len(&bytes).unwrap().unwrap();
        let second = first + record_len(&bytes[first..]).unwrap().unwrap();
        // Out of order: the second record under the first one's sequence number.
        let mut out_of_order = bytes[first..second].to_vec();
        assert_eq!(rx.copy().open(&mut out_of_order).unwrap_err(), RecordError::Undecryptable);
        // Tampered with: one bit of its tag.
        let mut tampered = bytes[..first].to_vec();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(rx.copy().open(&mut tampered).unwrap_err(), RecordError::Undecryptable);
        // In order, untouched: both open.
        let mut keys = rx.copy();
        let (mut one, mut two) = (bytes[..first].to_vec(), bytes[first..second].to_vec());
        assert_eq!(keys.open(&mut one).unwrap(), (APPLICATION_DATA, &b"one"[..]));
        assert_eq!(keys.open(&mut two).unwrap(), (APPLICATION_DATA, &b"two"[..]));
        // Not application data, too long, too short.
        let mut other = vec![HANDSHAKE, 3, 3, 0, 20];
        other.extend([0; 20]);
        assert_eq!(rx.copy().open(&mut other).unwrap_err(), RecordError::Malformed);
        assert_eq!(record_len(&[23, 3, 3, 0xff, 0xff]).unwrap_err(), RecordError::Malformed);
        assert_eq!(record_len(&[23, 3, 3, 0, 30]).unwrap(), None, "not all here yet");
        assert_eq!(rx.copy().open(&mut [23, 3, 3, 0, 1, 0]).unwrap_err(), RecordError::Malformed);
    }

    impl Keys {
        fn copy(&self) -> Keys {
            Keys { alg: self.alg, key: self.key, iv: self.iv, seq: self.seq }
        }
    }
}
