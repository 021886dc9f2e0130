//! The fleet's listeners: every connection is handed to the peer it was made to (by its
//! listener, or by the address it was made to), shaken hands with that peer's certificate,
//! and served one HTTP/1.1 request at a time; what was asked is counted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use crate::advertiser::{Advertiser, HubAccess};
use crate::answer::{Asked, Kind, Then, answer};
use crate::peer::{Mode, Peer, address};

/// Largest request body a peer reads.
const MAX_BODY: usize = 1 << 20;

/// What the fleet was asked, over all peers.
#[derive(Default, Debug)]
pub struct Counts {
    /// Connections taken (reset at once while a peer is down included).
    pub connections: AtomicU64,
    /// Connections reset because their peer was down.
    pub reset: AtomicU64,
    /// TLS handshakes completed.
    pub handshakes: AtomicU64,
    /// Requests to auth services (`/identity` included).
    pub auth: AtomicU64,
    /// Of those, identities asked (`/identity`).
    pub identities: AtomicU64,
    /// Reads (GET, LIST) and writes (apply, delete) to the peers' API servers; watches.
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub watches: AtomicU64,
    /// Requests of the peers' broadcasters to the hub: reads, writes, and the LIST and watch
    /// that open each of their watches.
    pub hub_reads: AtomicU64,
    pub hub_writes: AtomicU64,
    pub hub_lists: AtomicU64,
    pub hub_watches: AtomicU64,
}

/// A reading of [`Counts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub connections: u64,
    pub reset: u64,
    pub handshakes: u64,
    pub auth: u64,
    pub identities: u64,
    pub reads: u64,
    pub writes: u64,
    pub watches: u64,
    pub hub_reads: u64,
    pub hub_writes: u64,
    pub hub_lists: u64,
    pub hub_watches: u64,
}

impl Counts {
    pub fn snapshot(&self) -> Snapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Snapshot {
            connections: r(&self.connections),
            reset: r(&self.reset),
            handshakes: r(&self.handshakes),
            auth: r(&self.auth),
            identities: r(&self.identities),
            reads: r(&self.reads),
            writes: r(&self.writes),
            watches: r(&self.watches),
            hub_reads: r(&self.hub_reads),
            hub_writes: r(&self.hub_writes),
            hub_lists: r(&self.hub_lists),
            hub_watches: r(&self.hub_watches),
        }
    }
}

impl std::ops::Sub for Snapshot {
    type Output = Snapshot;
    fn sub(self, o: Snapshot) -> Snapshot {
        Snapshot {
            connections: self.connections - o.connections,
            reset: self.reset - o.reset,
            handshakes: self.handshakes - o.handshakes,
            auth: self.auth - o.auth,
            identities: self.identities - o.identities,
            reads: self.reads - o.reads,
            writes: self.writes - o.writes,
            watches: self.watches - o.watches,
            hub_reads: self.hub_reads - o.hub_reads,
            hub_writes: self.hub_writes - o.hub_writes,
            hub_lists: self.hub_lists - o.hub_lists,
            hub_watches: self.hub_watches - o.hub_watches,
        }
    }
}

impl Snapshot {
    /// Every request a peer received (auth service and API server).
    pub fn requests(&self) -> u64 {
        self.auth + self.reads + self.writes + self.watches
    }
}

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
    pub advertiser: Arc<Advertiser>,
}

impl Fleet {
    /// Makes `n` peers (their CAs and certificates), starts serving them and acting as their
    /// broadcasters toward `hub`.
    pub async fn start(n: usize, endpoints: Endpoints, hub: HubAccess) -> anyhow::Result<Arc<Self>> {
        let counts = Arc::new(Counts::default());
        let advertiser = Arc::new(Advertiser::new(hub, counts.clone())?);
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
        let fleet = Arc::new(Self { peers, endpoints, counts, advertiser });
        match endpoints {
            Endpoints::Ports => {
                for (i, (_, l)) in listeners.into_iter().enumerate() {
                    tokio::spawn(fleet.clone().accept(l, Some(i)));
                }
            }
            Endpoints::Addresses { port } => {
                let l = TcpListener::bind(("0.0.0.0", port)).await?;
                tokio::spawn(fleet.clone().accept(l, None));
            }
        }
        Ok(fleet)
    }

    /// Sets the mode of the peers in `range`.
    pub fn set_mode(&self, range: std::ops::Range<usize>, mode: Mode) {
        for p in &self.peers[range] {
            p.set_mode(mode);
        }
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
            tokio::spawn(self.clone().serve(peer, stream));
        }
    }

    async fn serve(self: Arc<Self>, peer: Arc<Peer>, stream: TcpStream) {
        let mut cut = peer.cuts();
        let acceptor = tokio_rustls::TlsAcceptor::from(peer.certs().tls.clone());
        let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await else { return };
        self.counts.handshakes.fetch_add(1, Ordering::Relaxed);
        let fleet = self.clone();
        let service = hyper::service::service_fn(move |req| fleet.clone().handle(peer.clone(), req));
        let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service);
        tokio::select! {
            _ = conn => {}
            _ = cut.changed() => {}
        }
    }

    async fn handle(self: Arc<Self>, peer: Arc<Peer>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::io::Error> {
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
        if let Kind::Watch(seconds) = answer.kind {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
        }
        match answer.then {
            Then::Nothing => {}
            Then::Offered(requester) => self.advertiser.offered(peer.clone(), requester),
            Then::Withdrawn(requester) => self.advertiser.withdrawn(&peer, &requester),
        }
        let response = Response::builder()
            .status(answer.status)
            .header(http::header::CONTENT_TYPE, answer.content_type)
            .body(Full::new(Bytes::from(answer.body)))
            .map_err(std::io::Error::other)?;
        Ok(response)
    }
}
