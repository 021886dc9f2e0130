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

/// The DNS names under which a Service is reached from inside the cluster.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}
