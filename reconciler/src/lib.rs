//! The Liqo reconciler: the controllers of the discovery and peering protocol.
//!
//! ## Rooms
//!
//! Each folder holds one concern and says in its first lines what it holds and what it may use:
//!
//! - [`command`] (and `main.rs`): the binary, its flags and the wiring of everything below;
//! - the protocol's controllers: [`foreign_cluster`] (outgoing: trust, CA, join, health,
//!   unjoin), [`incoming`] (accepted requests and the broadcasters that send our Advertisement
//!   to their peers), [`discovery`] (mDNS and DNS-SD, merged into ForeignClusters, and the
//!   standalone `discover` command);
//! - [`context`]: what the controllers share, built once by the binary;
//! - [`remote`]: talking to other clusters (the auth service and its client, the peer
//!   connections);
//! - [`tenancy`]: each peer's tenant namespace, the identities granted there, who may hold them,
//!   and their retirement;
//! - [`cluster`]: this cluster (its ID, its ClusterConfig, its addresses, what it publishes);
//! - [`reporting`]: conditions, Events and their budget, metrics;
//! - [`machinery`]: Kubernetes machinery (the error type, stores, own writes, managers,
//!   singletons, finalizers, throttling, leadership, the work queue).
//!
//! ## Layers
//!
//! Each room uses rooms of its own layer or of a layer below, never above; no two modules use
//! each other around a circle, within a room or across rooms. `tests/layers.rs` reads every
//! `crate::` and `super::` path and holds the code to this table:
//!
//! | layer (top first) | rooms |
//! |---|---|
//! | the binary and its wiring | `command`, `main` |
//! | the protocol's controllers | `foreign_cluster` (outgoing), `incoming`, `discovery` |
//! | what the controllers share | `context` |
//! | talking to other clusters | `remote` |
//! | tenancy | `tenancy` |
//! | this cluster | `cluster` |
//! | reporting | `reporting` |
//! | Kubernetes machinery | `machinery` |

pub mod cluster;
pub mod command;
pub mod context;
pub mod discovery;
pub mod foreign_cluster;
pub mod incoming;
pub mod machinery;
pub mod remote;
pub mod reporting;
pub mod tenancy;

pub use machinery::error::{Error, Result};
