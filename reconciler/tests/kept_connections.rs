//! Health checks over a kept connection, over real TLS on loopback against a server that keeps
//! HTTP/1.1 connections open and issues tickets as kube-apiserver does: one connection and one
//! full handshake for every `RETIRE_AFTER` checks; a connection the peer closed is made again; a
//! peer that says nothing on it is silent within the wait; a connection is used only for the
//! access it was made for.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use liqo_certs::issue::{Pair, issue_serving, new_ca};
use liqo_reconciler::remote::auth::client::Verify;
use liqo_reconciler::remote::kept::{Outcome, RETIRE_AFTER};
use liqo_reconciler::remote::peer::{Network, Peers, RemoteAccess};
use liqo_reconciler::remote::sessions::{first_count, key_of};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

const VERSION: &str = r#"{"major":"1","minor":"36","gitVersion":"v1.36.2"}"#;

fn serving(ca: &Pair) -> Arc<rustls::ServerConfig> {
    let now = time::OffsetDateTime::now_utc();
    let leaf = issue_serving(ca, &["127.0.0.1".to_owned()], now, time::Duration::days(1)).unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes()).collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    tls.ticketer = rustls::crypto::ring::Ticketer::new().unwrap();
    tls.send_tls13_tickets = 1;
    Arc::new(tls)
}

/// An API server answering `/version` on connections it keeps open, counting connections,
/// handshakes by kind and requests; it can close every open connection, or stop answering.
struct Server {
    addr: std::net::SocketAddr,
    connections: Arc<AtomicUsize>,
    /// Each handshake in turn: whether it resumed a session.
    kinds: Arc<Mutex<Vec<bool>>>,
    requests: Arc<AtomicUsize>,
    silent: Arc<AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
}

async fn server(tls: Arc<rustls::ServerConfig>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (connections, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let kinds: Arc<Mutex<Vec<bool>>> = Arc::default();
    let silent = Arc::new(AtomicBool::new(false));
    let cut = tokio::sync::watch::channel(0).0;
    let (c, k, r, s, cuts) = (connections.clone(), kinds.clone(), requests.clone(), silent.clone(), cut.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
            let (k, r, s, mut cut) = (k.clone(), r.clone(), s.clone(), cuts.subscribe());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                k.lock().unwrap().push(tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed));
                let service = hyper::service::service_fn(move |_req: hyper::Request<hyper::body::Incoming>| {
                    let (r, s) = (r.clone(), s.clone());
                    async move {
                        r.fetch_add(1, Ordering::SeqCst);
                        if s.load(Ordering::SeqCst) {
                            std::future::pending::<()>().await;
                        }
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(VERSION))))
                    }
                });
                let serving = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service);
                tokio::select! {
                    _ = serving => {}
                    _ = cut.changed() => {}
                }
            });
        }
    });
    Server { addr, connections, kinds, requests, silent, cut }
}

/// An access with `identity` whose first full handshake made on purpose comes at once.
fn access(addr: std::net::SocketAddr, identity: &str, ca_pem: &str) -> RemoteAccess {
    (0..)
        .map(|n| {
            let kubeconfig = format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: r\n  cluster:\n    server: https://{addr}\nusers:\n- name: u\n  user:\n    token: {identity}-{n}\ncontexts:\n- name: r\n  context:\n    cluster: r\n    user: u\ncurrent-context: r\n"
            );
            RemoteAccess { kubeconfig, api_url: None, ca_pem: Some(ca_pem.to_owned()) }
        })
        .find(|a| first_count(&key_of(&a.kubeconfig, a.api_url.as_deref(), a.ca_pem.as_deref())) == 0)
        .unwrap()
}

fn ca(name: &str) -> Pair {
    new_ca(name, time::OffsetDateTime::now_utc(), time::Duration::days(1)).unwrap()
}

const WAIT: Duration = Duration::from_secs(5);

