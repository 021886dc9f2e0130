//! caBundle injection into webhook configurations, and TLS Secrets as YAML.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::issue::Pair;
use crate::{CertsError, Result};

const WEBHOOK_KINDS: [&str; 2] = ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"];

/// Sets `caBundle` of every webhook in the Validating/MutatingWebhookConfigurations of the
/// multi-document `manifest` to `ca_pem`. With `url_base` (e.g. `https://127.0.0.1:8443`),
/// each Service clientConfig is replaced by `url: <url_base><service.path>`, for a webhook
/// that runs outside the cluster. Other documents pass through unchanged.
pub fn inject_ca_bundle(manifest: &str, ca_pem: &str, url_base: Option<&str>) -> Result<String> {
    let bundle = STANDARD.encode(ca_pem.as_bytes());
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(manifest) {
        let mut value = Value::deserialize(doc).map_err(|e| CertsError::Manifest(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        if WEBHOOK_KINDS.contains(&kind.as_str()) {
            let webhooks = value
                .get_mut("webhooks")
                .and_then(Value::as_array_mut)
                .ok_or_else(|| CertsError::Manifest(format!("{kind} without webhooks")))?;
            for hook in webhooks {
                let config = hook
                    .get_mut("clientConfig")
                    .and_then(Value::as_object_mut)
                    .ok_or_else(|| CertsError::Manifest(format!("{kind}: a webhook without clientConfig")))?;
                if let Some(base) = url_base {
                    let path = config.get("service").and_then(|s| s.get("path")).and_then(Value::as_str).unwrap_or("").to_owned();
                    config.remove("service");
                    config.insert("url".into(), json!(format!("{}{path}", base.trim_end_matches('/'))));
                }
                config.insert("caBundle".into(), json!(bundle));
            }
        }
        out.push(serde_yaml::to_string(&value).map_err(|e| CertsError::Manifest(e.to_string()))?);
    }
    Ok(out.join("---\n"))
}

/// A `kubernetes.io/tls` Secret holding `pair` and the CA that signed it.
pub fn tls_secret_yaml(name: &str, namespace: &str, pair: &Pair, ca_pem: &str) -> String {
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {
            "tls.crt": STANDARD.encode(&pair.cert_pem),
            "tls.key": STANDARD.encode(&pair.key_pem),
            "ca.crt": STANDARD.encode(ca_pem),
        }
    });
    serde_yaml::to_string(&secret).expect("a JSON value always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: liqo-webhook, namespace: liqo}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validate.discovery.liqo.io}
webhooks:
  - name: validate.discovery.liqo.io
    clientConfig:
      service: {name: liqo-webhook, namespace: liqo, path: /validate}
  - name: validate-fc.discovery.liqo.io
    clientConfig:
      service: {name: liqo-webhook, namespace: liqo, path: /validate}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutate.discovery.liqo.io}
webhooks:
  - name: mutate.discovery.liqo.io
    clientConfig:
      service: {name: liqo-webhook, namespace: liqo, path: /mutate}
"#;

    fn docs(yaml: &str) -> Vec<Value> {
        serde_yaml::Deserializer::from_str(yaml).map(|d| Value::deserialize(d).unwrap()).collect()
    }

    #[test]
    fn every_webhook_gets_the_ca_bundle_and_the_service_is_kept() {
        let out = docs(&inject_ca_bundle(MANIFEST, "PEM", None).unwrap());
        assert_eq!(out.len(), 3);
        assert_eq!(out[0]["kind"], "Service");
        let b64 = STANDARD.encode("PEM");
        for doc in &out[1..] {
            for hook in doc["webhooks"].as_array().unwrap() {
                assert_eq!(hook["clientConfig"]["caBundle"], b64.as_str());
                assert_eq!(hook["clientConfig"]["service"]["name"], "liqo-webhook");
            }
        }
    }

    #[test]
    fn url_form_replaces_the_service_and_keeps_the_path() {
        let out = docs(&inject_ca_bundle(MANIFEST, "PEM", Some("https://127.0.0.1:8443/")).unwrap());
        assert_eq!(out[1]["webhooks"][0]["clientConfig"]["url"], "https://127.0.0.1:8443/validate");
        assert_eq!(out[2]["webhooks"][0]["clientConfig"]["url"], "https://127.0.0.1:8443/mutate");
        assert!(out[2]["webhooks"][0]["clientConfig"].get("service").is_none());
    }

    #[test]
    fn malformed_manifests_are_errors_not_panics() {
        assert!(inject_ca_bundle("kind: ValidatingWebhookConfiguration\n", "P", None).is_err());
        assert!(inject_ca_bundle("kind: MutatingWebhookConfiguration\nwebhooks: [{name: x}]\n", "P", None).is_err());
        assert!(inject_ca_bundle(": : :\n", "P", None).is_err());
    }

    #[test]
    fn tls_secret_carries_the_three_keys() {
        let pair = Pair { cert_pem: "C".into(), key_pem: "K".into() };
        let v = docs(&tls_secret_yaml("liqo-webhook-tls", "liqo", &pair, "A")).remove(0);
        assert_eq!(v["type"], "kubernetes.io/tls");
        assert_eq!(v["data"]["tls.crt"], STANDARD.encode("C"));
        assert_eq!(v["data"]["tls.key"], STANDARD.encode("K"));
        assert_eq!(v["data"]["ca.crt"], STANDARD.encode("A"));
    }
}
