//! Connecting to a joined peer's API server before its reconcile takes a turn.
//!
//! A health check used to wait for its connection inside one of the reconciles' turns
//! (`--max-concurrent-reconciles`, 64): a peer that drops packets (a black hole: no answer, no
//! refusal) held a turn for the whole 10 s connect timeout, and 10,000 of them took 26 minutes
//! to be told. Now the connection is made first, many at a time ([`Connector`]: a socket each,
//! a few hundred bytes, where a check in its turn holds about 0.1 MiB), within
//! [`CONNECT_WAIT`]. What it finds is the reconcile's [`Gate`]:
//!
//! - connected: the health check is made over this very connection at once, here, outside the
//!   turns, within the same wait (its TLS handshake, its GET and the answer), and the connection
//!   kept for the next check ([`Gate::Answered`]): a peer that took the connection and then went
//!   silent (a black hole opened between the connect and the turn) holds no turn, where a
//!   handshake in the turn held one for the whole wait (up to 1,024 connections made first
//!   wait for their turns in a backlog). Where the check cannot keep its
//!   connection (a client certificate), the turn's check goes over it instead (no second one),
//!   unless it waited longer than [`FRESH_FOR`] for its turn (a server may close a connection
//!   that says nothing);
//! - silent: the reconcile reports the peer unreachable without calling it at all;
//! - closed by the peer before a word, found when the turn comes ([`Gate::settle`]): the same,
//!   reported as closed. A peer that accepts and resets at once (an API server behind a proxy
//!   or load balancer with nothing to forward to) is told without a TLS handshake, so the
//!   session ticket of the next check is not spent on a ClientHello nobody reads: rustls gives
//!   a ticket once, and a check that offers it to a dead connection makes the check after the
//!   peer's return a full handshake;
//! - refused, or anything else: the reconcile calls the peer as before and says what it met;
//! - answered over the connection kept from its last check ([`crate::remote::kept`]): the check
//!   itself is made here, outside the turns, and the reconcile reads its answer
//!   ([`Gate::Answered`]); a kept connection the peer closed is made again here, as above; one
//!   that says nothing within the wait is silent.
//!
//! Only a peer with everything stored (its CA and, on the auth way, our identity) is connected
//! to first: its round's only call is the health check. Joining peers go as before.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default `--connect-wait-seconds`: how long a peer's API server has to take a TCP
/// connection before the health check says it does not answer: three SYNs (Linux sends them at
/// 0, 1 and 3 s).
pub const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// How long a connection made first may wait for its reconcile's turn and still be used.
pub const FRESH_FOR: Duration = Duration::from_secs(5);

/// How many times a reconcile whose connection went stale while it waited for its turn gives
/// the turn back and connects first again, before it connects in its turn (within the check's
/// deadline). A peer that went silent meanwhile is then told without a turn spent waiting on it.
pub const STALE_RETRIES: u32 = 2;

/// How long a connection made first is watched for the peer's close before it waits for its
/// turn (outside the turns): a peer that takes connections and resets them (an API server down
/// behind a proxy or load balancer) is then told closed without a ClientHello, and its session
/// ticket is kept for its return (rustls gives a ticket once: offered to a connection nobody
/// reads, it is gone, and the first check after the return is a full handshake). A healthy
/// peer's check starts this much later, in a period of 30 s.
pub const CLOSE_WAIT: Duration = Duration::from_millis(50);

/// Default `--connects-in-flight`: connections being made, or made and waiting for a turn, at
/// once. 10,000 silent peers are told in 10,000 / 1,024 × 5 s ≈ 49 s.
pub const DEFAULT_CONNECTS_IN_FLIGHT: usize = 1024;

/// What connecting first found.
#[derive(Debug, Default)]
pub enum Gate {
    /// Not connected first (a peer not yet joined, connecting first turned off, a test).
    #[default]
    Untried,
    /// Connected (when).
    Connected(TcpStream, Instant),
    /// No answer within the wait.
    Silent(Silent),
    /// Refused, no route, a name that does not resolve: the check finds out and says so.
    Failed,
    /// The health check made over the connection kept from the last one.
    Answered(Box<Early>),
}

/// A health check's answer got over a kept connection before the reconcile's turn: what it asked,
/// for which access (its key, [`crate::remote::sessions::key_of`]: a reconcile waiting for its
/// turn holds 32 bytes, not the kubeconfig and CA), when, and how long it took.
#[derive(Debug)]
pub struct Early {
    /// The answer's status code and body.
    pub status: u16,
    pub body: Vec<u8>,
    pub path: String,
    pub access: [u8; 32],
    pub at: Instant,
    pub took: Duration,
    /// Made over a connection just made first (a TLS handshake), not over a kept one.
    pub fresh: bool,
}

