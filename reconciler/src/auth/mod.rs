//! The auth service (SPEC §3): a cluster's public HTTPS endpoint. [`service`] serves `/ids`,
//! `/identity` and `/ca`.

pub mod service;
pub mod wire;
