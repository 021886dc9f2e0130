//! Prometheus metrics of the reconciler, served on the plain-HTTP operations port.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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

pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ReconcileLabels, Counter>,
    pub duration: Family<ControllerLabels, Histogram>,
    /// Peers with a running broadcaster (set when scraped).
    pub broadcasters: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("liqo_reconciler");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register("reconciles", "Reconciles run, by controller and result", reconciles.clone());
        let duration = Family::<ControllerLabels, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_1, 2.0, 16)));
        registry.register("reconcile_duration_seconds", "Time of one reconcile", duration.clone());
        let broadcasters = Gauge::default();
        registry.register("broadcasters", "Peers we keep an Advertisement in", broadcasters.clone());
        Self { registry, reconciles, duration, broadcasters }
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
        m.observe::<()>("foreign_cluster", &Err(Error::remote("auth service", "down")), Instant::now());
        m.broadcasters.set(3);
        let text = m.encode();
        assert!(text.contains(r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="ok"} 1"#), "{text}");
        assert!(text.contains(r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="RemoteUnreachable"} 1"#), "{text}");
        assert!(text.contains("liqo_reconciler_broadcasters 3"), "{text}");
    }
}
