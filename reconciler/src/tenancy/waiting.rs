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
    issued: Mutex<BTreeMap<String, Timestamp>>,
}

/// The default of `--max-waiting-identities`.
pub const DEFAULT_CAP: usize = 100;

impl Waiting {
    pub fn new(cap: usize) -> Self {
        Self { cap, issued: Mutex::new(BTreeMap::new()) }
    }

    /// The list the sweep found (those it kept waiting).
    pub fn replace(&self, found: impl IntoIterator<Item = (String, Timestamp)>) {
        if let Ok(mut issued) = self.issued.lock() {
            *issued = found.into_iter().collect();
        }
    }

    /// One more identity issued for `peer` at `at`.
    pub fn add(&self, peer: &str, at: Timestamp) {
        if let Ok(mut issued) = self.issued.lock() {
            issued.insert(peer.to_owned(), at);
        }
    }

    /// How many wait, once those `in_use` says are used are dropped.
    pub fn count(&self, in_use: impl Fn(&str) -> bool) -> usize {
        let Ok(mut issued) = self.issued.lock() else { return 0 };
        issued.retain(|peer, _| !in_use(peer));
        issued.len()
    }

    /// Whether one more identity for `peer` (not already waiting) would pass the cap.
    pub fn full(&self, peer: &str, in_use: impl Fn(&str) -> bool) -> bool {
        let waiting = self.count(in_use);
        let already = self.issued.lock().is_ok_and(|i| i.contains_key(peer));
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
        w.replace([("x".to_owned(), now)]);
        assert_eq!(w.count(none), 1);
        assert!(!w.full("b", none));
    }
}
