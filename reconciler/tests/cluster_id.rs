//! This cluster's ID (protocol §2) on a real API server (envtest convention:
//! `KUBEBUILDER_ASSETS`; skips loudly without it), the reconciler binary run with the RBAC its
//! manifests ship: a new install takes the `kube-system` UID, or the About API's
//! `cluster.clusterset.k8s.io`; the ID in use is recorded on `kube-system`; an ID chosen before
//! 0.4 is kept and recorded; and the Liqo namespace's ConfigMap lost (a deleted namespace, a
//! reinstall) comes back with the same ID.

mod common;

use common::{Reconciler, cluster_id, reconciler_token, restart_reconciler, start_reconciler};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use liqo_testenv::{ControlPlane, create_manifest, eventually, install_liqo};
use serde_json::json;

/// The reconciler down (SIGKILL, as a node lost): what it does at a SIGTERM is not this test's.
fn down(r: &mut Reconciler) {
    let _ = r.child.kill();
    let _ = r.child.wait();
}

/// An ID as 0.3 chose it: a random UUID.
const OLD: &str = "5dc5b312-0f0a-4f43-bb5e-8f2b1c7a9d01";

async fn kube_system_uid(admin: &Client) -> String {
    Api::<Namespace>::all(admin.clone()).get("kube-system").await.unwrap().uid().unwrap()
}

async fn recorded(admin: &Client) -> Option<String> {
    let ns = Api::<Namespace>::all(admin.clone()).get("kube-system").await.ok()?;
    ns.metadata.annotations?.get("discovery.liqo.io/cluster-id").cloned()
}

async fn recorded_as(admin: &Client, id: &str) {
    eventually(&format!("{id} recorded on kube-system"), || async { (recorded(admin).await.as_deref() == Some(id)).then_some(()) }).await;
}

fn properties(admin: &Client) -> Api<DynamicObject> {
    liqo_reconciler::cluster::identity::cluster_properties(admin)
}

async fn property(admin: &Client) -> Option<String> {
    let p = properties(admin).get_opt("cluster.clusterset.k8s.io").await.ok()??;
    p.data["spec"]["value"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_id_is_the_kube_system_uid_recorded_and_kept_through_a_reinstall() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let token = reconciler_token(&admin).await;
    let mut r = start_reconciler(&cp, "a", &token);
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "liqo");

    // A new install: the kube-system namespace's UID, recorded on it.
    let uid = kube_system_uid(&admin).await;
    assert_eq!(cluster_id(&admin).await, uid);
    recorded_as(&admin, &uid).await;
    let cm = cms.get("cluster-id").await.unwrap();

    // Never rewritten: a restart leaves the ConfigMap as it was.
    restart_reconciler(&cp, &mut r, "a", &token, &[]);
    common::ready(&mut r).await;
    assert_eq!(cms.get("cluster-id").await.unwrap().resource_version(), cm.resource_version());

    // Upgraded from 0.3, whose ID was a random UUID: kept, and recorded.
    down(&mut r);
    cms.patch("cluster-id", &PatchParams::default(), &Patch::Merge(json!({"data": {"cluster-id": OLD}}))).await.unwrap();
    restart_reconciler(&cp, &mut r, "a", &token, &[]);
    recorded_as(&admin, OLD).await;
    assert_eq!(cluster_id(&admin).await, OLD);

    // The Liqo namespace's ConfigMap lost with the reconciler down (the namespace deleted and
    // the install applied again): the same ID, from the record, not the kube-system UID.
    down(&mut r);
    cms.delete("cluster-id", &DeleteParams::default()).await.unwrap();
    restart_reconciler(&cp, &mut r, "a", &token, &[]);
    assert_eq!(cluster_id(&admin).await, OLD);

    // Deleted while it runs, and emptied by hand: made again with the same ID.
    cms.delete("cluster-id", &DeleteParams::default()).await.unwrap();
    eventually("the ConfigMap made again", || async { cms.get_opt("cluster-id").await.ok()? }).await;
    assert_eq!(cluster_id(&admin).await, OLD);
    cms.patch("cluster-id", &PatchParams::default(), &Patch::Merge(json!({"data": {"cluster-id": ""}}))).await.unwrap();
    eventually("the emptied ConfigMap filled in with the same ID", || async {
        (cms.get("cluster-id").await.ok()?.data?.get("cluster-id")? == OLD).then_some(())
    })
    .await;
    assert!(r.child.try_wait().unwrap().is_none(), "the reconciler exited: {}", common::log_tail(&r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_about_api_names_a_new_cluster_and_is_set_where_nobody_has() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let crd = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/about-clusterproperties.yaml")).unwrap();
    create_manifest(&admin, &crd, "default").await;
    eventually("ClusterProperties served", || async { properties(&admin).list(&Default::default()).await.ok() }).await;
    let token = reconciler_token(&admin).await;

    // The CRD installed, nobody's property: the kube-system UID, and the property set to it.
    let uid = kube_system_uid(&admin).await;
    let mut r = start_reconciler(&cp, "a", &token);
    assert_eq!(cluster_id(&admin).await, uid);
    recorded_as(&admin, &uid).await;
    eventually("cluster.clusterset.k8s.io set to the ID", || async { (property(&admin).await? == uid).then_some(()) }).await;

    // Another cluster, whose property was set before Liqo came: its value is the ID.
    down(&mut r);
    let ns: Api<Namespace> = Api::all(admin.clone());
    let forget = json!({"metadata": {"annotations": {"discovery.liqo.io/cluster-id": null}}});
    ns.patch("kube-system", &PatchParams::default(), &Patch::Merge(&forget)).await.unwrap();
    Api::<ConfigMap>::namespaced(admin.clone(), "liqo").delete("cluster-id", &DeleteParams::default()).await.unwrap();
    let set = json!({"spec": {"value": "west-1"}});
    properties(&admin).patch("cluster.clusterset.k8s.io", &PatchParams::default(), &Patch::Merge(&set)).await.unwrap();
    restart_reconciler(&cp, &mut r, "a", &token, &[]);
    assert_eq!(cluster_id(&admin).await, "west-1");
    recorded_as(&admin, "west-1").await;
    assert_eq!(property(&admin).await.as_deref(), Some("west-1"));
}
