//! Talking to other clusters. It may use [`tenancy`](crate::tenancy) (the auth service issues
//! identities), [`cluster`](crate::cluster), [`reporting`](crate::reporting) and the
//! [`machinery`](crate::machinery); no controller.
//!
//! - [`auth`]: the auth service (`/ids`, `/identity`, `/ca`) and its client;
//! - [`peer`]: everything the controllers ask of another cluster, behind one trait;
//! - [`client_over`]: a Kubernetes client over a connection already made;
//! - [`facts`]: what a round needs of a peer's kubeconfig, read once per kubeconfig;
//! - [`sessions`]: what a call to a peer's API server keeps from the one before (its TLS session);
//! - [`kept`]: health checks over a connection kept from one check to the next, with the TLS
//!   records ([`record`]) and the one HTTP exchange ([`http1`]) they need.

pub mod auth;
pub mod client_over;
pub mod facts;
pub mod http1;
pub mod kept;
pub mod peer;
pub mod record;
pub mod sessions;
