//! What the ForeignCluster controller's parts share: its [`Ctx`] (the shared state, the
//! stores only it reads, what it remembers between rounds), its [`Timing`], and the small
//! writes each part makes.

use crate::context::Shared;
use crate::machinery::error::{Result, is_conflict};
use crate::machinery::slim_store::{SecretData, SlimStore, namespaced_key};
use crate::machinery::writes;
use crate::remote::auth::service::{ApiServer, kubeconfig};
use crate::remote::peer::{Peers, RemoteAccess};
use crate::tenancy::access::advertisement_access;
use crate::tenancy::grant;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, watcher};
use kube::{Client, Resource, ResourceExt};
use liqo_api::names::{FINALIZER_PEERED, LABEL_CLUSTER_ID, advertisement_name, peering_kubeconfig_secret, tenant_namespace};
use liqo_api::{ForeignCluster, HandedKubeconfig, PeeringRequest};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::decide::{self, OurRequest};
use super::names::{CA_KEY, FIELD_MANAGER, KUBECONFIG_KEY, MANAGED_BY, TOKEN_KEY, identity_secret, token_secret};
use super::report::{self, Report};
use super::way;

/// Default `--max-concurrent-reconciles`: a cold start or the end of an outage with
/// thousands of peers checks them this many at a time (a client, a TLS handshake and a
/// request each, about 0.1 MiB while it lasts), which bounds the memory it takes and what of
/// it the allocator keeps after; not the peers checked per health period (each check takes
/// milliseconds). Measured by the fleet at 1,000 peers: 256 at once left the reconciler at
/// 69 MiB after joining (peak 87), 64 at 55 (peak 60). The worst case is peers that do not
/// answer at all (a black hole: each check waits the 10 s connect timeout): 64 at once check
/// 1,000 of them in 2.6 minutes. docs/scaling.md.
pub const DEFAULT_MAX_CONCURRENT_RECONCILES: u16 = 64;

/// Turns apart for reconciles connected to again after their connection went stale (pure):
/// an eighth of the turns, at least one.
pub fn express_turns(turns: usize) -> usize {
    (turns / 8).max(1)
}

/// How often things happen.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Health check of a joined peer.
    pub health: Duration,
    /// Retry after a failure.
    pub retry: Duration,
    /// Next attempt after the remote refused our token (the user must act); the longest wait
    /// before offering again to a remote that refuses our PeeringRequest; how long an
    /// anonymous offer waits for the remote's Advertisement before it is made again.
    pub refused: Duration,
    /// How long unjoin of a deleted ForeignCluster waits for an unreachable remote.
    pub unjoin_grace: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            health: Duration::from_secs(30),
            retry: Duration::from_secs(10),
            refused: Duration::from_secs(300),
            unjoin_grace: Duration::from_secs(120),
        }
    }
}

