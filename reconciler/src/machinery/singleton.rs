//! Keeping one named object in existence and publishing what it holds.
//!
//! The cluster-id ConfigMap and the ClusterConfig share this shape: watch the object by name;
//! when it is missing (or holds nothing usable) repair it; whenever it holds a value, publish it
//! on a `watch` channel so every component sees the current one without asking the API.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use kube::Api;
use kube::Resource;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_objects};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::machinery::error::Result;

/// How often a failed repair is retried while nothing else happens.
const RETRY: Duration = Duration::from_secs(5);

pub trait Singleton: Send + Sync + 'static {
    type Object: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static;
    type Value: Clone + PartialEq + Debug + Send + Sync + 'static;

    /// Name of the object.
    fn name(&self) -> &str;
    /// The value the object holds, or None when it needs a repair.
    fn read(&self, object: &Self::Object) -> Option<Self::Value>;
    /// Create the object (`existing` is None) or fill it in (it holds no usable value).
    fn repair(&self, api: &Api<Self::Object>, existing: Option<&Self::Object>) -> impl Future<Output = Result<()>> + Send;
}

/// Publish `value` when it differs from what the channel holds. True when it was published.
pub fn publish<T: PartialEq>(tx: &watch::Sender<Option<T>>, value: T) -> bool {
    tx.send_if_modified(|current| {
        if current.as_ref() == Some(&value) {
            false
        } else {
            *current = Some(value);
            true
        }
    })
}

/// Runs until the channel has no receivers left.
pub async fn keep<S: Singleton>(singleton: S, api: Api<S::Object>, tx: watch::Sender<Option<S::Value>>)
where
    <S::Object as Resource>::DynamicType: Default,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={}", singleton.name()));
    let mut events = std::pin::pin!(watch_objects(api.clone(), config).backoff(liqo_api::watch_backoff::WatchBackoff::default()));
    let mut listing: Option<S::Object> = None;
    let mut current: Option<S::Object> = None;
    let mut pending_repair = false;
    loop {
        let event = if pending_repair {
            tokio::select! {
                e = events.next() => e,
                _ = tokio::time::sleep(RETRY) => {
                    pending_repair = !settle(&singleton, &api, current.as_ref(), &tx).await;
                    continue;
                }
                _ = tx.closed() => return,
            }
        } else {
            tokio::select! {
                e = events.next() => e,
                _ = tx.closed() => return,
            }
        };
        let Some(event) = event else { return };
        match event {
            Ok(Event::Init) => {
                listing = None;
                continue;
            }
            Ok(Event::InitApply(o)) => {
                listing = Some(o);
                continue;
            }
            Ok(Event::InitDone) => current = listing.take(),
            Ok(Event::Apply(o)) => current = Some(o),
            Ok(Event::Delete(_)) => {
                tracing::warn!(name = singleton.name(), "deleted; re-creating it");
                current = None
            }
            Err(e) => {
                tracing::warn!(name = singleton.name(), error = %e, "watch failed; retrying");
                continue;
            }
        }
        pending_repair = !settle(&singleton, &api, current.as_ref(), &tx).await;
    }
}

/// Publish the value, or repair the object. False when a repair failed.
async fn settle<S: Singleton>(
    singleton: &S,
    api: &Api<S::Object>,
    current: Option<&S::Object>,
    tx: &watch::Sender<Option<S::Value>>,
) -> bool {
    match current.and_then(|o| singleton.read(o)) {
        Some(value) => {
            if publish(tx, value.clone()) {
                tracing::info!(name = singleton.name(), ?value, "current value");
            }
            true
        }
        None => match singleton.repair(api, current).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(name = singleton.name(), error = %e, "repair failed; retrying");
                false
            }
        },
    }
}
