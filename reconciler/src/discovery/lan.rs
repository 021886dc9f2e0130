//! LAN discovery in a cluster (protocol §4): advertise this cluster while `enableAdvertisement`,
//! browse while `enableDiscovery`, merge what is found into ForeignClusters (type LAN, `join`
//! from `autojoin`; the ForeignCluster controller applies `autojoinUntrusted` once it knows
//! the peer's trust), and expire LAN clusters that stop answering. Every toggle applies at
//! runtime.
//!
//! "Seen again" (protocol §4): announced or resolved since the last check, or still in the mDNS
//! cache (not said goodbye, not expired). A cached cluster whose auth service does not answer
//! is asked to confirm itself (RFC 6762 §10.4); if it does not, mDNS drops it and the strikes
//! begin.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use liqo_api::ClusterConfigSpec;

use super::expiry::{self, Strikes, Verdict};
use super::mdns::{Advertised, Interfaces, Mdns, Sighting, sighting_of};
use super::merge::{self, Finder};
use super::writer::{apply, delete_foreign};
use crate::context::Shared;
use crate::machinery::error::Result;
use crate::remote::peer::Peers;

/// What LAN discovery needs.
pub struct Ctx<P: Peers> {
    pub shared: Shared<P>,
    pub settings: Settings,
    /// The mDNS cache's size and flushes are counted here.
    pub metrics: Arc<crate::reporting::metrics::Metrics>,
    /// The addresses found in the cluster: when set, they are advertised instead of
    /// `settings`' (those no peer can reach are left out), and a change is advertised anew.
    pub addresses: Option<tokio::sync::watch::Receiver<crate::cluster::addresses::Found>>,
}

/// How this cluster is seen and sought on the LAN.
#[derive(Clone, Debug)]
pub struct Settings {
    pub interfaces: Interfaces,
    /// Port of our auth service as peers reach it (SRV).
    pub auth_port: u16,
    /// Our auth service and API server URLs as peers reach them, when known (TXT).
    pub auth_url: Option<String>,
    pub api_url: Option<String>,
    /// The mDNS port (5353; tests may use another).
    pub mdns_port: u16,
}

impl<P: Peers> Ctx<P> {
    pub fn new(shared: Shared<P>, settings: Settings) -> Self {
        Self { shared, settings, metrics: Arc::default(), addresses: None }
    }

    pub fn with_addresses(mut self, found: tokio::sync::watch::Receiver<crate::cluster::addresses::Found>) -> Self {
        self.addresses = Some(found);
        self
    }

    /// What the TXT and SRV records say of us now: auth URL, API server URL, auth port.
    fn told(&self) -> (Option<String>, Option<String>, u16) {
        let s = &self.settings;
        let Some(found) = &self.addresses else { return (s.auth_url.clone(), s.api_url.clone(), s.auth_port) };
        let found = found.borrow();
        let reachable = |which, url: &str| !found.problems.iter().any(|p| p.which == which && p.url == url);
        let auth = found.auth.as_ref().map(|a| a.url.clone()).filter(|u| reachable(crate::cluster::addresses::choose::Which::Auth, u));
        let api = Some(found.api.url.clone()).filter(|u| reachable(crate::cluster::addresses::choose::Which::Api, u));
        let port = auth.as_deref().and_then(|u| url::Url::parse(u).ok()).and_then(|u| u.port_or_known_default()).unwrap_or(s.auth_port);
        (auth, api, port)
    }

    pub fn with_metrics(mut self, metrics: Arc<crate::reporting::metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }
}

/// What the LAN loop keeps between events.
#[derive(Default)]
struct State {
    mdns: Option<(String, String, Mdns)>,
    advertised: Option<(Advertised, String)>,
    browsing: Option<mdns_sd::Receiver<mdns_sd::ServiceEvent>>,
    strikes: Strikes,
    unusable_logged: HashSet<String>,
    /// Services in the mDNS cache, by full name, with the cluster ID they stand for.
    present: HashMap<String, String>,
    /// When to query the LAN afresh after a service said goodbye (see [`REQUERY_AFTER_GOODBYE`]).
    requery: Option<tokio::time::Instant>,
    /// Whether new clusters were last turned away by the cap (logged once per time).
    at_cap: bool,
    /// Clusters seen whose recording failed (our webhook not serving yet at start, the API
    /// server away), by service name: recorded again every [`RETRY_UNRECORDED`] until it
    /// works or they go, since mDNS tells a cluster once and then only when it changes.
    unrecorded: HashMap<String, super::records::DiscoveredCluster>,
    /// When to try the unrecorded ones again.
    retry_at: Option<tokio::time::Instant>,
}

