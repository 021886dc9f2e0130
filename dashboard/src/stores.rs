//! One set of watches shared by every open page: ForeignClusters, SearchDomains,
//! PeeringRequests, Advertisements, the ClusterConfig, the cluster-id ConfigMap and the Events
//! about ForeignClusters. Pages read these stores, never the API server; every change bumps a
//! counter that the live pages follow.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use liqo_api::{Advertisement, ClusterConfig, ForeignCluster, PeeringRequest, SearchDomain};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// The stores and the change counter.
#[derive(Clone)]
pub struct Stores {
    pub foreign: Store<ForeignCluster>,
    pub domains: Store<SearchDomain>,
    pub requests: Store<PeeringRequest>,
    pub advertisements: Store<Advertisement>,
    pub configs: Store<ClusterConfig>,
    pub cluster_id: Store<ConfigMap>,
    pub events: Store<Event>,
    /// Bumped on every change of any store.
    pub changes: watch::Receiver<u64>,
    /// The watches, stopped when the last clone of these stores is dropped.
    tasks: Arc<Tasks>,
}

/// Tasks aborted when this is dropped.
#[derive(Default)]
pub struct Tasks(Mutex<Vec<AbortHandle>>);

impl Tasks {
    pub fn add(&self, task: AbortHandle) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(task);
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in self.0.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            task.abort();
        }
    }
}

fn follow<K>(api: Api<K>, config: watcher::Config, changed: watch::Sender<u64>, tasks: &Tasks) -> Store<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    // No page shows who wrote which field: the managed fields are not kept (about half of a
    // ForeignCluster's size).
    let events = watcher(api, config).modify(|o| o.meta_mut().managed_fields = None);
    let stream = reflector::reflector(writer, events.backoff(liqo_api::watch_backoff::WatchBackoff::default())).touched_objects();
    let task = tokio::spawn(stream.for_each(move |_| {
        changed.send_modify(|n| *n += 1);
        async {}
    }));
    tasks.add(task.abort_handle());
    reader
}

impl Stores {
    /// Starts the watches, with the user's `client`, for Liqo namespace `namespace`.
    pub fn start(client: &Client, namespace: &str) -> Self {
        let (tx, changes) = watch::channel(0);
        let tasks = Arc::new(Tasks::default());
        let any = || watcher::Config::default().any_semantic();
        Self {
            foreign: follow(Api::all(client.clone()), any(), tx.clone(), &tasks),
            domains: follow(Api::all(client.clone()), any(), tx.clone(), &tasks),
            requests: follow(Api::all(client.clone()), any(), tx.clone(), &tasks),
            advertisements: follow(Api::all(client.clone()), any(), tx.clone(), &tasks),
            configs: follow(Api::all(client.clone()), any().fields("metadata.name=liqo-configuration"), tx.clone(), &tasks),
            cluster_id: follow(Api::namespaced(client.clone(), namespace), any().fields("metadata.name=cluster-id"), tx.clone(), &tasks),
            // Events about cluster-scoped objects are kept in `default`.
            events: follow(Api::namespaced(client.clone(), "default"), any().fields("regarding.kind=ForeignCluster"), tx, &tasks),
            changes,
            tasks,
        }
    }

    /// Runs `task` for as long as these stores live.
    pub fn keep(&self, task: AbortHandle) {
        self.tasks.add(task);
    }

    /// Stores filled by the caller (tests, benchmarks), with the counter's sender.
    pub fn detached() -> (Self, StoreWriters) {
        let (tx, changes) = watch::channel(0);
        let (foreign, fw) = reflector::store();
        let (domains, dw) = reflector::store();
        let (requests, rw) = reflector::store();
        let (advertisements, aw) = reflector::store();
        let (configs, cw) = reflector::store();
        let (cluster_id, iw) = reflector::store();
        let (events, ew) = reflector::store();
        (
            Self { foreign, domains, requests, advertisements, configs, cluster_id, events, changes, tasks: Arc::default() },
            StoreWriters {
                foreign: fw,
                domains: dw,
                requests: rw,
                advertisements: aw,
                configs: cw,
                cluster_id: iw,
                events: ew,
                changed: tx,
            },
        )
    }
}

/// The writing ends of [`Stores::detached`].
pub struct StoreWriters {
    pub foreign: reflector::store::Writer<ForeignCluster>,
    pub domains: reflector::store::Writer<SearchDomain>,
    pub requests: reflector::store::Writer<PeeringRequest>,
    pub advertisements: reflector::store::Writer<Advertisement>,
    pub configs: reflector::store::Writer<ClusterConfig>,
    pub cluster_id: reflector::store::Writer<ConfigMap>,
    pub events: reflector::store::Writer<Event>,
    pub changed: watch::Sender<u64>,
}
