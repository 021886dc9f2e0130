//! How one round of a broadcaster went, when the next one runs, and the words it is told
//! with in the PeeringRequest's status (as our broadcaster's report).

use std::time::Duration;

use liqo_api::reasons::Reason;
use serde::{Deserialize, Serialize};

/// How a round went, as our broadcaster reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Round {
    Created,
    KubeconfigMissing,
    /// 401: the token is not known (a new kubeconfig restarts the broadcaster).
    Refused,
    /// 403: reported as a refusal, but tried again soon (the hub may not have read the binding
    /// made for this token yet).
    Forbidden,
    Failed,
}

impl Round {
    /// When the next round runs, as our broadcaster's `retry_after`: a period after a success or
    /// a 401 (new credentials restart it at once), sooner after any other failure (the hub
    /// busy or not answering, its RBAC not caught up, the kubeconfig not there yet), so that a
    /// peer does not wait a whole period for a hub that was briefly behind; backing off to the
    /// period over `failures` in a row, at the broadcaster's place `spread` in the window.
    pub fn next_after(self, period: Duration, failures: u32, spread: f64) -> Duration {
        match self {
            Round::Created | Round::Refused => period,
            Round::Forbidden | Round::Failed | Round::KubeconfigMissing => {
                liqo_reconciler::incoming::broadcaster::backoff(period, failures, spread)
            }
        }
    }

    /// The state, condition status, reason and message of our broadcaster's report
    /// (`liqo_reconciler::incoming::broadcaster::report`).
    pub fn words(self) -> (&'static str, &'static str, Reason, &'static str) {
        match self {
            Round::Created => ("Created", "True", Reason::Published, "our Advertisement is in the peer's cluster"),
            Round::KubeconfigMissing => {
                ("Pending", "False", Reason::KubeconfigMissing, "the kubeconfig Secret is missing: waiting for the peer to put it back")
            }
            Round::Refused | Round::Forbidden => ("Refused", "False", Reason::PeerRefused, "the peer refuses the kubeconfig it gave us"),
            Round::Failed => ("Pending", "False", Reason::RemoteUnreachable, "cannot reach the peer's cluster yet"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_round_is_retried_sooner_than_a_period_a_refused_one_is_not() {
        let period = Duration::from_secs(120);
        let retry = liqo_reconciler::context::RETRY;
        assert_eq!(Round::Created.next_after(period, 0, 1.0), period);
        assert_eq!(Round::Refused.next_after(period, 1, 1.0), period);
        assert_eq!(Round::Forbidden.next_after(period, 1, 1.0), retry, "a 403 may pass soon");
        assert_eq!(Round::KubeconfigMissing.next_after(period, 1, 1.0), retry);
        assert_eq!(Round::Failed.next_after(period, 1, 1.0), retry);
        assert_eq!(Round::Failed.next_after(period, 2, 1.0), retry * 2, "backing off");
        assert_eq!(Round::Failed.next_after(period, 9, 1.0), period, "up to the period");
        assert_eq!(Round::Failed.next_after(period, 1, 0.0), retry / 2, "at its place in the window");
        assert_eq!(Round::Failed.next_after(Duration::from_secs(3), 1, 1.0), Duration::from_secs(3));
    }
}
