//! Each peer's recent states, as the dashboard saw them change: kept in memory from the
//! ForeignCluster watch, a few per peer, so a peer's page can draw its health over time. The
//! API server keeps no such history (a check that changes nothing writes nothing), so the
//! first entry of a peer says only "since the dashboard saw it". Its recent checks come from
//! the reconciler's record of the last checks (ConfigMap liqo-last-checks, written every half
//! health period), a few per peer too.

use std::collections::{HashMap, HashSet, VecDeque};

use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use liqo_api::ForeignCluster;
use liqo_api::last_checks::Record;
use liqo_api::summary::Peer;

use crate::model::Chip;

/// The changes kept a peer: the oldest go first.
pub const KEPT: usize = 24;
/// The checks kept a peer: the oldest go first.
pub const CHECKS_KEPT: usize = 16;

/// One peer's states, oldest first: each from when the dashboard saw it until the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    pub changes: VecDeque<(Timestamp, Chip)>,
    /// The first entry is the first the dashboard knew of the peer (it started, or the peer
    /// appeared), not a change it saw; stays so until that entry is dropped.
    pub first_is_start: bool,
    /// When the reconciler checked it, oldest first, as its record told them.
    pub checks: VecDeque<Timestamp>,
}

impl History {
    /// When the history begins, and whether that is when the dashboard began to look.
    pub fn since(&self) -> Option<(Timestamp, bool)> {
        self.changes.front().map(|(at, _)| (*at, self.first_is_start))
    }
}

/// Every peer's history, by ForeignCluster name.
#[derive(Debug, Default)]
pub struct Histories {
    peers: HashMap<Box<str>, History>,
    /// The names seen while the watch lists again (`Init` … `InitDone`).
    relisting: Option<HashSet<Box<str>>>,
}

impl Histories {
    /// Notes `chip` for `name` at `at`, if it is not already the peer's state.
    pub fn record(&mut self, name: &str, chip: Chip, at: Timestamp) {
        if let Some(seen) = self.relisting.as_mut() {
            seen.insert(name.into());
        }
        match self.peers.get_mut(name) {
            Some(h) if h.changes.back().map(|(_, c)| *c) == Some(chip) => {}
            Some(h) => {
                if h.changes.len() == KEPT {
                    h.changes.pop_front();
                    h.first_is_start = false;
                }
                h.changes.push_back((at, chip));
            }
            None => {
                self.peers
                    .insert(name.into(), History { changes: VecDeque::from([(at, chip)]), first_is_start: true, checks: VecDeque::new() });
            }
        }
    }

    /// Notes each peer's last check in `record` (see [`liqo_api::last_checks::Record`]) that is
    /// newer than the last it holds: a late peer's at its time; a peer shown joined and not
    /// named, at the record's "checked since" time (the earliest its check can have been).
    /// Only peers the ForeignCluster watch has shown are kept: a record never makes a peer up.
    pub fn checked(&mut self, record: &Record) {
        for (name, h) in self.peers.iter_mut() {
            let joined = h.changes.back().is_some_and(|(_, chip)| *chip == Chip::Joined);
            let at = match record.named(name) {
                Some(at) => at,
                None => match record.since {
                    Some(since) if joined => since,
                    _ => continue,
                },
            };
            if h.checks.back().is_some_and(|last| *last >= at) {
                continue;
            }
            if h.checks.len() == CHECKS_KEPT {
                h.checks.pop_front();
            }
            h.checks.push_back(at);
        }
    }

    /// Follows one event of the ForeignCluster watch, at `now`: a peer's state noted, a deleted
    /// peer forgotten, and after a new list the peers no longer there forgotten too.
    pub fn apply(&mut self, event: &Event<ForeignCluster>, now: Timestamp) {
        let name = |fc: &ForeignCluster| fc.metadata.name.clone().unwrap_or_default();
        match event {
            Event::Apply(fc) | Event::InitApply(fc) => self.record(&name(fc), Chip::of(&Peer::of(fc)), now),
            Event::Delete(fc) => {
                self.peers.remove(name(fc).as_str());
            }
            Event::Init => self.relisting = Some(HashSet::new()),
            Event::InitDone => {
                if let Some(seen) = self.relisting.take() {
                    self.peers.retain(|name, _| seen.contains(name));
                }
            }
        }
    }

    /// The history of `name`, if the dashboard has seen it.
    pub fn of(&self, name: &str) -> Option<History> {
        self.peers.get(name).cloned()
    }

