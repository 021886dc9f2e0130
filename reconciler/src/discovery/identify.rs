//! Telling which cluster each target of a DNS-SD listing is: the API-server zone's TXT says it; for seed
//! 002's zones the auth service's `/ids` answers. Used by the SearchDomain controller and the
//! `discover` command.

use liqo_api::{FoundCluster, validate_cluster_id};

use super::dnssd::{Listed, TargetError};
use super::records::{DiscoveredCluster, WanTarget};
use crate::machinery::error::Result;

/// The clusters one lookup yields, and what it had to skip.
#[derive(Debug, Default, PartialEq)]
pub struct Identified {
    pub clusters: Vec<(String, DiscoveredCluster)>,
    /// Targets whose cluster could not be told now but was before: still listed, untouched.
    pub kept: Vec<FoundCluster>,
    pub skipped: Vec<String>,
}

/// Turns listed targets into clusters (pure but for `ids`, which asks an auth service).
pub async fn identify<F, Fut>(listed: Vec<Listed>, own_id: &str, previous: &[FoundCluster], ids: F) -> Identified
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<crate::remote::auth::wire::Ids>>,
{
    let mut out = Identified::default();
    for Listed { instance, target } in listed {
        let found = match target {
            Ok(WanTarget::Api(c)) => Ok(c),
            Ok(WanTarget::Auth { auth_url }) => match ids(auth_url.clone()).await {
                Ok(ids) => match validate_cluster_id(&ids.cluster_id) {
                    Ok(()) => Ok(DiscoveredCluster {
                        cluster_id: ids.cluster_id,
                        cluster_name: Some(ids.cluster_name).filter(|n| !n.is_empty()),
                        namespace: Some(ids.guest_namespace).filter(|n| !n.is_empty()),
                        auth_url: Some(auth_url),
                        api_url: None,
                    }),
                    Err(e) => Err(format!("{instance}: {auth_url}/ids answered cluster ID {:?}: {e}", ids.cluster_id)),
                },
                Err(e) => {
                    if let Some(prev) = previous.iter().find(|p| p.instance.as_deref() == Some(instance.as_str())) {
                        out.kept.push(prev.clone());
                    }
                    Err(format!("{instance}: {auth_url}/ids: {e}"))
                }
            },
            Err(TargetError::Lookup(e)) => Err(format!("{instance}: {e}")),
            Err(e) => Err(format!("{instance}: {e}")),
        };
        match found {
            Ok(c) if c.cluster_id == own_id => {}
            Ok(c) => out.clusters.push((instance, c)),
            Err(e) => out.skipped.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::error::Error;
    use crate::remote::auth::wire::Ids;

    const ID: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

    fn listed(instance: &str, target: Result<WanTarget, TargetError>) -> Listed {
        Listed { instance: instance.into(), target }
    }

    #[tokio::test]
    async fn targets_are_identified_from_txt_or_ids_and_we_are_skipped() {
        let l = vec![
            listed("a.example.", Ok(WanTarget::Api(DiscoveredCluster { cluster_id: "aaa".into(), ..Default::default() }))),
            listed("b.example.", Ok(WanTarget::Auth { auth_url: "https://b:443".into() })),
            listed("me.example.", Ok(WanTarget::Api(DiscoveredCluster { cluster_id: "own".into(), ..Default::default() }))),
            listed("c.example.", Err(TargetError::NoSrv)),
        ];
        let out = identify(l, "own", &[], |url| async move {
            assert_eq!(url, "https://b:443");
            Ok(Ids {
                cluster_id: ID.into(),
                cluster_name: "bee".into(),
                guest_namespace: "liqo".into(),
                protocol_version: Some(2),
                token_lifetime_seconds: None,
                version: None,
            })
        })
        .await;
        let ids: Vec<&str> = out.clusters.iter().map(|(_, c)| c.cluster_id.as_str()).collect();
        assert_eq!(ids, vec!["aaa", ID]);
        let b = &out.clusters[1].1;
        assert_eq!(
            (b.auth_url.as_deref(), b.namespace.as_deref(), b.cluster_name.as_deref()),
            (Some("https://b:443"), Some("liqo"), Some("bee"))
        );
        assert_eq!(out.skipped, vec!["c.example.: no SRV record".to_owned()]);
    }

    #[tokio::test]
    async fn an_auth_service_that_does_not_answer_keeps_what_it_was_before() {
        let prev = vec![FoundCluster { foreign_cluster: ID.into(), cluster_id: ID.into(), instance: Some("b.example.".into()) }];
        let l = vec![listed("b.example.", Ok(WanTarget::Auth { auth_url: "https://b:443".into() }))];
        let out =
            identify(l, "own", &prev, |_| async { Err(Error::unreachable(crate::machinery::error::Step::Ids, "connection refused")) })
                .await;
        assert!(out.clusters.is_empty());
        assert_eq!(out.kept, prev);
        assert_eq!(out.skipped.len(), 1);
        assert!(out.skipped[0].contains("connection refused"), "{:?}", out.skipped);

        let l = vec![listed("b.example.", Ok(WanTarget::Auth { auth_url: "https://b:443".into() }))];
        let out = identify(l, "own", &prev, |_| async {
            Ok(Ids {
                cluster_id: "NOT VALID".into(),
                cluster_name: String::new(),
                guest_namespace: String::new(),
                protocol_version: None,
                token_lifetime_seconds: None,
                version: None,
            })
        })
        .await;
        assert!(out.clusters.is_empty() && out.kept.is_empty());
        assert!(out.skipped[0].contains("is not") || out.skipped[0].contains("may contain"), "{:?}", out.skipped);
    }
}
