//! Following a peering live (pure): which phases completed since the last look, and what the
//! one in progress waits for. `peer --wait` prints it as it goes — on a terminal a spinner on
//! the phase in progress, piped one plain line per change.

use liqo_api::summary::{Peer, Phase};
use liqo_api::terminal::printable;

/// One thing to tell the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A phase completed (in order).
    Done(Phase),
    /// The phase in progress and where it stands (shown again only when it changes).
    Waiting { phase: String, reason: String, message: String },
}

/// What was told so far.
#[derive(Debug, Default)]
pub struct Progress {
    done: usize,
    waiting: Option<(String, String)>,
}

impl Progress {
    /// The new lines `peer` gives, in order.
    pub fn step(&mut self, peer: &Peer) -> Vec<Line> {
        let mut lines = vec![];
        while let Some(p) = peer.phases.get(self.done).filter(|p| p.passed()) {
            lines.push(Line::Done(p.clone()));
            self.done += 1;
            self.waiting = None;
        }
        if let Some(p) = peer.phases.get(self.done) {
            let now = (p.type_.clone(), p.reason.clone());
            if self.waiting.as_ref() != Some(&now) {
                lines.push(Line::Waiting { phase: p.type_.clone(), reason: p.reason.clone(), message: p.message.clone() });
                self.waiting = Some(now);
            }
        } else if peer.phases.is_empty() && self.waiting.is_none() {
            let (phase, reason) = ("Trusted".to_owned(), "Pending".to_owned());
            lines.push(Line::Waiting { phase: phase.clone(), reason: reason.clone(), message: "the reconciler has not looked yet".into() });
            self.waiting = Some((phase, reason));
        }
        lines
    }
}

/// A completed phase as a line.
pub fn done_line(p: &Phase) -> String {
    format!("✓ {:<15} {}: {}", p.type_, p.reason, printable(&p.message))
}

/// The phase in progress as a line (behind a spinner on a terminal).
pub fn waiting_line(phase: &str, reason: &str, message: &str) -> String {
    format!("{phase:<15} {reason}: {}", printable(message))
}

/// Spinner frames, one per tick.
pub const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(phases: &[(&str, &str, &str)]) -> Peer {
        let conditions: Vec<serde_json::Value> = phases
            .iter()
            .map(|(t, s, r)| serde_json::json!({"type": t, "status": s, "reason": r, "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"}))
            .collect();
        let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "p"},
            "spec": {"join": true}, "status": {"conditions": conditions}
        }))
        .unwrap();
        Peer::of(&fc)
    }

    fn names(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| match l {
                Line::Done(p) => format!("done {}", p.type_),
                Line::Waiting { phase, reason, .. } => format!("wait {phase} {reason}"),
            })
            .collect()
    }

    #[test]
    fn each_phase_is_told_once_in_order_and_waits_only_when_they_change() {
        let mut p = Progress::default();
        assert_eq!(names(&p.step(&peer(&[]))), ["wait Trusted Pending"]);
        assert!(p.step(&peer(&[])).is_empty(), "nothing new");
        let first = peer(&[("Trusted", "False", "UntrustedAllowed"), ("Authenticated", "Unknown", "Waiting")]);
        assert_eq!(names(&p.step(&first)), ["done Trusted", "wait Authenticated Waiting"]);
        assert!(p.step(&first).is_empty());
        let all = peer(&[
            ("Trusted", "False", "UntrustedAllowed"),
            ("Authenticated", "True", "IdentityIssued"),
            ("RemoteReachable", "True", "Reachable"),
            ("CaVerified", "True", "Pinned"),
            ("Joined", "False", "WaitingForAdvertisement"),
        ]);
        assert_eq!(
            names(&p.step(&all)),
            ["done Authenticated", "done RemoteReachable", "done CaVerified", "wait Joined WaitingForAdvertisement"]
        );
        let joined = peer(&[
            ("Trusted", "False", "UntrustedAllowed"),
            ("Authenticated", "True", "IdentityIssued"),
            ("RemoteReachable", "True", "Reachable"),
            ("CaVerified", "True", "Pinned"),
            ("Joined", "True", "Joined"),
        ]);
        assert_eq!(names(&p.step(&joined)), ["done Joined"]);
        assert!(p.step(&joined).is_empty());
    }
}
