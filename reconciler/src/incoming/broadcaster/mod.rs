//! Broadcasters: for every peer whose PeeringRequest (or FederationRequest) we accepted, one
//! task that keeps `advertisement-<our ID>` in the peer's cluster, using the kubeconfig the
//! peer handed us in the request's Secret.
//!
//! `discoveryConfig.enableAdvertisement: false` makes every broadcaster withdraw its
//! Advertisement (and publish again when it is turned back on), without a restart.
//!
//! Exactly one per peer, even when a PeeringRequest and a FederationRequest of the same peer,
//! or many events, arrive at once: the registry is checked and updated under one lock. Between
//! rounds, a watch by name of our Advertisement there tells a deletion or an edit at once, at a
//! cost of one request per 10 periods ([`follow`]); what we publish is compared with our nodes
//! each period, with no request. A peer that does not let us watch (an earlier release) is
//! asked every period instead. A write is made only when the summary changed or the
//! Advertisement is missing.
//!
//! The kubeconfig Secret is followed by a watch (metadata only, one for all broadcasters): a
//! peer that hands us new credentials (after it forgot us and joined again, say) is served at
//! once with them, not on the next retry. A peer that refuses us is not asked again before the
//! period ends, unless its Secret changes.
//!
//! Each broadcaster says how it fares in the status of the request(s) holding it:
//! `advertisementStatus` (`Created`, `Pending`, `Refused`: the peer no longer accepts the
//! kubeconfig it gave us) and condition `Advertised`, written only when the state or reason
//! changes, and a peer that does not answer only once that lasted [`UNREACHABLE_GRACE_PERIODS`]
//! (see [`news`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret, SecretReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use liqo_api::names::{LABEL_CLUSTER_ID, advertisement_name, ca_data_secret};
use liqo_api::{
    Advertisement, AdvertisementSpec, AdvertisementState, ClusterConfigSpec, FederationRequest, ForeignCluster, PeeringRequest,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub mod follow;

/// A broadcaster's place (0..1) in its retry window, from what it is about.
pub use crate::machinery::work_queue::spread_of;

use crate::cluster::resources::summarize;
use crate::machinery::error::{Error, Result, Step, is_not_found};
use crate::remote::peer::{Peers, RemoteAccess};
use liqo_api::names::CA_DATA_KEY;
use liqo_api::reasons::Reason;

/// Why `source` is a Secret this cluster keeps, which `peer` may not hand us as its kubeconfig.
fn kept(peer: &str, source: &SecretReference) -> Option<&'static str> {
    liqo_api::names::kept_secret(source.name.as_deref().unwrap_or_default(), peer)
}

/// Key of the kubeconfig in the Secret a PeeringRequest references.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// Field manager of the Advertisements we write.
pub const FIELD_MANAGER: &str = "liqo-broadcaster";
/// Longest wait for the peer while withdrawing an Advertisement.
pub const WITHDRAW_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the peer in a round (its client waits longer, for its quiet watch).
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(10);
/// How much longer than its longest watch the broadcaster's client waits for the peer to say
/// anything: a watch the server ends at its time is never cut as a failure first.
pub const QUIET_MARGIN: Duration = Duration::from_secs(30);

