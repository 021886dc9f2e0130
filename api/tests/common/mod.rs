//! Reading the Markdown of the README and docs/ as GitHub does: which lines are prose, and the
//! anchors of a page's headings.

#![allow(dead_code)] // each test file uses its own part

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The Markdown files read: the README, and every file of docs/.
pub fn pages() -> Vec<PathBuf> {
    let mut pages = vec![Path::new(ROOT).join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
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
