//! Every YAML example of Liqo's documentation is accepted by the types as written, loses no field, and
//! reads back with the meaning that documentation gives it.

use liqo_api::{ClusterConfig, DiscoveryType, ForeignCluster, PeeringPolicy, SearchDomain};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Parses `yaml` as `T` and checks that serializing it back gives the same document, so no
/// field of the example was unknown to the schema (the API server would refuse it under
/// kubectl's strict field validation).
fn parse_losslessly<T: DeserializeOwned + Serialize>(yaml: &str) -> T {
    let original: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
    let typed: T = serde_json::from_value(original.clone()).unwrap();
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, original, "fields lost in the round trip");
    typed
}

#[test]
fn foreign_cluster_in_the_auth_service_form() {
    let fc: ForeignCluster = parse_losslessly(
        r#"
apiVersion: discovery.liqo.io/v1alpha1
kind: ForeignCluster
metadata:
  name: my-cluster
spec:
  join: true # optional (defaults to false)
  authUrl: "https://1.2.3.4:30740"
"#,
    );
    assert!(fc.spec.join());
    assert_eq!(fc.spec.auth_url.as_deref(), Some("https://1.2.3.4:30740"));
    assert_eq!(fc.spec.remote_cluster_id(), None);
    assert_eq!(fc.spec.discovery_type(), DiscoveryType::Manual);
}

#[test]
fn foreign_cluster_in_the_manual_form() {
    let fc: ForeignCluster = parse_losslessly(
        r#"
apiVersion: discovery.liqo.io/v1alpha1
kind: ForeignCluster
metadata:
  name: foreign-cluster
spec:
  clusterID: 0558de48-097b-4b7d-ba04-6bd2a0f9d24f
  join: true
  namespace: liqo
  apiUrl: https://1.2.3.4:6443
  discoveryType: Manual
  allowUntrustedCA: true
"#,
    );
    assert_eq!(fc.spec.remote_cluster_id(), Some("0558de48-097b-4b7d-ba04-6bd2a0f9d24f"));
    assert!(fc.spec.allow_untrusted_ca());
    assert_eq!(fc.spec.api_url.as_deref(), Some("https://1.2.3.4:6443"));
}

#[test]
fn search_domains_of_seeds_002_and_003() {
    for (name, domain) in [("example.com", "example.com"), ("remote.com", "remote.com")] {
        let sd: SearchDomain = parse_losslessly(&format!(
            "apiVersion: discovery.liqo.io/v1alpha1\nkind: SearchDomain\nmetadata:\n  name: {name}\nspec:\n  domain: {domain}\n  autojoin: true\n"
        ));
        assert_eq!(sd.spec.domain, domain);
        assert_eq!(sd.spec.autojoin, Some(true));
    }
}

#[test]
fn cluster_config_patches_of_liqos_documentation_apply_to_the_defaults() {
    let base = serde_json::json!({
        "apiVersion": "config.liqo.io/v1alpha1", "kind": "ClusterConfig",
        "metadata": {"name": "liqo-configuration"}, "spec": {}
    });
    let defaults: ClusterConfig = serde_json::from_value(base.clone()).unwrap();
    assert!(defaults.spec.discovery_config.enable_discovery);
    assert!(defaults.spec.discovery_config.autojoin);
    assert_eq!(defaults.spec.discovery_config.ttl, 90);
    assert_eq!(defaults.spec.peering_policy, PeeringPolicy::AcceptAll);
    assert!(defaults.spec.auth_config.allow_empty_token);

    for enabled in [false, true] {
        // `kubectl patch clusterconfigs liqo-configuration --type merge --patch ...`
        let patch: serde_json::Value = serde_json::from_str(&format!(
            r#"{{"spec":{{"discoveryConfig":{{"enableDiscovery": {enabled}, "enableAdvertisement": {enabled}}}}}}}"#
        ))
        .unwrap();
        let mut doc = serde_json::to_value(&defaults).unwrap();
        json_merge(&mut doc, &patch);
        let cc: ClusterConfig = serde_json::from_value(doc).unwrap();
        assert_eq!(cc.spec.discovery_config.enable_discovery, enabled);
        assert_eq!(cc.spec.discovery_config.enable_advertisement, enabled);
        assert!(cc.spec.discovery_config.autojoin, "untouched toggles keep their value");
    }
}

/// RFC 7386 merge patch, as `kubectl patch --type merge` applies it.
fn json_merge(doc: &mut serde_json::Value, patch: &serde_json::Value) {
    match (doc, patch) {
        (serde_json::Value::Object(d), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    d.remove(k);
                } else {
                    json_merge(d.entry(k.clone()).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        (d, p) => *d = p.clone(),
    }
}