/// One health check as a reconcile makes it: over the kept connection when there is one, else
/// over a new one. Returns the answer's status, and whether it went over a kept connection.
async fn check(network: &Network, name: &str, access: &RemoteAccess) -> (u16, bool) {
    match network.check_kept(name, access, WAIT).await {
        Outcome::Answered { answer, path, key } => {
            assert_eq!(path, "/version");
            assert_eq!(
                key,
                liqo_reconciler::remote::sessions::key_of(&access.kubeconfig, access.api_url.as_deref(), access.ca_pem.as_deref()),
                "for this access"
            );
            (answer.status, true)
        }
        Outcome::NotKept | Outcome::Broken(_) => {
            let (answer, client) = network.health_check(name, access, "/version", None).await.expect("answered");
            assert!(client.is_none(), "no client made for a token and a pinned CA");
            (answer.status, false)
        }
        Outcome::Silent(waited) => panic!("silent after {waited:?}"),
    }
}

/// A peer's server, a network with nothing kept, and our access to the peer.
async fn one_peer() -> (Server, Network, RemoteAccess) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let peer_ca = ca("peer-ca");
    let s = server(serving(&peer_ca)).await;
    let ours = access(s.addr, "our-identity", &peer_ca.cert_pem);
    (s, Network::new(Verify::Nothing, Duration::from_secs(10)), ours)
}

#[tokio::test]
async fn checks_go_over_one_connection_with_a_full_handshake_every_so_many() {
    let (s, network, ours) = one_peer().await;
    let checks = RETIRE_AFTER as usize * 3;
    let mut over_kept = 0;
    for _ in 0..checks {
        let (status, kept) = check(&network, "to-peer", &ours).await;
        assert_eq!(status, 200);
        over_kept += usize::from(kept);
    }
    assert_eq!(s.requests.load(Ordering::SeqCst), checks, "every check asked");
    assert_eq!(s.connections.load(Ordering::SeqCst), 3, "one connection every {RETIRE_AFTER} checks");
    assert_eq!(over_kept, checks - 3);
    assert_eq!(*s.kinds.lock().unwrap(), vec![false; 3], "each new connection a full handshake");
    assert_eq!((network.sessions.handshakes("full"), network.sessions.handshakes("resumed")), (3, 0));
    assert_eq!(network.kept.len(), 1);
}

#[tokio::test]
async fn a_connection_the_peer_closed_is_made_again_and_a_silent_one_is_told_within_the_wait() {
    let (s, network, ours) = one_peer().await;
    assert_eq!(check(&network, "to-peer", &ours).await, (200, false));
    assert_eq!(check(&network, "to-peer", &ours).await, (200, true));

    // Closed by the peer (an idle timeout, a restart): told broken, made again at once.
    s.cut.send_modify(|n| *n += 1);
    let outcome = tokio::time::timeout(WAIT * 2, async {
        loop {
            // The close reaches us when it reaches us: until then the connection answers.
            match network.check_kept("to-peer", &ours, WAIT).await {
                Outcome::Answered { .. } => tokio::task::yield_now().await,
                other => break other,
            }
        }
    })
    .await
    .expect("the close is seen");
    assert!(matches!(outcome, Outcome::Broken(_)), "{outcome:?}");
    assert_eq!(check(&network, "to-peer", &ours).await, (200, false), "a new connection");
    assert_eq!(check(&network, "to-peer", &ours).await, (200, true), "kept again");

    // A peer that takes the request and says nothing (packets dropped on an open connection).
    s.silent.store(true, Ordering::SeqCst);
    let wait = Duration::from_millis(300);
    let outcome = network.check_kept("to-peer", &ours, wait).await;
    assert!(matches!(outcome, Outcome::Silent(waited) if waited >= wait && waited < WAIT), "{outcome:?}");
    assert!(network.kept.is_empty(), "a silent connection is not kept");
    assert!(matches!(network.check_kept("to-peer", &ours, wait).await, Outcome::NotKept));
}

#[tokio::test]
async fn a_kept_connection_serves_only_the_access_it_was_made_for() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (peer_ca, other_ca) = (ca("peer-ca"), ca("other-ca"));
    let s = server(serving(&peer_ca)).await;
    let network = Network::new(Verify::Nothing, Duration::from_secs(10));
    let ours = access(s.addr, "our-identity", &peer_ca.cert_pem);
    assert_eq!(check(&network, "to-peer", &ours).await, (200, false));
    for other in [access(s.addr, "a-new-identity", &peer_ca.cert_pem), access(s.addr, "our-identity", &other_ca.cert_pem)] {
        assert!(matches!(network.check_kept("to-peer", &other, WAIT).await, Outcome::NotKept));
        assert!(network.kept.is_empty(), "closed, not kept for the old access");
        assert_eq!(check(&network, "to-peer", &ours).await, (200, false), "made again for ours");
    }
    // Another CA than the peer's: the new connection's handshake refuses it, and nothing is kept.
    let refused = network.health_check("to-peer", &access(s.addr, "our-identity", &other_ca.cert_pem), "/version", None).await;
    let Err(e) = refused else { panic!("a certificate not of the pinned CA answered") };
    assert!(e.to_string().contains("TLS with"), "{e}");
    network.forget_kept("to-peer");
    assert!(network.kept.is_empty());
}

