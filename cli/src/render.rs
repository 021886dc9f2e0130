//! Everything the plugin prints, as text (pure): `-o table|wide|json|yaml`.

use serde::Serialize;

use liqo_api::summary::{Peer, Phase};
use liqo_api::terminal::printable;

/// `-o`: how objects are printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Columns, like `kubectl get`.
    #[default]
    Table,
    /// More columns.
    Wide,
    Json,
    Yaml,
}

/// Aligned columns, three spaces apart, like `kubectl get`. Every cell is made printable
/// (what a peer wrote cannot drive the terminal, nor break a row).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let n = header.len();
    let cells = |r: &Vec<String>| r.iter().map(|c| printable(c).into_owned()).collect::<Vec<_>>();
    let all: Vec<Vec<String>> = std::iter::once(header.iter().map(|h| (*h).to_owned()).collect()).chain(rows.iter().map(cells)).collect();
    let widths: Vec<usize> = (0..n).map(|i| all.iter().map(|r| r.get(i).map_or(0, |c| c.chars().count())).max().unwrap_or(0)).collect();
    all.iter()
        .map(|r| {
            let cells: Vec<String> = (0..n).map(|i| format!("{:<w$}", r.get(i).map_or("", String::as_str), w = widths[i])).collect();
            format!("{}\n", cells.join("   ").trim_end())
        })
        .collect()
}

/// `value` as JSON (pretty) or YAML.
pub fn structured<T: Serialize>(value: &T, output: Output) -> String {
    match output {
        Output::Yaml => serde_yaml::to_string(value).expect("plain data serializes"),
        _ => serde_json::to_string_pretty(value).expect("plain data serializes") + "\n",
    }
}

fn yes_no(b: bool) -> String {
    if b { "true".into() } else { "false".into() }
}

/// A phase in a cell: `True`, or `False/Reason`.
fn cell(p: Option<&Phase>) -> String {
    match p {
        Some(p) if p.status == "True" => "True".into(),
        Some(p) => format!("{}/{}", p.status, p.reason),
        None => "-".into(),
    }
}

/// The peers, one row each.
pub fn peers(peers: &[Peer], wide: bool) -> String {
    use liqo_api::reasons::ConditionType as T;
    let mut header = vec!["NAME", "CLUSTER-ID", "TYPE", "JOIN", "OUTGOING", "INCOMING", "STATE"];
    if wide {
        header.extend(["TRUSTED", "AUTHENTICATED", "REACHABLE", "CA-VERIFIED", "AUTH-URL", "API-URL"]);
    }
    let rows: Vec<Vec<String>> = peers
        .iter()
        .map(|p| {
            let mut row = vec![
                p.name.clone(),
                p.cluster_id.clone(),
                p.discovery_type.clone(),
                yes_no(p.join),
                yes_no(p.outgoing),
                yes_no(p.incoming),
                p.state(),
            ];
            if wide {
                row.extend([
                    cell(p.phase(T::Trusted)),
                    cell(p.phase(T::Authenticated)),
                    cell(p.phase(T::RemoteReachable)),
                    cell(p.phase(T::CaVerified)),
                    p.auth_url.clone().unwrap_or_else(|| "-".into()),
                    p.api_url.clone().unwrap_or_else(|| "-".into()),
                ]);
            }
            row
        })
        .collect();
    table(&header, &rows)
}

/// Key/value lines, the keys aligned, the values made printable.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs.iter().map(|(k, v)| format!("{k:<w$}   {}\n", printable(v))).collect()
}

/// Every phase of a peer with its message and hint.
pub fn phases(phases: &[Phase]) -> String {
    let mut out = String::new();
    let w = phases.iter().map(|p| p.type_.len()).max().unwrap_or(0);
    for p in phases {
        // A failing phase says since when (the condition's lastTransitionTime).
        let since = match (&p.last_transition_time, p.status == "False" && !p.passed()) {
            (Some(t), true) => format!(" (since {t})"),
            _ => String::new(),
        };
        out.push_str(&format!("  {:<w$}   {:<7}   {}: {}{since}\n", p.type_, p.status, p.reason, printable(&p.message)));
        if !p.hint.is_empty() && p.status == "False" && !p.passed() {
            out.push_str(&format!("  {:<w$}   {:<7}   hint: {}\n", "", "", p.hint));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_peer_wrote_is_printed_not_obeyed() {
        let hostile = "beta\x1b[2J\x1b]0;pwned\x07\nfake-row".to_owned();
        let t = table(&["NAME", "ID"], &[vec![hostile.clone(), "1".into()]]);
        assert!(!t.contains('\x1b') && !t.contains('\x07'), "{t:?}");
        assert_eq!(t.lines().count(), 2, "no row of its own: {t}");
        let f = fields(&[("CLUSTER-NAME", hostile)]);
        assert_eq!(f, "CLUSTER-NAME   beta\\x1b[2J\\x1b]0;pwned\\x07\\x0afake-row\n");
    }

    #[test]
    fn columns_align_on_the_widest_cell() {
        let t = table(&["A", "LONGER"], &[vec!["xyz".into(), "1".into()], vec!["q".into(), "22".into()]]);
        assert_eq!(t, "A     LONGER\nxyz   1\nq     22\n");
    }
}
