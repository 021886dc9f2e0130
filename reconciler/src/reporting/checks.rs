//! When each joined peer was last checked, and how long ago the oldest was: what tells a
//! reconciler that keeps up from one that idles while its peers go stale.
//!
//! A check counts whatever it found (the peer answered, refused, or took no connection): the
//! point is that the reconciler looked. A peer is forgotten when it stops being joined.
//! Exported as `liqo_reconciler_oldest_check_seconds`; the fleet holds it against two health
//! periods plus the connect wait whenever the reconciler has turns to spare.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The last check of each joined peer, by ForeignCluster name.
#[derive(Debug, Default)]
pub struct LastChecks {
    at: Mutex<HashMap<String, Instant>>,
}

impl LastChecks {
    /// `name` was checked at `at`.
    pub fn checked(&self, name: &str, at: Instant) {
        let mut map = self.at.lock().expect("not poisoned");
        match map.get_mut(name) {
            Some(last) => *last = (*last).max(at),
            None => {
                map.insert(name.to_owned(), at);
            }
        }
    }

    /// `name` is no longer joined: it has no check to keep.
    pub fn forget(&self, name: &str) {
        self.at.lock().expect("not poisoned").remove(name);
    }

    /// How long ago the least recently checked peer was checked, at `now` (`None`: no peer).
    pub fn oldest(&self, now: Instant) -> Option<Duration> {
        let map = self.at.lock().expect("not poisoned");
        map.values().min().map(|oldest| now.saturating_duration_since(*oldest))
    }

    /// Every peer's last check, as wall-clock times at `now` (`Instant`s have no calendar).
    pub fn at_times(&self, now: (Instant, std::time::SystemTime)) -> Vec<(String, k8s_openapi::jiff::Timestamp)> {
        let map = self.at.lock().expect("not poisoned");
        map.iter()
            .filter_map(|(name, at)| {
                let wall = now.1.checked_sub(now.0.saturating_duration_since(*at))?;
                Some((name.clone(), k8s_openapi::jiff::Timestamp::try_from(wall).ok()?))
            })
            .collect()
    }

    /// How many peers have a check on record.
    pub fn len(&self) -> usize {
        self.at.lock().expect("not poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_check_is_the_least_recent_of_the_joined_peers() {
        let checks = LastChecks::default();
        let t0 = Instant::now();
        assert_eq!(checks.oldest(t0), None, "no peer, no age");
        checks.checked("a", t0);
        checks.checked("b", t0 + Duration::from_secs(10));
        assert_eq!(checks.oldest(t0 + Duration::from_secs(30)), Some(Duration::from_secs(30)));
        checks.checked("a", t0 + Duration::from_secs(25));
        assert_eq!(checks.oldest(t0 + Duration::from_secs(30)), Some(Duration::from_secs(20)), "b is now the oldest");
        checks.checked("b", t0 + Duration::from_secs(5));
        assert_eq!(checks.oldest(t0 + Duration::from_secs(30)), Some(Duration::from_secs(20)), "a late report never goes back");
        checks.forget("b");
        assert_eq!(checks.oldest(t0 + Duration::from_secs(30)), Some(Duration::from_secs(5)));
        assert_eq!(checks.len(), 1);
    }
}
