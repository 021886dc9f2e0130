//! Discovery's writer of ForeignClusters, for LAN and WAN alike: applies a [`merge`] decision,
//! deletes a cluster no longer found, with an Event either way.
//!
//! [`merge`]: super::merge

use crate::reporting::events::Recorder;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use liqo_api::ForeignCluster;

use super::merge::Change;
use crate::machinery::error::{Result, is_conflict, is_not_found};

/// Field manager of what discovery writes.
pub const FIELD_MANAGER: &str = liqo_api::chosen::DISCOVERY_FIELD_MANAGER;

/// Applies one merge decision; a new ForeignCluster gets a `Discovered` Event saying how.
pub async fn apply(client: &Client, change: Change, recorder: Option<&Recorder>, how: &str) -> Result<()> {
    let api = Api::<ForeignCluster>::all(client.clone());
    match change {
        Change::Unchanged => Ok(()),
        Change::Create(fc) => {
            match api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, &fc).await {
                Ok(created) => {
                    let id = created.spec.cluster_identity.as_ref().map(|c| c.cluster_id.clone()).unwrap_or_default();
                    crate::reporting::events::publish(
                        recorder,
                        &created,
                        false,
                        "Discovery",
                        "Discovered",
                        format!("cluster {id} found {how}"),
                    )
                    .await;
                    Ok(())
                }
                Err(e) if is_conflict(&e) => Ok(()), // our store had not seen it yet; next round merges
                Err(e) => Err(e.into()),
            }
        }
        Change::Patch { name, patch } => {
            api.patch(&name, &PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, &Patch::Merge(patch))
                .await?;
            Ok(())
        }
    }
}

/// Deletes ForeignCluster `fc` (its finalizer tears the peering down first), with a Normal
/// Event of `reason` and `note` on it.
pub async fn delete_foreign(client: &Client, fc: &ForeignCluster, recorder: Option<&Recorder>, reason: &str, note: String) -> Result<()> {
    match Api::<ForeignCluster>::all(client.clone()).delete(&fc.name_any(), &DeleteParams::default()).await {
        Ok(_) => {
            crate::reporting::events::publish(recorder, fc, false, "Discovery", reason, note).await;
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
