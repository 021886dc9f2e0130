//! The health check's client over a connection made first (`connect_first`): over real TLS on
//! loopback, it uses that connection (the server sees one, not two), sends our credentials,
//! and still verifies the pinned CA.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use liqo_certs::issue::{Pair, issue_serving, new_ca};
use liqo_reconciler::remote::auth::client::Verify;
use liqo_reconciler::remote::peer::{Network, Peers, RemoteAccess};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};

/// An API server answering `/version`, counting the connections it takes and remembering the
/// last Authorization header.
struct Server {
    addr: std::net::SocketAddr,
    ca: Pair,
    connections: Arc<AtomicUsize>,
    authorization: Arc<std::sync::Mutex<Option<String>>>,
}

async fn server() -> Server {
    let now = time::OffsetDateTime::now_utc();
    let ca = new_ca("peer-ca", now, time::Duration::days(1)).unwrap();
    let leaf = issue_serving(&ca, &["127.0.0.1".to_owned()], now, time::Duration::days(1)).unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes()).collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let authorization = Arc::new(std::sync::Mutex::new(None));
    let (count, seen) = (connections.clone(), authorization.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let header = req.headers().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
                    *seen.lock().unwrap() = header;
                    let body = r#"{"major":"1","minor":"36","gitVersion":"v1.36.2","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"}"#;
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    Server { addr, ca, connections, authorization }
}

fn access(addr: std::net::SocketAddr, ca_pem: &str) -> RemoteAccess {
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: https://{addr}\nusers:\n- name: u\n  user:\n    token: our-identity\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: u\ncurrent-context: remote\n"
    );
    RemoteAccess { kubeconfig, api_url: None, ca_pem: Some(ca_pem.to_owned()) }
}

fn network() -> Network {
    Network::new(Verify::Nothing, Duration::from_secs(10))
}

#[tokio::test]
async fn the_check_goes_over_the_connection_made_first_with_our_credentials() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = server().await;
    let first = TcpStream::connect(s.addr).await.unwrap();
    let client = network().api_client_over(&access(s.addr, &s.ca.cert_pem), first).await.unwrap();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, "v1.36.2");
    assert_eq!(s.connections.load(Ordering::SeqCst), 1, "no second connection");
    assert_eq!(s.authorization.lock().unwrap().as_deref(), Some("Bearer our-identity"));
    // Kept for the round's next call, as any client's connection.
    client.apiserver_version().await.unwrap();
    assert_eq!(s.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_connection_made_first_still_meets_the_pinned_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = server().await;
    let other = new_ca("someone-else", time::OffsetDateTime::now_utc(), time::Duration::days(1)).unwrap();
    let first = TcpStream::connect(s.addr).await.unwrap();
    let client = network().api_client_over(&access(s.addr, &other.cert_pem), first).await.unwrap();
    let refused = client.apiserver_version().await.unwrap_err();
    assert!(format!("{refused:?}").to_lowercase().contains("certificate"), "{refused:?}");
    assert!(s.authorization.lock().unwrap().is_none(), "nothing sent to a server the pinned CA did not sign");
}
