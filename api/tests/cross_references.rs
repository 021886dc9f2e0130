//! Every reference to a page of the documentation from outside it resolves: in comments under
//! `manifests/`, the `Justfile`, CI and the scripts, in every source file, and in the messages
//! users read (`api/src/reasons.rs`, the alerts, the Grafana panels). A reference is
//! `docs/<page>.md`, optionally with `#anchor` or a section's title in quotes after it
//! (`docs/scaling.md, "The work queue"`), or a README section by its title (`README's
//! "Install on a cluster"`): the page must exist and hold that heading. Comment markers and line
//! breaks between the parts are read through.

mod common;

use std::path::{Path, PathBuf};

use common::{ROOT, anchors, slug};

/// The files read: everything under `manifests/`, the scripts and CI, and every Rust file of
/// the workspace (sources, tests, benches; not `target/`).
fn files() -> Vec<PathBuf> {
    let skip = ["target", "node_modules", ".git", "docs", "fixtures", "corpus"];
    let read = [".rs", ".sh", ".yaml", ".yml", ".json", ".toml", "Justfile", "run"];
    common::files_under(Path::new(ROOT), &skip)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| read.iter().any(|s| n.to_string_lossy().ends_with(s))))
        .collect()
}

/// The text of a file with comment markers at line starts dropped and its lines joined by
/// spaces, so that a reference broken over two comment lines reads as one.
fn flattened(text: &str) -> String {
    text.lines()
        .map(|l| l.trim_start().trim_start_matches("//!").trim_start_matches("///").trim_start_matches("//").trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What follows a reference: an `#anchor`, or a title in double quotes after `, ` or ` (` or
/// `'s ` or ` `, if any (pure).
fn section_after(rest: &str) -> Option<String> {
    if let Some(anchor) = rest.strip_prefix('#') {
        return Some(anchor.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect());
    }
    let quoted = [", \"", " (\"", "'s \"", " \""].iter().find_map(|p| rest.strip_prefix(p))?;
    Some(slug(&quoted[..quoted.find('"')?].replace('`', "")))
}

/// Every reference of `text`: (page, section anchor if named) (pure).
fn references(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("docs/") {
        let rest = &text[at + 5..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_').collect();
        if name.is_empty() || !rest[name.len()..].starts_with(".md") {
            continue;
        }
        let preceded = text[..at].chars().next_back();
        if preceded.is_some_and(|c| c.is_alphanumeric() || c == '/' || c == '.') {
            continue; // another folder's docs/, or a URL
        }
        out.push((format!("docs/{name}.md"), section_after(&rest[name.len() + 3..])));
    }
    for (at, _) in text.match_indices("README") {
        let rest = &text[at + 6..];
        if text[..at].ends_with('/') {
            continue; // another folder's README
        }
        if let Some(section) = ["'s \"", " \"", " (\""].iter().find(|p| rest.starts_with(**p)).and(section_after(rest)) {
            out.push(("README.md".to_owned(), Some(section)));
        }
    }
    out
}

#[test]
fn every_reference_to_the_docs_from_the_code_and_manifests_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in files() {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let name = liqo_testenv::repo_relative(&file);
        if name.ends_with("tests/cross_references.rs") || name.ends_with("tests/docs_links.rs") {
            continue; // the readers' own examples
        }
        for (page, section) in references(&flattened(&text)) {
            checked += 1;
            let Ok(there) = std::fs::read_to_string(Path::new(ROOT).join(&page)) else {
                broken.push(format!("{name}: {page}: no such page"));
                continue;
            };
            if let Some(section) = section.filter(|s| !anchors(&there).contains(s)) {
                broken.push(format!("{name}: {page}: no section \"{section}\""));
            }
        }
        if text.contains("manifests/README") && !Path::new(ROOT).join("manifests/README.md").exists() {
            broken.push(format!("{name}: manifests/README: there is none"));
        }
    }
    assert!(checked > 30, "only {checked} references read: the reader is wrong");
    assert!(broken.is_empty(), "references that do not resolve:\n{}", broken.join("\n"));
}

#[test]
fn references_are_read_through_comment_markers_and_line_breaks() {
    let text = flattened(
        "// see docs/scaling.md, \"The work\n// queue\" and docs/a_b.md#x-y,\n# README's \"Install on a\n# cluster\"; not crates/docs/c.md",
    );
    assert_eq!(
        references(&text),
        [
            ("docs/scaling.md".to_owned(), Some("the-work-queue".to_owned())),
            ("docs/a_b.md".to_owned(), Some("x-y".to_owned())),
            ("README.md".to_owned(), Some("install-on-a-cluster".to_owned())),
        ]
    );
    assert_eq!(references("docs/troubleshooting.md's table"), [("docs/troubleshooting.md".to_owned(), None)]);
}
