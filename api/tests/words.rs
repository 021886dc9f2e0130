//! The repository's own words: what a reader of the README, docs/, the manifests (the CRDs'
//! descriptions among them, which `kubectl explain` shows) and the messages of
//! `api/src/reasons.rs` meets never names a document that is not here ("seed 003", "SPEC §9").
//! It says what is meant: Liqo's manual form, the tenant namespaces.

mod common;

use std::path::{Path, PathBuf};

use common::{ROOT, pages};

/// Words that point at documents a reader does not have (lowercase).
const FOREIGN: [&str; 7] = ["seed 00", "seeds'", "the seeds", "manual seed", "seed form", "spec §", "spec.md"];

fn manifests() -> Vec<PathBuf> {
    common::files_under(&Path::new(ROOT).join("manifests"), &[])
}

/// Each line of `text` holding a foreign word, as `name:line: text` (pure).
fn foreign_lines(name: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| FOREIGN.iter().any(|w| l.to_lowercase().contains(w)))
        .map(|(n, l)| format!("{name}:{}: {}", n + 1, l.trim()))
        .collect()
}

#[test]
fn no_page_manifest_or_message_names_a_document_that_is_not_here() {
    let mut files = pages();
    files.extend(manifests());
    files.push(Path::new(ROOT).join("api/src/reasons.rs"));
    let mut found = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else { continue }; // pictures
        let name = liqo_testenv::repo_relative(file);
        found.extend(foreign_lines(&name, &text));
    }
    let crds: String = liqo_api::crds::all().iter().map(|c| serde_json::to_string(c).unwrap()).collect();
    found.extend(foreign_lines("the generated CRDs", &crds));
    assert!(files.len() > 40, "only {} files read", files.len());
    assert!(found.is_empty(), "words that name documents a reader does not have:\n{}", found.join("\n"));
}

#[test]
fn the_reader_finds_each_foreign_word() {
    assert_eq!(
        foreign_lines("a", "ok\nas in Seed 003's form\nSPEC §9 says\nRFC 6763 §11"),
        ["a:2: as in Seed 003's form", "a:3: SPEC §9 says"]
    );
}
