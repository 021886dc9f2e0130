//! `kubectl liqo uninstall` against a real API server (envtest convention: `KUBEBUILDER_ASSETS`;
//! skips loudly without it), with no reconciler running: what it deletes, and what it says when
//! something does not go in time.

use std::process::Command;

use kube::api::{Api, PostParams};
use liqo_api::{ClusterConfig, PeeringPolicy, PeeringRequest};
use liqo_testenv::{ControlPlane, install_liqo};

/// `kubectl liqo uninstall --timeout 3s` as a user runs it: its exit code and what it said.
fn uninstall(cp: &ControlPlane) -> (Option<i32>, String) {
    uninstall_with(&cp.kubeconfig(liqo_testenv::ADMIN_TOKEN), &["--timeout", "3s"])
}

/// `kubectl liqo uninstall ARGS` with `kubeconfig`: its exit code and what it said.
fn uninstall_with(kubeconfig: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-liqo"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("uninstall")
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_deletes_our_objects_and_says_what_holds_it_up() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let request: PeeringRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest",
        "metadata": {"name": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9", "namespace": "liqo", "finalizers": ["discovery.liqo.io/peered"]},
        "spec": {"clusterIdentity": {"clusterID": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"}, "namespace": "liqo",
                 "kubeConfigRef": {"name": "pr-kubeconfig-9a596a4b-591c-4ac6-8fd6-80258b4b3bf9", "namespace": "liqo"}}
    }))
    .unwrap();
    let requests: Api<PeeringRequest> = Api::namespaced(admin.clone(), "liqo");
    requests.create(&PostParams::default(), &request).await.unwrap();
    let configs: Api<ClusterConfig> = Api::all(admin.clone());
    let config: ClusterConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "config.liqo.io/v1alpha1", "kind": "ClusterConfig", "metadata": {"name": "liqo-configuration"}, "spec": {}
    }))
    .unwrap();
    configs.create(&PostParams::default(), &config).await.unwrap();

    let (code, said) = uninstall(&cp);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("timed out waiting for 1 PeeringRequest(s) removed: 1 left"), "{said}");
    let left = requests.get("9a596a4b-591c-4ac6-8fd6-80258b4b3bf9").await.unwrap();
    assert!(left.metadata.deletion_timestamp.is_some(), "deleted, held by its finalizer (the reconciler's to remove)");
    // A peer that still wants us is refused from the start: it cannot put its request back.
    assert!(said.contains("peering requests refused from now on"), "{said}");
    let config = configs.get("liqo-configuration").await.unwrap();
    assert_eq!(config.spec.peering_policy, PeeringPolicy::RejectAll);
}

/// While a peering is up, `uninstall` refuses and names it (exit 1), changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_refuses_while_peerings_are_up_and_names_them() {
    use kube::api::{Patch, PatchParams};
    use liqo_api::ForeignCluster;
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let fcs: Api<ForeignCluster> = Api::all(admin.clone());
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "node-b"},
        "spec": {"clusterIdentity": {"clusterID": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"}, "join": true}
    }))
    .unwrap();
    fcs.create(&PostParams::default(), &fc).await.unwrap();
    let joined = serde_json::json!({"status": {"outgoing": {"joined": true}}});
    fcs.patch_status("node-b", &PatchParams::default(), &Patch::Merge(joined)).await.unwrap();

    let (code, said) = uninstall(&cp);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("1 peering(s) are up: node-b"), "{said}");
    assert!(said.contains("--unpeer"), "says how to go on: {said}");
    let kept = fcs.get("node-b").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none(), "nothing deleted");
}

/// `--keep-crds` keeps the CRDs (and so the custom resources); without it they go.
/// (The API server here has no namespace controller, so neither run can finish.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_keeps_the_crds_only_when_asked() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::ListParams;
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let ours = || async {
        let all = crds.list(&ListParams::default()).await.unwrap();
        all.items.iter().filter(|c| c.metadata.name.as_deref().is_some_and(|n| n.ends_with(".liqo.io"))).count()
    };
    // The holder key, as the manifests ship it and a reconciler filled it: kept by the
    // uninstall, with its Role (deleted: installing again makes it anew).
    let holder_key = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/reconciler/holder-key.yaml")).unwrap();
    liqo_testenv::create_manifest(&admin, &holder_key, "liqo").await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(admin.clone(), "kube-system");
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(admin.clone(), "kube-system");
    let kubeconfig = cp.kubeconfig(liqo_testenv::ADMIN_TOKEN);
    let run = |args: &[&str]| uninstall_with(&kubeconfig, args);
    // This API server has no namespace controller: namespace liqo stays terminating, and
    // each run says so (exit 1) after deleting what it deletes.
    let (code, said) = run(&["--keep-crds", "--timeout", "3s"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("namespace liqo terminating"), "{said}");
    assert_eq!(ours().await, 6, "the CRDs kept: {said}");
    let (code, said) = run(&["--timeout", "3s"]);
    assert_eq!(code, Some(1), "{said}");
    liqo_testenv::eventually("our CRDs gone", || async { (ours().await == 0).then_some(()) }).await;
    assert!(secrets.get_opt("liqo-holder-key").await.unwrap().is_some(), "the holder key kept: {said}");
    assert!(roles.get_opt("liqo-reconciler-holder-key").await.unwrap().is_none(), "its Role removed: {said}");
}

/// A tenant namespace made again while `uninstall` waits for them to go (a reconciler still
/// shutting down answers a peer that put its request back) is deleted too, not waited for until
/// the deadline. Whether the namespaces finish terminating here depends on the test API
/// server's controllers, so the run may end at its deadline; what is asserted is that the
/// namespace made again was deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_namespace_made_again_during_the_uninstall_is_deleted_too() {
    use k8s_openapi::api::core::v1::Namespace;
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let tenant = |name: &str| -> Namespace {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"discovery.liqo.io/tenant-namespace": "true"}}
        }))
        .unwrap()
    };
    namespaces.create(&PostParams::default(), &tenant("liqo-tenant-first")).await.unwrap();
    let kubeconfig = cp.kubeconfig(liqo_testenv::ADMIN_TOKEN);
    let run = std::thread::spawn(move || uninstall_with(&kubeconfig, &["--timeout", "8s"]));
    // Once the uninstall has deleted the first, another is made, as a reconciler would.
    liqo_testenv::eventually("the first tenant namespace deleted", || async {
        namespaces.get("liqo-tenant-first").await.ok().and_then(|n| n.metadata.deletion_timestamp).map(|_| ())
    })
    .await;
    namespaces.create(&PostParams::default(), &tenant("liqo-tenant-again")).await.unwrap();
    let (code, said) = tokio::task::spawn_blocking(move || run.join().unwrap()).await.unwrap();
    // Gone, or deleted and still terminating (then the run says so at its deadline).
    let again = namespaces.get_opt("liqo-tenant-again").await.unwrap();
    assert!(again.is_none_or(|n| n.metadata.deletion_timestamp.is_some()), "the namespace made again is deleted too: {said}");
    match code {
        Some(0) => assert!(said.contains("the tenant namespaces gone ("), "{said}"),
        _ => assert!(said.contains("tenant namespace(s) left") || said.contains("namespace liqo terminating"), "{said}"),
    }
}
