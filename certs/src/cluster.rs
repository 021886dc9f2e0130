//! Certificates kept in Kubernetes Secrets and the CA kept in the webhook configurations:
//! what `liqo-certs sync` does, run by the `liqo-certs` Job at install and by its CronJob
//! every day after.
//!
//! - Secret `liqo-ca` (Opaque: `ca.crt`, `ca.key`, and `previous-ca.crt` after a rotation)
//!   holds the CA; it is made when missing and replaced before it expires.
//! - Each serving Secret (`kubernetes.io/tls`: `tls.crt` — the leaf followed by the CA, so
//!   that peers can pair by the CA's fingerprint —, `tls.key`, `ca.crt`) is issued
//!   when missing, and again when it no longer covers its names, nears expiry or was signed
//!   by another CA. A Secret that exists without our `managed-by` label was provided by the
//!   user: it is never written, and its `ca.crt` is what goes into the caBundle.
//! - Every webhook of the named Validating/MutatingWebhookConfigurations gets `caBundle` =
//!   the CA (plus the previous one while it is still valid, so pods still serving a
//!   certificate of the old CA keep working until their Secret volume is refreshed).
//!
//! Writes happen only when something changed; a conflict fails the run (the Job retries).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::inspect::inspect;
use crate::issue::{Pair, chain_pem};
use crate::renew::{Lifetimes, renew_ca, renew_serving};
use crate::{CertsError, Result};

/// Label on the Secrets this module writes; Secrets without it are the user's.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "liqo-certs");

/// A serving certificate kept in a Secret.
#[derive(Clone, Debug)]
pub struct Target {
    /// Secret name.
    pub secret: String,
    /// Names and addresses the certificate must cover.
    pub sans: Vec<String>,
}

/// What `sync` keeps.
#[derive(Clone, Debug)]
pub struct Sync {
    pub namespace: String,
    /// Secret holding the CA.
    pub ca_secret: String,
    /// The webhook's serving certificate: its CA becomes the caBundle.
    pub webhook: Option<Target>,
    /// Other serving certificates (the auth service's).
    pub others: Vec<Target>,
    /// ValidatingWebhookConfigurations to inject the CA into.
    pub validating: Vec<String>,
    /// MutatingWebhookConfigurations to inject the CA into.
    pub mutating: Vec<String>,
    pub life: Lifetimes,
}

fn data_str(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The certificate and key stored under `cert_key`/`key_key`, when both are there.
fn stored_pair(secret: &Secret, cert_key: &str, key_key: &str) -> Option<Pair> {
    Some(Pair { cert_pem: data_str(secret, cert_key)?, key_pem: data_str(secret, key_key)? })
}

fn is_ours(secret: &Secret) -> bool {
    secret.metadata.labels.as_ref().and_then(|l| l.get(MANAGED_BY.0)).is_some_and(|v| v == MANAGED_BY.1)
}

/// The caBundle PEM: `ca`, then `previous` while it is valid and different.
pub fn bundle_pem(ca: &str, previous: Option<&str>, now: OffsetDateTime) -> String {
    let mut pem = ca.trim_end().to_owned();
    pem.push('\n');
    if let Some(prev) = previous.filter(|p| p.trim() != ca.trim())
        && inspect(prev).is_ok_and(|info| info.not_after > now)
    {
        pem.push_str(prev.trim_end());
        pem.push('\n');
    }
    pem
}

fn secret(name: &str, namespace: &str, type_: &str, data: BTreeMap<String, String>) -> Secret {
    let mut s = Secret {
        type_: Some(type_.to_owned()),
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v.into_bytes()))).collect()),
        ..Default::default()
    };
    s.metadata.name = Some(name.to_owned());
    s.metadata.namespace = Some(namespace.to_owned());
    s.metadata.labels = Some([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())].into());
    s
}