/// What reconciles share: the [`Shared`] state and what only this controller needs.
pub struct Ctx<P: Peers> {
    pub shared: Shared<P>,
    /// How the peer reaches our API server (for the kubeconfig we hand it).
    pub api_server: ApiServer,
    /// SHA-256 of `api_server`'s CA (of its first certificate), read once: each health check
    /// compares it with what the kubeconfig we keep on the peer records.
    api_ca_fingerprint: String,
    /// Our auth service URL, written into our PeeringRequests (fixed, or found at each use).
    pub auth_url: crate::cluster::addresses::Live<Option<String>>,
    /// The data of the Secrets of our namespace labelled [`MANAGED_BY`].
    pub secrets: SlimStore<SecretData>,
    /// Which Advertisements exist.
    pub advertisements: SlimStore<()>,
    pub timing: Timing,
    /// Lifetime asked for the tokens we hand peers.
    pub token_lifetime: Duration,
    /// Taken by each reconcile for as long as it runs, as many as ForeignClusters reconciled
    /// at once at most (`None`: no bound; [`Ctx::with_max_concurrent_reconciles`]): given in
    /// the order they were asked for, so every ForeignCluster waits its turn (see [`run`]).
    pub(super) turns: Option<Arc<tokio::sync::Semaphore>>,
    /// How many turns there are.
    max_turns: usize,
    /// Turns apart for reconciles whose connection went stale waiting for a turn and was made
    /// again: they do not queue behind the others twice (`None` with no bound on turns).
    pub(super) express: Option<Arc<tokio::sync::Semaphore>>,
    /// Connects to a joined peer's API server before its reconcile takes a turn (`None`: the
    /// check connects in its turn, as a reconcile called directly does):
    /// [`crate::machinery::connect_first`].
    pub(super) connector: Option<crate::machinery::connect_first::Connector>,
    /// Approved fingerprints the auth service proved, by ForeignCluster name (with its URL
    /// and when): read again after [`PROOF_PERIODS`] health periods or a failed call, not
    /// every round.
    pub(super) proven: Mutex<HashMap<String, (String, String, std::time::Instant)>>,
    /// When each ForeignCluster's anonymous offer was last made again for being overdue.
    pub(super) refreshed: Mutex<HashMap<String, std::time::Instant>>,
    /// The token lifetime each remote's `/ids` told (by remote cluster ID; `None`: it told none),
    /// and until when that answer stands (see [`Ctx::remote_lifetime`]).
    pub(super) remote_lifetimes: Mutex<HashMap<String, (std::time::Instant, Option<Duration>)>>,
    /// What each peer's kubeconfig says, read once per kubeconfig (not parsed each round).
    pub kubeconfigs: crate::remote::facts::Memo,
    /// ForeignClusters whose remote this process put our request on, until a status read
    /// records it (see [`Ctx::offered`]): a reconcile woken (by the peer's Advertisement, say)
    /// before the store shows the status written after the offer does not make it again
    /// (found by the fleet: every join offered twice).
    /// With what each offer handed the remote: a round on a status of before the offer keeps
    /// that in the status it writes (or the record would be lost, and the next round would take
    /// the peering for one of an earlier release).
    pub(super) offers: Mutex<HashMap<String, HandedKubeconfig>>,
    /// ForeignClusters whose unjoin deleted our request on the remote and found it
    /// terminating: the next rounds only look again.
    pub(super) withdrawing: Mutex<HashSet<String>>,
    /// Where a watch of ours asks for a ForeignCluster to be reconciled (our request on the
    /// remote gone): set by [`run`]; without it (a reconcile called directly) nothing is watched.
    pub(super) wakes: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<String>>,
    /// ForeignClusters with such a watch running.
    pub(super) awaiting_gone: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Our settled status writes whose watch events [`run`] does not reconcile again.
    pub(super) own_writes: crate::machinery::own_writes::OwnWrites,
    /// Health calls and join failures are counted here.
    pub metrics: Arc<crate::reporting::metrics::Metrics>,
}

/// Seconds after which the remote closes our watch of a request being deleted (it resumes at
/// once): within the remote client's read timeout, so a quiet watch is never cut as a failure.
pub const WATCH_SECONDS: u32 = 5;

/// Health periods for which a peer paired by fingerprint is not asked to prove it again (one
/// TLS handshake with its auth service each time; every call to it verifies the fingerprint on
/// its own connection anyway): a new CA there shows as `FingerprintMismatch` within these.
pub const PROOF_PERIODS: u32 = 10;

/// Default lifetime of the tokens we hand peers (a year).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

