//! docs/quickstart.md is run as written by the node tier (`kind-tests/quickstart.sh`, where its
//! binaries are). What holds without them: the page is in the shape that script reads (command
//! blocks ```sh, the engines' alternatives apart, a clean-up section), every `kind` command it
//! uses is one the tests' stand-in implements, the stand-in refuses anything else, and the
//! script skips loudly where the node tier cannot run.

mod common;

use std::path::Path;
use std::process::Command;

use common::ROOT;

/// The page's blocks as (info string, section heading, lines) (pure).
fn blocks(page: &str) -> Vec<(String, String, Vec<String>)> {
    let (mut out, mut section, mut open) = (Vec::new(), String::new(), None::<(String, Vec<String>)>);
    for line in page.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.to_owned();
        }
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.to_owned(), Vec::new())),
            (Some(_), Some(_)) => {
                let (info, lines) = open.take().unwrap();
                out.push((info, section.clone(), lines));
            }
            (Some((_, lines)), None) => lines.push(line.to_owned()),
            (None, None) => {}
        }
    }
    out
}

fn page() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("docs/quickstart.md")).unwrap()
}

/// The `kind` verbs the stand-in implements (kind-tests/kind-stand-in/kind's header).
const STAND_IN: [&str; 6] =
    ["create cluster", "delete cluster", "get kubeconfig", "get clusters", "load docker-image", "load image-archive"];

#[test]
fn the_page_is_in_the_shape_its_runner_reads() {
    let all = blocks(&page());
    let kinds: Vec<&str> = all.iter().map(|(info, _, _)| info.as_str()).collect();
    assert!(kinds.iter().all(|k| ["sh", "sh docker", "sh podman", "text"].contains(k)), "block kinds: {kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "sh docker").count(), 1, "one docker block");
    assert_eq!(kinds.iter().filter(|k| **k == "sh podman").count(), 1, "one podman block");
    let commands: Vec<&String> = all.iter().filter(|(i, _, _)| i.starts_with("sh")).flat_map(|(_, _, l)| l).collect();
    for needed in
        ["cargo install --locked --path cli", "kubectl liqo install --context kind-alpha", "kubectl liqo install --context kind-beta"]
    {
        assert!(commands.iter().any(|c| c.as_str() == needed), "the page runs {needed:?}");
    }
    assert!(commands.iter().any(|c| c.starts_with("kubectl liqo peer ") && c.contains("--wait")), "a peer --wait");
    assert!(commands.iter().any(|c| c.starts_with("kubectl liqo status beta --context kind-alpha")), "status of the peer, on alpha");
    // Whatever the engine, the image is built by it and loaded from it.
    for (info, _, lines) in all.iter().filter(|(i, _, _)| i.starts_with("sh ")) {
        let engine = &info[3..];
        assert!(lines[0].starts_with(&format!("LIQO_ENGINE={engine} image/build.sh")), "{info}: {lines:?}");
    }
    // The last section cleans up, and nothing before it does.
    let clean: Vec<&String> = all.iter().filter(|(i, s, _)| i == "sh" && s == "Clean up").flat_map(|(_, _, l)| l).collect();
    assert!(clean.iter().any(|c| c.starts_with("kind delete cluster")), "{clean:?}");
    assert!(!commands.iter().filter(|c| !clean.contains(c)).any(|c| c.contains("uninstall") || c.contains("delete cluster")));
    // Every kind command is one the stand-in implements.
    for c in commands.iter().filter(|c| c.starts_with("kind ")) {
        let verb = c.split_whitespace().skip(1).take(2).collect::<Vec<_>>().join(" ");
        assert!(STAND_IN.contains(&verb.as_str()), "the stand-in has no `kind {verb}` ({c})");
    }
}

#[test]
fn the_stand_in_refuses_what_it_does_not_implement() {
    let kind = Path::new(ROOT).join("kind-tests/kind-stand-in/kind");
    let header = std::fs::read_to_string(&kind).unwrap();
    for verb in STAND_IN {
        assert!(header.contains(&format!("#   kind {verb}")), "the stand-in's header names kind {verb}");
    }
    for args in [&["version"][..], &["create", "cluster", "--config", "x.yaml"], &["export", "logs"]] {
        let out = Command::new(&kind).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "kind {args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("the tests' stand-in"), "kind {args:?}");
    }
}

#[test]
fn the_runner_skips_loudly_without_the_node_tier() {
    let out = Command::new(Path::new(ROOT).join("kind-tests/quickstart.sh")).env("LIQO_KUBE_BIN", "/nonexistent").output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("SKIPPED: the quick start (docs/quickstart.md) needs /nonexistent/kube-apiserver"), "{said}");
}

#[test]
fn the_reader_of_blocks_reads_sections_and_kinds() {
    let page = "## A\n```sh\nx\ny\n```\ntext\n## Clean up\n```sh podman\nz\n```\n";
    assert_eq!(
        blocks(page),
        [("sh".into(), "A".into(), vec!["x".to_owned(), "y".into()]), ("sh podman".into(), "Clean up".into(), vec!["z".to_owned()])]
    );
}
