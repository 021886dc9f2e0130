//! What the fleet's peers were asked, over all of them ([`Counts`]), and the figures of one
//! moment ([`Snapshot`]) that a scenario subtracts from the next.

use std::sync::atomic::{AtomicU64, Ordering};

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
