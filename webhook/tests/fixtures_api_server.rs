//! The AdmissionReview bodies captured from a real kube-apiserver, each sent to the real
//! HTTPS server, with the answer the API server would act on.

mod common;

use std::time::Duration;

use common::*;
use liqo_api::PeeringPolicy;
use liqo_webhook::policy::PolicyConfig;
use liqo_webhook::state::StaticView;

#[test]
fn fixtures_are_the_shared_captures_byte_for_byte() {
    let shared = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/admission");
    if !shared.exists() {
        liqo_testenv::skip(&format!("{} not present; cannot compare the copied fixtures", shared.display()));
        return;
    }
    let mut names: Vec<_> = std::fs::read_dir(&shared).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    let mut ours: Vec<_> = std::fs::read_dir(fixtures_dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    ours.sort();
    assert_eq!(names, ours, "webhook/tests/fixtures/admission differs from shared/fixtures/admission");
    for n in names {
        assert_eq!(std::fs::read(shared.join(&n)).unwrap(), std::fs::read(fixtures_dir().join(&n)).unwrap(), "{n:?} differs");
    }
}

async fn running() -> Running {
    start(default_view(), Duration::from_secs(5)).await
}

fn assert_allowed(answer: &Answer, fixture_name: &str) -> serde_json::Value {
    assert_eq!(answer.status, 200, "{}", answer.text());
    let v = answer.json();
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(v["kind"], "AdmissionReview");
    assert_eq!(v["response"]["uid"], fixture_uid(fixture_name).as_str(), "uid echoed");
    assert_eq!(v["response"]["allowed"], true, "{v}");
    v["response"].clone()
}

#[tokio::test]
async fn peer_requests_for_its_own_id_are_allowed_create_update_delete_and_dry_run() {
    let r = running().await;
    for name in [
        "peeringrequest-create-by-peer-sa.json",
        "peeringrequest-create-dryrun-by-peer-sa.json",
        "peeringrequest-update-by-peer-sa.json",
        "peeringrequest-delete-by-peer-sa.json",
        "federationrequest-create-by-admin.json",
        "foreigncluster-update-join-validating.json",
    ] {
        let resp = assert_allowed(&post(&r, "/validate", fixture(name)).await, name);
        assert!(resp.get("patch").is_none(), "{name}: validation never patches");
    }
}

/// The captures as they are, a peer of the cluster-scoped protocol (0.1): its identity (a
/// ServiceAccount of the Liqo namespace) is no identity here any more, and an admin's request
/// without a namespace is told where it belongs.
#[tokio::test]
async fn requests_of_the_cluster_scoped_protocol_are_refused_saying_why() {
    let r = running().await;
    let v = post(&r, "/validate", captured("peeringrequest-create-by-peer-sa.json")).await.json();
    assert_eq!(v["response"]["allowed"], false);
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.starts_with(&format!("clusterID {PEER_ID} is not allowed for this requester")), "{msg}");
    let v = post(&r, "/validate", captured("federationrequest-create-by-admin.json")).await.json();
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["code"], 403);
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.contains(&format!("belongs in its tenant namespace liqo-tenant-{PEER_ID}")), "{msg}");
}

#[tokio::test]
async fn spoofed_cluster_id_is_denied_with_the_message_kubectl_shows() {
    let r = running().await;
    let name = "peeringrequest-create-spoofed-id.json";
    let answer = post(&r, "/validate", fixture(name)).await;
    assert_eq!(answer.status, 200);
    let v = answer.json();
    assert_eq!(v["response"]["uid"], fixture_uid(name).as_str());
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["code"], 403);
    assert_eq!(v["response"]["status"]["reason"], "Forbidden");
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.starts_with("clusterID 11111111-2222-3333-4444-555555555555 is not allowed for this requester"), "{msg}");
}

