//! Adding and removing our finalizer `discovery.liqo.io/peered`, for every kind that carries
//! it: JSON patches that test what they change, so they never drop another's finalizer and
//! need no resourceVersion (a status write just before never makes them conflict).

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use liqo_api::names::FINALIZER_PEERED;
use serde::de::DeserializeOwned;

use crate::machinery::error::{Result, is_not_found};

/// The JSON patch that adds our finalizer to `finalizers`, `None` when it is there (pure).
pub fn add_patch(finalizers: Option<&[String]>) -> Option<serde_json::Value> {
    match finalizers {
        Some(list) if list.iter().any(|f| f == FINALIZER_PEERED) => None,
        Some(list) => Some(serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER_PEERED},
        ])),
        None => Some(serde_json::json!([{"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER_PEERED]}])),
    }
}

/// The JSON patch that removes our finalizer from `finalizers`, `None` when it is not there (pure).
pub fn remove_patch(finalizers: &[String]) -> Option<serde_json::Value> {
    let i = finalizers.iter().position(|f| f == FINALIZER_PEERED)?;
    Some(serde_json::json!([
        {"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": FINALIZER_PEERED},
        {"op": "remove", "path": format!("/metadata/finalizers/{i}")},
    ]))
}

async fn patch<K>(api: &Api<K>, object: &K, ops: Option<serde_json::Value>) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let Some(ops) = ops else { return Ok(()) };
    let ops: json_patch::Patch = serde_json::from_value(ops).expect("a valid JSON patch");
    match api.patch(&object.name_any(), &PatchParams::default(), &Patch::Json::<()>(ops)).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Adds our finalizer to `object` when missing.
pub async fn add<K>(api: &Api<K>, object: &K) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    patch(api, object, add_patch(object.meta().finalizers.as_deref())).await
}

/// Removes our finalizer from `object` when there (a gone object is fine).
pub async fn remove<K>(api: &Api<K>, object: &K) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    patch(api, object, remove_patch(object.finalizers())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_test_what_they_change_and_keep_the_others() {
        let other = vec!["other.io/keep".to_owned()];
        let add = add_patch(Some(&other)).unwrap();
        assert_eq!(add[0], serde_json::json!({"op": "test", "path": "/metadata/finalizers", "value": ["other.io/keep"]}));
        assert_eq!(add[1]["path"], "/metadata/finalizers/-");
        assert_eq!(add_patch(None).unwrap()[0]["value"], serde_json::json!([FINALIZER_PEERED]));
        let both = vec!["other.io/keep".to_owned(), FINALIZER_PEERED.to_owned()];
        assert_eq!(add_patch(Some(&both)), None, "already there: nothing to write");
        let remove = remove_patch(&both).unwrap();
        assert_eq!(remove[1], serde_json::json!({"op": "remove", "path": "/metadata/finalizers/1"}));
        assert_eq!(remove_patch(&other), None, "not there: nothing to write");
    }
}
