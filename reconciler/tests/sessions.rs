//! Calls to a peer's API server resume its TLS session, over real TLS on loopback against a
//! server that issues tickets as kube-apiserver does (stateless, one per handshake): a full
//! handshake, then resumed ones, a full one again every `FULL_HANDSHAKE_EVERY`; never a session
//! resumed under another pinned CA or identity; a certificate replaced in place seen at the
//! next full handshake, one replaced with a restart at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use liqo_certs::issue::{Pair, issue_serving, new_ca};
use liqo_reconciler::remote::auth::client::Verify;
use liqo_reconciler::remote::peer::{Network, Peers, RemoteAccess};
use liqo_reconciler::remote::sessions::{FULL_HANDSHAKE_EVERY, first_count, key_of};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

/// A TLS configuration serving a certificate for 127.0.0.1 signed by `ca`, with `ticketer`.
fn serving(ca: &Pair, ticketer: Arc<dyn rustls::server::ProducesTickets>) -> Arc<rustls::ServerConfig> {
    let now = time::OffsetDateTime::now_utc();
    let leaf = issue_serving(ca, &["127.0.0.1".to_owned()], now, time::Duration::days(1)).unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes()).collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    tls.ticketer = ticketer;
    tls.send_tls13_tickets = 1;
    Arc::new(tls)
}

fn ticketer() -> Arc<dyn rustls::server::ProducesTickets> {
    rustls::crypto::ring::Ticketer::new().unwrap()
}

/// An API server answering `/version`, counting its handshakes by kind; its TLS configuration
/// may be replaced between connections.
struct Server {
    addr: std::net::SocketAddr,
    tls: Arc<Mutex<Arc<rustls::ServerConfig>>>,
    full: Arc<AtomicUsize>,
    resumed: Arc<AtomicUsize>,
    /// Each handshake in turn: whether it resumed a session.
    kinds: Arc<Mutex<Vec<bool>>>,
}

async fn server(tls: Arc<rustls::ServerConfig>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tls = Arc::new(Mutex::new(tls));
    let (full, resumed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let kinds: Arc<Mutex<Vec<bool>>> = Arc::default();
    let (config, f, r, k) = (tls.clone(), full.clone(), resumed.clone(), kinds.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = tokio_rustls::TlsAcceptor::from(config.lock().unwrap().clone());
            let (f, r, k) = (f.clone(), r.clone(), k.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let was_resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                if was_resumed { &r } else { &f }.fetch_add(1, Ordering::SeqCst);
                k.lock().unwrap().push(was_resumed);
                let service = hyper::service::service_fn(|_req: hyper::Request<hyper::body::Incoming>| async {
                    let body = r#"{"major":"1","minor":"36","gitVersion":"v1.36.2","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"}"#;
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(body))))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    Server { addr, tls, full, resumed, kinds }
}

fn access(addr: std::net::SocketAddr, token: &str, ca_pem: &str) -> RemoteAccess {
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: https://{addr}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: u\ncurrent-context: remote\n"
    );
    RemoteAccess { kubeconfig, api_url: None, ca_pem: Some(ca_pem.to_owned()) }
}

/// [`access`] with `identity` and a suffix making the access start counting at 0 toward its
/// first full handshake made on purpose ([`first_count`]): the tests know when it comes.
fn counted_from_zero(addr: std::net::SocketAddr, identity: &str, ca_pem: &str) -> RemoteAccess {
    (0..)
        .map(|n| access(addr, &format!("{identity}-{n}"), ca_pem))
        .find(|a| first_count(&key_of(&a.kubeconfig, a.api_url.as_deref(), a.ca_pem.as_deref())) == 0)
        .unwrap()
}

/// One health check: a client made for it, one call, the client dropped.
async fn check(network: &Network, access: &RemoteAccess) -> Result<(), String> {
    let client = network.api_client(access).await.map_err(|e| e.to_string())?;
    client.apiserver_version().await.map(|_| ()).map_err(|e| format!("{e:?}"))
}

fn ca(name: &str) -> Pair {
    new_ca(name, time::OffsetDateTime::now_utc(), time::Duration::days(1)).unwrap()
}

fn counts(s: &Server) -> (usize, usize) {
    (s.full.load(Ordering::SeqCst), s.resumed.load(Ordering::SeqCst))
}

#[tokio::test]
async fn checks_resume_the_session_with_a_full_handshake_every_so_often() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let peer_ca = ca("peer-ca");
    let s = server(serving(&peer_ca, ticketer())).await;
    let network = Network::new(Verify::Nothing, Duration::from_secs(10));
    let ours = counted_from_zero(s.addr, "our-identity", &peer_ca.cert_pem);
    let checks = FULL_HANDSHAKE_EVERY as usize * 3;
    for _ in 0..checks {
        check(&network, &ours).await.unwrap();
    }
    // The first in full, then one in FULL_HANDSHAKE_EVERY (the access counts from 0), as the
    // server saw them and as we counted them.
    let kinds = s.kinds.lock().unwrap().clone();
    let every = FULL_HANDSHAKE_EVERY as usize;
    let expected: Vec<bool> = (0..checks).map(|i| i % every != 0).collect();
    assert_eq!(kinds, expected, "full at 0, {every}, {}", 2 * every);
    assert_eq!(counts(&s), (3, checks - 3));
    assert_eq!(network.sessions.handshakes("full"), 3);
    assert_eq!(network.sessions.handshakes("resumed"), checks as u64 - 3);
    assert_eq!(network.sessions.len(), 1, "one access kept");
}

