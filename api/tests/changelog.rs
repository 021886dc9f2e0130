//! One version, everywhere: the newest release in CHANGELOG.md is the workspace's version (what
//! `--version`, `kubectl liqo install`, the image tags and the release archives say), and each
//! release after the first has its upgrade told in docs/upgrades.md, which names no release the
//! changelog does not.

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The versions of the headings `## <prefix>X.Y.Z…` of `text`, in order, a pre-release
/// kept (`0.4.0-dev`).
fn versions(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("## ")?.strip_prefix(prefix))
        .map(|rest| {
            let word = rest.split(|c: char| c.is_whitespace() || c == ':' || c == '(').next().unwrap_or_default();
            let release = word.split('-').next().unwrap_or_default();
            let pre = word.strip_prefix(release).unwrap_or_default();
            let digits = release.split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap_or_default().trim_end_matches('.');
            if digits.is_empty() || digits.len() != release.trim_end_matches('.').len() { String::new() } else { format!("{digits}{pre}") }
        })
        .filter(|v| !v.is_empty())
        .collect()
}

/// `0.4.0` of `0.4.0-dev`: what an upgrade section names.
fn release_of(version: &str) -> String {
    version.split('-').next().unwrap_or_default().to_owned()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_newest_release_in_the_changelog_is_the_version_that_ships() {
    let releases = versions(&read("CHANGELOG.md"), "");
    assert_eq!(releases.first().map(String::as_str), Some(env!("CARGO_PKG_VERSION")), "CHANGELOG.md's newest release: {releases:?}");
    let mut sorted = releases.clone();
    sorted.sort_by_key(|v| v.split('.').map(|n| n.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>());
    sorted.reverse();
    assert_eq!(releases, sorted, "newest first");
}

#[test]
fn every_release_after_the_first_has_its_upgrade_told_and_no_other() {
    let releases = versions(&read("CHANGELOG.md"), "");
    let upgrades = versions(&read("docs/upgrades.md"), "To ");
    let after_first: Vec<String> = releases.iter().rev().skip(1).rev().map(|v| release_of(v)).collect();
    let mut told = upgrades.clone();
    told.sort();
    let mut expected = after_first.clone();
    expected.sort();
    assert_eq!(told, expected, "docs/upgrades.md's `## To X.Y.Z` sections against CHANGELOG.md's releases after the first");
}

#[test]
fn the_heading_reader_reads_versions_only() {
    assert_eq!(versions("## 0.3.0\n## To 0.2.0: from 0.1\n## 0.1.0\n## Within", ""), ["0.3.0", "0.1.0"]);
    assert_eq!(versions("## To 0.2.0: from 0.1\n## To 0.3.0: who\n## Within a protocol", "To "), ["0.2.0", "0.3.0"]);
    assert_eq!(versions("## 0.4.0-dev (unreleased)\n## 0.3.0\n## Unreleased", ""), ["0.4.0-dev", "0.3.0"]);
    assert_eq!(release_of("0.4.0-dev"), "0.4.0");
}
