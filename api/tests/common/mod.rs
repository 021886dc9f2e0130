//! Reading the Markdown of the README and docs/ as GitHub does: which lines are prose, and the
//! anchors of a page's headings.

#![allow(dead_code)] // each test file uses its own part

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The Markdown files read: the README, and every file of docs/.
pub fn pages() -> Vec<PathBuf> {
    liqo_testenv::doc_pages()
}

/// Every file under `dir`, sorted, not descending into folders named in `skip`.
pub fn files_under(dir: &Path, skip: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, skip: &[&str], out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries {
            let path = e.unwrap().path();
            if !path.is_dir() {
                out.push(path);
            } else if !skip.iter().any(|s| path.file_name().is_some_and(|n| n == *s)) {
                walk(&path, skip, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, skip, &mut out);
    out.sort();
    out
}

/// The lines of `text` that are prose: not in a fenced block, not an indented code line.
pub fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && !line.starts_with("    ") && !line.starts_with('\t') {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// GitHub's anchor for a heading's text.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of every heading of a page.
pub fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|(_, l)| l.strip_prefix('#').map(|h| h.trim_start_matches('#')))
        .map(|h| slug(&h.replace('`', "")))
        .collect()
}
