//! How the reconciler tells what happened: status conditions, Kubernetes Events and their
//! budget, and Prometheus metrics. It may use the [`machinery`](crate::machinery) only.
//!
//! - [`conditions`]: one condition per type, `lastTransitionTime` kept while the status holds;
//! - [`events`]: one way to publish Events, best effort; [`event_budget`]: how many go out;
//! - [`metrics`]: the metrics served on the operations port; [`checks`]: when each joined peer
//!   was last checked, and [`checks_record`] the record of it the dashboard reads.

pub mod checks;
pub mod checks_record;
pub mod conditions;
pub mod event_budget;
pub mod events;
pub mod metrics;
