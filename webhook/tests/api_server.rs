//! Integration with a real kube-apiserver (envtest convention: `KUBEBUILDER_ASSETS`): the
//! generated CRDs and the `url:` webhook configurations installed, the webhook running with
//! its watch-fed stores, and the API server's own calls answered. Skips loudly without assets.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, SecretReference, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use liqo_api::names::tenant_namespace;
use liqo_api::{ClusterIdentity, ForeignCluster, PeeringRequest, PeeringRequestSpec};
use liqo_testenv::{ControlPlane, eventually, install_liqo};
use serde::Deserialize;

const SPOOFED: &str = "11111111-2222-3333-4444-555555555555";

fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: ns.map(Into::into), ..Default::default() }
}

/// The committed webhook configurations, turned into `url:` form with our CA, then created.
async fn install_webhook_configurations(client: &Client, running: &Running) {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/webhook/webhook-configurations.yaml")).unwrap();
    let ca = std::fs::read_to_string(running.certs.path().join("ca.crt")).unwrap();
    let url = format!("https://127.0.0.1:{}", running.addr.port());
    let yaml = liqo_certs::inject_ca_bundle(&manifest, &ca, Some(&url)).unwrap();
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        match v["kind"].as_str().unwrap() {
            "ValidatingWebhookConfiguration" => {
                let o: ValidatingWebhookConfiguration = serde_json::from_value(v).unwrap();
                Api::all(client.clone()).create(&PostParams::default(), &o).await.unwrap();
            }
            "MutatingWebhookConfiguration" => {
                let o: MutatingWebhookConfiguration = serde_json::from_value(v).unwrap();
                Api::all(client.clone()).create(&PostParams::default(), &o).await.unwrap();
            }
            other => panic!("unexpected {other}"),
        }
    }
}

/// A ServiceAccount `remote-<PEER_ID>` in its tenant namespace, allowed to create
/// PeeringRequests anywhere (RBAC lets it: the webhook is what is tested), and a client using
/// its token.
async fn peer_client(cp: &ControlPlane, admin: &Client) -> Client {
    let sa_name = format!("remote-{PEER_ID}");
    let tenant = tenant_namespace(PEER_ID);
    let ns = k8s_openapi::api::core::v1::Namespace { metadata: meta(&tenant, None), ..Default::default() };
    Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone()).create(&PostParams::default(), &ns).await.unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), &tenant);
    sas.create(&PostParams::default(), &ServiceAccount { metadata: meta(&sa_name, Some(&tenant)), ..Default::default() }).await.unwrap();
    let role = ClusterRole {
        metadata: meta("peer-create", None),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["discovery.liqo.io".into()]),
            resources: Some(vec!["peeringrequests".into(), "federationrequests".into()]),
            verbs: vec!["create".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding = ClusterRoleBinding {
        metadata: meta("peer-create", None),
        role_ref: RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: "ClusterRole".into(), name: "peer-create".into() },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: sa_name.clone(),
            namespace: Some(tenant.clone()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone()).create(&PostParams::default(), &binding).await.unwrap();
    liqo_testenv::rbac::in_force(admin, &binding).await;
    let tr = TokenRequest { spec: Some(TokenRequestSpec::default()), ..Default::default() };
    let token = sas.create_token_request(&sa_name, &PostParams::default(), &tr).await.unwrap();
    cp.client(token.status.unwrap().token.as_deref().unwrap()).unwrap()
}

/// A request of cluster `id` in `namespace`, naming its Secret there.
fn peering_request(id: &str, namespace: &str) -> PeeringRequest {
    let mut pr = PeeringRequest::new(
        id,
        PeeringRequestSpec {
            cluster_identity: Some(ClusterIdentity { cluster_id: id.into(), cluster_name: Some("home".into()) }),
            namespace: Some("liqo".into()),
            kube_config_ref: Some(SecretReference { name: Some("pr-kubeconfig".into()), namespace: Some(namespace.into()) }),
            auth_url: Some("https://10.0.0.5:30740".into()),
            cluster_id: None,
        },
    );
    pr.metadata.namespace = Some(namespace.into());
    pr
}

