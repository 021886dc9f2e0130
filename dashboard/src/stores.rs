//! One set of watches shared by every open page: ForeignClusters, SearchDomains,
//! PeeringRequests, Advertisements, the ClusterConfig, the cluster-id ConfigMap and the Events
//! about ForeignClusters. Pages read these stores, never the API server; every change bumps a
//! counter that the live pages follow.

use std::fmt::Debug;
use std::hash::Hash;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use liqo_api::{Advertisement, ClusterConfig, ForeignCluster, PeeringRequest, SearchDomain};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

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
}

fn follow<K>(api: Api<K>, config: watcher::Config, changed: watch::Sender<u64>) -> Store<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff()).touched_objects();
    tokio::spawn(stream.for_each(move |_| {
        changed.send_modify(|n| *n += 1);
        async {}
    }));
    reader
}

impl Stores {
    /// Starts the watches, with the user's `client`, for Liqo namespace `namespace`.
    pub fn start(client: &Client, namespace: &str) -> Self {
        let (tx, changes) = watch::channel(0);
        let any = || watcher::Config::default().any_semantic();
        Self {
            foreign: follow(Api::all(client.clone()), any(), tx.clone()),
            domains: follow(Api::all(client.clone()), any(), tx.clone()),
            requests: follow(Api::all(client.clone()), any(), tx.clone()),
            advertisements: follow(Api::all(client.clone()), any(), tx.clone()),
            configs: follow(Api::all(client.clone()), any().fields("metadata.name=liqo-configuration"), tx.clone()),
            cluster_id: follow(Api::namespaced(client.clone(), namespace), any().fields("metadata.name=cluster-id"), tx.clone()),
            // Events about cluster-scoped objects are kept in `default`.
            events: follow(Api::namespaced(client.clone(), "default"), any().fields("regarding.kind=ForeignCluster"), tx),
            changes,
        }
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
            Self { foreign, domains, requests, advertisements, configs, cluster_id, events, changes },
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
