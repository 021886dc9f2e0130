//! Prometheus metrics of the reconciler, served on the plain-HTTP operations port.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::auth::service::IdentityLabels;
use crate::error::Error;

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
pub struct ForeignClusterLabels {
    /// `LAN`, `WAN`, `Manual`, `IncomingPeering`.
    pub discovery_type: &'static str,
    /// `true` when we joined it (`status.outgoing.joined`).
    pub outgoing_joined: &'static str,
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
        Self { registry, foreign_clusters, reconciles, duration, broadcasters, leader, auth_identity, auth_connections_refused }
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

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
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
        m.observe::<()>("foreign_cluster", &Err(Error::unreachable(crate::error::Step::Ids, "down")), Instant::now());
        m.broadcasters.set(3);
        let text = m.encode();
        assert!(text.contains(r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="ok"} 1"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="RemoteUnreachable"} 1"#), "{text}");
        assert!(text.contains("liqo_reconciler_broadcasters 3"), "{text}");
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
