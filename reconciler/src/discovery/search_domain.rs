//! The SearchDomain controller (SPEC §5): every period and on change, browse the domain with
//! DNS-SD, identify what it lists (seed 003's TXT, or the auth service's `/ids` for seed 002's
//! zone), merge each cluster into the ForeignClusters (owned by the SearchDomain, `join` from
//! `spec.autojoin` or else ClusterConfig's `autojoin`), delete the ones it no longer lists, and
//! record in the status what it found and how the lookup went. A failed lookup deletes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use liqo_api::{ClusterConfigSpec, ForeignCluster, FoundCluster, SearchDomain, SearchDomainStatus, TrustMode, validate_cluster_id};
use tokio::sync::watch;

use super::dnssd::{DnsSd, Listed, TargetError};
use super::merge::{self, Change, Finder};
use super::records::{DiscoveredCluster, WanTarget};
use crate::conditions::{self, Wanted};
use crate::error::{Error, Result, is_conflict, is_not_found};
use crate::peer::Peers;
use liqo_api::reasons::{ConditionType, Reason, Status};

/// Condition carrying the last lookup's result.
/// Field manager of what this controller writes.
pub const FIELD_MANAGER: &str = "liqo-discovery";

/// What reconciles share.
pub struct Ctx<P: Peers> {
    pub client: Client,
    pub foreign: Store<ForeignCluster>,
    pub cluster_id: watch::Receiver<Option<String>>,
    pub config: watch::Receiver<Option<ClusterConfigSpec>>,
    pub dns: DnsSd,
    /// Asked for `/ids` of the auth services seed 002's zones list.
    pub peers: P,
    /// Time between lookups of one domain.
    pub period: Duration,
    /// When each SearchDomain (by name) was last looked up, at which generation.
    pub last: Mutex<HashMap<String, (Option<i64>, Instant)>>,
    pub recorder: Option<Recorder>,
}

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
    Fut: std::future::Future<Output = Result<crate::auth::wire::Ids>>,
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

fn status_patch(status: &SearchDomainStatus) -> serde_json::Value {
    serde_json::json!({"status": {"foreignClusters": status.foreign_clusters, "conditions": status.conditions}})
}

async fn write_status(client: &Client, sd: &SearchDomain, status: SearchDomainStatus) -> Result<()> {
    if sd.status.as_ref() == Some(&status) {
        return Ok(());
    }
    Api::<SearchDomain>::all(client.clone())
        .patch_status(&sd.name_any(), &PatchParams::default(), &Patch::Merge(status_patch(&status)))
        .await?;
    Ok(())
}

