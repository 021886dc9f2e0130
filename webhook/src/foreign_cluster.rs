//! ForeignCluster admission (protocol §6), pure: the checks, and the defaults, normalisation and
//! labels expressed as an RFC 6902 patch that leaves every value the user set as it is (only
//! URLs written loosely — spaces, no scheme, a trailing slash — are rewritten to their
//! canonical form).

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, ReplaceOperation};
use liqo_api::names::{DEFAULT_NAMESPACE, LABEL_CLUSTER_ID, LABEL_DISCOVERY_TYPE};
use liqo_api::{DiscoveryType, ForeignClusterSpec, TrustMode, validate_cluster_id};
use serde_json::{Value, json};

use crate::denial::{Denial, Reason};

/// The canonical form of a URL given for `field`: `https://host[:port][/path]`, scheme and
/// host lowercase, no trailing slash; a URL without a scheme is taken as https.
pub fn normalize_url(field: &str, raw: &str) -> Result<String, Denial> {
    let bad = |why: &str| Denial::new(Reason::InvalidUrl, format!("spec.{field} {raw:?}: {why}"));
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(bad("must not be empty"));
    }
    let with_scheme = if trimmed.contains("://") { trimmed.to_owned() } else { format!("https://{trimmed}") };
    let url = url::Url::parse(&with_scheme).map_err(|e| bad(&format!("not a URL ({e})")))?;
    if url.scheme() != "https" {
        return Err(bad("must be an https:// URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
        return Err(bad("must be scheme://host:port[/path], without user, query or fragment"));
    }
    // Rebuild from the text so an explicit default port (":443") is kept as written.
    let rest = &with_scheme[with_scheme.find("://").unwrap() + 3..];
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Ok(format!("https://{}{}", authority.to_ascii_lowercase(), path.trim_end_matches('/')))
}

/// The cluster ID of `spec`, refusing one whose two cluster-ID fields disagree or that is malformed.
fn cluster_id(spec: &ForeignClusterSpec) -> Result<Option<&str>, Denial> {
    let nested = spec.cluster_identity.as_ref().map(|i| i.cluster_id.as_str()).filter(|s| !s.is_empty());
    let short = spec.cluster_id.as_deref().filter(|s| !s.is_empty());
    if let (Some(a), Some(b)) = (nested, short)
        && a != b
    {
        return Err(Denial::new(
            Reason::ConflictingClusterIds,
            format!("spec.clusterIdentity.clusterID ({a}) and spec.clusterID ({b}) disagree"),
        ));
    }
    let id = nested.or(short);
    if let Some(id) = id {
        validate_cluster_id(id)
            .map_err(|e| Denial::new(Reason::MalformedClusterId, format!("spec.clusterIdentity.clusterID {id:?}: {e}")))?;
    }
    Ok(id)
}

/// The validating rules: cluster IDs consistent and well formed, URLs valid, and a cluster ID
/// once set never changed.
pub fn check(spec: Option<&ForeignClusterSpec>, old: Option<&ForeignClusterSpec>) -> Result<(), Denial> {
    let empty = ForeignClusterSpec::default();
    let spec = spec.unwrap_or(&empty);
    let id = cluster_id(spec)?;
    if let Some(old_id) = old.and_then(|o| o.remote_cluster_id())
        && id != Some(old_id)
    {
        return Err(Denial::new(
            Reason::ImmutableField,
            format!(
                "spec.clusterIdentity.clusterID is immutable once set (was {old_id}, now {:?}); create a new ForeignCluster instead",
                id.unwrap_or("")
            ),
        ));
    }
    for (field, value) in [("authUrl", &spec.auth_url), ("apiUrl", &spec.api_url)] {
        if let Some(v) = value {
            normalize_url(field, v)?;
        }
    }
    if let Some(fp) = spec.trusted_ca_fingerprint.as_deref().filter(|f| !f.is_empty())
        && liqo_api::normalize_fingerprint(fp).is_none()
    {
        let message = format!("spec.trustedCAFingerprint {fp:?}: not a SHA-256 fingerprint (64 hex digits, colons allowed)");
        return Err(Denial::new(Reason::InvalidObject, message));
    }
    Ok(())
}

fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

fn add(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path: pointer(tokens), value })
}

