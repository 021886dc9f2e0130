//! The peering policy of ClusterConfig (protocol §6), evaluated for one requester.

use liqo_api::{ClusterConfigSpec, PeeringPolicy};

/// What the webhook needs of ClusterConfig to judge a PeeringRequest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyConfig {
    pub policy: PeeringPolicy,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl From<&ClusterConfigSpec> for PolicyConfig {
    fn from(spec: &ClusterConfigSpec) -> Self {
        Self { policy: spec.peering_policy, allow: spec.peering_allow_list.clone(), deny: spec.peering_deny_list.clone() }
    }
}

/// Whether `cluster_id` may peer with us. Order: deny list, `RejectAll`, allow list,
/// `AcceptKnown` (a person here chose it: see [`liqo_api::chosen`]), `AcceptAll`.
pub fn evaluate(cfg: &PolicyConfig, cluster_id: &str, is_known: impl FnOnce(&str) -> bool) -> Result<(), String> {
    if cfg.deny.iter().any(|d| d == cluster_id) {
        return Err(format!("cluster {cluster_id} is in peeringDenyList of ClusterConfig"));
    }
    match cfg.policy {
        PeeringPolicy::RejectAll => Err("peeringPolicy RejectAll: this cluster accepts no peering".to_owned()),
        _ if cfg.allow.iter().any(|a| a == cluster_id) => Ok(()),
        PeeringPolicy::AcceptKnown if !is_known(cluster_id) => Err(format!(
            "peeringPolicy AcceptKnown: cluster {cluster_id} was not chosen here (no ForeignCluster for it made by hand, joined by a person or with an approved fingerprint; not in peeringAllowList)"
        )),
        PeeringPolicy::AcceptKnown | PeeringPolicy::AcceptAll => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

    fn cfg(policy: PeeringPolicy, allow: &[&str], deny: &[&str]) -> PolicyConfig {
        PolicyConfig { policy, allow: allow.iter().map(|s| s.to_string()).collect(), deny: deny.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn accept_all_accepts_anyone_not_denied() {
        assert_eq!(evaluate(&cfg(PeeringPolicy::AcceptAll, &[], &[]), ID, |_| false), Ok(()));
        let err = evaluate(&cfg(PeeringPolicy::AcceptAll, &[], &[ID]), ID, |_| true).unwrap_err();
        assert!(err.contains("peeringDenyList"), "{err}");
    }

    #[test]
    fn accept_known_needs_a_foreign_cluster_or_the_allow_list() {
        let known = cfg(PeeringPolicy::AcceptKnown, &[], &[]);
        assert_eq!(evaluate(&known, ID, |id| id == ID), Ok(()));
        let err = evaluate(&known, ID, |_| false).unwrap_err();
        assert!(err.contains("AcceptKnown") && err.contains(ID) && err.contains("not chosen here"), "{err}");
        assert_eq!(evaluate(&cfg(PeeringPolicy::AcceptKnown, &[ID], &[]), ID, |_| false), Ok(()));
    }

    #[test]
    fn reject_all_and_deny_list_win_over_the_allow_list() {
        assert!(evaluate(&cfg(PeeringPolicy::RejectAll, &[ID], &[]), ID, |_| true).unwrap_err().contains("RejectAll"));
        assert!(evaluate(&cfg(PeeringPolicy::AcceptKnown, &[ID], &[ID]), ID, |_| true).is_err());
    }
}