fn api_error(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    }
}

fn kubectl(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Option<(bool, String)> {
    use std::io::Write;
    let kubeconfig = cp.kubeconfig(liqo_testenv::ADMIN_TOKEN);
    let mut child = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Some((out.status.success(), text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_api_server_calls_the_webhook_and_acts_on_its_answers() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let cm = ConfigMap {
        metadata: meta("cluster-id", Some("liqo")),
        data: Some([("cluster-id".to_owned(), OWN_ID.to_owned())].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(admin.clone(), "liqo").create(&PostParams::default(), &cm).await.unwrap();

    let view = liqo_webhook::state::StoreView::start(admin.clone(), "liqo");
    let running = start(view.clone(), Duration::from_secs(10)).await;
    eventually("stores synced", || {
        let v = view.clone();
        async move { liqo_webhook::state::ClusterView::ready(&v).then_some(()) }
    })
    .await;
    install_webhook_configurations(&admin, &running).await;

    // ForeignCluster, the auth-service form, through kubectl exactly as the seed shows it.
    let fcs: Api<ForeignCluster> = Api::all(admin.clone());
    let auth_form = "apiVersion: discovery.liqo.io/v1alpha1\nkind: ForeignCluster\nmetadata:\n  name: my-cluster\nspec:\n  join: true # optional (defaults to false)\n  authUrl: \"https://1.2.3.4:30740\"\n";
    let fc = eventually("the mutating webhook to be called", || {
        let fcs = fcs.clone();
        async move {
            let _ = fcs.create(&PostParams::default(), &serde_yaml::from_str(auth_form).unwrap()).await;
            let fc = fcs.get("my-cluster").await.ok()?;
            if fc.spec.trust_mode.is_none() {
                // Created before the API server saw the webhook configuration: start again.
                let _ = fcs.delete("my-cluster", &Default::default()).await;
                return None;
            }
            Some(fc)
        }
    })
    .await;
    assert_eq!(fc.spec.join, Some(true));
    assert_eq!(fc.spec.namespace.as_deref(), Some("liqo"));
    assert_eq!(fc.spec.allow_untrusted_ca, Some(false));
    assert_eq!(fc.labels().get("discovery.liqo.io/discovery-type").map(String::as_str), Some("Manual"));

    // Liqo's manual form, applied with kubectl's strict field validation.
    let manual = format!(
        "apiVersion: discovery.liqo.io/v1alpha1\nkind: ForeignCluster\nmetadata:\n  name: foreign-cluster\nspec:\n  clusterID: {PEER_ID}\n  join: true\n  namespace: liqo\n  apiUrl: https://1.2.3.4:6443\n  discoveryType: Manual\n  allowUntrustedCA: true\n"
    );
    match kubectl(&cp, &["apply", "-f", "-"], Some(&manual)) {
        Some((ok, out)) => assert!(ok, "kubectl apply: {out}"),
        None => {
            eprintln!("kubectl not found; creating the manual form through the API");
            fcs.create(&PostParams::default(), &serde_yaml::from_str(&manual).unwrap()).await.unwrap();
        }
    }
    let fc = fcs.get("foreign-cluster").await.unwrap();
    assert_eq!(fc.spec.remote_cluster_id(), Some(PEER_ID));
    assert_eq!(fc.spec.cluster_identity.as_ref().unwrap().cluster_id, PEER_ID);
    assert_eq!(fc.spec.allow_untrusted_ca, Some(true));
    assert_eq!(fc.labels().get("discovery.liqo.io/cluster-id").map(String::as_str), Some(PEER_ID));
    if let Some((ok, out)) = kubectl(&cp, &["get", "foreignclusters", "foreign-cluster", "--template={{.spec.join}}"], None) {
        assert!(ok && out == "true", "{out}");
        let (_, table) = kubectl(&cp, &["get", "foreignclusters"], None).unwrap();
        assert!(table.starts_with("NAME") && table.contains("CLUSTER-ID") && table.contains("OUTGOING"), "{table}");
    }

    // Changing a set cluster ID is refused with our message.
    let change = serde_json::json!({"spec": {"clusterID": SPOOFED, "clusterIdentity": {"clusterID": SPOOFED}}});
    let err = api_error(fcs.patch("foreign-cluster", &PatchParams::default(), &Patch::Merge(&change)).await.unwrap_err());
    assert!(err.message.contains("spec.clusterIdentity.clusterID is immutable once set"), "{}", err.message);

    // PeeringRequests: the peer's own ID passes, a spoofed one is refused with our message.
    let peer = peer_client(&cp, &admin).await;
    let tenant = tenant_namespace(PEER_ID);
    let prs: Api<PeeringRequest> = Api::namespaced(peer.clone(), &tenant);
    let err = api_error(prs.create(&PostParams::default(), &peering_request(SPOOFED, &tenant)).await.unwrap_err());
    assert_eq!(err.code, 403);
    assert!(
        err.message.contains(&format!(
            "admission webhook \"validate.discovery.liqo.io\" denied the request: clusterID {SPOOFED} is not allowed for this requester"
        )),
        "{}",
        err.message
    );
    // Its own ID outside its tenant namespace: refused, saying where it belongs (protocol §9).
    let elsewhere: Api<PeeringRequest> = Api::namespaced(peer, "liqo");
    let err = api_error(elsewhere.create(&PostParams::default(), &peering_request(PEER_ID, "liqo")).await.unwrap_err());
    assert_eq!(err.code, 403);
    assert!(
        err.message.contains(&format!("a PeeringRequest of cluster {PEER_ID} belongs in its tenant namespace {tenant}, not \"liqo\"")),
        "{}",
        err.message
    );
    prs.create(&PostParams::default(), &peering_request(PEER_ID, &tenant)).await.expect("the peer's own request is accepted");

    // The policy follows ClusterConfig at runtime, through the watch-fed store.
    let cc = "apiVersion: config.liqo.io/v1alpha1\nkind: ClusterConfig\nmetadata:\n  name: liqo-configuration\nspec:\n  peeringPolicy: RejectAll\n";
    Api::<liqo_api::ClusterConfig>::all(admin.clone()).create(&PostParams::default(), &serde_yaml::from_str(cc).unwrap()).await.unwrap();
    let admin_prs: Api<PeeringRequest> = Api::namespaced(admin.clone(), "liqo");
    let stranger = "22222222-2222-3333-4444-555555555555";
    let err = eventually("RejectAll to apply", || {
        let prs = admin_prs.clone();
        async move {
            match prs.create(&PostParams::default(), &peering_request(stranger, "liqo")).await {
                Ok(_) => {
                    let _ = prs.delete(stranger, &Default::default()).await;
                    None
                }
                Err(e) => Some(api_error(e)),
            }
        }
    })
    .await;
    assert!(err.message.contains("peeringPolicy RejectAll"), "{}", err.message);

    // The seed's ClusterConfig patch works as written.
    if let Some((ok, out)) = kubectl(
        &cp,
        &[
            "patch",
            "clusterconfigs",
            "liqo-configuration",
            "--patch",
            r#"{"spec":{"discoveryConfig":{"enableDiscovery": false, "enableAdvertisement": false}}}"#,
            "--type",
            "merge",
        ],
        None,
    ) {
        assert!(ok, "{out}");
        let cc = Api::<liqo_api::ClusterConfig>::all(admin.clone()).get("liqo-configuration").await.unwrap();
        assert!(!cc.spec.discovery_config.enable_discovery);
        assert!(cc.spec.discovery_config.autojoin, "schema defaults filled by the API server");
        assert_eq!(cc.spec.discovery_config.ttl, 90);
    }

    // Liqo's SearchDomain, strict validation.
    let sd = "apiVersion: discovery.liqo.io/v1alpha1\nkind: SearchDomain\nmetadata:\n  name: example.com\nspec:\n  domain: example.com\n  autojoin: true\n";
    if let Some((ok, out)) = kubectl(&cp, &["apply", "-f", "-"], Some(sd)) {
        assert!(ok, "{out}");
    }
    running.handle.shutdown();
}
