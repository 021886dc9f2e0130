//! The identities issued and not yet used, counted for the cap on them (protocol §10). The leader's
//! sweep ([`super::sweep`]) sets the list from the API server each round; the auth service takes
//! a place before it issues one ([`Waiting::reserve`], refused at the cap), and gives it back
//! when it issued none. An
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

/// A place taken by [`Waiting::reserve`] (0: the ID was waiting already, nothing taken).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation(u64);

/// The default of `--max-waiting-identities`.
pub const DEFAULT_CAP: usize = 100;

impl Waiting {
    pub fn new(cap: usize) -> Self {
        Self { cap, issued: Mutex::default() }
    }

    /// The list the sweep found (those it kept waiting), with what was issued since `since` (a
    /// round retires nothing younger): the list may miss an identity being issued while it was
    /// made.
    pub fn replace(&self, found: impl IntoIterator<Item = (String, Timestamp)>, since: Timestamp) {
        if let Ok(mut issued) = self.issued.lock() {
            issued.by_peer.retain(|_, (at, _)| *at >= since);
            for (peer, at) in found {
                issued.by_peer.entry(peer).or_insert((at, 0));
            }
        }
    }

    /// Forgets `peer`'s identity (retired).
    pub fn forget(&self, peer: &str) {
        if let Ok(mut issued) = self.issued.lock() {
            issued.by_peer.remove(peer);
        }
    }

    /// How many wait, once those `in_use` says are used are dropped.
    pub fn count(&self, in_use: impl Fn(&str) -> bool) -> usize {
        let Ok(mut issued) = self.issued.lock() else { return 0 };
        issued.by_peer.retain(|peer, _| !in_use(peer));
        issued.by_peer.len()
    }

    /// Takes a place for an identity about to be issued to `peer` at `at`, unless that would
    /// pass the cap (`None`): checked and taken at once, so callers racing cannot pass it
    /// together. The place is given back with [`Waiting::release`] when nothing is issued.
    pub fn reserve(&self, peer: &str, at: Timestamp, in_use: impl Fn(&str) -> bool) -> Option<Reservation> {
        let mut issued = self.issued.lock().ok()?;
        issued.by_peer.retain(|p, _| !in_use(p));
        if issued.by_peer.contains_key(peer) {
            return Some(Reservation(0));
        }
        if issued.by_peer.len() >= self.cap {
            return None;
        }
        issued.added += 1;
        let n = issued.added;
        issued.by_peer.insert(peer.to_owned(), (at, n));
        Some(Reservation(n))
    }

    /// Gives back the place `reservation` took for `peer` (nothing when it took none).
    pub fn release(&self, peer: &str, reservation: Reservation) {
        if reservation.0 == 0 {
            return;
        }
        if let Ok(mut issued) = self.issued.lock()
            && issued.by_peer.get(peer).is_some_and(|(_, n)| *n == reservation.0)
        {
            issued.by_peer.remove(peer);
        }
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
        w.reserve("a", now, none).unwrap();
        w.reserve("b", now, none).unwrap();
        assert_eq!(w.count(none), 2);
        assert!(w.reserve("c", now, none).is_none(), "a third stranger waits for the sweep");
        assert!(w.reserve("a", now, none).is_some(), "asking again for a waiting ID takes no more room");
        assert!(w.reserve("c", now, |p| p == "a").is_some(), "a used identity makes room at once");
        assert_eq!(w.count(none), 2, "and is forgotten");
        w.reserve("d", now, |p| p == "b").unwrap();
        let before = now - k8s_openapi::jiff::SignedDuration::from_secs(60);
        w.replace([("x".to_owned(), before)], before);
        assert_eq!(w.count(none), 3, "what the sweep found, and what was issued since (it may be issued still)");
        assert!(w.reserve("y", now, none).is_none());
        w.replace([], now + k8s_openapi::jiff::SignedDuration::from_secs(1));
        assert_eq!(w.count(none), 0);
    }

    #[test]
    fn places_are_taken_at_once_and_given_back_when_nothing_was_issued() {
        let w = Waiting::new(2);
        let (now, none) = (Timestamp::now(), |_: &str| false);
        let a = w.reserve("a", now, none).unwrap();
        let _b = w.reserve("b", now, none).unwrap();
        assert_eq!(w.reserve("c", now, none), None, "the third waits: the cap is taken at once");
        let again = w.reserve("a", now, none).unwrap();
        w.release("a", again);
        assert_eq!(w.count(none), 2, "giving back a place not taken leaves the first");
        w.release("a", a);
        assert_eq!(w.count(none), 1);
        assert!(w.reserve("c", now, none).is_some());
    }
}
