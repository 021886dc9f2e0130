//! Prometheus metrics of the webhook, served on the plain-HTTP operations port. The alert
//! rules and the Grafana dashboard of `manifests/monitoring/` use these names
//! (`image/tests/monitoring.rs` checks them).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::admission::Endpoint;
use crate::denial::Reason;

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
    /// When the serving certificate expires (Unix time; 0 when unknown).
    pub certificate_expiry: Gauge,
    pub admissions: Family<AdmissionLabels, Counter>,
    pub duration: Family<EndpointLabels, Histogram>,
    pub bad_requests: Family<ReasonLabels, Counter>,
    pub tls_reloads: Family<ReasonLabels, Counter>,
    /// The decision-time histogram of each endpoint, resolved once (no family lookup per review).
    duration_handles: [Histogram; 2],
}

fn endpoint_index(endpoint: Endpoint) -> usize {
    match endpoint {
        Endpoint::Validate => 0,
        Endpoint::Mutate => 1,
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("liqo_webhook");
        let admissions = Family::<AdmissionLabels, Counter>::default();
        registry.register("admissions", "Admission reviews answered, by decision and rule", admissions.clone());
        let duration =
            Family::<EndpointLabels, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_025, 2.0, 16)));
        registry.register("admission_duration_seconds", "Time to decide one admission review", duration.clone());
        let bad_requests = Family::<ReasonLabels, Counter>::default();
        registry.register("bad_requests", "Requests refused before any decision (malformed body, wrong type...)", bad_requests.clone());
        let tls_reloads = Family::<ReasonLabels, Counter>::default();
        registry.register("tls_reloads", "Serving certificate reloads, by result", tls_reloads.clone());
        let duration_handles =
            [Endpoint::Validate, Endpoint::Mutate].map(|e| duration.get_or_create(&EndpointLabels { endpoint: e.as_str() }).clone());
        liqo_serve::register_build_info(&mut registry);
        let certificate_expiry = Gauge::default();
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "When the serving certificate expires (Unix time)",
            certificate_expiry.clone(),
        );
        Self { registry, certificate_expiry, admissions, duration, bad_requests, tls_reloads, duration_handles }
    }
}

impl Metrics {
    /// Counts certificate reloads by result and keeps the expiry of the certificate served
    /// (for [`crate::tls::ReloadingCert::spawn_reloader`]).
    pub fn tls_reload_observer(self: &Arc<Self>, cert: Arc<crate::tls::ReloadingCert>) -> impl Fn(&'static str) + Send + Sync + 'static {
        let metrics = self.clone();
        metrics.served(&cert);
        move |reason| {
            metrics.tls_reloads.get_or_create(&ReasonLabels { reason }).inc();
            metrics.served(&cert);
        }
    }

    /// Sets the certificate expiry from the leaf `cert` serves now.
    pub fn served(&self, cert: &crate::tls::ReloadingCert) {
        self.certificate_expiry.set(liqo_certs::inspect::leaf_not_after_unix(&cert.chain()));
    }

    /// Records one answered review: its decision time and its outcome.
    pub fn record_admission(&self, endpoint: Endpoint, kind: &'static str, operation: &'static str, denied: Option<Reason>, seconds: f64) {
        self.duration_handles[endpoint_index(endpoint)].observe(seconds);
        self.admissions
            .get_or_create(&AdmissionLabels {
                endpoint: endpoint.as_str(),
                kind,
                operation,
                decision: if denied.is_some() { "denied" } else { "allowed" },
                reason: denied.map_or("", Reason::label),
            })
            .inc();
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

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn recorded_admissions_are_exposed_with_their_labels() {
        let m = Metrics::default();
        m.record_admission(Endpoint::Validate, "PeeringRequest", "CREATE", None, 0.000_01);
        m.record_admission(Endpoint::Validate, "PeeringRequest", "CREATE", None, 0.000_01);
        m.record_admission(Endpoint::Validate, "PeeringRequest", "CREATE", Some(Reason::Policy), 0.000_01);
        m.record_admission(Endpoint::Mutate, "ForeignCluster", "UPDATE", None, 0.001);
        let text = m.encode();
        let allowed =
            r#"liqo_webhook_admissions_total{endpoint="validate",kind="PeeringRequest",operation="CREATE",decision="allowed",reason=""} 2"#;
        assert!(text.contains(allowed), "{text}");
        let denied = r#"liqo_webhook_admissions_total{endpoint="validate",kind="PeeringRequest",operation="CREATE",decision="denied",reason="policy"} 1"#;
        assert!(text.contains(denied), "{text}");
        assert!(text.contains(r#"operation="UPDATE",decision="allowed",reason=""} 1"#), "{text}");
        assert_eq!(
            line(&text, r#"liqo_webhook_admission_duration_seconds_count{endpoint="validate"}"#).unwrap().rsplit(' ').next(),
            Some("3")
        );
        assert_eq!(
            line(&text, r#"liqo_webhook_admission_duration_seconds_count{endpoint="mutate"}"#).unwrap().rsplit(' ').next(),
            Some("1")
        );
    }
}
