//! What docs/ says of the reconciler's flags is what the binary takes: every flag a table of
//! docs/ names (a row starting with `--flag`) is one `liqo-reconciler --help` lists, with the
//! environment variable named beside it, and the default in the row's second column is the
//! one the binary has; and every flag without an environment variable is named where
//! docs/troubleshooting.md says how to set one.

use std::collections::BTreeMap;
use std::path::Path;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

#[derive(Debug, Default, PartialEq)]
struct Flag {
    env: Option<String>,
    default: Option<String>,
}

/// Each `--flag` of a clap help text with its `[env: X=]` and `[default: Y]` (pure).
fn flags_of(help: &str) -> BTreeMap<String, Flag> {
    let mut out: BTreeMap<String, Flag> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in help.lines().map(str::trim) {
        if let Some(name) = line.split([' ', ',', '=']).find(|w| w.starts_with("--")).filter(|_| line.starts_with('-')) {
            current = Some(name.to_owned());
            out.entry(name.to_owned()).or_default();
        } else if let (Some(name), Some(env)) = (&current, line.strip_prefix("[env: ")) {
            out.get_mut(name).unwrap().env = Some(env.split('=').next().unwrap().to_owned());
        } else if let (Some(name), Some(default)) = (&current, line.strip_prefix("[default: ")) {
            out.get_mut(name).unwrap().default = Some(default.trim_end_matches(']').to_owned());
        }
    }
    out
}

/// A documented row: where it is, each flag with the environment variable named right after it,
/// and the defaults of its second column.
type Row = (String, Vec<(String, Option<String>)>, Vec<String>);

/// Each documented row of a page (pure).
fn rows(page: &str, text: &str) -> Vec<Row> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| l.starts_with("| `--")) {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        let quoted: Vec<&str> = cols[1].split('`').skip(1).step_by(2).collect();
        let mut flags: Vec<(String, Option<String>)> = Vec::new();
        for q in quoted {
            if q.starts_with("--") {
                flags.push((q.to_owned(), None));
            } else if let Some(last) = flags.last_mut().filter(|_| q.starts_with("LIQO_")) {
                last.1 = Some(q.to_owned());
            }
        }
        let defaults = cols[2].split(',').filter_map(|d| d.split_whitespace().next()).map(|d| d.trim_matches('`').to_owned()).collect();
        out.push((format!("{page}:{}", n + 1), flags, defaults));
    }
    out
}

#[test]
fn every_flag_docs_name_has_the_environment_variable_and_default_they_say() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_liqo-reconciler")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let flags = flags_of(&help);
    assert!(flags.len() > 20, "only {} flags read from --help", flags.len());
    let mut wrong = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(Path::new(ROOT).join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let page = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
        for (at, named, defaults) in rows(&page, &std::fs::read_to_string(&path).unwrap()) {
            for (i, (flag, env)) in named.iter().enumerate() {
                checked += 1;
                let Some(has) = flags.get(flag) else {
                    wrong.push(format!("{at}: {flag}: liqo-reconciler has no such flag"));
                    continue;
                };
                if env.is_some() && *env != has.env {
                    wrong.push(format!("{at}: {flag}: the page names {env:?}, the binary reads {:?}", has.env));
                }
                if let Some(said) = defaults.get(i).filter(|_| defaults.len() == named.len())
                    && has.default.as_deref() != Some(said.as_str())
                {
                    wrong.push(format!("{at}: {flag}: the page says the default is {said}, the binary's is {:?}", has.default));
                }
            }
        }
    }
    assert!(checked >= 8, "only {checked} documented flags read: the reader is wrong");
    assert!(wrong.is_empty(), "docs/ and liqo-reconciler disagree:\n{}", wrong.join("\n"));
}

/// docs/troubleshooting.md names every flag that has no environment variable, where it says how
/// to set one: `liqo-reconciler --help` is the list.
#[test]
fn every_flag_without_an_environment_variable_is_named_where_the_page_says_how_to_set_it() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_liqo-reconciler")).arg("--help").output().unwrap();
    let flags = flags_of(&String::from_utf8_lossy(&out.stdout));
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/troubleshooting.md")).unwrap();
    let start = page.find("## Setting a flag that has no environment variable").expect("the section");
    let section = &page[start..];
    let without: Vec<&String> =
        flags.iter().filter(|(n, f)| f.env.is_none() && !["--help", "--version"].contains(&n.as_str())).map(|(n, _)| n).collect();
    assert!(without.len() >= 5, "{without:?}");
    let unnamed: Vec<&&String> = without.iter().filter(|n| !section.contains(&format!("`{n}`"))).collect();
    assert!(unnamed.is_empty(), "docs/troubleshooting.md does not name these flags without an environment variable: {unnamed:?}");
}

#[test]
fn the_readers_read_a_help_text_and_a_row() {
    let help = "      --kube-api-qps <Q>\n          Requests\n\n          [env: LIQO_KUBE_API_QPS=]\n          [default: 400]\n      --no-mdns\n          Off\n";
    let flags = flags_of(help);
    assert_eq!(flags["--kube-api-qps"], Flag { env: Some("LIQO_KUBE_API_QPS".into()), default: Some("400".into()) });
    assert_eq!(flags["--no-mdns"], Flag::default());
    let row = "| `--kube-api-qps` (`LIQO_KUBE_API_QPS`), `--kube-api-burst` | 400, 400 | words |";
    let read = rows("p", row);
    assert_eq!(read[0].1, [("--kube-api-qps".to_owned(), Some("LIQO_KUBE_API_QPS".to_owned())), ("--kube-api-burst".to_owned(), None)]);
    assert_eq!(read[0].2, ["400", "400"]);
}
