//! `kubectl liqo discovery|advertisement|autojoin on|off`: the switches of the ClusterConfig
//! `liqo-configuration`, applied at runtime by every component.

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use liqo_api::ClusterConfig;

use crate::error::{CliError, Result};

/// A switch and the field it sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Toggle {
    Discovery,
    Advertisement,
    Autojoin,
}

impl Toggle {
    /// The field of `spec.discoveryConfig`.
    pub fn field(self) -> &'static str {
        match self {
            Self::Discovery => "enableDiscovery",
            Self::Advertisement => "enableAdvertisement",
            Self::Autojoin => "autojoin",
        }
    }
}

/// The merge patch that sets `toggle` (pure).
pub fn patch(toggle: Toggle, on: bool) -> serde_json::Value {
    serde_json::json!({"spec": {"discoveryConfig": {toggle.field(): on}}})
}

/// Sets the switch; returns the resulting settings, one line each.
pub async fn set(client: &Client, toggle: Toggle, on: bool) -> Result<String> {
    let api = Api::<ClusterConfig>::all(client.clone());
    let updated = api
        .patch("liqo-configuration", &PatchParams::default(), &Patch::Merge(patch(toggle, on)))
        .await
        .map_err(|e| CliError::api("updating ClusterConfig liqo-configuration", e))?;
    let d = updated.spec.discovery_config;
    let word = |b: bool| if b { "on" } else { "off" };
    Ok(format!(
        "discovery       {}\nadvertisement   {}\nautojoin        {} (untrusted peers: {})\n",
        word(d.enable_discovery),
        word(d.enable_advertisement),
        word(d.autojoin),
        word(d.autojoin_untrusted)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_switch_sets_its_field() {
        assert_eq!(patch(Toggle::Discovery, false), serde_json::json!({"spec": {"discoveryConfig": {"enableDiscovery": false}}}));
        assert_eq!(patch(Toggle::Advertisement, true)["spec"]["discoveryConfig"]["enableAdvertisement"], true);
        assert_eq!(patch(Toggle::Autojoin, true)["spec"]["discoveryConfig"]["autojoin"], true);
    }
}
