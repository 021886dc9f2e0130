//! Calling a peer's auth service: `/ids`, `/ca`, `/identity`, over HTTPS verified the way the
//! trust decision says, and the trust probe itself.
//!
//! A peer is *Trusted* when its auth service presents a certificate that the system's roots
//! (or roots given by the operator) verify; *Untrusted* when the only failure is an unknown
//! issuer. Anything else (refused connection, bad hostname, timeout) is an error, not a trust
//! decision.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use liqo_api::TrustMode;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_rustls::TlsConnector;

use super::wire::{ChallengeRequest, ChallengeResponse, ErrorBody, IdentityRequest, IdentityResponse, Ids};
use crate::machinery::error::{Error, Result, Step};

/// Time allowed for one call, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read from a peer.
const MAX_ANSWER: usize = 1 << 20;

/// How the peer's certificate is checked.
#[derive(Clone, Debug)]
pub enum Verify {
    /// Against these roots (the system's, or a CA pinned for this peer).
    Roots(Arc<RootCertStore>),
    /// Not at all: only for a peer whose untrusted CA the operator allowed.
    Nothing,
    /// The leaf presented, or the CA that signed it, has this SHA-256 (lowercase hex): a peer
    /// paired by fingerprint.
    Fingerprint(String),
}

impl Verify {
    /// The system's roots (`/etc/ssl/certs` and friends).
    pub fn system() -> Self {
        let mut roots = RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        Verify::Roots(Arc::new(roots))
    }

    /// Only the CAs in `pem`.
    pub fn pinned(pem: &str) -> Result<Self> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| Error::Tls(format!("pinned CA: {e}")))?;
            roots.add(cert).map_err(|e| Error::Tls(format!("pinned CA: {e}")))?;
        }
        if roots.is_empty() {
            return Err(Error::Tls("pinned CA: no certificate".into()));
        }
        Ok(Verify::Roots(Arc::new(roots)))
    }

    fn config(&self) -> ClientConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions");
        let mut config = match self {
            Verify::Roots(roots) => builder.with_root_certificates(roots.clone()).with_no_client_auth(),
            Verify::Nothing => {
                builder.dangerous().with_custom_certificate_verifier(Arc::new(NoRoots(provider, None))).with_no_client_auth()
            }
            Verify::Fingerprint(fp) => {
                builder.dangerous().with_custom_certificate_verifier(Arc::new(NoRoots(provider, Some(fp.clone())))).with_no_client_auth()
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config
    }
}

/// Verifies no chain against roots, still checking the handshake signatures: accepts any
/// certificate, or (with a fingerprint) a peer paired by fingerprint — see [`approved`].
#[derive(Debug)]
struct NoRoots(Arc<rustls::crypto::CryptoProvider>, Option<String>);

