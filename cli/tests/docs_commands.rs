//! Every `kubectl liqo` and `just` line of the README and docs/ is one the code accepts, checked
//! statically: each `kubectl liqo` line names subcommands the plugin has and flags those
//! subcommands take (their `--help`, from the binary this run built); each `just` line names a
//! recipe of the Justfile; no quoted heredoc (`<< "EOF"`) holds a `${VARIABLE}`, which it would
//! pass on literally. Commands are read from the pages' code: indented blocks and fenced ones.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The README and every page of docs/.
fn pages() -> Vec<(String, String)> {
    liqo_testenv::doc_pages().iter().map(|p| (liqo_testenv::repo_relative(p), std::fs::read_to_string(p).unwrap())).collect()
}

/// The code lines of a Markdown page (inside fences, or indented by four spaces outside
/// lists and tables), each with its line number. A ```` ```text ```` fence is what a command
/// prints, not a command: it is skipped.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let (mut out, mut fenced, mut output) = (Vec::new(), false, false);
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            fenced = !fenced;
            output = fenced && info.trim() == "text";
            continue;
        }
        if fenced {
            if !output {
                out.push((i + 1, line.trim().to_owned()));
            }
        } else if let Some(code) = line.strip_prefix("    ") {
            out.push((i + 1, code.trim().to_owned()));
        }
    }
    out
}

/// The words of a command line up to a comment, a pipe or a `&&`.
fn words(line: &str) -> Vec<String> {
    let line = line.split(" #").next().unwrap_or(line);
    let line = line.split(" | ").next().unwrap_or(line);
    let line = line.split(" && ").next().unwrap_or(line);
    line.split_whitespace().map(str::to_owned).collect()
}

fn help(path: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-liqo")).args(path).arg("--help").output().unwrap();
    assert!(out.status.success(), "kubectl liqo {} --help failed: {}", path.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subcommands a help text lists.
fn subcommands(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut inside = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if line.trim().is_empty() {
                inside = false;
            } else if line.starts_with("  ") && !line.starts_with("   ") {
                out.extend(line.split_whitespace().next().map(str::to_owned));
            }
        }
    }
    out.remove("help");
    out
}

/// What is wrong with one `kubectl liqo …` line, if anything.
fn check_plugin_line(w: &[String], helps: &mut BTreeMap<Vec<String>, String>) -> Option<String> {
    let mut path: Vec<String> = Vec::new();
    let mut rest = &w[2..];
    loop {
        let text = helps.entry(path.clone()).or_insert_with(|| help(&path)).clone();
        let subs = subcommands(&text);
        match rest.first() {
            Some(next) if subs.contains(next.as_str()) => {
                path.push(next.clone());
                rest = &rest[1..];
            }
            Some(next) if path.is_empty() && !next.starts_with('-') => {
                return Some(format!("no subcommand {next:?} (the plugin has {subs:?})"));
            }
            _ => break,
        }
    }
    let text = helps[&path].clone();
    for flag in rest.iter().filter(|t| t.starts_with("--")) {
        let name = flag.split('=').next().unwrap();
        let taken = text.split(|c: char| !(c.is_alphanumeric() || c == '-')).any(|t| t == name);
        if !taken {
            return Some(format!("kubectl liqo {} takes no {name}", path.join(" ")));
        }
    }
    None
}

fn recipes() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("Justfile")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with([' ', '\t', '#']) && l.contains(':') && !l.contains(":="))
        .filter_map(|l| l.split([' ', ':']).next().map(|n| n.trim_start_matches('@').to_owned()))
        .filter(|n| !n.is_empty())
        .collect()
}

#[test]
fn every_plugin_and_just_line_of_the_docs_is_one_the_code_takes() {
    let (mut helps, recipes) = (BTreeMap::new(), recipes());
    let (mut problems, mut checked) = (Vec::new(), 0);
    for (page, text) in pages() {
        for (n, line) in code_lines(&text) {
            let w = words(line.trim_start_matches("$ "));
            let problem = match w.first().map(String::as_str) {
                Some("kubectl") if w.get(1).is_some_and(|s| s == "liqo") => check_plugin_line(&w, &mut helps),
                Some("just") => match w.get(1) {
                    Some(r) if !r.starts_with('-') && !recipes.contains(r.as_str()) => Some(format!("no recipe {r:?} in the Justfile")),
                    _ => None,
                },
                _ => continue,
            };
            checked += 1;
            if let Some(p) = problem {
                problems.push(format!("{page}:{n}: {line}\n    {p}"));
            }
        }
    }
    assert!(checked >= 15, "only {checked} command lines found: is the reader still reading the pages?");
    assert!(problems.is_empty(), "{} lines the code does not take:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn no_quoted_heredoc_holds_a_variable() {
    let mut problems = Vec::new();
    for (page, text) in pages() {
        let mut quoted: Option<(usize, String)> = None;
        for (n, line) in code_lines(&text) {
            if let Some((start, end)) = &quoted {
                if line == *end {
                    quoted = None;
                } else if line.contains("${") {
                    problems.push(format!("{page}:{n}: a quoted heredoc (from line {start}) passes {line:?} literally"));
                }
                continue;
            }
            for quote in ['"', '\''] {
                if let Some(at) = line.find(&format!("<< {quote}")).or_else(|| line.find(&format!("<<{quote}"))) {
                    let tag: String = line[at..]
                        .trim_start_matches('<')
                        .trim_start()
                        .trim_matches(quote)
                        .chars()
                        .take_while(|c| c.is_alphanumeric())
                        .collect();
                    quoted = Some((n, tag));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reader_finds_commands_and_flags_it_must_refuse() {
    let mut helps = BTreeMap::new();
    let line = |s: &str| words(s);
    assert_eq!(check_plugin_line(&line("kubectl liqo status --phase Joined -o wide"), &mut helps), None);
    assert_eq!(check_plugin_line(&line("kubectl liqo domain add example.com --no-autojoin"), &mut helps), None);
    assert!(check_plugin_line(&line("kubectl liqo peer https://x:1 --no-such-flag"), &mut helps).is_some());
    assert!(check_plugin_line(&line("kubectl liqo teleport"), &mut helps).is_some());
    assert!(recipes().contains("image") && recipes().contains("fleet"), "{:?}", recipes());
    assert_eq!(
        code_lines("text\n\n    kubectl liqo status\n```sh\njust bench\n```\n"),
        [(3, "kubectl liqo status".to_owned()), (5, "just bench".to_owned())]
    );
}

#[test]
fn the_architecture_page_names_every_command_of_the_plugin() {
    let page = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let row = page.lines().find(|l| l.starts_with("| `cli/` |")).expect("docs/architecture.md's row for cli/");
    let missing: Vec<String> = subcommands(&help(&[])).into_iter().filter(|c| !row.contains(&format!("`{c}`"))).collect();
    assert!(missing.is_empty(), "docs/architecture.md's row for cli/ does not name {missing:?}:\n{row}");
}
