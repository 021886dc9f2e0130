//! The auth service (protocol §3): a cluster's public HTTPS endpoint. [`service`] serves `/ids`,
//! `/identity` and `/ca`, with [`rate`] limiting `/identity` per source;
//! [`client`] calls a peer's.

pub mod client;
pub mod rate;
pub mod service;
pub mod wire;