impl<P: Peers> Ctx<P> {
    /// A context with the default [`Timing`] and [`TOKEN_LIFETIME`].
    pub fn new(
        shared: Shared<P>,
        api_server: ApiServer,
        auth_url: Option<String>,
        secrets: SlimStore<SecretData>,
        advertisements: SlimStore<()>,
    ) -> Self {
        Self {
            shared,
            api_ca_fingerprint: liqo_certs::inspect::fingerprint_sha256(&api_server.ca_pem).unwrap_or_default(),
            api_server,
            auth_url: crate::cluster::addresses::Live::Fixed(auth_url),
            secrets,
            advertisements,
            timing: Timing::default(),
            token_lifetime: TOKEN_LIFETIME,
            turns: Some(Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_CONCURRENT_RECONCILES.into()))),
            max_turns: DEFAULT_MAX_CONCURRENT_RECONCILES.into(),
            express: Some(Arc::new(tokio::sync::Semaphore::new(express_turns(DEFAULT_MAX_CONCURRENT_RECONCILES.into())))),
            connector: None,
            proven: Mutex::default(),
            refreshed: Mutex::default(),
            remote_lifetimes: Mutex::default(),
            kubeconfigs: Default::default(),
            offers: Mutex::default(),
            withdrawing: Mutex::default(),
            wakes: std::sync::OnceLock::new(),
            awaiting_gone: Arc::default(),
            own_writes: Default::default(),
            metrics: Arc::default(),
        }
    }

    /// The API server and auth URLs handed to peers read from the addresses found, at each use.
    pub fn with_addresses(mut self, found: tokio::sync::watch::Receiver<crate::cluster::addresses::Found>) -> Self {
        self.api_server.url = crate::cluster::addresses::Live::api_url(found.clone());
        self.auth_url = crate::cluster::addresses::Live::auth_url(found);
        self
    }

    pub fn with_metrics(mut self, metrics: Arc<crate::reporting::metrics::Metrics>) -> Self {
        self.own_writes = crate::machinery::own_writes::OwnWrites::counting(metrics.status_echoes_skipped.clone());
        self.metrics = metrics;
        self
    }

    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    pub fn with_token_lifetime(mut self, lifetime: Duration) -> Self {
        self.token_lifetime = lifetime;
        self
    }

    pub fn with_max_concurrent_reconciles(mut self, max: u16) -> Self {
        self.turns = (max > 0).then(|| Arc::new(tokio::sync::Semaphore::new(max.into())));
        self.express = (max > 0).then(|| Arc::new(tokio::sync::Semaphore::new(express_turns(max.into()))));
        self.max_turns = max.into();
        self
    }

    /// How many reconciles may run at once (`None`: no bound, as when turns are not bounded):
    /// each turn, and each connection made first before one. The others due wait as names in
    /// the work queue (`crate::machinery::work_queue::Bound`), not as tasks.
    pub fn running_bound(&self) -> Option<usize> {
        let connects = self.connector.as_ref().map_or(0, |c| c.in_flight());
        (self.turns.is_some()).then_some(self.max_turns + express_turns(self.max_turns) + connects)
    }

    /// Connects to joined peers' API servers first, `in_flight` at once (0: not at all), each
    /// given `wait` to take the connection ([`crate::machinery::connect_first`]).
    pub fn with_connect_first(mut self, in_flight: usize, wait: Duration) -> Self {
        self.connector = (in_flight > 0).then(|| crate::machinery::connect_first::Connector::new(in_flight, wait));
        self
    }

    /// The API server URL to connect to before `fc`'s turn, and the access its check uses: only
    /// for a peer joined before whose round needs nothing more than its health check (its CA
    /// pinned and, on the auth way, our identity stored). The access is the one the round
    /// makes (`join::pipeline`) from the same Secrets.
    pub(super) fn connect_first_target(&self, fc: &ForeignCluster) -> Option<(String, RemoteAccess)> {
        let joined_before = fc.finalizers().iter().any(|f| f == FINALIZER_PEERED);
        if !fc.spec.join() || fc.metadata.deletion_timestamp.is_some() || !joined_before {
            return None;
        }
        let name = fc.name_any();
        let ca = self.secret_value(&liqo_api::names::ca_data_secret(&name), CA_KEY)?;
        let kubeconfig = match way::Way::of(fc)? {
            way::Way::AuthService { .. } => self.secret_value(&identity_secret(&name), KUBECONFIG_KEY)?,
            way::Way::Anonymous { .. } => crate::remote::peer::ANONYMOUS_KUBECONFIG.to_owned(),
        };
        let url = match fc.spec.api_url.as_deref().filter(|u| !u.is_empty()) {
            Some(url) => url.to_owned(),
            None => self.kubeconfigs.of(&kubeconfig).server.clone()?,
        };
        Some((url, RemoteAccess { kubeconfig, api_url: fc.spec.api_url.clone(), ca_pem: Some(ca) }))
    }

    /// How long a health check's own round trip (its TLS handshake and its call, over the
    /// connection made first or one made in its turn) may take before the peer is reported as
    /// not answering: `--connect-wait-seconds`, so that a turn never waits on a silent peer much
    /// longer than a healthy one needs (a healthy peer answers within milliseconds).
    pub(super) fn check_deadline(&self) -> Duration {
        self.connector.as_ref().map_or(crate::machinery::connect_first::CONNECT_WAIT, |c| c.wait())
    }

    /// What connecting first to `fc`'s API server finds, and the permit to hold until its turn:
    /// the check itself when a connection is kept from the last one
    /// ([`crate::remote::kept`]), else a connection made now.
    pub(super) async fn connect_first(
        &self,
        fc: &ForeignCluster,
    ) -> (crate::machinery::connect_first::Gate, Option<tokio::sync::OwnedSemaphorePermit>) {
        use crate::machinery::connect_first::{Early, Gate, Silent};
        use crate::remote::kept::Outcome;
        let (Some(connector), Some((url, access))) = (&self.connector, self.connect_first_target(fc)) else {
            return (Gate::Untried, None);
        };
        let permit = connector.permit().await;
        let name = fc.name_any();
        let started = std::time::Instant::now();
        // The checks' own states are boxed as they start: a reconcile that waits for a
        // connection (a thousand may, each a task) holds a few hundred bytes, not the 5 KiB of
        // a TLS handshake's state machine it may never reach.
        let gate = match Box::pin(self.shared.peers.check_kept(&name, &access, connector.wait())).await {
            Outcome::Answered { answer, path, key } => {
                let at = std::time::Instant::now();
                Some(Gate::Answered(Box::new(Early {
                    status: answer.status,
                    body: answer.body,
                    path,
                    access: key,
                    at,
                    took: at - started,
                    fresh: false,
                })))
            }
            Outcome::Silent(_) => {
                let address = crate::machinery::connect_first::address(&url);
                Some(Gate::Silent(Silent { address, waited: connector.wait(), closed: false, on_kept: true }))
            }
            Outcome::NotKept | Outcome::Broken(_) => None,
        };
        let (gate, permit) = match gate {
            Some(gate) => (gate, permit),
            None => {
                let (gate, permit) = connector.connect_with(permit, &url).await;
                (Box::pin(self.check_first(fc, &url, &access, gate, connector.wait())).await, permit)
            }
        };
        self.metrics.connected_first(&gate);
        (gate, Some(permit))
    }

    /// The health check made over the connection `gate` holds, just made first, within `wait`
    /// and outside the turns ([`crate::remote::peer::Peers::check_first`]): a peer that took the
    /// connection and then went silent (a black hole opened meanwhile) holds no turn for it, and
    /// the turn reads the answer. Any other gate, or a check that cannot be made here, is left
    /// for the turn as it is.
    async fn check_first(
        &self,
        fc: &ForeignCluster,
        url: &str,
        access: &RemoteAccess,
        gate: crate::machinery::connect_first::Gate,
        wait: Duration,
    ) -> crate::machinery::connect_first::Gate {
        use crate::machinery::connect_first::{Early, Gate, Silent, address};
        use crate::remote::kept::FirstCheck;
        let Gate::Connected(stream, connected) = gate else { return gate };
        let Some(path) = self.check_path_first(fc, &access.kubeconfig) else { return Gate::Connected(stream, connected) };
        let started = std::time::Instant::now();
        match self.shared.peers.check_first(&fc.name_any(), access, &path, stream, wait).await {
            FirstCheck::NotMade(stream) => Gate::Connected(stream, connected),
            FirstCheck::Answered { answer, key } => {
                let at = std::time::Instant::now();
                let (status, body) = (answer.status, answer.body);
                Gate::Answered(Box::new(Early { status, body, path, access: key, at, took: at - started, fresh: true }))
            }
            FirstCheck::Silent => Gate::Silent(Silent { address: address(url), waited: wait, closed: false, on_kept: false }),
            FirstCheck::Closed => Gate::Silent(Silent { address: address(url), waited: started.elapsed(), closed: true, on_kept: false }),
            FirstCheck::Failed => Gate::Failed,
        }
    }

    /// The path `fc`'s health check asks, known before its turn: our PeeringRequest in the
    /// tenant namespace its kubeconfig names (`/version` for a peering without an identity).
    /// `None` when not known here: the turn's check finds it out.
    fn check_path_first(&self, fc: &ForeignCluster, kubeconfig: &str) -> Option<String> {
        let own_id = self.shared.own_id()?;
        let way = way::Way::of(fc)?;
        let there = match way {
            way::Way::AuthService { .. } => self.kubeconfigs.of(kubeconfig).tenant.clone()?,
            way::Way::Anonymous { .. } => String::new(),
        };
        Some(way.check_path(&there, &own_id))
    }

    pub(super) fn secret_value(&self, name: &str, key: &str) -> Option<String> {
        self.secrets.text(name, key)
    }

    pub(super) async fn event(&self, fc: &ForeignCluster, warning: bool, reason: &str, note: String) {
        self.shared.event(fc, warning, "Peering", reason, note).await;
    }

    /// Computes the status `report` says, writes it when it changed and tells each real change
    /// of phase in one Event.
    pub(super) async fn publish(&self, fc: &ForeignCluster, report: &Report, join: bool) -> Result<()> {
        let status = report.status(fc.status.as_ref(), join, fc.metadata.generation, &now());
        if !report::differs(fc, &status) {
            return Ok(());
        }
        // A settled round's write tells nothing new when the watch tells it back: the next
        // round is its requeue (`crate::machinery::own_writes`). One that met someone else's
        // change, or failed, is reconciled as any change.
        let writing = self.own_writes.writing(&fc.name_any());
        let written = report::write(&self.shared.client, fc, &status).await;
        let echo = written.as_ref().ok().filter(|w| report.settled() && report::only_ours_changed(fc, w));
        if let Ok(w) = &written {
            let (version, settled) = (w.resource_version(), report.settled());
            tracing::debug!(fc = %fc.name_any(), ?version, settled, echo_skipped = echo.is_some(), "status written");
        }
        if writing.done(echo.and_then(|w| w.resource_version())) {
            tracing::debug!(fc = %fc.name_any(), "changed by someone else while our status was written: reconciled again");
            self.wake(fc);
        }
        written?;
        let before = fc.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        for change in report::changes(before, &status.conditions) {
            self.event(fc, change.warning, change.reason.as_str(), change.message).await;
        }
        Ok(())
    }

    /// Reconciles `fc` again once this round ends (through [`run`]'s wakes; a reconcile called
    /// directly has none).
    pub(super) fn wake(&self, fc: &ForeignCluster) {
        if let Some(wakes) = self.wakes.get() {
            let _ = wakes.send(fc.name_any());
        }
    }

    /// Forgets our offer to `fc_name`'s remote and its proof: asked again at the next round.
    pub(super) fn forget_remote(&self, fc_name: &str) {
        self.offers.lock().expect("not poisoned").remove(fc_name);
        self.forget_proof(fc_name);
    }

    /// Forgets everything this process remembers of `fc_name`'s remote `remote_id`, once
    /// unjoined: nothing kept per peer outlives its peering.
    pub(super) fn forget_unjoined(&self, fc_name: &str, remote_id: &str) {
        self.forget_remote(fc_name);
        self.refreshed.lock().expect("not poisoned").remove(fc_name);
        self.remote_lifetimes.lock().expect("not poisoned").remove(remote_id);
    }

    /// Whether our request is on `fc_name`'s remote: the status read says so (`recorded`), or
    /// this process put it there and has not read a status saying so since. Remembered until
    /// then, however long the store takes to show that status: a busy hub's watch can lag
    /// behind it by more than a health period, and a memory of one period made the offer again
    /// over a matching request (the fleet saw 1,155 such for 3,000 peers, each a grant, a token
    /// and two writes to the peer). Forgotten on unjoin.
    pub(super) fn offered(&self, fc_name: &str, recorded: bool) -> bool {
        let mut offers = self.offers.lock().expect("not poisoned");
        if recorded {
            offers.remove(fc_name);
            return true;
        }
        offers.contains_key(fc_name)
    }

    /// What our offer handed the remote while the status read does not record the offer yet.
    pub(super) fn handed_unrecorded(&self, fc_name: &str) -> Option<HandedKubeconfig> {
        self.offers.lock().expect("not poisoned").get(fc_name).cloned()
    }

    pub(super) fn record_offer(&self, fc_name: &str, handed: &HandedKubeconfig) {
        self.offers.lock().expect("not poisoned").insert(fc_name.to_owned(), handed.clone());
    }

    /// Whether `url` proved `fingerprint` for `fc_name` within the last [`PROOF_PERIODS`]
    /// health periods, and no call to it failed since.
    pub(super) fn proven(&self, fc_name: &str, url: &str, fingerprint: &str) -> bool {
        let fresh = self.timing.health * PROOF_PERIODS;
        self.proven
            .lock()
            .expect("not poisoned")
            .get(fc_name)
            .is_some_and(|(u, f, at)| u == url && f == fingerprint && at.elapsed() < fresh)
    }

    pub(super) fn record_proof(&self, fc_name: &str, url: &str, fingerprint: &str) {
        let proof = (url.to_owned(), fingerprint.to_owned(), std::time::Instant::now());
        self.proven.lock().expect("not poisoned").insert(fc_name.to_owned(), proof);
    }

    /// How long ago `fc_name`'s anonymous offer was last made again (`None`: not by this process).
    pub(super) fn refreshed_ago(&self, fc_name: &str) -> Option<Duration> {
        self.refreshed.lock().expect("not poisoned").get(fc_name).map(|t| t.elapsed())
    }

    pub(super) fn record_refresh(&self, fc_name: &str) {
        self.refreshed.lock().expect("not poisoned").insert(fc_name.to_owned(), std::time::Instant::now());
    }

    /// The token lifetime `remote_id` told at its last `/ids`, while that answer stands: the
    /// outer `None` when it must be asked again.
    pub(super) fn remote_lifetime(&self, remote_id: &str) -> Option<Option<Duration>> {
        let known = self.remote_lifetimes.lock().expect("not poisoned");
        known.get(remote_id).filter(|(until, _)| std::time::Instant::now() < *until).map(|(_, told)| *told)
    }

    /// Records what `remote_id` told of its token lifetime, standing for `stands`.
    pub(super) fn record_remote_lifetime(&self, remote_id: &str, told: Option<Duration>, stands: Duration) {
        let until = std::time::Instant::now() + stands;
        self.remote_lifetimes.lock().expect("not poisoned").insert(remote_id.to_owned(), (until, told));
    }

    pub(super) fn withdrawing(&self, fc_name: &str) -> bool {
        self.withdrawing.lock().expect("not poisoned").contains(fc_name)
    }

    pub(super) fn set_withdrawing(&self, fc_name: &str, terminating: bool) {
        let mut w = self.withdrawing.lock().expect("not poisoned");
        if terminating {
            w.insert(fc_name.to_owned())
        } else {
            w.remove(fc_name)
        };
    }

    /// Reconciles `fc` again as soon as our PeeringRequest `pr` on the remote is gone (deleted,
    /// or replaced by another of the same name), followed by a watch of it through `requests`
    /// rather than looked at again on a timer: at most one watch per ForeignCluster, given up
    /// after `Timing::refused` (the caller's requeue stays the fallback). The watch asks the
    /// remote to close it every [`WATCH_SECONDS`] (then resumes where it was), within the
    /// remote client's read timeout; a failed one starts again with backoff.
    pub(super) fn wake_when_gone(&self, fc: &ForeignCluster, requests: Api<PeeringRequest>, pr: &PeeringRequest) {
        let Some(wakes) = self.wakes.get().cloned() else { return };
        let name = fc.name_any();
        if !self.awaiting_gone.lock().expect("not poisoned").insert(name.clone()) {
            return;
        }
        // Bounded so that a request that never goes holds no watch for ever; the next round
        // (the fallback requeue) starts another.
        let limit = self.timing.refused.max(self.timing.unjoin_grace);
        let awaiting = self.awaiting_gone.clone();
        let (pr_name, uid) = (pr.name_any(), pr.uid());
        tokio::spawn(async move {
            use kube::runtime::WatchStreamExt;
            let config = watcher::Config::default().fields(&format!("metadata.name={pr_name}")).timeout(WATCH_SECONDS);
            let mut events = std::pin::pin!(watcher(requests, config).default_backoff());
            let mut gone = decide::Gone::new(uid);
            let followed = tokio::time::timeout(limit, async {
                while let Some(event) = events.next().await {
                    match event {
                        Ok(event) if gone.after(&event) => return true,
                        Ok(_) => {}
                        // The remote retired us (after our request went): the round that
                        // wakes finds out (the chaos soak saw an unjoin wait a period here).
                        Err(e) if decide::watch_refused(&e) => return true,
                        Err(e) => tracing::debug!(fc = %name, error = %e, "watching our request on the remote; the watch restarts"),
                    }
                }
                false
            })
            .await;
            awaiting.lock().expect("not poisoned").remove(&name);
            if followed == Ok(true) {
                let _ = wakes.send(name);
            }
        });
    }

    pub(super) fn forget_proof(&self, fc_name: &str) {
        self.proven.lock().expect("not poisoned").remove(fc_name);
    }

    /// Whether the peer's Advertisement is here now.
    /// Whether peer `remote_id`'s Advertisement is here, in its tenant namespace (one of the
    /// same name elsewhere is another peer's doing, and not its).
    pub(super) fn advertisement_present(&self, remote_id: &str) -> bool {
        self.advertisements.contains(&namespaced_key(&tenant_namespace(remote_id), &advertisement_name(remote_id)))
    }

    /// Stores `value` under `key` in Secret `name` of our namespace, owned by `fc`.
    pub(super) async fn store_owned(&self, fc: &ForeignCluster, name: &str, remote_id: &str, key: &str, value: &str) -> Result<()> {
        self.store(Some(fc), name, remote_id, key, value).await
    }

    /// [`Self::store_owned`] over a Secret that is there already: applied at once (a create
    /// would only be refused first).
    pub(super) async fn store_over(&self, fc: &ForeignCluster, name: &str, remote_id: &str, key: &str, value: &str) -> Result<()> {
        let secret = self.secret_of(Some(fc), name, remote_id, key, value);
        let api: Api<Secret> = Api::namespaced(self.shared.client.clone(), &self.shared.namespace);
        writes::apply(&api, FIELD_MANAGER, &secret).await.map(drop)
    }

    /// Stores `value` under `key` in Secret `name` of our namespace, owned by `owner` if any.
    pub(super) async fn store(&self, owner: Option<&ForeignCluster>, name: &str, remote_id: &str, key: &str, value: &str) -> Result<()> {
        let secret = self.secret_of(owner, name, remote_id, key, value);
        let api: Api<Secret> = Api::namespaced(self.shared.client.clone(), &self.shared.namespace);
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => writes::apply(&api, FIELD_MANAGER, &secret).await.map(drop),
            Err(e) => Err(e.into()),
        }
    }

    /// Secret `name` of our namespace holding `value` under `key`, owned by `owner` if any.
    pub(super) fn secret_of(&self, owner: Option<&ForeignCluster>, name: &str, remote_id: &str, key: &str, value: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(self.shared.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
                    (LABEL_CLUSTER_ID.to_owned(), remote_id.to_owned()),
                ])),
                owner_references: owner.and_then(|fc| fc.controller_owner_ref(&())).map(|r| vec![r]),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(key.to_owned(), ByteString(value.as_bytes().to_vec()))])),
            ..Default::default()
        }
    }

    pub(super) async fn delete_local_secret(&self, name: &str) -> Result<()> {
        writes::delete(&Api::<Secret>::namespaced(self.shared.client.clone(), &self.shared.namespace), name).await.map(drop)
    }

    /// Grants the peer its Advertisement access here, and returns the Secret (for the remote's
    /// namespace) holding a kubeconfig for that access. `tenant_made`: the peer's tenant
    /// namespace was made sure of this round (not read again: two GETs of the 18 a join cost).
    /// The peer's Advertisement access here, and the Secret with its kubeconfig to put on the
    /// remote, with what it hands ([`decide::handed`]).
    pub(super) async fn grant_and_kubeconfig(
        &self,
        ours: &OurRequest<'_>,
        remote_id: &str,
        tenant_made: bool,
    ) -> Result<(Secret, HandedKubeconfig)> {
        let access = advertisement_access(remote_id);
        if tenant_made {
            grant::grant_in(&self.shared.client, FIELD_MANAGER, &access).await?;
        } else {
            crate::tenancy::tenant::grant(&self.shared.client, FIELD_MANAGER, remote_id, &access).await?;
        }
        let issued = k8s_openapi::jiff::Timestamp::now();
        let (token, granted) = grant::token_until(&self.shared.client, access.namespace(), remote_id, self.token_lifetime).await?;
        // Renewed on our lifetime's schedule, whatever longer the API server granted (one that
        // extends tokens): else each round would find it outlasting our lifetime.
        let lifetime = k8s_openapi::jiff::SignedDuration::try_from(self.token_lifetime).unwrap_or(k8s_openapi::jiff::SignedDuration::MAX);
        let expires = granted.map(|g| g.min(issued.checked_add(lifetime).unwrap_or(g)));
        // Its context names the peer's tenant namespace here: where its broadcaster writes.
        let url = self.api_server.url.get();
        let config = kubeconfig(&self.api_server, ours.home_id, remote_id, access.namespace(), token)?;
        let handed = decide::handed(&url, self.api_ca_fingerprint(), issued, expires);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(peering_kubeconfig_secret(ours.home_id)),
                namespace: Some(ours.remote_namespace.to_owned()),
                labels: Some(BTreeMap::from([(LABEL_CLUSTER_ID.to_owned(), ours.home_id.to_owned())])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(KUBECONFIG_KEY.to_owned(), ByteString(config.into_bytes()))])),
            ..Default::default()
        };
        Ok((secret, handed))
    }

    /// SHA-256 of our API server's CA as we hand it to peers (of its first certificate).
    pub(super) fn api_ca_fingerprint(&self) -> &str {
        &self.api_ca_fingerprint
    }
}