/// What a round of a broadcaster tells the request holding it: state, condition reason and
/// message (pure).
pub fn report(round: &Result<()>, advertising: bool) -> (AdvertisementState, Reason, String) {
    match round {
        Ok(()) if advertising => (AdvertisementState::Created, Reason::Published, "our Advertisement is in the peer's cluster".into()),
        Ok(()) => (
            AdvertisementState::Pending,
            Reason::AdvertisementDisabled,
            "enableAdvertisement is false in the ClusterConfig: none is published".into(),
        ),
        Err(e) if e.is_refusal() => {
            (AdvertisementState::Refused, Reason::PeerRefused, format!("the peer refuses the kubeconfig it gave us: {e}"))
        }
        Err(e @ Error::KubeconfigMissing(_)) => {
            (AdvertisementState::Pending, Reason::KubeconfigMissing, format!("{e}: waiting for the peer to put it back"))
        }
        Err(e) => (AdvertisementState::Pending, Reason::RemoteUnreachable, format!("cannot reach the peer's cluster yet: {e}")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signal {
    Run,
    /// The kubeconfig Secret changed: read it again and run a round now.
    Refresh,
    /// Stop, leaving the Advertisement (it is being replaced).
    Stop,
    /// Stop and delete the Advertisement from the peer.
    Withdraw,
}

struct Entry {
    /// The kinds of request holding it, and the namespace each is in.
    holders: BTreeMap<String, String>,
    source: SecretReference,
    versions: Arc<Mutex<Versions>>,
    signal: watch::Sender<Signal>,
    task: JoinHandle<Result<()>>,
}

/// Turns a running broadcaster's signal into [`Signal::Refresh`]; true when it did (pure).
fn refresh(signal: &mut Signal) -> bool {
    match signal {
        Signal::Run | Signal::Refresh => {
            *signal = Signal::Refresh;
            true
        }
        Signal::Stop | Signal::Withdraw => false,
    }
}

/// The kubeconfig Secret's `resourceVersion`: the one the broadcaster's client was made from,
/// and the newest the watch has seen.
#[derive(Debug, Default)]
struct Versions {
    read: Option<String>,
    seen: Option<String>,
}

impl Versions {
    /// The client was made from a Secret older than one seen since (pure).
    fn stale(&self) -> bool {
        self.read.is_some() && self.seen.is_some() && self.read != self.seen
    }
}

/// What the broadcasters share.
pub struct Broadcasters<P: Peers> {
    pub client: Client,
    pub cluster_id: watch::Receiver<Option<String>>,
    /// `discoveryConfig.enableAdvertisement=false` withdraws our Advertisements (at runtime).
    pub config: watch::Receiver<Option<ClusterConfigSpec>>,
    pub nodes: Store<Node>,
    pub peers: Arc<P>,
    pub period: Duration,
    /// Our Liqo namespace, where the CAs we pinned for peers are kept.
    pub namespace: String,
    running: Mutex<HashMap<String, Entry>>,
}

impl<P: Peers> Broadcasters<P> {
    pub fn new(
        client: Client,
        cluster_id: watch::Receiver<Option<String>>,
        config: watch::Receiver<Option<ClusterConfigSpec>>,
        nodes: Store<Node>,
        peers: Arc<P>,
        period: Duration,
        namespace: &str,
    ) -> Arc<Self> {
        let namespace = namespace.to_owned();
        Arc::new(Self { client, cluster_id, config, nodes, peers, period, namespace, running: Mutex::new(HashMap::new()) })
    }

    fn advertising(&self) -> bool {
        self.config.borrow().as_ref().is_none_or(|c| c.discovery_config.enable_advertisement)
    }

    /// Peers with a running broadcaster.
    pub fn peers(&self) -> Vec<String> {
        let mut v: Vec<String> = self.running.lock().expect("not poisoned").keys().cloned().collect();
        v.sort();
        v
    }

    /// Makes sure one broadcaster runs for `peer`, held by `holder` (e.g. `PeeringRequest`) in
    /// `namespace`, reading the peer's kubeconfig from `source`. A changed `source` restarts it.
    pub fn ensure(self: &Arc<Self>, peer: &str, holder: &str, namespace: &str, source: SecretReference) {
        let mut running = self.running.lock().expect("not poisoned");
        if let Some(entry) = running.get_mut(peer) {
            if entry.source == source && !entry.task.is_finished() {
                entry.holders.insert(holder.to_owned(), namespace.to_owned());
                return;
            }
            let _ = entry.signal.send(Signal::Stop);
        }
        let mut holders = running.remove(peer).map(|e| e.holders).unwrap_or_default();
        holders.insert(holder.to_owned(), namespace.to_owned());
        let (signal, rx) = watch::channel(Signal::Run);
        let versions = Arc::new(Mutex::new(Versions::default()));
        let task = tokio::spawn(self.clone().broadcast(peer.to_owned(), source.clone(), versions.clone(), rx));
        tracing::info!(peer, holder, "broadcaster started");
        running.insert(peer.to_owned(), Entry { holders, source, versions, signal, task });
    }

    /// Stops `peer`'s broadcaster if it reads its kubeconfig from `source` (nothing withdrawn:
    /// the request that named `source` is no longer served, and the holder's own request, if
    /// any, starts the peer's broadcaster again from its own kubeconfig).
    pub fn stop_if_from(&self, peer: &str, source: &SecretReference) {
        let mut running = self.running.lock().expect("not poisoned");
        let Some(entry) = running.get(peer).filter(|e| &e.source == source) else { return };
        let _ = entry.signal.send(Signal::Stop);
        running.remove(peer);
        tracing::info!(peer, "broadcaster stopped: its request is no longer served");
    }

    /// The watch saw `version` of Secret `namespace/name` (`None`: deleted): the broadcasters
    /// reading their kubeconfig from it read it again now if theirs is older.
    fn source_changed(&self, namespace: &str, name: &str, version: Option<String>) {
        let running = self.running.lock().expect("not poisoned");
        let using = running
            .iter()
            .filter(|(_, e)| e.source.name.as_deref() == Some(name) && e.source.namespace.as_deref().unwrap_or_default() == namespace);
        for (peer, entry) in using {
            let stale = {
                let mut versions = entry.versions.lock().expect("not poisoned");
                versions.seen = Some(version.clone().unwrap_or_default());
                versions.stale()
            };
            // Never in place of a Stop or Withdraw not yet seen (the channel keeps one value).
            if stale && entry.signal.send_if_modified(refresh) {
                tracing::info!(peer, secret = name, "the peer's kubeconfig Secret changed: reconnecting with it");
            }
        }
    }

    /// A new list of the Secrets (after a watch restart) holds only `present` (namespace,
    /// name): a Secret a broadcaster reads that is not among them was deleted while the watch
    /// was down, which no event tells (found by the chaos soak, seed 7: a deleted kubeconfig
    /// Secret left unrepaired for good).
    fn relisted(&self, present: &std::collections::HashSet<(String, String)>) {
        let gone: Vec<(String, String)> = {
            let running = self.running.lock().expect("not poisoned");
            running
                .values()
                .map(|e| (e.source.namespace.clone().unwrap_or_default(), e.source.name.clone().unwrap_or_default()))
                .filter(|source| !present.contains(source))
                .collect()
        };
        for (namespace, name) in gone {
            self.source_changed(&namespace, &name, None);
        }
    }

    /// Follows the kubeconfig Secrets peers hand us (metadata only, in every namespace: they
    /// are in the peers' tenant namespaces, labelled with the peer's cluster ID) until
    /// `shutdown`, telling each broadcaster when the Secret it reads its kubeconfig from
    /// changes or goes, deletions missed while the watch was down included. A Secret without
    /// the label is read at each start of its broadcaster only.
    pub async fn follow_sources(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        use futures::StreamExt;
        use kube::runtime::WatchStreamExt;
        use kube::runtime::watcher::{self, Event, watcher};
        let api: Api<kube::core::PartialObjectMeta<Secret>> = Api::all(self.client.clone());
        let labelled = watcher::Config::default().labels(LABEL_CLUSTER_ID).any_semantic();
        // Restarted with backoff: without it, a down API server is dialled hundreds of times a
        // second (the chaos soak saw 7,699 failed connects in 10 s).
        let events = watcher(api, labelled).backoff(liqo_api::watch_backoff::WatchBackoff::default());
        // What a list in progress has shown so far.
        let mut listing: Option<std::collections::HashSet<(String, String)>> = None;
        let at = |m: &kube::core::PartialObjectMeta<Secret>| (m.namespace().unwrap_or_default(), m.name_any());
        let follow = events.for_each(|event| {
            match event {
                Ok(Event::Apply(m)) => self.source_changed(&at(&m).0, &m.name_any(), m.resource_version()),
                Ok(Event::InitApply(m)) => {
                    listing.get_or_insert_default().insert(at(&m));
                    self.source_changed(&at(&m).0, &m.name_any(), m.resource_version());
                }
                Ok(Event::Delete(m)) => self.source_changed(&at(&m).0, &m.name_any(), None),
                Ok(Event::Init) => listing = Some(Default::default()),
                Ok(Event::InitDone) => self.relisted(&listing.take().unwrap_or_default()),
                Err(e) => tracing::debug!(error = %e, "watching the kubeconfig Secrets failed; the watch restarts"),
            }
            std::future::ready(())
        });
        tokio::select! {
            _ = follow => {}
            _ = shutdown => {}
        }
    }

    /// Releases `holder`'s hold on `peer`'s broadcaster; the last one stops it and removes our
    /// Advertisement from the peer (`source` serves when no broadcaster runs, after a restart).
    pub async fn release(&self, peer: &str, holder: &str, source: Option<SecretReference>) -> Result<()> {
        let stopping = {
            let mut running = self.running.lock().expect("not poisoned");
            match running.get_mut(peer) {
                Some(entry) => {
                    entry.holders.remove(holder);
                    if entry.holders.is_empty() { running.remove(peer) } else { return Ok(()) }
                }
                None => None,
            }
        };
        match stopping {
            Some(entry) => {
                let _ = entry.signal.send(Signal::Withdraw);
                tracing::info!(peer, "broadcaster stopping");
                let withdrawn = match entry.task.await {
                    Ok(result) => result,
                    Err(e) => Err(Error::unreachable(Step::ApiServer, format!("broadcaster task: {e}"))),
                };
                match (withdrawn, source) {
                    // A peer that unjoins removes its kubeconfig Secret before its request, and
                    // our access and Advertisement there: its API server then refuses our
                    // token, by RBAC (403) while it still holds it in its cache. Not retried
                    // (the chaos soak, seed 7, saw this wait 10 s).
                    (Err(e), Some(source)) if self.kubeconfig_gone(&source).await => {
                        tracing::info!(peer, error = %e, "the peer removed its kubeconfig and our access: nothing of ours is left there to withdraw");
                        Ok(())
                    }
                    (withdrawn, _) => withdrawn,
                }
            }
            None => match source {
                Some(source) => self.withdraw_through(peer, &source, None).await,
                None => Ok(()),
            },
        }
    }

    /// Whether the kubeconfig Secret `source` is gone (false when it cannot be told).
    async fn kubeconfig_gone(&self, source: &SecretReference) -> bool {
        let ns = source.namespace.clone().unwrap_or_default();
        let name = source.name.clone().unwrap_or_default();
        matches!(Api::<Secret>::namespaced(self.client.clone(), &ns).get_opt(&name).await, Ok(None))
    }

    /// A client for `peer`'s API server from the kubeconfig it gave us in `source` (never from
    /// a Secret this cluster keeps for itself or for another peer). When we joined that peer
    /// ourselves, its API server's CA is pinned too: a kubeconfig that points
    /// at a third cluster then fails the TLS handshake instead of receiving our Advertisement.
    async fn peer_client(&self, peer: &str, source: &SecretReference, versions: &Mutex<Versions>) -> Result<(Client, u64)> {
        let ns = source.namespace.clone().unwrap_or_default();
        let name = source.name.clone().unwrap_or_default();
        // The webhook refuses such a request; a request stored before it did is refused here.
        if let Some(what) = kept(peer, source) {
            return Err(Error::invalid("kubeConfigRef", format!("Secret {ns}/{name} is {what}: not used")));
        }
        let secret = Api::<Secret>::namespaced(self.client.clone(), &ns)
            .get_opt(&name)
            .await?
            .ok_or_else(|| Error::KubeconfigMissing(format!("{ns}/{name}")))?;
        versions.lock().expect("not poisoned").read = Some(secret.resource_version().unwrap_or_default());
        let kubeconfig = secret
            .data
            .and_then(|d| d.get(KUBECONFIG_KEY).cloned())
            .and_then(|b| String::from_utf8(b.0).ok())
            .ok_or_else(|| Error::invalid("kubeConfigRef", format!("Secret {ns}/{name} has no {KUBECONFIG_KEY}")))?;
        let ca_pem = self.pinned_ca(peer).await?;
        let quiet = follow::longest_watch(self.period) + QUIET_MARGIN;
        let access = access_of(&kubeconfig, ca_pem.as_deref());
        Ok((self.peers.watching_client(&RemoteAccess { kubeconfig, api_url: None, ca_pem }, quiet).await?, access))
    }

    /// The API server CA we pinned for `peer` when we joined it (Secret `<name>-ca-data` of the
    /// ForeignCluster standing for it, in our namespace), if any.
    async fn pinned_ca(&self, peer: &str) -> Result<Option<String>> {
        let selector = format!("{LABEL_CLUSTER_ID}={peer}");
        let fcs = Api::<ForeignCluster>::all(self.client.clone()).list(&ListParams::default().labels(&selector)).await?;
        let secrets = Api::<Secret>::namespaced(self.client.clone(), &self.namespace);
        for fc in fcs.items.iter().filter(|f| f.spec.remote_cluster_id() == Some(peer)) {
            let Some(secret) = secrets.get_opt(&ca_data_secret(&fc.name_any())).await? else { continue };
            if let Some(pem) = secret.data.and_then(|d| d.get(CA_DATA_KEY).cloned()).and_then(|b| String::from_utf8(b.0).ok()) {
                return Ok(Some(pem));
            }
        }
        Ok(None)
    }

    fn own_id(&self) -> Result<String> {
        self.cluster_id.borrow().clone().ok_or(Error::NotReady("cluster ID"))
    }

    /// What we publish now: the summary of our nodes.
    fn resources(&self) -> liqo_api::ResourceSummary {
        summarize(self.nodes.state().iter().map(|n| &**n))
    }

    /// One round: the Advertisement exists in the peer and carries the current summary. With
    /// `listing` (a watch follows), it is read by a LIST by name, whose version the watch then
    /// starts from without a LIST of its own (see [`follow`]): a broadcaster coming back to a
    /// peer sends it two requests, not a GET, a LIST and a watch. A peer that does not let us
    /// list (an earlier release) is read by a GET in the same round. Returns the version to
    /// watch from, when the round learnt a fresh one.
    async fn publish(&self, client: &Client, listing: bool) -> Result<Option<String>> {
        let own = self.own_id()?;
        match tokio::time::timeout(ROUND_TIMEOUT, self.publish_as(client, own, listing)).await {
            Ok(done) => done.map_err(|e| Error::remote_api(Step::ApiServer, e)),
            Err(_) => Err(Error::unreachable(Step::ApiServer, "timed out publishing our Advertisement")),
        }
    }

    /// Ours as the peer has it now, by a LIST by name (with the list's version) when `listing`
    /// and the peer lets us, else by a GET.
    async fn read_ours(api: &Api<Advertisement>, name: &str, listing: bool) -> kube::Result<(Option<Advertisement>, Option<String>)> {
        if listing {
            match api.list(&ListParams::default().fields(&format!("metadata.name={name}"))).await {
                Ok(listed) => {
                    let version = listed.metadata.resource_version.clone().filter(|v| !v.is_empty());
                    return Ok((listed.items.into_iter().find(|a| a.metadata.name.as_deref() == Some(name)), version));
                }
                // Not granted (403: an earlier release's role has `get` only) or not served as a
                // list (405): read as before. A 404 is the resource not served at all (an API
                // server still installing it after a restart): the round fails and is tried again.
                Err(kube::Error::Api(s)) if matches!(s.code, 403 | 405) => {}
                Err(e) => return Err(e),
            }
        }
        Ok((api.get_opt(name).await?, None))
    }

    async fn publish_as(&self, client: &Client, own: String, listing: bool) -> kube::Result<Option<String>> {
        // Where the peer's kubeconfig says: our tenant namespace there.
        let api: Api<Advertisement> = Api::default_namespaced(client.clone());
        let name = advertisement_name(&own);
        let resources = self.resources();
        let (found, version) = Self::read_ours(&api, &name, listing).await?;
        // A write's own version is as fresh as a list's: the watch starts from it.
        let written = |adv: Advertisement| if listing { adv.metadata.resource_version } else { None };
        match found {
            Some(adv) if adv.spec.cluster_id == own && adv.spec.resources == resources => Ok(version),
            Some(_) => {
                let patch = serde_json::json!({"spec": {"clusterId": own, "resources": resources, "timestamp": Time(k8s_openapi::jiff::Timestamp::now())}});
                Ok(written(api.patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await?))
            }
            None => {
                let adv = Advertisement {
                    metadata: ObjectMeta {
                        name: Some(name),
                        labels: Some([(LABEL_CLUSTER_ID.to_owned(), own.clone())].into()),
                        ..Default::default()
                    },
                    spec: AdvertisementSpec {
                        cluster_id: own,
                        kube_config_ref: None,
                        resources,
                        timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
                    },
                    status: None,
                };
                Ok(written(api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, &adv).await?))
            }
        }
    }

    /// Deletes our Advertisement from the peer. A peer that no longer knows us (401) has revoked
    /// the access it gave us when it unjoined, and removed our Advertisement itself: that is
    /// done too.
    /// Withdraws our Advertisement from `peer` with `client`, or one made from `source`. A
    /// Secret we keep was never used (see [`Self::peer_client`]): nothing was published with
    /// it, nothing to withdraw.
    async fn withdraw_through(&self, peer: &str, source: &SecretReference, client: Option<Client>) -> Result<()> {
        let client = match client {
            Some(c) => c,
            None if kept(peer, source).is_some() => return Ok(()),
            None => match self.peer_client(peer, source, &Mutex::default()).await {
                Ok((c, _)) => c,
                // The peer removed the kubeconfig it gave us with its request: it took back
                // our access, and nothing can be withdrawn with it.
                Err(Error::KubeconfigMissing(what)) => {
                    tracing::info!(peer, secret = %what, "the peer removed its kubeconfig: nothing to withdraw with");
                    return Ok(());
                }
                Err(e) => return Err(e),
            },
        };
        self.withdraw(&client).await
    }

    async fn withdraw(&self, client: &Client) -> Result<()> {
        let name = advertisement_name(&self.own_id()?);
        let api: Api<Advertisement> = Api::default_namespaced(client.clone());
        match tokio::time::timeout(WITHDRAW_TIMEOUT, api.delete(&name, &Default::default())).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) if is_not_found(&e) => Ok(()),
            Ok(Err(e)) => match Error::remote_api(Step::ApiServer, e) {
                // A 401 only: a 403 may be a restarted API server that has not read its RBAC
                // yet, and is retried.
                revoked if revoked.is_revocation() => {
                    tracing::info!(error = %revoked, "the peer revoked our access: nothing of ours is left there to withdraw");
                    Ok(())
                }
                other => Err(other),
            },
            Err(_) => Err(Error::unreachable(Step::ApiServer, "timed out deleting our Advertisement")),
        }
    }

    /// Writes `report` into the status of the requests named `peer` that hold the broadcaster;
    /// true when every write succeeded.
    async fn write_report(&self, peer: &str, report: &(AdvertisementState, Reason, String)) -> bool {
        let holders: Vec<(String, String)> = self
            .running
            .lock()
            .expect("not poisoned")
            .get(peer)
            .map(|e| e.holders.iter().map(|(k, ns)| (k.clone(), ns.clone())).collect())
            .unwrap_or_default();
        let (state, reason, message) = report;
        let condition = serde_json::json!({
            "type": "Advertised",
            "status": if *state == AdvertisementState::Created { "True" } else { "False" },
            "reason": reason.as_str(),
            "message": message,
            "lastTransitionTime": Time(k8s_openapi::jiff::Timestamp::now()),
        });
        let status = serde_json::json!({"advertisementStatus": state, "conditions": [condition]});
        let mut ok = true;
        for (holder, namespace) in holders {
            // The status is this broadcaster's alone: written whole by server-side apply.
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            let apply = |kind: &str| {
                Patch::Apply(serde_json::json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": kind, "status": status.clone()}))
            };
            let result = match holder.as_str() {
                "FederationRequest" => {
                    let api = Api::<FederationRequest>::namespaced(self.client.clone(), &namespace);
                    api.patch_status(peer, &pp, &apply("FederationRequest")).await.map(drop)
                }
                _ => {
                    let api = Api::<PeeringRequest>::namespaced(self.client.clone(), &namespace);
                    api.patch_status(peer, &pp, &apply("PeeringRequest")).await.map(drop)
                }
            };
            if let Err(e) = result {
                tracing::debug!(peer, holder, error = %e, "writing the advertisement status failed");
                ok = false;
            }
        }
        ok
    }

    async fn broadcast(
        self: Arc<Self>,
        peer: String,
        source: SecretReference,
        versions: Arc<Mutex<Versions>>,
        mut signal: watch::Receiver<Signal>,
    ) -> Result<()> {
        let mut r = Rounds { reread: true, published: true, ..Rounds::default() };
        // Our Advertisement there, followed between rounds ([`follow`]).
        let mut follow = follow::Following::default();
        // A change of the ClusterConfig (advertisement turned on or off) is acted on at once.
        let mut config = self.config.clone();
        // This broadcaster's place in the retry window.
        let spread = spread_of(&peer);
        let (mut due, mut last): (bool, Result<()>) = (true, Ok(()));
        // When the last round ran: while no watch is open, the next is due `retry_after` it,
        // whether or not a watch is being opened again meanwhile.
        let mut round_at = tokio::time::Instant::now();
        loop {
            let advertising = self.advertising();
            if due {
                round_at = tokio::time::Instant::now();
                // A round after which a watch opens at once reads by a LIST that watch starts
                // from.
                let listing = follow.will_open_after_a_round(r.generation);
                let round = self.round(&peer, &source, &versions, &mut r, &mut follow, (advertising, listing, spread)).await;
                self.settle(&peer, &mut r, &round, advertising).await;
                if round.is_ok() && advertising {
                    follow.published = true;
                    // The watch of an older client goes (a new kubeconfig): one opens below.
                    if !follow.watching(r.generation) {
                        follow.close();
                    }
                } else {
                    follow.close();
                }
                last = round;
            }
            if let (true, Some(client), Ok(own)) = (advertising && last.is_ok() && follow.may_open(), &r.client, self.own_id()) {
                // From the version the last round read ours at (kept until the watch opens, at
                // most until the next round; one compacted meanwhile is told as 410: a round).
                let to = follow::Target { client, generation: r.generation, access: r.access, own: &own, period: self.period, spread };
                follow.open(&to, r.watch_from.take());
            }
            let watching = follow.watching(r.generation);
            let next_round = retry_after(&last, self.period, r.failures, spread).saturating_sub(round_at.elapsed());
            let wait = match follow.until_open() {
                _ if watching => self.period,
                Some(open) => open.min(next_round),
                None => next_round,
            };
            let woke = tokio::select! {
                _ = tokio::time::sleep(wait) => Woke::Time,
                (told, lasted, lasts) = follow.next() => Woke::Watch(Box::new(told), lasted, lasts),
                // (Any change wakes it: an unrelated one costs one round early.)
                Ok(()) = config.changed() => Woke::Config,
                changed = signal.changed() => Woke::Signal(changed.map(|_| *signal.borrow()).unwrap_or(Signal::Stop)),
            };
            due = match woke {
                // Watching, a period costs no request: a round only when what we publish changed.
                Woke::Time if watching => Some(self.resources()) != r.resources,
                // Not watching: a round once it is due (a watch that keeps failing to open
                // never holds the rounds back); a watch to open again is opened above.
                Woke::Time => round_at.elapsed() >= retry_after(&last, self.period, r.failures, spread),
                Woke::Watch(told, lasted, lasts) => self.told(&peer, &r, &mut follow, *told, lasted, lasts, spread),
                Woke::Config | Woke::Signal(Signal::Run) => true,
                Woke::Signal(Signal::Refresh) => {
                    r.reread = true;
                    true
                }
                Woke::Signal(Signal::Stop) => return Ok(()),
                Woke::Signal(Signal::Withdraw) => return self.withdraw_through(&peer, &source, r.client).await,
            };
        }
    }

    /// Acts on what the watch `told` (see [`follow::judge`]); true when a round is due.
    #[allow(clippy::too_many_arguments)]
    fn told(
        &self,
        peer: &str,
        r: &Rounds,
        follow: &mut follow::Following,
        told: Option<follow::Told>,
        lasted: Duration,
        lasts: Duration,
        spread: f64,
    ) -> bool {
        let Ok(own) = self.own_id() else { return true };
        let resources = r.resources.clone().unwrap_or_else(|| self.resources());
        match follow::judge(told, &own, &resources, lasted, lasts) {
            follow::Next::Keep => false,
            follow::Next::Round { rewatch } => {
                tracing::debug!(peer, rewatch, "our Advertisement at the peer changed: publishing it again");
                if rewatch {
                    follow.expired(self.period, spread);
                }
                true
            }
            follow::Next::Reopen => {
                follow.ended();
                false
            }
            follow::Next::Broken(why) => {
                tracing::debug!(peer, why, "watching our Advertisement at the peer broke; opening it again in turn");
                follow.broke(self.period, spread);
                false
            }
            follow::Next::Unwatchable(why) => {
                tracing::info!(peer, why, "the peer does not let us watch our Advertisement: asking every period meanwhile");
                follow.refused(self.period, spread);
                true
            }
        }
    }

    /// One round: a client for the peer (made again when its kubeconfig changed), then our
    /// Advertisement published there, or withdrawn while advertisement is off.
    #[allow(clippy::too_many_arguments)]
    async fn round(
        &self,
        peer: &str,
        source: &SecretReference,
        versions: &Mutex<Versions>,
        r: &mut Rounds,
        follow: &mut follow::Following,
        (advertising, listing, spread): (bool, bool, f64),
    ) -> Result<()> {
        r.watch_from = None;
        if r.reread || r.missing.is_some() || versions.lock().expect("not poisoned").stale() {
            match self.peer_client(peer, source, versions).await {
                Ok((c, access)) => {
                    (r.client, r.missing, r.access) = (Some(c), None, access);
                    r.generation += 1;
                }
                Err(e) if r.client.is_none() => return Err(e),
                Err(Error::KubeconfigMissing(what)) => r.missing = Some(what),
                Err(e) => tracing::debug!(peer, error = %e, "reading the kubeconfig again failed; keeping the client we have"),
            }
        }
        let Some(c) = r.client.clone() else { return Err(Error::NotReady("the peer's kubeconfig")) };
        if advertising {
            let resources = self.resources();
            // What we publish unchanged since a watch told a version of ours: resumed from it.
            let seen = follow.seen(r.access).filter(|_| listing && r.published && r.resources.as_ref() == Some(&resources));
            if let Some(version) = seen {
                let own = self.own_id()?;
                let to = follow::Target { client: &c, generation: r.generation, access: r.access, own: &own, period: self.period, spread };
                match tokio::time::timeout(ROUND_TIMEOUT, follow.resume(&to, &version)).await {
                    Ok(Ok(())) => return Ok(()),
                    // Answered, but no watch from there (not granted, not served): a round as before.
                    Ok(Err(kube::Error::Api(status))) => {
                        tracing::debug!(peer, code = status.code, "resuming our watch was refused; listing")
                    }
                    Ok(Err(e)) => return Err(Error::remote_api(Step::ApiServer, e)),
                    Err(_) => return Err(Error::unreachable(Step::ApiServer, "timed out resuming the watch of our Advertisement")),
                }
            }
            r.watch_from = self.publish(&c, listing).await?;
            r.resources = Some(resources);
            Ok(())
        } else if r.published {
            tracing::info!(peer, "advertisement disabled in the ClusterConfig; withdrawing ours");
            r.resources = None;
            self.withdraw(&c).await
        } else {
            Ok(())
        }
    }

    /// After a round: the requests holding the broadcaster told how it went (when that
    /// changed), the failure logged, the count of failures in a row kept.
    async fn settle(&self, peer: &str, r: &mut Rounds, round: &Result<()>, advertising: bool) {
        if round.is_ok() {
            r.published = advertising;
        }
        let now_reported = match (round, &r.missing) {
            (Ok(()), Some(what)) => report(&Err(Error::KubeconfigMissing(what.clone())), advertising),
            _ => report(round, advertising),
        };
        let passing = first_forbidden(round, &mut r.forbidden);
        let now = tokio::time::Instant::now();
        r.failing_since = if round.is_ok() { None } else { Some(r.failing_since.unwrap_or(now)) };
        let failing_for = r.failing_since.map(|since| now - since);
        if !passing && news(r.reported.as_ref(), &now_reported, failing_for, self.period) && self.write_report(peer, &now_reported).await {
            r.reported = Some(now_reported);
        }
        r.reread = round.is_err();
        r.failures = if round.is_ok() { 0 } else { r.failures.saturating_add(1) };
        match round {
            Err(e) if passing => tracing::debug!(peer, error = %e, "the peer forbids us (403); trying again before telling it"),
            Err(e) => tracing::warn!(peer, error = %e, cause = e.label(), "advertising to the peer failed; retrying"),
            Ok(()) => {}
        }
    }
}

/// What a broadcaster keeps from one round to the next.
#[derive(Default)]
struct Rounds {
    client: Option<Client>,
    /// Counts the clients made (a watch opened with an older one is closed).
    generation: u64,
    /// What the client was made from ([`access_of`]).
    access: u64,
    /// Read the kubeconfig again before the next round (after a failure, or a changed
    /// Secret); the client we have stays until a new one is made, so that a Secret deleted
    /// with the request still leaves us the means to withdraw our Advertisement.
    reread: bool,
    /// Whether an Advertisement of ours may be in the peer (unknown at start: assume so).
    published: bool,
    /// What we last published there.
    resources: Option<liqo_api::ResourceSummary>,
    /// What the holding requests' status says, once written.
    reported: Option<Reported>,
    /// The kubeconfig Secret, gone while we still hold a client made from it: told in the
    /// request's status (so the peer puts it back) while that client keeps serving.
    missing: Option<String>,
    /// Whether the last round was refused with a 403 (see [`first_forbidden`]).
    forbidden: bool,
    /// Failed rounds in a row.
    failures: u32,
    /// Since when the rounds fail (the first of the failures in a row).
    failing_since: Option<tokio::time::Instant>,
    /// The version the last round read ours at (a LIST's, or a write's), for the watch opened
    /// after it.
    watch_from: Option<String>,
}

/// What woke a broadcaster between rounds.
enum Woke {
    Time,
    Watch(Box<Option<follow::Told>>, Duration, Duration),
    Config,
    Signal(Signal),
}

/// Whether `round` is a 403 after a round that was not (pure; `before` becomes whether it is
/// one). Such a 403 is not told in the request's status yet, only once the next try (a retry
/// interval later) is refused too: the peer's API server may not have read the binding made
/// for us yet (a busy one, or one just restarted), and telling each such moment flipped the
/// request to `Refused` and back, two status writes on the peer and a false alarm.
fn first_forbidden(round: &Result<()>, before: &mut bool) -> bool {
    let now = matches!(round, Err(e) if e.answered() == Some(403));
    let first = now && !*before;
    *before = now;
    first
}

/// What a client to a peer is made from, as one number (pure): a client made again from the
/// same kubeconfig and CA reaches the same API server, where a version seen stays valid.
fn access_of(kubeconfig: &str, ca_pem: Option<&str>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (kubeconfig, ca_pem).hash(&mut h);
    h.finish()
}

/// Periods a peer may not answer before the requests holding its broadcaster say so: as many
/// as the misses that make a LAN peer gone.
pub const UNREACHABLE_GRACE_PERIODS: u32 = 3;

/// Whether the report `now` is news to the requests' status, which says `written` (pure):
/// another state or reason is, another message alone is not (the text of an error that varies
/// from try to try). Nor is the peer not answering, while the status says our Advertisement is
/// there and the rounds have failed for less than [`UNREACHABLE_GRACE_PERIODS`] periods
/// (`failing_for`): the Advertisement stays in the peer's cluster while it is down, the
/// ForeignCluster's `RemoteReachable` tells the outage within a period, and a mass outage and
/// its return then cost the hub no write of a request's status at all (two per peer before).
fn news(written: Option<&Reported>, now: &Reported, failing_for: Option<Duration>, period: Duration) -> bool {
    let Some((state, reason, _)) = written else { return true };
    if (*state, *reason) == (now.0, now.1) {
        return false;
    }
    let brief = failing_for.is_some_and(|f| f < period * UNREACHABLE_GRACE_PERIODS);
    !(*state == AdvertisementState::Created && now.1 == Reason::RemoteUnreachable && brief)
}

/// What the requests holding a broadcaster were told: state, reason, message.
type Reported = (AdvertisementState, Reason, String);

/// When a broadcaster runs its next round after `round`, its `failures`-th failure in a row
/// (pure): a period after a success, and after a 401 (new credentials wake it at once: the
/// peer is not asked in vain meanwhile); sooner after any other failure, by [`backoff`]. A 403
/// among them: the peer's API server may not have read the binding made for us yet (a busy
/// one, or one just restarted), and waiting a period for that made joins at 3,000 peers take
/// 40 % longer. `spread`: this broadcaster's place in the retry window ([`spread_of`]).
fn retry_after(round: &Result<()>, period: Duration, failures: u32, spread: f64) -> Duration {
    match round {
        Ok(()) => period,
        Err(e) if e.is_revocation() => period,
        Err(_) => backoff(period, failures, spread),
    }
}

/// The wait after the `failures`-th failure in a row (1: the first) of a round that runs every
/// `period` (pure): the retry interval, doubled with each failure up to the period, and of
/// that its upper half, `spread` (0..1) of the way in. A hub back from an outage otherwise
/// met all of its peers' broadcasters within the same 10 s (the fleet saw 10,000 back at once
/// hold its status writes to a third).
pub fn backoff(period: Duration, failures: u32, spread: f64) -> Duration {
    let doubled = crate::context::RETRY.saturating_mul(1 << failures.saturating_sub(1).min(16));
    let wait = period.min(doubled);
    wait.mul_f64(0.5 + 0.5 * spread.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brief_outage_and_another_error_text_are_no_news_to_the_request() {
        let period = Duration::from_secs(30);
        let said = |state, reason, message: &str| (state, reason, message.to_owned());
        let created = said(AdvertisementState::Created, Reason::Published, "ours is there");
        let down = said(AdvertisementState::Pending, Reason::RemoteUnreachable, "connection refused");
        let down_again = said(AdvertisementState::Pending, Reason::RemoteUnreachable, "timed out");
        let refused = said(AdvertisementState::Refused, Reason::PeerRefused, "401");
        assert!(news(None, &down, Some(Duration::ZERO), period), "nothing written yet: the first report is news");
        assert!(!news(Some(&created), &created, None, period));
        assert!(!news(Some(&down), &down_again, Some(period * 5), period), "the same reason in other words");
        // A peer not answering, while ours was there: told after the grace only.
        assert!(!news(Some(&created), &down, Some(Duration::ZERO), period));
        assert!(!news(Some(&created), &down, Some(period * UNREACHABLE_GRACE_PERIODS - Duration::from_millis(1)), period));
        assert!(news(Some(&created), &down, Some(period * UNREACHABLE_GRACE_PERIODS), period));
        // Back before the grace ended: nothing was written either way.
        assert!(!news(Some(&created), &created, None, period));
        // Any other change is told at once.
        assert!(news(Some(&created), &refused, Some(Duration::ZERO), period), "a refusal is not an outage");
        assert!(news(Some(&down), &created, None, period), "back after the outage was told");
        let missing = said(AdvertisementState::Pending, Reason::KubeconfigMissing, "gone");
        assert!(news(Some(&created), &missing, Some(Duration::ZERO), period));
    }

    #[test]
    fn the_request_is_told_how_the_broadcaster_fares() {
        assert_eq!(report(&Ok(()), true).0, AdvertisementState::Created);
        assert_eq!(report(&Ok(()), false).1, Reason::AdvertisementDisabled);
        let refused = Error::remote_api(
            Step::ApiServer,
            kube::Error::Api(Box::new(kube::core::Status::failure("token revoked", "Unauthorized").with_code(401))),
        );
        let (state, reason, message) = report(&Err(refused), true);
        assert_eq!((state, reason), (AdvertisementState::Refused, Reason::PeerRefused));
        assert!(message.contains("HTTP 401") && message.contains("token revoked"), "{message}");
        // Our own API server refusing us is not the peer refusing us.
        let local = Error::Kube(kube::Error::Api(Box::new(kube::core::Status::failure("no", "Forbidden").with_code(403))));
        assert_eq!(report(&Err(local), true).0, AdvertisementState::Pending);
        let down = Error::unreachable(Step::ApiServer, "connection refused");
        assert_eq!(report(&Err(down), true).0, AdvertisementState::Pending);
    }

    #[test]
    fn a_peer_that_no_longer_knows_us_waits_a_period_a_forbidding_or_unreachable_one_is_retried_sooner() {
        let period = Duration::from_secs(300);
        let refused = Error::remote_api(
            Step::ApiServer,
            kube::Error::Api(Box::new(kube::core::Status::failure("token revoked", "Unauthorized").with_code(401))),
        );
        assert_eq!(retry_after(&Ok(()), period, 0, 1.0), period);
        assert_eq!(retry_after(&Err(refused), period, 1, 1.0), period);
        let forbidden = Error::remote_api(
            Step::ApiServer,
            kube::Error::Api(Box::new(kube::core::Status::failure("RBAC not read yet", "Forbidden").with_code(403))),
        );
        assert_eq!(retry_after(&Err(forbidden), period, 1, 1.0), crate::context::RETRY, "a 403 may pass soon");
        assert_eq!(retry_after(&Err(Error::unreachable(Step::ApiServer, "refused")), period, 1, 1.0), crate::context::RETRY);
    }

    #[test]
    fn failures_in_a_row_back_off_to_the_period_each_broadcaster_at_its_place() {
        let (period, retry) = (Duration::from_secs(30), crate::context::RETRY);
        let waits: Vec<Duration> = (1..=5).map(|n| backoff(period, n, 1.0)).collect();
        assert_eq!(waits, [retry, retry * 2, period, period, period], "doubled up to the period");
        assert_eq!(backoff(period, 1, 0.0), retry / 2, "the window's upper half");
        assert_eq!(backoff(period, u32::MAX, 0.5), period.mul_f64(0.75), "no overflow");
        assert_eq!(backoff(Duration::from_secs(2), 3, 1.0), Duration::from_secs(2), "a short period caps it");
        // 1,000 peers' places cover the window: none of its tenths holds more than twice its share.
        let mut tenths = [0u32; 10];
        for i in 0..1000 {
            let s = spread_of(&format!("peer-{i}"));
            assert!((0.0..1.0).contains(&s));
            tenths[(s * 10.0) as usize] += 1;
        }
        assert!(tenths.iter().all(|&n| (50..=200).contains(&n)), "{tenths:?}");
        assert_eq!(spread_of("a"), spread_of("a"), "each keeps its place");
    }

    #[test]
    fn a_403_is_told_once_it_lasts_past_one_retry() {
        let code = |c: u16| {
            Err(Error::remote_api(Step::ApiServer, kube::Error::Api(Box::new(kube::core::Status::failure("no", "x").with_code(c)))))
        };
        let mut before = false;
        assert!(first_forbidden(&code(403), &mut before), "the first 403 waits for the next try");
        assert!(!first_forbidden(&code(403), &mut before), "the second in a row is told");
        assert!(!first_forbidden(&Ok(()), &mut before));
        assert!(first_forbidden(&code(403), &mut before), "a 403 after a success waits again");
        assert!(!first_forbidden(&code(401), &mut before), "a 401 is told at once");
        assert!(!before, "and is not a 403");
        assert!(!first_forbidden(&Err(Error::unreachable(Step::ApiServer, "refused")), &mut before));
    }

    #[test]
    fn a_refresh_never_replaces_a_stop_or_a_withdrawal() {
        for (before, after, sent) in [
            (Signal::Run, Signal::Refresh, true),
            (Signal::Refresh, Signal::Refresh, true),
            (Signal::Stop, Signal::Stop, false),
            (Signal::Withdraw, Signal::Withdraw, false),
        ] {
            let mut s = before;
            assert_eq!(refresh(&mut s), sent, "{before:?}");
            assert_eq!(s, after, "{before:?}");
        }
    }

    #[test]
    fn a_client_is_stale_once_a_newer_secret_is_seen() {
        let v = |read: Option<&str>, seen: Option<&str>| Versions { read: read.map(Into::into), seen: seen.map(Into::into) };
        assert!(!v(None, Some("2")).stale(), "not read yet: the first read takes the newest");
        assert!(!v(Some("1"), None).stale(), "nothing seen yet");
        assert!(!v(Some("2"), Some("2")).stale());
        assert!(v(Some("1"), Some("2")).stale());
        assert!(v(Some("1"), Some("")).stale(), "deleted since");
    }
}
