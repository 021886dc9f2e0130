//! The tenancy code lives in one room, `src/tenancy/`, that imports nothing above it: only the
//! rooms below it, the machinery and the reporting (see `src/tenancy/mod.rs`), and, inside it,
//! each file only the files before it in [`ORDER`] (so nothing is circular). A path that breaks
//! the rule fails here with its file and line.

use std::path::Path;

/// What the tenancy room may use outside itself.
const BELOW: [&str; 2] = ["machinery", "reporting"];

/// The room's files, each allowed to use only those before it.
const ORDER: [&str; 11] = ["proof", "access", "binding", "grant", "tenant", "retirement", "waiting", "claims", "install", "sweep", "mod"];

/// `(line number, module path)` of every `crate::…` and `super::…` path in `text`.
fn paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for prefix in ["crate::", "super::"] {
            let mut rest = code;
            while let Some(at) = rest.find(prefix) {
                let after = &rest[at + prefix.len()..];
                let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '{').collect();
                out.push((n + 1, format!("{prefix}{name}")));
                rest = after;
            }
        }
    }
    out
}

/// Why `path`, used in tenancy file `file`, breaks the rule (pure).
fn broken(file: &str, path: &str) -> Option<String> {
    let rank = |m: &str| ORDER.iter().position(|o| *o == m);
    let target = if let Some(m) = path.strip_prefix("crate::tenancy::") {
        m.split("::").next().unwrap_or_default().to_owned()
    } else if let Some(m) = path.strip_prefix("crate::") {
        let m = m.split("::").next().unwrap_or_default().trim_end_matches('{');
        return (!BELOW.contains(&m) && m != "tenancy")
            .then(|| format!("uses crate::{m}, which is not below the tenancy room ({BELOW:?})"));
    } else if let Some(m) = path.strip_prefix("super::") {
        if file == "mod" {
            return Some(format!("{path}: mod.rs has no parent in the room"));
        }
        m.to_owned()
    } else {
        return None;
    };
    if target.is_empty() || target == "tests" || target == "*" {
        return None;
    }
    match (rank(file), rank(&target)) {
        (Some(a), Some(b)) if b >= a && target != "mod" => Some(format!("uses {target}, which comes after it ({ORDER:?})")),
        (_, None) if target != "mod" && !target.is_empty() => {
            // A function of mod.rs (`super::in_use`, `super::stands_for`): mod.rs is the room's
            // shared part, below every file.
            None
        }
        _ => None,
    }
}

#[test]
fn the_tenancy_room_imports_only_below_itself_and_nothing_circular() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tenancy");
    let mut seen = Vec::new();
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_stem().unwrap().to_str().unwrap().to_owned();
        assert!(ORDER.contains(&file.as_str()), "{file}.rs is in the tenancy room but not in ORDER: place it");
        seen.push(file.clone());
        let text = std::fs::read_to_string(&path).unwrap();
        let body = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (line, used) in paths(body) {
            if let Some(why) = broken(&file, &used) {
                problems.push(format!("src/tenancy/{file}.rs:{line}: {why}"));
            }
        }
    }
    assert_eq!(seen.len(), ORDER.len(), "every file of ORDER is there: {seen:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_rule_catches_what_it_should() {
    assert!(broken("tenant", "crate::incoming").is_some(), "a controller");
    assert!(broken("sweep", "crate::remote::auth").is_some());
    assert!(broken("grant", "super::tenant").is_some(), "grant is below tenant");
    assert!(broken("grant", "crate::tenancy::tenant").is_some());
    assert!(broken("tenant", "super::grant").is_none());
    assert!(broken("tenant", "crate::machinery::error").is_none());
    assert!(broken("retirement", "super::stands_for").is_none(), "mod.rs is shared");
    assert_eq!(
        paths("use crate::machinery::error::Result; // crate::incoming\nsuper::tenant::retire()"),
        [(1, "crate::machinery".to_owned()), (2, "super::tenant".to_owned())]
    );
}