#[tokio::test]
async fn policy_from_cluster_config_is_applied_to_the_captured_request() {
    let mut view = default_view().with_policy(PolicyConfig { policy: PeeringPolicy::AcceptKnown, ..Default::default() });
    let r = start(view.clone(), Duration::from_secs(5)).await;
    let v = post(&r, "/validate", fixture("peeringrequest-create-by-peer-sa.json")).await.json();
    assert_eq!(v["response"]["allowed"], false);
    assert!(v["response"]["status"]["message"].as_str().unwrap().contains("AcceptKnown"));

    view.known = vec![PEER_ID.into()];
    let r = start(view, Duration::from_secs(5)).await;
    assert_allowed(&post(&r, "/validate", fixture("peeringrequest-create-by-peer-sa.json")).await, "peeringrequest-create-by-peer-sa.json");
}

#[tokio::test]
async fn a_request_carrying_our_own_cluster_id_is_denied() {
    let view = StaticView::new("liqo", PEER_ID);
    let r = start(view, Duration::from_secs(5)).await;
    let v = post(&r, "/validate", fixture("federationrequest-create-by-admin.json")).await.json();
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["message"], format!("clusterID {PEER_ID} is this cluster's own ID").as_str());
}

fn request_object(name: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&fixture(name)).unwrap();
    v["request"]["object"].clone()
}

#[tokio::test]
async fn foreign_cluster_auth_url_form_is_defaulted_and_labelled() {
    let r = running().await;
    let name = "foreigncluster-create-authurl-form.json";
    let resp = assert_allowed(&post(&r, "/mutate", fixture(name)).await, name);
    let out = apply_patch(&request_object(name), &resp);
    assert_eq!(out["spec"]["join"], true, "the user's join is kept");
    assert_eq!(out["spec"]["authUrl"], "https://1.2.3.4:30740");
    assert_eq!(out["spec"]["discoveryType"], "Manual");
    assert_eq!(out["spec"]["namespace"], "liqo");
    assert_eq!(out["spec"]["allowUntrustedCA"], false);
    assert_eq!(out["spec"]["trustMode"], "Unknown");
    assert_eq!(out["metadata"]["labels"]["discovery.liqo.io/discovery-type"], "Manual");
    assert!(out["metadata"]["labels"].get("discovery.liqo.io/cluster-id").is_none(), "no ID known yet");
    assert_eq!(out["metadata"]["managedFields"], request_object(name)["metadata"]["managedFields"]);
}

#[tokio::test]
async fn foreign_cluster_manual_form_is_normalised_without_touching_user_values() {
    let r = running().await;
    let name = "foreigncluster-create-manual-form.json";
    let resp = assert_allowed(&post(&r, "/mutate", fixture(name)).await, name);
    let before = request_object(name);
    let out = apply_patch(&before, &resp);
    for field in ["clusterID", "join", "namespace", "apiUrl", "discoveryType", "allowUntrustedCA"] {
        assert_eq!(out["spec"][field], before["spec"][field], "{field} kept");
    }
    assert_eq!(out["spec"]["clusterIdentity"]["clusterID"], "0558de48-097b-4b7d-ba04-6bd2a0f9d24f");
    assert_eq!(out["metadata"]["labels"]["discovery.liqo.io/cluster-id"], "0558de48-097b-4b7d-ba04-6bd2a0f9d24f");
}

#[tokio::test]
async fn foreign_cluster_update_join_gets_the_missing_defaults_only() {
    let r = running().await;
    let name = "foreigncluster-update-join-mutating.json";
    let resp = assert_allowed(&post(&r, "/mutate", fixture(name)).await, name);
    let out = apply_patch(&request_object(name), &resp);
    assert_eq!(out["spec"]["join"], false, "the patch to join=false stands");
    assert_eq!(out["spec"]["trustMode"], "Unknown");
}

#[tokio::test]
async fn endpoints_refuse_kinds_they_do_not_serve() {
    let r = running().await;
    let v = post(&r, "/mutate", fixture("peeringrequest-create-by-peer-sa.json")).await.json();
    assert_eq!(v["response"]["allowed"], false);
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.contains("mutate endpoint does not handle discovery.liqo.io/v1alpha1 PeeringRequest"), "{msg}");
}
