//! How many Events of one kind go out (`--events-per-second`, `--events-burst`): one token
//! bucket for each kind (the type, action and reason, and the kind of object it is about), so
//! that a storm of one kind never silences another. An Event over its budget is left out and
//! counted, and each kind's count is told every [`SUMMARY_EVERY`] in one Event of the same
//! reason about the reconciler's Lease.
//!
//! Why: a mass transition (10,000 peers down at once) made one Event per peer on top of one
//! status write per peer, twice the writes the hub's API server had to take before every
//! status said so. The status is the truth of each peer; its Event is the story of it, and a
//! thousand identical stories are told as well by one that counts them (the API server's own
//! EventRateLimit admission plugin bounds Events the same way, and drops the rest silently).
//!
//! Pure: no I/O, the time given.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Default `--events-per-second`: Events of one kind a second after a burst.
pub const DEFAULT_PER_SECOND: f64 = 5.0;
/// Default `--events-burst`: Events of one kind at once.
pub const DEFAULT_BURST: u32 = 50;
/// How often the Events left out are told.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(10);

/// One kind of Event: what its budget is kept by.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kind {
    pub warning: bool,
    pub action: String,
    pub reason: String,
    /// The kind of object the Event is about (`ForeignCluster`, …).
    pub about: String,
}

/// The budgets of every kind seen, and what each left out since it was last told.
#[derive(Debug)]
pub struct Budget {
    per_second: f64,
    burst: f64,
    kinds: HashMap<Kind, Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    left_out: u64,
}

impl Budget {
    /// `per_second` ≤ 0: no budget, every Event goes out.
    pub fn new(per_second: f64, burst: u32) -> Self {
        Self { per_second, burst: f64::from(burst.max(1)), kinds: HashMap::new() }
    }

    /// Whether an Event of `kind` at `now` goes out; if not, it is counted.
    pub fn take(&mut self, kind: &Kind, now: Instant) -> bool {
        if self.per_second <= 0.0 {
            return true;
        }
        let (per_second, burst) = (self.per_second, self.burst);
        let bucket = self.kinds.entry(kind.clone()).or_insert(Bucket { tokens: burst, at: now, left_out: 0 });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.at = bucket.at.max(now);
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(burst);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            bucket.left_out += 1;
            false
        }
    }

    /// The kinds that left Events out since the last call, with how many, in a stable order;
    /// their counts start again from zero. Kinds whose bucket is full again are forgotten.
    pub fn left_out(&mut self, now: Instant) -> Vec<(Kind, u64)> {
        let mut told: Vec<(Kind, u64)> =
            self.kinds.iter_mut().filter(|(_, b)| b.left_out > 0).map(|(k, b)| (k.clone(), std::mem::take(&mut b.left_out))).collect();
        told.sort();
        let (per_second, burst) = (self.per_second, self.burst);
        self.kinds.retain(|_, b| b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * per_second < burst);
        told
    }

    /// The note of the Event that tells `count` Events of `kind` left out.
    pub fn note(&self, kind: &Kind, count: u64) -> String {
        let every = SUMMARY_EVERY.as_secs();
        format!(
            "{count} more Events {reason} about {about}s were left out in the last {every} s (over {burst} at once, then \
             {per_second} a second, of one reason); each object's status says what it is",
            reason = kind.reason,
            about = kind.about,
            burst = self.burst,
            per_second = self.per_second,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(reason: &str) -> Kind {
        Kind { warning: true, action: "Check".into(), reason: reason.into(), about: "ForeignCluster".into() }
    }

    /// 10,000 peers down at once: the burst goes out, then the rate; the rest is counted and
    /// told once, and another reason keeps its own budget meanwhile.
    #[test]
    fn a_storm_of_one_reason_goes_out_up_to_its_budget_and_the_rest_is_counted() {
        let mut b = Budget::new(5.0, 50);
        let t0 = Instant::now();
        let down = kind("RemoteUnreachable");
        let sent = (0..10_000).filter(|_| b.take(&down, t0)).count();
        assert_eq!(sent, 50);
        assert!(b.take(&kind("Joined"), t0), "another reason has a budget of its own");
        // Two seconds later: ten more tokens.
        let later = t0 + Duration::from_secs(2);
        let sent_later = (0..100).filter(|_| b.take(&down, later)).count();
        assert_eq!(sent_later, 10);
        assert_eq!(b.left_out(later), vec![(down.clone(), 9_950 + 90)]);
        assert_eq!(b.left_out(later), vec![], "told once");
    }

    #[test]
    fn a_kind_is_forgotten_once_its_bucket_is_full_again_and_no_budget_sends_everything() {
        let mut b = Budget::new(5.0, 50);
        let t0 = Instant::now();
        let down = kind("RemoteUnreachable");
        for _ in 0..60 {
            b.take(&down, t0);
        }
        b.left_out(t0);
        assert_eq!(b.kinds.len(), 1, "still refilling");
        b.left_out(t0 + Duration::from_secs(10));
        assert!(b.kinds.is_empty(), "full again after 10 s at 5 a second");
        let mut off = Budget::new(0.0, 1);
        assert!((0..1_000).all(|_| off.take(&down, t0)));
        assert_eq!(off.left_out(t0), vec![]);
    }

    #[test]
    fn the_summary_names_the_reason_the_count_and_the_budget() {
        let note = Budget::new(5.0, 50).note(&kind("RemoteUnreachable"), 9_950);
        assert!(note.starts_with("9950 more Events RemoteUnreachable about ForeignClusters"), "{note}");
        assert!(note.contains("over 50 at once, then 5 a second"), "{note}");
    }
}
