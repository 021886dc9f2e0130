//! The serving certificate and HTTPS plumbing shared with the auth service (see
//! [`liqo_certs::serving`]).

pub use liqo_certs::serving::{CertFiles, ReloadingCert, certified_key, serve_https, server_config, shutdown_signal};
