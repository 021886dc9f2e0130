//! The URLs peers are told, found in a real API server's objects (envtest convention:
//! `KUBEBUILDER_ASSETS`; skips loudly without it) and published in the ClusterConfig's status
//! with where each came from and condition `AddressesReachable`: a loopback API server
//! warned about, cluster-info preferred once published, a node replaced, the NodePort
//! changed, and ConfigMap `liqo-reconciler-env` overriding with a pod address (warned, then
//! removed) — each picked up without a restart.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use liqo_api::{ClusterConfig, ClusterConfigStatus};
use liqo_reconciler::cluster::addresses::{self, Found, Lookup, Overrides};
use liqo_reconciler::cluster::config::ClusterConfigKeeper;
use liqo_reconciler::cluster::published::{self, Told};
use liqo_reconciler::machinery::singleton::keep;
use liqo_reconciler::machinery::stores::reflect_lean;
use liqo_testenv::{ControlPlane, eventually, install_liqo};
use serde_json::json;
use tokio::sync::watch;

fn node(name: &str, external: Option<&str>, internal: &str) -> Node {
    let mut addresses = vec![json!({"type": "InternalIP", "address": internal}), json!({"type": "Hostname", "address": name})];
    if let Some(e) = external {
        addresses.push(json!({"type": "ExternalIP", "address": e}));
    }
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]},
        "status": {"addresses": addresses}
    }))
    .unwrap()
}

fn condition(s: &ClusterConfigStatus) -> Option<(String, String, String)> {
    let c = s.conditions.iter().find(|c| c.type_ == "AddressesReachable")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_addresses_peers_use_are_found_published_and_kept_current() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes.create(&PostParams::default(), &node("n1", None, "192.0.2.11")).await.unwrap();
    let services: Api<Service> = Api::namespaced(admin.clone(), "liqo");
    let auth: Service = serde_json::from_value(json!({
        "metadata": {"name": "liqo-auth", "namespace": "liqo"},
        "spec": {"type": "NodePort", "selector": {"app.kubernetes.io/name": "liqo-reconciler"},
                 "ports": [{"name": "https", "port": 443, "targetPort": 8443, "nodePort": 31443}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &auth).await.unwrap();

    // The reconciler's wiring: the ClusterConfig kept, the addresses looked for, what is told
    // published.
    let configs: Api<ClusterConfig> = Api::all(admin.clone());
    let (config_tx, _config) = watch::channel(None);
    tokio::spawn(keep(ClusterConfigKeeper, configs.clone(), config_tx));
    let lookup = Lookup { namespace: "liqo".into(), flags: Overrides::default(), in_cluster: cp.url.clone(), own_node: None };
    let store = reflect_lean(nodes.clone(), watcher::Config::default());
    let (found_tx, found) = watch::channel(Found::initial(&lookup.flags, &lookup.in_cluster));
    tokio::spawn(addresses::keep(admin.clone(), lookup, store, found_tx, Duration::from_millis(300)));
    let (told_tx, told) = watch::channel(Told { auth_ca_fingerprint: Some("ab".repeat(32)), ..Default::default() });
    tokio::spawn(published::follow_addresses(found.clone(), Arc::new(told_tx)));
    tokio::spawn(published::keep(admin.clone(), told, Duration::from_millis(200)));
    let status_where = |what: &'static str, pred: fn(&ClusterConfigStatus) -> bool| {
        let configs = configs.clone();
        eventually(what, move || {
            let configs = configs.clone();
            async move { configs.get("liqo-configuration").await.ok()?.status.filter(pred) }
        })
    };

    // No cluster-info: the API server's own address, loopback here, is told and warned about.
    let s = status_where("the NodePort on n1 published", |s| s.auth_url.as_deref() == Some("https://192.0.2.11:31443")).await;
    assert_eq!(s.auth_url_from.as_deref(), Some("Service liqo-auth (NodePort) on node n1 (InternalIP)"));
    let (status, reason, message) = condition(&s).expect("condition AddressesReachable");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "AddressUnreachable"), "{message}");
    assert!(message.contains("LIQO_API_URL") && message.contains("loopback"), "{message}");
    assert_eq!(s.auth_ca_fingerprint.as_deref(), Some(&*"ab".repeat(32)), "the fingerprint kept beside");
    assert!(found.borrow().api.url.contains("127.0.0.1"), "{:?}", found.borrow().api);

    // kube-public/cluster-info published (as kubeadm does): its server is told, all is well.
    let public =
        Namespace { metadata: kube::api::ObjectMeta { name: Some("kube-public".into()), ..Default::default() }, ..Default::default() };
    let _ = Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &public).await;
    let info: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "cluster-info", "namespace": "kube-public"},
        "data": {"kubeconfig": "apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: https://192.0.2.10:6443\ncontexts: []\nusers: []\n"}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(admin.clone(), "kube-public").create(&PostParams::default(), &info).await.unwrap();
    let s = status_where("cluster-info's server published", |s| s.api_url.as_deref() == Some("https://192.0.2.10:6443")).await;
    assert_eq!(s.api_url_from.as_deref(), Some("ConfigMap kube-public/cluster-info"));
    let (status, reason, message) = condition(&s).unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "AddressesFound"), "{message}");
    let found_since = s.conditions[0].last_transition_time.clone();

    // The node replaced by one with an external address, then the NodePort changed.
    nodes.delete("n1", &DeleteParams::default()).await.unwrap();
    nodes.create(&PostParams::default(), &node("n2", Some("203.0.113.5"), "192.0.2.12")).await.unwrap();
    let s = status_where("the new node's external address published", |s| s.auth_url.as_deref() == Some("https://203.0.113.5:31443")).await;
    assert_eq!(s.auth_url_from.as_deref(), Some("Service liqo-auth (NodePort) on node n2 (ExternalIP)"));
    assert_eq!(s.conditions[0].last_transition_time, found_since, "still True: the transition time is kept");
    let port = json!({"spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443, "nodePort": 31444}]}});
    services.patch("liqo-auth", &PatchParams::default(), &Patch::Merge(port)).await.unwrap();
    status_where("the new NodePort published", |s| s.auth_url.as_deref() == Some("https://203.0.113.5:31444")).await;

    // ConfigMap liqo-reconciler-env overrides, read live: a pod address is told, and warned about.
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "liqo");
    let env: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "liqo-reconciler-env", "namespace": "liqo"},
        "data": {"LIQO_AUTH_URL": "https://10.244.0.9:8443"}
    }))
    .unwrap();
    cms.create(&PostParams::default(), &env).await.unwrap();
    let s = status_where("the override published", |s| s.auth_url.as_deref() == Some("https://10.244.0.9:8443")).await;
    assert_eq!(s.auth_url_from.as_deref(), Some("ConfigMap liqo-reconciler-env"));
    let (status, reason, message) = condition(&s).unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("False", "AddressUnreachable"), "{message}");
    assert!(message.contains("LIQO_AUTH_URL") && message.contains("pod address"), "{message}");
    assert_eq!(found.borrow().auth.as_ref().map(|a| a.url.clone()).as_deref(), Some("https://10.244.0.9:8443"), "what peers are handed");

    // The override removed: the NodePort again, all well.
    cms.delete("liqo-reconciler-env", &DeleteParams::default()).await.unwrap();
    let s = status_where("the NodePort again", |s| s.auth_url.as_deref() == Some("https://203.0.113.5:31444")).await;
    assert_eq!(condition(&s).unwrap().0, "True");
}
