//! How the reconciler tells what happened: status conditions, Kubernetes Events and their
//! budget, and Prometheus metrics. It may use the [`machinery`](crate::machinery) only.
//!
//! - [`conditions`]: one condition per type, `lastTransitionTime` kept while the status holds;
//! - [`events`]: one way to publish Events, best effort; [`event_budget`]: how many go out;
//! - [`metrics`]: the metrics served on the operations port; [`checks`]: when each joined peer
//!   was last checked.

pub mod checks;
pub mod conditions;
pub mod event_budget;
pub mod events;
pub mod metrics;
