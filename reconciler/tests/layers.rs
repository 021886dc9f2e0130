//! The rooms of the reconciler, the dashboard and the fleet import only downward (each crate's
//! table in its `src/lib.rs`, [`CRATES`] here): a room (a top module of `src/`, a folder or a
//! file) may use a room of its own layer or of one below, never one above; and no two modules
//! use each other, directly or around a circle, across rooms or within one (a module of a room
//! is a file or a folder directly in it; its `mod.rs` is the room itself). Read from the source:
//! each `crate::`, `super::` and `self::` path, and each path through a child module, outside
//! comments, strings and the items under `#[cfg(test)]` (wherever they stand in a file). A failure names the file, the line
//! and the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// A crate's layers, lowest first: each the rooms (top modules of its `src/`) it holds.
type Layers = &'static [(&'static str, &'static [&'static str])];

/// Each crate held to its layers (the same tables are in their `src/lib.rs`).
const CRATES: &[(&str, Layers)] = &[("reconciler", RECONCILER), ("dashboard", DASHBOARD), ("fleet", FLEET)];

const DASHBOARD: Layers = &[
    ("what the pages show, and who may see it", &["model", "access", "stores", "history", "objects", "escape"]),
    ("the pictures", &["pictures", "topology"]),
    ("the pages and the actions", &["html", "actions", "edit", "object_pages"]),
    ("one user's dashboard", &["dashboard"]),
    ("the logged-in users", &["sessions"]),
    ("the HTTP server", &["server"]),
    ("the binary", &["command", "main", "lib"]),
];

const FLEET: Layers = &[
    ("a simulated peer, the counts, the hub", &["peer", "counts", "black_hole", "cpu_limit", "hub", "managed"]),
    ("what a peer answers and writes", &["answer", "advertiser", "dashboard"]),
    ("the fleet's server", &["server"]),
    ("the scenarios", &["scenarios"]),
    ("the binary", &["main", "lib"]),
];

const RECONCILER: Layers = &[
    ("Kubernetes machinery", &["machinery"]),
    ("reporting", &["reporting"]),
    ("this cluster", &["cluster"]),
    ("tenancy", &["tenancy"]),
    ("talking to other clusters", &["remote"]),
    ("what the controllers share", &["context"]),
    ("the protocol's controllers", &["discovery", "incoming", "foreign_cluster"]),
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

/// A module's path in its crate: `["tenancy", "grant"]` for `src/tenancy/grant.rs`,
/// `["tenancy"]` for `src/tenancy/mod.rs`, `["lib"]` for `src/lib.rs`.
type ModPath = Vec<String>;

fn path_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: ModPath = rel.components().map(|c| c.as_os_str().to_string_lossy().to_string()).collect();
    if path.len() > 1 && path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

/// The unit a module is held to: its room and, within a room, the module there
/// (`["foreign_cluster", "join"]` for `src/foreign_cluster/join.rs`).
fn unit_of(path: &[String]) -> ModPath {
    path.iter().take(2).cloned().collect()
}

/// A file's code with comments and string literals blanked (lines kept), and every item under
/// `#[cfg(test)]` blanked too, wherever it stands: code after a test module is read.
fn code_of(text: &str) -> String {
    let mut out = Vec::new();
    // Inside a `#[cfg(test)]` item: the depth of its braces, and whether one opened.
    let mut test_item: Option<(i32, bool)> = None;
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code.split('"').step_by(2).collect::<Vec<_>>().join(" ");
        let mut kept = String::new();
        loop {
            if let Some(item) = test_item {
                match skip_test_item(item, &rest) {
                    Ok(inside) => {
                        test_item = Some(inside);
                        break;
                    }
                    Err(after) => {
                        test_item = None;
                        rest = rest[after..].to_owned();
                    }
                }
            }
            match rest.find("#[cfg(test)]") {
                Some(at) => {
                    kept.push_str(&rest[..at]);
                    rest = rest[at + "#[cfg(test)]".len()..].to_owned();
                    test_item = Some((0, false));
                }
                None => {
                    kept.push_str(&rest);
                    break;
                }
            }
        }
        out.push(kept);
    }
    out.join("\n")
}