/// Creates `desired` or replaces `current` with its data; nothing when the data is equal.
async fn write(api: &Api<Secret>, current: Option<Secret>, mut desired: Secret) -> Result<()> {
    match current {
        None => {
            api.create(&PostParams::default(), &desired).await?;
        }
        Some(current) if current.data == desired.data && current.type_ == desired.type_ => {}
        Some(current) => {
            let mut meta = current.metadata;
            let mut labels = meta.labels.take().unwrap_or_default();
            labels.extend(desired.metadata.labels.take().unwrap_or_default());
            meta.labels = Some(labels);
            desired.metadata = meta;
            let name = desired.metadata.name.clone().unwrap_or_default();
            api.replace(&name, &PostParams::default(), &desired).await?;
        }
    }
    Ok(())
}

/// Node addresses (InternalIP, ExternalIP) for a certificate reached through a NodePort.
pub async fn node_addresses(client: &Client) -> Result<Vec<String>> {
    let nodes = Api::<Node>::all(client.clone()).list(&ListParams::default()).await?;
    let mut out: Vec<String> = nodes
        .items
        .iter()
        .flat_map(|n| n.status.iter().flat_map(|s| s.addresses.iter().flatten()))
        .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
        .map(|a| a.address.clone())
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The JSON patch setting `caBundle` on every webhook of a configuration whose bundle
/// differs; `None` when all are right. Each change is guarded by a test of the webhook's
/// name, so a concurrent reordering fails the patch instead of mislabelling a webhook.
pub fn ca_bundle_patch(config: &Value, bundle_b64: &str) -> Option<Value> {
    let hooks = config.get("webhooks").and_then(Value::as_array)?;
    let mut ops = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        if hook.pointer("/clientConfig/caBundle").and_then(Value::as_str) == Some(bundle_b64) {
            continue;
        }
        let name = hook.get("name").cloned().unwrap_or(Value::Null);
        ops.push(json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": name}));
        ops.push(json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle_b64}));
    }
    (!ops.is_empty()).then_some(Value::Array(ops))
}

async fn inject(client: &Client, resource: &ApiResource, name: &str, bundle_b64: &str) -> Result<bool> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let object = api.get(name).await?;
    let value = serde_json::to_value(&object).map_err(|e| CertsError::Manifest(e.to_string()))?;
    let Some(patch) = ca_bundle_patch(&value, bundle_b64) else { return Ok(false) };
    let patch: json_patch::Patch = serde_json::from_value(patch).map_err(|e| CertsError::Manifest(e.to_string()))?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch)).await?;
    Ok(true)
}

