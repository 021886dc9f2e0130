//! The repository's own words. Nothing in the tree (code, comments, pages, manifests, scripts,
//! the CRDs' descriptions that `kubectl explain` shows, the messages of `api/src/reasons.rs`)
//! names a document that is not here: the contract is docs/protocol.md, cited by section
//! (`protocol §9`), and Liqo's forms are called by what they are (the manual form, the
//! auth-service zone). Every section cited exists.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::ROOT;

/// Words that point at documents a reader does not have (lowercase).
const FOREIGN: [&str; 9] = ["seed 00", "seed-00", "seed_00", "seeds'", "the seeds", "manual seed", "seed form", "spec §", "spec.md"];

/// The same, where only the capitals say it (`spec` is a Kubernetes field everywhere).
const FOREIGN_CAPITALS: &str = "SPEC";

/// Folders never read: builds, dependencies, fuzzing inputs and outputs, git itself.
const SKIPPED: [&str; 7] = ["target", ".git", "node_modules", "corpus", "artifacts", "seeds", "dist"];

/// Every text file of the tree but this one (which spells the words out).
fn tree() -> Vec<PathBuf> {
    let me = Path::new(ROOT).join("api/tests/words.rs").canonicalize().unwrap();
    common::files_under(Path::new(ROOT), &SKIPPED).into_iter().filter(|p| p.canonicalize().map(|c| c != me).unwrap_or(true)).collect()
}

/// Whether `line` holds `word` as a word of its own (no letter, digit or `_` on either side).
fn holds_word(line: &str, word: &str) -> bool {
    let inside = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    line.match_indices(word).any(|(at, _)| !inside(line[..at].chars().next_back()) && !inside(line[at + word.len()..].chars().next()))
}

/// Each line of `text` holding a foreign word, as `name:line: text` (pure).
fn foreign_lines(name: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| FOREIGN.iter().any(|w| l.to_lowercase().contains(w)) || holds_word(l, FOREIGN_CAPITALS))
        .map(|(n, l)| format!("{name}:{}: {}", n + 1, l.trim()))
        .collect()
}

/// The sections `text` cites as `protocol §N` (or `protocol\n//! §N`, `§N–§M` counted by
/// their first), with where (pure).
fn cited_sections(name: &str, text: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for (at, word) in text.match_indices("protocol") {
        // Between the word and the section: spaces, a line break and a comment's leader.
        let rest = text[at + word.len()..].trim_start_matches(|c: char| c.is_whitespace() || "/!#*".contains(c));
        if let Some(n) = rest.strip_prefix('§') {
            let digits: String = n.chars().take_while(char::is_ascii_digit).collect();
            let line = text[..at].matches('\n').count() + 1;
            out.push((format!("{name}:{line}"), digits.parse().unwrap_or(0)));
        }
    }
    out
}

/// The numbered sections of docs/protocol.md (`## 9. Tenant namespaces` is 9).
fn protocol_sections() -> BTreeSet<u32> {
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/protocol.md")).expect("docs/protocol.md");
    page.lines().filter_map(|l| l.strip_prefix("## ")).filter_map(|h| h.split_once('.').and_then(|(n, _)| n.parse().ok())).collect()
}

#[test]
fn nothing_in_the_tree_names_a_document_that_is_not_here() {
    let files = tree();
    let mut found = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else { continue }; // pictures
        found.extend(foreign_lines(&liqo_testenv::repo_relative(file), &text));
    }
    let crds: String = liqo_api::crds::all().iter().map(|c| serde_json::to_string(c).unwrap()).collect();
    found.extend(foreign_lines("the generated CRDs", &crds));
    assert!(files.len() > 300, "only {} files read", files.len());
    assert!(found.is_empty(), "words that name documents a reader does not have:\n{}", found.join("\n"));
}

#[test]
fn every_protocol_section_cited_is_on_the_page() {
    let sections = protocol_sections();
    assert_eq!(sections, (1..=10).collect(), "docs/protocol.md's numbered sections");
    let mut cited = 0;
    let mut wrong = Vec::new();
    for file in tree() {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (at, n) in cited_sections(&liqo_testenv::repo_relative(&file), &text) {
            cited += 1;
            if !sections.contains(&n) {
                wrong.push(format!("{at}: protocol §{n}"));
            }
        }
    }
    assert!(cited >= 60, "only {cited} citations read: the reader is wrong");
    assert!(wrong.is_empty(), "sections cited that docs/protocol.md does not have:\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_finds_each_foreign_word() {
    assert_eq!(
        foreign_lines(
            "a",
            "ok\nas in Seed 003's form\nSPEC §9 says\nRFC 6763 §11\nthe seed-001 way\nOPENAPI_SPEC\nspec: {}\nfn seed_002()"
        ),
        ["a:2: as in Seed 003's form", "a:3: SPEC §9 says", "a:5: the seed-001 way", "a:8: fn seed_002()"]
    );
}

#[test]
fn the_reader_finds_each_citation() {
    let text = "x (protocol §9)\n//! y (protocol\n//! §10), protocol §4–§5\nthe protocol is";
    assert_eq!(cited_sections("a", text), [("a:1".to_owned(), 9), ("a:2".to_owned(), 10), ("a:3".to_owned(), 4)]);
}

/// Where a text pins a revision by tag: Argo CD's `targetRevision`, Flux's `tag`, a release
/// download, a kustomize remote `ref`.
const TAG_PINS: [&str; 5] = ["targetRevision: ", "tag: ", "releases/download/", "?ref=", "--branch "];

/// The tags (`v1.2.3`) that `text` pins at one of [`TAG_PINS`], with where (pure).
fn pinned_tags(name: &str, text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for pin in TAG_PINS {
            for (at, _) in line.match_indices(pin) {
                let rest = &line[at + pin.len()..];
                let tag: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || ".-_".contains(*c)).collect();
                if tag.starts_with('v') && tag[1..].starts_with(|c: char| c.is_ascii_digit()) {
                    out.push((format!("{name}:{}", n + 1), tag));
                }
            }
        }
    }
    out
}

#[test]
fn no_page_or_manifest_pins_a_tag_this_repository_lacks() {
    let Ok(out) = std::process::Command::new("git").args(["-C", ROOT, "tag", "--list"]).output() else {
        eprintln!("SKIPPED: no git here to list the repository's tags");
        return;
    };
    let tags: BTreeSet<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    let mut wrong = Vec::new();
    for file in tree() {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (at, tag) in pinned_tags(&liqo_testenv::repo_relative(&file), &text) {
            if !tags.contains(&tag) {
                wrong.push(format!("{at}: {tag}"));
            }
        }
    }
    assert!(wrong.is_empty(), "tags named that `git tag` does not list (a clone cannot resolve them):\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_finds_each_pinned_tag() {
    let text = "    targetRevision: v0.3.0\n  ref:\n    tag: v1.2.3 # x\nimage tag: latest\nreleases/download/v0.1.0/a.tgz\n";
    assert_eq!(
        pinned_tags("a", text),
        [("a:1".to_owned(), "v0.3.0".to_owned()), ("a:3".to_owned(), "v1.2.3".to_owned()), ("a:5".to_owned(), "v0.1.0".to_owned())]
    );
}
