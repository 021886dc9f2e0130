//! Upgrades from releases that wrote status by merge patch. Such a write left its fields owned
//! by an `Update` entry in `metadata.managedFields`; a server-side apply never removes a field
//! another manager owns, so a field this release no longer sets would stay forever. Before the
//! first apply, each `Update` entry of the status subresource is folded into the `Apply` entry
//! of the manager that owns that part of the status now (as client-go's `csaupgrade` does);
//! the next apply then drops what no one sets any more.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Whether `e` was written by an update (a merge patch or a PUT) of the status subresource.
fn is_status_update(e: &ManagedFieldsEntry) -> bool {
    e.operation.as_deref() == Some("Update") && e.subresource.as_deref() == Some("status")
}

/// Adds every field of `from` to `into` (pure): fieldsV1 sets are trees of objects.
fn union(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (key, value) in from {
        match (into.get_mut(key), value) {
            (Some(Value::Object(mine)), Value::Object(theirs)) => union(mine, theirs),
            (Some(_), _) => {}
            (None, v) => {
                into.insert(key.clone(), v.clone());
            }
        }
    }
}

/// `entries` with every status `Update` folded into the `Apply` entry of `owner_of(key)` for
/// each top-level status field `key` (e.g. `f:conditions`), made when missing (pure); `None`
/// when there is no status `Update` to fold.
pub fn fold_status_updates(
    entries: &[ManagedFieldsEntry],
    api_version: &str,
    now: &Time,
    owner_of: impl Fn(&str) -> &'static str,
) -> Option<Vec<ManagedFieldsEntry>> {
    if !entries.iter().any(is_status_update) {
        return None;
    }
    let mut kept: Vec<ManagedFieldsEntry> = entries.iter().filter(|e| !is_status_update(e)).cloned().collect();
    let old = entries.iter().filter(|e| is_status_update(e)).filter_map(|e| e.fields_v1.as_ref()?.0.get("f:status")?.as_object());
    for status in old {
        for (key, fields) in status.iter().filter(|(k, _)| k.as_str() != ".") {
            let entry = status_apply_entry(&mut kept, owner_of(key), api_version, now);
            let root = entry.fields_v1.get_or_insert_with(|| FieldsV1(Value::Object(Map::new())));
            let root = root.0.as_object_mut().expect("fieldsV1 is an object");
            if let Value::Object(status_tree) = root.entry("f:status").or_insert_with(|| Value::Object(Map::new())) {
                status_tree.entry(".").or_insert_with(|| Value::Object(Map::new()));
                union(status_tree, &Map::from_iter([(key.clone(), fields.clone())]));
            }
        }
    }
    Some(kept)
}

/// `manager`'s `Apply` entry of the status subresource in `entries`, added (empty) when missing.
fn status_apply_entry<'a>(
    entries: &'a mut Vec<ManagedFieldsEntry>,
    manager: &str,
    api_version: &str,
    now: &Time,
) -> &'a mut ManagedFieldsEntry {
    let ours = |e: &ManagedFieldsEntry| {
        e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some("Apply") && e.subresource.as_deref() == Some("status")
    };
    let at = match entries.iter().position(ours) {
        Some(at) => at,
        None => {
            entries.push(ManagedFieldsEntry {
                api_version: Some(api_version.to_owned()),
                fields_type: Some("FieldsV1".to_owned()),
                fields_v1: Some(FieldsV1(Value::Object(Map::new()))),
                manager: Some(manager.to_owned()),
                operation: Some("Apply".to_owned()),
                subresource: Some("status".to_owned()),
                time: Some(now.clone()),
            });
            entries.len() - 1
        }
    };
    &mut entries[at]
}

/// Folds `obj`'s status updates on the server (see [`fold_status_updates`]): one JSON patch,
/// guarded by the resourceVersion. True when it changed anything; the caller's next apply then
/// drops the fields no one sets any more. `obj` may come from a store that keeps only
/// [`trim`]med managed fields: when it shows a status update, the object is read afresh and
/// folded whole (once, after an upgrade from such a release).
pub async fn take_over_status<K>(api: &Api<K>, obj: &K, owner_of: impl Fn(&str) -> &'static str) -> kube::Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if !obj.meta().managed_fields.iter().flatten().any(is_status_update) {
        return Ok(false);
    }
    let obj = api.get(&obj.name_any()).await?;
    let entries = obj.meta().managed_fields.as_deref().unwrap_or_default();
    let api_version = K::api_version(&()).into_owned();
    let Some(folded) = fold_status_updates(entries, &api_version, &Time(k8s_openapi::jiff::Timestamp::now()), owner_of) else {
        return Ok(false);
    };
    let patch = serde_json::json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": obj.resource_version()},
        {"op": "replace", "path": "/metadata/managedFields", "value": folded},
    ]);
    let patch: json_patch::Patch = serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    api.patch(&obj.name_any(), &PatchParams::default(), &Patch::Json::<()>(patch)).await?;
    tracing::info!(object = %obj.name_any(), "status fields written by an earlier release taken over by their manager");
    Ok(true)
}

