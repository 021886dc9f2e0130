//! The commands of the README and docs/ that run one of the image's programs (`cargo run -p
//! liqo-webhook -- …`, `liqo-certs issue …`), checked statically against that program's own
//! `--help` (the one `liqo` binary this run built, which is each of them): every flag a line
//! passes is one the program (or its subcommand) takes. And across every code line of the
//! pages, every path into the repository exists and each placeholder has one spelling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const PROGRAMS: [&str; 4] = ["webhook", "reconciler", "certs", "dashboard"];

fn pages() -> Vec<PathBuf> {
    liqo_testenv::doc_pages()
}

/// A page's code commands (fenced, or indented by four or more spaces), continuations joined,
/// each with its line number (pure).
fn commands(text: &str) -> Vec<(usize, String)> {
    let (mut out, mut fenced, mut current, mut first) = (Vec::new(), false, String::new(), 0);
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(code) = (if fenced { Some(line.trim()) } else { line.strip_prefix("    ").map(str::trim) }) else { continue };
        if current.is_empty() {
            first = i + 1;
        }
        current.push_str(code.trim_end_matches('\\').trim_end());
        current.push(' ');
        if !code.ends_with('\\') {
            out.push((first, std::mem::take(&mut current).trim().to_owned()));
        }
    }
    out
}

/// The program a command runs and the words it passes, if it runs one of ours (pure).
fn ours(command: &str) -> Option<(&'static str, Vec<String>)> {
    let command = command.split(" #").next()?.split(" | ").next()?.split(" && ").next()?;
    let words: Vec<&str> = command.split_whitespace().collect();
    for program in PROGRAMS {
        let name = format!("liqo-{program}");
        let after = if let Some(at) = words.windows(2).position(|w| w[0] == "-p" && w[1] == name) {
            (words.get(at + 2) == Some(&"--")).then_some(at + 3)
        } else {
            // The program as the command itself, after any VAR=value words or exec.
            let at = words.iter().position(|w| !w.contains('=') && *w != "exec")?;
            (words[at] == name || words[at].ends_with(&format!("/{name}"))).then_some(at + 1)
        };
        if let Some(after) = after {
            return Some((program, words[after..].iter().map(|w| (*w).to_owned()).collect()));
        }
    }
    None
}

fn help(program: &str, sub: Option<&str>) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_liqo")).arg(program).args(sub).arg("--help").output().unwrap();
    assert!(out.status.success(), "liqo {program} {sub:?} --help: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_flag_the_docs_pass_our_programs_is_one_they_take() {
    let mut helps: BTreeMap<(String, Option<String>), String> = BTreeMap::new();
    let (mut wrong, mut checked) = (Vec::new(), 0);
    for page in pages() {
        let name = liqo_testenv::repo_relative(&page);
        for (n, command) in commands(&std::fs::read_to_string(&page).unwrap()) {
            let Some((program, words)) = ours(&command) else { continue };
            let sub = words.first().filter(|w| !w.starts_with('-')).cloned().filter(|_| program == "certs");
            let help = helps.entry((program.to_owned(), sub.clone())).or_insert_with(|| help(program, sub.as_deref()));
            for flag in words.iter().filter(|w| w.starts_with("--")).map(|w| w.split('=').next().unwrap()) {
                checked += 1;
                if !help.contains(&format!("{flag} ")) && !help.contains(&format!("{flag}\n")) && !help.contains(&format!("{flag}=")) {
                    let named = sub.as_deref().map_or(format!("liqo-{program}"), |s| format!("liqo-{program} {s}"));
                    wrong.push(format!("{name}:{n}: {named} takes no {flag}"));
                }
            }
        }
    }
    assert!(checked >= 10, "only {checked} flags read: the reader is wrong");
    assert!(wrong.is_empty(), "flags the docs pass that the programs do not take:\n{}", wrong.join("\n"));
}

/// The paths into the repository a command names (pure): words starting with a top-level
/// folder of the workspace, placeholders and globs left out.
fn repo_paths(command: &str) -> Vec<String> {
    const TOP: [&str; 13] = [
        "manifests/",
        "docs/",
        "image/",
        "kind-tests/",
        "release/",
        "webhook/",
        "reconciler/",
        "cli/",
        "api/",
        "certs/",
        "fleet/",
        "dashboard/",
        "serve/",
    ];
    command
        .split(|c: char| c.is_whitespace() || matches!(c, '=' | '(' | ')' | '"' | '\'' | '@' | ','))
        .filter(|w| TOP.iter().any(|t| w.starts_with(t)) && !w.contains(['<', '*', '$', '{']))
        .map(|w| w.trim_end_matches([':', ';', '.']).to_owned())
        .collect()
}

#[test]
fn every_path_the_docs_commands_name_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let name = liqo_testenv::repo_relative(&page);
        for (n, command) in commands(&std::fs::read_to_string(&page).unwrap()) {
            for path in repo_paths(&command) {
                checked += 1;
                if !Path::new(ROOT).join(&path).exists() {
                    missing.push(format!("{name}:{n}: {path}"));
                }
            }
        }
    }
    assert!(checked >= 10, "only {checked} paths read");
    assert!(missing.is_empty(), "paths the docs' commands name that are not in the repository:\n{}", missing.join("\n"));
}

#[test]
fn each_placeholder_has_one_spelling() {
    // Spellings of one placeholder differ in case, spaces, hyphens or underscores only.
    let key = |p: &str| p.to_lowercase().chars().filter(|c| c.is_alphanumeric()).collect::<String>();
    let mut forms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for page in pages() {
        for (_, command) in commands(&std::fs::read_to_string(&page).unwrap()) {
            let mut rest = command.as_str();
            while let Some(at) = rest.find('<') {
                let Some(end) = rest[at..].find('>') else { break };
                let p = &rest[at..at + end + 1];
                if !p.contains("<<") && p.len() > 2 {
                    forms.entry(key(p)).or_default().insert(p.to_owned());
                }
                rest = &rest[at + end + 1..];
            }
        }
    }
    assert!(forms.len() >= 5, "only {} placeholders read", forms.len());
    let many: Vec<String> = forms.values().filter(|f| f.len() > 1).map(|f| format!("{f:?}")).collect();
    assert!(many.is_empty(), "one placeholder spelled more than one way:\n{}", many.join("\n"));
}

#[test]
fn the_readers_read_commands_programs_and_paths() {
    let page = "text\n\n    cargo run -p liqo-certs -- issue --dir /tmp/x \\\n      --host a\n    kubectl apply -k manifests/ # here\n";
    assert_eq!(
        commands(page),
        [(3, "cargo run -p liqo-certs -- issue --dir /tmp/x --host a".to_owned()), (5, "kubectl apply -k manifests/ # here".to_owned())]
    );
    assert_eq!(
        ours("cargo run -p liqo-certs -- issue --dir /tmp/x"),
        Some(("certs", vec!["issue".into(), "--dir".into(), "/tmp/x".into()]))
    );
    assert_eq!(ours("KUBECONFIG=k target/debug/liqo-reconciler --no-mdns"), Some(("reconciler", vec!["--no-mdns".into()])));
    assert_eq!(ours("kubectl -n liqo logs deploy/liqo-reconciler"), None);
    assert_eq!(
        repo_paths("kubectl apply -f manifests/a.yaml -k manifests/<x>/ --data-binary @webhook/f.json"),
        ["manifests/a.yaml", "webhook/f.json"]
    );
}
