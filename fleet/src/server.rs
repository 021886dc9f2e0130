//! The fleet's listeners: every connection is handed to the peer it was made to (by its
//! listener, or by the address it was made to), shaken hands with that peer's certificate,
//! and served one HTTP/1.1 request at a time; what was asked is counted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use crate::advertiser::{Advertising, Broadcasters, HubAccess};
use crate::answer::{Asked, Kind, Then, answer};
pub use crate::counts::{Counts, Snapshot};
use crate::peer::{Mode, Peer, address};

/// Largest request body a peer reads.
const MAX_BODY: usize = 1 << 20;

/// How peers are told apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoints {
    /// 127.0.0.1, a port each (a listener each): anywhere, for small fleets.
    Ports,
    /// 127.1.x.y, an address each, all on one listener on `port` of every address: only in a
    /// network namespace of the fleet's own (the listener takes the whole of that namespace).
    Addresses { port: u16 },
}

/// N simulated peers, serving.
pub struct Fleet {
    pub peers: Vec<Arc<Peer>>,
    pub endpoints: Endpoints,
    pub counts: Arc<Counts>,
    pub advertiser: Advertising,
}

impl Fleet {
    /// Makes `n` peers (their CAs and certificates), starts serving them and acting as their
    /// broadcasters toward `hub` (where `broadcasters` says).
    pub async fn start(n: usize, endpoints: Endpoints, hub: HubAccess, broadcasters: &Broadcasters) -> anyhow::Result<Arc<Self>> {
        let counts = Arc::new(Counts::default());
        let mut listeners = Vec::new();
        let addresses: Vec<SocketAddr> = match endpoints {
            Endpoints::Ports => {
                for _ in 0..n {
                    let l = TcpListener::bind("127.0.0.1:0").await?;
                    listeners.push((l.local_addr()?, l));
                }
                listeners.iter().map(|(a, _)| *a).collect()
            }
            Endpoints::Addresses { port } => (0..n).map(|i| address(i, port, true)).collect(),
        };
        let peers = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<Arc<Peer>>> {
            addresses.iter().enumerate().map(|(i, a)| Ok(Arc::new(Peer::new(i, *a)?))).collect()
        })
        .await??;
        let advertiser = Advertising::start(broadcasters, hub, &peers, counts.clone())?;
        let fleet = Arc::new(Self { peers, endpoints, counts, advertiser });
        match endpoints {
            Endpoints::Ports => {
                for (i, (_, l)) in listeners.into_iter().enumerate() {
                    tokio::spawn(fleet.clone().accept(l, Some(i)));
                }
            }
            Endpoints::Addresses { port } => {
                let l = shared_listener(port)?;
                tokio::spawn(fleet.clone().accept(l, None));
            }
        }
        Ok(fleet)
    }

    /// Sets the mode of the peers in `range`.
    pub fn set_mode(&self, range: std::ops::Range<usize>, mode: Mode) {
        for p in &self.peers[range.clone()] {
            p.set_mode(mode);
        }
        self.advertiser.off_changed(range, mode == Mode::Off);
    }

    async fn accept(self: Arc<Self>, listener: TcpListener, only: Option<usize>) {
        let by_address: HashMap<SocketAddr, usize> =
            if only.is_some() { HashMap::new() } else { self.peers.iter().map(|p| (p.addr, p.index)).collect() };
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let index = only.or_else(|| stream.local_addr().ok().and_then(|a| by_address.get(&a).copied()));
            let Some(peer) = index.map(|i| self.peers[i].clone()) else { continue };
            self.counts.connections.fetch_add(1, Ordering::Relaxed);
            if !peer.up() {
                self.counts.reset.fetch_add(1, Ordering::Relaxed);
                // A zero linger resets the connection on drop, without blocking.
                #[allow(deprecated)]
                let _ = stream.set_linger(Some(Duration::ZERO));
                continue;
            }
            tokio::spawn(self.clone().serve(peer, stream, Instant::now()));
        }
    }

    /// Serves one connection, accepted at `accepted`. An answer's time counts from its request's
    /// arrival, and the first one's also the wait between the accept and this task's start: what
    /// this process took, not what the client waited before it spoke (a hub connects first and
    /// shakes hands only in its reconcile's turn, seconds later).
    async fn serve(self: Arc<Self>, peer: Arc<Peer>, stream: TcpStream, accepted: Instant) {
        let mut cut = peer.cuts();
        let first = Arc::new(std::sync::Mutex::new(Some(accepted.elapsed())));
        let acceptor = tokio_rustls::TlsAcceptor::from(peer.certs().tls.clone());
        let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await else { return };
        self.counts.handshakes.fetch_add(1, Ordering::Relaxed);
        if tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            self.counts.resumed.fetch_add(1, Ordering::Relaxed);
        }
        let fleet = self.clone();
        let last = Arc::new(std::sync::Mutex::new(Instant::now()));
        let heard = last.clone();
        let service = hyper::service::service_fn(move |req| {
            *heard.lock().expect("not poisoned") = Instant::now();
            let waited = first.lock().expect("not poisoned").take().unwrap_or_default();
            let since = Instant::now().checked_sub(waited).unwrap_or_else(Instant::now);
            fleet.clone().handle(peer.clone(), req, since)
        });
        let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service);
        tokio::select! {
            _ = conn => {}
            _ = cut.changed() => {}
            _ = idle_for(&last, IDLE_TIMEOUT) => {}
        }
    }

    async fn handle(
        self: Arc<Self>,
        peer: Arc<Peer>,
        req: Request<Incoming>,
        since: Instant,
    ) -> Result<Response<Full<Bytes>>, std::io::Error> {
        if !peer.up() {
            return Err(std::io::Error::other("down"));
        }
        if let Mode::Slow(delay) = peer.mode() {
            tokio::time::sleep(delay).await;
        }
        let (parts, body) = req.into_parts();
        let body = Limited::new(body, MAX_BODY).collect().await.map_err(|e| std::io::Error::other(e.to_string()))?.to_bytes();
        let header = |name: http::header::HeaderName| parts.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let bearer = header(http::header::AUTHORIZATION).strip_prefix("Bearer ");
        let asked = Asked {
            method: &parts.method,
            path: parts.uri.path(),
            query: parts.uri.query().unwrap_or_default(),
            content_type: header(http::header::CONTENT_TYPE),
            bearer,
            body: &body,
        };
        let answer = answer(&peer, &asked);
        let counter = match answer.kind {
            Kind::Auth => &self.counts.auth,
            Kind::Identity => {
                self.counts.identities.fetch_add(1, Ordering::Relaxed);
                &self.counts.auth
            }
            Kind::Read => &self.counts.reads,
            Kind::Write => &self.counts.writes,
            Kind::Watch(_) => &self.counts.watches,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if matches!(answer.kind, Kind::Read) {
            peer.reads.fetch_add(1, Ordering::Relaxed);
        }
        // A watch's time is until it starts; what it then waits is the watch.
        self.counts.latencies.observe(since.elapsed());
        if let Kind::Watch(seconds) = answer.kind {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
        }
        match answer.then {
            Then::Nothing => {}
            Then::Offered(requester) => self.advertiser.offered(&peer, requester),
            Then::Withdrawn(requester) => self.advertiser.withdrawn(&peer, &requester),
            Then::SecretDeleted(requester) => self.advertiser.credentials_changed(&peer, &requester),
        }
        let response = Response::builder()
            .status(answer.status)
            .header(http::header::CONTENT_TYPE, answer.content_type)
            .body(Full::new(Bytes::from(answer.body)))
            .map_err(std::io::Error::other)?;
        Ok(response)
    }
}