/// How soon a cluster whose recording failed is recorded again.
const RETRY_UNRECORDED: Duration = Duration::from_secs(5);

/// How often the size of the mDNS cache is checked against [`cache_cap`].
const CACHE_CHECK: Duration = Duration::from_secs(5);

/// Most records the mDNS cache may hold before it is emptied (pure): a cluster takes about
/// six (PTR, SRV, TXT, addresses); far more than `max_discovered` clusters' worth is a LAN
/// flooding us with records, which would otherwise fill the memory (the daemon has no bound).
pub fn cache_cap(max_discovered: usize) -> u64 {
    8 * max_discovered as u64 + 256
}

/// Services remembered as unusable (logged once each) or as present; beyond, new names are
/// neither remembered nor logged one by one.
const MAX_REMEMBERED: usize = 4096;

/// A peer that restarts says goodbye and announces itself again at once; records that arrive
/// while the goodbye's one-second flush (RFC 6762 §10.1) is pending can be lost with it. A
/// fresh query after the flush makes every peer answer with what it has now.
const REQUERY_AFTER_GOODBYE: Duration = Duration::from_millis(1500);

/// Whether the auth service at `url` still answers as cluster `id`.
async fn answers<P: Peers>(peers: &P, url: Option<&str>, id: &str) -> bool {
    let Some(url) = url else { return false };
    matches!(tokio::time::timeout(Duration::from_secs(5), peers.ids(url, crate::remote::peer::Trust::Anything)).await, Ok(Ok(ids)) if ids.cluster_id == id)
}

impl State {
    async fn reconfigure<P: Peers>(&mut self, ctx: &Ctx<P>, own_id: Option<&str>, config: &ClusterConfigSpec) {
        let d = &config.discovery_config;
        let wanted = own_id.is_some() && (d.enable_advertisement || d.enable_discovery);
        let same_daemon = self.mdns.as_ref().is_some_and(|(s, dom, _)| *s == d.service && *dom == d.domain);
        if !wanted || !same_daemon {
            self.stop().await;
        }
        if wanted && self.mdns.is_none() {
            match Mdns::start_on_port(&d.service, &d.domain, &ctx.settings.interfaces, ctx.settings.mdns_port) {
                Ok(m) => self.mdns = Some((d.service.clone(), d.domain.clone(), m)),
                Err(e) => tracing::error!(error = %e, "cannot start mDNS; LAN discovery and advertisement are off"),
            }
        }
        let Some((_, _, mdns)) = &self.mdns else { return };
        let Some(own_id) = own_id else { return };

        let (auth_url, api_url, auth_port) = ctx.told();
        let ad = d.enable_advertisement.then(|| {
            Advertised::new(own_id, d.cluster_name.as_deref(), &ctx.shared.namespace, auth_url.as_deref(), api_url.as_deref(), auth_port)
        });
        if self.advertised.as_ref().map(|(a, _)| a) != ad.as_ref() {
            if let Some((_, fullname)) = self.advertised.take() {
                mdns.withdraw(&fullname).await;
                tracing::info!(service = %fullname, "mDNS advertisement withdrawn");
            }
            if let Some(ad) = ad {
                match mdns.advertise(&ad) {
                    Ok(fullname) => {
                        tracing::info!(service = %fullname, "advertising this cluster with mDNS");
                        self.advertised = Some((ad, fullname));
                    }
                    Err(e) => tracing::error!(error = %e, "cannot advertise with mDNS"),
                }
            }
        }
        match (d.enable_discovery, self.browsing.is_some()) {
            (true, false) => match mdns.browse() {
                Ok(rx) => {
                    tracing::info!(service = mdns.service_type(), "browsing the LAN with mDNS");
                    self.browsing = Some(rx);
                }
                Err(e) => tracing::error!(error = %e, "cannot browse with mDNS"),
            },
            (false, true) => {
                mdns.stop_browse();
                self.browsing = None;
                self.present.clear();
                self.unrecorded.clear();
                self.retry_at = None;
                self.strikes = Strikes::default();
                tracing::info!("LAN discovery stopped (ForeignClusters kept)");
            }
            _ => {}
        }
    }

    /// Remembers a sighting whose recording failed, to record it again soon (bounded).
    fn remember_unrecorded(&mut self, fullname: String, cluster: super::records::DiscoveredCluster) {
        if self.unrecorded.len() < MAX_REMEMBERED || self.unrecorded.contains_key(&fullname) {
            self.unrecorded.insert(fullname, cluster);
        }
        self.retry_at.get_or_insert_with(|| tokio::time::Instant::now() + RETRY_UNRECORDED);
    }

