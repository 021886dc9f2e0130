//! The ClusterConfig singleton `liqo-configuration`: created with the defaults when absent;
//! its spec is published so every toggle takes effect at runtime.

use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use liqo_api::names::CLUSTER_CONFIG_NAME;
use liqo_api::{ClusterConfig, ClusterConfigSpec};

use crate::machinery::error::{Result, is_conflict};
use crate::machinery::singleton::Singleton;

/// The ClusterConfig this cluster starts with: the documented defaults (protocol §1).
pub fn default_cluster_config() -> ClusterConfig {
    ClusterConfig {
        metadata: ObjectMeta { name: Some(CLUSTER_CONFIG_NAME.into()), ..Default::default() },
        spec: ClusterConfigSpec::default(),
        status: None,
    }
}

pub struct ClusterConfigKeeper;

impl Singleton for ClusterConfigKeeper {
    type Object = ClusterConfig;
    type Value = ClusterConfigSpec;

    fn name(&self) -> &str {
        CLUSTER_CONFIG_NAME
    }

    fn read(&self, cc: &ClusterConfig) -> Option<ClusterConfigSpec> {
        Some(cc.spec.clone())
    }

    async fn repair(&self, api: &Api<ClusterConfig>, _existing: Option<&ClusterConfig>) -> Result<()> {
        match api.create(&PostParams::default(), &default_cluster_config()).await {
            Ok(_) => {
                tracing::info!("created ClusterConfig {CLUSTER_CONFIG_NAME} with the defaults");
                Ok(())
            }
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
