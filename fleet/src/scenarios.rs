//! The hub's scenarios against the fleet, each giving one row: (a) N peers discovered, none
//! chosen; (b) all N joined; (c) steady state for 3 health periods; (d) a reconciler restart
//! with N joined; (e) a mass outage of 10 % and 100 % of the peers and their return; (f) a CA
//! rotation on 1 % of the peers; (g) the dashboard; (h) 100 % of the peers black-holed (their
//! packets dropped) and their return; (r) every identity renewed and (i) strangers asking for
//! identities ([`identities`]).
//!
//! A row holds what the hub's API server counted (the fleet's own requests to it taken out),
//! what the peers were asked, the reconciler's memory, CPU and log lines, and how long the
//! hub took to say what happened. Waits are on conditions with deadlines counted in health
//! periods; a scenario whose deadline passes gives a row that says so (`ok: false`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use liqo_api::ForeignCluster;
use liqo_api::reasons::{ConditionType, Reason};
use liqo_api::summary::Peer as Summary;
use serde::Serialize;
use serde_json::json;

mod identities;

use crate::dashboard::Dashboard;
use crate::hub::{Hub, Requests, is_write, metric, quantile};
use crate::peer::{Mode, Peer};
use crate::server::{Fleet, Snapshot};

/// One scenario's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    pub scenario: String,
    pub peers: usize,
    /// Peers the scenario changed (all of them, or those put down or rotated).
    pub affected: usize,
    /// Whether every expectation held within its deadline.
    pub ok: bool,
    /// Seconds until the hub said what happened (all joined, all down, all back…).
    pub converged_seconds: Option<f64>,
    /// The same, in health periods.
    pub converged_periods: Option<f64>,
    /// Length of the measured window.
    pub window_seconds: f64,
    pub rss_mib: f64,
    pub peak_rss_mib: f64,
    /// Reconciler CPU seconds per health period in the window.
    pub cpu_seconds_per_period: f64,
    /// The hub's API server: CPU milliseconds per request it counted in the window, from
    /// every client (ours, the fleet's broadcasters, its own controllers).
    pub api_cpu_ms_per_request: f64,
    /// The hub's API server: CPU seconds per health period in the window, all of it (its
    /// background work too: with few requests, the figure per request says little).
    pub api_cpu_seconds_per_period: f64,
    /// Reads of the hub's API server in the window (the fleet's Advertisement GETs taken out).
    pub hub_gets: f64,
    pub hub_lists: f64,
    pub hub_watches: f64,
    /// Writes to the hub by our components (ForeignCluster creations by the scenario and the
    /// fleet's Advertisement writes taken out; Lease renewals and Events apart).
    pub hub_writes: f64,
    pub status_writes: f64,
    pub events: f64,
    pub lease_writes: f64,
    /// ConfigMap writes: the reconciler's record of its last checks (ConfigMap
    /// liqo-last-checks, at most one every half period whatever the number of peers), apart
    /// from `hub_writes` as Lease renewals are.
    pub configmap_writes: f64,
    /// Requests to peers (auth services and API servers) per peer per health period, and in
    /// the whole window.
    pub peer_requests_per_peer_period: f64,
    pub peer_requests_per_peer: f64,
    /// TLS handshakes with peers per health period and in the whole window (of those, resumed
    /// from a session ticket), and connections reset by down peers.
    pub handshakes_per_period: f64,
    pub handshakes: u64,
    pub resumed: u64,
    pub resets: u64,
    /// Writes to peers, calls to their auth services (`/ids`, `/ca`, `/identity`) and, of
    /// those, identities asked (a re-join shows here).
    pub peer_writes: u64,
    pub auth_requests: u64,
    pub identity_requests: u64,
    pub log_lines: usize,
    /// The peers' broadcasters at the hub: their requests per peer per health period, the
    /// GETs among them, and the watches they hold at the end of the window.
    pub broadcaster_requests_per_peer_period: f64,
    pub broadcaster_gets: u64,
    pub broadcaster_watches_held: usize,
    /// The hub's API server's resident memory at the end of the window, MiB.
    pub api_rss_mib: f64,
    /// Whose time the row lost: the peers' answer times in the window (from a request's arrival
    /// to its answer, and for a connection's first the wait from its accept to its task's
    /// start), p50 and p99 in milliseconds…
    pub peer_p50_ms: Option<f64>,
    pub peer_p99_ms: Option<f64>,
    /// …the fleet's own CPU seconds per health period (the peers, their broadcasters, the
    /// scenarios: its process and the broadcasters' child), beside the reconciler's and the hub API server's…
    pub fleet_cpu_seconds_per_period: f64,
    /// …the reconciles due and not yet in their turn (connecting first included), the most
    /// seen and at the end of the window…
    pub turns_waiting_max: Option<f64>,
    pub turns_waiting_end: Option<f64>,
    /// …and the oldest health check among the joined peers, in health periods: the most seen
    /// and at the end of the window (the reconciler's `liqo_reconciler_oldest_check_seconds`,
    /// read every 5 s).
    pub oldest_check_periods_max: Option<f64>,
    pub oldest_check_periods_end: Option<f64>,
    /// Connections to the peers dropped because their listener's accept queue was full (the
    /// fleet's process not keeping up): to the hub, a dropped connection is a silent peer.
    pub listen_overflows: u64,
    /// Readings in the window where no reconcile waited for a turn and yet a joined peer's
    /// last check was older than two health periods and the connect wait: the reconciler idle
    /// while peers went stale (the invariant every row holds).
    pub stale_while_idle: usize,
    pub note: String,
    /// Our writes to the hub, by verb and resource.
    pub writes: String,
    /// LISTs the hub's API server served, by resource (anyone's: its counter names no client).
    pub lists: String,
}