/// A peer's API server that said nothing: it took no connection within the wait, or it
/// closed the one it took before a word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Silent {
    pub address: String,
    /// The wait it was given (`--connect-wait-seconds`): what its status says.
    pub waited: Duration,
    /// Taken, then closed (reset or ended) by the peer before the check spoke.
    pub closed: bool,
    /// Asked over the connection kept from the last check, and no answer within the wait.
    pub on_kept: bool,
}

impl Silent {
    /// What the status says.
    pub fn message(&self) -> String {
        if self.closed {
            // The same words as a check that met it in its turn: a status written once.
            crate::machinery::error::CLOSED_BEFORE_A_WORD.to_owned()
        } else {
            // The same words whether it was asked on its kept connection or took no new one,
            // and the wait given, not the time measured: a black-holed peer is asked on its
            // kept connection once, then connected to, and a status that said it otherwise
            // the second time would be written twice (the fleet's row h saw 1.8 writes a peer
            // where one reconcile's turn served them all).
            format!("{} did not answer within {} s (no answer, no refusal: packets dropped?)", self.address, self.waited.as_secs())
        }
    }
}

impl Gate {
    /// The connection, when it is still fresh.
    pub fn take_stream(&mut self) -> Option<TcpStream> {
        match std::mem::take(self) {
            Gate::Connected(stream, at) if at.elapsed() <= FRESH_FOR => Some(stream),
            _ => None,
        }
    }

    /// The answer got over a kept connection, when there is one (taken).
    pub fn take_answer(&mut self) -> Option<Box<Early>> {
        match std::mem::take(self) {
            Gate::Answered(early) => Some(early),
            other => {
                *self = other;
                None
            }
        }
    }

    /// Connected or answered, but longer ago than [`FRESH_FOR`]: the reconcile connects (or
    /// asks) first again rather than connect in its turn ([`STALE_RETRIES`] times at most).
    pub fn stale(&self) -> bool {
        match self {
            Gate::Connected(_, at) => at.elapsed() > FRESH_FOR,
            Gate::Answered(early) => early.at.elapsed() > FRESH_FOR,
            _ => false,
        }
    }

    /// A fresh connection the peer has closed meanwhile becomes [`Gate::Silent`] (closed);
    /// whether it did is asked of the socket without reading (a peek that does not wait).
    /// Returns whether it did. A stale one is left to be made again: a server may close a
    /// connection that waited long without a word, and that tells nothing of the peer.
    pub fn settle(&mut self) -> bool {
        let Gate::Connected(stream, at) = self else { return false };
        if at.elapsed() > FRESH_FOR || !closed_by_peer(stream) {
            return false;
        }
        let address = stream.peer_addr().map_or_else(|_| "the remote API server".to_owned(), |a| a.to_string());
        *self = Gate::Silent(Silent { address, waited: at.elapsed(), closed: true, on_kept: false });
        true
    }

    pub fn silent(&self) -> Option<&Silent> {
        match self {
            Gate::Silent(s) => Some(s),
            _ => None,
        }
    }
}

/// Whether the peer has closed `stream` (reset, or ended it): a peek of one byte that does not
/// wait. Bytes waiting (a server that spoke first) or nothing yet: open.
fn closed_by_peer(stream: &TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
    match socket2::SockRef::from(stream).peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::Interrupted,
    }
}

/// Makes the connections, at most so many at once.
#[derive(Clone, Debug)]
pub struct Connector {
    in_flight: Arc<Semaphore>,
    most: usize,
    wait: Duration,
    /// [`CLOSE_WAIT`], unless a test needs its outcome not to race the peer's scheduling.
    close_wait: Duration,
}

impl Connector {
    pub fn new(in_flight: usize, wait: Duration) -> Self {
        Self { in_flight: Arc::new(Semaphore::new(in_flight.max(1))), most: in_flight.max(1), wait, close_wait: CLOSE_WAIT }
    }

    /// This connector, watching each connection `close_wait` for the peer's close.
    pub fn watching(self, close_wait: Duration) -> Self {
        Self { close_wait, ..self }
    }

    /// How many connections may be made (or wait for their turn) at once.
    pub fn in_flight(&self) -> usize {
        self.most
    }

    /// How long a peer has to take a connection (`--connect-wait-seconds`).
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Connects to the API server at `url`, returning what it found and the permit to hold
    /// until the reconcile has its turn (so connections made first do not run ahead of the
    /// turns without bound). A URL that names no host is [`Gate::Failed`]. A connection is
    /// watched for [`CLOSE_WAIT`] (or [`Connector::watching`]) for the peer's close
    /// ([`Gate::settle`]): a close ends the watch at once.
    pub async fn connect(&self, url: &str) -> (Gate, OwnedSemaphorePermit) {
        let permit = self.permit().await;
        self.connect_with(permit, url).await
    }

