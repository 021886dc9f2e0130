//! What the fleet's peers were asked, over all of them ([`Counts`]), and the figures of one
//! moment ([`Snapshot`]) that a scenario subtracts from the next; how long the peers took to
//! answer ([`Latencies`]: from a request's arrival to its answer, with the wait between a
//! connection's accept and the start of its task for the first), so that a row tells peers
//! that starved from a hub that was slow.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets of [`Latencies`]: each 25 % above the last, from 100 µs to about 2 minutes.
pub const BUCKETS: usize = 64;

/// The upper bound of bucket `i` (pure).
pub fn bucket_bound(i: usize) -> Duration {
    Duration::from_secs_f64(1e-4 * 1.25f64.powi(i as i32))
}

/// The bucket a latency of `d` falls in (pure): the first whose bound is at least `d`.
pub fn bucket_of(d: Duration) -> usize {
    let ratio = d.as_secs_f64() / 1e-4;
    if ratio <= 1.0 {
        return 0;
    }
    ((ratio.ln() / 1.25f64.ln()).ceil() as usize).min(BUCKETS - 1)
}

/// A histogram of answer times, by [`bucket_of`].
#[derive(Debug)]
pub struct Latencies([AtomicU64; BUCKETS]);

impl Default for Latencies {
    fn default() -> Self {
        Self(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl Latencies {
    pub fn observe(&self, d: Duration) {
        self.0[bucket_of(d)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> [u64; BUCKETS] {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }
}

/// The `q` quantile (0..1) of a histogram's counts: the bound of the bucket it falls in, `None`
/// when it counts nothing (pure).
pub fn quantile(counts: &[u64; BUCKETS], q: f64) -> Option<Duration> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, n) in counts.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(bucket_bound(i));
        }
    }
    Some(bucket_bound(BUCKETS - 1))
}

/// What the fleet was asked, over all peers.
#[derive(Default, Debug)]
pub struct Counts {
    /// Connections taken (reset at once while a peer is down included).
    pub connections: AtomicU64,
    /// Connections reset because their peer was down.
    pub reset: AtomicU64,
    /// TLS handshakes completed, and of those, resumed from a session ticket.
    pub handshakes: AtomicU64,
    pub resumed: AtomicU64,
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
    /// How long the peers took to answer (a watch: until it started).
    pub latencies: Latencies,
}

/// A reading of [`Counts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub connections: u64,
    pub reset: u64,
    pub handshakes: u64,
    pub resumed: u64,
    pub auth: u64,
    pub identities: u64,
    pub reads: u64,
    pub writes: u64,
    pub watches: u64,
    pub hub_reads: u64,
    pub hub_writes: u64,
    pub hub_lists: u64,
    pub hub_watches: u64,
    pub latencies: [u64; BUCKETS],
}

impl Default for Snapshot {
    fn default() -> Self {
        Self {
            connections: 0,
            reset: 0,
            handshakes: 0,
            resumed: 0,
            auth: 0,
            identities: 0,
            reads: 0,
            writes: 0,
            watches: 0,
            hub_reads: 0,
            hub_writes: 0,
            hub_lists: 0,
            hub_watches: 0,
            latencies: [0; BUCKETS],
        }
    }
}

impl Counts {
    pub fn snapshot(&self) -> Snapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Snapshot {
            connections: r(&self.connections),
            reset: r(&self.reset),
            handshakes: r(&self.handshakes),
            resumed: r(&self.resumed),
            auth: r(&self.auth),
            identities: r(&self.identities),
            reads: r(&self.reads),
            writes: r(&self.writes),
            watches: r(&self.watches),
            hub_reads: r(&self.hub_reads),
            hub_writes: r(&self.hub_writes),
            hub_lists: r(&self.hub_lists),
            hub_watches: r(&self.hub_watches),
            latencies: self.latencies.snapshot(),
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
            resumed: self.resumed - o.resumed,
            auth: self.auth - o.auth,
            identities: self.identities - o.identities,
            reads: self.reads - o.reads,
            writes: self.writes - o.writes,
            watches: self.watches - o.watches,
            hub_reads: self.hub_reads - o.hub_reads,
            hub_writes: self.hub_writes - o.hub_writes,
            hub_lists: self.hub_lists - o.hub_lists,
            hub_watches: self.hub_watches - o.hub_watches,
            latencies: std::array::from_fn(|i| self.latencies[i] - o.latencies[i]),
        }
    }
}

impl Snapshot {
    /// Every request a peer received (auth service and API server).
    pub fn requests(&self) -> u64 {
        self.auth + self.reads + self.writes + self.watches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_fall_in_buckets_25_percent_apart_and_quantiles_read_their_bounds() {
        assert_eq!(bucket_of(Duration::ZERO), 0);
        assert_eq!(bucket_of(Duration::from_micros(100)), 0);
        for ms in [1u64, 7, 150, 1_000, 9_000] {
            let d = Duration::from_millis(ms);
            let i = bucket_of(d);
            assert!(bucket_bound(i) >= d && (i == 0 || bucket_bound(i - 1) < d), "{ms} ms in bucket {i}");
            assert!(bucket_bound(i).as_secs_f64() <= d.as_secs_f64() * 1.25 + 1e-9, "{ms} ms: within 25 %");
        }
        assert_eq!(bucket_of(Duration::from_secs(3600)), BUCKETS - 1, "the last bucket takes the rest");
        let l = Latencies::default();
        for _ in 0..98 {
            l.observe(Duration::from_millis(2));
        }
        l.observe(Duration::from_secs(2));
        l.observe(Duration::from_secs(2));
        let counts = l.snapshot();
        let p50 = quantile(&counts, 0.5).unwrap();
        assert!(p50 >= Duration::from_millis(2) && p50 < Duration::from_millis(3), "{p50:?}");
        let p99 = quantile(&counts, 0.99).unwrap();
        assert!(p99 >= Duration::from_secs(2) && p99 < Duration::from_millis(2_500), "{p99:?}");
        assert_eq!(quantile(&[0; BUCKETS], 0.5), None);
    }
}
