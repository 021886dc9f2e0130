//! How our watches retry after their API server failed them: soon, doubling, never longer
//! than [`WATCH_RETRY_MAX`], so every watch is back within that of the API server answering
//! again. (kube's default grows to 30 s and resets only after 2 minutes of success: a few
//! short outages in a row left a controller deaf for half a minute.)
//!
//! The retries start over at [`WATCH_RETRY_MIN`] only once the watch has been answered for
//! [`WATCH_STEADY`]. A watcher reports a success (its `Init`) as it starts each list, before
//! the list's request is answered: a list refused every time (RBAC not granted yet, a
//! resource not installed) would otherwise be asked again every 200 ms for ever, instead of
//! every second.

use std::time::{Duration, Instant};

/// The first retry.
pub const WATCH_RETRY_MIN: Duration = Duration::from_millis(200);
/// The longest wait between retries (a retry costs one request).
pub const WATCH_RETRY_MAX: Duration = Duration::from_secs(1);
/// How long a watch must have been answered before its retries start over.
pub const WATCH_STEADY: Duration = Duration::from_secs(5);

/// The backoff of our watches (see the module).
#[derive(Clone, Debug)]
pub struct WatchBackoff {
    next: Duration,
    /// Since when the watch has been answered without a failure.
    answered_since: Option<Instant>,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: WATCH_RETRY_MIN, answered_since: None }
    }
}

impl WatchBackoff {
    /// The wait before the retry of a failure at `now`.
    pub fn failed_at(&mut self, now: Instant) -> Duration {
        if self.answered_since.take().is_some_and(|since| now.saturating_duration_since(since) >= WATCH_STEADY) {
            self.next = WATCH_RETRY_MIN;
        }
        let wait = self.next;
        self.next = (wait * 2).min(WATCH_RETRY_MAX);
        wait
    }

    /// The watch was answered at `now`.
    pub fn answered_at(&mut self, now: Instant) {
        self.answered_since.get_or_insert(now);
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.failed_at(Instant::now()))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.answered_at(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(waits: impl IntoIterator<Item = Duration>) -> Vec<u64> {
        waits.into_iter().map(|d| d.as_millis() as u64).collect()
    }

    #[test]
    fn retries_double_up_to_the_cap() {
        let mut b = WatchBackoff::default();
        let t0 = Instant::now();
        assert_eq!(millis((0..6).map(|_| b.failed_at(t0))), [200, 400, 800, 1000, 1000, 1000]);
    }

    #[test]
    fn retries_start_over_only_after_the_watch_was_answered_for_a_while() {
        let mut b = WatchBackoff::default();
        let t0 = Instant::now();
        let after = |s: u64| t0 + Duration::from_millis(s);
        assert_eq!(millis([b.failed_at(after(0)), b.failed_at(after(200)), b.failed_at(after(600))]), [200, 400, 800]);
        // A list started (the watcher says so) and refused at once: no start over.
        b.answered_at(after(1400));
        assert_eq!(millis([b.failed_at(after(1410))]), [1000]);
        b.answered_at(after(2410));
        b.answered_at(after(4000));
        assert_eq!(millis([b.failed_at(after(7000))]), [1000], "answered for 4.59 s: not yet steady");
        // Answered for longer than WATCH_STEADY, then broken: back soon.
        b.answered_at(after(8000));
        b.answered_at(after(12_000));
        assert_eq!(millis([b.failed_at(after(13_000)), b.failed_at(after(13_200))]), [200, 400]);
    }

    #[test]
    fn kubes_reset_counts_as_an_answer() {
        use kube::runtime::utils::Backoff;
        let mut b = WatchBackoff::default();
        assert_eq!(b.next(), Some(WATCH_RETRY_MIN));
        b.reset();
        assert_eq!(b.next(), Some(WATCH_RETRY_MIN * 2), "a reset followed at once by a failure does not start over");
    }
}
