//! The record of when the reconciler last checked each joined peer: ConfigMap
//! `liqo-last-checks` in the Liqo namespace, one key. The leader writes it every half health
//! period (`--last-checks-record`, on by default); the dashboard and `kubectl liqo status` read
//! it to say "checked within 20 s" or "checked 3 min ago".
//!
//! A check that changes nothing writes no status (10,000 peers would cost the API server a
//! write each every period), so the ForeignClusters cannot say when they were last looked at.
//! This record does, at a size that grows with the peers that are late, not with the peers:
//!
//! ```text
//! * 2026-12-04T15:00:02Z
//! peer-b 2026-12-04T14:52:40Z
//! ```
//!
//! - The first line, `* <time>` (`*` is in no object's name), says that every peer on record and
//!   not named below was last checked at or after that time: within the last period and a
//!   half when it was written ([`late_after`]).
//! - Then one line a peer checked longer ago than that (late: unreachable peers wait their
//!   connect, a busy reconciler falls behind), `<ForeignCluster name> <time>`, sorted by name.
//!
//! At 10,000 peers checked on time it is one line: an earlier form, a line for every peer
//! (580 KB at 10,000), cost the API server seconds of CPU a write, and still reads (every peer
//! named, no `*` line). The late lines are capped below the 1 MiB a ConfigMap may hold
//! ([`MAX_BYTES`]); peers that do not fit are counted in the annotation
//! [`OMITTED_ANNOTATION`]. A peer joined after the last write and not yet checked reads as
//! checked since the `*` time until the next write, half a period later at most.

use std::time::Duration;

use k8s_openapi::jiff::{Timestamp, Unit};

/// The ConfigMap's name, in the Liqo namespace.
pub const CONFIGMAP: &str = "liqo-last-checks";
/// Its one data key.
pub const KEY: &str = "last-checks";
/// How many late peers did not fit (absent: none).
pub const OMITTED_ANNOTATION: &str = "discovery.liqo.io/last-checks-omitted";
/// The most the record's text holds: room under the 1 MiB a ConfigMap may hold, with its
/// metadata.
pub const MAX_BYTES: usize = 900 * 1024;
/// What the first line starts with: no object's name does.
const ON_TIME: &str = "*";

/// What the record says of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LastCheck {
    /// Checked at this time (a late peer, named in the record).
    At(Timestamp),
    /// Checked at or after this time (on time: not named).
    Since(Timestamp),
}

impl LastCheck {
    /// The instant it gives: the check's, or the earliest it can have been.
    pub fn time(self) -> Timestamp {
        match self {
            LastCheck::At(t) | LastCheck::Since(t) => t,
        }
    }
}

/// A record read back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Every peer on record and not in `late` was checked at or after this.
    pub since: Option<Timestamp>,
    /// The late peers: (name, when last checked), sorted by name.
    pub late: Vec<(Box<str>, Timestamp)>,
}

impl Record {
    /// A record naming each of `late` (and no "checked since" time).
    pub fn naming(late: impl IntoIterator<Item = (Box<str>, Timestamp)>) -> Self {
        let mut late: Vec<_> = late.into_iter().collect();
        late.sort_by(|a, b| a.0.cmp(&b.0));
        late.dedup_by(|b, a| a.0 == b.0);
        Self { since: None, late }
    }

    /// What the record says of `name`, a joined peer (pure). A peer that is not joined has
    /// no check to tell: ask [`Record::named`].
    pub fn find(&self, name: &str) -> Option<LastCheck> {
        self.named(name).map(LastCheck::At).or(self.since.map(LastCheck::Since))
    }

    /// What the record says of `name`: [`Record::find`] for a peer we joined, else only if it
    /// names it (pure).
    pub fn of(&self, name: &str, joined: bool) -> Option<LastCheck> {
        if joined { self.find(name) } else { self.named(name).map(LastCheck::At) }
    }

    /// When `name` was checked, if the record names it (pure).
    pub fn named(&self, name: &str) -> Option<Timestamp> {
        self.late.binary_search_by(|(n, _)| (**n).cmp(name)).ok().map(|i| self.late[i].1)
    }
}

/// How long after its last check a peer is late, for checks due every `period`: half a period
/// more (pure). A peer checked on time is checked about once a period, a little more while its
/// turn waits (the fleet's oldest check in steady state at 10,000 peers: 1.06 periods); naming
/// each of those would make every write of the record a few hundred lines.
pub fn late_after(period: Duration) -> Duration {
    period + period / 2
}

/// The record's text for `checks` (ForeignCluster name, when it was last checked) at `now`,
/// checks being due every `period`, and how many late peers did not fit in `max_bytes`
/// (pure). Times are to the second: the `*` time rounded down, so that it stays true.
pub fn render(checks: &mut [(String, Timestamp)], now: Timestamp, period: Duration, max_bytes: usize) -> (String, usize) {
    let due = now.checked_sub(late_after(period)).unwrap_or(now);
    let since = checks.iter().map(|(_, at)| *at).filter(|at| *at >= due).min();
    let mut text = String::new();
    if let Some(since) = since {
        text = format!("{ON_TIME} {}\n", Timestamp::from_second(since.as_second()).unwrap_or(since));
    }
    checks.sort_by(|a, b| a.0.cmp(&b.0));
    let mut omitted = 0;
    for (name, at) in checks.iter().filter(|(_, at)| *at < due) {
        let line = format!("{name} {}\n", at.round(Unit::Second).unwrap_or(*at));
        if text.len() + line.len() > max_bytes {
            omitted += 1;
            continue;
        }
        text.push_str(&line);
    }
    (text, omitted)
}

