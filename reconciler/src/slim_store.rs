//! Slim stores (`liqo_api::slim_store`: a name and the little read of each object), and the
//! watch that keeps one.

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

pub use liqo_api::slim_store::*;

/// A slim store kept by a watch of `api` (restarted with backoff on errors) for as long as the
/// process runs.
pub fn reflect_slim<K, V>(api: Api<K>, config: watcher::Config, slim: fn(&K) -> V) -> SlimStore<V>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    let (store, mut writer) = slim_store(slim);
    let events = watcher(api, config).backoff(liqo_api::watch_backoff::WatchBackoff::default());
    tokio::spawn(events.for_each(move |event| {
        if let Ok(event) = event {
            writer.apply_watcher_event(&event);
        }
        std::future::ready(())
    }));
    store
}
