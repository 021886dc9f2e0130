//! Server-side apply and delete, the two ways everything here writes an object (I/O).

use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::machinery::error::{Result, is_not_found};

/// Server-side applies `object` (forcing ownership of the fields it sets).
pub async fn apply<K>(api: &Api<K>, manager: &str, object: &K) -> Result<K>
where
    K: Resource + Serialize + DeserializeOwned + Clone + std::fmt::Debug,
{
    Ok(apply_raw(api, manager, object).await?)
}

/// [`apply`], with the API server's error as it is (for calls to another cluster). The object is
/// of our own types: the API server is not asked to look for unknown fields
/// (`fieldValidation=Ignore`; it drops them all the same, and an API server older than 1.25
/// ignores the parameter).
pub async fn apply_raw<K>(api: &Api<K>, manager: &str, object: &K) -> kube::Result<K>
where
    K: Resource + Serialize + DeserializeOwned + Clone + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    api.patch(&name, &PatchParams::apply(manager).force().validation_ignore(), &Patch::Apply(object)).await
}

/// Deletes `name`; true when it existed.
pub async fn delete<K>(api: &Api<K>, name: &str) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(delete_raw(api, name).await?)
}

/// [`delete`], with the API server's error as it is (for calls to another cluster).
pub async fn delete_raw<K>(api: &Api<K>, name: &str) -> kube::Result<bool>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
