//! The incoming side of peering: PeeringRequests and FederationRequests (both admitted by the
//! webhook) make a ForeignCluster of type `IncomingPeering` with `incoming.joined=true`, and
//! hold the peer's broadcaster. Deleting the request stops the broadcaster, removes our
//! Advertisement from the peer and clears `incoming.joined`. A request outside the tenant
//! namespace of the ID it claims (the anonymous overlay's, an admin's) for an ID bound to a
//! holder here is not served: the webhook refuses such requests, and one that got in anyway (the
//! webhook down, or the ID bound after it was stored) never points the peer's broadcaster at
//! another kubeconfig than its holder's.
//!
//! - this file: the controller of the requests;
//! - [`broadcaster`]: one task per accepted request, keeping our Advertisement at its peer.
//!
//! It may use [`context`](crate::context) and every room below it; no other controller.

pub mod broadcaster;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use liqo_api::holder::{Holder, bound_message};
use liqo_api::names::{FINALIZER_PEERED, LABEL_CLUSTER_ID, LABEL_DISCOVERY_TYPE, peer_service_account, tenant_namespace};
use liqo_api::{
    ClusterIdentity, DiscoveryType, FederationRequest, ForeignCluster, ForeignClusterSpec, IncomingStatus, PeeringRequest,
    PeeringRequestSpec, validate_cluster_id,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::context::Shared;
use crate::incoming::broadcaster::Broadcasters;
use crate::machinery::error::{Error, Result, is_conflict};
use crate::remote::peer::Peers;

/// PeeringRequest or FederationRequest.
pub trait Request:
    Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    const KIND: &'static str;
    fn request_spec(&self) -> &PeeringRequestSpec;
}

impl Request for PeeringRequest {
    const KIND: &'static str = "PeeringRequest";
    fn request_spec(&self) -> &PeeringRequestSpec {
        &self.spec
    }
}

impl Request for FederationRequest {
    const KIND: &'static str = "FederationRequest";
    fn request_spec(&self) -> &PeeringRequestSpec {
        &self.spec.0
    }
}

/// What reconciles of incoming requests share.
pub struct Ctx<P: Peers> {
    pub shared: Shared<P>,
    pub broadcasters: Arc<Broadcasters<P>>,
    /// How long the deletion of a request waits for an unreachable peer.
    pub withdraw_grace: Duration,
}

impl<P: Peers> Ctx<P> {
    pub fn new(shared: Shared<P>, broadcasters: Arc<Broadcasters<P>>, withdraw_grace: Duration) -> Self {
        Self { shared, broadcasters, withdraw_grace }
    }
}

/// The ForeignCluster standing for `cluster_id`, if we have one: one a person or discovery
/// made before an incoming stand-in (which gives way to it).
pub(crate) fn find_foreign(store: &Store<ForeignCluster>, cluster_id: &str) -> Option<Arc<ForeignCluster>> {
    let mut matching: Vec<Arc<ForeignCluster>> = store.state_filter(|fc| {
        fc.spec.remote_cluster_id() == Some(cluster_id) || fc.labels().get(LABEL_CLUSTER_ID).map(String::as_str) == Some(cluster_id)
    });
    matching.sort_by_key(|fc| liqo_api::chosen::stands_in(fc));
    matching.into_iter().next()
}

/// The ForeignCluster made for a peer that asked to peer with us (pure).
pub fn incoming_foreign_cluster(cluster_id: &str, spec: &PeeringRequestSpec) -> ForeignCluster {
    let mut fc = ForeignCluster::new(
        cluster_id,
        ForeignClusterSpec {
            cluster_identity: Some(ClusterIdentity {
                cluster_id: cluster_id.to_owned(),
                cluster_name: spec.cluster_identity.as_ref().and_then(|i| i.cluster_name.clone()),
            }),
            namespace: spec.namespace.clone(),
            join: Some(false),
            auth_url: spec.auth_url.clone(),
            discovery_type: Some(DiscoveryType::IncomingPeering),
            ..Default::default()
        },
    );
    fc.metadata.labels = Some(
        [
            (LABEL_CLUSTER_ID.to_owned(), cluster_id.to_owned()),
            (LABEL_DISCOVERY_TYPE.to_owned(), DiscoveryType::IncomingPeering.as_str().to_owned()),
        ]
        .into(),
    );
    fc
}