#[tokio::test]
async fn a_session_is_never_resumed_under_another_pinned_ca_or_identity() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (peer_ca, other_ca) = (ca("peer-ca"), ca("other-ca"));
    let s = server(serving(&peer_ca, ticketer())).await;
    let network = Network::new(Verify::Nothing, Duration::from_secs(10));
    let ours = counted_from_zero(s.addr, "our-identity", &peer_ca.cert_pem);
    check(&network, &ours).await.unwrap();
    check(&network, &ours).await.unwrap();
    assert_eq!(counts(&s), (1, 1));
    // A new identity: a session of its own, from a full handshake.
    check(&network, &access(s.addr, "our-next-identity", &peer_ca.cert_pem)).await.unwrap();
    assert_eq!(counts(&s), (2, 1), "the new identity shook hands in full");
    // Another pinned CA (with the peer's CA in the same bundle): full, so the certificate is
    // verified under it.
    let both = format!("{}{}", other_ca.cert_pem, peer_ca.cert_pem);
    check(&network, &RemoteAccess { ca_pem: Some(both), ..ours.clone() }).await.unwrap();
    assert_eq!(counts(&s), (3, 1), "the new pin shook hands in full");
    // A pin the server's certificate does not meet fails, though a session of the same server
    // and identity is at hand.
    let refused = check(&network, &RemoteAccess { ca_pem: Some(other_ca.cert_pem.clone()), ..ours }).await.unwrap_err();
    assert!(refused.to_lowercase().contains("certificate"), "{refused}");
    assert_eq!(counts(&s).1, 1, "nothing resumed");
}

#[tokio::test]
async fn a_certificate_replaced_in_place_is_seen_at_the_next_full_handshake() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (peer_ca, new_peer_ca) = (ca("peer-ca"), ca("new-peer-ca"));
    let keys = ticketer();
    let s = server(serving(&peer_ca, keys.clone())).await;
    let network = Network::new(Verify::Nothing, Duration::from_secs(10));
    let ours = counted_from_zero(s.addr, "our-identity", &peer_ca.cert_pem);
    check(&network, &ours).await.unwrap();
    // Replaced in place: the same ticket keys, as an API server that reloads its certificate.
    *s.tls.lock().unwrap() = serving(&new_peer_ca, keys);
    let mut passed = 0;
    let refused = loop {
        match check(&network, &ours).await {
            Ok(()) => passed += 1,
            Err(e) => break e,
        }
        assert!(passed < FULL_HANDSHAKE_EVERY as usize, "a full handshake within {FULL_HANDSHAKE_EVERY} connections");
    };
    assert!(refused.to_lowercase().contains("certificate"), "{refused}");
    assert_eq!(passed, FULL_HANDSHAKE_EVERY as usize - 1, "resumed until the full handshake was due");
}