    pub fn len(&self) -> usize {
        self.peers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
}

/// One stretch of a health strip: a state and the share of the window it held.
#[derive(Clone, Debug, PartialEq)]
pub struct Stretch {
    pub chip: Chip,
    pub from: Timestamp,
    /// Seconds it lasted (until the next change, or `now`).
    pub seconds: f64,
    /// Its share of the whole strip, 0 to 1.
    pub share: f64,
}

/// The stretches of `h` up to `now` (pure): each change until the next; the last until now.
pub fn stretches(h: &History, now: Timestamp) -> Vec<Stretch> {
    let Some((start, _)) = h.since() else { return Vec::new() };
    let whole = (now.as_millisecond() - start.as_millisecond()).max(1) as f64 / 1000.0;
    let ends = h.changes.iter().skip(1).map(|(at, _)| *at).chain(std::iter::once(now));
    h.changes
        .iter()
        .zip(ends)
        .map(|((from, chip), to)| {
            let seconds = (to.as_millisecond() - from.as_millisecond()).max(0) as f64 / 1000.0;
            Stretch { chip: *chip, from: *from, seconds, share: seconds / whole }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn fc(name: &str, joined: bool) -> ForeignCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": name},
            "spec": {"clusterIdentity": {"clusterID": format!("{name}-id")}, "join": true},
            "status": {"outgoing": {"joined": joined}, "conditions": [{"type": "Joined", "status": if joined { "True" } else { "False" },
                "reason": if joined { "Joined" } else { "PeerRefused" }, "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_peer_keeps_its_changes_not_its_repeats_and_a_bounded_number() {
        let mut h = Histories::default();
        h.record("p", Chip::Joining, at(0));
        h.record("p", Chip::Joining, at(5));
        h.record("p", Chip::Joined, at(10));
        let p = h.of("p").unwrap();
        assert_eq!(p.changes, VecDeque::from([(at(0), Chip::Joining), (at(10), Chip::Joined)]));
        assert_eq!(p.since(), Some((at(0), true)), "known since the dashboard saw it");
        for i in 0..100 {
            h.record("p", if i % 2 == 0 { Chip::Unreachable } else { Chip::Joined }, at(20 + i));
        }
        let p = h.of("p").unwrap();
        assert_eq!(p.changes.len(), KEPT);
        assert_eq!(p.changes.back(), Some(&(at(119), Chip::Joined)));
        assert!(!p.first_is_start, "its first entry now is a change, not when the dashboard began");
    }

    #[test]
    fn the_watch_feeds_it_and_a_new_list_forgets_the_departed() {
        let mut h = Histories::default();
        h.apply(&Event::Init, at(0));
        h.apply(&Event::InitApply(fc("a", false)), at(0));
        h.apply(&Event::InitApply(fc("b", true)), at(0));
        h.apply(&Event::InitDone, at(0));
        h.apply(&Event::Apply(fc("a", true)), at(30));
        assert_eq!(h.of("a").unwrap().changes, VecDeque::from([(at(0), Chip::Refused), (at(30), Chip::Joined)]));
        h.apply(&Event::Delete(fc("a", true)), at(40));
        assert!(h.of("a").is_none(), "a deleted peer is forgotten");
        // The watch broke while b went away: the new list no longer has it.
        h.apply(&Event::Init, at(50));
        h.apply(&Event::InitApply(fc("c", true)), at(50));
        assert!(h.of("b").is_some(), "kept until the list is whole");
        h.apply(&Event::InitDone, at(50));
        assert!(h.of("b").is_none());
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn the_record_adds_each_peers_new_checks_a_bounded_number() {
        let mut h = Histories::default();
        h.record("a", Chip::Joined, at(0));
        h.record("b", Chip::Joined, at(0));
        h.checked(&Record::naming([("a".into(), at(10)), ("b".into(), at(12)), ("stranger".into(), at(12))]));
        h.checked(&Record::naming([("a".into(), at(10)), ("b".into(), at(42))]));
        assert_eq!(h.of("a").unwrap().checks, VecDeque::from([at(10)]), "the same check told twice is one");
        assert_eq!(h.of("b").unwrap().checks, VecDeque::from([at(12), at(42)]));
        assert!(h.of("stranger").is_none(), "a record never makes a peer up");
        h.checked(&Record::naming([("b".into(), at(40))]));
        assert_eq!(h.of("b").unwrap().checks.len(), 2, "an older record (a restarted leader's) adds nothing");
        for i in 0..40 {
            h.checked(&Record::naming([("a".into(), at(100 + 30 * i))]));
        }
        let a = h.of("a").unwrap();
        assert_eq!((a.checks.len(), a.checks.back()), (CHECKS_KEPT, Some(&at(100 + 30 * 39))));
    }

    #[test]
    fn peers_checked_on_time_tick_at_the_records_since_if_joined() {
        let mut h = Histories::default();
        h.record("on-time", Chip::Joined, at(0));
        h.record("late", Chip::Joined, at(0));
        h.record("refused", Chip::Refused, at(0));
        let record = Record { since: Some(at(40)), late: vec![("late".into(), at(5))] };
        h.checked(&record);
        h.checked(&record);
        assert_eq!(h.of("on-time").unwrap().checks, VecDeque::from([at(40)]), "once, at the earliest it can have been");
        assert_eq!(h.of("late").unwrap().checks, VecDeque::from([at(5)]), "a late peer at its own time");
        assert!(h.of("refused").unwrap().checks.is_empty(), "a peer not joined is not checked");
    }

    #[test]
    fn stretches_last_until_the_next_change_and_share_the_window() {
        let mut h = Histories::default();
        h.record("p", Chip::Joining, at(0));
        h.record("p", Chip::Joined, at(30));
        h.record("p", Chip::Unreachable, at(90));
        let s = stretches(&h.of("p").unwrap(), at(120));
        let got: Vec<_> = s.iter().map(|s| (s.chip, s.seconds, (s.share * 100.0).round())).collect();
        assert_eq!(got, [(Chip::Joining, 30.0, 25.0), (Chip::Joined, 60.0, 50.0), (Chip::Unreachable, 30.0, 25.0)]);
        let single = stretches(
            &h.of("p")
                .map(|mut p| {
                    p.changes.truncate(1);
                    p
                })
                .unwrap(),
            at(0),
        );
        assert_eq!(single.len(), 1, "a state seen this very moment is still drawn");
    }
}
