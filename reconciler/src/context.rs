//! What every controller shares, built once by `main` ([`Shared`]); each controller's context
//! is made from it with what only that controller needs (`Ctx::new` in each controller).

use k8s_openapi::api::core::v1::ConfigMap;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::holder_key::HolderKeys;
use crate::machinery::index::Index;
use crate::reporting::events::Recorder;
use kube::Client;
use kube::runtime::reflector::{ObjectRef, Store};
use liqo_api::{ClusterConfigSpec, ForeignCluster};
use tokio::sync::watch;

use crate::remote::peer::Peers;

/// Default time before a failed reconcile is tried again.
pub const RETRY: Duration = Duration::from_secs(10);
/// Default cap on the ForeignClusters discovery makes (LAN and WAN together).
pub const MAX_DISCOVERED: usize = 256;

/// An index of ForeignClusters by the cluster ID each stands for (`spec.clusterIdentity`).
pub fn foreign_cluster_ids() -> Index<ForeignCluster> {
    Index::new(|fc| fc.spec.remote_cluster_id().map(str::to_owned))
}

/// The client, our identity and settings as they change, the peers, the ForeignClusters and
/// the Event recorder.
pub struct Shared<P> {
    pub client: Client,
    /// The Liqo namespace.
    pub namespace: String,
    /// Our cluster ID, once known (kept by [`crate::cluster::identity`]).
    pub cluster_id: watch::Receiver<Option<String>>,
    /// The ClusterConfig's spec, once known (kept by [`crate::cluster::config`]).
    pub config: watch::Receiver<Option<ClusterConfigSpec>>,
    /// Calls to other clusters.
    pub peers: Arc<P>,
    /// Every ForeignCluster, from one shared watch.
    pub foreign: Store<ForeignCluster>,
    /// The ForeignClusters by the cluster ID they stand for, fed by the same watch (none where
    /// the store was filled otherwise, as in tests: [`Shared::standing_for`] scans the store).
    pub foreign_ids: Option<Index<ForeignCluster>>,
    /// The remembered choices about discovered peers (ConfigMap `liqo-known-peers`; empty
    /// unless [`Shared::with_memory`] gives its watch).
    pub memory: Store<ConfigMap>,
    /// Events (none in unit tests).
    pub recorder: Option<Recorder>,
    /// Time before a failed reconcile is tried again.
    pub retry: Duration,
    /// At most this many discovered ForeignClusters (see [`crate::discovery::merge::admits`]).
    pub max_discovered: usize,
    /// Our holder key, which proves our cluster ID to the peers that issued us identities.
    pub holder_key: Arc<HolderKeys>,
}

impl<P> Clone for Shared<P> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            namespace: self.namespace.clone(),
            cluster_id: self.cluster_id.clone(),
            config: self.config.clone(),
            peers: self.peers.clone(),
            foreign: self.foreign.clone(),
            foreign_ids: self.foreign_ids.clone(),
            memory: self.memory.clone(),
            recorder: self.recorder.clone(),
            retry: self.retry,
            max_discovered: self.max_discovered,
            holder_key: self.holder_key.clone(),
        }
    }
}

impl<P: Peers> Shared<P> {
    pub fn new(
        client: Client,
        namespace: &str,
        cluster_id: watch::Receiver<Option<String>>,
        config: watch::Receiver<Option<ClusterConfigSpec>>,
        peers: Arc<P>,
        foreign: Store<ForeignCluster>,
    ) -> Self {
        let memory = kube::runtime::reflector::store().0;
        let namespace = namespace.to_owned();
        let holder_key = Arc::new(HolderKeys::new(client.clone(), &namespace));
        Self {
            holder_key,
            client,
            namespace,
            cluster_id,
            config,
            peers,
            foreign,
            foreign_ids: None,
            memory,
            recorder: None,
            retry: RETRY,
            max_discovered: MAX_DISCOVERED,
        }
    }

    /// With `index` of the ForeignClusters by cluster ID ([`foreign_cluster_ids`]), fed by the
    /// store's own watch.
    pub fn with_foreign_ids(mut self, index: Index<ForeignCluster>) -> Self {
        self.foreign_ids = Some(index);
        self
    }

    /// The ForeignClusters that stand for `cluster_id` now: by the index when there is one,
    /// else by a scan of the store.
    pub fn standing_for(&self, cluster_id: &str) -> Vec<Arc<ForeignCluster>> {
        let stands = |fc: &ForeignCluster| fc.spec.remote_cluster_id() == Some(cluster_id);
        match &self.foreign_ids {
            Some(index) => index
                .names(cluster_id)
                .into_iter()
                .filter_map(|name| self.foreign.get(&ObjectRef::new(&name)))
                .filter(|fc| stands(fc))
                .collect(),
            None => self.foreign.state_filter(stands),
        }
    }

    pub fn with_max_discovered(mut self, max: usize) -> Self {
        self.max_discovered = max;
        self
    }

    pub fn with_memory(mut self, memory: Store<ConfigMap>) -> Self {
        self.memory = memory;
        self
    }

    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Our cluster ID, if known yet.
    pub fn own_id(&self) -> Option<String> {
        self.cluster_id.borrow().clone()
    }

    /// The ClusterConfig's spec (its defaults until it is known).
    pub fn settings(&self) -> ClusterConfigSpec {
        self.config.borrow().clone().unwrap_or_default()
    }

    /// Publishes an Event about `object` (best effort; see [`crate::reporting::events`]).
    pub async fn event<K: kube::Resource<DynamicType = ()>>(&self, object: &K, warning: bool, action: &str, reason: &str, note: String) {
        crate::reporting::events::publish(self.recorder.as_ref(), object, warning, action, reason, note).await;
    }
}
