//! The Events' budget against a real kube-apiserver (`KUBEBUILDER_ASSETS`): a storm of one
//! reason writes its burst, the rest is told in one Event about the Lease, and another reason
//! keeps its own budget. Skips loudly without the assets.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::api::{Api, ListParams};
use liqo_reconciler::reporting::events::{Event, EventType, Recorder, Reporter};
use liqo_reconciler::reporting::metrics::{EventsLeftOut, ReasonLabels};
use liqo_testenv::{ControlPlane, eventually, install_liqo};

fn foreign_cluster(i: usize) -> ObjectReference {
    ObjectReference {
        api_version: Some("discovery.liqo.io/v1alpha1".into()),
        kind: Some("ForeignCluster".into()),
        name: Some(format!("peer-{i}")),
        uid: Some(format!("00000000-0000-4000-8000-{i:012}")),
        ..Default::default()
    }
}

fn event(reason: &str) -> Event {
    Event { type_: EventType::Warning, reason: reason.into(), note: Some("down".into()), action: "Peering".into(), secondary: None }
}

async fn with_reason(api: &Api<K8sEvent>, reason: &str) -> Vec<K8sEvent> {
    let all = api.list(&ListParams::default()).await.unwrap().items;
    all.into_iter().filter(|e| e.reason.as_deref() == Some(reason)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_one_reason_writes_its_burst_and_one_event_about_the_lease_tells_the_rest() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    // A burst of 3, then one Event of a kind every 1,000 s: within the test, just the burst.
    let recorder = Recorder::new(admin.clone(), Reporter { controller: "liqo-reconciler".into(), instance: None }).with_budget(0.001, 3);
    for i in 0..10 {
        recorder.publish(&event("RemoteUnreachable"), &foreign_cluster(i)).await.unwrap();
    }
    recorder.publish(&event("IdentityRefused"), &foreign_cluster(0)).await.unwrap();

    let events = Api::<K8sEvent>::all(admin.clone());
    let written = with_reason(&events, "RemoteUnreachable").await;
    let mut about: Vec<_> = written.iter().filter_map(|e| e.regarding.as_ref()?.name.clone()).collect();
    about.sort();
    assert_eq!(about, ["peer-0", "peer-1", "peer-2"], "the burst, one Event each");
    assert_eq!(with_reason(&events, "IdentityRefused").await.len(), 1, "another reason has its own budget");

    let lease = ObjectReference {
        api_version: Some("coordination.k8s.io/v1".into()),
        kind: Some("Lease".into()),
        name: Some("liqo-reconciler".into()),
        namespace: Some("liqo".into()),
        ..Default::default()
    };
    let counted = EventsLeftOut::default();
    let telling = tokio::spawn(recorder.clone().tell_left_out(lease, counted.clone()));
    let told = eventually("the Event about the Lease telling the 7 left out", || async {
        let in_liqo = Api::<K8sEvent>::namespaced(admin.clone(), "liqo");
        with_reason(&in_liqo, "RemoteUnreachable")
            .await
            .into_iter()
            .find(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Lease"))
    })
    .await;
    telling.abort();
    let note = told.note.unwrap_or_default();
    assert!(note.starts_with("7 more Events RemoteUnreachable about ForeignClusters"), "{note}");
    assert_eq!(told.type_.as_deref(), Some("Warning"));
    assert_eq!(told.regarding.and_then(|r| r.name).as_deref(), Some("liqo-reconciler"));
    assert_eq!(counted.get_or_create(&ReasonLabels { reason: "RemoteUnreachable".into() }).get(), 7);
    assert_eq!(with_reason(&events, "RemoteUnreachable").await.len(), 4, "the burst and the one telling the rest");
}