/// What [`trim`] leaves of an entry that set `spec.join` in place of its fields: the API
/// server writes `FieldsV1` there, never this. The set of that one field, as JSON, took about
/// 1.3 KiB of memory per ForeignCluster.
const SETS_JOIN: &str = "liqo.io/sets-spec.join";

/// Whether `e` set `spec.join`: its fields say so, or [`trim`] left it so marked.
pub fn sets_join(e: &ManagedFieldsEntry) -> bool {
    e.fields_type.as_deref() == Some(SETS_JOIN)
        || e.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").and_then(|s| s.get("f:join")).is_some())
}

/// What a store of ForeignClusters keeps of their managed fields (pure): only the entries
/// someone here reads, each without its fields — an entry setting `spec.join` (whose manager
/// tells a user's choice from discovery's, [`crate::discovery::memory::users_choice`]), marked
/// so ([`sets_join`]), and a status `Update` (which [`take_over_status`] folds, reading the
/// object afresh). The whole set took about 6 KiB of memory per ForeignCluster, the largest
/// part of a hub's memory (docs/scaling.md).
pub fn trim(entries: &mut Option<Vec<ManagedFieldsEntry>>) {
    let Some(list) = entries.as_mut() else { return };
    list.retain_mut(|e| {
        let join = sets_join(e);
        e.fields_v1 = None;
        e.fields_type = join.then(|| SETS_JOIN.to_owned());
        e.api_version = None;
        e.time = None;
        join || is_status_update(e)
    });
    list.shrink_to_fit();
    if list.is_empty() {
        *entries = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(manager: &str, operation: &str, subresource: Option<&str>, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            api_version: Some("discovery.liqo.io/v1alpha1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            subresource: subresource.map(Into::into),
            time: None,
        }
    }

    fn route(key: &str) -> &'static str {
        if key == "f:incoming" { "liqo-incoming" } else { "liqo-peering" }
    }

    #[test]
    fn status_updates_are_folded_into_the_managers_that_own_each_part_now() {
        let now = Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap());
        let spec = entry("kubectl", "Update", None, json!({"f:spec": {"f:join": {}}}));
        let old = entry(
            "liqo-reconciler",
            "Update",
            Some("status"),
            json!({"f:status": {".": {}, "f:ttl": {}, "f:incoming": {"f:peeringRequest": {}}, "f:conditions": {"k:{\"type\":\"Legacy\"}": {".": {}}}}}),
        );
        let ours =
            entry("liqo-peering", "Apply", Some("status"), json!({"f:status": {"f:conditions": {"k:{\"type\":\"Joined\"}": {".": {}}}}}));
        let folded = fold_status_updates(&[spec.clone(), old, ours], "discovery.liqo.io/v1alpha1", &now, route).unwrap();
        assert_eq!(folded.len(), 3, "{folded:?}");
        assert_eq!(folded[0], spec, "other entries untouched");
        assert!(folded.iter().all(|e| !is_status_update(e)), "no status update left");
        let fields = |m: &str| folded.iter().find(|e| e.manager.as_deref() == Some(m)).unwrap().fields_v1.clone().unwrap().0;
        assert_eq!(
            fields("liqo-peering")["f:status"],
            json!({".": {}, "f:ttl": {}, "f:conditions": {"k:{\"type\":\"Joined\"}": {".": {}}, "k:{\"type\":\"Legacy\"}": {".": {}}}})
        );
        assert_eq!(fields("liqo-incoming"), json!({"f:status": {".": {}, "f:incoming": {"f:peeringRequest": {}}}}));
        // Nothing to fold: nothing to write.
        assert_eq!(fold_status_updates(&folded, "discovery.liqo.io/v1alpha1", &now, route), None);
    }

    #[test]
    fn a_trimmed_entry_list_keeps_who_set_join_and_that_a_status_update_happened() {
        let mut entries = Some(vec![
            entry("kubectl", "Update", None, json!({"f:spec": {"f:join": {}, "f:clusterIdentity": {"f:clusterID": {}}}})),
            entry("liqo-discovery", "Apply", None, json!({"f:spec": {"f:clusterIdentity": {}}, "f:metadata": {"f:labels": {}}})),
            entry("liqo-reconciler", "Apply", Some("status"), json!({"f:status": {"f:conditions": {}}})),
            entry("old-release", "Update", Some("status"), json!({"f:status": {"f:tenantNamespace": {}}})),
        ]);
        trim(&mut entries);
        let kept = entries.unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].manager.as_deref(), Some("kubectl"));
        assert!(sets_join(&kept[0]) && kept[0].fields_v1.is_none(), "{kept:?}");
        assert!(is_status_update(&kept[1]) && kept[1].fields_v1.is_none() && !sets_join(&kept[1]));
        // Trimming again changes nothing (a store's object trimmed twice).
        let mut again = Some(kept.clone());
        trim(&mut again);
        assert_eq!(again.unwrap(), kept);
        // What discovery's memory reads of it still reads the same.
        let mut nothing = Some(vec![entry("liqo-reconciler", "Apply", Some("status"), json!({"f:status": {}}))]);
        trim(&mut nothing);
        assert!(nothing.is_none());
    }
}