/// Follows a `#[cfg(test)]` item through one more piece of code: `Err(at)` once it ended (its
/// braces closed, or a `;` before any opened) at byte `at` (the code after is read), else its
/// brace depth and whether one opened.
fn skip_test_item((mut depth, mut opened): (i32, bool), code: &str) -> Result<(i32, bool), usize> {
    for (at, c) in code.char_indices() {
        match c {
            '{' => (depth, opened) = (depth + 1, true),
            '}' => depth -= 1,
            ';' if depth == 0 && !opened => return Err(at + 1),
            _ => {}
        }
        if opened && depth == 0 {
            return Err(at + 1);
        }
    }
    Ok((depth, opened))
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The paths a `use` tree or a path expression names, from just after its first `::`: `a::b`,
/// `{a, b::{c, d}}` (each one, prefixed by `base`).
fn tree(s: &str, base: &[String], out: &mut Vec<ModPath>) {
    let s = s.trim_start();
    if let Some(group) = s.strip_prefix('{') {
        // Split the group's items at depth one.
        let (mut depth, mut from) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    tree(&group[from..i], base, out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    tree(&group[from..i], base, out);
                    from = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let name = ident(s);
    if name == "self" || s.starts_with('*') {
        out.push(base.to_vec());
        return;
    }
    if name.is_empty() {
        return;
    }
    let mut path = base.to_vec();
    path.push(name.to_owned());
    match s[name.len()..].strip_prefix("::") {
        Some(rest) => tree(rest, &path, out),
        None => out.push(path),
    }
}

/// The module paths `code` (of the module at `here`) names through `crate::`, `super::`,
/// `self::` and its child modules (`children`), each with its line.
fn named(code: &str, here: &[String], children: &BTreeSet<String>) -> Vec<(ModPath, usize)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let word = ident(rest);
        let starts =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b'$' || bytes[at - 1] == b':');
        if word.is_empty() || !starts {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        if rest[word.len()..].starts_with("::") {
            // A module file's own path, and its parent's (`lib` stands for the crate root).
            let own: ModPath = if here == ["lib"] || here == ["main"] { Vec::new() } else { here.to_vec() };
            let mut base = match word {
                "crate" => Some(Vec::new()),
                "self" => Some(own.clone()),
                "super" => Some(own[..own.len().saturating_sub(1)].to_vec()),
                w if children.contains(w) => Some(own.clone()),
                _ => None,
            };
            let mut after = &rest[word.len() + 2..];
            if word != "crate" && word != "self" && word != "super" {
                after = rest;
            }
            while let (Some(b), Some(more)) = (base.as_mut(), after.strip_prefix("super::")) {
                b.pop();
                after = more;
            }
            if let Some(base) = base {
                let line = code[..at].matches('\n').count() + 1;
                let mut paths = Vec::new();
                tree(after, &base, &mut paths);
                out.extend(paths.into_iter().map(|p| (p, line)));
            }
        }
        at += word.len();
    }
    out
}

/// Each use of another unit (see [`unit_of`]) in the crate of `src`: (from, to, file, line).
fn edges(src: &Path) -> Vec<(ModPath, ModPath, PathBuf, usize)> {
    let files = sources(src);
    let units: BTreeSet<ModPath> = files.iter().map(|f| unit_of(&path_of(src, f))).collect();
    let modules: BTreeSet<ModPath> = files.iter().map(|f| path_of(src, f)).collect();
    let mut edges = Vec::new();
    for file in files {
        let here = path_of(src, &file);
        let from = unit_of(&here);
        let own: ModPath = if here == ["lib"] { Vec::new() } else { here.clone() };
        let children: BTreeSet<String> =
            modules.iter().filter(|m| m.len() == own.len() + 1 && m.starts_with(&own)).map(|m| m[own.len()].clone()).collect();
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for (path, line) in named(&code, &here, &children) {
            // The longest unit the path lies in (`crate::Error`, a re-export at the root, in none).
            let Some(to) = (1..=path.len().min(2)).rev().map(|n| path[..n].to_vec()).find(|u| units.contains(u)) else { continue };
            if to != from {
                edges.push((from.clone(), to, file.clone(), line));
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
        let modules: BTreeSet<String> = sources(&src).iter().map(|f| path_of(&src, f)[0].clone()).collect();
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
            let (from, to) = (&from[0], &to[0]);
            let (Some(a), Some(b)) = (layer_of(layers, from), layer_of(layers, to)) else { continue };
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
        graph.entry(from.join("::")).or_default().entry(to.join("::")).or_insert((file, line));
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
            panic!("{}: modules that import each other around a circle:\n{}", shown(src), steps.join("\n"));
        }
    }
}

fn names(code: &str, here: &[&str], children: &[&str]) -> Vec<String> {
    let here: Vec<String> = here.iter().map(|s| s.to_string()).collect();
    let children = children.iter().map(|s| s.to_string()).collect();
    named(&code_of(code), &here, &children).into_iter().map(|(p, line)| format!("{}@{line}", p.join("::"))).collect()
}

#[test]
fn the_reader_resolves_each_path_and_leaves_comments_and_strings_out() {
    let grant = ["tenancy", "grant"];
    assert_eq!(names("use crate::remote::peer::{Peers, Trust};", &grant, &[]), ["remote::peer::Peers@1", "remote::peer::Trust@1"]);
    assert_eq!(
        names("use crate::{\n    machinery::error::Result,\n    tenancy::{access, tenant::grant},\n};", &grant, &[]),
        ["machinery::error::Result@1", "tenancy::access@1", "tenancy::tenant::grant@1"]
    );
    assert_eq!(names("let x = super::access::of(p); // crate::context", &grant, &[]), ["tenancy::access::of@1"]);
    assert_eq!(names("use super::super::Ctx;", &["incoming", "broadcaster", "follow"], &[]), ["incoming::Ctx@1"]);
    assert_eq!(
        names("pub use self::grant::grant_in;\nuse grant::revoke;", &["tenancy"], &["grant"]),
        ["tenancy::grant::grant_in@1", "tenancy::grant::revoke@2"]
    );
    assert_eq!(names("use crate::Error;", &["lib"], &[]), ["Error@1"]);
    assert!(names("/// see [`crate::context`]", &grant, &[]).is_empty());
    assert!(names(r#"let s = "crate::remote::peer";"#, &grant, &[]).is_empty());
    assert!(names("$crate::foo!(); x.super_y::z; a::crate::b", &grant, &[]).is_empty());
    assert!(names("use std::fmt;\n#[cfg(test)]\nmod tests { use crate::context; }", &grant, &[]).is_empty(), "tests left out");
    assert_eq!(
        names("#[cfg(test)]\nmod tests {\n    fn f() { use crate::context; }\n}\nuse crate::context::Shared;", &grant, &[]),
        ["context::Shared@5"],
        "code after a test module is read"
    );
    assert_eq!(
        names("#[cfg(test)]\nuse crate::context;\nuse crate::remote::peer;", &grant, &[]),
        ["remote::peer@3"],
        "a test-only import ends at its semicolon"
    );
    assert_eq!(names("#[cfg(test)] mod t { use crate::context; } use crate::remote;", &grant, &[]), ["remote@1"], "on one line");
}
