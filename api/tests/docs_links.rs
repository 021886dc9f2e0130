//! Every relative link of the README and of docs/ resolves: the file exists, and a `#anchor`
//! names a heading of it (GitHub's rule: lowercase, punctuation dropped, spaces to hyphens).
//! Links inside code (indented blocks, fences, backticks) are not links and are not read.

mod common;

use std::path::Path;

use common::{ROOT, anchors, pages, prose, slug};

/// The targets of `[text](target)` links on a line, outside backticks.
fn targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let unquoted: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let mut rest = unquoted.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end..];
    }
    out
}

#[test]
fn every_relative_link_of_the_readme_and_docs_resolves_to_a_file_and_heading() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for (n, line) in prose(&text) {
            for target in targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (file, anchor) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
                let path = if file.is_empty() { page.clone() } else { dir.join(file) };
                let name = liqo_testenv::repo_relative(&page);
                if !file.is_empty() && path.canonicalize().ok() == page.canonicalize().ok() {
                    broken.push(format!("{name}:{n}: {target}: links the page to itself (an #anchor alone, or no link)"));
                }
                if !path.exists() {
                    broken.push(format!("{name}:{n}: {target}: no such file"));
                    continue;
                }
                if let Some(anchor) = anchor.filter(|_| path.extension().is_some_and(|e| e == "md")) {
                    let there = std::fs::read_to_string(&path).unwrap();
                    if !anchors(&there).contains(anchor) {
                        broken.push(format!("{name}:{n}: {target}: no heading of that anchor"));
                    }
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} links read: the reader is wrong");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_reads_in_five_minutes_and_links_each_page_of_docs() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: the rest belongs in docs/");
    let first = readme.split("](docs/").nth(1).and_then(|rest| rest.split(')').next());
    assert_eq!(first, Some("quickstart.md"), "the README's first link into docs/ is the quick start");
    for page in pages().into_iter().skip(1) {
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        assert!(readme.contains(&format!("](docs/{name})")), "README.md does not link docs/{name}");
    }
}

#[test]
fn the_anchor_rule_is_githubs() {
    assert_eq!(slug("First peering (Liqo's commands)"), "first-peering-liqos-commands");
    assert_eq!(slug("GitOps: Argo CD and Flux"), "gitops-argo-cd-and-flux");
    assert_eq!(targets("see [a](docs/a.md#x) and `[b](c.md)` [d](e.md)"), ["docs/a.md#x", "e.md"]);
}
