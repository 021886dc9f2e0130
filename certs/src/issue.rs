//! Making certificates: a CA, and serving certificates signed by it.

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};
use time::{Duration, OffsetDateTime};

use crate::Result;

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
}

fn validity(params: &mut CertificateParams, now: OffsetDateTime, valid_for: Duration) {
    // Back-date a little so a peer whose clock lags does not see a not-yet-valid certificate.
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + valid_for;
}

/// A new self-signed CA valid for `valid_for` from `now`.
pub fn new_ca(common_name: &str, now: OffsetDateTime, valid_for: Duration) -> Result<Pair> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut params, now, valid_for);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(Pair { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// A serving certificate for `sans` (DNS names or IP addresses), signed by `ca`.
pub fn issue_serving(ca: &Pair, sans: &[String], now: OffsetDateTime, valid_for: Duration) -> Result<Pair> {
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, sans.first().map(String::as_str).unwrap_or("liqo"));
    params.distinguished_name = dn;
    params.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => Ok(SanType::DnsName(s.as_str().try_into()?)),
        })
        .collect::<Result<_, rcgen::Error>>()?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, now, valid_for);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Pair { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// What a server presents: the leaf (the first certificate of `leaf_pem`, which may already
/// be a chain) followed by the CA that signed it. Peers that pair by fingerprint can then
/// approve the CA, which outlives every leaf it signs, instead of a leaf renewed each year.
pub fn chain_pem(leaf_pem: &str, ca_pem: &str) -> String {
    const END: &str = "-----END CERTIFICATE-----";
    let leaf = leaf_pem.find(END).map_or(leaf_pem, |i| &leaf_pem[..i + END.len()]);
    format!("{}\n{}\n", leaf.trim(), ca_pem.trim())
}

/// The DNS names under which a Service is reached from inside the cluster.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{fingerprint_sha256, inspect};

    #[test]
    fn the_chain_is_the_leaf_then_its_ca_and_making_it_again_changes_nothing() {
        let now = OffsetDateTime::now_utc();
        let ca = new_ca("liqo-ca", now, Duration::days(10)).unwrap();
        let leaf = issue_serving(&ca, &["localhost".to_owned()], now, Duration::days(1)).unwrap();
        let chain = chain_pem(&leaf.cert_pem, &ca.cert_pem);
        assert_eq!(chain, format!("{}{}", leaf.cert_pem, ca.cert_pem));
        assert_eq!(chain_pem(&chain, &ca.cert_pem), chain, "a chain already made is kept as it is");
        assert_eq!(fingerprint_sha256(&chain).unwrap(), fingerprint_sha256(&leaf.cert_pem).unwrap(), "the leaf comes first");
        assert!(!inspect(&chain).unwrap().is_ca);
    }
}