/// Connections one listener may hold before the fleet accepts them, for all the peers.
const SHARED_BACKLOG: u32 = 65_535;

/// The one listener of every peer's address (in the fleet's own network namespace): its accept
/// queue as long as the namespace allows, raised there first. Each real peer has an API server
/// of its own with a queue of its own (Go's listens with the kernel's `somaxconn`, 4,096 here);
/// 10,000 peers behind tokio's default of 1,024 dropped connections a real fleet would not,
/// and a dropped connection is a silent peer to the hub.
fn shared_listener(port: u16) -> anyhow::Result<TcpListener> {
    let _ = std::fs::write("/proc/sys/net/core/somaxconn", SHARED_BACKLOG.to_string());
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(std::net::SocketAddr::from(([0, 0, 0, 0], port)))?;
    Ok(socket.listen(SHARED_BACKLOG)?)
}

/// How long a connection with no request stays open: kube-apiserver's `IdleTimeout` (90 s, "matches
/// http.DefaultTransport keep-alive timeout", k8s.io/apiserver's secure serving).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Ends once no request has come for `idle` since the time in `last` (which each request sets).
async fn idle_for(last: &std::sync::Mutex<Instant>, idle: Duration) {
    loop {
        let until = *last.lock().expect("not poisoned") + idle;
        if Instant::now() >= until {
            return;
        }
        tokio::time::sleep_until(until.into()).await;
    }
}