impl Row {
    /// Says whose time a row lost, and holds it to the invariant every row keeps (the
    /// reconciler never idle while a joined peer's check is stale): a failed row whose peers'
    /// p99 was over 1 s is marked "peers starved" (the run's machine, not the hub, is the
    /// limit); one whose peers answered promptly is our defect, and says so.
    pub fn judge(&mut self) {
        let mut said = Vec::new();
        if self.stale_while_idle > 0 {
            self.ok = false;
            said.push(format!(
                "the reconciler idled while peers were stale: {} readings with no reconcile waiting and a check older than 2 periods and the connect wait",
                self.stale_while_idle
            ));
        }
        if !self.ok {
            said.push(match self.peer_p99_ms {
                _ if self.listen_overflows > 0 => {
                    format!("peers starved: {} connections to them dropped at their full accept queue", self.listen_overflows)
                }
                Some(p99) if p99 > 1000.0 => format!("peers starved: their answers took {p99:.0} ms at p99"),
                Some(p99) => format!("our defect: the peers answered within {p99:.0} ms at p99"),
                None => "our defect: no peer answered in the window (down, or not asked)".to_owned(),
            });
        }
        if !said.is_empty() {
            said.push(std::mem::take(&mut self.note));
            self.note = said.into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("; ");
        }
    }
}

/// A reading at one instant.
struct Mark {
    at: Instant,
    wall: k8s_openapi::jiff::Timestamp,
    api: Requests,
    fleet: Snapshot,
    logs: usize,
    cpu: f64,
    api_cpu: f64,
    fleet_cpu: f64,
    overflows: u64,
}

/// A hub and a fleet, and the ForeignClusters the hub holds (one watch).
pub struct Run {
    pub hub: Hub,
    pub fleet: Arc<Fleet>,
    pub health: Duration,
    /// How the peers of an outage (e) are down: [`Mode::Down`] (one way: their broadcasters
    /// still write to the hub, the default) or [`Mode::Off`] (wholly).
    pub outage: Mode,
    /// How long the strangers of (i) ask (2 minutes).
    pub flood: Duration,
    /// How a peer answers once back from an outage (e): [`Mode::Accepting`], or [`Mode::Slow`]
    /// for peers whose every answer then takes that long (`liqo-fleet
    /// --answer-delay-after-outage-ms`).
    pub answering: Mode,
    /// Where the npm tools are (`lighthouse`): (g) then audits the home and a peer's page in
    /// Chromium (`liqo-fleet --lighthouse DIR`).
    pub lighthouse: Option<std::path::PathBuf>,
    /// Where Lighthouse's whole reports are kept (`<--json>.lighthouse-home.json`, `…-peer.json`).
    pub lighthouse_reports: Option<std::path::PathBuf>,
    fcs: Store<ForeignCluster>,
    /// The reconciler's turns and oldest check, read every 5 s.
    readings: Arc<std::sync::Mutex<Vec<Reading>>>,
}

/// The reconciler's gauges at one instant.
#[derive(Clone, Copy, Debug)]
struct Reading {
    at: Instant,
    turns_waiting: f64,
    oldest_check: f64,
}

/// What the readings of a window tell (pure).
#[derive(Debug, Default, PartialEq)]
pub struct Readings {
    pub waiting_max: Option<f64>,
    pub waiting_end: Option<f64>,
    pub oldest_max: Option<f64>,
    pub oldest_end: Option<f64>,
    /// Readings with no reconcile waiting and the oldest check over `stale_after`.
    pub stale_while_idle: usize,
}

/// Reads `(turns waiting, oldest check seconds)` readings in order (pure).
pub fn read_window(readings: &[(f64, f64)], stale_after: Duration) -> Readings {
    let max = |f: fn(&(f64, f64)) -> f64| readings.iter().map(f).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    Readings {
        waiting_max: max(|r| r.0),
        waiting_end: readings.last().map(|r| r.0),
        oldest_max: max(|r| r.1),
        oldest_end: readings.last().map(|r| r.1),
        stale_while_idle: readings.iter().filter(|(waiting, oldest)| *waiting == 0.0 && *oldest > stale_after.as_secs_f64()).count(),
    }
}

/// How often the reconciler's gauges are read. Each read is a whole scrape of `/metrics`,
/// which counts every peer (at 1,000 peers a read every second was 13 % of the reconciler's
/// CPU in steady state): read as a Prometheus scraping often would, not as a profiler.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// How the reconciler's gauges are read every [`SAMPLE_EVERY`] (a reconciler not answering, as
/// while it restarts, gives no reading).
fn sample_reconciler(ops: u16, readings: Arc<std::sync::Mutex<Vec<Reading>>>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(SAMPLE_EVERY);
        loop {
            every.tick().await;
            let Some((_, text)) = liqo_testenv::plain_get(ops, "/metrics").await else { continue };
            let (Some(turns_waiting), Some(oldest_check)) =
                (metric(&text, "liqo_reconciler_turns_waiting"), metric(&text, "liqo_reconciler_oldest_check_seconds"))
            else {
                continue;
            };
            readings.lock().expect("not poisoned").push(Reading { at: Instant::now(), turns_waiting, oldest_check });
        }
    });
}

impl Run {
    pub fn new(hub: Hub, fleet: Arc<Fleet>, health: Duration) -> Self {
        let (fcs, writer) = reflector::store();
        let stream = watcher(Api::<ForeignCluster>::all(hub.admin.clone()), watcher::Config::default()).default_backoff().reflect(writer);
        tokio::spawn(stream.applied_objects().for_each(|_| async {}));
        let readings = Arc::default();
        sample_reconciler(hub.reconciler_ops, Arc::clone(&readings));
        Self {
            hub,
            fleet,
            health,
            outage: Mode::Down,
            flood: Duration::from_secs(120),
            answering: Mode::Accepting,
            lighthouse: None,
            lighthouse_reports: None,
            fcs,
            readings,
        }
    }

