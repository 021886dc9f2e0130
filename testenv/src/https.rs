//! A small HTTPS client for tests: keep-alive HTTP/1.1 over TLS verified against a given CA.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::TlsConnector;

/// A TLS client trusting only the CA in `ca_path`.
pub fn connector(ca_path: &Path) -> TlsConnector {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca_path).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// One keep-alive HTTP/1.1 connection over verified TLS.
pub struct Conn {
    pub sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    /// DER of the certificate the server presented.
    pub peer_cert: Vec<u8>,
}

/// Connects to `addr` over TLS, verifying the server as `localhost` against the CA in `ca_path`.
pub async fn connect(addr: SocketAddr, ca_path: &Path) -> Conn {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls =
        connector(ca_path).connect(ServerName::try_from("localhost").unwrap(), tcp).await.expect("TLS handshake verified against the CA");
    let peer_cert = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    Conn { sender, peer_cert }
}

pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub async fn send(conn: &mut Conn, method: &str, path: &str, content_type: Option<&str>, body: Vec<u8>) -> Answer {
    let mut req = hyper::Request::builder().method(method).uri(path).header("host", "localhost");
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let resp = conn.sender.send_request(req.body(Full::new(Bytes::from(body))).unwrap()).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes().to_vec();
    Answer { status, headers, body }
}

/// One request on a new connection.
pub async fn request(addr: SocketAddr, ca_path: &Path, method: &str, path: &str, body: Option<serde_json::Value>) -> Answer {
    let mut conn = connect(addr, ca_path).await;
    match body {
        Some(b) => send(&mut conn, method, path, Some("application/json"), serde_json::to_vec(&b).unwrap()).await,
        None => send(&mut conn, method, path, None, vec![]).await,
    }
}