impl ServerCertVerifier for NoRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match &self.1 {
            Some(expected) if !approved(expected, end_entity, intermediates, now, &self.0) => {
                Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure))
            }
            _ => Ok(ServerCertVerified::assertion()),
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Whether the certificate the server proved it holds the key of (`end_entity`, whose
/// signature over the handshake rustls checks) is the approved one, or is signed by it
/// through the presented chain. Merely presenting a certificate with that fingerprint proves
/// nothing: a certificate is public, anybody can send a copy of it after a leaf of their own.
/// The name the peer is reached by is not checked: the approval names the peer's own CA, and
/// peers are often reached by an address (a NodePort) that their certificate does not list.
fn approved(
    expected: &str,
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    now: UnixTime,
    provider: &rustls::crypto::CryptoProvider,
) -> bool {
    fingerprint(end_entity) == expected
        || intermediates.iter().any(|c| fingerprint(c) == expected && chains_to(end_entity, intermediates, c, now, provider))
}

/// Whether `end_entity` is valid `now` and signed by `anchor`, through `intermediates`.
fn chains_to(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    anchor: &CertificateDer<'_>,
    now: UnixTime,
    provider: &rustls::crypto::CryptoProvider,
) -> bool {
    let mut roots = RootCertStore::empty();
    let Ok(leaf) = rustls::server::ParsedCertificate::try_from(end_entity) else { return false };
    roots.add(anchor.clone().into_owned()).is_ok()
        && rustls::client::verify_server_cert_signed_by_trust_anchor(
            &leaf,
            &roots,
            intermediates,
            now,
            provider.signature_verification_algorithms.all,
        )
        .is_ok()
}

/// The fingerprints a server proves: its leaf's, then those of the presented certificates
/// that signed it (its CA, when it sends it). A copy of someone else's CA is not listed.
fn proven_fingerprints(certs: &[CertificateDer<'_>]) -> Vec<String> {
    let Some((leaf, rest)) = certs.split_first() else { return Vec::new() };
    let provider = rustls::crypto::ring::default_provider();
    let now = UnixTime::now();
    std::iter::once(fingerprint(leaf)).chain(rest.iter().filter(|c| chains_to(leaf, rest, c, now, &provider)).map(fingerprint)).collect()
}

/// The SHA-256 of a certificate, lowercase hex.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    liqo_certs::inspect::der_fingerprint(cert.as_ref())
}

/// The fingerprints the auth service at `base` proves (see `proven_fingerprints`): its
/// leaf's, then its CA's when it presents it.
pub async fn presented_fingerprints(base: &str) -> Result<Vec<String>> {
    let step = Step::TrustProbe;
    let tls = tokio::time::timeout(TIMEOUT, connect(base, &Verify::Nothing, step))
        .await
        .map_err(|_| Error::unreachable(step, format!("{base}: timed out")))??;
    Ok(proven_fingerprints(tls.get_ref().1.peer_certificates().unwrap_or_default()))
}

/// `https://host:port` split into what a connection needs.
fn target(base: &str) -> Result<(String, u16, ServerName<'static>)> {
    let url = url::Url::parse(base).map_err(|e| Error::invalid("authUrl", format!("{base:?}: {e}")))?;
    if url.scheme() != "https" {
        return Err(Error::invalid("authUrl", format!("{base:?}: must be https")));
    }
    let host = url.host_str().ok_or_else(|| Error::invalid("authUrl", format!("{base:?}: no host")))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let name = ServerName::try_from(bare.clone()).map_err(|e| Error::invalid("authUrl", format!("{host}: {e}")))?;
    Ok((bare, url.port_or_known_default().unwrap_or(443), name))
}

/// One TLS connection; the error says whether the certificate was the problem.
async fn connect(base: &str, verify: &Verify, step: Step) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let (host, port, name) = target(base)?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await.map_err(|e| Error::unreachable(step, format!("{base}: {e}")))?;
    tcp.set_nodelay(true).ok();
    TlsConnector::from(Arc::new(verify.config())).connect(name, tcp).await.map_err(|e| {
        match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)) => {
                Error::UntrustedRemote(format!("{base}: certificate signed by an unknown authority"))
            }
            Some(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure))
                if matches!(verify, Verify::Fingerprint(_)) =>
            {
                Error::Tls(format!("{base}: the certificate presented is neither the approved one nor signed by it"))
            }
            Some(rustls::Error::InvalidCertificate(c)) => Error::Tls(format!("{base}: {c:?}")),
            _ => Error::unreachable(step, format!("{base}: {e}")),
        }
    })
}