/// The first check over a connection just made first is made at once, within the wait, before
/// the reconcile's turn: answered (and its connection kept for the next check), silent when the
/// peer took the connection and says nothing (a black hole opened after the connect), closed
/// when it hangs up before a word, failed for another CA (the turn's check then says why).
#[tokio::test]
async fn the_first_check_over_a_connection_made_first_is_made_before_the_turn() {
    use liqo_reconciler::remote::kept::FirstCheck;
    let (s, network, ours) = one_peer().await;
    let stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let FirstCheck::Answered { answer, key } = network.check_first("to-peer", &ours, "/version", stream, WAIT).await else {
        panic!("not answered")
    };
    assert_eq!((answer.status, answer.body.as_slice()), (200, VERSION.as_bytes()));
    assert_eq!(key, key_of(&ours.kubeconfig, ours.api_url.as_deref(), ours.ca_pem.as_deref()));
    assert_eq!(check(&network, "to-peer", &ours).await, (200, true), "its connection kept for the next check");
    assert_eq!(s.connections.load(Ordering::SeqCst), 1);

    // Takes connections and says nothing on them (no TLS handshake): silent within the wait.
    let hole = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let quiet = access(hole.local_addr().unwrap(), "our-identity", &ours.ca_pem.clone().unwrap());
    let stream = tokio::net::TcpStream::connect(hole.local_addr().unwrap()).await.unwrap();
    let (_held, _) = hole.accept().await.unwrap();
    let wait = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let outcome = network.check_first("to-quiet", &quiet, "/version", stream, wait).await;
    assert!(matches!(outcome, FirstCheck::Silent), "{outcome:?}");
    assert!(started.elapsed() >= wait && started.elapsed() < WAIT, "within the wait: {:?}", started.elapsed());

    // Hangs up before a word.
    let stream = tokio::net::TcpStream::connect(hole.local_addr().unwrap()).await.unwrap();
    drop(hole.accept().await.unwrap());
    let outcome = network.check_first("to-quiet", &quiet, "/version", stream, WAIT).await;
    assert!(matches!(outcome, FirstCheck::Closed), "{outcome:?}");

    // Another CA than the one pinned: failed, nothing kept for it.
    let other = access(s.addr, "our-identity", &ca("other-ca").cert_pem);
    let stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let outcome = network.check_first("to-other", &other, "/version", stream, WAIT).await;
    assert!(matches!(outcome, FirstCheck::Failed), "{outcome:?}");
    assert_eq!(network.kept.len(), 1, "only the answered check's connection kept");
}

#[tokio::test]
async fn a_ticket_another_call_brings_while_a_connection_is_kept_is_let_go_at_the_next_check() {
    let (s, network, ours) = one_peer().await;
    let key = key_of(&ours.kubeconfig, ours.api_url.as_deref(), ours.ca_pem.as_deref());
    assert_eq!(check(&network, "to-peer", &ours).await, (200, false));
    assert!(!network.sessions.holds_ticket(&key), "let go once its connection was kept");

    // A call of another kind (a join's, through a client) on a connection of its own: the peer
    // gives it a ticket, which the access's store takes.
    let client = network.api_client(&ours).await.unwrap();
    client.apiserver_version().await.unwrap();
    drop(client);
    assert_eq!(s.connections.load(Ordering::SeqCst), 2);
    assert!(network.sessions.holds_ticket(&key), "the call's ticket");

    // The next check goes over the kept connection and lets that ticket go: no access holds
    // a ticket while it holds a connection.
    assert_eq!(check(&network, "to-peer", &ours).await, (200, true));
    assert!(!network.sessions.holds_ticket(&key));
}
