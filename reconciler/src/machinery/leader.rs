//! One active reconciler: the controllers, LAN discovery and the broadcasters run only while
//! this process holds Lease `liqo-reconciler` in the Liqo namespace (kube-lease-manager). A
//! second replica, or a copy started from a laptop against the same cluster, waits as a
//! standby (its auth service and ops port still answer); the holder releases the Lease on
//! shutdown so a standby takes over at once, and a holder that loses it exits.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Name of the Lease.
pub const LEASE_NAME: &str = "liqo-reconciler";
/// Seconds a holder's claim lasts without renewal.
pub const LEASE_SECONDS: u64 = 15;

/// A claim on the Lease: `is_leader` says whether it is held now (clone it to wait elsewhere).
pub struct Leadership {
    pub is_leader: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

/// This process's identity in the Lease: the pod name, else the host name and a random suffix.
pub fn identity() -> String {
    std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_else(|_| "local".into());
        format!("{host}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
    })
}

/// The field manager a contender applies the Lease with: its own, naming its identity.
pub fn field_manager(identity: &str) -> String {
    format!("liqo-reconciler-{identity}")
}

/// Starts competing for the Lease.
pub async fn compete(client: Client, namespace: &str, identity: &str) -> Result<Leadership, LeaseManagerError> {
    let manager = LeaseManagerBuilder::new(client, LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(LEASE_SECONDS)
        .with_grace(5)
        // A field manager of its own per contender: server-side apply then reports a conflict
        // when another process holds the Lease (one shared name would let both win).
        .with_field_manager(field_manager(identity))
        .build()
        .await?;
    let (is_leader, task) = manager.watch().await;
    Ok(Leadership { is_leader, task })
}

impl Leadership {
    /// Waits until this process holds the Lease; false if the competition ended first.
    pub async fn acquired(&mut self) -> bool {
        self.is_leader.wait_for(|held| *held).await.is_ok()
    }

    /// Waits until the Lease, once held, is lost (or the competition ended).
    pub async fn lost(&mut self) {
        if self.acquired().await {
            let _ = self.is_leader.wait_for(|held| !*held).await;
        }
    }

    /// Gives the Lease up (if held) so a standby takes over at once.
    pub async fn release(self) {
        drop(self.is_leader);
        match tokio::time::timeout(Duration::from_secs(5), self.task).await {
            Ok(Ok(Ok(_))) => tracing::info!("Lease released"),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "releasing the Lease failed"),
            Ok(Err(e)) => tracing::warn!(error = %e, "the Lease task failed"),
            Err(_) => tracing::warn!("releasing the Lease timed out"),
        }
    }
}
