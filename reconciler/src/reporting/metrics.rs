//! Prometheus metrics of the reconciler, served on the plain-HTTP operations port. The alert
//! rules (`manifests/monitoring/liqo-alerts.rules.yaml`) and the Grafana dashboard next to them
//! use these names; `image/tests/monitoring.rs` checks that every name they use is exported.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use liqo_api::reasons::{ConditionType, Reason};
use liqo_api::summary::Peer;

use crate::machinery::error::Error;

/// The label of a `POST /identity` answer (`liqo_reconciler_auth_identity_requests_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IdentityLabels {
    /// `issued`, `renewed`, `bound` (409: the ID is another's), `proof_refused` (409: a proof by
    /// key not taken), `capped` (503: too many unused identities), `wrong_token`, `empty_token`,
    /// `rate_limited`, `bad_request`, `unavailable`, `error`; and of `POST /identity/challenge`:
    /// `challenge`, `challenge_capped`.
    pub result: &'static str,
}

/// Where a peer asked to join stands: `state` is `joined`, `failing` (a phase that is False and
/// in the way: `phase` and its `reason`) or `joining` (the first phase not passed yet, if any).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerStateLabels {
    pub state: &'static str,
    pub phase: &'static str,
    pub reason: &'static str,
}

/// One peer: its ForeignCluster's name and the remote cluster ID.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerLabels {
    pub foreign_cluster: String,
    pub cluster_id: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok`, or the error's stable label.
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseReasonLabels {
    pub phase: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    pub controller: &'static str,
    /// `ok`, or the error's stable label.
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OfferLabels {
    pub plan: &'static str,
    pub on_remote: &'static str,
}

/// Events left out over their budget, by reason.
pub type EventsLeftOut = Family<ReasonLabels, Counter>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ForeignClusterLabels {
    /// `LAN`, `WAN`, `Manual`, `IncomingPeering`.
    pub discovery_type: &'static str,
    /// `true` when we joined it (`status.outgoing.joined`).
    pub outgoing_joined: &'static str,
}

/// `liqo_reconciler_tls_handshakes_total` labels: `full` or `resumed`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandshakeLabels {
    pub kind: &'static str,
}

pub struct Metrics {
    registry: Registry,
    /// ForeignClusters by how they were found and whether we joined them (set when scraped).
    pub foreign_clusters: Family<ForeignClusterLabels, Gauge>,
    pub reconciles: Family<ReconcileLabels, Counter>,
    pub duration: Family<ControllerLabels, Histogram>,
    /// Peers with a running broadcaster (set when scraped).
    pub broadcasters: Gauge,
    /// 1 while this process holds the Lease and runs the controllers, else 0.
    pub leader: Gauge,
    /// The auth service's `POST /identity` answers, by result (`rate_limited`, `wrong_token`, …).
    pub auth_identity: Family<IdentityLabels, Counter>,
    /// Connections to the auth service closed because it was at its connection cap.
    pub auth_connections_refused: liqo_serve::Refused,
    /// Peers asked to join, by where they stand (set when scraped).
    pub peers: Family<PeerStateLabels, Gauge>,
    /// Seconds each peer asked to join has not been joined, 0 while joined (set when scraped).
    pub peer_unhealthy: Family<PeerLabels, Gauge>,
    /// The health period, so that alerts count in periods whatever it is set to.
    pub health_period: Gauge,
    /// The health call to a joined peer (its API server), by result.
    pub health_checks: Family<ResultLabels, Histogram>,
    /// Joins that stopped at a failing phase, by phase and reason.
    pub join_failures: Family<PhaseReasonLabels, Counter>,
    /// When the auth service's serving certificate expires (Unix time; 0 when unknown).
    pub auth_certificate_expiry: Gauge,
    /// Records held in the mDNS cache at the last check.
    pub mdns_cache_records: Gauge,
    /// Times the mDNS cache was emptied for holding more than its bound.
    pub mdns_cache_flushes: Counter,
    /// What the client's rate limit made requests to our API server wait.
    pub throttled: std::sync::Arc<crate::machinery::throttle::Waited>,
    /// Events left out over their kind's budget (`--events-per-second`), by reason.
    pub events_left_out: EventsLeftOut,
    /// Offers put on peers (grant, token, kubeconfig and PeeringRequest), by plan and by what
    /// was on the remote before.
    pub offers: Family<OfferLabels, Counter>,
    /// Connections to joined peers' API servers made before their turn, by what was found
    /// (`crate::machinery::connect_first`).
    pub connects_first: Family<OutcomeLabels, Counter>,
    /// TLS handshakes with peers' API servers, by kind: `full`, or `resumed` from the session
    /// ticket of the one before (the sessions the remote layer keeps).
    pub tls_handshakes: Family<HandshakeLabels, Counter>,
    /// Watch events of ForeignClusters that only told a settled status write of ours back, and
    /// so were not reconciled again (`crate::machinery::own_writes`).
    pub status_echoes_skipped: Counter,
    /// Identities issued to peers, by state (`waiting`: not used yet; `in_use`), as the last
    /// sweep found them (protocol §10).
    pub tenant_identities: Family<StateLabels, Gauge>,
    /// The most identities that may wait unused at once (`--max-waiting-identities`).
    pub waiting_identities_cap: Gauge,
    /// Identities retired with their tenant namespace because nobody used them in time.
    pub identities_retired: Counter,
    /// Parts of the install peers' identities stand on whose watch is in force.
    pub install_parts_watched: Gauge,
    /// ForeignCluster reconciles due and not yet in their turn (`--max-concurrent-reconciles`):
    /// waiting to connect first, connecting, or waiting for the turn itself.
    pub turns_waiting: Gauge,
    /// When each joined peer was last checked; its oldest is exported when scraped.
    pub checks: crate::reporting::checks::LastChecks,
    oldest_check: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Since when each peer asked to join has been seen not joined.
    unhealthy_since: Mutex<HashMap<PeerLabels, SystemTime>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("liqo_reconciler");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register("reconciles", "Reconciles run, by controller and result", reconciles.clone());
        let duration =
            Family::<ControllerLabels, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_1, 2.0, 16)));
        registry.register("reconcile_duration_seconds", "Time of one reconcile", duration.clone());
        let broadcasters = Gauge::default();
        registry.register("broadcasters", "Peers we keep an Advertisement in", broadcasters.clone());
        let foreign_clusters = Family::<ForeignClusterLabels, Gauge>::default();
        registry.register("foreign_clusters", "ForeignClusters by discovery type and outgoing peering", foreign_clusters.clone());
        let leader = Gauge::default();
        registry.register("leader", "1 while this process holds the Lease and runs the controllers", leader.clone());
        let auth_identity = Family::<IdentityLabels, Counter>::default();
        registry.register("auth_identity_requests", "POST /identity answers of the auth service, by result", auth_identity.clone());
        let auth_connections_refused = liqo_serve::Refused::default();
        registry.register(
            "auth_connections_refused",
            "Connections to the auth service closed at once because it was at its connection cap",
            auth_connections_refused.clone(),
        );
        liqo_serve::register_build_info(&mut registry);
        let peers = Family::<PeerStateLabels, Gauge>::default();
        registry.register("peers", "ForeignClusters asked to join, by state and the phase that holds them up", peers.clone());
        let peer_unhealthy = Family::<PeerLabels, Gauge>::default();
        registry.register(
            "peer_unhealthy_seconds",
            "Seconds a peer asked to join has not been joined (0 while joined)",
            peer_unhealthy.clone(),
        );
        let health_period = Gauge::default();
        registry.register("health_period_seconds", "Seconds between health checks of a joined peer", health_period.clone());
        let health_checks = Family::<ResultLabels, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.002, 2.0, 14)));
        registry.register(
            "peer_health_check_duration_seconds",
            "Time of the health call to a joined peer, by result",
            health_checks.clone(),
        );
        let join_failures = Family::<PhaseReasonLabels, Counter>::default();
        registry.register("join_failures", "Joins that stopped at a failing phase, by phase and reason", join_failures.clone());
        let auth_certificate_expiry = Gauge::default();
        registry.register(
            "auth_certificate_expiry_timestamp_seconds",
            "When the auth service's serving certificate expires (Unix time)",
            auth_certificate_expiry.clone(),
        );
        let mdns_cache_records = Gauge::default();
        registry.register("mdns_cache_records", "Records held in the mDNS cache at the last check", mdns_cache_records.clone());
        let mdns_cache_flushes = Counter::default();
        registry.register(
            "mdns_cache_flushes",
            "Times the mDNS cache was emptied for holding more records than its bound (a LAN flooding us)",
            mdns_cache_flushes.clone(),
        );
        let throttled = std::sync::Arc::new(crate::machinery::throttle::Waited::default());
        registry.register(
            "api_client_throttled_requests",
            "Requests to our API server that waited for the client's rate limit (--kube-api-qps, --kube-api-burst)",
            throttled.requests.clone(),
        );
        registry.register(
            "api_client_throttled_seconds",
            "Seconds requests to our API server waited for the client's rate limit, summed",
            throttled.seconds.clone(),
        );
        let events_left_out = EventsLeftOut::default();
        registry.register(
            "events_left_out",
            "Events left out over their kind's budget (--events-per-second, --events-burst), told in one Event about the Lease every 10 s",
            events_left_out.clone(),
        );
        let offers = Family::<OfferLabels, Counter>::default();
        registry.register(
            "offers",
            "Offers put on peers (a grant here, a token, the kubeconfig and our PeeringRequest there), by plan and by what was on the remote before",
            offers.clone(),
        );
        let connects_first = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "connects_first",
            "Connections to joined peers' API servers made before their reconcile's turn, by outcome: connected (the check then made in the turn), answered (the health check made over it at once, outside the turns), silent (no answer within the wait: reported unreachable without a call), failed (the check says why, in the turn), stale (waited too long for the turn: made again), closed (closed by the peer before a word: reported unreachable without a call), kept_answered (the health check made over the connection kept from the last one), kept_silent (no answer on the kept connection within the wait: reported unreachable)",
            connects_first.clone(),
        );
        let tls_handshakes = Family::<HandshakeLabels, Counter>::default();
        registry.register(
            "tls_handshakes",
            "TLS handshakes with peers' API servers, by kind: full, or resumed from the session ticket of the connection before (a full one at least every 16 connections to a peer)",
            tls_handshakes.clone(),
        );
        let status_echoes_skipped = Counter::default();
        registry.register(
            "status_echoes_skipped",
            "Watch events of ForeignClusters that only told a status write of a settled round back (the peer answered its check, or did not), not reconciled again: the next round is its requeue",
            status_echoes_skipped.clone(),
        );
        let tenant_identities = Family::<StateLabels, Gauge>::default();
        for state in ["waiting", "in_use"] {
            let _ = tenant_identities.get_or_create(&StateLabels { state });
        }
        registry.register(
            "tenant_identities",
            "Identities issued to peers, by state: waiting (issued, not used yet; capped by --max-waiting-identities) or in_use, as the last sweep found them",
            tenant_identities.clone(),
        );
        let waiting_identities_cap = Gauge::default();
        registry.register(
            "waiting_identities_cap",
            "The most identities that may wait unused at once; beyond, POST /identity answers 503",
            waiting_identities_cap.clone(),
        );
        let identities_retired = Counter::default();
        registry.register(
            "identities_retired",
            "Identities nobody used within three health periods, retired with their tenant namespace",
            identities_retired.clone(),
        );
        let install_parts_watched = Gauge::default();
        registry.register(
            "install_parts_watched",
            "Parts of the install peers' identities stand on (fixed ClusterRoles, the peer-Secret policy) followed by a watch; those not watched are looked at every 30 s",
            install_parts_watched.clone(),
        );
        let turns_waiting = Gauge::default();
        registry.register(
            "turns_waiting",
            "ForeignCluster reconciles due and not yet in their turn (--max-concurrent-reconciles), connecting first included: above 0 for long, the reconciler is behind",
            turns_waiting.clone(),
        );
        let oldest_check = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "oldest_check_seconds",
            "Seconds since the least recently checked joined peer was checked (whatever the check found); above two health periods while no reconcile waits for a turn, checks are not being made",
            oldest_check.clone(),
        );
        Self {
            registry,
            turns_waiting,
            install_parts_watched,
            checks: Default::default(),
            oldest_check,
            tenant_identities,
            waiting_identities_cap,
            identities_retired,
            offers,
            connects_first,
            tls_handshakes,
            status_echoes_skipped,
            throttled,
            events_left_out,
            foreign_clusters,
            reconciles,
            duration,
            broadcasters,
            leader,
            auth_identity,
            auth_connections_refused,
            peers,
            peer_unhealthy,
            health_period,
            health_checks,
            join_failures,
            auth_certificate_expiry,
            mdns_cache_records,
            mdns_cache_flushes,
            unhealthy_since: Mutex::default(),
        }
    }
}

/// Where a peer asked to join stands, as [`PeerStateLabels`]: label values only from the typed
/// lists (a phase or reason this version does not know is `Unknown`), so the series stay few.
/// Whether `fc` is joined, read from it as it is ([`Peer::joined`] of its summary, without
/// making the summary: a scrape asks it of every peer).
pub fn joined(fc: &liqo_api::ForeignCluster) -> bool {
    let Some(status) = fc.status.as_ref() else { return false };
    status.outgoing.as_ref().is_some_and(|o| o.joined)
        && status.conditions.iter().find(|c| c.type_ == ConditionType::Joined.as_str()).is_some_and(|c| c.status == "True")
}

pub fn peer_state(peer: &Peer) -> PeerStateLabels {
    let typed = |type_: &str, reason: &str| {
        let phase = ConditionType::PEERING.into_iter().find(|t| t.as_str() == type_).map_or("Unknown", ConditionType::as_str);
        (phase, Reason::parse(reason).map_or("Unknown", Reason::as_str))
    };
    if peer.joined() {
        return PeerStateLabels { state: "joined", phase: "", reason: "" };
    }
    if let Some(p) = peer.failing() {
        let (phase, reason) = typed(&p.type_, &p.reason);
        return PeerStateLabels { state: "failing", phase, reason };
    }
    match peer.phases.iter().find(|p| !p.passed()) {
        Some(p) => {
            let (phase, reason) = typed(&p.type_, &p.reason);
            PeerStateLabels { state: "joining", phase, reason }
        }
        None => PeerStateLabels { state: "joining", phase: "", reason: "" },
    }
}

impl Metrics {
    /// Records one reconcile of `controller` that started at `started`.
    pub fn observe<T>(&self, controller: &'static str, result: &Result<T, Error>, started: Instant) {
        let result = match result {
            Ok(_) => "ok",
            Err(e) => e.label(),
        };
        self.reconciles.get_or_create(&ReconcileLabels { controller, result }).inc();
        self.duration.get_or_create(&ControllerLabels { controller }).observe(started.elapsed().as_secs_f64());
    }

    /// Sets the ForeignCluster gauges from the clusters known now (every combination, so a
    /// count that drops to zero shows as zero).
    pub fn count_foreign_clusters<'a>(&self, fcs: impl IntoIterator<Item = &'a liqo_api::ForeignCluster>) {
        use liqo_api::DiscoveryType::{IncomingPeering, Lan, Manual, Wan};
        let mut counts = std::collections::HashMap::new();
        for fc in fcs {
            let joined = fc.status.as_ref().and_then(|s| s.outgoing.as_ref()).is_some_and(|o| o.joined);
            *counts.entry((fc.spec.discovery_type().as_str(), joined)).or_insert(0i64) += 1;
        }
        for t in [Lan, Wan, Manual, IncomingPeering] {
            for joined in [false, true] {
                let labels = ForeignClusterLabels { discovery_type: t.as_str(), outgoing_joined: if joined { "true" } else { "false" } };
                self.foreign_clusters.get_or_create(&labels).set(counts.get(&(t.as_str(), joined)).copied().unwrap_or(0));
            }
        }
    }

    /// Records one health call to a joined peer.
    pub fn observe_health_check<T>(&self, result: &Result<T, Error>, took: Duration) {
        let result = match result {
            Ok(_) => "ok",
            Err(e) => e.label(),
        };
        self.health_checks.get_or_create(&ResultLabels { result }).observe(took.as_secs_f64());
    }

    /// Counts an offer put on a peer: `plan` made, with `on_remote` found there before.
    pub fn offered(&self, plan: &'static str, on_remote: &'static str) {
        self.offers.get_or_create(&OfferLabels { plan, on_remote }).inc();
    }

    /// Counts what connecting first to a peer found.
    pub fn connected_first(&self, gate: &crate::machinery::connect_first::Gate) {
        use crate::machinery::connect_first::Gate;
        let outcome = match gate {
            Gate::Untried => return,
            Gate::Connected(..) => "connected",
            Gate::Silent(s) if s.closed => "closed",
            Gate::Silent(s) if s.on_kept => "kept_silent",
            Gate::Silent(_) => "silent",
            Gate::Failed => "failed",
            Gate::Answered(early) if early.fresh => "answered",
            Gate::Answered(_) => "kept_answered",
        };
        self.connects_first.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Counts a join that stopped at `phase` for `reason`.
    pub fn join_failed(&self, phase: ConditionType, reason: Reason) {
        self.join_failures.get_or_create(&PhaseReasonLabels { phase: phase.as_str(), reason: reason.as_str() }).inc();
    }

    /// Sets the peer gauges from the ForeignClusters known now, at `now`: every peer asked to
    /// join by state, and how long each has not been joined (counted from the first time it was
    /// seen so here, so from this process's start at most). Peers gone or no longer asked to
    /// join leave no series.
    pub fn count_peers<'a>(&self, fcs: impl IntoIterator<Item = &'a liqo_api::ForeignCluster>, now: SystemTime) {
        let mut since = self.unhealthy_since.lock().expect("not poisoned");
        let mut states: HashMap<PeerStateLabels, i64> = HashMap::new();
        let mut unhealthy = Vec::new();
        let mut still_unhealthy = HashMap::new();
        for fc in fcs {
            if !fc.spec.join() {
                continue;
            }
            let labels = PeerLabels {
                foreign_cluster: fc.metadata.name.clone().unwrap_or_default(),
                cluster_id: fc.spec.remote_cluster_id().unwrap_or_default().to_owned(),
            };
            // A joined peer (most of them, in steady state) is told without its summary.
            if joined(fc) {
                *states.entry(PeerStateLabels { state: "joined", phase: "", reason: "" }).or_default() += 1;
                unhealthy.push((labels, 0));
                continue;
            }
            *states.entry(peer_state(&Peer::of(fc))).or_default() += 1;
            let first = *since.get(&labels).unwrap_or(&now);
            let seconds = now.duration_since(first).unwrap_or_default().as_secs() as i64;
            still_unhealthy.insert(labels.clone(), first);
            unhealthy.push((labels, seconds));
        }
        *since = still_unhealthy;
        self.peers.clear();
        for (labels, count) in states {
            self.peers.get_or_create(&labels).set(count);
        }
        self.peer_unhealthy.clear();
        for (labels, seconds) in unhealthy {
            self.peer_unhealthy.get_or_create(&labels).set(seconds);
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        self.oldest_check.set(self.checks.oldest(Instant::now()).map_or(0.0, |d| d.as_secs_f64()));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String never fails");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_are_counted_by_result_label() {
        let m = Metrics::default();
        m.observe::<()>("foreign_cluster", &Ok(()), Instant::now());
        m.observe::<()>("foreign_cluster", &Err(Error::unreachable(crate::machinery::error::Step::Ids, "down")), Instant::now());
        m.broadcasters.set(3);
        let text = m.encode();
        assert!(text.contains(r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="ok"} 1"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="RemoteUnreachable"} 1"#), "{text}");
        assert!(text.contains("liqo_reconciler_broadcasters 3"), "{text}");
    }

    fn peer(name: &str, join: bool, joined: bool, conditions: &[(&str, &str, &str)]) -> liqo_api::ForeignCluster {
        let conditions: Vec<serde_json::Value> = conditions
            .iter()
            .map(|(t, s, r)| serde_json::json!({"type": t, "status": s, "reason": r, "message": "", "lastTransitionTime": "2026-11-23T10:00:00Z"}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": name},
            "spec": {"clusterIdentity": {"clusterID": format!("id-{name}")}, "join": join, "authUrl": "https://10.0.0.2:8443"},
            "status": {"conditions": conditions, "outgoing": {"joined": joined}}
        }))
        .unwrap()
    }

    fn series(text: &str, prefix: &str) -> Vec<String> {
        text.lines().filter(|l| l.starts_with(prefix)).map(str::to_owned).collect()
    }

    #[test]
    fn peers_are_counted_by_state_with_labels_from_the_typed_lists() {
        let joined = peer("a", true, true, &[("Trusted", "True", "Trusted"), ("Joined", "True", "Joined")]);
        let failing =
            peer("b", true, false, &[("Trusted", "False", "UntrustedAllowed"), ("RemoteReachable", "False", "RemoteUnreachable")]);
        let joining = peer("c", true, false, &[("Trusted", "True", "Trusted"), ("Joined", "Unknown", "Waiting")]);
        let odd = peer("d", true, false, &[("Trusted", "False", "SomethingNew")]);
        let not_asked = peer("e", false, false, &[]);
        let labels = |fc: &liqo_api::ForeignCluster| peer_state(&Peer::of(fc));
        let said_joined_not_ready = peer("f", true, true, &[("Joined", "False", "RemoteUnreachable")]);
        for fc in [&joined, &failing, &joining, &odd, &not_asked, &said_joined_not_ready] {
            assert_eq!(super::joined(fc), Peer::of(fc).joined(), "{:?}", fc.metadata.name);
        }
        assert_eq!(labels(&joined), PeerStateLabels { state: "joined", phase: "", reason: "" });
        assert_eq!(labels(&failing), PeerStateLabels { state: "failing", phase: "RemoteReachable", reason: "RemoteUnreachable" });
        assert_eq!(labels(&joining), PeerStateLabels { state: "joining", phase: "Joined", reason: "Waiting" });
        assert_eq!(
            labels(&odd),
            PeerStateLabels { state: "failing", phase: "Trusted", reason: "Unknown" },
            "unknown reasons stay one series"
        );

        let m = Metrics::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        m.count_peers([&joined, &failing, &joining, &not_asked], t0);
        let text = m.encode();
        assert!(text.contains(r#"liqo_reconciler_peers{state="joined",phase="",reason=""} 1"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_peers{state="failing",phase="RemoteReachable",reason="RemoteUnreachable"} 1"#), "{text}");
        assert_eq!(series(&text, "liqo_reconciler_peer_unhealthy_seconds{").len(), 3, "one series per peer asked to join: {text}");
        assert!(!text.contains(r#"foreign_cluster="e""#), "a peer not asked to join has no series: {text}");
    }

    #[test]
    fn unhealthy_seconds_count_from_the_first_sighting_and_restart_after_a_join() {
        let m = Metrics::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let down = peer("b", true, false, &[("RemoteReachable", "False", "RemoteUnreachable")]);
        let up = peer("b", true, true, &[("Joined", "True", "Joined")]);
        let line = |m: &Metrics| series(&m.encode(), "liqo_reconciler_peer_unhealthy_seconds{").join("\n");
        m.count_peers([&down], t0);
        assert_eq!(line(&m), r#"liqo_reconciler_peer_unhealthy_seconds{foreign_cluster="b",cluster_id="id-b"} 0"#);
        m.count_peers([&down], t0 + Duration::from_secs(70));
        assert!(line(&m).ends_with("} 70"), "{}", line(&m));
        m.count_peers([&up], t0 + Duration::from_secs(80));
        assert!(line(&m).ends_with("} 0"), "joined: {}", line(&m));
        m.count_peers([&down], t0 + Duration::from_secs(90));
        m.count_peers([&down], t0 + Duration::from_secs(95));
        assert!(line(&m).ends_with("} 5"), "a new outage counts from its own start: {}", line(&m));
        m.count_peers(std::iter::empty(), t0 + Duration::from_secs(100));
        assert_eq!(line(&m), "", "a peer gone leaves no series");
        m.count_peers([&down], t0 + Duration::from_secs(110));
        assert!(line(&m).ends_with("} 0"), "and is forgotten: {}", line(&m));
    }

    #[test]
    fn health_checks_join_failures_and_build_are_exported() {
        let m = Metrics::default();
        m.observe_health_check::<()>(&Ok(()), Duration::from_millis(3));
        m.observe_health_check::<()>(&Err(Error::unreachable(crate::machinery::error::Step::ApiServer, "down")), Duration::from_secs(10));
        m.join_failed(ConditionType::Joined, Reason::PeerRefused);
        m.join_failed(ConditionType::Joined, Reason::PeerRefused);
        m.offered("make", "missing");
        let silent = crate::machinery::connect_first::Silent {
            address: "10.0.0.1:6443".into(),
            waited: Duration::from_secs(5),
            closed: false,
            on_kept: false,
        };
        m.connected_first(&crate::machinery::connect_first::Gate::Silent(silent));
        m.connected_first(&crate::machinery::connect_first::Gate::Untried);
        m.health_period.set(30);
        m.tls_handshakes.get_or_create(&HandshakeLabels { kind: "resumed" }).inc();
        let text = m.encode();
        assert!(text.contains(r#"liqo_reconciler_tls_handshakes_total{kind="resumed"} 1"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_peer_health_check_duration_seconds_count{result="ok"} 1"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_peer_health_check_duration_seconds_count{result="RemoteUnreachable"} 1"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_join_failures_total{phase="Joined",reason="PeerRefused"} 2"#), "{text}");
        assert!(text.contains("liqo_reconciler_health_period_seconds 30\n"), "{text}");
        assert!(text.contains(r#"liqo_reconciler_offers_total{plan="make",on_remote="missing"} 1"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_connects_first_total{outcome="silent"} 1"#), "{text}");
        assert!(!text.contains(r#"outcome="untried""#), "not counted: {text}");
        assert!(text.contains(&format!("liqo_reconciler_build_info{{version=\"{}\"}} 1\n", env!("CARGO_PKG_VERSION"))), "{text}");
    }

    #[test]
    fn foreign_clusters_are_counted_by_type_and_peering() {
        use liqo_api::{DiscoveryType, ForeignCluster, ForeignClusterSpec, ForeignClusterStatus, OutgoingStatus};
        let fc = |t: DiscoveryType, joined: bool| {
            let mut f = ForeignCluster::new("x", ForeignClusterSpec { discovery_type: Some(t), ..Default::default() });
            f.status = Some(ForeignClusterStatus { outgoing: Some(OutgoingStatus { joined, ..Default::default() }), ..Default::default() });
            f
        };
        let m = Metrics::default();
        let fcs = [fc(DiscoveryType::Lan, true), fc(DiscoveryType::Lan, true), fc(DiscoveryType::Wan, false)];
        m.count_foreign_clusters(&fcs);
        let text = m.encode();
        assert!(text.contains(r#"liqo_reconciler_foreign_clusters{discovery_type="LAN",outgoing_joined="true"} 2"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_foreign_clusters{discovery_type="WAN",outgoing_joined="false"} 1"#), "{text}");
        m.count_foreign_clusters(&fcs[2..]);
        let text = m.encode();
        assert!(
            text.contains(r#"liqo_reconciler_foreign_clusters{discovery_type="LAN",outgoing_joined="true"} 0"#),
            "a count that drops shows 0: {text}"
        );
    }
}