/// Field manager of `status.incoming` of ForeignClusters, the part of their status this
/// controller owns.
pub const STATUS_MANAGER: &str = liqo_api::names::INCOMING_STATUS_MANAGER;

/// Writes `status.incoming` whole (server-side apply), when it differs from the stored one.
async fn set_incoming(client: &Client, fc: &ForeignCluster, incoming: IncomingStatus) -> Result<()> {
    if fc.status.as_ref().and_then(|s| s.incoming.as_ref()) == Some(&incoming) {
        return Ok(());
    }
    let body = serde_json::json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "status": {"incoming": incoming}});
    let params = PatchParams::apply(STATUS_MANAGER).force();
    Api::<ForeignCluster>::all(client.clone()).patch_status(&fc.name_any(), &params, &Patch::Apply(body)).await?;
    Ok(())
}

/// When the identity that holds `id` here expires, if a holder has one that has not expired
/// (`Some(None)`: bound with no known expiry); `None` when nobody holds it.
async fn held_until(client: &Client, id: &str) -> Result<Option<Option<k8s_openapi::jiff::Timestamp>>> {
    let sas = Api::<ServiceAccount>::namespaced(client.clone(), &tenant_namespace(id));
    let holder = sas.get_metadata_opt(&peer_service_account(id)).await?.map(|sa| Holder::of(&sa.metadata));
    Ok(holder.filter(|h| !h.expired(k8s_openapi::jiff::Timestamp::now())).map(|h| h.expires()))
}

/// One reconcile of one request.
pub async fn reconcile<K: Request, P: Peers>(req: Arc<K>, ctx: Arc<Ctx<P>>) -> Result<Action> {
    let id = req.name_any();
    if validate_cluster_id(&id).is_err() {
        // The webhook refuses these; one that slipped in (webhook down with failurePolicy
        // Ignore) is left alone.
        tracing::warn!(kind = K::KIND, name = %id, "ignoring a request not named after a cluster ID");
        return Ok(Action::await_change());
    }
    let spec = req.request_spec();
    let namespace = req.namespace().unwrap_or_default();
    let held = req.finalizers().iter().any(|f| f == FINALIZER_PEERED);
    tracing::debug!(kind = K::KIND, name = %id, version = ?req.resource_version(), held, deleting = req.meta().deletion_timestamp.is_some(), "reconciling");

    if let Some(deleted_at) = &req.meta().deletion_timestamp {
        if !held {
            return Ok(Action::await_change());
        }
        if let Err(e) = ctx.broadcasters.release(&id, K::KIND, spec.kube_config_ref.clone()).await {
            let waited = k8s_openapi::jiff::Timestamp::now().as_second() - deleted_at.0.as_second();
            if waited < ctx.withdraw_grace.as_secs() as i64 {
                tracing::info!(peer = %id, error = %e, cause = e.label(), "cannot remove our Advertisement from the peer yet");
                return Ok(Action::requeue(ctx.shared.retry));
            }
            tracing::warn!(peer = %id, error = %e, "peer unreachable; giving up on removing our Advertisement there");
        }
        let fc = find_foreign(&ctx.shared.foreign, &id);
        if let Some(fc) = &fc {
            set_incoming(&ctx.shared.client, fc, IncomingStatus { joined: false, peering_request: None }).await?;
        }
        crate::machinery::finalizer::remove(&Api::<K>::namespaced(ctx.shared.client.clone(), &namespace), &*req).await?;
        // Told on the ForeignCluster when there is one: an Event about the request is in its
        // tenant namespace, which goes with it once nothing of the peer is left.
        let note = format!("the {} of cluster {id} is gone: our Advertisement withdrawn from it", K::KIND);
        match &fc {
            Some(fc) => {
                crate::reporting::events::publish(ctx.shared.recorder.as_ref(), &**fc, false, "Peering", "PeeringEnded", note).await
            }
            None => crate::reporting::events::publish(ctx.shared.recorder.as_ref(), &*req, false, "Peering", "PeeringEnded", note).await,
        }
        crate::tenancy::retirement::retire(&ctx.shared.client, &ctx.shared.foreign, &id, deleted_at.0).await?;
        return Ok(Action::await_change());
    }

    if namespace != tenant_namespace(&id)
        && let Some(until) = held_until(&ctx.shared.client, &id).await?
    {
        tracing::warn!(kind = K::KIND, peer = %id, %namespace, "not serving a request for a cluster ID bound to another holder");
        if let Some(source) = &spec.kube_config_ref {
            ctx.broadcasters.stop_if_from(&id, source);
        }
        let note = format!("this {} is not served: {}", K::KIND, bound_message(&id, until));
        crate::reporting::events::publish(ctx.shared.recorder.as_ref(), &*req, true, "Peering", "IdentityClaimed", note).await;
        return Ok(Action::await_change());
    }
    if !held {
        crate::machinery::finalizer::add(&Api::<K>::namespaced(ctx.shared.client.clone(), &namespace), &*req).await?;
        let note = format!("accepted the {} of cluster {id}: it gets our Advertisement", K::KIND);
        crate::reporting::events::publish(ctx.shared.recorder.as_ref(), &*req, false, "Peering", "PeeringAccepted", note).await;
        return Ok(Action::await_change());
    }

    let fc = match find_foreign(&ctx.shared.foreign, &id) {
        Some(fc) => (*fc).clone(),
        None => {
            let api: Api<ForeignCluster> = Api::all(ctx.shared.client.clone());
            match api.create(&PostParams::default(), &incoming_foreign_cluster(&id, spec)).await {
                Ok(fc) => fc,
                Err(e) if is_conflict(&e) => api.get(&id).await?,
                Err(e) => return Err(e.into()),
            }
        }
    };
    set_incoming(&ctx.shared.client, &fc, IncomingStatus { joined: true, peering_request: Some(id.clone()) }).await?;
    let Some(source) = spec.kube_config_ref.clone() else {
        return Err(Error::invalid("spec.kubeConfigRef", "missing (the webhook requires it)"));
    };
    ctx.broadcasters.ensure(&id, K::KIND, &namespace, source);
    Ok(Action::await_change())
}