/// The record read back. A line that is not a name (or `*`) and a time is skipped (pure: the
/// text is whoever wrote the ConfigMap's).
pub fn parse(text: &str) -> Record {
    let (mut since, mut late) = (None, Vec::new());
    for line in text.lines() {
        let Some((name, at)) = line.split_once(' ') else { continue };
        let Ok(at) = at.trim().parse::<Timestamp>() else { continue };
        match name {
            "" => {}
            ON_TIME => since = since.or(Some(at)),
            name => late.push((name.into(), at)),
        }
    }
    Record { since, ..Record::naming(late) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const PERIOD: Duration = Duration::from_secs(30);

    #[test]
    fn peers_checked_on_time_are_one_line_and_the_late_are_named() {
        let now = t("2026-12-04T15:00:30Z");
        let mut checks = vec![
            ("c".to_owned(), t("2026-12-04T15:00:12.7Z")),
            ("b".to_owned(), t("2026-12-04T14:52:40.2Z")),
            ("a".to_owned(), t("2026-12-04T15:00:01.9Z")),
        ];
        let (text, omitted) = render(&mut checks, now, PERIOD, MAX_BYTES);
        assert_eq!(text, "* 2026-12-04T15:00:01Z\nb 2026-12-04T14:52:40Z\n", "the * time rounded down, so it stays true");
        assert_eq!(omitted, 0);
        let record = parse(&text);
        assert_eq!(record.find("a"), Some(LastCheck::Since(t("2026-12-04T15:00:01Z"))));
        assert_eq!(record.find("c"), Some(LastCheck::Since(t("2026-12-04T15:00:01Z"))));
        assert_eq!(record.find("b"), Some(LastCheck::At(t("2026-12-04T14:52:40Z"))));
        assert_eq!((record.named("a"), record.named("b")), (None, Some(t("2026-12-04T14:52:40Z"))));
    }

    #[test]
    fn a_check_a_little_past_its_period_is_on_time_and_one_half_a_period_late_is_named() {
        let now = t("2026-12-04T15:01:00Z");
        let mut checks = vec![
            ("waited-its-turn".to_owned(), t("2026-12-04T15:00:28Z")), // 32 s: 1.07 periods
            ("just-checked".to_owned(), t("2026-12-04T15:00:59Z")),
            ("late".to_owned(), t("2026-12-04T15:00:14Z")), // 46 s: past 1.5 periods
        ];
        let (text, _) = render(&mut checks, now, PERIOD, MAX_BYTES);
        assert_eq!(text, "* 2026-12-04T15:00:28Z\nlate 2026-12-04T15:00:14Z\n");
        assert_eq!(late_after(PERIOD), Duration::from_secs(45));
    }

    #[test]
    fn ten_thousand_peers_on_time_are_one_line() {
        let now = t("2026-12-04T15:00:30Z");
        let mut checks: Vec<(String, Timestamp)> = (0..10_000)
            .map(|i| (format!("{:08x}-0000-4000-8000-{:012x}", i, i), now.checked_sub(Duration::from_millis(i * 2)).unwrap()))
            .collect();
        let (text, _) = render(&mut checks, now, PERIOD, MAX_BYTES);
        assert_eq!(text, "* 2026-12-04T15:00:10Z\n");
    }

    #[test]
    fn no_peer_no_record_and_all_late_all_named() {
        let now = t("2026-12-04T15:00:30Z");
        assert_eq!(render(&mut [], now, PERIOD, MAX_BYTES), (String::new(), 0));
        assert_eq!(parse("").find("a"), None, "an empty record tells nothing");
        let mut late = vec![("a".to_owned(), t("2026-12-04T14:00:00Z"))];
        let (text, _) = render(&mut late, now, PERIOD, MAX_BYTES);
        assert_eq!(text, "a 2026-12-04T14:00:00Z\n");
        assert_eq!(parse(&text).find("other"), None, "without a * line, only the named are on record");
    }

    #[test]
    fn the_earlier_form_a_line_a_peer_still_reads() {
        let record = parse("a 2026-12-04T15:00:01Z\nb 2026-12-04T15:00:13Z\n");
        assert_eq!(record.find("a"), Some(LastCheck::At(t("2026-12-04T15:00:01Z"))));
        assert_eq!(record.find("b"), Some(LastCheck::At(t("2026-12-04T15:00:13Z"))));
        assert_eq!(record.find("c"), None);
    }

    #[test]
    fn what_does_not_fit_is_counted_not_cut_in_half() {
        let now = t("2026-12-04T16:00:00Z");
        let mut checks: Vec<(String, Timestamp)> = (0..10).map(|i| (format!("peer-{i}"), t("2026-12-04T15:00:00Z"))).collect();
        let line = "peer-0 2026-12-04T15:00:00Z\n".len();
        let (text, omitted) = render(&mut checks, now, PERIOD, line * 3 + 5);
        assert_eq!((text.lines().count(), omitted), (3, 7));
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn a_hostile_record_is_read_without_panic() {
        let record = parse(
            "\n no-name\nx not-a-time\n 2026-12-04T15:00:00Z\nz 2026-12-04T15:00:00Z\nz 2026-12-04T16:00:00Z\ny  2026-12-04T15:00:00Z\n* 2026-12-04T15:00:09Z\n* 2026-12-04T15:00:08Z\n* x",
        );
        assert_eq!(record.late.len(), 2, "{record:?}");
        assert_eq!(record.named("z"), Some(t("2026-12-04T15:00:00Z")), "the first of two lines for a name");
        assert_eq!(record.named("y"), Some(t("2026-12-04T15:00:00Z")), "spaces around the time are not a fault");
        assert_eq!(record.since, Some(t("2026-12-04T15:00:09Z")), "the first * line");
    }
}
