//! What one ForeignCluster status write costs a real API server (`KUBEBUILDER_ASSETS`), by the
//! way it is sent: WRITES (default 1,000) ForeignClusters of a joined peer's shape, each
//! status changed in every round (RemoteReachable flips, as in an outage and its return), written
//! by server-side apply as the reconciler has (`apply`), the same with `fieldValidation=Ignore`
//! (`apply-ignore`: the server looks for no unknown or duplicate fields), by a JSON merge patch of the same whole
//! status (`merge`), and by server-side apply over a status of fewer bytes (`apply-lean`: the
//! messages and fingerprints short). Two references tell what the cost is made of: the same apply
//! with the conditions alone (`apply-conditions`: how the cost grows with the status's fields),
//! and a ConfigMap holding the same status as one string, written by server-side apply
//! (`configmap`: what a write of the same bytes costs a built-in kind, with no CRD schema, no
//! unstructured object and one field to track). `STATUS_SCHEMA=free` replaces the CRD's status
//! schema by `x-kubernetes-preserve-unknown-fields` first (what the schema's coercion and
//! validation cost; an experiment, never shipped); `WATCHERS=N` holds N watches of every
//! ForeignCluster through the rounds (what each watcher adds). The API server's CPU (utime + stime of its
//! process, from /proc) is read around each round; ROUNDS (default 4) rounds alternate the ways,
//! and the medians are printed with each way's ratio to `apply`.
//!
//! `cargo bench -p liqo-reconciler --bench status_write` (or `just bench`).

use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::ForeignCluster;
use serde_json::{Value, json};

const MANAGER: &str = "liqo-reconciler";

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Apply,
    ApplyIgnore,
    Merge,
    ApplyLean,
    ApplyConditions,
    ConfigMap,
}

impl Way {
    const ALL: [Way; 6] = [Way::Apply, Way::ApplyIgnore, Way::Merge, Way::ApplyLean, Way::ApplyConditions, Way::ConfigMap];
    fn name(self) -> &'static str {
        match self {
            Way::Apply => "apply",
            Way::ApplyIgnore => "apply-ignore",
            Way::Merge => "merge",
            Way::ApplyLean => "apply-lean",
            Way::ApplyConditions => "apply-conditions",
            Way::ConfigMap => "configmap",
        }
    }
}

/// A joined peer's status as the reconciler writes it; `up` says whether its API server answers.
fn status(i: usize, up: bool, lean: bool, stamp: &str) -> Value {
    let id = format!("{i:08x}-0000-4000-8000-000000000000");
    let fp = if lean { "ab12".to_owned() } else { "ab12cd34".repeat(8) };
    let said = |long: &str| if lean { String::new() } else { long.to_owned() };
    let cond = |t: &str, s: &str, r: &str, m: String| json!({"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": stamp, "observedGeneration": 1});
    let (reach, reason, why) = if up {
        ("True", "Reachable", said("the remote API server answered"))
    } else {
        ("False", "RemoteUnreachable", said("10.77.3.4:6443 did not answer within 5 s (no answer, no refusal: packets dropped?)"))
    };
    json!({
        "conditions": [
            cond("Trusted", "True", "TrustedCA", said("the remote's CA is pinned by fingerprint")),
            cond("Authenticated", "True", "IdentityAccepted", said("the remote accepted our identity request")),
            cond("RemoteReachable", reach, reason, why),
            cond("CaVerified", "True", "CaMatches", said("the remote presents the pinned CA")),
            cond("Joined", "True", "Joined", said("our PeeringRequest is on the remote and its Advertisement is here")),
        ],
        "caDataRef": {"name": format!("fleet-{i:05}-ca-data"), "namespace": "liqo"},
        "caFingerprint": fp,
        "authStatus": "Accepted",
        "outgoing": {
            "joined": true,
            "remotePeeringRequestName": HOME,
            "advertisement": format!("advertisement-{id}"),
            "presentedFingerprint": fp,
            "handedKubeconfig": {"apiUrl": "https://10.77.0.1:6443", "caFingerprint": fp, "renewAfter": stamp},
        },
        "tenantNamespace": {"local": format!("liqo-tenant-{id}"), "remote": format!("liqo-tenant-{HOME}")},
    })
}

const HOME: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

