//! One active reconciler per cluster: two `liqo-reconciler` processes against one real
//! control plane (KUBEBUILDER_ASSETS), with the shipped RBAC. One holds Lease
//! `liqo-reconciler` and runs the controllers, the other waits; SIGTERM to the holder releases
//! the Lease and the standby takes over; a holder whose Lease is taken exits. Skips loudly
//! without the assets.

mod common;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use liqo_reconciler::machinery::leader::field_manager;
use liqo_testenv::{ControlPlane, eventually, install_liqo};

use common::{Reconciler, exited, ops_get, ready, reconciler_token, start_reconciler, terminate};

/// The field managers that own `spec.holderIdentity` of `lease` (by server-side apply).
fn holder_managers(lease: &Lease) -> Vec<String> {
    lease
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.operation.as_deref() == Some("Apply"))
        .filter(|m| m.fields_v1.as_ref().is_some_and(|f| f.0["f:spec"].get("f:holderIdentity").is_some()))
        .filter_map(|m| m.manager.clone())
        .collect()
}

/// `liqo_reconciler_leader` as the process reports it.
async fn leader_gauge(r: &Reconciler) -> Option<u8> {
    let (_, metrics) = ops_get(r, "/metrics").await?;
    metrics.lines().find_map(|l| l.strip_prefix("liqo_reconciler_leader ")).and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_reconciler_leads_and_a_standby_takes_over() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let token = reconciler_token(&admin).await;
    let mut a = start_reconciler(&cp, "a", &token);
    let mut b = start_reconciler(&cp, "b", &token);
    ready(&mut a).await;
    ready(&mut b).await;

    // Exactly one leads.
    let (a_leads, b_leads) = eventually("one reconciler leading", || async {
        let (x, y) = (leader_gauge(&a).await?, leader_gauge(&b).await?);
        (x + y == 1).then_some((x == 1, y == 1))
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "liqo");
    let lease = leases.get("liqo-reconciler").await.unwrap();
    let holder = lease.spec.clone().unwrap().holder_identity.unwrap();
    assert!(!holder.is_empty());
    // Each contender applies under a field manager of its own, naming its identity: that is
    // what makes the standby's apply conflict instead of silently taking the Lease.
    assert_eq!(holder_managers(&lease), [field_manager(&holder)]);
    // Still one a few renewals later (no flapping).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!((leader_gauge(&a).await == Some(1), leader_gauge(&b).await == Some(1)), (a_leads, b_leads));

    // The leader stops: it releases the Lease and exits 0; the standby takes over.
    let (mut leader, standby) = if a_leads { (a, b) } else { (b, a) };
    let status = terminate(&mut leader).await;
    assert!(status.success(), "exit status {status}");
    eventually("the standby leading", || async { (leader_gauge(&standby).await? == 1).then_some(()) }).await;
    let lease = leases.get("liqo-reconciler").await.unwrap();
    let new_holder = lease.spec.clone().unwrap().holder_identity.unwrap();
    assert_ne!(new_holder, holder, "the Lease changed hands");
    assert_eq!(holder_managers(&lease), [field_manager(&new_holder)], "the new holder's own field manager");

    // Someone else takes the Lease: the holder that lost it exits (1) rather than run beside it.
    let mut standby = standby;
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now());
    let patch =
        serde_json::json!({"spec": {"holderIdentity": "intruder", "acquireTime": now, "renewTime": now, "leaseDurationSeconds": 3600}});
    leases.patch("liqo-reconciler", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await.unwrap();
    let status = exited(&mut standby).await;
    assert_eq!(status.code(), Some(1), "the leader that lost the Lease exits: {status}");
}
