//! What admission decisions need from the cluster — our cluster ID, the peering policy, the
//! known ForeignClusters, who holds each cluster ID — read from watch-fed stores, never from an
//! API call per request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use liqo_api::holder::Holder;
use liqo_api::names::{
    ANNOTATION_EXPIRES_AT, ANNOTATION_ISSUED_AT, CLUSTER_CONFIG_NAME, CLUSTER_ID_CONFIGMAP, CLUSTER_ID_KEY, LABEL_CLUSTER_ID,
    peer_service_account, tenant_namespace,
};
use liqo_api::{ClusterConfig, ForeignCluster, validate_cluster_id};

use crate::policy::PolicyConfig;

/// What the rules read of the cluster's two singletons: the `cluster-id` ConfigMap and
/// ClusterConfig `liqo-configuration`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Our cluster ID, if the `cluster-id` ConfigMap holds a well-formed one.
    pub cluster_id: Option<String>,
    /// The peering policy of ClusterConfig (its defaults when there is none).
    pub policy: PolicyConfig,
}

/// The cluster as admission sees it.
pub trait ClusterView: Send + Sync + 'static {
    /// The Liqo namespace of this cluster.
    fn namespace(&self) -> &str;
    /// Our cluster ID and the peering policy, as of the last change seen.
    fn settings(&self) -> Arc<Settings>;
    /// Whether a person here chose `cluster_id` (`AcceptKnown`): a ForeignCluster for it made
    /// by hand, joined by a person, or with an approved fingerprint ([`liqo_api::chosen`]).
    fn is_known(&self, cluster_id: &str) -> bool;
    /// Who holds `cluster_id` here: the ServiceAccount of the identity the auth service issued
    /// for it, if there is one ([`liqo_api::holder`]).
    fn holder(&self, cluster_id: &str) -> Option<Holder>;
    /// Whether the view reflects the cluster (initial lists done).
    fn ready(&self) -> bool;
    /// Our policy refused `who` saying `message`: shown to this cluster's operator (bounded),
    /// where the view can write.
    fn refused(&self, _who: &crate::denial::Requester, _message: &str) {}
}

/// A fixed view, for tests and running without a cluster.
#[derive(Clone, Debug, Default)]
pub struct StaticView {
    pub namespace: String,
    pub settings: Arc<Settings>,
    pub known: Vec<String>,
    /// The cluster IDs bound to a holder, with what its ServiceAccount says.
    pub held: Vec<(String, Holder)>,
}

impl StaticView {
    /// A view of a cluster with this ID, the default policy and no ForeignClusters.
    pub fn new(namespace: &str, cluster_id: &str) -> Self {
        let settings = Settings { cluster_id: Some(cluster_id.to_owned()), policy: PolicyConfig::default() };
        Self { namespace: namespace.to_owned(), settings: Arc::new(settings), known: vec![], held: vec![] }
    }

    /// The same view with another peering policy.
    pub fn with_policy(mut self, policy: PolicyConfig) -> Self {
        self.settings = Arc::new(Settings { policy, ..(*self.settings).clone() });
        self
    }
}

impl ClusterView for StaticView {
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn settings(&self) -> Arc<Settings> {
        self.settings.clone()
    }
    fn is_known(&self, cluster_id: &str) -> bool {
        self.known.iter().any(|k| k == cluster_id)
    }
    fn holder(&self, cluster_id: &str) -> Option<Holder> {
        self.held.iter().find(|(id, _)| id == cluster_id).map(|(_, h)| h.clone())
    }
    fn ready(&self) -> bool {
        true
    }
}

/// The view kept by reflectors on the API server.
#[derive(Clone)]
pub struct StoreView {
    pub namespace: String,
    pub cluster_id: Store<ConfigMap>,
    pub config: Store<ClusterConfig>,
    pub foreign: Store<ForeignCluster>,
    /// The ServiceAccounts labelled with a cluster ID (the identities issued to peers among
    /// them), their metadata cut to what [`Holder`] reads.
    pub accounts: Store<PartialObjectMeta<ServiceAccount>>,
    pub synced: Arc<AtomicBool>,
    /// Derived from the two singletons when either changes ([`StoreView::refresh`]), so a
    /// review reads it without locking a store, hashing a key or copying the policy.
    settings: Arc<ArcSwap<Settings>>,
    /// Refusals by our policy, written for the operator (none in a view without a client).
    refusals: Option<Arc<crate::refusals::Refusals>>,
}

