//! One simulated peer: its identity, its certificates, how it behaves now, and the objects a
//! hub stored in it.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use liqo_certs::issue::{Pair, issue_serving, new_ca};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;
use tokio::sync::watch;

/// The Liqo namespace of every simulated peer (its `/ids` guestNamespace).
pub const NAMESPACE: &str = "liqo";

/// How a peer behaves, set on command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Issues identities and accepts PeeringRequests.
    Accepting,
    /// Issues identities but refuses PeeringRequests (403, as an admission webhook's denial).
    Refusing,
    /// Accepts, answering every request after this long.
    Slow(Duration),
    /// Takes connections and resets them at once; open ones are dropped. Its broadcasters
    /// still write to the hub: an outage one way (its API server down, or a link that fails
    /// one way).
    Down,
    /// Down, and its broadcasters reach nothing either: the whole cluster off, or cut off from
    /// the network.
    Off,
    /// Down for this long, then up for as long, and so on (from when the mode was set).
    Flapping(Duration),
}

/// A peer's CA (for its auth service and its API server alike) and the TLS configuration of
/// the serving certificate it signed.
pub struct Certs {
    pub ca: Pair,
    pub tls: Arc<rustls::ServerConfig>,
}

impl Certs {
    /// A new CA and a serving certificate for `addr`'s IP, signed by it.
    pub fn new(name: &str, addr: SocketAddr) -> anyhow::Result<Self> {
        let now = time::OffsetDateTime::now_utc();
        let ca = new_ca(&format!("{name}-ca"), now, time::Duration::days(30))?;
        let leaf = issue_serving(&ca, &[addr.ip().to_string()], now, time::Duration::days(30))?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
            .chain(CertificateDer::pem_slice_iter(ca.cert_pem.as_bytes()))
            .collect::<Result<_, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes())?;
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(liqo_testenv::https::as_go_chooses()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        tls.ignore_client_order = true;
        // Sessions resumed as kube-apiserver (Go's crypto/tls) resumes them: stateless TLS 1.3
        // tickets under keys of this server's own, one ticket after each handshake. A new
        // certificate comes with new keys (an API server restarted with it): no session made
        // before it resumes.
        tls.ticketer = rustls::crypto::ring::Ticketer::new()?;
        tls.send_tls13_tickets = 1;
        Ok(Self { ca, tls: Arc::new(tls) })
    }
}

/// What a hub stored in a peer: PeeringRequests by name, Secrets by `namespace/name` (each as
/// the API server returns it), and the tokens issued by `/identity` with the cluster ID each
/// was issued to.
#[derive(Default)]
pub struct Objects {
    pub requests: BTreeMap<String, Value>,
    pub secrets: BTreeMap<String, Value>,
    pub tokens: HashMap<String, String>,
    next_version: u64,
}

impl Objects {
    /// A new resourceVersion.
    pub fn version(&mut self) -> String {
        self.next_version += 1;
        self.next_version.to_string()
    }
}

/// One simulated peer.
pub struct Peer {
    pub index: usize,
    pub id: String,
    pub name: String,
    pub addr: SocketAddr,
    certs: Mutex<Arc<Certs>>,
    mode: Mutex<(Mode, Instant)>,
    pub objects: Mutex<Objects>,
    /// Reads of its Kubernetes API answered (a health check is one).
    pub reads: std::sync::atomic::AtomicU64,
    /// Bumped when open connections must go (down, a new certificate).
    cut: watch::Sender<u64>,
    /// Identities renewed (`/identity` with a current token it issued), and when last.
    pub renewals: std::sync::atomic::AtomicU64,
    pub renewed_at: Mutex<Option<Instant>>,
}

/// How long the identities a simulated peer issues last: the shipped `--token-lifetime-hours`.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(168 * 3600);

impl Peer {
    pub fn new(index: usize, addr: SocketAddr) -> anyhow::Result<Self> {
        let name = format!("fleet-{index:05}");
        let certs = Certs::new(&name, addr)?;
        Ok(Self {
            index,
            id: cluster_id(index),
            name,
            addr,
            certs: Mutex::new(Arc::new(certs)),
            mode: Mutex::new((Mode::Accepting, Instant::now())),
            objects: Mutex::default(),
            reads: Default::default(),
            cut: watch::channel(0).0,
            renewals: Default::default(),
            renewed_at: Mutex::default(),
        })
    }

    /// How long the identities it issues last (its `/ids` tells it).
    pub fn token_lifetime(&self) -> Duration {
        TOKEN_LIFETIME
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn certs(&self) -> Arc<Certs> {
        self.certs.lock().expect("not poisoned").clone()
    }

    /// A new CA and certificate (open connections are dropped: the next handshake shows it).
    pub fn rotate_ca(&self) -> anyhow::Result<()> {
        let certs = Certs::new(&self.name, self.addr)?;
        *self.certs.lock().expect("not poisoned") = Arc::new(certs);
        self.cut.send_modify(|n| *n += 1);
        Ok(())
    }

    pub fn mode(&self) -> Mode {
        self.mode.lock().expect("not poisoned").0
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().expect("not poisoned") = (mode, Instant::now());
        if !self.up() {
            self.cut.send_modify(|n| *n += 1);
        }
    }

    /// Whether the peer takes connections now.
    pub fn up(&self) -> bool {
        let (mode, since) = *self.mode.lock().expect("not poisoned");
        match mode {
            Mode::Down | Mode::Off => false,
            Mode::Flapping(half) => (since.elapsed().as_millis() / half.as_millis().max(1)) % 2 == 1,
            _ => true,
        }
    }

    /// Changes whenever open connections must be dropped.
    pub fn cuts(&self) -> watch::Receiver<u64> {
        self.cut.subscribe()
    }
}

/// The cluster ID of peer `index` (a UUID, as a real cluster's).
pub fn cluster_id(index: usize) -> String {
    format!("f1ee7000-0000-4000-8000-{index:012x}")
}

/// Where peer `index` listens: its own loopback address (in a network namespace of the
/// fleet's own, where one listener takes them all), or 127.0.0.1 and a port of its own.
pub fn address(index: usize, port: u16, own_address: bool) -> SocketAddr {
    if own_address {
        let n = index + 1;
        SocketAddr::from(([127, 1, (n >> 8) as u8, (n & 0xff) as u8], port))
    } else {
        SocketAddr::from(([127, 0, 0, 1], port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_valid_and_distinct() {
        for i in [0, 1, 9_999, 65_535] {
            liqo_api::cluster_id::validate_cluster_id(&cluster_id(i)).unwrap();
        }
        assert_ne!(cluster_id(1), cluster_id(2));
    }

    #[test]
    fn addresses_are_distinct_and_never_end_in_zero() {
        let all: std::collections::HashSet<_> = (0..10_000).map(|i| address(i, 443, true)).collect();
        assert_eq!(all.len(), 10_000);
        assert!(all.iter().all(|a| a.ip().to_string().starts_with("127.1.")));
        assert_eq!(address(0, 443, true).to_string(), "127.1.0.1:443");
    }

    #[test]
    fn a_flapping_peer_is_down_first_then_up() {
        let p = Peer::new(0, address(0, 1, false)).unwrap();
        assert!(p.up());
        p.set_mode(Mode::Flapping(Duration::from_secs(3600)));
        assert!(!p.up(), "down for the first half period");
        p.set_mode(Mode::Down);
        assert!(!p.up());
        p.set_mode(Mode::Off);
        assert!(!p.up());
        p.set_mode(Mode::Slow(Duration::from_millis(1)));
        assert!(p.up());
    }
}
