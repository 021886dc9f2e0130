//! One join, timed: on two real API servers (`KUBEBUILDER_ASSETS`, with the namespace
//! controller), each with the `liqo-reconciler` release binary and the shipped RBAC, a fresh
//! ForeignCluster in the auth-service form (`authUrl`, `join: true`) is created on the home cluster,
//! and the clock is read when our PeeringRequest exists on the remote, and when the
//! ForeignCluster says joined (the remote's Advertisement here: what `kubectl liqo peer --wait`
//! waits for). Then it is deleted and the next one waits until both tenant namespaces are gone.
//! JOINS (default 20) joins; prints each and the medians, fastest and slowest.
//!
//! `cargo bench -p liqo-reconciler --bench join` (or `just bench`); `JOINS=5` for fewer.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, PostParams};
use liqo_api::ForeignCluster;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let joins: usize = std::env::var("JOINS").ok().and_then(|n| n.parse().ok()).unwrap_or(20);
    let Some(two) = common::two_clusters().await else {
        eprintln!("SKIPPED: bench join: no KUBEBUILDER_ASSETS with kube-apiserver and etcd");
        return;
    };
    if !two.home_cp.controllers() || !two.remote_cp.controllers() {
        eprintln!("SKIPPED: bench join: KUBEBUILDER_ASSETS has no kube-controller-manager (a tenant namespace would never go)");
        return;
    }
    let fcs: Api<ForeignCluster> = Api::all(two.home.clone());
    let ours = common::requests_of(&two.remote, &two.home_id);
    let (mut took, mut joined) = (Vec::with_capacity(joins), Vec::with_capacity(joins));
    for i in 0..joins {
        let name = format!("bench-{i}");
        let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name},
            "spec": {"authUrl": two.remote_rec.auth_url, "join": true, "allowUntrustedCA": true}
        }))
        .unwrap();
        let started = Instant::now();
        fcs.create(&PostParams::default(), &fc).await.unwrap();
        loop {
            if ours.get_opt(&two.home_id).await.ok().flatten().is_some_and(|pr| pr.metadata.deletion_timestamp.is_none()) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "join {i}: no PeeringRequest on the remote after 60 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let join = started.elapsed();
        loop {
            if fcs.get_opt(&name).await.ok().flatten().is_some_and(|f| common::outgoing_joined(&f)) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "join {i}: not joined after 60 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let whole = started.elapsed();
        println!("join {i:2}: our PeeringRequest on the remote {:.3} s, joined {:.3} s", join.as_secs_f64(), whole.as_secs_f64());
        took.push(join);
        joined.push(whole);
        fcs.delete(&name, &DeleteParams::default()).await.unwrap();
        common::gone(&fcs, &name, "the ForeignCluster deleted").await;
        common::tenant_gone(&two.home_cp, &two.home, &two.remote_id).await;
        common::tenant_gone(&two.remote_cp, &two.remote, &two.home_id).await;
    }
    let secs = |d: Duration| d.as_secs_f64();
    for (what, mut times) in [("to our PeeringRequest on the remote", took), ("to joined", joined)] {
        times.sort();
        println!(
            "one join, from join: true {what}, {joins} joins: median {:.3} s, fastest {:.3} s, slowest {:.3} s",
            secs(times[times.len() / 2]),
            secs(times[0]),
            secs(times[times.len() - 1])
        );
    }
    println!("logs: {} and {}", two.home_rec.log.display(), two.remote_rec.log.display());
}
