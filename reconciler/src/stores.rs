//! Watch-fed stores the controllers read instead of calling the API server.

use std::fmt::Debug;
use std::hash::Hash;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// A store kept by a watch of `api` (restarted with backoff on errors) for as long as the
/// process runs.
pub fn reflect<K>(api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream =
        reflector::reflector(writer, watcher(api, config).backoff(liqo_api::watch_backoff::WatchBackoff::default())).applied_objects();
    tokio::spawn(stream.for_each(|_| async {}));
    reader
}