#[tokio::test]
async fn a_certificate_replaced_with_a_restart_is_seen_at_once() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (peer_ca, new_peer_ca) = (ca("peer-ca"), ca("new-peer-ca"));
    let s = server(serving(&peer_ca, ticketer())).await;
    let network = Network::new(Verify::Nothing, Duration::from_secs(10));
    let ours = counted_from_zero(s.addr, "our-identity", &peer_ca.cert_pem);
    check(&network, &ours).await.unwrap();
    check(&network, &ours).await.unwrap();
    assert_eq!(counts(&s), (1, 1), "resumed before the restart");
    // Restarted with a new certificate: new ticket keys, the ticket we hold is refused.
    *s.tls.lock().unwrap() = serving(&new_peer_ca, ticketer());
    let refused = check(&network, &ours).await.unwrap_err();
    assert!(refused.to_lowercase().contains("certificate"), "{refused}");
}

/// How a server saw each of `checks` checks: whether it resumed a session, and how it ended
/// (`Ok(())` for TLS's close_notify, the read's error otherwise: closed without it).
async fn endings(checks: usize) -> Vec<(bool, Result<(), std::io::ErrorKind>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let peer_ca = ca("peer-ca");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(serving(&peer_ca, ticketer()));
    let serving = tokio::spawn(async move {
        let mut ends = Vec::new();
        for _ in 0..checks {
            let (stream, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(stream).await.unwrap();
            let resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            let mut asked = Vec::new();
            while !asked.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                tls.read_exact(&mut byte).await.unwrap();
                asked.push(byte[0]);
            }
            let body = r#"{"major":"1","minor":"36","gitVersion":"v1.36.2","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"}"#;
            let answer = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
            tls.write_all(answer.as_bytes()).await.unwrap();
            let mut rest = Vec::new();
            ends.push((resumed, tls.read_to_end(&mut rest).await.map(drop).map_err(|e| e.kind())));
        }
        ends
    });
    let network = Network::new(Verify::Nothing, Duration::from_secs(10));
    let ours = counted_from_zero(addr, "our-identity", &peer_ca.cert_pem);
    for _ in 0..checks {
        check(&network, &ours).await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(30), serving).await.expect("every connection ended").unwrap()
}

#[tokio::test]
async fn a_check_ends_its_connection_without_a_tls_alert_and_still_resumes() {
    let eof = Err(std::io::ErrorKind::UnexpectedEof);
    assert_eq!(endings(3).await, vec![(false, eof), (true, eof), (true, eof)], "each closed without close_notify; the later ones resumed");
}

/// A server that takes connections and resets them at once.
async fn resetting() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((taken, _)) = listener.accept().await {
            #[allow(deprecated)]
            let _ = taken.set_linger(Some(Duration::ZERO));
        }
    });
    addr
}

#[tokio::test]
async fn a_peer_that_closes_before_a_word_is_told_in_the_same_words_either_way() {
    use liqo_reconciler::machinery::connect_first::{Connector, Gate};
    use liqo_reconciler::machinery::error::{CLOSED_BEFORE_A_WORD, Error, Step};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let addr = resetting().await;
    // Connected first: watched for the close (long enough not to race the resetting task), told
    // without a ClientHello.
    let (gate, _permit) =
        Connector::new(1, Duration::from_secs(5)).watching(Duration::from_secs(30)).connect(&format!("https://{addr}")).await;
    let Gate::Silent(silent) = gate else { panic!("told closed: {gate:?}") };
    assert!(silent.closed);
    // In its turn, through the client: the same words.
    let peer_ca = ca("peer-ca");
    let network = Network::new(Verify::Nothing, Duration::from_secs(10));
    let client = network.api_client(&access(addr, "our-identity", &peer_ca.cert_pem)).await.unwrap();
    let failed = client.apiserver_version().await.unwrap_err();
    let told = Error::remote_api(Step::ApiServer, failed);
    assert_eq!(told.to_string(), Error::unreachable(Step::ApiServer, silent.message()).to_string());
    assert!(told.to_string().contains(CLOSED_BEFORE_A_WORD), "{told}");
}
