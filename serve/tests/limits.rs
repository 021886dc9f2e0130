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
/// offered, is cut off at the deadline too (a few hundred of them would otherwise fill the
/// connection cap for good); so is a keep-alive connection left idle after its request.
#[tokio::test]
async fn a_silent_connection_is_cut_off() {
    let s = start(Limits { max_connections: 8, header_timeout: Duration::from_millis(500), ..Limits::default() }).await;
    for alpn in [&[][..], &[&b"http/1.1"[..]][..], &[&b"h2"[..], &b"http/1.1"[..]][..]] {
        let took = closed_after(&mut tls(&s, alpn).await).await;
        assert!(took >= Duration::from_millis(400), "{alpn:?}: cut off at the deadline, not before: {took:?}");
    }

    // HTTP/1.1 keep-alive: answered, then closed by the next request's header deadline.
    let mut kept_alive = tls(&s, &[b"http/1.1"]).await;
    kept_alive.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    closed_after(&mut kept_alive).await;
}

/// HTTP/2 has no header deadline in hyper's server, so it is not offered: a client offering
/// h2 and HTTP/1.1 gets HTTP/1.1, one offering only h2 is refused in the handshake.
#[tokio::test]
async fn http2_is_not_offered() {
    let s = start(Limits::default()).await;
    let both = tls(&s, &[b"h2", b"http/1.1"]).await;
    assert_eq!(both.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    let h2_only = connector_offering(&s.ca, &[b"h2"]).connect(ServerName::try_from("localhost").unwrap(), tcp).await;
    let e = h2_only.expect_err("an h2-only client is refused");
    assert!(e.to_string().contains("NoApplicationProtocol"), "{e}");
}

/// A client that trickles its headers, a byte at a time, is never silent; it is cut off at
/// the header deadline all the same.
#[tokio::test]
async fn a_client_trickling_its_headers_is_cut_off_at_the_deadline() {
    let s = start(Limits { max_connections: 8, header_timeout: Duration::from_millis(800), ..Limits::default() }).await;
    let mut c = tls(&s, &[b"http/1.1"]).await;
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
    let started = std::time::Instant::now();
    let (mut rd, mut wr) = tokio::io::split(c);
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if wr.write_all(b"a").await.is_err() || wr.flush().await.is_err() {
                break;
            }
        }
    });
    // Closed (an answer then EOF, or a reset), whichever: the read ends.
    let closed = tokio::time::timeout(Duration::from_secs(5), rd.read_to_end(&mut Vec::new())).await;
    trickle.abort();
    assert!(closed.is_ok(), "still open after 5 s of trickled headers");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(600), "cut off at the deadline, not before: {took:?}");
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
