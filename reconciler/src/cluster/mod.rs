//! This cluster: who it is and what it tells its peers. It may use [`reporting`](crate::reporting)
//! and the [`machinery`](crate::machinery); it never talks to another cluster.
//!
//! - [`identity`]: the cluster ID; [`config`]: the ClusterConfig singleton;
//! - [`addresses`]: the URLs peers must use for this cluster, found in the cluster;
//! - [`published`]: what this cluster tells its peers (URLs, CA fingerprints) and its status;
//! - [`resources`]: the resources summary our Advertisements carry.

pub mod addresses;
pub mod config;
pub mod holder_key;
pub mod identity;
pub mod published;
pub mod resources;