/// The cluster ID a ForeignCluster stands for (spec first, then the label).
fn fc_cluster_id(fc: &ForeignCluster) -> Option<&str> {
    fc.spec.remote_cluster_id().or_else(|| fc.labels().get(LABEL_CLUSTER_ID).map(String::as_str))
}

impl ClusterView for StoreView {
    fn namespace(&self) -> &str {
        &self.namespace
    }

    fn settings(&self) -> Arc<Settings> {
        self.settings.load_full()
    }

    fn is_known(&self, cluster_id: &str) -> bool {
        // Discovered ForeignClusters are named after the cluster ID; manual ones may not be.
        if let Some(fc) = self.foreign.get(&ObjectRef::new(cluster_id))
            && fc_cluster_id(&fc).is_none_or(|id| id == cluster_id)
            && liqo_api::chosen::chosen(&fc)
        {
            return true;
        }
        self.foreign.find(|fc| fc_cluster_id(fc) == Some(cluster_id) && liqo_api::chosen::chosen(fc)).is_some()
    }

    fn holder(&self, cluster_id: &str) -> Option<Holder> {
        let at = ObjectRef::new(&peer_service_account(cluster_id)).within(&tenant_namespace(cluster_id));
        self.accounts.get(&at).map(|sa| Holder::of(&sa.metadata))
    }

    fn ready(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    fn refused(&self, who: &crate::denial::Requester, message: &str) {
        if let Some(r) = &self.refusals {
            r.record(who, message);
        }
    }
}

/// A store holding `objects`, as a watch leaves it once it has listed them: for tests,
/// benchmarks and anything else that decides without an API server.
pub fn store_of<K>(objects: impl IntoIterator<Item = K>) -> Store<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let mut writer: Writer<K> = Writer::default();
    writer.apply_watcher_event(&watcher::Event::Init);
    for o in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(o));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    writer.as_reader()
}

/// Runs a reflector for `api` into `writer` until the process ends, calling `changed` after
/// every event it has applied to the store; `trim` cuts what the store keeps of each object.
fn reflect<K>(api: Api<K>, config: watcher::Config, writer: Writer<K>, trim: fn(&mut K), changed: impl Fn() + Send + 'static)
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + serde::de::DeserializeOwned + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let stream = watcher(api, config).backoff(liqo_api::watch_backoff::WatchBackoff::default()).modify(trim).reflect(writer);
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => changed(),
                Err(e) => tracing::warn!(error = %e, kind = %K::kind(&Default::default()), "watch failed; retrying"),
            }
        }
    });
}

/// What the store keeps of a ServiceAccount: its name, namespace and the two annotations a
/// [`Holder`] reads (a few hundred bytes a peer).
fn holder_only(sa: &mut PartialObjectMeta<ServiceAccount>) {
    let m = &mut sa.metadata;
    let annotations = m.annotations.take().map(|mut a| {
        a.retain(|k, _| k == ANNOTATION_ISSUED_AT || k == ANNOTATION_EXPIRES_AT);
        a
    });
    *m = kube::api::ObjectMeta {
        name: m.name.take(),
        namespace: m.namespace.take(),
        resource_version: m.resource_version.take(),
        annotations,
        ..Default::default()
    };
}

fn no_managed_fields<K: Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
}

impl StoreView {
    /// A view over these stores.
    pub fn new(
        namespace: &str,
        cluster_id: Store<ConfigMap>,
        config: Store<ClusterConfig>,
        foreign: Store<ForeignCluster>,
        accounts: Store<PartialObjectMeta<ServiceAccount>>,
        synced: Arc<AtomicBool>,
    ) -> Self {
        let view = Self {
            namespace: namespace.to_owned(),
            cluster_id,
            config,
            foreign,
            accounts,
            synced,
            settings: Default::default(),
            refusals: None,
        };
        view.refresh();
        view
    }

