//! Prometheus metrics of the webhook, served on the plain-HTTP operations port.

use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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
    pub admissions: Family<AdmissionLabels, Counter>,
    pub duration: Family<EndpointLabels, Histogram>,
    pub bad_requests: Family<ReasonLabels, Counter>,
    pub tls_reloads: Family<ReasonLabels, Counter>,
    /// The admission counters and histograms, resolved once per label set: recording an
    /// admission then costs no label hashing and no family lock (the families still hold and
    /// encode them).
    admission_handles: Box<[OnceLock<Counter>]>,
    duration_handles: [Histogram; 2],
}

const KINDS: [&str; 4] = ["PeeringRequest", "FederationRequest", "ForeignCluster", "other"];
const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];
/// Allowed, or denied by one of the reasons.
const OUTCOMES: usize = 1 + Reason::ALL.len();

fn endpoint_index(endpoint: Endpoint) -> usize {
    match endpoint {
        Endpoint::Validate => 0,
        Endpoint::Mutate => 1,
    }
}

/// The slot of a label set in `admission_handles`, if it has one.
fn admission_slot(endpoint: Endpoint, kind: &str, operation: &str, denied: Option<Reason>) -> Option<usize> {
    let kind = KINDS.iter().position(|k| *k == kind)?;
    let operation = OPERATIONS.iter().position(|o| *o == operation)?;
    let outcome = match denied {
        None => 0,
        Some(reason) => 1 + reason.index(),
    };
    if outcome >= OUTCOMES {
        return None;
    }
    Some(((endpoint_index(endpoint) * KINDS.len() + kind) * OPERATIONS.len() + operation) * OUTCOMES + outcome)
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
        let duration_handles = [Endpoint::Validate, Endpoint::Mutate]
            .map(|e| duration.get_or_create(&EndpointLabels { endpoint: e.as_str() }).clone());
        let slots = 2 * KINDS.len() * OPERATIONS.len() * OUTCOMES;
        let admission_handles = (0..slots).map(|_| OnceLock::new()).collect();
        Self { registry, admissions, duration, bad_requests, tls_reloads, admission_handles, duration_handles }
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

    /// Records one answered review: its decision time and its outcome.
    pub fn record_admission(&self, endpoint: Endpoint, kind: &'static str, operation: &'static str, denied: Option<Reason>, seconds: f64) {
        self.duration_handles[endpoint_index(endpoint)].observe(seconds);
        let labels = || AdmissionLabels {
            endpoint: endpoint.as_str(),
            kind,
            operation,
            decision: if denied.is_some() { "denied" } else { "allowed" },
            reason: denied.map_or("", Reason::label),
        };
        match admission_slot(endpoint, kind, operation, denied) {
            Some(slot) => self.admission_handles[slot].get_or_init(|| self.admissions.get_or_create(&labels()).clone()).inc(),
            None => self.admissions.get_or_create(&labels()).inc(),
        };
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
    fn every_label_set_has_its_own_slot() {
        let mut seen = std::collections::HashSet::new();
        for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
            for kind in KINDS {
                for operation in OPERATIONS {
                    for denied in std::iter::once(None).chain(Reason::ALL.iter().copied().map(Some)) {
                        let slot = admission_slot(endpoint, kind, operation, denied).expect("a slot");
                        assert!(slot < 2 * KINDS.len() * OPERATIONS.len() * OUTCOMES);
                        assert!(seen.insert(slot), "slot {slot} given twice");
                    }
                }
            }
        }
        assert_eq!(admission_slot(Endpoint::Validate, "Pod", "CREATE", None), None);
    }

    #[test]
    fn recorded_admissions_are_exposed_with_their_labels() {
        let m = Metrics::default();
        m.record_admission(Endpoint::Validate, "PeeringRequest", "CREATE", None, 0.000_01);
        m.record_admission(Endpoint::Validate, "PeeringRequest", "CREATE", None, 0.000_01);
        m.record_admission(Endpoint::Validate, "PeeringRequest", "CREATE", Some(Reason::Policy), 0.000_01);
        m.record_admission(Endpoint::Mutate, "ForeignCluster", "UPDATE", None, 0.001);
        // A label set outside the table still counts (through the family).
        m.record_admission(Endpoint::Mutate, "ForeignCluster", "PATCH", None, 0.001);
        let text = m.encode();
        let allowed = r#"liqo_webhook_admissions_total{endpoint="validate",kind="PeeringRequest",operation="CREATE",decision="allowed",reason=""} 2"#;
        assert!(text.contains(allowed), "{text}");
        let denied = r#"liqo_webhook_admissions_total{endpoint="validate",kind="PeeringRequest",operation="CREATE",decision="denied",reason="policy"} 1"#;
        assert!(text.contains(denied), "{text}");
        assert!(text.contains(r#"operation="UPDATE",decision="allowed",reason=""} 1"#), "{text}");
        assert!(text.contains(r#"operation="PATCH",decision="allowed",reason=""} 1"#), "{text}");
        assert_eq!(line(&text, r#"liqo_webhook_admission_duration_seconds_count{endpoint="validate"}"#).unwrap().rsplit(' ').next(), Some("3"));
        assert_eq!(line(&text, r#"liqo_webhook_admission_duration_seconds_count{endpoint="mutate"}"#).unwrap().rsplit(' ').next(), Some("2"));
    }
}
