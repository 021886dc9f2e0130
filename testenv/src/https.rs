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
    handshake(tcp, ca_path).await
}

/// [`connect`], from the local address `source` (a loopback one other than 127.0.0.1 stands
/// for another client: 127.0.0.0/8 is all this host's).
pub async fn connect_from(source: std::net::IpAddr, addr: SocketAddr, ca_path: &Path) -> Conn {
    handshake(tcp_from(source, addr).await, ca_path).await
}

/// A TCP connection to `addr` from the local address `source`.
async fn tcp_from(source: std::net::IpAddr, addr: SocketAddr) -> tokio::net::TcpStream {
    let socket = match source {
        std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4().unwrap(),
        std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6().unwrap(),
    };
    socket.bind(SocketAddr::new(source, 0)).unwrap();
    socket.connect(addr).await.unwrap()
}

/// [`request`] from the local address `source` ([`connect_from`]).
pub async fn request_from(
    source: std::net::IpAddr,
    addr: SocketAddr,
    ca_path: &Path,
    method: &str,
    path: &str,
    body: serde_json::Value,
) -> Answer {
    let mut conn = connect_from(source, addr, ca_path).await;
    send(&mut conn, method, path, Some("application/json"), serde_json::to_vec(&body).unwrap()).await
}

async fn handshake(tcp: tokio::net::TcpStream, ca_path: &Path) -> Conn {
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

/// Sends a POST of `body` to `path` from `source` over verified TLS, then hangs up `after` that
/// without reading the answer (as a client that timed out does).
pub async fn hang_up_after_sending(
    source: std::net::IpAddr,
    addr: SocketAddr,
    ca_path: &Path,
    path: &str,
    body: serde_json::Value,
    after: std::time::Duration,
) {
    use tokio::io::AsyncWriteExt;
    let tcp = tcp_from(source, addr).await;
    let mut tls = connector(ca_path).connect(ServerName::try_from("localhost").unwrap(), tcp).await.expect("TLS handshake");
    let body = serde_json::to_vec(&body).unwrap();
    let head =
        format!("POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body).await.unwrap();
    tls.flush().await.unwrap();
    tokio::time::sleep(after).await;
    let _ = tls.shutdown().await;
}

/// One request on a new connection.
pub async fn request(addr: SocketAddr, ca_path: &Path, method: &str, path: &str, body: Option<serde_json::Value>) -> Answer {
    let mut conn = connect(addr, ca_path).await;
    match body {
        Some(b) => send(&mut conn, method, path, Some("application/json"), serde_json::to_vec(&b).unwrap()).await,
        None => send(&mut conn, method, path, None, vec![]).await,
    }
}

/// Sends `count` requests to `path` with a body of `size` bytes, `concurrent` at a time, each on
/// a connection of its own that writes the whole body before it reads, as an ordinary client
/// does. Returns the status line each one read, or what went wrong instead (a reset, say).
pub async fn oversized_requests(
    addr: SocketAddr,
    ca_path: &Path,
    path: &str,
    content_type: &str,
    size: usize,
    count: usize,
    concurrent: usize,
) -> Vec<String> {
    let connector = connector(ca_path);
    let head = format!("POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: {content_type}\r\ncontent-length: {size}\r\n\r\n");
    let mut request = head.into_bytes();
    request.resize(request.len() + size, b' ');
    let request = Arc::new(request);
    let mut answers = Vec::with_capacity(count);
    let mut left = count;
    while left > 0 {
        let batch = left.min(concurrent.max(1));
        let tasks: Vec<_> = (0..batch).map(|_| tokio::spawn(one_oversized(addr, connector.clone(), request.clone()))).collect();
        for task in tasks {
            answers.push(task.await.unwrap());
        }
        left -= batch;
    }
    answers
}

/// Send buffer of the clients of [`oversized_requests`], in bytes.
const SMALL_SEND_BUFFER: u32 = 4096;

async fn one_oversized(addr: SocketAddr, connector: TlsConnector, request: Arc<Vec<u8>>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A small send buffer, as on a real network where the body is still on its way when the
    // server answers: bytes the server never reads cannot hide in loopback's large buffers.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(SMALL_SEND_BUFFER).unwrap();
    let tcp = match socket.connect(addr).await {
        Ok(t) => t,
        Err(e) => return format!("connect failed: {e}"),
    };
    let mut tls = match connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await {
        Ok(t) => t,
        Err(e) => return format!("TLS handshake failed: {e}"),
    };
    if let Err(e) = async {
        tls.write_all(&request).await?;
        tls.flush().await
    }
    .await
    {
        return format!("writing the request failed: {e}");
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), tls.read_to_end(&mut answer)).await;
    let first_line = String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned();
    match read {
        Err(_) => format!("no answer within 10 s (read {first_line:?})"),
        Ok(Err(e)) if first_line.is_empty() => format!("reading the answer failed: {e}"),
        Ok(_) => first_line,
    }
}

/// The TLS cipher suites in the order Go's crypto/tls (kube-apiserver) chooses them on a
/// machine with AES instructions, whatever the client prefers: AES-128-GCM with SHA-256 first
/// (pure). rustls's own order puts AES-256-GCM with SHA-384 first, a dearer key schedule.
pub fn as_go_chooses() -> rustls::crypto::CryptoProvider {
    use rustls::CipherSuite::*;
    let rank = |s: rustls::CipherSuite| match s {
        TLS13_AES_128_GCM_SHA256 => 0,
        TLS13_AES_256_GCM_SHA384 => 1,
        TLS13_CHACHA20_POLY1305_SHA256 => 2,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 | TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 3,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 | TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 4,
        _ => 5,
    };
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|s| rank(s.suite()));
    provider
}
