//! The rooms of the reconciler, the dashboard and the fleet import only downward (each crate's
//! table in its `src/lib.rs`, [`CRATES`] here): a module may use a module of its own layer or of
//! one below, never one above, and two modules never use each other (directly or around a
//! circle). Read from the source: each `crate::…` path outside comments, strings and the
//! `#[cfg(test)]` part of a file. A failure names the file, the line and the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// A crate's layers, lowest first: each the top modules of its `src/` it holds (a folder is one
/// module).
type Layers = &'static [(&'static str, &'static [&'static str])];

/// Each crate held to its layers (the same tables are in their `src/lib.rs`).
const CRATES: &[(&str, Layers)] = &[("reconciler", RECONCILER), ("dashboard", DASHBOARD), ("fleet", FLEET)];

const DASHBOARD: Layers = &[
    ("what the pages show, and who may see it", &["model", "access", "stores"]),
    ("the pages and the actions", &["html", "actions"]),
    ("one user's dashboard", &["dashboard"]),
    ("the logged-in users", &["sessions"]),
    ("the HTTP server", &["server"]),
    ("the binary", &["command", "main", "lib"]),
];

const FLEET: Layers = &[
    ("a simulated peer, the counts, the hub", &["peer", "counts", "black_hole", "hub"]),
    ("what a peer answers and writes", &["answer", "advertiser", "dashboard"]),
    ("the fleet's server", &["server"]),
    ("the scenarios", &["scenarios"]),
    ("the binary", &["main", "lib"]),
];

const RECONCILER: Layers = &[
    (
        "Kubernetes machinery",
        &[
            "error",
            "conditions",
            "resources",
            "event_budget",
            "events",
            "metrics",
            "throttle",
            "connect_first",
            "slim_store",
            "own_writes",
            "stores",
            "managers",
            "leader",
            "work_queue",
            "writes",
            "finalizer",
            "singleton",
        ],
    ),
    ("this cluster", &["identity", "config", "addresses"]),
    ("tenancy", &["tenancy"]),
    ("talking to other clusters", &["auth", "client_over", "peer", "published"]),
    ("what the controllers share", &["context"]),
    ("the protocol's controllers", &["broadcaster", "discovery", "incoming", "foreign_cluster"]),
    ("the binary and its wiring", &["command", "main", "lib"]),
];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn src(krate: &str) -> PathBuf {
    Path::new(ROOT).join(krate).join("src")
}

/// The top module a file of `src` belongs to: `foreign_cluster` for `src/foreign_cluster/join.rs`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
    first.trim_end_matches(".rs").to_owned()
}

/// The top modules a line's code names as `crate::name` (comments and strings left out).
fn used(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or_default();
    let code: String = code.split('"').step_by(2).collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        let after = &rest[at + "crate::".len()..];
        let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        // `liqo_reconciler::crate::` never appears; `$crate::` (macros) and `super::crate` are not ours.
        if before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '$')) && !name.is_empty() {
            out.push(name.clone());
        }
        rest = &after[name.len()..];
    }
    // `use crate::{a, b::c}`: each name in the braces.
    if let Some(group) = code.split("crate::{").nth(1) {
        for part in group.split(',') {
            let name: String = part.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// Each use of another top module in the crate of `src`: (from, to, file, line number).
fn edges(src: &Path) -> Vec<(String, String, PathBuf, usize)> {
    let mut edges = Vec::new();
    for file in sources(src) {
        let from = module_of(src, &file);
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            for to in used(line) {
                if to != from {
                    edges.push((from.clone(), to, file.clone(), i + 1));
                }
            }
        }
    }
    edges
}

fn layer_of(layers: Layers, module: &str) -> Option<usize> {
    layers.iter().position(|(_, modules)| modules.contains(&module))
}

/// Where a file is, from the project's root.
fn shown(file: &Path) -> String {
    file.strip_prefix(ROOT).unwrap_or(file).display().to_string()
}

#[test]
fn every_module_is_in_one_layer() {
    for (krate, layers) in CRATES {
        let src = src(krate);
        let modules: BTreeSet<String> = sources(&src).iter().map(|f| module_of(&src, f)).collect();
        let unplaced: Vec<&String> = modules.iter().filter(|m| layer_of(layers, m).is_none()).collect();
        assert!(unplaced.is_empty(), "{krate}: modules in no layer of the table ({krate}/src/lib.rs, tests/layers.rs): {unplaced:?}");
        let mut seen = BTreeSet::new();
        for (_, ms) in *layers {
            for m in *ms {
                assert!(seen.insert(*m), "{krate}: {m} is in two layers");
            }
        }
    }
}

#[test]
fn imports_run_only_downward() {
    let mut broken = Vec::new();
    for (krate, layers) in CRATES {
        for (from, to, file, line) in edges(&src(krate)) {
            let (Some(a), Some(b)) = (layer_of(layers, &from), layer_of(layers, &to)) else { continue };
            if b > a {
                broken.push(format!(
                    "{}:{line}: {from} ({}) uses {to} ({}): a layer above its own",
                    shown(&file),
                    layers[a].0,
                    layers[b].0
                ));
            }
        }
    }
    assert!(broken.is_empty(), "imports that run up (each crate's src/lib.rs has its layers):\n{}", broken.join("\n"));
}

#[test]
fn no_modules_import_each_other_around_a_circle() {
    for (krate, _) in CRATES {
        no_circle_in(&src(krate));
    }
}

fn no_circle_in(src: &Path) {
    let mut graph: BTreeMap<String, BTreeMap<String, (PathBuf, usize)>> = BTreeMap::new();
    for (from, to, file, line) in edges(src) {
        graph.entry(from).or_default().entry(to).or_insert((file, line));
    }
    // Depth-first: a module met again on the path is a circle.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeMap<String, (PathBuf, usize)>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut circle = path[at..].to_vec();
            circle.push(m.to_owned());
            return Some(circle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_owned());
        for next in graph.get(m).map(|t| t.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            if let Some(circle) = visit(&next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        if let Some(circle) = visit(m, &graph, &mut Vec::new(), &mut done) {
            let steps: Vec<String> = circle
                .windows(2)
                .map(|w| {
                    let (file, line) = &graph[&w[0]][&w[1]];
                    format!("{} -> {} ({}:{line})", w[0], w[1], shown(file))
                })
                .collect();
            panic!("modules that import each other around a circle:\n{}", steps.join("\n"));
        }
    }
}

#[test]
fn the_reader_sees_uses_and_leaves_comments_and_strings_out() {
    assert_eq!(used("use crate::peer::{Peers, Trust};"), ["peer"]);
    assert_eq!(used("use crate::{error::Result, tenancy::grant};"), ["error", "tenancy"]);
    assert_eq!(used("    let x = crate::stores::reflect(api); // crate::context"), ["stores"]);
    assert!(used("/// see [`crate::context`]").is_empty());
    assert!(used(r#"let s = "crate::peer";"#).is_empty());
    assert!(used("$crate::foo!()").is_empty());
}