pub(super) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Fills the spec fields of `patch` (a merge patch of what the user left empty).
pub(super) async fn patch_spec(client: &Client, fc: &ForeignCluster, patch: serde_json::Value) -> Result<()> {
    Api::<ForeignCluster>::all(client.clone()).patch(&fc.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    Ok(())
}

/// Applies JSON patch `ops` to `fc` (ops that test what they extend; see
/// [`decide::identification_and_finalizer`](super::decide::identification_and_finalizer)).
pub(super) async fn patch_json(client: &Client, fc: &ForeignCluster, ops: serde_json::Value) -> Result<()> {
    let ops: json_patch::Patch = serde_json::from_value(ops).expect("a valid JSON patch");
    Api::<ForeignCluster>::all(client.clone()).patch(&fc.name_any(), &PatchParams::default(), &Patch::Json::<()>(ops)).await?;
    Ok(())
}

/// Adds our finalizer to `fc` when missing.
pub(super) async fn add_finalizer(fc: &ForeignCluster, client: &Client) -> Result<()> {
    crate::machinery::finalizer::add(&Api::<ForeignCluster>::all(client.clone()), fc).await
}

/// Removes our finalizer from `fc`.
pub(super) async fn remove_finalizer(fc: &ForeignCluster, client: &Client) -> Result<()> {
    crate::machinery::finalizer::remove(&Api::<ForeignCluster>::all(client.clone()), fc).await
}

/// The token for peer `remote_id`'s `/identity`: Secret `remote-token-<id>`, else empty.
pub(super) async fn read_token(client: &Client, namespace: &str, remote_id: &str) -> Result<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get_opt(&token_secret(remote_id)).await?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(TOKEN_KEY).cloned())
        .and_then(|b| String::from_utf8(b.0).ok())
        .map(|t| t.trim().to_owned())
        .unwrap_or_default())
}
