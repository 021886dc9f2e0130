//! One set of watches shared by every open page: ForeignClusters, SearchDomains,
//! PeeringRequests, Advertisements, the ClusterConfig, the cluster-id ConfigMap and the Events
//! about ForeignClusters. Pages read these stores, never the API server; every change bumps a
//! counter that the live pages follow.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
#[cfg(test)]
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::ObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use liqo_api::last_checks::Record;
use liqo_api::slim_store::{SlimStore, SlimWriter, slim_store};
use liqo_api::{Advertisement, ClusterConfig, ForeignCluster, PeeringRequest, SearchDomain};
use serde::de::DeserializeOwned;

use crate::history::Histories;
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
    /// The Events about ForeignClusters, by name, as a peer's page shows them.
    pub events: SlimStore<ShownEvent>,
    /// Each peer's recent states, from the ForeignCluster watch, and its recent checks, from
    /// the record of the last checks.
    pub history: Arc<Mutex<Histories>>,
    /// The record of the last checks (ConfigMap liqo-last-checks), read.
    pub last_checks: SlimStore<Record>,
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

/// A store of what `api` watches, each object kept as `trim` leaves it.
fn follow<K>(api: Api<K>, config: watcher::Config, changed: watch::Sender<u64>, tasks: &Tasks, trim: fn(&mut K)) -> Store<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    follow_seeing(api, config, changed, tasks, trim, |_| {})
}

/// [`follow`], with each event of the watch also shown to `see`.
fn follow_seeing<K>(
    api: Api<K>,
    config: watcher::Config,
    changed: watch::Sender<u64>,
    tasks: &Tasks,
    trim: fn(&mut K),
    see: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> Store<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let events = watcher(api, config).modify(trim).backoff(liqo_api::watch_backoff::WatchBackoff::default());
    let task = tokio::spawn(reflector::reflector(writer, events).for_each(move |event| {
        if let Ok(event) = event {
            see(&event);
            if is_change(&event) {
                changed.send_modify(|n| *n += 1);
            }
        }
        async {}
    }));
    tasks.add(task.abort_handle());
    reader
}

/// A slim store of what `api` watches, each object kept as `slim` makes it.
fn follow_slim<K, V>(api: Api<K>, config: watcher::Config, changed: watch::Sender<u64>, tasks: &Tasks, slim: fn(&K) -> V) -> SlimStore<V>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    follow_slim_seeing(api, config, changed, tasks, slim, |_| {})
}

/// [`follow_slim`], with each event of the watch also shown to `see`.
fn follow_slim_seeing<K, V>(
    api: Api<K>,
    config: watcher::Config,
    changed: watch::Sender<u64>,
    tasks: &Tasks,
    slim: fn(&K) -> V,
    see: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> SlimStore<V>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    let (store, mut writer) = slim_store(slim);
    let events = watcher(api, config).backoff(liqo_api::watch_backoff::WatchBackoff::default());
    let task = tokio::spawn(events.for_each(move |event| {
        if let Ok(event) = event {
            see(&event);
            writer.apply_watcher_event(&event);
            if is_change(&event) {
                changed.send_modify(|n| *n += 1);
            }
        }
        async {}
    }));
    tasks.add(task.abort_handle());
    store
}

/// Whether a watch's event changes what the pages show (pure): an object applied or deleted,
/// or a (re)list complete. The objects of a list are one change when it is complete, not one
/// each (10,000 of them would send an open page 10,000 refreshes); a failed request is none.
fn is_change<K>(event: &watcher::Event<K>) -> bool {
    !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_))
}

/// No page shows who wrote which field: the managed fields are not kept (about half of a
/// ForeignCluster's size).
fn no_managed_fields<K: Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
}

/// The record a ConfigMap holds (pure; empty when it holds none).
pub fn record_of(cm: &ConfigMap) -> Record {
    cm.data.as_ref().and_then(|d| d.get(liqo_api::last_checks::KEY)).map(|t| liqo_api::last_checks::parse(t)).unwrap_or_default()
}

/// What a page shows of an Event: the ForeignCluster it is about, its type, reason and note,
/// and when it last happened. A hub holds about four an hour per joined peer (the join's),
/// 38,000 at 10,000 peers: kept whole in kube's store (behind a key of name, namespace, uid and
/// resourceVersion), each took about 1.5 KiB, most of it metadata, references and reporters no
/// page shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownEvent {
    pub regarding: Box<str>,
    pub warning: bool,
    pub reason: Box<str>,
    pub note: Box<str>,
    /// The last time it happened (a series' last, else its eventTime, else when it was made).
    pub at: Option<k8s_openapi::jiff::Timestamp>,
}

