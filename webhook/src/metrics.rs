//! Prometheus metrics of the webhook, served on the plain-HTTP operations port.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    pub endpoint: &'static str,
    pub kind: &'static str,
    pub operation: &'static str,
    pub decision: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

pub struct Metrics {
    registry: Registry,
    pub admissions: Family<AdmissionLabels, Counter>,
    pub duration: Family<EndpointLabels, Histogram>,
    pub bad_requests: Family<ReasonLabels, Counter>,
    pub tls_reloads: Family<ReasonLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("liqo_webhook");
        let admissions = Family::<AdmissionLabels, Counter>::default();
        registry.register("admissions", "Admission reviews answered, by decision and rule", admissions.clone());
        let duration = Family::<EndpointLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_025, 2.0, 16))
        });
        registry.register("admission_duration_seconds", "Time to decide one admission review", duration.clone());
        let bad_requests = Family::<ReasonLabels, Counter>::default();
        registry.register("bad_requests", "Requests refused before any decision (malformed body, wrong type...)", bad_requests.clone());
        let tls_reloads = Family::<ReasonLabels, Counter>::default();
        registry.register("tls_reloads", "Serving certificate reloads, by result", tls_reloads.clone());
        Self { registry, admissions, duration, bad_requests, tls_reloads }
    }
}

impl Metrics {
    /// Counts certificate reloads by result (for [`crate::tls::ReloadingCert::spawn_reloader`]).
    pub fn tls_reload_observer(self: &Arc<Self>) -> impl Fn(&'static str) + Send + Sync + 'static {
        let metrics = self.clone();
        move |reason| {
            metrics.tls_reloads.get_or_create(&ReasonLabels { reason }).inc();
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String never fails");
        out
    }
}