    fn n(&self) -> usize {
        self.fleet.peers.len()
    }

    async fn mark(&self) -> Mark {
        Mark {
            at: Instant::now(),
            wall: k8s_openapi::jiff::Timestamp::now(),
            api: self.hub.api_requests().await.unwrap_or_default(),
            fleet: self.fleet.counts.snapshot(),
            logs: self.hub.log_lines(),
            cpu: self.hub.cpu_seconds(),
            api_cpu: self.hub.api_cpu_seconds(),
            fleet_cpu: crate::hub::fleet_cpu_seconds() + self.fleet.advertiser.cpu_seconds_elsewhere(),
            overflows: crate::hub::listen_overflows(),
        }
    }

    /// The row of the window `from`..`to`, `own_writes` of them the scenario's own.
    fn row(&self, scenario: &str, affected: usize, (from, to): (&Mark, &Mark), converged: Option<Duration>, own_writes: f64) -> Row {
        let api = to.api.since(&from.api);
        let fleet = to.fleet - from.fleet;
        let window = to.at - from.at;
        let periods = window.as_secs_f64() / self.health.as_secs_f64();
        let (rss, peak) = self.hub.rss();
        let in_window: Vec<(f64, f64)> = {
            let readings = self.readings.lock().expect("not poisoned");
            readings.iter().filter(|r| r.at >= from.at && r.at <= to.at).map(|r| (r.turns_waiting, r.oldest_check)).collect()
        };
        let stale_after = self.health * 2 + liqo_reconciler::machinery::connect_first::CONNECT_WAIT;
        let seen = read_window(&in_window, stale_after);
        let in_periods = |s: Option<f64>| s.map(|s| round(s / self.health.as_secs_f64()));
        let ms = |d: Option<Duration>| d.map(|d| round(d.as_secs_f64() * 1000.0));
        // The fleet writes Advertisements; the API server its own Endpoints.
        // The record of the last checks (ConfigMaps) is counted apart, as the Lease is.
        let ours = |r: &str| !matches!(r, "advertisements" | "leases" | "events" | "endpoints" | "endpointslices" | "configmaps");
        let writes = api.sum(|v, r, _| is_write(v) && ours(r)) - own_writes;
        Row {
            scenario: scenario.to_owned(),
            peers: self.n(),
            affected,
            ok: converged.is_some(),
            converged_seconds: converged.map(|d| round(d.as_secs_f64())),
            converged_periods: converged.map(|d| round(d.as_secs_f64() / self.health.as_secs_f64())),
            window_seconds: round(window.as_secs_f64()),
            rss_mib: round(rss as f64 / 1024.0),
            peak_rss_mib: round(peak as f64 / 1024.0),
            // A window shorter than a period (a cold start) is counted as one: its CPU, not
            // that CPU stretched over a period it did not last.
            cpu_seconds_per_period: round((to.cpu - from.cpu) / periods.max(1.0)),
            api_cpu_ms_per_request: round(1000.0 * (to.api_cpu - from.api_cpu) / api.sum(|_, _, _| true).max(1.0)),
            api_cpu_seconds_per_period: round((to.api_cpu - from.api_cpu) / periods.max(1.0)),
            hub_gets: api.sum(|v, r, _| v == "GET" && r != "advertisements"),
            hub_lists: api.sum(|v, _, _| v == "LIST"),
            hub_watches: api.sum(|v, _, _| v == "WATCH"),
            hub_writes: writes.max(0.0),
            status_writes: api.sum(|v, r, s| is_write(v) && r == "foreignclusters" && s == "status"),
            events: api.sum(|v, r, _| is_write(v) && r == "events"),
            lease_writes: api.sum(|v, r, _| is_write(v) && r == "leases"),
            configmap_writes: api.sum(|v, r, _| is_write(v) && r == "configmaps"),
            peer_requests_per_peer_period: round(fleet.requests() as f64 / self.n().max(1) as f64 / periods.max(1e-9)),
            peer_requests_per_peer: round(fleet.requests() as f64 / affected.max(1) as f64),
            handshakes_per_period: round(fleet.handshakes as f64 / periods.max(1e-9)),
            handshakes: fleet.handshakes,
            resumed: fleet.resumed,
            resets: fleet.reset,
            peer_writes: fleet.writes,
            auth_requests: fleet.auth,
            identity_requests: fleet.identities,
            log_lines: to.logs - from.logs,
            broadcaster_requests_per_peer_period: round(
                (fleet.hub_reads + fleet.hub_writes + fleet.hub_lists + fleet.hub_watches) as f64
                    / self.n().max(1) as f64
                    / periods.max(1e-9),
            ),
            broadcaster_gets: fleet.hub_reads,
            broadcaster_watches_held: self.fleet.advertiser.watching(),
            api_rss_mib: round(self.hub.api_rss().0 as f64 / 1024.0),
            peer_p50_ms: ms(crate::counts::quantile(&fleet.latencies, 0.5)),
            peer_p99_ms: ms(crate::counts::quantile(&fleet.latencies, 0.99)),
            fleet_cpu_seconds_per_period: round((to.fleet_cpu - from.fleet_cpu) / periods.max(1.0)),
            turns_waiting_max: seen.waiting_max,
            turns_waiting_end: seen.waiting_end,
            oldest_check_periods_max: in_periods(seen.oldest_max),
            oldest_check_periods_end: in_periods(seen.oldest_end),
            stale_while_idle: seen.stale_while_idle,
            listen_overflows: to.overflows.saturating_sub(from.overflows),
            note: String::new(),
            writes: api.writes(ours),
            lists: api.lists(),
        }
    }

