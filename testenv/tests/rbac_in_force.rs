//! `create_manifest` returns only once the bindings it made are in force, on a real API
//! server: the question `rbac::in_force` asks is denied before the binding exists and allowed
//! after, and the ServiceAccount uses its grant at once.

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use liqo_testenv::{ControlPlane, create_manifest, rbac, service_account_token};

const IDENTITY: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: grant}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: grant}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: grant}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [list]}]
"#;

const BINDING: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: grant}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: reader, namespace: grant}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_made_by_create_manifest_is_in_force_when_it_returns() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    create_manifest(&admin, IDENTITY, "grant").await;
    let reader = cp.client(&service_account_token(&admin, "grant", "reader").await).unwrap();
    let binding: serde_yaml::Value = serde_yaml::from_str(BINDING).unwrap();
    let question = rbac::question(&admin, &binding).await.expect("a question for a binding whose role exists");
    let reviews = Api::<SubjectAccessReview>::all(admin.clone());
    let allowed = || async { reviews.create(&PostParams::default(), &question).await.unwrap().status.unwrap().allowed };
    assert!(!allowed().await, "nothing grants it yet");

    create_manifest(&admin, BINDING, "grant").await;
    assert!(allowed().await, "in force when create_manifest returns");
    let listed = Api::<ConfigMap>::namespaced(reader, "grant").list(&ListParams::default()).await;
    assert!(listed.is_ok(), "{listed:?}");
}
