//! Health checks over a connection kept from one check to the next: no TCP connect, no TLS
//! handshake, no client built; a GET sealed, sent and its answer opened.
//!
//! - The first check of a peer (and the first after its connection went) is made over a
//!   connection of its own ([`fresh`]): a TLS handshake (resumed where a ticket is kept,
//!   [`crate::remote::sessions`]), the GET and its answer through rustls. rustls then hands over
//!   the connection's traffic secrets, and the connection is kept ([`Kept`]): its socket, each
//!   direction's key, IV and sequence number (about 0.4 KiB in all, where a rustls connection
//!   at rest holds about 8 KiB), the access it was made for and the path its checks ask.
//! - The next checks seal the GET as a TLS 1.3 record ([`crate::remote::record`]), send it and
//!   open the answer, from the stage that connects first, outside the reconciles' turns
//!   ([`crate::machinery::connect_first`]): a peer gone silent holds no turn.
//! - A connection is given up, and the next check makes a new one, when the peer closed it
//!   (an idle timeout, a restart, a new certificate), when anything but application data or a
//!   session ticket arrives on it (a key update, an alert), when a record does not open, when the
//!   answer says the connection ends, and after [`RETIRE_AFTER`] checks: that one is then a full
//!   handshake, so a certificate replaced in place is seen within so many periods, as without
//!   kept connections.
//! - Kept only for what peers issue: a bearer token (or none) and a pinned CA. Anything else
//!   (client certificates, no pinned CA) is checked through kube's client, without keeping.
//!
//! Memory: at most [`DEFAULT_MOST`] connections (`--kept-connections`); docs/scaling.md gives
//! the bytes per peer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::remote::http1::{self, Answer, Parsed};
use crate::remote::record::{self, Keys};

/// Checks over one connection, then it is closed and the next check makes a full handshake
/// ([`crate::remote::sessions::FULL_HANDSHAKE_EVERY`]: the same interval).
pub const RETIRE_AFTER: u32 = crate::remote::sessions::FULL_HANDSHAKE_EVERY;

/// Default `--kept-connections`: the most connections kept at once (a socket each).
pub const DEFAULT_MOST: usize = 16_384;

/// Open files kept for everything but kept connections: the connections made first
/// (`--connects-in-flight`) come on top.
pub const OTHER_FILES: u64 = 4_096;

/// How many connections may be kept (pure): `asked`, within the open files the process may hold
/// (`open_files`) less what its other connections need (`connects_in_flight` and
/// [`OTHER_FILES`]). A kept connection past that would leave a check, a watch or a call to our
/// auth service without a socket.
pub fn most_within(asked: usize, open_files: u64, connects_in_flight: usize) -> usize {
    let room = open_files.saturating_sub(OTHER_FILES + connects_in_flight as u64);
    asked.min(usize::try_from(room).unwrap_or(usize::MAX))
}

/// Raises the soft limit on open files to the hard one (as Go's runtime does) and returns it.
pub fn raise_open_files() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        let soft = limit.rlim_cur;
        limit.rlim_cur = limit.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 { limit.rlim_max } else { soft }
    }
}

/// A connection kept for a peer's next health check.
pub struct Kept {
    stream: TcpStream,
    tx: Keys,
    rx: Keys,
    /// The access it was made for ([`crate::remote::sessions::key_of`]).
    key: [u8; 32],
    /// What its checks ask.
    path: Box<str>,
    /// Checks made over it, the first one included.
    checks: u32,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept").field("path", &self.path).field("checks", &self.checks).finish_non_exhaustive()
    }
}

/// Why a check over a kept connection got no answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// Nothing within the wait: the peer is silent (a black hole drops what we send).
    Silent,
    /// The connection is no use any more (closed, reset, a record that does not open, a key
    /// update): the check is to be made over a new one.
    Broken(String),
}

impl Kept {
    /// The connection `stream` whose TLS session rustls handed over as `secrets`, after a first
    /// check of `path` for the access of `key`.
    pub fn new(stream: TcpStream, secrets: rustls::ExtractedSecrets, key: [u8; 32], path: &str) -> Option<Self> {
        Some(Self { stream, tx: Keys::of(secrets.tx)?, rx: Keys::of(secrets.rx)?, key, path: path.into(), checks: 1 })
    }

    /// What its checks ask.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Sends `request` and reads its answer, within `wait`; whether the connection may carry
    /// another comes with it.
    pub async fn round_trip(&mut self, request: Vec<u8>, wait: Duration) -> Result<(Answer, bool), Failure> {
        self.checks += 1;
        match tokio::time::timeout(wait, self.exchange(request)).await {
            Ok(done) => done.map_err(Failure::Broken),
            Err(_) => Err(Failure::Silent),
        }
    }

