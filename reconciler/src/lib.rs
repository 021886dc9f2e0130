//! The Liqo reconciler: the controllers of the discovery and peering protocol.
//!
//! Built so far: the cluster identity ([`identity`]), the ClusterConfig singleton
//! ([`config`]), both kept by [`singleton`], and the auth service ([`auth`]) with the access it
//! grants peers ([`access`]).

pub mod access;
pub mod auth;
pub mod conditions;
pub mod config;
pub mod error;
pub mod identity;
pub mod singleton;

pub use error::{Error, Result};