    /// Derives the settings again from the stores; the watches of both singletons call it
    /// after every change they apply.
    pub fn refresh(&self) {
        let cluster_id = self.cluster_id.get(&ObjectRef::new(CLUSTER_ID_CONFIGMAP).within(&self.namespace)).and_then(|cm| {
            let id = cm.data.as_ref()?.get(CLUSTER_ID_KEY)?;
            validate_cluster_id(id).ok().map(|_| id.clone())
        });
        let policy = self.config.get(&ObjectRef::new(CLUSTER_CONFIG_NAME)).map(|cc| PolicyConfig::from(&cc.spec)).unwrap_or_default();
        self.settings.store(Arc::new(Settings { cluster_id, policy }));
    }

    /// Starts the four watches; the view turns ready once each has listed.
    pub fn start(client: Client, namespace: &str) -> Self {
        let (cluster_id, cluster_id_writer) = reflector::store();
        let (config, config_writer) = reflector::store();
        let (foreign, foreign_writer) = reflector::store();
        let (accounts, accounts_writer) = reflector::store();
        let synced = Arc::new(AtomicBool::new(false));
        let mut view = Self::new(namespace, cluster_id, config, foreign, accounts, synced.clone());
        let refusals = Arc::new(crate::refusals::Refusals::default());
        crate::refusals::spawn_writer(refusals.clone(), client.clone(), view.config.clone(), view.foreign.clone());
        view.refusals = Some(refusals);
        let refresh = |view: &Self| {
            let view = view.clone();
            move || view.refresh()
        };
        reflect(
            Api::<ConfigMap>::namespaced(client.clone(), namespace),
            watcher::Config::default().fields(&format!("metadata.name={CLUSTER_ID_CONFIGMAP}")),
            cluster_id_writer,
            no_managed_fields,
            refresh(&view),
        );
        reflect(
            Api::<ClusterConfig>::all(client.clone()),
            watcher::Config::default().fields(&format!("metadata.name={CLUSTER_CONFIG_NAME}")),
            config_writer,
            no_managed_fields,
            refresh(&view),
        );
        // Who set `spec.join` is kept: it tells a person's choice from autojoin's.
        reflect(
            Api::<ForeignCluster>::all(client.clone()),
            watcher::Config::default(),
            foreign_writer,
            liqo_api::chosen::keep_join_setter,
            || {},
        );
        // The ServiceAccounts labelled with a cluster ID, in every namespace, by their metadata.
        let labelled = watcher::Config::default().labels(LABEL_CLUSTER_ID);
        reflect(Api::<PartialObjectMeta<ServiceAccount>>::all(client), labelled, accounts_writer, holder_only, || {});
        let stores = view.clone();
        tokio::spawn(async move {
            let all = futures::future::try_join4(
                stores.cluster_id.wait_until_ready(),
                stores.config.wait_until_ready(),
                stores.foreign.wait_until_ready(),
                stores.accounts.wait_until_ready(),
            );
            if all.await.is_ok() {
                synced.store(true, Ordering::Relaxed);
                tracing::info!("stores synced; ready to admit");
            }
        });
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use liqo_api::{ClusterConfigSpec, ClusterIdentity, ForeignClusterSpec, PeeringPolicy};

    fn fc(name: &str, id: Option<&str>) -> ForeignCluster {
        let mut fc = ForeignCluster::new(name, ForeignClusterSpec::default());
        fc.spec.cluster_identity = id.map(|id| ClusterIdentity { cluster_id: id.into(), cluster_name: None });
        fc
    }

    fn cluster_id_cm(id: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta { name: Some("cluster-id".into()), namespace: Some("liqo".into()), ..Default::default() },
            data: Some([("cluster-id".to_owned(), id.to_owned())].into()),
            ..Default::default()
        }
    }

    fn view(cm_id: &str, configs: Vec<ClusterConfig>, fcs: Vec<ForeignCluster>) -> StoreView {
        StoreView::new(
            "liqo",
            store_of(vec![cluster_id_cm(cm_id)]),
            store_of(configs),
            store_of(fcs),
            store_of(vec![]),
            Arc::new(AtomicBool::new(true)),
        )
    }

