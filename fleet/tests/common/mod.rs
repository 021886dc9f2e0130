//! What the fleet's tests share: a hub started from the workspace's debug binaries, and a
//! fleet (a port each, in this machine's namespace: on loopback only) acting toward it.
#![allow(dead_code)] // each test binary uses its own part

use std::sync::Arc;
use std::time::Duration;

use liqo_fleet::advertiser::{Broadcasters, HubAccess};
use liqo_fleet::hub::Hub;
use liqo_fleet::server::{Endpoints, Fleet};

/// The tests' health period (and the peers' advertise period).
pub const HEALTH: Duration = Duration::from_secs(4);

/// Where `cargo test --workspace` put liqo-webhook, liqo-reconciler and liqo-dashboard (beside the test's
/// folder), or `None` after saying why not.
pub fn binaries() -> Option<std::path::PathBuf> {
    let dir = std::env::current_exe().ok()?.parent()?.parent()?.to_owned();
    let missing: Vec<&str> = ["liqo-webhook", "liqo-reconciler", "liqo-dashboard"].into_iter().filter(|b| !dir.join(b).exists()).collect();
    if !missing.is_empty() {
        panic!("{} not built in {} (cargo test --workspace builds them)", missing.join(" and "), dir.display());
    }
    Some(dir)
}

/// A hub with the health period [`HEALTH`], or `None` (after a loud skip) without API server
/// binaries.
pub async fn hub() -> Option<Hub> {
    hub_with(&[]).await
}

/// [`hub`], the reconciler given `more` flags.
pub async fn hub_with(more: &[&str]) -> Option<Hub> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Err(why) = liqo_testenv::assets() {
        liqo_testenv::skip(&why);
        return None;
    }
    let mut flags = vec![format!("--health-period-seconds={}", HEALTH.as_secs())];
    flags.extend(more.iter().map(|f| f.to_string()));
    Some(Hub::start(&binaries()?, &flags).await.expect("the hub"))
}

/// A hub and `n` peers acting toward it.
pub async fn hub_and_fleet(n: usize) -> Option<(Hub, Arc<Fleet>, Duration)> {
    hub_and_fleet_with(n, &[]).await
}

/// [`hub_and_fleet`], the reconciler given `more` flags.
pub async fn hub_and_fleet_with(n: usize, more: &[&str]) -> Option<(Hub, Arc<Fleet>, Duration)> {
    let hub = hub_with(more).await?;
    let access = HubAccess { url: hub.cp.url.clone(), ca_pem: hub.cp.ca_pem.clone(), period: HEALTH, watch: true };
    // As `liqo-fleet` runs them: in a child process of their own.
    let broadcasters = Broadcasters::Child(env!("CARGO_BIN_EXE_liqo-fleet").into());
    let fleet = Fleet::start(n, Endpoints::Ports, access, &broadcasters).await.expect("the fleet");
    Some((hub, fleet, HEALTH))
}
