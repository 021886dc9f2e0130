//! `liqo-certs sync` against a real API server (KUBEBUILDER_ASSETS), run as the binary with
//! the token of the `liqo-certs` ServiceAccount and exactly the RBAC of manifests/certs/.

use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use liqo_certs::issue::{issue_serving, new_ca};
use liqo_certs::{inspect, reissue_reason};
use liqo_testenv::{ADMIN_TOKEN, ControlPlane, create_manifest, install_liqo, service_account_token};
use serde_json::json;
use time::{Duration, OffsetDateTime};

const MANIFESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests");

fn run_sync(cp: &ControlPlane, token: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_liqo-certs"))
        .args(["sync", "--auth-node-addresses", "--auth-host", "auth.example.org"])
        .env("KUBECONFIG", cp.kubeconfig(token))
        .env_remove("POD_NAMESPACE")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn data(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

async fn bundles(client: &Client) -> Vec<String> {
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get("validate.discovery.liqo.io").await.unwrap();
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone()).get("mutate.discovery.liqo.io").await.unwrap();
    let mut out: Vec<String> = v
        .webhooks
        .unwrap()
        .iter()
        .map(|w| w.client_config.ca_bundle.clone().map(|b| String::from_utf8(b.0).unwrap()).unwrap_or_default())
        .collect();
    out.extend(
        m.webhooks.unwrap().iter().map(|w| w.client_config.ca_bundle.clone().map(|b| String::from_utf8(b.0).unwrap()).unwrap_or_default()),
    );
    out
}

#[tokio::test]
async fn sync_issues_keeps_and_respects_user_certificates() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.client(ADMIN_TOKEN).unwrap();
    install_liqo(&admin, "liqo").await;
    for file in ["webhook/webhook-configurations.yaml", "certs/rbac.yaml"] {
        create_manifest(&admin, &std::fs::read_to_string(format!("{MANIFESTS}/{file}")).unwrap(), "liqo").await;
    }
    // A node with addresses, as a kubelet would report them.
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap()).await.unwrap();
    let status = json!({"status": {"addresses": [
        {"type": "InternalIP", "address": "172.18.0.2"},
        {"type": "Hostname", "address": "n1"},
    ]}});
    nodes.patch_status("n1", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let token = service_account_token(&admin, "liqo", "liqo-certs").await;

    // First run: CA, both serving certificates, every caBundle.
    let (ok, out) = run_sync(&cp, &token);
    assert!(ok, "sync failed:\n{out}");
    assert!(out.contains("secret/liqo-ca: new CA (no CA)"), "{out}");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "liqo");
    let ca = secrets.get("liqo-ca").await.unwrap();
    let ca_pem = data(&ca, "ca.crt");
    assert!(inspect(&ca_pem).unwrap().is_ca);
    let webhook = secrets.get("liqo-webhook-tls").await.unwrap();
    assert_eq!(webhook.type_.as_deref(), Some("kubernetes.io/tls"));
    let now = OffsetDateTime::now_utc();
    let webhook_sans = liqo_certs::service_dns_names("liqo-webhook", "liqo");
    assert_eq!(reissue_reason(&data(&webhook, "tls.crt"), &ca_pem, &webhook_sans, now, Duration::days(30)), None);
    assert_eq!(data(&webhook, "ca.crt"), ca_pem);
    let auth = secrets.get("liqo-auth-tls").await.unwrap();
    let mut auth_sans = liqo_certs::service_dns_names("liqo-auth", "liqo");
    auth_sans.extend(["auth.example.org".to_owned(), "172.18.0.2".to_owned()]);
    assert_eq!(reissue_reason(&data(&auth, "tls.crt"), &ca_pem, &auth_sans, now, Duration::days(30)), None);
    assert!(!inspect(&data(&auth, "tls.crt")).unwrap().sans.contains(&"n1".to_owned()), "Hostname addresses are not IPs to certify");
    for served in [&webhook, &auth] {
        let chain = data(served, "tls.crt");
        assert!(chain.matches("BEGIN CERTIFICATE").count() == 2 && chain.ends_with(&ca_pem), "the leaf, then the CA: {chain}");
    }
    let bundle = bundles(&admin).await;
    assert_eq!(bundle.len(), 3, "two validating webhooks and one mutating");
    for b in &bundle {
        assert_eq!(b.trim_end(), ca_pem.trim_end(), "caBundle is our CA");
    }

    // Second run: nothing to do, nothing written.
    let versions: Vec<String> = [&ca, &webhook, &auth].iter().map(|s| s.resource_version().unwrap()).collect();
    let (ok, out) = run_sync(&cp, &token);
    assert!(ok, "{out}");
    assert!(out.contains("CA kept") && out.contains("already current") && !out.contains("updated"), "{out}");
    for (name, version) in ["liqo-ca", "liqo-webhook-tls", "liqo-auth-tls"].iter().zip(&versions) {
        assert_eq!(&secrets.get(name).await.unwrap().resource_version().unwrap(), version, "{name} rewritten");
    }

    // A caBundle changed by hand is put back.
    let patch = json!([{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": STANDARD.encode("junk")}]);
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .patch("mutate.discovery.liqo.io", &PatchParams::default(), &Patch::<()>::Json(serde_json::from_value(patch).unwrap()))
        .await
        .unwrap();
    let (ok, out) = run_sync(&cp, &token);
    assert!(ok && out.contains("mutatingwebhookconfiguration/mutate.discovery.liqo.io: caBundle updated"), "{out}");

    // The user's own webhook certificate: never written, its CA becomes the caBundle.
    secrets.delete("liqo-webhook-tls", &DeleteParams::default()).await.unwrap();
    let user_ca = new_ca("user-ca", now, Duration::days(100)).unwrap();
    let user_leaf = issue_serving(&user_ca, &webhook_sans, now, Duration::days(50)).unwrap();
    let mut user_secret = Secret {
        type_: Some("kubernetes.io/tls".into()),
        data: Some(
            [
                ("tls.crt".to_owned(), ByteString(user_leaf.cert_pem.clone().into_bytes())),
                ("tls.key".to_owned(), ByteString(user_leaf.key_pem.into_bytes())),
                ("ca.crt".to_owned(), ByteString(user_ca.cert_pem.clone().into_bytes())),
            ]
            .into(),
        ),
        ..Default::default()
    };
    user_secret.metadata.name = Some("liqo-webhook-tls".into());
    secrets.create(&PostParams::default(), &user_secret).await.unwrap();
    let (ok, out) = run_sync(&cp, &token);
    assert!(ok && out.contains("secret/liqo-webhook-tls: provided by the user"), "{out}");
    assert_eq!(data(&secrets.get("liqo-webhook-tls").await.unwrap(), "tls.crt"), user_leaf.cert_pem);
    for b in bundles(&admin).await {
        assert_eq!(b, user_ca.cert_pem, "caBundle is the user's CA");
    }

    // A user Secret without ca.crt cannot give a caBundle: the run fails and says why.
    let mut no_ca = secrets.get("liqo-webhook-tls").await.unwrap();
    no_ca.data.as_mut().unwrap().remove("ca.crt");
    secrets.replace("liqo-webhook-tls", &PostParams::default(), &no_ca).await.unwrap();
    let (ok, out) = run_sync(&cp, &token);
    assert!(!ok, "{out}");
    assert!(out.contains("secret/liqo-webhook-tls has no ca.crt"), "{out}");
}

/// The dashboard overlay's Job (`manifests/dashboard/certs.yaml`), run with the command it
/// declares and the RBAC of both overlays: it writes Secret liqo-dashboard-tls (signed by the
/// Liqo CA, for the Service and localhost) and nothing of the webhook's or the auth service's.
#[tokio::test]
async fn the_dashboard_jobs_sync_writes_only_the_dashboards_certificate() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.client(ADMIN_TOKEN).unwrap();
    install_liqo(&admin, "liqo").await;
    for file in ["certs/rbac.yaml", "dashboard/rbac.yaml"] {
        create_manifest(&admin, &std::fs::read_to_string(format!("{MANIFESTS}/{file}")).unwrap(), "liqo").await;
    }
    let job: serde_yaml::Value = serde_yaml::from_str(
        std::fs::read_to_string(format!("{MANIFESTS}/dashboard/certs.yaml")).unwrap().split("\n---\n").next().unwrap(),
    )
    .unwrap();
    let command: Vec<String> = serde_yaml::from_value(job["spec"]["template"]["spec"]["containers"][0]["command"].clone()).unwrap();
    assert_eq!(command[0], "/liqo-certs");
    let out = Command::new(env!("CARGO_BIN_EXE_liqo-certs"))
        .args(&command[1..])
        .env("KUBECONFIG", cp.kubeconfig(&service_account_token(&admin, "liqo", "liqo-certs").await))
        .env_remove("POD_NAMESPACE")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "liqo");
    let ca_pem = data(&secrets.get("liqo-ca").await.unwrap(), "ca.crt");
    let dashboard = secrets.get("liqo-dashboard-tls").await.unwrap();
    let mut sans = liqo_certs::service_dns_names("liqo-dashboard", "liqo");
    sans.extend(["localhost".to_owned(), "127.0.0.1".to_owned()]);
    let now = OffsetDateTime::now_utc();
    assert_eq!(reissue_reason(&data(&dashboard, "tls.crt"), &ca_pem, &sans, now, Duration::days(30)), None);
    for other in ["liqo-webhook-tls", "liqo-auth-tls"] {
        assert!(secrets.get_opt(other).await.unwrap().is_none(), "{other} written: {text}");
    }
}
