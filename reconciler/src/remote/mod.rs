//! Talking to other clusters. It may use [`tenancy`](crate::tenancy) (the auth service issues
//! identities), [`cluster`](crate::cluster), [`reporting`](crate::reporting) and the
//! [`machinery`](crate::machinery); no controller.
//!
//! - [`auth`]: the auth service (`/ids`, `/identity`, `/ca`) and its client;
//! - [`peer`]: everything the controllers ask of another cluster, behind one trait;
//! - [`client_over`]: a Kubernetes client over a connection already made;
//! - [`facts`]: what a round needs of a peer's kubeconfig, read once per kubeconfig;
//! - [`sessions`]: what a call to a peer's API server keeps from the one before (its TLS session).

pub mod auth;
pub mod client_over;
pub mod facts;
pub mod peer;
pub mod sessions;