async fn call(base: &str, verify: &Verify, step: Step, method: &str, path: &str, body: Option<Vec<u8>>) -> Result<(u16, Bytes)> {
    let unreachable = |e: &dyn std::fmt::Display| Error::unreachable(step, format!("{base}{path}: {e}"));
    let work = async {
        let tls = connect(base, verify, step).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.map_err(|e| unreachable(&e))?;
        tokio::spawn(conn);
        let (host, port, _) = target(base)?;
        let mut req = hyper::Request::builder().method(method).uri(path).header("host", format!("{host}:{port}"));
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default()))).expect("a valid request");
        let resp = sender.send_request(req).await.map_err(|e| unreachable(&e))?;
        let status = resp.status().as_u16();
        let bytes = Limited::new(resp.into_body(), MAX_ANSWER).collect().await.map_err(|e| unreachable(&e))?.to_bytes();
        Ok((status, bytes))
    };
    tokio::time::timeout(TIMEOUT, work).await.map_err(|_| unreachable(&"timed out"))?
}

/// The answer decoded when its status is `expected`; the error says which step failed and how.
fn decode<T: DeserializeOwned>(base: &str, path: &str, step: Step, expected: u16, (status, body): (u16, Bytes)) -> Result<T> {
    if status != expected {
        let message = serde_json::from_slice::<ErrorBody>(&body)
            .map(|e| e.message)
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).chars().take(200).collect());
        return Err(Error::Remote { step, status: Some(status), message: format!("{base}{path}: HTTP {status}: {message}") });
    }
    serde_json::from_slice(&body).map_err(|e| Error::RemoteInvalid { step, message: format!("{base}{path}: {e}") })
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("plain structs serialize")
}

/// Trusted when `roots` verify the peer's certificate, Untrusted when its issuer is unknown.
pub async fn probe_trust(base: &str, roots: &Verify) -> Result<TrustMode> {
    let probe = tokio::time::timeout(TIMEOUT, connect(base, roots, Step::TrustProbe));
    let connected = probe.await.map_err(|_| Error::unreachable(Step::TrustProbe, format!("{base}: timed out")))?;
    match connected {
        Ok(_) => Ok(TrustMode::Trusted),
        Err(Error::UntrustedRemote(_)) => Ok(TrustMode::Untrusted),
        Err(e) => Err(e),
    }
}

/// `GET /ids`; the answer's cluster ID must be well formed, and its name and namespace free
/// of control characters (they end up in objects and on users' terminals).
pub async fn ids(base: &str, verify: &Verify) -> Result<Ids> {
    let ids: Ids = decode(base, "/ids", Step::Ids, 200, call(base, verify, Step::Ids, "GET", "/ids", None).await?)?;
    let invalid = |message: String| Error::RemoteInvalid { step: Step::Ids, message: format!("{base}/ids: {message}") };
    liqo_api::validate_cluster_id(&ids.cluster_id).map_err(|e| invalid(format!("clusterId {:?}: {e}", ids.cluster_id)))?;
    for (key, value) in [("clusterName", &ids.cluster_name), ("guestNamespace", &ids.guest_namespace)] {
        if !liqo_api::terminal::is_printable(value) {
            return Err(invalid(format!("{key} {:?} holds control characters", value)));
        }
    }
    Ok(ids)
}

/// `GET /ca`: the PEM of the peer's API server CA.
pub async fn ca(base: &str, verify: &Verify) -> Result<String> {
    let (status, body) = call(base, verify, Step::Ca, "GET", "/ca", None).await?;
    if status != 200 {
        return Err(Error::Remote { step: Step::Ca, status: Some(status), message: format!("{base}/ca: HTTP {status}") });
    }
    let invalid = |e: &dyn std::fmt::Display| Error::RemoteInvalid { step: Step::Ca, message: format!("{base}/ca: {e}") };
    let pem = String::from_utf8(body.to_vec()).map_err(|e| invalid(&e))?;
    Verify::pinned(&pem).map_err(|e| invalid(&e))?; // must hold at least one parsable certificate
    Ok(pem)
}

/// Path of the ConfigMap kubeadm (and kind) publish for anyone to read: a kubeconfig whose
/// cluster carries the API server's CA.
pub const CLUSTER_INFO_PATH: &str = "/api/v1/namespaces/kube-public/configmaps/cluster-info";

