//! Kubernetes machinery, the floor every other room stands on. It knows nothing of the
//! protocol's objects' meaning and uses no other room of this crate.
//!
//! - [`error`]: the crate's one error type, with a stable label for each variant;
//! - [`stores`] and [`slim_store`]: the watch-fed caches everything reads; [`index`]: their
//!   objects by a key, without a scan;
//! - [`own_writes`]: the versions our own status writes left, so their echoes are skipped;
//! - [`writes`]: server-side apply and delete; [`finalizer`]: adding and removing ours;
//!   [`managers`]: upgrades from releases that wrote status by merge patch;
//! - [`singleton`]: keeping one named object in existence;
//! - [`leader`]: one active reconciler; [`throttle`]: our own API server's request limit;
//! - [`work_queue`]: which objects a controller reconciles and when; [`connect_first`]:
//!   connecting to joined peers before their reconcile takes a turn.

pub mod connect_first;
pub mod error;
pub mod finalizer;
pub mod index;
pub mod leader;
pub mod managers;
pub mod own_writes;
pub mod singleton;
pub mod slim_store;
pub mod stores;
pub mod throttle;
pub mod work_queue;
pub mod writes;
