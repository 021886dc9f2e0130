//! The record of when the reconciler last checked each joined peer: ConfigMap
//! `liqo-last-checks` in the Liqo namespace, one line a peer (`<ForeignCluster name> <RFC 3339
//! time>`, sorted by name) under one key. The leader writes it every half health period when
//! `--last-checks-record=true` (off by default: at 10,000 peers a write of its 580 KB cost the
//! API server about 2.6 CPU-s); the dashboard and `kubectl liqo status` read it to say "checked
//! 12 s ago".
//!
//! A check that changes nothing writes no status (10,000 peers would cost the API server a
//! write each every period), so the ForeignClusters cannot say when they were last looked at:
//! this one object does, for every peer, at the cost of one write every half period. One key,
//! not a key a peer: the API server then tracks one managed field, not 10,000. It is capped
//! below the API server's 1 MiB limit for a ConfigMap ([`MAX_BYTES`]): past that (about
//! 15,000 peers named by their cluster IDs) the peers that do not fit are left out, counted in
//! the annotation [`OMITTED_ANNOTATION`].

use k8s_openapi::jiff::Timestamp;

/// The ConfigMap's name, in the Liqo namespace.
pub const CONFIGMAP: &str = "liqo-last-checks";
/// Its one data key.
pub const KEY: &str = "last-checks";
/// How many peers did not fit (absent: none).
pub const OMITTED_ANNOTATION: &str = "discovery.liqo.io/last-checks-omitted";
/// The most the record's text holds: room under the 1 MiB a ConfigMap may hold, with its
/// metadata.
pub const MAX_BYTES: usize = 900 * 1024;

/// The record's text for `checks` (ForeignCluster name, when it was last checked), sorted by
/// name, and how many did not fit in `max_bytes` (pure).
pub fn render(checks: &mut [(String, Timestamp)], max_bytes: usize) -> (String, usize) {
    checks.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = String::with_capacity(checks.len().saturating_mul(60).min(max_bytes));
    let mut omitted = 0;
    for (name, at) in checks.iter() {
        let line = format!("{name} {}\n", at.round(k8s_openapi::jiff::Unit::Second).unwrap_or(*at));
        if text.len() + line.len() > max_bytes {
            omitted += 1;
            continue;
        }
        text.push_str(&line);
    }
    (text, omitted)
}

/// The record read back: (name, time) sorted by name. A line that is not a name and a time
/// is skipped (pure: the text is whoever wrote the ConfigMap's).
pub fn parse(text: &str) -> Vec<(Box<str>, Timestamp)> {
    let mut out: Vec<(Box<str>, Timestamp)> = text
        .lines()
        .filter_map(|line| {
            let (name, at) = line.split_once(' ')?;
            Some((name.into(), at.trim().parse().ok()?))
        })
        .filter(|(name, _): &(Box<str>, Timestamp)| !name.is_empty())
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|b, a| a.0 == b.0);
    out
}

/// When `name` was last checked, in a parsed record (pure).
pub fn find(record: &[(Box<str>, Timestamp)], name: &str) -> Option<Timestamp> {
    record.binary_search_by(|(n, _)| (**n).cmp(name)).ok().map(|i| record[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_record_reads_back_as_written_sorted_to_the_second() {
        let mut checks = vec![("b".to_owned(), t("2026-12-04T15:00:12.7Z")), ("a".to_owned(), t("2026-12-04T15:00:01Z"))];
        let (text, omitted) = render(&mut checks, MAX_BYTES);
        assert_eq!(text, "a 2026-12-04T15:00:01Z\nb 2026-12-04T15:00:13Z\n");
        assert_eq!(omitted, 0);
        let record = parse(&text);
        assert_eq!(find(&record, "a"), Some(t("2026-12-04T15:00:01Z")));
        assert_eq!(find(&record, "b"), Some(t("2026-12-04T15:00:13Z")));
        assert_eq!(find(&record, "c"), None);
    }

    #[test]
    fn what_does_not_fit_is_counted_not_cut_in_half() {
        let mut checks: Vec<(String, Timestamp)> = (0..10).map(|i| (format!("peer-{i}"), t("2026-12-04T15:00:00Z"))).collect();
        let line = "peer-0 2026-12-04T15:00:00Z\n".len();
        let (text, omitted) = render(&mut checks, line * 3 + 5);
        assert_eq!((text.lines().count(), omitted), (3, 7));
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn a_hostile_record_is_read_without_panic() {
        let record = parse(
            "\n no-name\nx not-a-time\n 2026-12-04T15:00:00Z\nz 2026-12-04T15:00:00Z\nz 2026-12-04T16:00:00Z\ny  2026-12-04T15:00:00Z",
        );
        assert_eq!(record.len(), 2, "{record:?}");
        assert_eq!(find(&record, "z"), Some(t("2026-12-04T15:00:00Z")), "the first of two lines for a name");
        assert_eq!(find(&record, "y"), Some(t("2026-12-04T15:00:00Z")), "spaces around the time are not a fault");
    }

    #[test]
    fn ten_thousand_peers_named_by_cluster_id_fit() {
        let mut checks: Vec<(String, Timestamp)> =
            (0..10_000).map(|i| (format!("{:08x}-0000-4000-8000-{:012x}", i, i), t("2026-12-04T15:00:00Z"))).collect();
        let (text, omitted) = render(&mut checks, MAX_BYTES);
        assert_eq!(omitted, 0);
        assert!(text.len() < 600 * 1024, "{} bytes", text.len());
    }
}