fn error_policy<K: Request, P: Peers>(req: Arc<K>, e: &Error, ctx: Arc<Ctx<P>>) -> Action {
    tracing::warn!(kind = K::KIND, name = %req.name_any(), error = %e, cause = e.label(), "reconcile failed");
    Action::requeue(ctx.shared.retry)
}

/// Runs the controller of one request kind until shutdown.
pub async fn run<K: Request, P: Peers>(
    ctx: Arc<Ctx<P>>,
    metrics: Arc<crate::reporting::metrics::Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    Controller::new(Api::<K>::all(ctx.shared.client.clone()), watcher::Config::default().any_semantic())
        .trigger_backoff(liqo_api::watch_backoff::WatchBackoff::default())
        .graceful_shutdown_on(shutdown)
        .run(
            move |req, ctx| {
                let metrics = metrics.clone();
                async move {
                    let started = std::time::Instant::now();
                    let result = reconcile::<K, P>(req, ctx).await;
                    metrics.observe(K::KIND, &result, started);
                    result
                }
            },
            error_policy::<K, P>,
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incoming_foreign_cluster_says_who_asked() {
        let id = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
        let spec: PeeringRequestSpec = serde_json::from_value(serde_json::json!({
            "clusterIdentity": {"clusterID": id, "clusterName": "home"}, "namespace": "liqo",
            "kubeConfigRef": {"name": "pr-kubeconfig-x", "namespace": "liqo"}, "authUrl": "https://home:8443"
        }))
        .unwrap();
        let fc = incoming_foreign_cluster(id, &spec);
        assert_eq!(fc.name_any(), id);
        assert_eq!(fc.spec.remote_cluster_id(), Some(id));
        assert_eq!(fc.spec.discovery_type, Some(DiscoveryType::IncomingPeering));
        assert_eq!(fc.spec.join, Some(false));
        assert_eq!(fc.spec.auth_url.as_deref(), Some("https://home:8443"));
        assert_eq!(fc.labels().get(LABEL_DISCOVERY_TYPE).map(String::as_str), Some("IncomingPeering"));
    }
}