    async fn exchange(&mut self, request: Vec<u8>) -> Result<(Answer, bool), String> {
        {
            let mut sealed = Vec::with_capacity(request.len() + 64);
            self.tx.seal(&request, &mut sealed).map_err(|e| format!("sealing the request: {e:?}"))?;
            drop(request);
            self.stream.write_all(&sealed).await.map_err(|e| format!("sending: {e}"))?;
        }
        // Nothing held while the answer is waited for: up to 1,024 checks are in flight at once,
        // and a black-holed peer's waits the whole wait (its request, sealed and plain, and a
        // buffer for the answer were 4.5 KiB a check, 4.6 MiB held through a whole fleet's
        // black hole). The buffer is then sized to what arrives.
        self.stream.readable().await.map_err(|e| format!("reading: {e}"))?;
        let (mut records, mut plain) = (Vec::with_capacity(2048), Vec::new());
        loop {
            while let Some(len) = record::record_len(&records).map_err(|e| format!("a record: {e:?}"))? {
                let (kind, data) = self.rx.open(&mut records[..len]).map_err(|e| format!("a record: {e:?}"))?;
                match kind {
                    record::APPLICATION_DATA => plain.extend_from_slice(data),
                    // A new session ticket: the connection goes on, the ticket is not needed.
                    record::HANDSHAKE if data.first() == Some(&4) => {}
                    record::ALERT => return Err("the peer closed the connection (an alert)".to_owned()),
                    other => return Err(format!("a record of type {other} on a kept connection")),
                }
                records.drain(..len);
            }
            if let Parsed::Whole { answer, reusable } = http1::parse(&plain, false)? {
                return Ok((answer, reusable && records.is_empty()));
            }
            let read = self.stream.read_buf(&mut records).await.map_err(|e| format!("reading: {e}"))?;
            if read == 0 {
                return Err("the peer closed the connection".to_owned());
            }
            if records.capacity() - records.len() < 512 {
                // The rest of the record begun, or room for the next header and more.
                let begun =
                    (records.len() >= record::HEADER).then(|| record::HEADER + usize::from(u16::from_be_bytes([records[3], records[4]])));
                records.reserve(begun.map_or(2048, |whole| whole.saturating_sub(records.len()).max(512)));
            }
        }
    }
}

/// What a check found over the connection kept for a peer.
#[derive(Debug)]
pub enum Outcome {
    /// None kept for it (or one kept for another access or path, now closed).
    NotKept,
    /// Answered (what it asked, for the access of `key`: [`crate::remote::sessions::key_of`]).
    Answered { answer: Answer, path: String, key: [u8; 32] },
    /// No answer within the wait.
    Silent(Duration),
    /// The connection went (the reason): the check is made over a new one.
    Broken(String),
}

/// What the health check made over a connection just made first found
/// ([`crate::remote::peer::Peers::check_first`]).
#[derive(Debug)]
pub enum FirstCheck {
    /// Not made there (the access cannot keep its connection): the turn's check goes over it.
    NotMade(TcpStream),
    /// Answered (for the access of `key`), the connection kept for the next check.
    Answered { answer: Answer, key: [u8; 32] },
    /// No answer within the wait.
    Silent,
    /// Closed by the peer before its handshake was done.
    Closed,
    /// Failed otherwise (the TLS handshake, say): the turn's check asks again and says why.
    Failed,
}

/// The kept connections, by ForeignCluster name (what became of their checks is counted by
/// `liqo_reconciler_connects_first_total`). Each is boxed: the map's table has room for up to
/// twice the entries it holds, a pointer each rather than a whole connection's state.
pub struct KeptConnections {
    map: Mutex<HashMap<Box<str>, Box<Kept>>>,
    most: usize,
}

impl Default for KeptConnections {
    fn default() -> Self {
        Self::keeping(DEFAULT_MOST)
    }
}

impl std::fmt::Debug for KeptConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptConnections").field("kept", &self.len()).field("most", &self.most).finish()
    }
}

impl KeptConnections {
    /// Keeping at most `most` connections (0: none).
    pub fn keeping(most: usize) -> Self {
        Self { map: Mutex::default(), most }
    }