    /// Records again every sighting whose recording failed; those failing again wait another
    /// [`RETRY_UNRECORDED`].
    async fn record_again<P: Peers>(&mut self, ctx: &Ctx<P>, own_id: &str, config: &ClusterConfigSpec) {
        self.retry_at = None;
        for (fullname, cluster) in std::mem::take(&mut self.unrecorded) {
            let sighting = Sighting::Found { fullname: fullname.clone(), cluster: cluster.clone() };
            if let Err(e) = self.sighted(ctx, sighting, own_id, config).await {
                tracing::warn!(error = %e, cause = e.label(), cluster = %cluster.cluster_id, "recording a LAN cluster failed again; retrying");
                self.remember_unrecorded(fullname, cluster);
            }
        }
    }

    async fn stop(&mut self) {
        self.unrecorded.clear();
        self.retry_at = None;
        self.browsing = None;
        self.present.clear();
        self.strikes = Strikes::default();
        if let Some((_, _, mdns)) = self.mdns.take() {
            if let Some((_, fullname)) = self.advertised.take() {
                mdns.withdraw(&fullname).await;
            }
            mdns.shutdown().await;
        }
    }

    async fn sighted<P: Peers>(&mut self, ctx: &Ctx<P>, s: Sighting, own_id: &str, config: &ClusterConfigSpec) -> Result<()> {
        match s {
            Sighting::Found { fullname, cluster } => {
                if cluster.cluster_id == own_id {
                    return Ok(());
                }
                let fcs = ctx.shared.foreign.state();
                let existing = merge::find(fcs.iter().map(|f| &**f), &cluster.cluster_id);
                if existing.is_some_and(|f| f.metadata.deletion_timestamp.is_some()) {
                    return Ok(());
                }
                let max = ctx.shared.max_discovered;
                if !merge::admits(existing.is_some(), || merge::discovered(fcs.iter().map(|f| &**f)), max) {
                    if !self.at_cap {
                        tracing::warn!(cluster = %cluster.cluster_id, max, "not recording LAN clusters: --max-discovered-peers reached");
                        self.at_cap = true;
                    }
                    return Ok(());
                }
                self.at_cap = false;
                if self.present.len() < MAX_REMEMBERED || self.present.contains_key(&fullname) {
                    self.present.insert(fullname, cluster.cluster_id.clone());
                }
                self.strikes.seen(&cluster.cluster_id, Instant::now());
                let join = super::memory::join_found(&ctx.shared, &cluster.cluster_id, config.discovery_config.autojoin);
                let change = merge::merge(existing, &cluster, &Finder::Lan, join);
                apply(&ctx.shared.client, change, ctx.shared.recorder.as_ref(), "on the LAN (mDNS)").await
            }
            Sighting::Unusable { fullname, why } => {
                if self.unusable_logged.len() < MAX_REMEMBERED && self.unusable_logged.insert(fullname.clone()) {
                    tracing::info!(service = %fullname, reason = %why, "ignoring an mDNS service");
                }
                Ok(())
            }
            Sighting::Pending { .. } => Ok(()),
            Sighting::Gone { fullname } => {
                // Not deleted here: the strikes decide, and the auth endpoint gets its say.
                self.unrecorded.remove(&fullname);
                let cluster = self.present.remove(&fullname);
                tracing::debug!(service = %fullname, ?cluster, "mDNS service gone");
                self.requery = Some(tokio::time::Instant::now() + REQUERY_AFTER_GOODBYE);
                Ok(())
            }
        }
    }

    /// Empties the mDNS cache when it holds more than [`cache_cap`] records, by restarting the
    /// daemon (the next round starts it again, browses and advertises afresh).
    async fn bound_cache<P: Peers>(&mut self, ctx: &Ctx<P>) {
        let Some((_, _, mdns)) = &self.mdns else { return };
        let Some(held) = mdns.cached_records().await else { return };
        let cap = cache_cap(ctx.shared.max_discovered);
        ctx.metrics.mdns_cache_records.set(i64::try_from(held).unwrap_or(i64::MAX));
        if held > cap {
            tracing::warn!(held, cap, "the mDNS cache is over its bound (is the LAN flooding us?): emptying it by restarting mDNS");
            ctx.metrics.mdns_cache_flushes.inc();
            ctx.metrics.mdns_cache_records.set(0);
            self.stop().await;
        }
    }

