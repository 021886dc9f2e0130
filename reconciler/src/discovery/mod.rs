//! Discovery (protocol §4–§5): how clusters find each other.
//!
//! - [`records`]: what TXT/SRV records say (pure); [`merge`]: one ForeignCluster per cluster
//!   ID whatever finds it (pure); [`expiry`]: the strikes of LAN clusters (pure);
//! - [`mdns`] and [`dnssd`]: the I/O of mDNS (mdns-sd) and DNS-SD (hickory-resolver);
//! - [`identify`]: which cluster each DNS-SD target is; [`writer`]: discovery's writes of
//!   ForeignClusters;
//! - [`lan`]: LAN discovery and advertisement in a cluster; [`search_domain`]: the
//!   SearchDomain controller; [`discover`]: the standalone `discover` command.
//!
//! It may use [`context`](crate::context) and every room below it; no other controller.

pub mod discover;
pub mod dnssd;
pub mod expiry;
pub mod identify;
pub mod lan;
pub mod mdns;
pub mod memory;
pub mod merge;
pub mod records;
pub mod search_domain;
pub mod writer;