    /// Waits until `pred` holds for the ForeignCluster of every peer in `peers`, at most
    /// `periods` health periods: how long it took, `None` when it did not.
    async fn until(&self, peers: &[Arc<Peer>], periods: f64, pred: impl Fn(&ForeignCluster) -> bool) -> Option<Duration> {
        let started = Instant::now();
        let deadline = self.health.mul_f64(periods);
        let mut pending: Vec<&Arc<Peer>> = peers.iter().collect();
        loop {
            pending.retain(|p| !self.fcs.get(&reflector::ObjectRef::new(&p.name)).is_some_and(|fc| pred(&fc)));
            if pending.is_empty() {
                return Some(started.elapsed());
            }
            if started.elapsed() > deadline {
                eprintln!(
                    "  {} peers still not there after {:.0} s, e.g. {}",
                    pending.len(),
                    deadline.as_secs_f64(),
                    self.describe(pending[0])
                );
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn describe(&self, peer: &Peer) -> String {
        match self.fcs.get(&reflector::ObjectRef::new(&peer.name)) {
            Some(fc) => format!("{}: {}", peer.name, Summary::of(&fc).state()),
            None => format!("{}: no ForeignCluster", peer.name),
        }
    }

    async fn reconciles(&self) -> f64 {
        let text = self.hub.reconciler_metrics().await.unwrap_or_default();
        metric(&text, r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="ok"}"#).unwrap_or(0.0)
    }

    /// Waits until the reconciler has reconciled `n` more ForeignClusters than `start`.
    async fn reconciled(&self, start: f64, n: usize, periods: f64) -> Option<Duration> {
        let started = Instant::now();
        while self.reconciles().await < start + n as f64 {
            if started.elapsed() > self.health.mul_f64(periods) {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Some(started.elapsed())
    }

    /// (a) N ForeignClusters created through the webhook (`join: false`, as discovery leaves
    /// them), then one health period with none chosen.
    pub async fn discovered(&self) -> Row {
        let api = Api::<ForeignCluster>::all(self.hub.admin.clone());
        let start = self.reconciles().await;
        let before = self.mark().await;
        let created = Instant::now();
        let made: Vec<_> = futures::stream::iter(self.fleet.peers.clone())
            .map(|p| {
                let api = api.clone();
                async move {
                    let fc: ForeignCluster = serde_json::from_value(json!({
                        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
                        "metadata": {"name": p.name}, "spec": {"authUrl": p.url(), "join": false, "allowUntrustedCA": true}
                    }))
                    .expect("a ForeignCluster");
                    api.create(&PostParams::default(), &fc).await.map(drop)
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        let creation = created.elapsed();
        let failed = made.iter().filter(|r| r.is_err()).count();
        let settled = self.reconciled(start, self.n(), 4.0).await;
        let quiet = self.mark().await;
        tokio::time::sleep(self.health).await;
        let after = self.mark().await;
        let mut row = self.row("a. discovered, none chosen", self.n(), (&quiet, &after), settled.filter(|_| failed == 0), 0.0);
        let webhook = self.hub.webhook_metrics().await.unwrap_or_default();
        let p99 = quantile(&webhook, "liqo_webhook_admission_duration_seconds", 0.99);
        row.note = format!(
            "{} created through the webhook in {:.1} s ({:.0}/s, {failed} failed); webhook p99 {}; creation window: {} writes",
            self.n(),
            creation.as_secs_f64(),
            self.n() as f64 / creation.as_secs_f64(),
            p99.map_or("-".into(), |s| format!("{:.2} ms", s * 1e3)),
            quiet.api.since(&before.api).sum(|v, r, _| is_write(v) && r == "foreignclusters"),
        );
        row
    }

    /// (b) Every peer asked to join: time until all are Joined and reachable.
    pub async fn join_all(&self) -> Row {
        let api = Api::<ForeignCluster>::all(self.hub.admin.clone());
        let bindings_before = self.cluster_role_bindings().await;
        let before = self.mark().await;
        let _: Vec<_> = futures::stream::iter(self.fleet.peers.clone())
            .map(|p| {
                let api = api.clone();
                async move { api.patch(&p.name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"join": true}}))).await.map(drop) }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        let joined = self.until(&self.fleet.peers, join_deadline(self.n(), self.health), healthy).await;
        let after = self.mark().await;
        let mut row = self.row("b. all joined", self.n(), (&before, &after), joined, self.n() as f64);
        let metrics = self.hub.reconciler_metrics().await.unwrap_or_default();
        row.note = format!(
            "{} broadcasters in the fleet; offers by plan/on the remote before: {}; ClusterRoleBindings on the hub: {} with none joined, {} with all joined",
            self.fleet.advertiser.running(),
            crate::hub::offers(&metrics),
            bindings_before,
            self.cluster_role_bindings().await
        );
        row
    }

    /// How many ClusterRoleBindings the hub has (protocol §9: as many with every peer joined as
    /// with none).
    async fn cluster_role_bindings(&self) -> usize {
        use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
        let api = Api::<ClusterRoleBinding>::all(self.hub.admin.clone());
        api.list_metadata(&Default::default()).await.map(|l| l.items.len()).unwrap_or(0)
    }

    /// (c) Three health periods with every peer joined.
    pub async fn steady(&self) -> [Row; 2] {
        let settled = self.until(&self.fleet.peers, 2.0, healthy).await;
        self.quiet().await;
        let before = self.mark().await;
        tokio::time::sleep(self.health * 3).await;
        let after = self.mark().await;
        let still = self.until(&self.fleet.peers, 0.0, healthy).await;
        let converged = settled.and(still).map(|_| Duration::ZERO);
        let mut row = self.row("c. steady, 3 periods", self.n(), (&before, &after), converged, 0.0);
        row.note = format!(
            "per health period: {} requests per peer, {} TLS handshakes ({:.1} % full); Events written in the window: {}; {}",
            row.peer_requests_per_peer_period,
            row.handshakes_per_period,
            100.0 * (row.handshakes - row.resumed) as f64 / row.handshakes.max(1) as f64,
            self.events_since(before.wall).await,
            self.record_size().await
        );
        [row.clone(), self.broadcasters_at_hub(row, (&before, &after))]
    }

    /// (c, second row) What the peers' broadcasters cost the hub in the same window: their
    /// requests per peer per period (target: at most 0.1, with a watch each), and the hub's API
    /// server's memory holding their watches.
    fn broadcasters_at_hub(&self, mut row: Row, (from, to): (&Mark, &Mark)) -> Row {
        let fleet = to.fleet - from.fleet;
        let periods = (to.at - from.at).as_secs_f64() / self.health.as_secs_f64();
        row.scenario = "c. the peers' broadcasters at the hub, steady".into();
        row.ok = row.ok && row.broadcaster_requests_per_peer_period <= 0.1;
        row.note = format!(
            "{} requests per peer per period to the hub ({} GETs, {} watches opened with {} LISTs, {} writes in {periods:.1} periods); \
             {} watches held; the hub's API server RSS {:.0} MiB (peak {:.0})",
            row.broadcaster_requests_per_peer_period,
            fleet.hub_reads,
            fleet.hub_watches,
            fleet.hub_lists,
            fleet.hub_writes,
            row.broadcaster_watches_held,
            row.api_rss_mib,
            self.hub.api_rss().1 as f64 / 1024.0
        );
        row
    }

    /// Waits for the join's tail: until the hub has written no Event and no status for one
    /// interval at which the reconciler tells the Events its budget left out (and a second),
    /// so that the summary of a join's left-out Events, up to that interval after them, is
    /// not taken for a write in steady state. Gives up after three such intervals; the window
    /// then shows what kept writing.
    async fn quiet(&self) {
        let every = liqo_reconciler::reporting::event_budget::SUMMARY_EVERY + Duration::from_secs(1);
        let started = Instant::now();
        let written = |api: &Requests| api.sum(|v, r, s| is_write(v) && (r == "events" || (r == "foreignclusters" && s == "status")));
        let mut last = (written(&self.hub.api_requests().await.unwrap_or_default()), Instant::now());
        while last.1.elapsed() < every && started.elapsed() < every * 3 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = written(&self.hub.api_requests().await.unwrap_or_default());
            if now != last.0 {
                last = (now, Instant::now());
            }
        }
    }

    /// The record of the last checks as it stands: its lines and bytes (one line while every
    /// peer is checked on time).
    async fn record_size(&self) -> String {
        use k8s_openapi::api::core::v1::ConfigMap;
        let api = Api::<ConfigMap>::namespaced(self.hub.admin.clone(), "liqo");
        match api.get_opt(liqo_api::last_checks::CONFIGMAP).await {
            Ok(Some(cm)) => {
                let text = cm.data.and_then(|mut d| d.remove(liqo_api::last_checks::KEY)).unwrap_or_default();
                format!("the record of the last checks: {} lines, {} bytes", text.lines().count(), text.len())
            }
            Ok(None) => "no record of the last checks".into(),
            Err(e) => format!("the record of the last checks not read: {e}"),
        }
    }

    /// The reasons of the Events written (first or again) since `since`, with counts.
    async fn events_since(&self, since: k8s_openapi::jiff::Timestamp) -> String {
        use k8s_openapi::api::events::v1::Event;
        let events = Api::<Event>::all(self.hub.admin.clone()).list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
        let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
        for e in events {
            let last = liqo_api::summary::event_last_seen(&e);
            if last.is_some_and(|t| t >= since) {
                *reasons.entry(e.reason.unwrap_or_default()).or_default() += 1;
            }
        }
        if reasons.is_empty() { "none".into() } else { reasons.iter().map(|(r, n)| format!("{r} {n}")).collect::<Vec<_>>().join(", ") }
    }

    /// (d) The reconciler restarted with every peer joined: each one checked again within 2
    /// health periods, none joined again.
    pub async fn cold_start(&mut self) -> Row {
        self.hub.stop_reconciler().await;
        let before = self.mark().await;
        let started = Instant::now();
        if let Err(e) = self.hub.start_reconciler().await {
            let mut row = self.row("d. cold start", self.n(), (&before, &before), None, 0.0);
            row.note = format!("the reconciler did not start again: {e:#}");
            return row;
        }
        let checked = self.reconciled(0.0, self.n(), 2.0).await.map(|_| started.elapsed());
        let healthy_all = self.until(&self.fleet.peers, 0.0, healthy).await;
        let after = self.mark().await;
        let mut row = self.row("d. cold start", self.n(), (&before, &after), checked.filter(|_| healthy_all.is_some()), 0.0);
        let rejoined = row.peer_writes + row.identity_requests;
        row.ok &= rejoined == 0;
        row.note = format!("{rejoined} writes and identities asked of peers (a re-join); RSS peak is the new process's");
        row
    }

    /// (e) `percent` % of the peers down: each one's status says so within 3 health periods;
    /// then back: all Joined again within 2.
    pub async fn outage(&self, percent: usize) -> [Row; 2] {
        let count = (self.n() * percent).div_ceil(100).max(1);
        let down: Vec<Arc<Peer>> = self.fleet.peers[..count].to_vec();
        let before = self.mark().await;
        self.fleet.set_mode(0..count, self.outage);
        let seen = self.until(&down, 3.0, unreachable).await;
        let mid = self.mark().await;
        let wholly = if self.outage == Mode::Off { ", wholly" } else { "" };
        let mut went = self.row(&format!("e. {percent} % down{wholly}"), count, (&before, &mid), seen, 0.0);
        self.fleet.set_mode(0..count, self.answering);
        let back = self.until(&down, 2.0, healthy).await;
        let after = self.mark().await;
        let mut came = self.row(&format!("e. {percent} % back{wholly}"), count, (&mid, &after), back, 0.0);
        for row in [&mut went, &mut came] {
            let per_peer = row.status_writes / count as f64;
            row.note = format!("{per_peer:.2} status writes per affected peer");
        }
        [went, came]
    }

    /// (h) Every peer's API server drops packets (no answer, no refusal): each status says so
    /// within 3 health periods; then answering again: all Joined within 2. Only with an address
    /// per peer in the fleet's own network namespace (`just fleet`).
    pub async fn black_holed(&self) -> [Row; 2] {
        let count = self.n();
        let all = &self.fleet.peers;
        let before = self.mark().await;
        let hole = match self.fleet.endpoints {
            crate::server::Endpoints::Addresses { port } => {
                let (first, last) = (all[0].addr.ip(), all[count - 1].addr.ip());
                match (first, last) {
                    (std::net::IpAddr::V4(f), std::net::IpAddr::V4(l)) => crate::black_hole::BlackHole::drop_to(f, l, port),
                    _ => Err(anyhow::anyhow!("IPv4 peers only")),
                }
            }
            crate::server::Endpoints::Ports => {
                Err(anyhow::anyhow!("needs an address per peer, in the fleet's own network namespace (just fleet)"))
            }
        };
        let hole = match hole {
            Ok(hole) => hole,
            Err(e) => {
                let mut row = self.row("h. 100 % black-holed", count, (&before, &before), None, 0.0);
                row.note = format!("not run: {e:#}");
                return [row.clone(), row];
            }
        };
        let seen = self.until(all, 3.0, unreachable).await;
        let mid = self.mark().await;
        let mut went = self.row("h. 100 % black-holed", count, (&before, &mid), seen, 0.0);
        if let Err(e) = hole.lift() {
            went.note = format!("the rules could not be lifted: {e:#}");
            went.ok = false;
        }
        let back = self.until(all, 2.0, healthy).await;
        let after = self.mark().await;
        let mut came = self.row("h. 100 % back from the black hole", count, (&mid, &after), back, 0.0);
        for row in [&mut went, &mut came] {
            let per_peer = row.status_writes / count as f64;
            row.note = format!("{per_peer:.2} status writes per affected peer {}", row.note).trim_end().to_owned();
        }
        [went, came]
    }

    /// (e) as [`Run::outage`], 10 % then 100 %.
    pub async fn outage_both(&self) -> [Row; 4] {
        let [a, b] = self.outage(10).await;
        let [c, d] = self.outage(100).await;
        [a, b, c, d]
    }

    /// (f) 1 % of the peers present a new CA: each one's status says so (RemoteCaChanged)
    /// within 2 health periods; its operator trusts the new CA (deletes the pinned one) and it
    /// is Joined again within 2 more.
    pub async fn ca_rotation(&self) -> Row {
        let count = self.n().div_ceil(100).max(1);
        let rotated: Vec<Arc<Peer>> = self.fleet.peers[self.n() - count..].to_vec();
        let before = self.mark().await;
        for p in &rotated {
            if let Err(e) = p.rotate_ca() {
                let mut row = self.row("f. CA rotated on 1 %", count, (&before, &before), None, 0.0);
                row.note = format!("rotating {}: {e:#}", p.name);
                return row;
            }
        }
        let seen = self.until(&rotated, 2.0, ca_changed).await;
        let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(self.hub.admin.clone(), "liqo");
        for p in &rotated {
            let _ = secrets.delete(&liqo_api::names::ca_data_secret(&p.name), &Default::default()).await;
        }
        let back = self.until(&rotated, 2.0, healthy).await;
        let others = self.until(&self.fleet.peers[..self.n() - count], 0.0, healthy).await;
        let after = self.mark().await;
        let mut row = self.row(
            "f. CA rotated on 1 %",
            count,
            (&before, &after),
            seen.and(back).and(others).map(|_| seen.unwrap_or_default()),
            count as f64,
        );
        row.note = format!(
            "seen in {:.1} s; joined again {:.1} s after the operator deleted the pinned CA; the others stayed joined",
            seen.map_or(f64::NAN, |d| d.as_secs_f64()),
            back.map_or(f64::NAN, |d| d.as_secs_f64())
        );
        row
    }

    /// (g) The dashboard on the hub with every ForeignCluster the run made, as a logged-in
    /// user: its home page, a search, a peer's page; a change to a ForeignCluster reaching an
    /// open page (its live channel); the dashboard's own memory (in the row's RSS columns).
    pub async fn dashboard(&self) -> Row {
        let before = self.mark().await;
        let measured = self.measure_dashboard().await;
        let after = self.mark().await;
        let mut row = self.row("g. dashboard", self.n(), (&before, &after), None, CHANGES as f64);
        match measured {
            Ok(f) => {
                let audited = f.audits.iter().all(|(path, a)| a.passes() && (path != "/" || a.document_bytes <= 50_000.0));
                row.ok = f.all_served && f.changes_seen == CHANGES && audited;
                row.converged_seconds = f.slowest_change.map(|d| round(d.as_secs_f64()));
                row.converged_periods = f.slowest_change.map(|d| round(d.as_secs_f64() / self.health.as_secs_f64()));
                (row.rss_mib, row.peak_rss_mib) = (round(f.rss.0 as f64 / 1024.0), round(f.rss.1 as f64 / 1024.0));
                row.note = f.to_string();
            }
            Err(e) => {
                row.ok = false;
                row.note = format!("the dashboard: {e:#}");
            }
        }
        row
    }

    async fn measure_dashboard(&self) -> anyhow::Result<DashboardFigures> {
        let d = Dashboard::start(&self.hub.cp, &self.hub.bin).await?;
        let token = liqo_testenv::ADMIN_TOKEN;
        // The first page starts the user's session; the shared stores may still be filling:
        // the last peer's card shows once they hold everything.
        let first = d.get("/", token).await?;
        let last = self.fleet.peers.last().map(|p| p.name.clone()).unwrap_or_default();
        let started = Instant::now();
        loop {
            let page = d.get(&format!("/?q={last}"), token).await?;
            if page.text.contains(&format!("/peers/{last}")) {
                break;
            }
            anyhow::ensure!(started.elapsed() < Duration::from_secs(120), "{last} not on the dashboard after 120 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut pages = Vec::new();
        for path in ["/".to_owned(), format!("/?q={last}"), format!("/peers/{last}")] {
            let mut took = Vec::new();
            let mut bytes = 0;
            for _ in 0..5 {
                let page = d.get(&path, token).await?;
                anyhow::ensure!(page.status == 200, "{path} answered {}", page.status);
                took.push(page.took);
                bytes = page.text.len();
            }
            took.sort();
            pages.push((took[2], bytes));
        }
        let mut live = d.live(token).await?;
        let api = Api::<ForeignCluster>::all(self.hub.admin.clone());
        let (mut seen, mut slowest) = (0, None::<Duration>);
        for (i, peer) in self.fleet.peers.iter().take(CHANGES).enumerate() {
            while live.try_recv().is_ok() {}
            let patch = json!({"metadata": {"labels": {"fleet.liqo.io/touched": i.to_string()}}});
            let changed = Instant::now();
            api.patch(&peer.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            if let Ok(Some(at)) = tokio::time::timeout(Duration::from_secs(5), live.recv()).await {
                seen += 1;
                slowest = slowest.max(Some(at - changed));
            }
        }
        // In a browser: Lighthouse on the home and the last peer's page, one after the other.
        let mut audits = Vec::new();
        if let Some(tools) = &self.lighthouse {
            for (path, page) in [("/".to_owned(), "home"), (format!("/peers/{last}"), "peer")] {
                let (port, tools, p) = (d.port(), tools.clone(), path.clone());
                let keep = self.lighthouse_reports.as_ref().map(|base| {
                    let mut name = base.as_os_str().to_owned();
                    name.push(format!(".lighthouse-{page}.json"));
                    std::path::PathBuf::from(name)
                });
                let audit =
                    tokio::task::spawn_blocking(move || crate::dashboard::lighthouse(port, &tools, &p, token, keep.as_deref())).await??;
                audits.push((path, audit));
            }
        }
        Ok(DashboardFigures {
            audits,
            all_served: first.status == 200,
            first: first.took,
            home: pages[0],
            search: pages[1],
            peer: pages[2],
            changes_seen: seen,
            slowest_change: slowest,
            rss: d.rss(),
        })
    }
}

/// ForeignClusters changed in scenario (g), each change awaited on an open page.
const CHANGES: usize = 5;

/// What scenario (g) measured: pages as (median time of 5, bytes).
struct DashboardFigures {
    all_served: bool,
    first: Duration,
    home: (Duration, usize),
    search: (Duration, usize),
    peer: (Duration, usize),
    changes_seen: usize,
    slowest_change: Option<Duration>,
    rss: (u64, u64),
    /// Lighthouse's figures of each page audited (`--lighthouse`).
    audits: Vec<(String, crate::dashboard::Audit)>,
}

impl std::fmt::Display for DashboardFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let kib = |b: usize| b as f64 / 1024.0;
        write!(
            f,
            "home {:.1} ms ({:.0} KiB), search {:.1} ms ({:.0} KiB), a peer's page {:.1} ms ({:.0} KiB), medians of 5 (the first page, \
             starting the session: {:.0} ms); {} of {CHANGES} changes reached an open page, the slowest in {:.0} ms; the dashboard's \
             RSS {:.1} MiB (peak {:.1}) in the RSS columns",
            ms(self.home.0),
            kib(self.home.1),
            ms(self.search.0),
            kib(self.search.1),
            ms(self.peer.0),
            kib(self.peer.1),
            ms(self.first),
            self.changes_seen,
            self.slowest_change.map_or(f64::NAN, ms),
            self.rss.0 as f64 / 1024.0,
            self.rss.1 as f64 / 1024.0,
        )?;
        for (path, audit) in &self.audits {
            write!(f, "; Lighthouse (desktop) on {path}: {audit}")?;
        }
        Ok(())
    }
}

/// Joined, and the remote answers.
pub fn healthy(fc: &ForeignCluster) -> bool {
    let s = Summary::of(fc);
    s.joined() && s.phase(ConditionType::RemoteReachable).is_some_and(|p| p.status == "True")
}

/// The status says the remote does not answer.
pub fn unreachable(fc: &ForeignCluster) -> bool {
    Summary::of(fc).phase(ConditionType::RemoteReachable).is_some_and(|p| p.status == "False")
}

/// The status says the remote presents another CA than the pinned one.
pub fn ca_changed(fc: &ForeignCluster) -> bool {
    Summary::of(fc).phase(ConditionType::CaVerified).is_some_and(|p| p.reason == Reason::RemoteCaChanged.as_str())
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// How many health periods scenario (b) waits for `n` peers to join: 20, or 0.1 s a peer when
/// that is longer. A join costs about 14 requests to the hub's API server (9 writes, 4 Events,
/// a read); a 2-core hub that also runs the fleet serves about 130 a second of them, about 10
/// joins a second, so 10,000 take longer than 20 periods of 30 s. The row says how long.
fn join_deadline(n: usize, health: Duration) -> f64 {
    20f64.max(n as f64 * 0.1 / health.as_secs_f64())
}

/// The rows as a table (one line each): rates per health period where the window holds one
/// or more, totals in the window (per affected peer for requests) otherwise.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "scenario                   | peers | ok | conv. s | periods | RSS MiB | peak | CPU s/period | API ms/req | API s/period | fleet s/period | peer p50/p99 ms | dropped | waiting max/end | oldest check max/end | hub GET | LIST | writes | status w | cm w | events | peer req/peer | TLS all/resumed | peer writes | auth calls | identities | log lines\n",
    );
    for r in rows {
        let opt = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v}"));
        out += &format!(
            "{:<26} | {:>5} | {:<2} | {:>7} | {:>7} | {:>7} | {:>4} | {:>12} | {:>10} | {:>12} | {:>14} | {:>15} | {:>7} | {:>15} | {:>20} | {:>7} | {:>4} | {:>6} | {:>8} | {:>4} | {:>6} | {:>13} | {:>15} | {:>11} | {:>10} | {:>10} | {:>9}\n",
            r.scenario,
            r.affected,
            if r.ok { "ok" } else { "NO" },
            opt(r.converged_seconds),
            opt(r.converged_periods),
            r.rss_mib,
            r.peak_rss_mib,
            r.cpu_seconds_per_period,
            r.api_cpu_ms_per_request,
            r.api_cpu_seconds_per_period,
            r.fleet_cpu_seconds_per_period,
            format!("{}/{}", opt(r.peer_p50_ms), opt(r.peer_p99_ms)),
            r.listen_overflows,
            format!("{}/{}", opt(r.turns_waiting_max), opt(r.turns_waiting_end)),
            format!("{}/{}", opt(r.oldest_check_periods_max), opt(r.oldest_check_periods_end)),
            r.hub_gets,
            r.hub_lists,
            r.hub_writes,
            r.status_writes,
            r.configmap_writes,
            r.events,
            r.peer_requests_per_peer,
            format!("{}/{}", r.handshakes, r.resumed),
            r.peer_writes,
            r.auth_requests,
            r.identity_requests,
            r.log_lines
        );
    }
    out
}

/// Lists every ForeignCluster the hub holds (for a final check; a LIST, not in any window).
pub async fn all_foreign_clusters(hub: &Hub) -> Vec<ForeignCluster> {
    Api::<ForeignCluster>::all(hub.admin.clone()).list(&Default::default()).await.map(|l| l.items).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_tells_the_most_waiting_the_oldest_check_and_idle_readings_over_the_bound() {
        let bound = Duration::from_secs(65);
        assert_eq!(read_window(&[], bound), Readings::default());
        let seen = read_window(&[(10.0, 20.0), (0.0, 70.0), (64.0, 90.0), (0.0, 30.0)], bound);
        assert_eq!(seen.waiting_max, Some(64.0));
        assert_eq!(seen.waiting_end, Some(0.0));
        assert_eq!(seen.oldest_max, Some(90.0));
        assert_eq!(seen.oldest_end, Some(30.0));
        assert_eq!(seen.stale_while_idle, 1, "90 s old with 64 waiting is a busy reconciler; 70 s with none waiting is not");
    }

    #[test]
    fn a_failed_row_says_whose_time_it_lost() {
        let row = |ok: bool, p99: Option<f64>, stale: usize| Row {
            ok,
            peer_p99_ms: p99,
            stale_while_idle: stale,
            note: "n".into(),
            ..Default::default()
        };
        let mut starved = row(false, Some(1500.0), 0);
        starved.judge();
        assert!(starved.note.starts_with("peers starved: their answers took 1500 ms") && starved.note.ends_with("; n"), "{}", starved.note);
        let mut ours = row(false, Some(12.0), 0);
        ours.judge();
        assert!(ours.note.starts_with("our defect: the peers answered within 12 ms"), "{}", ours.note);
        let mut fine = row(true, Some(5000.0), 0);
        fine.judge();
        assert_eq!((fine.ok, fine.note.as_str()), (true, "n"), "a row that holds is not judged");
        let mut dropped = Row { listen_overflows: 40, ..row(false, None, 0) };
        dropped.judge();
        assert!(dropped.note.starts_with("peers starved: 40 connections to them dropped"), "{}", dropped.note);
        let mut idle = row(true, Some(3.0), 2);
        idle.judge();
        assert!(!idle.ok && idle.note.starts_with("the reconciler idled while peers were stale: 2 readings"), "{}", idle.note);
    }

    #[test]
    fn the_join_window_is_twenty_periods_or_a_tenth_of_a_second_a_peer() {
        let health = Duration::from_secs(30);
        assert_eq!(join_deadline(50, health), 20.0);
        assert_eq!(join_deadline(6_000, health), 20.0);
        assert!((join_deadline(10_000, health) * 30.0 - 1_000.0).abs() < 1e-6);
    }
}