    #[test]
    fn reads_cluster_id_policy_and_known_clusters_from_the_stores() {
        let mut cc = ClusterConfig::new("liqo-configuration", ClusterConfigSpec::default());
        cc.spec.peering_policy = PeeringPolicy::AcceptKnown;
        cc.spec.peering_deny_list = vec!["bad".into()];
        let v = view("own-id", vec![cc], vec![fc("peer-a", None), fc("manual", Some("peer-b")), fc("peer-c", Some("other"))]);
        assert_eq!(v.settings().cluster_id.as_deref(), Some("own-id"));
        assert_eq!(v.settings().policy.policy, PeeringPolicy::AcceptKnown);
        assert_eq!(v.settings().policy.deny, vec!["bad".to_owned()]);
        assert!(v.is_known("peer-a"), "named after the cluster ID");
        assert!(v.is_known("peer-b"), "found by spec cluster ID");
        assert!(v.is_known("other"));
        assert!(!v.is_known("peer-c"), "its name is not its cluster ID");
        assert!(!v.is_known("stranger"));
    }

    #[test]
    fn a_cluster_discovery_merely_saw_is_not_known() {
        let mut seen = fc("lan-peer", Some("lan-peer"));
        seen.spec.discovery_type = Some(liqo_api::DiscoveryType::Lan);
        seen.spec.join = Some(true);
        let mut asked = fc("incoming", Some("incoming"));
        asked.spec.discovery_type = Some(liqo_api::DiscoveryType::IncomingPeering);
        let mut approved = fc("wan-approved", Some("wan-approved"));
        approved.spec.discovery_type = Some(liqo_api::DiscoveryType::Wan);
        approved.spec.trusted_ca_fingerprint = Some("ab".repeat(32));
        let v = view("own-id", vec![], vec![seen, asked, approved]);
        assert!(!v.is_known("lan-peer"), "autojoined by discovery (no one else set join)");
        assert!(!v.is_known("incoming"), "it asked");
        assert!(v.is_known("wan-approved"), "a person approved its fingerprint");
    }

    #[test]
    fn missing_config_means_defaults_and_a_malformed_id_means_unknown() {
        let v = view("Not Valid", vec![], vec![]);
        assert_eq!(v.settings().cluster_id, None);
        assert_eq!(v.settings().policy, PolicyConfig::default());
        let other =
            ClusterConfig::new("not-the-singleton", ClusterConfigSpec { peering_policy: PeeringPolicy::RejectAll, ..Default::default() });
        assert_eq!(view("x", vec![other], vec![]).settings().policy.policy, PeeringPolicy::AcceptAll);
    }

    #[test]
    fn settings_are_derived_again_when_a_singleton_changes() {
        let mut configs: Writer<ClusterConfig> = Writer::default();
        configs.apply_watcher_event(&watcher::Event::Init);
        configs.apply_watcher_event(&watcher::Event::InitDone);
        let v = StoreView::new(
            "liqo",
            store_of(vec![cluster_id_cm("own-id")]),
            configs.as_reader(),
            store_of(vec![]),
            store_of(vec![]),
            Default::default(),
        );
        assert_eq!(v.settings().policy.policy, PeeringPolicy::AcceptAll);

        let reject =
            ClusterConfig::new("liqo-configuration", ClusterConfigSpec { peering_policy: PeeringPolicy::RejectAll, ..Default::default() });
        configs.apply_watcher_event(&watcher::Event::Apply(reject.clone()));
        assert_eq!(v.settings().policy.policy, PeeringPolicy::AcceptAll, "derived on change, not on every review");
        v.refresh();
        assert_eq!(v.settings().policy.policy, PeeringPolicy::RejectAll);
        assert_eq!(v.settings().cluster_id.as_deref(), Some("own-id"));

        configs.apply_watcher_event(&watcher::Event::Delete(reject));
        v.refresh();
        assert_eq!(v.settings().policy, PolicyConfig::default(), "no ClusterConfig: the defaults");
    }
}
