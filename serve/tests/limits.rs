//! What one client may hold, over real TLS on loopback: a connection over the cap is closed at
//! once and counted; a client that never finishes its headers (slowloris), never starts its
//! TLS handshake, or stays silent after it or between requests is cut off at the deadline; a
//! body that stalls is answered 408.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::{get, post};
use liqo_serve::{BodyBounds, CertFiles, Limits, Refused, ReloadingCert, bounded_body, serve_https_limited, server_config};
use liqo_testenv::https::{connect, connector, send};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Server {
    addr: SocketAddr,
    ca: PathBuf,
    refused: Refused,
    _certs: tempfile::TempDir,
}

async fn start(limits: Limits) -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    liqo_certs::files::ensure(certs.path(), &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    let cert = ReloadingCert::load(CertFiles { cert: certs.path().join("tls.crt"), key: certs.path().join("tls.key") }).unwrap();
    let bounds = BodyBounds { max_bytes: 1024, timeout: Duration::from_millis(300) };
    let echo = post(|body: String| async move { body }).layer(axum::middleware::from_fn_with_state(bounds, bounded_body));
    let router = Router::new().route("/", get(|| async { "ok" })).route("/echo", echo);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = axum_server::Handle::new();
    let refused = Refused::default();
    tokio::spawn(serve_https_limited(listener, server_config(cert), router, handle.clone(), limits, refused.clone()));
    handle.listening().await.unwrap();
    Server { addr, ca: certs.path().join("ca.crt"), refused, _certs: certs }
}

/// Reads until the server closes the connection (or 5 s pass); how long that took.
async fn closed_after<S: AsyncReadExt + Unpin>(stream: &mut S) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::sleep(Duration::from_secs(5));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => {}
            },
            _ = &mut deadline => panic!("the server kept the connection open for 5 s"),
        }
    }
}

#[tokio::test]
async fn a_connection_over_the_cap_is_closed_at_once_and_counted() {
    let s = start(Limits { max_connections: 2, header_timeout: Duration::from_secs(30), ..Limits::default() }).await;
    let mut first = connect(s.addr, &s.ca).await;
    let _second = connect(s.addr, &s.ca).await;
    let mut third = TcpStream::connect(s.addr).await.unwrap();
    closed_after(&mut third).await;
    assert_eq!(s.refused.get(), 1);
    // The connections inside the cap still work; once one closes, a new one is let in.
    assert_eq!(send(&mut first, "GET", "/", None, vec![]).await.status, 200);
    drop(first);
    let again = liqo_testenv::eventually("a free slot", || async {
        let tcp = TcpStream::connect(s.addr).await.ok()?;
        connector(&s.ca).connect(ServerName::try_from("localhost").unwrap(), tcp).await.ok()
    });
    again.await;
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let s = start(Limits { max_connections: 8, header_timeout: Duration::from_millis(500), ..Limits::default() }).await;
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    let mut tls = connector(&s.ca).connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
    let took = closed_after(&mut tls).await;
    assert!(took >= Duration::from_millis(400), "cut off at the deadline, not before: {took:?}");

    // Nor one that never starts its TLS handshake.
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    closed_after(&mut silent).await;
}

/// A TLS client offering `alpn` (none when empty), trusting only the CA in `ca`.
fn connector_offering(ca: &std::path::Path, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}

/// A TLS connection to `s` offering `alpn`.
async fn tls(s: &Server, alpn: &[&[u8]]) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    connector_offering(&s.ca, alpn).connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap()
}

/// A client that completes its TLS handshake and then says nothing, whichever protocol it
/// chose, is cut off at the deadline too (a few hundred of them would otherwise fill the
/// connection cap for good); so is a keep-alive connection left idle after its request, and
/// an HTTP/2 client that sends its preface and then stops talking.
#[tokio::test]
async fn a_silent_connection_is_cut_off() {
    let idle = Duration::from_millis(1500);
    let s = start(Limits { max_connections: 8, header_timeout: Duration::from_millis(500), idle_timeout: idle }).await;
    for alpn in [&[][..], &[&b"http/1.1"[..]][..], &[&b"h2"[..]][..]] {
        let took = closed_after(&mut tls(&s, alpn).await).await;
        assert!(took >= Duration::from_millis(400), "{alpn:?}: cut off at the deadline, not before: {took:?}");
    }

    // HTTP/1.1 keep-alive: answered, then closed by the next request's header deadline.
    let mut kept_alive = tls(&s, &[b"http/1.1"]).await;
    kept_alive.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    closed_after(&mut kept_alive).await;

    // HTTP/2 has no header deadline: the idle one closes it.
    let mut h2 = tls(&s, &[b"h2"]).await;
    // The client preface and an empty SETTINGS frame; then silence.
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").await.unwrap();
    let took = closed_after(&mut h2).await;
    assert!(took >= idle - Duration::from_millis(100), "closed once idle, not before: {took:?}");
}

#[tokio::test]
async fn a_body_is_bounded_in_size_and_time() {
    let s = start(Limits::default()).await;
    let mut c = connect(s.addr, &s.ca).await;
    assert_eq!(send(&mut c, "POST", "/echo", Some("text/plain"), b"hello".to_vec()).await.text(), "hello");
    assert_eq!(send(&mut c, "POST", "/echo", Some("text/plain"), vec![b'x'; 2048]).await.status, 413);

    // Headers announce 100 bytes; 10 arrive, then nothing.
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    let mut tls = connector(&s.ca).connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    tls.write_all(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n0123456789").await.unwrap();
    let mut answer = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut answer)).await.expect("an answer within 5 s").unwrap();
    let head = String::from_utf8_lossy(&answer[..n]);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
}