/// utime + stime of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// Writes every ForeignCluster's status once in `way`, 32 at a time; returns the seconds taken.
async fn round(client: &Client, n: usize, way: Way, up: bool, stamp: &str) -> f64 {
    let api: Api<ForeignCluster> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "liqo");
    let started = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let (api, cms) = (api.clone(), cms.clone());
            async move {
                let name = format!("fleet-{i:05}");
                let mut s = status(i, up, way == Way::ApplyLean, stamp);
                let mut apply = PatchParams::apply(MANAGER).force();
                if way == Way::ApplyIgnore {
                    apply = apply.validation_ignore();
                }
                let written = match way {
                    Way::Apply | Way::ApplyIgnore | Way::ApplyLean | Way::ApplyConditions => {
                        if way == Way::ApplyConditions {
                            s = json!({"conditions": s["conditions"].take()});
                        }
                        let body = json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "status": s});
                        api.patch_status(&name, &apply, &Patch::Apply(body)).await.map(drop)
                    }
                    Way::Merge => {
                        let params = PatchParams { field_manager: Some(MANAGER.into()), ..Default::default() };
                        api.patch_status(&name, &params, &Patch::Merge(json!({"status": s}))).await.map(drop)
                    }
                    Way::ConfigMap => {
                        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"status": s.to_string()}});
                        cms.patch(&name, &apply, &Patch::Apply(body)).await.map(drop)
                    }
                };
                written.unwrap_or_else(|e| panic!("{name}: {} write: {e}", way.name()));
            }
        })
        .await;
    started.elapsed().as_secs_f64()
}

/// The experiment of `STATUS_SCHEMA=free`: the ForeignCluster CRD's status schema replaced by
/// `x-kubernetes-preserve-unknown-fields`, and a write that uses it seen through.
async fn free_status_schema(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let free = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let ops = json!([{"op": "replace", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/status", "value": free}]);
    let ops: json_patch::Patch = serde_json::from_value(ops).unwrap();
    crds.patch("foreignclusters.discovery.liqo.io", &PatchParams::default(), &Patch::Json::<()>(ops)).await.unwrap();
    // A field the schema did not know is kept once the new schema serves writes.
    let api: Api<ForeignCluster> = Api::all(client.clone());
    let probe: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "schema-probe"}, "spec": {"clusterIdentity": {"clusterID": "schema-probe"}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &probe).await.unwrap();
    let raw: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &kube::api::ApiResource::erase::<ForeignCluster>(&()));
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let written = raw
            .patch_status("schema-probe", &PatchParams::default(), &Patch::Merge(json!({"status": {"unknownToTheSchema": 1}})))
            .await
            .unwrap();
        if written.data.pointer("/status/unknownToTheSchema").is_some() || Instant::now() > deadline {
            assert!(Instant::now() <= deadline, "the free status schema not served within 60 s");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    println!("STATUS_SCHEMA=free: the ForeignCluster CRD's status schema is x-kubernetes-preserve-unknown-fields");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("WRITES").ok().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(4);
    let Some(cp) = liqo_testenv::ControlPlane::start_or_skip().await else {
        eprintln!("SKIPPED: bench status_write: no KUBEBUILDER_ASSETS with kube-apiserver and etcd");
        return;
    };
    let client = cp.admin();
    liqo_testenv::install_liqo(&client, "liqo").await;
    if std::env::var("STATUS_SCHEMA").is_ok_and(|s| s == "free") {
        free_status_schema(&client).await;
    }
    let api: Api<ForeignCluster> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "liqo");
    for i in 0..n {
        let fc: ForeignCluster = serde_json::from_value(json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": format!("fleet-{i:05}")},
            "spec": {"clusterIdentity": {"clusterID": format!("{i:08x}-0000-4000-8000-000000000000")},
                     "authUrl": "https://10.77.3.4:8443", "join": true},
        }))
        .unwrap();
        api.create(&PostParams::default(), &fc).await.unwrap();
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("fleet-{i:05}")}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let watchers: usize = std::env::var("WATCHERS").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    for _ in 0..watchers {
        let api = api.clone();
        tokio::spawn(kube::runtime::watcher(api, Default::default()).for_each(|_| async {}));
    }
    let pid = cp.apiserver_pid().expect("the API server's pid");
    // One write each way first, so that every object has every manager's fields once.
    let mut up = true;
    for way in Way::ALL {
        up = !up;
        round(&client, n, way, up, "2026-12-01T00:00:00Z").await;
    }
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); Way::ALL.len()];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); Way::ALL.len()];
    for r in 0..rounds {
        for (k, way) in Way::ALL.into_iter().enumerate() {
            up = !up;
            let stamp = format!("2026-12-01T00:{:02}:{:02}Z", r % 60, k);
            let before = cpu_seconds(pid);
            let secs = round(&client, n, way, up, &stamp).await;
            let spent = cpu_seconds(pid) - before;
            println!(
                "round {r} {:>10}: {n} writes in {secs:.2} s, the API server {:.3} ms of CPU a write",
                way.name(),
                spent * 1000.0 / n as f64
            );
            cpu[k].push(spent * 1000.0 / n as f64);
            wall[k].push(secs);
        }
    }
    let base = median(cpu[0].clone());
    for (k, way) in Way::ALL.into_iter().enumerate() {
        let c = median(cpu[k].clone());
        println!(
            "status write by {:>10}: the API server {c:.3} ms of CPU a write (median of {rounds}), {:.2}x apply; {n} writes in {:.2} s",
            way.name(),
            c / base,
            median(wall[k].clone())
        );
    }
}