    /// One of the connections that may be made (or checks over kept ones) at once.
    pub async fn permit(&self) -> OwnedSemaphorePermit {
        self.in_flight.clone().acquire_owned().await.expect("never closed")
    }

    /// [`Connector::connect`] under `permit`, already taken.
    pub async fn connect_with(&self, permit: OwnedSemaphorePermit, url: &str) -> (Gate, OwnedSemaphorePermit) {
        let Some((host, port)) = endpoint(url) else { return (Gate::Failed, permit) };
        let silent = |closed| Gate::Silent(Silent { address: format!("{host}:{port}"), waited: self.wait, closed, on_kept: false });
        let mut gate = match tokio::time::timeout(self.wait, TcpStream::connect((host.as_str(), port))).await {
            Ok(Ok(stream)) => Gate::Connected(stream, Instant::now()),
            // Reset while connecting: the peer took the connection and closed it at once, the
            // same fact (and words) as a close seen after the connect.
            Ok(Err(e)) if crate::machinery::error::io_closed_before_a_word(&e) => silent(true),
            Ok(Err(_)) => Gate::Failed,
            Err(_) => silent(false),
        };
        if let Gate::Connected(stream, _) = &gate {
            // Readable: closed, or (unlike a TLS server) it spoke first; either way settled below.
            let _ = tokio::time::timeout(self.close_wait, stream.readable()).await;
            gate.settle();
        }
        (gate, permit)
    }
}

/// How a status names the API server at `url`: its host and port (the URL itself when it names
/// none). The same words whichever way the peer was found silent, so its status is written once.
pub fn address(url: &str) -> String {
    endpoint(url).map_or_else(|| url.to_owned(), |(host, port)| format!("{host}:{port}"))
}

