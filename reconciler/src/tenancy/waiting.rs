//! The identities issued and not yet used, counted for the cap on them (SPEC §10). The leader's
//! sweep ([`super::sweep`]) sets the list from the API server each round; the auth service adds
//! each identity it issues and asks, before issuing one more, whether the cap is reached. An
//! identity whose peer is seen using it (in memory: see [`super::in_use`]) stops counting at
//! once, so genuine joins in a burst are not held back by their own identities.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::jiff::Timestamp;

/// Identities issued for these cluster IDs, when, and not seen used yet.
#[derive(Debug)]
pub struct Waiting {
    /// The most identities waiting at once; beyond, `/identity` answers 503.
    pub cap: usize,
    issued: Mutex<Issued>,
}

/// Each ID's issue time and the number of the addition that put it there.
#[derive(Debug, Default)]
struct Issued {
    by_peer: BTreeMap<String, (Timestamp, u64)>,
    added: u64,
}

/// The default of `--max-waiting-identities`.
pub const DEFAULT_CAP: usize = 100;

impl Waiting {
    pub fn new(cap: usize) -> Self {
        Self { cap, issued: Mutex::default() }
    }

    /// A mark to take before the sweep lists the identities: [`Waiting::replace`] keeps what
    /// was added after it, which the list may have missed.
    pub fn mark(&self) -> u64 {
        self.issued.lock().map(|i| i.added).unwrap_or_default()
    }

    /// The list the sweep found (those it kept waiting), listed after `mark`.
    pub fn replace(&self, found: impl IntoIterator<Item = (String, Timestamp)>, mark: u64) {
        if let Ok(mut issued) = self.issued.lock() {
            issued.by_peer.retain(|_, (_, n)| *n > mark);
            for (peer, at) in found {
                issued.by_peer.entry(peer).or_insert((at, 0));
            }
        }
    }

    /// One more identity issued for `peer` at `at`.
    pub fn add(&self, peer: &str, at: Timestamp) {
        if let Ok(mut issued) = self.issued.lock() {
            issued.added += 1;
            let n = issued.added;
            issued.by_peer.insert(peer.to_owned(), (at, n));
        }
    }

    /// How many wait, once those `in_use` says are used are dropped.
    pub fn count(&self, in_use: impl Fn(&str) -> bool) -> usize {
        let Ok(mut issued) = self.issued.lock() else { return 0 };
        issued.by_peer.retain(|peer, _| !in_use(peer));
        issued.by_peer.len()
    }

    /// Whether one more identity for `peer` (not already waiting) would pass the cap.
    pub fn full(&self, peer: &str, in_use: impl Fn(&str) -> bool) -> bool {
        let waiting = self.count(in_use);
        let already = self.issued.lock().is_ok_and(|i| i.by_peer.contains_key(peer));
        !already && waiting >= self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_counts_identities_not_yet_used() {
        let w = Waiting::new(2);
        let now = Timestamp::now();
        let none = |_: &str| false;
        assert!(!w.full("a", none));
        w.add("a", now);
        w.add("b", now);
        assert_eq!(w.count(none), 2);
        assert!(w.full("c", none), "a third stranger waits for the sweep");
        assert!(!w.full("a", none), "asking again for a waiting ID takes no more room");
        assert!(!w.full("c", |p| p == "a"), "a used identity makes room at once");
        assert_eq!(w.count(none), 1, "and is forgotten");
        let mark = w.mark();
        w.add("late", now);
        w.replace([("x".to_owned(), now)], mark);
        assert_eq!(w.count(none), 2, "what the sweep found, and what was issued while it listed");
        assert!(w.full("b", none));
        w.replace([], w.mark());
        assert_eq!(w.count(none), 0);
    }
}
