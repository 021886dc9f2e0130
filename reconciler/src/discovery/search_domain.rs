//! The SearchDomain controller (protocol §5): every period and on change, browse the domain with
//! DNS-SD, identify what it lists (the API-server zone's TXT, or the auth service's `/ids` for the auth-service zone's
//! zone), merge each cluster into the ForeignClusters (owned by the SearchDomain, `join` from
//! `spec.autojoin` or else ClusterConfig's `autojoin`), delete the ones it no longer lists, and
//! record in the status what it found and how the lookup went. A failed lookup deletes nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, ResourceExt};
use liqo_api::{FoundCluster, SearchDomain, SearchDomainStatus};

use super::dnssd::DnsSd;
use super::identify::identify;
use super::merge::{self, Finder};
use super::writer::{FIELD_MANAGER, apply, delete_foreign};
use crate::context::Shared;
use crate::machinery::error::{Error, Result};
use crate::remote::peer::Peers;
use crate::reporting::conditions::{self, Wanted};
use liqo_api::reasons::{ConditionType, Reason, Status};

/// What reconciles share.
pub struct Ctx<P: Peers> {
    pub shared: Shared<P>,
    pub dns: DnsSd,
    /// Time between lookups of one domain.
    pub period: Duration,
}

impl<P: Peers> Ctx<P> {
    pub fn new(shared: Shared<P>, dns: DnsSd, period: Duration) -> Self {
        Self { shared, dns, period }
    }
}

/// Writes the status whole (server-side apply) when it differs from the stored one.
async fn write_status(client: &Client, sd: &SearchDomain, status: SearchDomainStatus) -> Result<()> {
    if sd.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let body = serde_json::json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "SearchDomain", "status": status});
    Api::<SearchDomain>::all(client.clone())
        .patch_status(&sd.name_any(), &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(body))
        .await?;
    Ok(())
}

pub async fn reconcile<P: Peers>(sd: Arc<SearchDomain>, ctx: Arc<Ctx<P>>) -> Result<Action> {
    if sd.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = sd.name_any();
    let generation = sd.metadata.generation;
    let Some(own_id) = ctx.shared.own_id() else { return Err(Error::NotReady("cluster ID")) };
    // Status fields an earlier release merge-patched become ours, so this round's apply drops
    // the ones no longer set (see crate::machinery::managers).
    crate::machinery::managers::take_over_status(&Api::<SearchDomain>::all(ctx.shared.client.clone()), &*sd, |_| FIELD_MANAGER).await?;
    let config = ctx.shared.settings();

    let mut status = sd.status.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let listed = match ctx.dns.browse(&sd.spec.domain).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(searchdomain = %name, error = %e, "lookup failed; nothing deleted");
            let message = format!("{}: {e} (nothing deleted)", sd.spec.domain);
            let wanted = Wanted::new(ConditionType::Ready, Status::False, Reason::DnsLookupFailed, message.clone());
            if conditions::set(&mut status.conditions, wanted, generation, now) {
                crate::reporting::events::publish(
                    ctx.shared.recorder.as_ref(),
                    &*sd,
                    true,
                    "Lookup",
                    Reason::DnsLookupFailed.as_str(),
                    message,
                )
                .await;
            }
            write_status(&ctx.shared.client, &sd, status).await?;
            return Ok(Action::requeue(ctx.period));
        }
    };
    let peers = &ctx.shared.peers;
    let found =
        identify(
            listed,
            &own_id,
            &status.foreign_clusters,
            |url| async move { peers.ids(&url, crate::remote::peer::Trust::Anything).await },
        )
        .await;

    let finder = Finder::Wan { search_domain: name.clone(), uid: sd.metadata.uid.clone().unwrap_or_default() };
    let join = sd.spec.autojoin.unwrap_or(config.discovery_config.autojoin);
    let fcs = ctx.shared.foreign.state();
    let mut listed_ids: Vec<String> = found.kept.iter().map(|k| k.cluster_id.clone()).collect();
    let mut result: Vec<FoundCluster> = found.kept.clone();
    let mut skipped = found.skipped.clone();
    let mut discovered = merge::discovered(fcs.iter().map(|f| &**f));
    for (instance, cluster) in &found.clusters {
        let existing = merge::find(fcs.iter().map(|f| &**f), &cluster.cluster_id);
        if !merge::admits(existing.is_some(), || discovered, ctx.shared.max_discovered) {
            let max = ctx.shared.max_discovered;
            skipped.push(format!("{}: not added, {max} discovered peers already (--max-discovered-peers)", cluster.cluster_id));
            continue;
        }
        discovered += usize::from(existing.is_none());
        let fc_name = existing.map(|f| f.name_any()).unwrap_or_else(|| cluster.cluster_id.clone());
        let how = format!("in DNS domain {} (SearchDomain {name})", sd.spec.domain);
        let join = super::memory::join_found(&ctx.shared, &cluster.cluster_id, join);
        apply(&ctx.shared.client, merge::merge(existing, cluster, &finder, join), ctx.shared.recorder.as_ref(), &how).await?;
        listed_ids.push(cluster.cluster_id.clone());
        result.push(FoundCluster { foreign_cluster: fc_name, cluster_id: cluster.cluster_id.clone(), instance: Some(instance.clone()) });
    }
    for gone in merge::no_longer_listed(fcs.iter().map(|f| &**f), &finder, &listed_ids) {
        tracing::info!(searchdomain = %name, foreign_cluster = %gone.name_any(), "no longer listed; deleting its ForeignCluster");
        let note = format!("no longer listed in DNS domain {}", sd.spec.domain);
        delete_foreign(&ctx.shared.client, gone, ctx.shared.recorder.as_ref(), "NoLongerListed", note).await?;
    }
    result.sort_by(|a, b| a.cluster_id.cmp(&b.cluster_id));
    result.dedup_by(|a, b| a.cluster_id == b.cluster_id);
    let mut message = format!("{} lists {} cluster(s)", sd.spec.domain, result.len());
    if !skipped.is_empty() {
        message.push_str(&format!("; skipped: {}", skipped.join("; ")));
    }
    let reason = if skipped.is_empty() { Reason::LookupSucceeded } else { Reason::LookupPartial };
    conditions::set(&mut status.conditions, Wanted::new(ConditionType::Ready, Status::True, reason, message), generation, now);
    status.foreign_clusters = result;
    write_status(&ctx.shared.client, &sd, status).await?;
    Ok(Action::requeue(ctx.period))
}

fn error_policy<P: Peers>(sd: Arc<SearchDomain>, e: &Error, ctx: Arc<Ctx<P>>) -> Action {
    tracing::warn!(searchdomain = %sd.name_any(), error = %e, cause = e.label(), "reconcile failed");
    Action::requeue(ctx.shared.retry)
}

/// Runs the controller until shutdown. Only changes of a SearchDomain's spec (its generation)
/// and the period wake it: its own status writes do not.
pub async fn run<P: Peers>(
    ctx: Arc<Ctx<P>>,
    metrics: Arc<crate::reporting::metrics::Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<SearchDomain> = Api::all(ctx.shared.client.clone());
    let (reader, writer) = reflector::store();
    let changes = watcher(api, watcher::Config::default().any_semantic())
        .reflect(writer)
        .applied_objects()
        .predicate_filter(predicates::generation, Default::default());
    // Errors retried here and dropped: the controller's own backoff (kube's default, up to
    // 30 s) never sees one.
    Controller::for_stream(crate::machinery::stores::retried_alone(changes, "SearchDomains"), reader)
        .graceful_shutdown_on(shutdown)
        .run(
            move |sd, ctx| {
                let metrics = metrics.clone();
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