/// Applies one merge decision; a new ForeignCluster gets a `Discovered` Event saying how.
pub async fn apply(client: &Client, change: Change, recorder: Option<&Recorder>, how: &str) -> Result<()> {
    let api = Api::<ForeignCluster>::all(client.clone());
    match change {
        Change::Unchanged => Ok(()),
        Change::Create(fc) => {
            match api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, &fc).await {
                Ok(created) => {
                    let id = created.spec.cluster_identity.as_ref().map(|c| c.cluster_id.clone()).unwrap_or_default();
                    crate::events::publish(recorder, &created, false, "Discovery", "Discovered", format!("cluster {id} found {how}")).await;
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
            crate::events::publish(recorder, fc, false, "Discovery", reason, note).await;
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub async fn reconcile<P: Peers>(sd: Arc<SearchDomain>, ctx: Arc<Ctx<P>>) -> Result<Action> {
    if sd.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = sd.name_any();
    let generation = sd.metadata.generation;
    // Our own status writes wake us too: look up again only when the period is over or the
    // spec changed.
    if let Some((g, at)) = ctx.last.lock().unwrap().get(&name) {
        let elapsed = at.elapsed();
        if *g == generation && elapsed < ctx.period {
            return Ok(Action::requeue(ctx.period - elapsed));
        }
    }
    let Some(own_id) = ctx.cluster_id.borrow().clone() else { return Err(Error::NotReady("cluster ID")) };
    let config = ctx.config.borrow().clone().unwrap_or_default();
    ctx.last.lock().unwrap().insert(name.clone(), (generation, Instant::now()));

    let mut status = sd.status.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let listed = match ctx.dns.browse(&sd.spec.domain).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(searchdomain = %name, error = %e, "lookup failed; nothing deleted");
            let message = format!("{}: {e} (nothing deleted)", sd.spec.domain);
            let wanted = Wanted::new(ConditionType::Ready, Status::False, Reason::DnsLookupFailed, message.clone());
            if conditions::set(&mut status.conditions, wanted, generation, now) {
                crate::events::publish(ctx.recorder.as_ref(), &*sd, true, "Lookup", Reason::DnsLookupFailed.as_str(), message).await;
            }
            write_status(&ctx.client, &sd, status).await?;
            return Ok(Action::requeue(ctx.period));
        }
    };
    let peers = &ctx.peers;
    let found = identify(listed, &own_id, &status.foreign_clusters, |url| async move { peers.ids(&url, TrustMode::Untrusted).await }).await;

    let finder = Finder::Wan { search_domain: name.clone(), uid: sd.metadata.uid.clone().unwrap_or_default() };
    let join = sd.spec.autojoin.unwrap_or(config.discovery_config.autojoin);
    let fcs = ctx.foreign.state();
    let mut listed_ids: Vec<String> = found.kept.iter().map(|k| k.cluster_id.clone()).collect();
    let mut result: Vec<FoundCluster> = found.kept.clone();
    for (instance, cluster) in &found.clusters {
        let existing = merge::find(fcs.iter().map(|f| &**f), &cluster.cluster_id);
        let fc_name = existing.map(|f| f.name_any()).unwrap_or_else(|| cluster.cluster_id.clone());
        let how = format!("in DNS domain {} (SearchDomain {name})", sd.spec.domain);
        apply(&ctx.client, merge::merge(existing, cluster, &finder, join), ctx.recorder.as_ref(), &how).await?;
        listed_ids.push(cluster.cluster_id.clone());
        result.push(FoundCluster { foreign_cluster: fc_name, cluster_id: cluster.cluster_id.clone(), instance: Some(instance.clone()) });
    }
    for gone in merge::no_longer_listed(fcs.iter().map(|f| &**f), &finder, &listed_ids) {
        tracing::info!(searchdomain = %name, foreign_cluster = %gone.name_any(), "no longer listed; deleting its ForeignCluster");
        let note = format!("no longer listed in DNS domain {}", sd.spec.domain);
        delete_foreign(&ctx.client, gone, ctx.recorder.as_ref(), "NoLongerListed", note).await?;
    }
    result.sort_by(|a, b| a.cluster_id.cmp(&b.cluster_id));
    result.dedup_by(|a, b| a.cluster_id == b.cluster_id);
    let mut message = format!("{} lists {} cluster(s)", sd.spec.domain, result.len());
    if !found.skipped.is_empty() {
        message.push_str(&format!("; skipped: {}", found.skipped.join("; ")));
    }
    let reason = if found.skipped.is_empty() { Reason::LookupSucceeded } else { Reason::LookupPartial };
    conditions::set(&mut status.conditions, Wanted::new(ConditionType::Ready, Status::True, reason, message), generation, now);
    status.foreign_clusters = result;
    write_status(&ctx.client, &sd, status).await?;
    Ok(Action::requeue(ctx.period))
}

fn error_policy<P: Peers>(sd: Arc<SearchDomain>, e: &Error, _ctx: Arc<Ctx<P>>) -> Action {
    tracing::warn!(searchdomain = %sd.name_any(), error = %e, label = e.label(), "reconcile failed");
    Action::requeue(Duration::from_secs(10))
}

/// Runs the controller until shutdown.
pub async fn run<P: Peers>(
    ctx: Arc<Ctx<P>>,
    metrics: Arc<crate::metrics::Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<SearchDomain> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watcher::Config::default().any_semantic());
    let store = controller.store();
    controller
        .graceful_shutdown_on(shutdown)
        .run(
            move |sd, ctx| {
                let metrics = metrics.clone();
                // Forget the lookup times of SearchDomains that are gone.
                ctx.last.lock().unwrap().retain(|name, _| store.get(&ObjectRef::new(name)).is_some());
                async move {
                    let started = Instant::now();
                    let result = reconcile(sd, ctx).await;
                    metrics.observe("search_domain", &result, started);
                    result
                }
            },
            error_policy,
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::wire::Ids;

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
            Ok(Ids { cluster_id: ID.into(), cluster_name: "bee".into(), guest_namespace: "liqo".into() })
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
        let out = identify(l, "own", &prev, |_| async { Err(Error::unreachable(crate::error::Step::Ids, "connection refused")) }).await;
        assert!(out.clusters.is_empty());
        assert_eq!(out.kept, prev);
        assert_eq!(out.skipped.len(), 1);
        assert!(out.skipped[0].contains("connection refused"), "{:?}", out.skipped);

        let l = vec![listed("b.example.", Ok(WanTarget::Auth { auth_url: "https://b:443".into() }))];
        let out = identify(l, "own", &prev, |_| async {
            Ok(Ids { cluster_id: "NOT VALID".into(), cluster_name: String::new(), guest_namespace: String::new() })
        })
        .await;
        assert!(out.clusters.is_empty() && out.kept.is_empty());
        assert!(out.skipped[0].contains("is not") || out.skipped[0].contains("may contain"), "{:?}", out.skipped);
    }
}