/// The patch that defaults, normalises and labels a ForeignCluster. Fields already set are
/// left alone; labels derived from the spec are set to match it.
pub fn defaults_patch(labels: Option<&BTreeMap<String, String>>, spec: Option<&ForeignClusterSpec>) -> Result<Patch, Denial> {
    check(spec, None)?;
    let mut ops = Vec::new();
    let defaults: [(&str, Value); 5] = [
        ("join", json!(false)),
        ("discoveryType", json!(DiscoveryType::Manual.as_str())),
        ("namespace", json!(DEFAULT_NAMESPACE)),
        ("allowUntrustedCA", json!(false)),
        ("trustMode", json!(TrustMode::Unknown.as_str())),
    ];
    let (discovery_type, id) = match spec {
        None => {
            ops.push(add(&["spec"], Value::Object(defaults.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())));
            (DiscoveryType::Manual, None)
        }
        Some(spec) => {
            let present = [
                spec.join.is_some(),
                spec.discovery_type.is_some(),
                spec.namespace.is_some(),
                spec.allow_untrusted_ca.is_some(),
                spec.trust_mode.is_some(),
            ];
            for ((field, value), present) in defaults.into_iter().zip(present) {
                if !present {
                    ops.push(add(&["spec", field], value));
                }
            }
            let nested_empty = spec.cluster_identity.as_ref().is_none_or(|i| i.cluster_id.is_empty());
            if let (true, Some(short)) = (nested_empty, spec.cluster_id.as_deref().filter(|s| !s.is_empty())) {
                ops.push(match spec.cluster_identity {
                    None => add(&["spec", "clusterIdentity"], json!({ "clusterID": short })),
                    Some(_) => add(&["spec", "clusterIdentity", "clusterID"], json!(short)),
                });
            }
            for (field, value) in [("authUrl", &spec.auth_url), ("apiUrl", &spec.api_url)] {
                if let Some(v) = value {
                    let normal = normalize_url(field, v)?;
                    if normal != *v {
                        ops.push(PatchOperation::Replace(ReplaceOperation { path: pointer(&["spec", field]), value: json!(normal) }));
                    }
                }
            }
            (spec.discovery_type(), spec.remote_cluster_id())
        }
    };

    let mut wanted = vec![(LABEL_DISCOVERY_TYPE, discovery_type.as_str())];
    if let Some(id) = id {
        wanted.insert(0, (LABEL_CLUSTER_ID, id));
    }
    match labels {
        None => ops.push(add(&["metadata", "labels"], Value::Object(wanted.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect()))),
        Some(labels) => {
            for (key, value) in wanted {
                if labels.get(key).map(String::as_str) != Some(value) {
                    ops.push(add(&["metadata", "labels", key], json!(value)));
                }
            }
        }
    }
    Ok(Patch(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use liqo_api::ClusterIdentity;

    const ID: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

    fn apply(doc: Value, patch: &Patch) -> Value {
        let mut doc = doc;
        json_patch::patch(&mut doc, patch).unwrap();
        doc
    }

    fn parse(doc: &Value) -> (Option<BTreeMap<String, String>>, Option<ForeignClusterSpec>) {
        let labels = doc["metadata"].get("labels").map(|l| serde_json::from_value(l.clone()).unwrap());
        let spec = doc.get("spec").map(|s| serde_json::from_value(s.clone()).unwrap());
        (labels, spec)
    }

    fn mutate(doc: Value) -> Value {
        let (labels, spec) = parse(&doc);
        let patch = defaults_patch(labels.as_ref(), spec.as_ref()).unwrap();
        apply(doc, &patch)
    }

    #[test]
    fn auth_url_form_gets_every_default_and_the_type_label() {
        let out = mutate(json!({"metadata": {"name": "my-cluster"}, "spec": {"join": true, "authUrl": "https://1.2.3.4:30740"}}));
        assert_eq!(
            out["spec"],
            json!({"join": true, "authUrl": "https://1.2.3.4:30740", "discoveryType": "Manual",
                   "namespace": "liqo", "allowUntrustedCA": false, "trustMode": "Unknown"})
        );
        assert_eq!(out["metadata"]["labels"], json!({LABEL_DISCOVERY_TYPE: "Manual"}));
    }

    #[test]
    fn manual_form_keeps_user_values_and_copies_the_cluster_id() {
        let spec = json!({"clusterID": ID, "join": true, "namespace": "liqo", "apiUrl": "https://1.2.3.4:6443",
                          "discoveryType": "Manual", "allowUntrustedCA": true});
        let out = mutate(json!({"metadata": {"name": "foreign-cluster"}, "spec": spec}));
        assert_eq!(out["spec"]["clusterID"], ID);
        assert_eq!(out["spec"]["clusterIdentity"], json!({"clusterID": ID}));
        assert_eq!(out["spec"]["allowUntrustedCA"], true);
        assert_eq!(out["spec"]["join"], true);
        assert_eq!(out["spec"]["trustMode"], "Unknown");
        assert_eq!(out["metadata"]["labels"], json!({LABEL_CLUSTER_ID: ID, LABEL_DISCOVERY_TYPE: "Manual"}));
    }

    #[test]
    fn a_complete_object_needs_no_patch_and_a_second_pass_changes_nothing() {
        let once = mutate(json!({"metadata": {"name": "x", "labels": {"team": "a"}}, "spec": {"clusterID": ID}}));
        assert_eq!(once["metadata"]["labels"]["team"], "a");
        let (labels, spec) = parse(&once);
        assert_eq!(defaults_patch(labels.as_ref(), spec.as_ref()).unwrap(), Patch(vec![]));
    }

    #[test]
    fn missing_spec_is_created_whole() {
        let out = mutate(json!({"metadata": {"name": "x"}}));
        assert_eq!(out["spec"]["join"], false);
        assert_eq!(out["spec"]["discoveryType"], "Manual");
    }

    #[test]
    fn labels_follow_the_spec_and_keys_with_slashes_are_escaped() {
        let doc = json!({"metadata": {"name": "x", "labels": {LABEL_CLUSTER_ID: "stale"}},
                         "spec": {"clusterIdentity": {"clusterID": ID}, "discoveryType": "LAN"}});
        let (labels, spec) = parse(&doc);
        let patch = defaults_patch(labels.as_ref(), spec.as_ref()).unwrap();
        let text = serde_json::to_string(&patch).unwrap();
        assert!(text.contains("/metadata/labels/discovery.liqo.io~1cluster-id"), "{text}");
        let out = apply(doc, &patch);
        assert_eq!(out["metadata"]["labels"][LABEL_CLUSTER_ID], ID);
        assert_eq!(out["metadata"]["labels"][LABEL_DISCOVERY_TYPE], "LAN");
    }

    #[test]
    fn loose_urls_are_normalised_and_canonical_ones_untouched() {
        assert_eq!(normalize_url("authUrl", " 1.2.3.4:30740/ ").unwrap(), "https://1.2.3.4:30740");
        assert_eq!(normalize_url("authUrl", "HTTPS://Auth.Example.COM:443/").unwrap(), "https://auth.example.com:443");
        assert_eq!(normalize_url("apiUrl", "https://[::1]:6443").unwrap(), "https://[::1]:6443");
        assert_eq!(normalize_url("apiUrl", "https://api.example.com/prefix/").unwrap(), "https://api.example.com/prefix");
        let out = mutate(json!({"metadata": {"name": "x"}, "spec": {"authUrl": "auth.example.com:8443/"}}));
        assert_eq!(out["spec"]["authUrl"], "https://auth.example.com:8443");
        for (raw, why) in [
            ("http://1.2.3.4", "https://"),
            ("", "empty"),
            ("https://u:p@h:1", "without user"),
            ("https://h/?q=1", "without user"),
            ("https://", "not a URL"),
        ] {
            let err = normalize_url("authUrl", raw).unwrap_err();
            assert_eq!(err.reason, Reason::InvalidUrl);
            assert!(err.message.starts_with("spec.authUrl") && err.message.contains(why), "{raw}: {}", err.message);
        }
    }

    #[test]
    fn a_fingerprint_must_be_a_sha256() {
        let with = |fp: &str| ForeignClusterSpec { trusted_ca_fingerprint: Some(fp.into()), ..Default::default() };
        assert!(check(Some(&with(&vec!["AB"; 32].join(":"))), None).is_ok());
        let err = check(Some(&with("ab:cd")), None).unwrap_err();
        assert!(err.message.contains("spec.trustedCAFingerprint"), "{}", err.message);
    }

    #[test]
    fn checks_refuse_malformed_conflicting_or_changed_cluster_ids() {
        let with = |nested: Option<&str>, short: Option<&str>| ForeignClusterSpec {
            cluster_identity: nested.map(|n| ClusterIdentity { cluster_id: n.into(), cluster_name: None }),
            cluster_id: short.map(Into::into),
            ..Default::default()
        };
        assert_eq!(check(Some(&with(Some(ID), Some(ID))), None), Ok(()));
        assert_eq!(check(Some(&with(Some("BAD ID"), None)), None).unwrap_err().reason, Reason::MalformedClusterId);
        assert_eq!(check(Some(&with(Some(ID), Some("other"))), None).unwrap_err().reason, Reason::ConflictingClusterIds);
        // Filling an empty cluster ID is allowed; changing or clearing a set one is not.
        assert_eq!(check(Some(&with(Some(ID), None)), Some(&with(None, None))), Ok(()));
        let err = check(Some(&with(Some("other"), None)), Some(&with(Some(ID), None))).unwrap_err();
        assert_eq!(err.reason, Reason::ImmutableField);
        assert!(err.message.contains(&format!("was {ID}")), "{}", err.message);
        assert_eq!(check(Some(&with(None, None)), Some(&with(None, Some(ID)))).unwrap_err().reason, Reason::ImmutableField);
    }
}