/// The API server CA (PEM) from the body of the `kube-public/cluster-info` ConfigMap (pure).
pub fn ca_from_cluster_info(body: &[u8]) -> std::result::Result<String, String> {
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_slice(body).map_err(|e| format!("not a ConfigMap: {e}"))?;
    let kubeconfig = cm.data.as_ref().and_then(|d| d.get("kubeconfig")).ok_or("no data.kubeconfig")?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).map_err(|e| format!("data.kubeconfig: {e}"))?;
    let b64 = kubeconfig
        .clusters
        .iter()
        .find_map(|c| c.cluster.as_ref()?.certificate_authority_data.clone())
        .ok_or("data.kubeconfig has no certificate-authority-data")?;
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD.decode(b64.trim()).map_err(|e| format!("certificate-authority-data: {e}"))?;
    let pem = String::from_utf8(pem).map_err(|e| format!("certificate-authority-data: {e}"))?;
    Verify::pinned(&pem).map_err(|e| format!("certificate-authority-data: {e}"))?;
    Ok(pem)
}

/// The remote API server's CA from its anonymously readable `kube-public/cluster-info`
/// (the kubeadm-join way), fetched from `api_url` verified as `verify` says.
pub async fn cluster_info_ca(api_url: &str, verify: &Verify) -> Result<String> {
    let step = Step::ClusterInfo;
    let (status, body) = call(api_url, verify, step, "GET", CLUSTER_INFO_PATH, None).await?;
    if status != 200 {
        let message = format!("{api_url}{CLUSTER_INFO_PATH}: HTTP {status} (not published, or not readable anonymously)");
        return Err(Error::Remote { step, status: Some(status), message });
    }
    ca_from_cluster_info(&body).map_err(|m| Error::RemoteInvalid { step, message: format!("{api_url}{CLUSTER_INFO_PATH}: {m}") })
}

/// `POST /identity`.
pub async fn identity(base: &str, verify: &Verify, request: &IdentityRequest) -> Result<IdentityResponse> {
    decode(base, "/identity", Step::Identity, 201, call(base, verify, Step::Identity, "POST", "/identity", Some(json(request))).await?)
}

/// `POST /identity/challenge`: a challenge to sign with our holder key.
pub async fn challenge(base: &str, verify: &Verify, cluster_id: &str) -> Result<ChallengeResponse> {
    let body = json(&ChallengeRequest { cluster_id: cluster_id.to_owned() });
    let path = "/identity/challenge";
    decode(base, path, Step::Identity, 200, call(base, verify, Step::Identity, "POST", path, Some(body)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn cluster_info(kubeconfig: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": kubeconfig},
        }))
        .unwrap()
    }

    #[test]
    fn the_ca_is_read_from_kubeadms_cluster_info() {
        let ca = liqo_certs::new_ca("kubernetes", time::OffsetDateTime::now_utc(), time::Duration::days(10)).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&ca.cert_pem);
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {b64}\n    server: https://172.18.0.2:6443\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\npreferences: {{}}\nusers: null\n"
        );
        assert_eq!(ca_from_cluster_info(&cluster_info(&kubeconfig)).unwrap(), ca.cert_pem);

        let no_ca = "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://172.18.0.2:6443\n  name: x\n";
        assert!(ca_from_cluster_info(&cluster_info(no_ca)).unwrap_err().contains("no certificate-authority-data"));
        let junk = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {}\n  name: x\n",
            base64::engine::general_purpose::STANDARD.encode("junk")
        );
        assert!(ca_from_cluster_info(&cluster_info(&junk)).unwrap_err().starts_with("certificate-authority-data"));
        assert!(ca_from_cluster_info(b"{}").unwrap_err().contains("no data.kubeconfig"));
        assert!(ca_from_cluster_info(b"not json").unwrap_err().starts_with("not a ConfigMap"));
    }
}
