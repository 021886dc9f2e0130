//! How our watches retry after their API server failed them: soon, doubling, never longer
//! than [`WATCH_RETRY_MAX`], so every watch is back within that of the API server answering
//! again. (kube's default grows to 30 s and resets only after 2 minutes of success: a few
//! short outages in a row left a controller deaf for half a minute.)

use std::time::Duration;

/// The first retry.
pub const WATCH_RETRY_MIN: Duration = Duration::from_millis(200);
/// The longest wait between retries (a retry costs one request).
pub const WATCH_RETRY_MAX: Duration = Duration::from_secs(1);

/// The backoff of our watches (see the module).
#[derive(Clone, Debug)]
pub struct WatchBackoff {
    next: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: WATCH_RETRY_MIN }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (now * 2).min(WATCH_RETRY_MAX);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = WATCH_RETRY_MIN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::utils::Backoff;

    #[test]
    fn retries_double_up_to_the_cap_and_start_over_after_a_success() {
        let mut b = WatchBackoff::default();
        let waits: Vec<u64> = b.by_ref().take(6).map(|d| d.as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1000, 1000, 1000]);
        b.reset();
        assert_eq!(b.next(), Some(WATCH_RETRY_MIN));
    }
}
