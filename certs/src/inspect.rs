//! Reading certificates back: expiry, SANs, issuer, fingerprint; and the re-issue decision.

use std::net::IpAddr;

use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

use crate::{CertsError, Result};

/// What the re-issue decision needs to know about a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    /// DNS names and IP addresses, as strings.
    pub sans: Vec<String>,
    pub is_ca: bool,
}

fn first_pem(pem: &str) -> Result<Pem> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| CertsError::Pem(e.to_string()))?;
    if pem.label != "CERTIFICATE" {
        return Err(CertsError::Pem(format!("found a {} block", pem.label)));
    }
    Ok(pem)
}

fn to_time(t: x509_parser::time::ASN1Time) -> Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(t.timestamp()).map_err(|e| CertsError::Parse(e.to_string()))
}

/// Parses the first certificate of `cert_pem`.
pub fn inspect(cert_pem: &str) -> Result<CertInfo> {
    let pem = first_pem(cert_pem)?;
    let cert = pem.parse_x509().map_err(|e| CertsError::Parse(e.to_string()))?;
    let mut sans = Vec::new();
    if let Some(ext) = cert.subject_alternative_name().map_err(|e| CertsError::Parse(e.to_string()))? {
        for name in &ext.value.general_names {
            match name {
                GeneralName::DNSName(d) => sans.push((*d).to_owned()),
                GeneralName::IPAddress(bytes) => match bytes.len() {
                    4 => sans.push(IpAddr::from(<[u8; 4]>::try_from(*bytes).unwrap()).to_string()),
                    16 => sans.push(IpAddr::from(<[u8; 16]>::try_from(*bytes).unwrap()).to_string()),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    Ok(CertInfo {
        not_before: to_time(cert.validity().not_before)?,
        not_after: to_time(cert.validity().not_after)?,
        sans,
        is_ca: cert.is_ca(),
    })
}

/// When the DER certificate `der` expires, as Unix time (for the expiry metrics).
pub fn not_after_unix(der: &[u8]) -> Result<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| CertsError::Parse(e.to_string()))?;
    Ok(cert.validity().not_after.timestamp())
}

/// When the leaf (the first) of a served chain expires, as Unix time; 0 when the chain is empty
/// or its leaf cannot be read (the certificate-expiry metrics).
pub fn leaf_not_after_unix<C: AsRef<[u8]>>(chain: &[C]) -> i64 {
    chain.first().and_then(|der| not_after_unix(der.as_ref()).ok()).unwrap_or(0)
}

/// Lowercase hex SHA-256 of the DER of the first certificate in `cert_pem`.
pub fn fingerprint_sha256(cert_pem: &str) -> Result<String> {
    Ok(der_fingerprint(&first_certificate_der(cert_pem)?))
}

/// The DER of the first PEM block of `pem`, which must be a certificate: the base64 between
/// its armour lines decoded at once (a health check asks it of the pinned CA every round; the
/// general PEM reader took several times as long, a line at a time).
fn first_certificate_der(pem: &str) -> Result<Vec<u8>> {
    use base64::Engine;
    let unarmoured = |what: &str| CertsError::Pem(format!("not a PEM certificate: {what}"));
    let (_, after) = pem.split_once("-----BEGIN ").ok_or_else(|| unarmoured("no BEGIN line"))?;
    let (label, rest) = after.split_once("-----").ok_or_else(|| unarmoured("an unterminated BEGIN line"))?;
    if label != "CERTIFICATE" {
        return Err(CertsError::Pem(format!("found a {label} block")));
    }
    let (body, _) = rest.split_once("-----END CERTIFICATE-----").ok_or_else(|| unarmoured("no END line"))?;
    let text: Vec<u8> = body.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| CertsError::Pem(format!("the certificate's base64: {e}")))
}

/// Lowercase hex SHA-256 of a DER certificate: its fingerprint.
pub fn der_fingerprint(der: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for b in Sha256::digest(der) {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}

/// Whether `cert_pem` was signed by the CA `ca_pem`.
fn signed_by(cert_pem: &str, ca_pem: &str) -> Result<bool> {
    let cert_block = first_pem(cert_pem)?;
    let ca_block = first_pem(ca_pem)?;
    let cert = cert_block.parse_x509().map_err(|e| CertsError::Parse(e.to_string()))?;
    let ca = ca_block.parse_x509().map_err(|e| CertsError::Parse(e.to_string()))?;
    Ok(cert.verify_signature(Some(ca.public_key())).is_ok())
}

/// Why a serving certificate must be issued again, or `None` when it can stay: it is kept
/// only while it is signed by `ca_pem`, covers every wanted SAN, and stays valid for more
/// than `renew_before` after `now`.
pub fn reissue_reason(cert_pem: &str, ca_pem: &str, wanted_sans: &[String], now: OffsetDateTime, renew_before: Duration) -> Option<String> {
    let info = match inspect(cert_pem) {
        Ok(info) => info,
        Err(e) => return Some(format!("unreadable certificate ({e})")),
    };
    match signed_by(cert_pem, ca_pem) {
        Ok(true) => {}
        Ok(false) => return Some("not signed by the current CA".to_owned()),
        Err(e) => return Some(format!("unreadable CA ({e})")),
    }
    if let Some(missing) = wanted_sans.iter().find(|s| !info.sans.contains(s)) {
        return Some(format!("does not cover {missing}"));
    }
    if info.not_after - now <= renew_before {
        return Some(format!("expires at {}", info.not_after));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::issue::{issue_serving, new_ca, service_dns_names};

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    #[test]
    fn serving_certificate_has_the_requested_sans_and_validity() {
        let ca = new_ca("liqo-ca", now(), Duration::days(3650)).unwrap();
        let mut sans = service_dns_names("liqo-webhook", "liqo");
        sans.push("127.0.0.1".into());
        sans.push("::1".into());
        let leaf = issue_serving(&ca, &sans, now(), Duration::days(365)).unwrap();
        let info = inspect(&leaf.cert_pem).unwrap();
        assert_eq!(info.sans, sans);
        assert!(!info.is_ca);
        assert_eq!(info.not_after, now() + Duration::days(365));
        assert!(info.not_before < now());
        assert!(inspect(&ca.cert_pem).unwrap().is_ca);
        assert!(signed_by(&leaf.cert_pem, &ca.cert_pem).unwrap());
        let der = first_pem(&leaf.cert_pem).unwrap().contents;
        assert_eq!(not_after_unix(&der).unwrap(), (now() + Duration::days(365)).unix_timestamp());
        assert!(not_after_unix(b"not a certificate").is_err());
        let ca_der = first_pem(&ca.cert_pem).unwrap().contents;
        assert_eq!(leaf_not_after_unix(&[der.clone(), ca_der]), (now() + Duration::days(365)).unix_timestamp(), "the leaf's, not the CA's");
        assert_eq!(leaf_not_after_unix::<Vec<u8>>(&[]), 0);
    }

    #[test]
    fn reissue_when_expiring_uncovered_or_from_another_ca() {
        let ca = new_ca("liqo-ca", now(), Duration::days(3650)).unwrap();
        let other = new_ca("other", now(), Duration::days(3650)).unwrap();
        let sans = vec!["liqo-webhook.liqo.svc".to_owned()];
        let leaf = issue_serving(&ca, &sans, now(), Duration::days(30)).unwrap();
        let renew = Duration::days(7);

        assert_eq!(reissue_reason(&leaf.cert_pem, &ca.cert_pem, &sans, now(), renew), None);
        let later = now() + Duration::days(24);
        assert!(reissue_reason(&leaf.cert_pem, &ca.cert_pem, &sans, later, renew).unwrap().starts_with("expires"));
        let more = vec!["liqo-webhook.liqo.svc".to_owned(), "10.0.0.1".to_owned()];
        assert_eq!(reissue_reason(&leaf.cert_pem, &ca.cert_pem, &more, now(), renew).as_deref(), Some("does not cover 10.0.0.1"));
        assert_eq!(reissue_reason(&leaf.cert_pem, &other.cert_pem, &sans, now(), renew).as_deref(), Some("not signed by the current CA"));
        assert!(reissue_reason("garbage", &ca.cert_pem, &sans, now(), renew).unwrap().starts_with("unreadable"));
    }

    #[test]
    fn fingerprint_is_sha256_of_der_and_rejects_non_certificates() {
        let ca = new_ca("liqo-ca", now(), Duration::days(1)).unwrap();
        let fp = fingerprint_sha256(&ca.cert_pem).unwrap();
        assert_eq!(fp.len(), 64);
        assert_eq!(fp, fingerprint_sha256(&ca.cert_pem).unwrap());
        assert_ne!(fp, fingerprint_sha256(&new_ca("liqo-ca", now(), Duration::days(1)).unwrap().cert_pem).unwrap());
        assert!(matches!(fingerprint_sha256(&ca.key_pem), Err(CertsError::Pem(_))));
        // The same DER as the general PEM reader's, for a chain (the first certificate) and
        // with CRLF line endings; nothing for what is not a whole certificate block.
        let leaf = issue_serving(&ca, &["leaf.example".to_owned()], now(), Duration::days(1)).unwrap();
        let chain = format!("{}{}", leaf.cert_pem, ca.cert_pem);
        assert_eq!(first_certificate_der(&chain).unwrap(), first_pem(&chain).unwrap().contents);
        assert_eq!(first_certificate_der(&ca.cert_pem.replace('\n', "\r\n")).unwrap(), first_pem(&ca.cert_pem).unwrap().contents);
        assert_eq!(fingerprint_sha256(&chain).unwrap(), fingerprint_sha256(&leaf.cert_pem).unwrap());
        let truncated = &ca.cert_pem[..ca.cert_pem.len() - 10];
        assert!(matches!(fingerprint_sha256(truncated), Err(CertsError::Pem(_))));
        assert!(matches!(fingerprint_sha256("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"), Err(CertsError::Pem(_))));
        assert!(matches!(fingerprint_sha256(""), Err(CertsError::Pem(_))));
        assert!(inspect("").is_err());
        // Lowercase hex of the digest (FIPS 180-2's "abc" vector), as `openssl x509 -fingerprint` less the colons.
        assert_eq!(der_fingerprint(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
