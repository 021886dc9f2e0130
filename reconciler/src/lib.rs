//! The Liqo reconciler: the controllers of the discovery and peering protocol.
//!
//! - [`identity`] and [`config`]: the cluster ID and the ClusterConfig singleton, kept by
//!   [`singleton`];
//! - [`auth`]: the auth service (`/ids`, `/identity`, `/ca`) and its client;
//! - [`tenancy`]: each peer's tenant namespace, the identities granted there, who may hold
//!   them, and their retirement;
//! - [`foreign_cluster`]: the home side of peering (trust, CA, join, health, unjoin), talking
//!   to peers through [`peer`];
//! - [`incoming`] and [`broadcaster`]: the remote side (accepted requests, Advertisements sent
//!   to peers, with [`resources`]);
//! - [`discovery`]: mDNS and DNS-SD discovery, merged into ForeignClusters, and the
//!   standalone `discover` command;
//! - [`stores`]: the watch-fed caches everything reads, and [`slim_store`]: those that keep
//!   only a name and the little read of each object.
//!
//! ## Layers
//!
//! Each module uses modules of its own layer or of a layer below, never above, and no two
//! modules use each other around a circle. `tests/layers.rs` reads every `crate::` path and
//! holds the code to this table:
//!
//! | layer (top first) | modules |
//! |---|---|
//! | the binary and its wiring | `command`, `main` |
//! | the protocol's controllers | `foreign_cluster` (outgoing), `incoming`, `broadcaster`, `discovery` |
//! | what the controllers share | `context` |
//! | talking to other clusters | `auth` (the service and its client), `peer`, `client_over`, `published` |
//! | tenancy | `tenancy` (tenant namespaces, grants, identities, their binding and retirement) |
//! | this cluster | `identity`, `config`, `addresses` |
//! | Kubernetes machinery | `error`, `conditions`, `events`, `event_budget`, `metrics`, `stores`, `slim_store`, `own_writes`, `writes`, `finalizer`, `singleton`, `managers`, `leader`, `throttle`, `work_queue`, `connect_first`, `resources` |

pub mod addresses;
pub mod auth;
pub mod broadcaster;
pub mod client_over;
pub mod command;
pub mod conditions;
pub mod config;
pub mod connect_first;
pub mod context;
pub mod discovery;
pub mod error;
pub mod event_budget;
pub mod events;
pub mod finalizer;
pub mod foreign_cluster;
pub mod identity;
pub mod incoming;
pub mod leader;
pub mod managers;
pub mod metrics;
pub mod own_writes;
pub mod peer;
pub mod published;
pub mod resources;
pub mod singleton;
pub mod slim_store;
pub mod stores;
pub mod tenancy;
pub mod throttle;
pub mod work_queue;
pub mod writes;

pub use error::{Error, Result};
