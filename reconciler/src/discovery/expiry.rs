//! Reachability of LAN clusters (protocol §4), pure and clock-driven: every `ttl/3` a cluster that
//! was not seen again since the previous check, and whose auth endpoint does not answer, loses
//! a strike; three consecutive misses and it expires. A sighting or an answer clears the strikes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Consecutive misses after which a cluster expires.
pub const MAX_MISSES: u32 = 3;

/// The check period for a ClusterConfig `ttl` (seconds): `ttl/3`, at least one second.
pub fn check_period(ttl_seconds: u32) -> Duration {
    Duration::from_secs(u64::from(ttl_seconds / 3).max(1))
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    last_seen: Instant,
    misses: u32,
}

/// Strikes of the clusters the LAN browser knows, by cluster ID.
#[derive(Clone, Debug, Default)]
pub struct Strikes {
    entries: BTreeMap<String, Entry>,
}

/// What a check decided for one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Seen or answering: strikes cleared.
    Alive,
    /// Missed; `misses` so far (below [`MAX_MISSES`]).
    Missed(u32),
    /// Missed [`MAX_MISSES`] times in a row: forget it and delete its ForeignCluster.
    Expired,
}

impl Strikes {
    /// The cluster was seen (announced or resolved) at `now`.
    pub fn seen(&mut self, cluster_id: &str, now: Instant) {
        self.entries.insert(cluster_id.to_owned(), Entry { last_seen: now, misses: 0 });
    }

    /// The clusters not seen during the `period` before `now`: their auth endpoint must be
    /// asked before [`Strikes::record`] decides.
    pub fn due(&self, now: Instant, period: Duration) -> Vec<String> {
        self.entries.iter().filter(|(_, e)| now.saturating_duration_since(e.last_seen) >= period).map(|(id, _)| id.clone()).collect()
    }

    /// The outcome of a check of a due cluster: `answered` is whether its auth endpoint answered.
    pub fn record(&mut self, cluster_id: &str, answered: bool, now: Instant) -> Verdict {
        let Some(e) = self.entries.get_mut(cluster_id) else { return Verdict::Expired };
        if answered {
            *e = Entry { last_seen: now, misses: 0 };
            return Verdict::Alive;
        }
        e.misses += 1;
        if e.misses >= MAX_MISSES {
            self.entries.remove(cluster_id);
            Verdict::Expired
        } else {
            Verdict::Missed(e.misses)
        }
    }

    /// Forget a cluster (its ForeignCluster is gone for another reason).
    pub fn forget(&mut self, cluster_id: &str) {
        self.entries.remove(cluster_id);
    }

    pub fn misses(&self, cluster_id: &str) -> Option<u32> {
        self.entries.get(cluster_id).map(|e| e.misses)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Duration = Duration::from_secs(30);

    #[test]
    fn the_check_period_is_a_third_of_the_ttl() {
        assert_eq!(check_period(90), Duration::from_secs(30));
        assert_eq!(check_period(30), Duration::from_secs(10));
        assert_eq!(check_period(0), Duration::from_secs(1));
    }

    #[test]
    fn three_consecutive_misses_expire_a_cluster() {
        let t0 = Instant::now();
        let mut s = Strikes::default();
        s.seen("a", t0);
        assert!(s.due(t0 + P - Duration::from_millis(1), P).is_empty(), "seen within the period");
        for (i, expected) in [Verdict::Missed(1), Verdict::Missed(2), Verdict::Expired].into_iter().enumerate() {
            let now = t0 + P * (i as u32 + 1);
            assert_eq!(s.due(now, P), vec!["a".to_owned()]);
            assert_eq!(s.record("a", false, now), expected);
        }
        assert!(s.is_empty());
        assert!(s.due(t0 + P * 10, P).is_empty());
    }

    #[test]
    fn a_sighting_or_an_answer_clears_the_strikes() {
        let t0 = Instant::now();
        let mut s = Strikes::default();
        s.seen("a", t0);
        assert_eq!(s.record("a", false, t0 + P), Verdict::Missed(1));
        assert_eq!(s.record("a", false, t0 + P * 2), Verdict::Missed(2));
        s.seen("a", t0 + P * 2 + Duration::from_secs(1));
        assert_eq!(s.misses("a"), Some(0));
        assert!(s.due(t0 + P * 3, P).is_empty(), "seen again: not due");
        assert_eq!(s.record("a", false, t0 + P * 4), Verdict::Missed(1));
        assert_eq!(s.record("a", true, t0 + P * 5), Verdict::Alive);
        assert_eq!(s.misses("a"), Some(0));
        assert!(s.due(t0 + P * 5 + Duration::from_secs(29), P).is_empty(), "an answer counts as seen");
    }

    #[test]
    fn clusters_are_counted_independently() {
        let t0 = Instant::now();
        let mut s = Strikes::default();
        s.seen("a", t0);
        s.seen("b", t0 + Duration::from_secs(20));
        assert_eq!(s.due(t0 + P, P), vec!["a".to_owned()]);
        s.forget("a");
        assert_eq!(s.due(t0 + P * 2, P), vec!["b".to_owned()]);
        assert_eq!(s.record("gone", false, t0), Verdict::Expired, "an unknown cluster has nothing to keep");
    }
}
