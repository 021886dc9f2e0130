//! What the page disables comes from the API server's own answer (SelfSubjectAccessReview), on
//! a real API server (envtest convention: `KUBEBUILDER_ASSETS`; skips loudly without it): an
//! admin may do everything, a user who may only read is told why not, action by action.

use liqo_dashboard::access::ask;
use liqo_testenv::{ControlPlane, create_manifest, install_liqo, service_account_token};

#[tokio::test]
async fn the_api_server_says_what_the_user_may_do() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let everything = ask(&admin).await;
    assert_eq!(everything, Default::default(), "an admin may do everything");

    create_manifest(
        &admin,
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer, namespace: liqo}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: liqo-viewer}
rules:
  - {apiGroups: [discovery.liqo.io, config.liqo.io], resources: ["*"], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: liqo-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: liqo-viewer}
subjects: [{kind: ServiceAccount, name: viewer, namespace: liqo}]
"#,
        "liqo",
    )
    .await;
    let viewer = cp.client(&service_account_token(&admin, "liqo", "viewer").await).unwrap();
    let allowed = ask(&viewer).await;
    assert!(allowed.join.as_deref().is_some_and(|w| w.contains("patch foreignclusters")), "{allowed:?}");
    assert!(allowed.toggles.as_deref().is_some_and(|w| w.contains("patch clusterconfigs")), "{allowed:?}");
    assert!(allowed.add_domain.is_some() && allowed.add_peer.is_some(), "{allowed:?}");
}