/// The host and port an `https://` URL connects to (pure): 443 when it names none, IPv6
/// literals without their brackets.
pub fn endpoint(url: &str) -> Option<(String, u16)> {
    let uri: http::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("http") { 80 } else { 443 });
    (!host.is_empty()).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_the_urls_host_and_port_443_by_default() {
        assert_eq!(endpoint("https://10.0.0.1:6443"), Some(("10.0.0.1".into(), 6443)));
        assert_eq!(endpoint("https://api.example.org"), Some(("api.example.org".into(), 443)));
        assert_eq!(endpoint("https://[fd00::1]:6443/"), Some(("fd00::1".into(), 6443)));
        assert_eq!(endpoint("not a url"), None);
        assert_eq!(endpoint("/no/host"), None);
        assert_eq!(address("https://api.example.org"), "api.example.org:443", "a status names the host and port");
        assert_eq!(address("not a url"), "not a url");
    }

    #[tokio::test]
    async fn a_listening_server_is_connected_a_closed_port_fails() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connector = Connector::new(4, CONNECT_WAIT);
        let (mut gate, _permit) = connector.connect(&format!("https://{addr}")).await;
        assert!(gate.take_stream().is_some(), "{gate:?}");
        drop(listener);
        let (gate, _permit) = connector.connect(&format!("https://{addr}")).await;
        assert!(matches!(gate, Gate::Failed), "{gate:?}");
    }

    #[tokio::test]
    async fn a_server_that_drops_connections_is_silent_within_the_wait() {
        let hole = liqo_testenv::black_hole().await;
        let connector = Connector::new(4, Duration::from_millis(300));
        let (gate, _permit) = connector.connect(&format!("https://{}", hole.addr)).await;
        let silent = gate.silent().expect("silent").clone();
        assert_eq!(silent.address, hole.addr.to_string());
        assert!(silent.message().contains("did not answer within 0 s (no answer, no refusal"), "{}", silent.message());
    }

    #[test]
    fn a_silent_peer_is_told_in_the_same_words_on_its_kept_connection_or_a_new_one() {
        let silent = |on_kept| Silent { address: "10.0.0.1:6443".into(), waited: CONNECT_WAIT, closed: false, on_kept };
        assert_eq!(silent(false).message(), "10.0.0.1:6443 did not answer within 5 s (no answer, no refusal: packets dropped?)");
        assert_eq!(silent(true).message(), silent(false).message(), "one status write, not two");
        let closed = Silent { closed: true, ..silent(false) };
        assert_eq!(closed.message(), crate::machinery::error::CLOSED_BEFORE_A_WORD);
    }

    /// Connects first to a server that does `then` with the connection it takes; returns the
    /// gate once the server has done it.
    async fn connected_to(then: impl FnOnce(TcpStream) -> Option<TcpStream>) -> (Gate, Option<TcpStream>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connector = Connector::new(1, CONNECT_WAIT);
        let (gate, _permit) = connector.connect(&format!("https://{}", listener.local_addr().unwrap())).await;
        let (taken, _) = listener.accept().await.unwrap();
        (gate, then(taken))
    }

    /// Settles `gate` until the peer's close has arrived (a deadline, not a sleep).
    async fn settled_within(gate: &mut Gate, deadline: Duration) -> bool {
        let until = Instant::now() + deadline;
        while Instant::now() < until {
            if gate.settle() {
                return true;
            }
            tokio::task::yield_now().await;
        }
        false
    }

    #[tokio::test]
    async fn a_connection_the_peer_reset_or_ended_is_told_closed_without_a_word() {
        #[allow(deprecated)]
        let reset = |s: TcpStream| {
            s.set_linger(Some(Duration::ZERO)).unwrap();
            None
        };
        let ended = |_: TcpStream| None;
        for (how, then) in [("reset", &reset as &dyn Fn(TcpStream) -> Option<TcpStream>), ("ended", &ended)] {
            let (mut gate, _) = connected_to(then).await;
            assert!(settled_within(&mut gate, Duration::from_secs(10)).await, "{how}: {gate:?}");
            let silent = gate.silent().expect("told as silent").clone();
            assert!(silent.closed, "{how}");
            assert!(silent.message().contains("closed it before a word"), "{how}: {}", silent.message());
            assert!(gate.take_stream().is_none(), "{how}: no connection to use");
        }
    }

    #[tokio::test]
    async fn a_connection_is_watched_for_the_peers_close_outside_the_turns() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let resetting = tokio::spawn(async move {
            loop {
                let (taken, _) = listener.accept().await.unwrap();
                #[allow(deprecated)]
                taken.set_linger(Some(Duration::ZERO)).unwrap();
            }
        });
        // Watched long enough that the test does not race the resetting task's scheduling: the
        // close ends the watch as soon as it arrives.
        let connector = Connector::new(1, CONNECT_WAIT).watching(Duration::from_secs(30));
        let (gate, permit) = connector.connect(&url).await;
        assert!(gate.silent().is_some_and(|s| s.closed), "told closed, no turn needed: {gate:?}");
        resetting.abort();
        drop(permit);

        // Back: nothing to read, so the connection is used after the (shipped) watch.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let (mut gate, _permit) = Connector::new(1, CONNECT_WAIT).connect(&url).await;
        assert!(gate.take_stream().is_some(), "an answering peer's connection is used");
    }

    #[tokio::test]
    async fn an_open_connection_is_kept_and_a_stale_closed_one_is_made_again() {
        let (mut gate, held) = connected_to(Some).await;
        assert!(!gate.settle(), "the server holds it: {gate:?}");
        assert!(matches!(gate, Gate::Connected(..)));
        // Data the server sent first is not taken from the stream by the peek.
        let mut held = held.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut held, b"x").await.unwrap();
        let Gate::Connected(stream, _) = &gate else { unreachable!() };
        stream.readable().await.unwrap();
        assert!(!gate.settle(), "bytes waiting: still open");
        let mut stream = gate.take_stream().expect("fresh");
        let mut byte = [0u8; 1];
        tokio::io::AsyncReadExt::read_exact(&mut stream, &mut byte).await.unwrap();
        assert_eq!(&byte, b"x");

        let (gate, _) = connected_to(|_| None).await;
        let Gate::Connected(stream, _) = gate else { panic!("connected") };
        stream.readable().await.unwrap();
        let mut stale = Gate::Connected(stream, Instant::now() - FRESH_FOR - Duration::from_secs(1));
        assert!(!stale.settle(), "stale: left to be made again, not told closed");
        assert!(stale.stale());
    }

    #[test]
    fn a_stale_connection_is_not_used() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let fresh = Gate::Connected(TcpStream::connect(listener.local_addr().unwrap()).await.unwrap(), Instant::now());
            assert!(!fresh.stale());
            assert!(!Gate::Untried.stale() && !Gate::Failed.stale());
        });
        a_stale_connection_is_dropped();
    }

    fn a_stale_connection_is_dropped() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let stream = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
            let mut gate = Gate::Connected(stream, Instant::now() - FRESH_FOR - Duration::from_secs(1));
            assert!(gate.stale(), "older than FRESH_FOR");
            assert!(gate.take_stream().is_none());
            assert!(matches!(gate, Gate::Untried), "taken");
        });
    }
}
