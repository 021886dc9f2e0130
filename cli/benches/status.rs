//! `kubectl liqo status` at size, on a real API server (envtest convention:
//! `KUBEBUILDER_ASSETS`; prints SKIPPED without it): N ForeignClusters (`BENCH_PEERS`, default
//! 1,000; labelled as our webhook labels them, a third joined, a tenth failing), then each
//! command run as a user runs it, rounds alternating, against `kubectl get foreignclusters`
//! (the baseline, from `LIQO_MANIFEST_TOOLS` or the PATH) in the same run: the median wall time
//! and the bytes printed.
//!
//! `cargo bench -p liqo-cli --bench status`; `BENCH_PEERS=10000 cargo bench -p liqo-cli --bench status`.

use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::ForeignCluster;
use liqo_testenv::{ControlPlane, install_liqo};
use serde_json::json;

const ROUNDS: usize = 5;

fn id(i: usize) -> String {
    format!("{i:08x}-0000-4000-8000-000000000000")
}

async fn create(fcs: &Api<ForeignCluster>, i: usize) {
    let fc: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": format!("peer-{i:05}"), "labels": {"discovery.liqo.io/cluster-id": id(i), "discovery.liqo.io/discovery-type": "Manual"}},
        "spec": {"clusterIdentity": {"clusterID": id(i)}, "join": i % 3 != 2, "authUrl": format!("https://10.1.{}.{}:30443", i / 250, i % 250)}
    }))
    .unwrap();
    fcs.create(&PostParams::default(), &fc).await.unwrap();
    let joined = i.is_multiple_of(3);
    let failing = i % 10 == 1;
    let c = |t: &str, s: &str, r: &str| json!({"type": t, "status": s, "reason": r, "message": "m", "lastTransitionTime": "2026-11-25T10:00:00Z"});
    let conditions = if failing {
        json!([c("Trusted", "True", "Trusted"), c("RemoteReachable", "False", "RemoteUnreachable"), c("Joined", "Unknown", "Waiting")])
    } else {
        json!([
            c("Trusted", "True", "Trusted"),
            c("RemoteReachable", "True", "Reachable"),
            c("Joined", if joined { "True" } else { "False" }, if joined { "Joined" } else { "WaitingForAdvertisement" })
        ])
    };
    let status = json!({"status": {"conditions": conditions, "outgoing": {"joined": joined}}});
    fcs.patch_status(&format!("peer-{i:05}"), &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let peers: usize = std::env::var("BENCH_PEERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let fcs: Api<ForeignCluster> = Api::all(admin.clone());
    let started = Instant::now();
    futures::stream::iter(0..peers).for_each_concurrent(32, |i| create(&fcs, i)).await;
    println!("kubectl liqo status: {peers} ForeignClusters made in {:.1} s", started.elapsed().as_secs_f64());

    let kubeconfig = cp.kubeconfig(liqo_testenv::ADMIN_TOKEN);
    let tools = std::env::var("LIQO_MANIFEST_TOOLS").map(|d| format!("{d}/kubectl")).unwrap_or_else(|_| "kubectl".into());
    let plugin = env!("CARGO_BIN_EXE_kubectl-liqo");
    let middle = format!("peer-{:05}", peers / 2);
    let middle_id = id(peers / 2);
    let runs: Vec<(String, String, Vec<String>)> = vec![
        ("kubectl get foreignclusters (baseline)".into(), tools.clone(), vec!["get".into(), "foreignclusters".into()]),
        ("kubectl liqo status".into(), plugin.into(), vec!["status".into()]),
        ("kubectl liqo status -o json".into(), plugin.into(), vec!["status".into(), "-o".into(), "json".into()]),
        (
            "kubectl liqo status --phase RemoteUnreachable --limit 20".into(),
            plugin.into(),
            ["status", "--phase", "RemoteUnreachable", "--limit", "20"].map(String::from).to_vec(),
        ),
        (format!("kubectl liqo status {middle} (by name)"), plugin.into(), vec!["status".into(), middle.clone()]),
        ("kubectl liqo status <cluster ID> (by label)".into(), plugin.into(), vec!["status".into(), middle_id.clone()]),
    ];
    let mut times: Vec<Vec<Duration>> = vec![vec![]; runs.len()];
    let mut sizes = vec![0usize; runs.len()];
    // Rounds alternate the commands, so a noisy moment touches all of them alike.
    for _ in 0..ROUNDS {
        for (k, (_, program, args)) in runs.iter().enumerate() {
            let t = Instant::now();
            let out = Command::new(program).arg("--kubeconfig").arg(&kubeconfig).args(args).env_remove("KUBECONFIG").output();
            let Ok(out) = out else {
                continue;
            };
            times[k].push(t.elapsed());
            sizes[k] = out.stdout.len();
            assert!(out.status.code().is_some_and(|c| c <= 1), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let baseline = times[0].first().map(|_| median(times[0].clone()));
    for (k, (what, _, _)) in runs.iter().enumerate() {
        if times[k].is_empty() {
            println!("  {what}: SKIPPED (not runnable here)");
            continue;
        }
        let m = median(times[k].clone());
        let ratio = baseline.map_or(String::new(), |b| format!(", {:.2}× the baseline", m.as_secs_f64() / b.as_secs_f64()));
        println!("  {what}: median {:.0} ms over {ROUNDS} runs{ratio}; {} KiB printed", m.as_secs_f64() * 1e3, sizes[k] / 1024);
    }
}
