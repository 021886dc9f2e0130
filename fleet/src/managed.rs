//! The managed fields a real API server records on what server-side apply writes
//! (`metadata.managedFields`): an entry for each manager and subresource, with the set of fields
//! it applied (`fieldsV1`). A simulated peer's objects carry them as a real peer's do, so that
//! what a hub reads of them (its health check's GET of its PeeringRequest, each period) is as
//! long as a real peer's answer (`fleet/tests/fidelity.rs` compares the two).

use serde_json::{Map, Value, json};

/// The fields of an applied object that its managed fields leave out: what names it, and what
/// the API server sets itself.
const NOT_TRACKED: [&str; 3] = ["apiVersion", "kind", "status"];
const METADATA_TRACKED: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

/// The field set of `applied`, a whole object as an apply sends it (pure): its metadata's
/// labels and annotations and everything else but its kind and status (a status is applied to
/// its subresource: see [`fields_v1`]).
pub fn applied_fields(applied: &Value) -> Value {
    let mut fields = Map::new();
    for (key, value) in applied.as_object().into_iter().flatten() {
        if NOT_TRACKED.contains(&key.as_str()) {
            continue;
        }
        if key == "metadata" {
            let kept: Map<String, Value> = value
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| METADATA_TRACKED.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !kept.is_empty() {
                fields.insert("f:metadata".into(), fields_v1(&Value::Object(kept)));
            }
            continue;
        }
        fields.insert(format!("f:{key}"), fields_v1(value));
    }
    Value::Object(fields)
}

/// The field set of `value`, as `fieldsV1` writes it (pure): `f:<key>` for each field of a map;
/// anything else a leaf (`{}`), lists included: the CRDs' lists are atomic (a PeeringRequest's
/// conditions are one field to its broadcaster).
pub fn fields_v1(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (format!("f:{k}"), fields_v1(v))).collect()),
        _ => json!({}),
    }
}

/// The fields of an object's finalizers, as an update that set them records them (pure).
pub fn finalizer_fields(finalizers: &[&str]) -> Value {
    let mut set: Map<String, Value> = finalizers.iter().map(|f| (format!("v:{}", json!(f)), json!({}))).collect();
    set.insert(".".into(), json!({}));
    json!({"f:metadata": {"f:finalizers": set}})
}

/// Records in `object` that `manager` wrote `fields` by `operation` (`Apply`, `Update`; to
/// `subresource`, if any) at `time` (RFC 3339, seconds), in place of what it wrote there before;
/// the other managers' entries stay (pure).
pub fn record(object: &mut Value, manager: &str, operation: &str, subresource: Option<&str>, fields: Value, time: &str) {
    let api_version = object["apiVersion"].clone();
    let mut entry = json!({
        "manager": manager, "operation": operation, "apiVersion": api_version, "time": time,
        "fieldsType": "FieldsV1", "fieldsV1": fields,
    });
    if let Some(subresource) = subresource {
        entry["subresource"] = json!(subresource);
    }
    let same = |e: &Value| e["manager"] == manager && e["operation"] == operation && e["subresource"].as_str() == subresource;
    let metadata = &mut object["metadata"];
    if !metadata["managedFields"].is_array() {
        metadata["managedFields"] = json!([]);
    }
    let entries = metadata["managedFields"].as_array_mut().expect("an array");
    match entries.iter_mut().find(|e| same(e)) {
        Some(existing) => *existing = entry,
        None => entries.push(entry),
    }
}

/// Now, as managed fields write their time (RFC 3339, whole seconds, UTC).
pub fn now() -> String {
    let now = time::OffsetDateTime::now_utc();
    let now = now.replace_nanosecond(0).unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_applied_object_tracks_its_labels_spec_and_data_not_its_name_kind_or_status() {
        let applied = json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest",
            "metadata": {"name": "a", "namespace": "n", "labels": {"l": "v"}},
            "spec": {"clusterIdentity": {"clusterID": "x"}, "kubeConfigRef": {"name": "s", "namespace": "n"}},
            "status": {"ignored": true},
        });
        assert_eq!(
            applied_fields(&applied),
            json!({"f:metadata": {"f:labels": {"f:l": {}}},
                   "f:spec": {"f:clusterIdentity": {"f:clusterID": {}}, "f:kubeConfigRef": {"f:name": {}, "f:namespace": {}}}})
        );
    }

    #[test]
    fn lists_are_leaves_and_finalizers_a_set() {
        let status = json!({"conditions": [{"type": "Advertised", "status": "True"}], "state": "Accepted"});
        assert_eq!(fields_v1(&status), json!({"f:conditions": {}, "f:state": {}}));
        assert_eq!(finalizer_fields(&["a/b"]), json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a/b\"": {}}}}));
    }

    #[test]
    fn a_manager_applying_again_replaces_its_entry_and_leaves_the_others() {
        let mut object = json!({"apiVersion": "v1", "metadata": {"name": "a"}});
        record(&mut object, "main", "Apply", None, json!({"f:spec": {}}), "t1");
        record(&mut object, "main", "Apply", Some("status"), json!({"f:status": {}}), "t1");
        record(&mut object, "main", "Update", None, json!({"f:metadata": {}}), "t1");
        record(&mut object, "main", "Apply", None, json!({"f:data": {}}), "t2");
        let entries = object["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 3, "{entries:?}");
        assert_eq!((&entries[0]["fieldsV1"], &entries[0]["time"]), (&json!({"f:data": {}}), &json!("t2")));
        assert_eq!((&entries[1]["subresource"], &entries[1]["operation"]), (&json!("status"), &json!("Apply")));
    }
}
