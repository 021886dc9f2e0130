//! The resourceVersions our own settled status writes left objects at, so that the watch event
//! that only tells such a write back (its echo) starts no reconcile of its own.
//!
//! A reconcile that reached a verdict (the peer answered, or it did not) writes the status it
//! found and asks to come back after its requeue. The watch tells that write back a moment
//! later, and the controller took it for a change and reconciled again at once: a second health
//! check of the peer, which could only find what the first had just written. When 10,000 peers
//! came back at once, that was 10,000 checks more in the minute that had the least room for
//! them.
//!
//! Only an echo is skipped. An event at another resourceVersion (anyone's change, before or
//! after our write) starts a reconcile as before, and a write that found the object changed by
//! someone else since its reconcile read it records nothing. An event that arrives while our
//! write is still on its way is held until the write's answer tells whether it is the echo:
//! then it is dropped, or handed back to be reconciled ([`Writing::done`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;

/// How long a recorded write waits for its echo before it is forgotten (a watch tells a write
/// back within seconds; an object deleted meanwhile never tells it).
const FORGOTTEN_AFTER: Duration = Duration::from_secs(60);

/// What is known of our last status write of each object, by key.
#[derive(Debug)]
pub struct OwnWrites {
    inner: Mutex<Inner>,
    /// Echoes skipped, held or not.
    skipped: Counter,
}

#[derive(Debug)]
struct Inner {
    entries: HashMap<String, Entry>,
    pruned: Instant,
}

#[derive(Debug)]
enum Entry {
    /// On its way; the versions of the changes heard meanwhile.
    Writing(Vec<String>),
    /// Settled, and changed nothing but its own fields: its echo is at this version.
    Written(String, Instant),
}

/// What a change heard by the watch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// Someone's change (or one we cannot tell): reconcile.
    Change,
    /// Only our settled write told back: nothing to do.
    Echo,
    /// Our write is on its way: held until it answers ([`Writing::done`]).
    Held,
}

impl Default for OwnWrites {
    fn default() -> Self {
        Self::counting(Counter::default())
    }
}

impl OwnWrites {
    /// Counting the echoes it skips in `skipped`.
    pub fn counting(skipped: Counter) -> Self {
        Self { inner: Mutex::new(Inner { entries: HashMap::new(), pruned: Instant::now() }), skipped }
    }

    /// A write of `key` starts: changes heard until it answers are held until
    /// [`Writing::done`] (call it whether the write succeeded or not; a guard dropped without
    /// it, as by a shutdown, only clears the entry).
    pub fn writing<'a>(&'a self, key: &str) -> Writing<'a> {
        let mut inner = self.inner.lock().expect("not poisoned");
        inner.prune();
        inner.entries.insert(key.to_owned(), Entry::Writing(vec![]));
        Writing { writes: self, key: key.to_owned(), open: true }
    }

    /// What a change of `key`, seen by the watch at `version`, is.
    pub fn heard(&self, key: &str, version: Option<&str>) -> Heard {
        let Some(version) = version else { return Heard::Change };
        let mut inner = self.inner.lock().expect("not poisoned");
        match inner.entries.get_mut(key) {
            Some(Entry::Writing(held)) => {
                held.push(version.to_owned());
                Heard::Held
            }
            Some(Entry::Written(v, _)) if v == version => {
                // Told once: a relist that shows it again is taken as a change.
                inner.entries.remove(key);
                self.skipped.inc();
                Heard::Echo
            }
            _ => Heard::Change,
        }
    }

    /// Whether no write is on its way or waits for its echo.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.inner.lock().expect("not poisoned").entries.is_empty()
    }

    /// Ends the write of `key`: `echo` is the version a settled write that changed nothing
    /// else left it at. Whether a change heard meanwhile was someone else's.
    fn end(&self, key: &str, echo: Option<String>) -> bool {
        let mut inner = self.inner.lock().expect("not poisoned");
        let held = match inner.entries.remove(key) {
            Some(Entry::Writing(held)) => held,
            _ => vec![],
        };
        let someone_elses = held.iter().any(|v| Some(v) != echo.as_ref());
        if let Some(version) = echo {
            if held.contains(&version) {
                // Told back while on its way: dropped then.
                self.skipped.inc();
            } else {
                inner.entries.insert(key.to_owned(), Entry::Written(version, Instant::now()));
            }
        }
        someone_elses
    }
}

impl Inner {
    /// Forgets, once a minute, the writes whose echo never came.
    fn prune(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.pruned) >= FORGOTTEN_AFTER {
            self.entries.retain(|_, e| !matches!(e, Entry::Written(_, at) if now.duration_since(*at) >= FORGOTTEN_AFTER));
            self.pruned = now;
        }
    }
}

/// A status write on its way ([`OwnWrites::writing`]).
#[must_use]
pub struct Writing<'a> {
    writes: &'a OwnWrites,
    key: String,
    open: bool,
}

impl Writing<'_> {
    /// The write answered. `echo`: the version it left the object at, when the round was
    /// settled and nothing but our fields changed (its echo is then skipped); `None`
    /// otherwise. Returns whether a change heard while it was on its way must be reconciled.
    pub fn done(mut self, echo: Option<String>) -> bool {
        self.open = false;
        self.writes.end(&self.key, echo)
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if self.open {
            self.writes.end(&self.key, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_echo_of_a_settled_write_is_skipped_and_only_once() {
        let w = OwnWrites::default();
        assert!(!w.writing("a").done(Some("7".into())), "nothing heard meanwhile");
        assert_eq!(w.heard("a", Some("6")), Heard::Change, "an event from before our write");
        assert_eq!(w.heard("b", Some("7")), Heard::Change, "another object");
        assert_eq!(w.heard("a", None), Heard::Change, "no version: a change");
        assert_eq!(w.heard("a", Some("7")), Heard::Echo);
        assert_eq!(w.heard("a", Some("7")), Heard::Change, "told once: a relist showing it again is a change");
        assert!(w.is_empty());
        assert_eq!(w.skipped.get(), 1);
    }

    #[test]
    fn an_echo_heard_before_the_answer_is_held_then_dropped() {
        let w = OwnWrites::default();
        let write = w.writing("a");
        assert_eq!(w.heard("a", Some("7")), Heard::Held);
        assert!(!write.done(Some("7".into())), "it was the echo: nothing to reconcile");
        assert!(w.is_empty(), "nothing left to wait for");
        assert_eq!(w.skipped.get(), 1, "counted as skipped");
    }

    #[test]
    fn someone_elses_change_heard_meanwhile_is_handed_back() {
        let w = OwnWrites::default();
        let write = w.writing("a");
        assert_eq!(w.heard("a", Some("6")), Heard::Held);
        assert!(write.done(Some("7".into())), "version 6 was not ours");
        assert_eq!(w.heard("a", Some("7")), Heard::Echo, "ours still comes back as an echo");
    }

    #[test]
    fn a_write_not_settled_or_failed_skips_nothing() {
        let w = OwnWrites::default();
        let write = w.writing("a");
        assert_eq!(w.heard("a", Some("7")), Heard::Held);
        assert!(write.done(None), "not settled: its echo is reconciled");
        assert_eq!(w.heard("a", Some("7")), Heard::Change);

        let write = w.writing("b");
        assert_eq!(w.heard("b", Some("3")), Heard::Held);
        drop(write);
        assert!(w.is_empty(), "a dropped write leaves nothing");
        assert_eq!(w.heard("b", Some("3")), Heard::Change);
    }
}