    async fn check<P: Peers>(&mut self, ctx: &Ctx<P>, period: Duration) -> Result<()> {
        let now = Instant::now();
        let fcs = ctx.shared.foreign.state();
        for id in self.strikes.due(now, period) {
            let Some(fc) = merge::find(fcs.iter().map(|f| &**f), &id).filter(|f| Finder::Lan.owns(f)) else {
                self.strikes.forget(&id);
                continue;
            };
            let cached: Vec<&String> = self.present.iter().filter(|(_, c)| **c == id).map(|(f, _)| f).collect();
            let alive = answers(&*ctx.shared.peers, fc.spec.auth_url.as_deref(), &id).await;
            if !alive
                && !cached.is_empty()
                && let Some((_, _, mdns)) = &self.mdns
            {
                cached.iter().for_each(|f| mdns.verify(f));
            }
            match self.strikes.record(&id, alive || !cached.is_empty(), now) {
                Verdict::Alive => {}
                Verdict::Missed(n) => tracing::info!(cluster = %id, misses = n, "LAN cluster not seen again and not answering"),
                Verdict::Expired => {
                    tracing::info!(cluster = %id, "LAN cluster gone; deleting its ForeignCluster (peering torn down first)");
                    let note = format!("not seen on the LAN for {} checks in a row, auth service silent", expiry::MAX_MISSES);
                    delete_foreign(&ctx.shared.client, fc, ctx.shared.recorder.as_ref(), "Expired", note).await?;
                }
            }
        }
        Ok(())
    }
}

/// Runs LAN discovery and advertisement until `shutdown`; says goodbye on the way out.
pub async fn run<P: Peers>(ctx: Arc<Ctx<P>>, shutdown: impl std::future::Future<Output = ()> + Send) {
    let mut id_rx = ctx.shared.cluster_id.clone();
    let mut cfg_rx = ctx.shared.config.clone();
    let mut addresses = ctx.addresses.clone();
    let mut state = State::default();
    tokio::pin!(shutdown);
    let mut period = expiry::check_period(ClusterConfigSpec::default().discovery_config.ttl);
    let mut tick = tokio::time::interval(period);
    let mut cache_tick = tokio::time::interval(CACHE_CHECK);
    loop {
        let own_id = id_rx.borrow_and_update().clone();
        let config = cfg_rx.borrow_and_update().clone().unwrap_or_default();
        if config.discovery_config.ttl != 0 && expiry::check_period(config.discovery_config.ttl) != period {
            period = expiry::check_period(config.discovery_config.ttl);
            tick = tokio::time::interval(period);
        }
        state.reconfigure(&ctx, own_id.as_deref(), &config).await;
        let browsing = state.browsing.clone();
        tokio::select! {
            _ = &mut shutdown => break,
            r = id_rx.changed() => if r.is_err() { break },
            r = cfg_rx.changed() => if r.is_err() { break },
            r = async { match addresses.as_mut() { Some(rx) => rx.changed().await, None => std::future::pending().await } } => {
                if r.is_err() { addresses = None }
            }
            ev = async { match &browsing { Some(rx) => rx.recv_async().await.ok(), None => std::future::pending().await } } => {
                match ev.and_then(sighting_of) {
                    Some(s) => if let Some(own) = &own_id {
                        let found = match &s {
                            Sighting::Found { fullname, cluster } => Some((fullname.clone(), cluster.clone())),
                            _ => None,
                        };
                        match state.sighted(&ctx, s, own, &config).await {
                            Err(e) => {
                                tracing::warn!(error = %e, cause = e.label(), "recording a LAN cluster failed; retrying");
                                if let Some((fullname, cluster)) = found {
                                    state.remember_unrecorded(fullname, cluster);
                                }
                            }
                            Ok(()) => if let Some((fullname, _)) = found {
                                state.unrecorded.remove(&fullname);
                            },
                        }
                    },
                    None if browsing.as_ref().is_some_and(|rx| rx.is_disconnected()) => state.browsing = None,
                    None => {}
                }
            }
            _ = tokio::time::sleep_until(state.requery.unwrap_or_else(tokio::time::Instant::now)), if state.requery.is_some() => {
                state.requery = None;
                if state.browsing.is_some() && let Some((_, _, mdns)) = &state.mdns {
                    match mdns.browse() {
                        Ok(rx) => state.browsing = Some(rx),
                        Err(e) => tracing::warn!(error = %e, "querying the LAN again failed"),
                    }
                }
            }
            _ = tokio::time::sleep_until(state.retry_at.unwrap_or_else(tokio::time::Instant::now)), if state.retry_at.is_some() => {
                match &own_id {
                    Some(own) => state.record_again(&ctx, own, &config).await,
                    None => state.retry_at = Some(tokio::time::Instant::now() + RETRY_UNRECORDED),
                }
            }
            _ = cache_tick.tick() => state.bound_cache(&ctx).await,
            _ = tick.tick() => if let Err(e) = state.check(&ctx, period).await {
                tracing::warn!(error = %e, cause = e.label(), "expiring LAN clusters failed");
            }
        }
    }
    state.stop().await;
}