/// An Event as a page shows it (pure, for a slim store).
pub fn event_as_shown(e: &Event) -> ShownEvent {
    let text = |s: &Option<String>| -> Box<str> { s.as_deref().unwrap_or_default().into() };
    ShownEvent {
        regarding: e.regarding.as_ref().map(|r| text(&r.name)).unwrap_or_default(),
        warning: e.type_.as_deref() == Some("Warning"),
        reason: text(&e.reason),
        note: text(&e.note),
        at: liqo_api::summary::event_last_seen(e).or(e.metadata.creation_timestamp.as_ref().map(|t| t.0)),
    }
}

/// Only what a page shows of an Advertisement (pure): whom it is from, where it is (a peer's
/// own is in its tenant namespace) and the resources it offers.
pub fn advertisement_as_shown(a: &mut Advertisement) {
    let meta = std::mem::take(&mut a.metadata);
    a.metadata = ObjectMeta { name: meta.name, namespace: meta.namespace, resource_version: meta.resource_version, ..Default::default() };
    a.spec.kube_config_ref = None;
    a.spec.timestamp = None;
    a.status = None;
}

impl Stores {
    /// Starts the watches, with the user's `client`, for Liqo namespace `namespace`.
    pub fn start(client: &Client, namespace: &str) -> Self {
        let (tx, changes) = watch::channel(0);
        let tasks = Arc::new(Tasks::default());
        let any = || watcher::Config::default().any_semantic();
        let history = Arc::new(Mutex::new(Histories::default()));
        let seen = history.clone();
        let see = move |e: &watcher::Event<ForeignCluster>| {
            seen.lock().unwrap_or_else(|e| e.into_inner()).apply(e, k8s_openapi::jiff::Timestamp::now())
        };
        let checked = history.clone();
        let see_checks = move |e: &watcher::Event<ConfigMap>| {
            if let watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) = e {
                checked.lock().unwrap_or_else(|e| e.into_inner()).checked(&record_of(cm));
            }
        };
        Self {
            foreign: follow_seeing(Api::all(client.clone()), any(), tx.clone(), &tasks, no_managed_fields, see),
            domains: follow(Api::all(client.clone()), any(), tx.clone(), &tasks, no_managed_fields),
            requests: follow(Api::all(client.clone()), any(), tx.clone(), &tasks, no_managed_fields),
            advertisements: follow(Api::all(client.clone()), any(), tx.clone(), &tasks, advertisement_as_shown),
            configs: follow(
                Api::all(client.clone()),
                any().fields("metadata.name=liqo-configuration"),
                tx.clone(),
                &tasks,
                no_managed_fields,
            ),
            cluster_id: follow(
                Api::namespaced(client.clone(), namespace),
                any().fields("metadata.name=cluster-id"),
                tx.clone(),
                &tasks,
                no_managed_fields,
            ),
            last_checks: follow_slim_seeing(
                Api::namespaced(client.clone(), namespace),
                any().fields(&format!("metadata.name={}", liqo_api::last_checks::CONFIGMAP)),
                tx.clone(),
                &tasks,
                record_of,
                see_checks,
            ),
            // Events about cluster-scoped objects are kept in `default`.
            events: follow_slim(
                Api::namespaced(client.clone(), "default"),
                any().fields("regarding.kind=ForeignCluster"),
                tx,
                &tasks,
                event_as_shown,
            ),
            history,
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
        let (events, ew) = slim_store(event_as_shown);
        let (last_checks, lw) = slim_store(record_of);
        (
            Self {
                foreign,
                domains,
                requests,
                advertisements,
                configs,
                cluster_id,
                events,
                history: Arc::default(),
                last_checks,
                changes,
                tasks: Arc::default(),
            },
            StoreWriters {
                foreign: fw,
                domains: dw,
                requests: rw,
                advertisements: aw,
                configs: cw,
                cluster_id: iw,
                events: ew,
                last_checks: lw,
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
    pub events: SlimWriter<Event, ShownEvent>,
    pub last_checks: SlimWriter<ConfigMap, Record>,
    pub changed: watch::Sender<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mock API server's answer: `status` with the JSON `body`.
    fn answer(status: u16, body: serde_json::Value) -> http::Response<kube::client::Body> {
        http::Response::builder().status(status).body(kube::client::Body::from(serde_json::to_vec(&body).unwrap())).unwrap()
    }

    type Mock = tower_test::mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>;

    /// The mock API server's next request, and how to answer it.
    async fn next(
        handle: &mut Mock,
    ) -> (http::Request<kube::client::Body>, tower_test::mock::SendResponse<http::Response<kube::client::Body>>) {
        tokio::time::timeout(Duration::from_secs(30), handle.next_request())
            .await
            .expect("a request within 30 s")
            .expect("the watch asks again")
    }

    #[tokio::test]
    async fn a_refused_watch_is_no_change_and_a_list_is_one_change_however_long() {
        let (mock, mut handle) = tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        let (tx, changes) = watch::channel(0);
        let tasks = Tasks::default();
        let store: Store<ConfigMap> = follow(
            Api::namespaced(Client::new(mock, "liqo"), "liqo"),
            watcher::Config::default().any_semantic(),
            tx,
            &tasks,
            no_managed_fields,
        );
        let refused = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                                         "message": "configmaps is forbidden"});
        for _ in 0..3 {
            let (request, reply) = next(&mut handle).await;
            assert!(!request.uri().query().unwrap_or_default().contains("watch=true"), "{:?}", request.uri());
            reply.send_response(answer(403, refused.clone()));
        }
        // The fourth request comes after the third refusal went through the stream.
        let (_, reply) = next(&mut handle).await;
        assert_eq!(*changes.borrow(), 0, "a refused list changes nothing on the pages");
        let items: Vec<_> = (0..3).map(|i| serde_json::json!({"metadata": {"name": format!("cm-{i}"), "namespace": "liqo"}})).collect();
        reply.send_response(answer(
            200,
            serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "10"}, "items": items}),
        ));
        let (watch, _held) = next(&mut handle).await;
        assert!(watch.uri().query().unwrap_or_default().contains("watch=true"), "{:?}", watch.uri());
        assert_eq!(store.state().len(), 3);
        assert_eq!(*changes.borrow(), 1, "a list of three is one change, when it is complete");
    }

    #[test]
    fn an_event_keeps_what_the_peer_page_shows_and_nothing_else() {
        let mut e: Event = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "fc.1", "namespace": "default", "resourceVersion": "9", "uid": "u",
                         "creationTimestamp": "2026-11-26T00:00:00Z", "managedFields": [{"manager": "liqo-reconciler"}]},
            "eventTime": "2026-11-26T00:00:00.000000Z",
            "regarding": {"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "name": "fc", "uid": "fc-uid"},
            "related": {"kind": "Secret", "name": "s"},
            "type": "Normal", "reason": "Joined", "note": "the remote accepted our PeeringRequest",
            "action": "Peering", "reportingController": "liqo-reconciler", "reportingInstance": "pod-1",
            "series": {"count": 3, "lastObservedTime": "2026-11-26T00:01:00.000000Z"},
            "deprecatedCount": 3
        }))
        .unwrap();
        let shown = event_as_shown(&e);
        assert_eq!(
            shown,
            ShownEvent {
                regarding: "fc".into(),
                warning: false,
                reason: "Joined".into(),
                note: "the remote accepted our PeeringRequest".into(),
                at: Some("2026-11-26T00:01:00Z".parse().unwrap()),
            },
            "a series says when it last happened"
        );
        e.series = None;
        e.type_ = Some("Warning".into());
        let shown = event_as_shown(&e);
        assert!(shown.warning);
        assert_eq!(shown.at, Some("2026-11-26T00:00:00Z".parse().unwrap()));
    }

    #[test]
    fn an_advertisement_keeps_its_sender_and_resources() {
        let mut a: Advertisement = serde_json::from_value(serde_json::json!({
            "apiVersion": "sharing.liqo.io/v1alpha1", "kind": "Advertisement",
            "metadata": {"name": "advertisement-x", "namespace": "liqo-tenant-x", "resourceVersion": "4", "uid": "u", "labels": {"a": "b"}},
            "spec": {"clusterId": "x", "kubeConfigRef": {"name": "k", "namespace": "liqo"}, "timestamp": "2026-11-26T00:00:00Z",
                     "resources": {"cpu": "8", "memory": "32Gi", "pods": "220"}},
            "status": {"advertisementStatus": "Accepted"}
        }))
        .unwrap();
        let resources = a.spec.resources.clone();
        advertisement_as_shown(&mut a);
        assert_eq!((a.metadata.name.as_deref(), a.spec.cluster_id.as_str()), (Some("advertisement-x"), "x"));
        assert_eq!(a.metadata.namespace.as_deref(), Some("liqo-tenant-x"), "where it is tells whose it is");
        assert_eq!(a.spec.resources, resources);
        assert!(a.metadata.labels.is_none() && a.metadata.uid.is_none() && a.spec.kube_config_ref.is_none() && a.status.is_none());
    }
}
