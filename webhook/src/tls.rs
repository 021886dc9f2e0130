//! The serving certificate and HTTPS plumbing shared with the auth service (see
//! the `liqo-serve` crate).

pub use liqo_serve::{CertFiles, ReloadingCert, certified_key, serve_https, server_config, shutdown_signal};