/// Brings the Secrets and webhook configurations to what `s` wants; returns one line per
/// thing it looked at, saying what it did.
pub async fn sync(client: &Client, s: &Sync, now: OffsetDateTime) -> Result<Vec<String>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &s.namespace);
    let mut report = Vec::new();

    let current_ca = secrets.get_opt(&s.ca_secret).await?;
    let stored = current_ca.as_ref().and_then(|c| stored_pair(c, "ca.crt", "ca.key"));
    let (ca, why) = renew_ca(stored.clone(), now, &s.life)?;
    let previous = match (&why, &stored) {
        (Some(_), Some(old)) => Some(old.cert_pem.clone()),
        _ => current_ca.as_ref().and_then(|c| data_str(c, "previous-ca.crt")),
    };
    let mut data = BTreeMap::from([("ca.crt".to_owned(), ca.cert_pem.clone()), ("ca.key".to_owned(), ca.key_pem.clone())]);
    if let Some(prev) = &previous {
        data.insert("previous-ca.crt".into(), prev.clone());
    }
    write(&secrets, current_ca, secret(&s.ca_secret, &s.namespace, "Opaque", data)).await?;
    report.push(match why {
        Some(why) => format!("secret/{}: new CA ({why})", s.ca_secret),
        None => format!("secret/{}: CA kept", s.ca_secret),
    });

    let mut webhook_ca = None;
    for (is_webhook, target) in s.webhook.iter().map(|t| (true, t)).chain(s.others.iter().map(|t| (false, t))) {
        let current = secrets.get_opt(&target.secret).await?;
        if let Some(user) = current.as_ref().filter(|c| !is_ours(c)) {
            report.push(format!("secret/{}: provided by the user (no {}={} label), left alone", target.secret, MANAGED_BY.0, MANAGED_BY.1));
            if is_webhook {
                webhook_ca = Some(
                    data_str(user, "ca.crt")
                        .ok_or_else(|| CertsError::Manifest(format!("secret/{} has no ca.crt to put into the caBundle", target.secret)))?,
                );
            }
            continue;
        }
        let stored = current.as_ref().and_then(|c| stored_pair(c, "tls.crt", "tls.key"));
        let (leaf, why) = renew_serving(&ca, stored, &target.sans, now, &s.life)?;
        let data = BTreeMap::from([
            ("tls.crt".to_owned(), chain_pem(&leaf.cert_pem, &ca.cert_pem)),
            ("tls.key".to_owned(), leaf.key_pem),
            ("ca.crt".to_owned(), ca.cert_pem.clone()),
        ]);
        write(&secrets, current, secret(&target.secret, &s.namespace, "kubernetes.io/tls", data)).await?;
        report.push(match why {
            Some(why) => format!("secret/{}: new certificate for {} ({why})", target.secret, target.sans.join(", ")),
            None => format!("secret/{}: certificate kept", target.secret),
        });
        if is_webhook {
            webhook_ca = Some(bundle_pem(&ca.cert_pem, previous.as_deref(), now));
        }
    }

    if let Some(pem) = webhook_ca {
        let b64 = STANDARD.encode(pem.as_bytes());
        let kinds = [
            (ApiResource::erase::<ValidatingWebhookConfiguration>(&()), &s.validating),
            (ApiResource::erase::<MutatingWebhookConfiguration>(&()), &s.mutating),
        ];
        for (resource, names) in kinds {
            for name in names {
                let changed = inject(client, &resource, name, &b64).await?;
                let kind = resource.kind.to_lowercase();
                report.push(format!("{kind}/{name}: caBundle {}", if changed { "updated" } else { "already current" }));
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::issue::new_ca;
    use time::Duration;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    #[test]
    fn bundle_keeps_the_previous_ca_only_while_it_is_valid() {
        let new = new_ca("new", now(), Duration::days(3650)).unwrap();
        let old = new_ca("old", now() - Duration::days(3000), Duration::days(3010)).unwrap();
        let both = bundle_pem(&new.cert_pem, Some(&old.cert_pem), now());
        assert_eq!(both.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(both.starts_with(new.cert_pem.trim_end()));
        let later = now() + Duration::days(11);
        assert_eq!(bundle_pem(&new.cert_pem, Some(&old.cert_pem), later).matches("BEGIN CERTIFICATE").count(), 1);
        assert_eq!(bundle_pem(&new.cert_pem, Some(&new.cert_pem), now()).matches("BEGIN CERTIFICATE").count(), 1);
        assert_eq!(bundle_pem(&new.cert_pem, Some("garbage"), now()).matches("BEGIN CERTIFICATE").count(), 1);
    }

    #[test]
    fn patch_touches_only_webhooks_with_another_bundle() {
        let config = json!({"webhooks": [
            {"name": "a", "clientConfig": {"service": {"name": "s"}, "caBundle": "QUJD"}},
            {"name": "b", "clientConfig": {"service": {"name": "s"}}},
        ]});
        assert_eq!(
            ca_bundle_patch(&config, "QUJD").unwrap(),
            json!([
                {"op": "test", "path": "/webhooks/1/name", "value": "b"},
                {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "QUJD"},
            ])
        );
        let mut patched = config.clone();
        let patch: json_patch::Patch = serde_json::from_value(ca_bundle_patch(&config, "WFla").unwrap()).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(patched.pointer("/webhooks/0/clientConfig/caBundle").unwrap(), "WFla");
        assert_eq!(patched.pointer("/webhooks/1/clientConfig/caBundle").unwrap(), "WFla");
        assert_eq!(ca_bundle_patch(&patched, "WFla"), None);
        assert_eq!(ca_bundle_patch(&json!({}), "WFla"), None);
    }

    #[test]
    fn user_secrets_are_recognised_by_the_missing_label() {
        let ours = secret("x", "liqo", "Opaque", BTreeMap::from([("ca.crt".into(), "c".into())]));
        assert!(is_ours(&ours));
        assert_eq!(data_str(&ours, "ca.crt").as_deref(), Some("c"));
        let mut user = ours.clone();
        user.metadata.labels = None;
        assert!(!is_ours(&user));
    }
}