    /// Connections kept now.
    pub fn len(&self) -> usize {
        self.map.lock().expect("not poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a connection may be kept (the bound, and whether any is).
    pub fn keeps(&self) -> bool {
        self.most > 0
    }

    /// Keeps `kept` for `name` (the one kept before, if any, closed), unless the bound is
    /// reached.
    pub fn put(&self, name: &str, kept: Kept) {
        let mut map = self.map.lock().expect("not poisoned");
        if map.len() < self.most || map.contains_key(name) {
            map.insert(name.into(), Box::new(kept));
        }
    }

    /// Closes the connection kept for `name` (a peer unjoined, deleted, or given a new access).
    pub fn forget(&self, name: &str) {
        self.map.lock().expect("not poisoned").remove(name);
    }

    /// The connection kept for `name`, taken out, when it was made for the access of `key` and
    /// may carry another check; any other is closed. `retire` is told when it was due to go
    /// after [`RETIRE_AFTER`] checks (the next connection is to be a full handshake).
    pub fn take(&self, name: &str, key: &[u8; 32], retire: impl FnOnce()) -> Option<Kept> {
        let kept = self.map.lock().expect("not poisoned").remove(name)?;
        if kept.key != *key {
            return None;
        }
        if kept.checks >= RETIRE_AFTER {
            retire();
            return None;
        }
        Some(*kept)
    }

    /// The check of `name` over its kept connection, `request` made for its path (`None`: no
    /// connection kept, so nothing sent), within `wait`. A connection that answered and may
    /// carry another is kept again.
    pub async fn check(&self, name: &str, mut kept: Kept, request: Vec<u8>, wait: Duration) -> Outcome {
        let started = Instant::now();
        match kept.round_trip(request, wait).await {
            Ok((answer, reusable)) => {
                let (path, key) = (kept.path.to_string(), kept.key);
                if reusable {
                    self.put(name, kept);
                }
                Outcome::Answered { answer, path, key }
            }
            Err(Failure::Silent) => Outcome::Silent(started.elapsed()),
            Err(Failure::Broken(why)) => Outcome::Broken(why),
        }
    }
}

/// What the first check over a new connection found: the answer, and the connection with its
/// secrets when it may be kept.
pub struct Fresh {
    pub answer: Answer,
    pub keep: Option<(TcpStream, rustls::ExtractedSecrets)>,
}

/// Why a check over a new connection failed.
#[derive(Debug)]
pub enum FreshError {
    /// The TLS handshake failed (rustls's words): a certificate not of the pinned CA among them.
    Handshake(std::io::Error),
    /// The peer reset or ended the connection before its handshake was done.
    ClosedBeforeAWord,
    /// Sending, or reading the answer, failed.
    Exchange(String),
}

/// The first check over `stream`: a TLS handshake under `tls` for `server`, `request` sent and its
/// answer read; `saw` is told the handshake's kind. `tls` must allow secret extraction for the
/// connection to be kept.
pub async fn fresh(
    stream: TcpStream,
    tls: std::sync::Arc<rustls::ClientConfig>,
    server: rustls::pki_types::ServerName<'static>,
    request: &[u8],
    saw: impl FnOnce(Option<rustls::HandshakeKind>),
) -> Result<Fresh, FreshError> {
    let mut tls_stream = tokio_rustls::TlsConnector::from(tls).connect(server, stream).await.map_err(|e| {
        if crate::machinery::error::io_closed_before_a_word(&e) { FreshError::ClosedBeforeAWord } else { FreshError::Handshake(e) }
    })?;
    saw(tls_stream.get_ref().1.handshake_kind());
    tls_stream.write_all(request).await.map_err(|e| FreshError::Exchange(format!("sending: {e}")))?;
    tls_stream.flush().await.map_err(|e| FreshError::Exchange(format!("sending: {e}")))?;
    let mut plain = Vec::with_capacity(4096);
    loop {
        let read = tls_stream.read_buf(&mut plain).await.map_err(|e| FreshError::Exchange(format!("reading: {e}")))?;
        match http1::parse(&plain, read == 0).map_err(FreshError::Exchange)? {
            Parsed::Whole { answer, reusable } => {
                let (stream, connection) = tls_stream.into_inner();
                let settled = reusable && !connection.wants_write();
                let keep = if settled { connection.dangerous_extract_secrets().ok().map(|s| (stream, s)) } else { None };
                return Ok(Fresh { answer, keep });
            }
            Parsed::Partial => {}
        }
        if plain.capacity() - plain.len() < 1024 {
            plain.reserve(16 * 1024);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_connections_leave_room_for_every_other_socket() {
        assert_eq!(most_within(DEFAULT_MOST, 1 << 20, 1024), DEFAULT_MOST, "a pod's usual limit: as asked");
        assert_eq!(most_within(DEFAULT_MOST, 20_000, 1024), 20_000 - 4_096 - 1_024);
        assert_eq!(most_within(DEFAULT_MOST, 1024, 1024), 0, "the old default limit: none kept");
        assert_eq!(most_within(0, 1 << 20, 1024), 0, "turned off");
    }
}
