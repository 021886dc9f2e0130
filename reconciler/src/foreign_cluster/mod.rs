//! The ForeignCluster controller (home side of peering): trust, identification, CA retrieval,
//! join, the 30-second health check, and the unjoin cascade.
//!
//! Steady state costs one request per joined peer per health period (GET of our PeeringRequest
//! on the remote) and no writes: everything local is read from watch-fed stores.

pub mod anonymous;
pub mod decide;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use liqo_api::names::{FINALIZER_PEERED, LABEL_CLUSTER_ID, advertisement_name, ca_data_secret, peering_kubeconfig_secret};
use liqo_api::{
    Advertisement, AuthStatus, ClusterConfigSpec, ForeignCluster, ForeignClusterStatus, OutgoingStatus, PeeringRequest, SecretRef,
    TrustMode,
};
use tokio::sync::watch;

use self::decide::{OurRequest, TrustVerdict};
use crate::access::advertisement_access;
use crate::auth::service::{ApiServer, kubeconfig};
use crate::auth::wire::IdentityRequest;
use crate::conditions::{self, Wanted};
use crate::error::{Error, Result, is_not_found};
use crate::grant;
use crate::peer::{Peers, RemoteAccess};

/// Field manager of everything this controller writes.
pub const FIELD_MANAGER: &str = "liqo-peering";
/// Label on the Secrets this controller keeps (CA data, identities), which it watches.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "liqo-reconciler");
/// Key of the remote API server CA in `<fc>-ca-data`.
pub const CA_KEY: &str = "ca.crt";
/// Key of a kubeconfig in the Secrets that hold one.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// Key of the token used with a peer's `/identity`, in Secret `remote-token-<clusterID>`.
pub const TOKEN_KEY: &str = "token";

/// Condition types.
pub const TRUSTED: &str = "Trusted";
pub const AUTHENTICATED: &str = "Authenticated";
pub const REMOTE_REACHABLE: &str = "RemoteReachable";
pub const CA_VERIFIED: &str = "CaVerified";
pub const JOINED: &str = "Joined";

/// Secret holding the identity (kubeconfig) a peer issued us.
pub fn identity_secret(fc_name: &str) -> String {
    format!("{fc_name}-identity")
}

/// Secret holding the token we present to peer `cluster_id`'s auth service.
pub fn token_secret(cluster_id: &str) -> String {
    format!("remote-token-{cluster_id}")
}

/// How often things happen.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Health check of a joined peer.
    pub health: Duration,
    /// Retry after a failure.
    pub retry: Duration,
    /// How long unjoin of a deleted ForeignCluster waits for an unreachable remote.
    pub unjoin_grace: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self { health: Duration::from_secs(30), retry: Duration::from_secs(10), unjoin_grace: Duration::from_secs(120) }
    }
}

/// What reconciles share.
pub struct Ctx<P: Peers> {
    pub client: Client,
    pub namespace: String,
    pub cluster_id: watch::Receiver<Option<String>>,
    pub config: watch::Receiver<Option<ClusterConfigSpec>>,
    /// How the peer reaches our API server (for the kubeconfig we hand it).
    pub api_server: ApiServer,
    /// Our auth service URL, written into our PeeringRequests.
    pub auth_url: Option<String>,
    pub peers: P,
    /// Secrets of our namespace labelled [`MANAGED_BY`].
    pub secrets: Store<Secret>,
    pub advertisements: Store<Advertisement>,
    pub recorder: Option<Recorder>,
    pub timing: Timing,
    pub token_lifetime: Duration,
    /// Remote clients by ForeignCluster name, rebuilt when their access changes.
    pub remotes: Mutex<HashMap<String, (RemoteAccess, Client)>>,
}

impl<P: Peers> Ctx<P> {
    fn secret(&self, name: &str) -> Option<Arc<Secret>> {
        self.secrets.get(&ObjectRef::new(name).within(&self.namespace))
    }

    fn secret_value(&self, name: &str, key: &str) -> Option<String> {
        let s = self.secret(name)?;
        let bytes = s.data.as_ref()?.get(key)?;
        String::from_utf8(bytes.0.clone()).ok()
    }

    async fn event(&self, fc: &ForeignCluster, warning: bool, reason: &str, note: String) {
        crate::events::publish(self.recorder.as_ref(), fc, warning, "Peering", reason, note).await;
    }

    async fn remote_client(&self, fc_name: &str, access: RemoteAccess) -> Result<Client> {
        if let Some((a, c)) = self.remotes.lock().expect("not poisoned").get(fc_name) {
            if *a == access {
                return Ok(c.clone());
            }
        }
        let client = self.peers.api_client(&access).await?;
        self.remotes.lock().expect("not poisoned").insert(fc_name.to_owned(), (access, client.clone()));
        Ok(client)
    }

    fn forget_remote(&self, fc_name: &str) {
        self.remotes.lock().expect("not poisoned").remove(fc_name);
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn fcs(ctx_client: &Client) -> Api<ForeignCluster> {
    Api::all(ctx_client.clone())
}

/// The status fields this controller owns, as a merge patch (`incoming`, `ttl`, `lastSeen`
/// belong to other controllers and are left alone).
fn status_patch(status: &ForeignClusterStatus) -> serde_json::Value {
    let mut value = serde_json::to_value(status).expect("status serializes");
    if let Some(map) = value.as_object_mut() {
        for other in ["incoming", "ttl", "lastSeen"] {
            map.remove(other);
        }
    }
    serde_json::json!({ "status": value })
}

/// Writes `status` when it differs from what the object has.
async fn write_status(ctx_client: &Client, fc: &ForeignCluster, status: &ForeignClusterStatus) -> Result<()> {
    if fc.status.as_ref() == Some(status) || (fc.status.is_none() && *status == ForeignClusterStatus::default()) {
        return Ok(());
    }
    fcs(ctx_client).patch_status(&fc.name_any(), &PatchParams::default(), &Patch::Merge(status_patch(status))).await?;
    Ok(())
}

/// Records a condition in `status`.
fn condition(status: &mut ForeignClusterStatus, fc: &ForeignCluster, type_: &str, ok: bool, reason: &str, message: impl Into<String>) {
    conditions::set(&mut status.conditions, Wanted { type_, status: ok, reason, message: message.into() }, fc.metadata.generation, now());
}

fn owned_secret(fc: &ForeignCluster, name: String, namespace: &str, remote_id: &str, key: &str, value: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
                (LABEL_CLUSTER_ID.to_owned(), remote_id.to_owned()),
            ])),
            owner_references: fc.controller_owner_ref(&()).map(|r| vec![r]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(key.to_owned(), ByteString(value.as_bytes().to_vec()))])),
        ..Default::default()
    }
}

async fn create_secret(client: &Client, secret: &Secret) -> Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), secret.metadata.namespace.as_deref().unwrap_or_default());
    match api.create(&PostParams::default(), secret).await {
        Ok(_) => Ok(()),
        Err(e) if crate::error::is_conflict(&e) => grant::apply(&api, FIELD_MANAGER, secret).await.map(|_| ()),
        Err(e) => Err(e.into()),
    }
}

/// One reconcile of one ForeignCluster.
pub async fn reconcile<P: Peers>(fc: Arc<ForeignCluster>, ctx: Arc<Ctx<P>>) -> Result<Action> {
    let Some(own_id) = ctx.cluster_id.borrow().clone() else { return Ok(Action::requeue(ctx.timing.retry)) };
    let config = ctx.config.borrow().clone().unwrap_or_default();
    let peered = fc.finalizers().iter().any(|f| f == FINALIZER_PEERED);
    if fc.metadata.deletion_timestamp.is_some() || !fc.spec.join() {
        if peered {
            return unjoin(&fc, &ctx, &own_id).await;
        }
        return Ok(Action::await_change());
    }
    join(&fc, &ctx, &own_id, &config).await
}

/// `spec.join=true`: every step is skipped when already done, so a joined peer costs one
/// remote GET per health period.
async fn join<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, own_id: &str, config: &ClusterConfigSpec) -> Result<Action> {
    let name = fc.name_any();
    let mut status = fc.status.clone().unwrap_or_default();
    let Some(auth_url) = fc.spec.auth_url.clone().filter(|u| !u.is_empty()) else {
        if anonymous::applies(fc) {
            return anonymous::join(fc, ctx, own_id, config).await;
        }
        condition(
            &mut status,
            fc,
            JOINED,
            false,
            "NoAuthUrl",
            "set spec.authUrl (the remote's auth service issues our identity there), or spec.apiUrl with the cluster ID for a remote that admits anonymous PeeringRequests",
        );
        write_status(&ctx.client, fc, &status).await?;
        return Ok(Action::await_change());
    };

    // Trust and identification, written back into the spec (only what the user left empty).
    let mut trust = fc.spec.trust_mode();
    let probed = if trust == TrustMode::Unknown {
        match ctx.peers.probe_trust(&auth_url).await {
            Ok(t) => {
                trust = t;
                Some(t)
            }
            Err(e) => return remote_failed(fc, ctx, status, e).await,
        }
    } else {
        None
    };
    let verdict = decide::trust_verdict(&fc.spec, trust, &config.discovery_config);
    if !verdict.allows_peering() {
        condition(
            &mut status,
            fc,
            TRUSTED,
            false,
            "UntrustedNotAllowed",
            format!("{auth_url} presents a certificate from an unknown authority; set spec.allowUntrustedCA: true to peer anyway"),
        );
        if let Some(patch) = decide::identification_patch(&fc.spec, probed, None) {
            fcs(&ctx.client).patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await?;
        }
        write_status(&ctx.client, fc, &status).await?;
        return Ok(Action::await_change());
    }
    trusted_condition(&mut status, fc, verdict, "auth service");

    let ids = if decide::needs_identification(&fc.spec) {
        match ctx.peers.ids(&auth_url, trust).await {
            Ok(ids) => Some(ids),
            Err(e) => return remote_failed(fc, ctx, status, e).await,
        }
    } else {
        None
    };
    let ids_ref = ids.as_ref().map(|i| (i.cluster_id.as_str(), i.cluster_name.as_str(), i.guest_namespace.as_str()));
    if let Some(patch) = decide::identification_patch(&fc.spec, probed, ids_ref) {
        // The change of spec brings the next reconcile, which goes on from here.
        fcs(&ctx.client).patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await?;
        return Ok(Action::await_change());
    }
    let remote_id = fc.spec.remote_cluster_id().map(str::to_owned).or(ids.as_ref().map(|i| i.cluster_id.clone())).unwrap_or_default();
    let remote_ns =
        fc.spec.namespace.clone().filter(|n| !n.is_empty()).or(ids.as_ref().map(|i| i.guest_namespace.clone())).unwrap_or_default();
    if remote_id == own_id {
        condition(&mut status, fc, JOINED, false, "SelfPeering", "the remote cluster ID is this cluster's own ID");
        write_status(&ctx.client, fc, &status).await?;
        return Ok(Action::await_change());
    }

    // From here on remote objects may exist: the finalizer guarantees they are removed.
    add_finalizer(fc, &ctx.client).await?;

    // The remote API server CA, retrieved once and pinned.
    let ca_name = ca_data_secret(&name);
    let ca_pem = match ctx.secret_value(&ca_name, CA_KEY) {
        Some(pem) => pem,
        None => match ctx.peers.ca(&auth_url, trust).await {
            Ok(pem) => store_ca(fc, ctx, &remote_id, pem, "its auth service").await?,
            Err(e) => return remote_failed(fc, ctx, status, e).await,
        },
    };
    let fingerprint = record_ca(ctx, &mut status, &name, &ca_pem)?;

    // Our identity on the remote, asked for once.
    let identity_name = identity_secret(&name);
    let issued = match ctx.secret_value(&identity_name, KUBECONFIG_KEY) {
        Some(k) => k,
        None => {
            let token = read_token(&ctx.client, &ctx.namespace, &remote_id).await?;
            let request = IdentityRequest { cluster_id: own_id.to_owned(), token: token.clone() };
            match ctx.peers.identity(&auth_url, trust, &request).await {
                Ok(answer) => {
                    let secret = owned_secret(fc, identity_name.clone(), &ctx.namespace, &remote_id, KUBECONFIG_KEY, &answer.kubeconfig);
                    create_secret(&ctx.client, &secret).await?;
                    ctx.event(fc, false, "IdentityAccepted", format!("the remote issued our identity; stored in Secret {identity_name}"))
                        .await;
                    answer.kubeconfig
                }
                Err(Error::Remote { message, .. }) if message.contains("HTTP 403") => {
                    let refused = decide::refusal_status(token.is_empty());
                    status.auth_status = Some(refused);
                    condition(
                        &mut status,
                        fc,
                        AUTHENTICATED,
                        false,
                        if refused == AuthStatus::EmptyRefused { "EmptyTokenRefused" } else { "TokenRefused" },
                        format!("{message}; put the remote's token in Secret {} (key {TOKEN_KEY})", token_secret(&remote_id)),
                    );
                    write_status(&ctx.client, fc, &status).await?;
                    return Ok(Action::requeue(ctx.timing.health * 10));
                }
                Err(e) => return remote_failed(fc, ctx, status, e).await,
            }
        }
    };
    status.auth_status = Some(AuthStatus::Accepted);
    condition(&mut status, fc, AUTHENTICATED, true, "IdentityIssued", format!("identity stored in Secret {identity_name}"));

    // The health check: our PeeringRequest on the remote, re-created when missing.
    let access = RemoteAccess { kubeconfig: issued, api_url: fc.spec.api_url.clone(), ca_pem: Some(ca_pem) };
    let remote = ctx.remote_client(&name, access).await?;
    let ours = OurRequest {
        home_id: own_id,
        home_name: config.discovery_config.cluster_name.as_deref().filter(|n| !n.is_empty()),
        home_namespace: &ctx.namespace,
        remote_namespace: &remote_ns,
        home_auth_url: ctx.auth_url.as_deref(),
    };
    let remote_prs: Api<PeeringRequest> = Api::all(remote.clone());
    let existing = match remote_prs.get_opt(own_id).await {
        Ok(pr) => pr,
        Err(e) if is_refusal(&e) => {
            // The remote no longer knows our identity (revoked, or the remote was reinstalled):
            // drop it so the next round asks for a new one.
            ctx.forget_remote(&name);
            grant::delete(&Api::<Secret>::namespaced(ctx.client.clone(), &ctx.namespace), &identity_name).await?;
            status.auth_status = Some(AuthStatus::Pending);
            let message = format!("the remote refused our identity ({e}); asking for a new one");
            condition(&mut status, fc, AUTHENTICATED, false, "IdentityRevoked", message.clone());
            ctx.event(fc, true, "IdentityRevoked", message).await;
            write_status(&ctx.client, fc, &status).await?;
            return Ok(Action::requeue(ctx.timing.retry));
        }
        Err(e) if is_kube_api_error(&e) => return remote_failed(fc, ctx, status, Error::remote("API server", e)).await,
        Err(e) => {
            ctx.forget_remote(&name);
            return remote_unreachable_or_ca_changed(fc, ctx, status, &auth_url, trust, &fingerprint, e).await;
        }
    };
    condition(&mut status, fc, REMOTE_REACHABLE, true, "Reachable", "the remote API server answered");
    condition(&mut status, fc, CA_VERIFIED, true, "Pinned", format!("the remote API server certificate verified against CA {fingerprint}"));
    if !existing.as_ref().is_some_and(|pr| ours.is_satisfied_by(pr)) {
        let repaired = existing.is_some() || status.outgoing.as_ref().is_some_and(|o| o.remote_peering_request_name.is_some());
        offer_peering(ctx, &remote, &ours, &remote_id).await?;
        let (reason, note) = if repaired {
            ("PeeringRequestRepaired", format!("our PeeringRequest {own_id} on the remote was missing or changed; re-created"))
        } else {
            ("PeeringRequestCreated", format!("created PeeringRequest {own_id} on the remote"))
        };
        ctx.event(fc, repaired, reason, note).await;
    }

    finish_join(fc, ctx, status, own_id, &remote_id).await
}

/// Pins `pem`, the remote API server CA fetched from `source`: Secret `<fc>-ca-data` (owned
/// by the ForeignCluster) and an Event; returns it.
async fn store_ca<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, remote_id: &str, pem: String, source: &str) -> Result<String> {
    let ca_name = ca_data_secret(&fc.name_any());
    create_secret(&ctx.client, &owned_secret(fc, ca_name.clone(), &ctx.namespace, remote_id, CA_KEY, &pem)).await?;
    ctx.event(fc, false, "CaRetrieved", format!("stored the remote API server CA (from {source}) in Secret {ca_name}")).await;
    Ok(pem)
}

/// Records the pinned CA in `status` (Secret and fingerprint); returns the fingerprint.
fn record_ca<P: Peers>(ctx: &Ctx<P>, status: &mut ForeignClusterStatus, fc_name: &str, pem: &str) -> Result<String> {
    let ca_name = ca_data_secret(fc_name);
    let fingerprint = liqo_certs::inspect::fingerprint_sha256(pem).map_err(|e| Error::Tls(format!("{ca_name}: {e}")))?;
    status.ca_data_ref = Some(SecretRef { name: ca_name, namespace: Some(ctx.namespace.clone()) });
    status.ca_fingerprint = Some(fingerprint.clone());
    Ok(fingerprint)
}

/// The `Trusted` condition of a peering `verdict` allowed, about the certificate of `what`.
fn trusted_condition(status: &mut ForeignClusterStatus, fc: &ForeignCluster, verdict: TrustVerdict, what: &str) {
    let (reason, message) = match verdict {
        TrustVerdict::Trusted => ("Trusted", format!("the {what} certificate verified")),
        TrustVerdict::AllowedBySpec => ("UntrustedAllowed", "unknown certificate authority, allowed by spec.allowUntrustedCA".to_owned()),
        _ => ("UntrustedAllowed", "unknown certificate authority, allowed for discovered peers by autojoinUntrusted".to_owned()),
    };
    condition(status, fc, TRUSTED, verdict == TrustVerdict::Trusted, reason, message);
}

/// Adds the finalizer `discovery.liqo.io/peered` when missing.
async fn add_finalizer(fc: &ForeignCluster, client: &Client) -> Result<()> {
    if fc.finalizers().iter().any(|f| f == FINALIZER_PEERED) {
        return Ok(());
    }
    let mut finalizers = fc.finalizers().to_vec();
    finalizers.push(FINALIZER_PEERED.to_owned());
    let patch = serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": fc.resource_version()}});
    fcs(client).patch(&fc.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    Ok(())
}

/// Whether the peer's Advertisement is here now.
fn advertisement_present<P: Peers>(ctx: &Ctx<P>, remote_id: &str) -> bool {
    ctx.advertisements.get(&ObjectRef::new(&advertisement_name(remote_id))).is_some()
}

/// Joined once the remote advertises to us: `outgoing` and the `Joined` condition follow the
/// peer's Advertisement; the next health check is scheduled.
async fn finish_join<P: Peers>(
    fc: &ForeignCluster,
    ctx: &Ctx<P>,
    mut status: ForeignClusterStatus,
    own_id: &str,
    remote_id: &str,
) -> Result<Action> {
    let adv_name = advertisement_name(remote_id);
    let present = advertisement_present(ctx, remote_id);
    let seen_before = status.outgoing.as_ref().is_some_and(|o| o.advertisement.is_some());
    let (joined, reason, message) = decide::joined_reason(present, seen_before);
    status.outgoing =
        Some(OutgoingStatus { joined, remote_peering_request_name: Some(own_id.to_owned()), advertisement: present.then_some(adv_name) });
    condition(&mut status, fc, JOINED, joined, reason, message);
    if seen_before && !present {
        ctx.event(fc, true, reason, message.to_owned()).await;
    }
    write_status(&ctx.client, fc, &status).await?;
    Ok(Action::requeue(ctx.timing.health))
}

/// Grants the peer its Advertisement access here, and puts the kubeconfig for it and our
/// PeeringRequest on the remote.
async fn offer_peering<P: Peers>(ctx: &Ctx<P>, remote: &Client, ours: &OurRequest<'_>, remote_id: &str) -> Result<()> {
    let secret = peer_kubeconfig_secret(ctx, ours, remote_id).await?;
    grant::apply(&Api::<Secret>::namespaced(remote.clone(), ours.remote_namespace), FIELD_MANAGER, &secret).await?;
    grant::apply(&Api::<PeeringRequest>::all(remote.clone()), FIELD_MANAGER, &ours.object()).await?;
    Ok(())
}

/// Grants the peer its Advertisement access here, and returns the Secret (for the remote's
/// namespace) holding a kubeconfig for that access.
async fn peer_kubeconfig_secret<P: Peers>(ctx: &Ctx<P>, ours: &OurRequest<'_>, remote_id: &str) -> Result<Secret> {
    let access = advertisement_access(remote_id, &ctx.namespace);
    grant::grant(&ctx.client, &ctx.namespace, FIELD_MANAGER, &access).await?;
    let token = grant::token(&ctx.client, &ctx.namespace, remote_id, ctx.token_lifetime).await?;
    let config = kubeconfig(&ctx.api_server, ours.home_id, remote_id, &ctx.namespace, token)?;
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(peering_kubeconfig_secret(ours.home_id)),
            namespace: Some(ours.remote_namespace.to_owned()),
            labels: Some(BTreeMap::from([(LABEL_CLUSTER_ID.to_owned(), ours.home_id.to_owned())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(KUBECONFIG_KEY.to_owned(), ByteString(config.into_bytes()))])),
        ..Default::default()
    })
}

/// The token for peer `remote_id`'s `/identity`: Secret `remote-token-<id>`, else empty.
async fn read_token(client: &Client, namespace: &str, remote_id: &str) -> Result<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get_opt(&token_secret(remote_id)).await?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(TOKEN_KEY).cloned())
        .and_then(|b| String::from_utf8(b.0).ok())
        .map(|t| t.trim().to_owned())
        .unwrap_or_default())
}

/// True when the remote API server refuses our credentials (401, 403).
fn is_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 401 || s.code == 403)
}

/// True for an answer of the API server (4xx/5xx status), false for a transport failure.
fn is_kube_api_error(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(_))
}

/// A failed call to the remote's auth service: recorded, retried.
async fn remote_failed<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, mut status: ForeignClusterStatus, e: Error) -> Result<Action> {
    tracing::info!(fc = %fc.name_any(), error = %e, "remote call failed");
    condition(&mut status, fc, REMOTE_REACHABLE, false, e.label(), e.to_string());
    write_status(&ctx.client, fc, &status).await?;
    Ok(Action::requeue(ctx.timing.retry))
}

/// The remote API server did not answer: either it is down, or it now presents a certificate
/// from another CA — which is reported, never accepted silently.
async fn remote_unreachable_or_ca_changed<P: Peers>(
    fc: &ForeignCluster,
    ctx: &Ctx<P>,
    status: ForeignClusterStatus,
    auth_url: &str,
    trust: TrustMode,
    pinned: &str,
    e: kube::Error,
) -> Result<Action> {
    let presented = ctx.peers.ca(auth_url, trust).await.ok();
    unreachable_or_ca_changed(fc, ctx, status, pinned, presented, e).await
}

/// After a failed call to the remote API server: when the CA it presents now (`presented`,
/// fetched again by the caller) differs from the pinned one, that is reported (condition,
/// Event the first time) and never accepted; otherwise the remote is unreachable.
async fn unreachable_or_ca_changed<P: Peers>(
    fc: &ForeignCluster,
    ctx: &Ctx<P>,
    mut status: ForeignClusterStatus,
    pinned: &str,
    presented: Option<String>,
    e: kube::Error,
) -> Result<Action> {
    if let Some(presented) = presented.and_then(|pem| liqo_certs::inspect::fingerprint_sha256(&pem).ok())
        && presented != pinned
    {
        let err = Error::CaChanged { stored: pinned.to_owned(), presented };
        let message = format!("{err}; delete Secret {} to trust the new CA", ca_data_secret(&fc.name_any()));
        let first = conditions::get(&status.conditions, CA_VERIFIED).is_none_or(|c| c.status != "False");
        condition(&mut status, fc, CA_VERIFIED, false, err.label(), message.clone());
        condition(&mut status, fc, REMOTE_REACHABLE, false, err.label(), e.to_string());
        if first {
            ctx.event(fc, true, err.label(), message).await;
        }
        write_status(&ctx.client, fc, &status).await?;
        return Ok(Action::requeue(ctx.timing.health));
    }
    let err = Error::remote("API server", e);
    remote_failed(fc, ctx, status, err).await
}

/// `join=false` or deletion, with the finalizer present: remote PeeringRequest and Secret,
/// local Advertisement and RBAC, status, finalizer — in that order.
async fn unjoin<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, own_id: &str) -> Result<Action> {
    let name = fc.name_any();
    let deleting = fc.metadata.deletion_timestamp.is_some();
    let mut status = fc.status.clone().unwrap_or_default();
    let remote_id = fc.spec.remote_cluster_id().unwrap_or_default().to_owned();

    let issued = ctx.secret_value(&identity_secret(&name), KUBECONFIG_KEY);
    let anonymous = issued.is_none() && anonymous::applies(fc);
    let ca_pem = ctx.secret_value(&ca_data_secret(&name), CA_KEY);
    if let (Some(kubeconfig), Some(ca_pem)) = (issued, ca_pem) {
        let access = RemoteAccess { kubeconfig, api_url: fc.spec.api_url.clone(), ca_pem: Some(ca_pem) };
        let result = async {
            let remote = ctx.remote_client(&name, access).await?;
            let remote_ns = fc.spec.remote_namespace().to_owned();
            grant::delete(&Api::<PeeringRequest>::all(remote.clone()), own_id).await?;
            grant::delete(&Api::<Secret>::namespaced(remote, &remote_ns), &peering_kubeconfig_secret(own_id)).await?;
            Ok::<_, Error>(())
        }
        .await;
        if let Err(e) = result {
            ctx.forget_remote(&name);
            let refused = matches!(&e, Error::Kube(k) if is_refusal(k));
            if !refused && !decide::give_up_on_remote(fc.metadata.deletion_timestamp.as_ref(), &now(), ctx.timing.unjoin_grace) {
                condition(
                    &mut status,
                    fc,
                    JOINED,
                    true,
                    "UnjoinPending",
                    format!("cannot remove our PeeringRequest from the remote yet: {e}"),
                );
                if !deleting {
                    write_status(&ctx.client, fc, &status).await?;
                }
                return Ok(Action::requeue(ctx.timing.retry));
            }
            let note = if refused {
                format!("the remote refuses our identity ({e}); unjoined locally, our PeeringRequest may remain there")
            } else {
                format!(
                    "the remote stayed unreachable for {}s after deletion ({e}); unjoined locally, our PeeringRequest may remain there",
                    ctx.timing.unjoin_grace.as_secs()
                )
            };
            ctx.event(fc, true, "RemoteGone", note).await;
        }
    }

    // Local side: the peer's Advertisement and its access.
    if !remote_id.is_empty() {
        grant::delete(&Api::<Advertisement>::all(ctx.client.clone()), &advertisement_name(&remote_id)).await?;
        grant::revoke(&ctx.client, &ctx.namespace, &advertisement_access(&remote_id, &ctx.namespace)).await?;
    }
    ctx.forget_remote(&name);
    if deleting {
        // Owner references would remove them with a garbage collector; do not depend on one.
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
        grant::delete(&secrets, &identity_secret(&name)).await?;
        grant::delete(&secrets, &ca_data_secret(&name)).await?;
    } else {
        status.outgoing = Some(OutgoingStatus { joined: false, remote_peering_request_name: None, advertisement: None });
        let message = if anonymous {
            "spec.join is false: the peer's access here is revoked; our PeeringRequest stays on the remote (an anonymous requester cannot delete it)"
        } else {
            "spec.join is false: our PeeringRequest was removed from the remote"
        };
        condition(&mut status, fc, JOINED, false, "Unjoined", message);
        write_status(&ctx.client, fc, &status).await?;
    }
    let finalizers: Vec<&String> = fc.finalizers().iter().filter(|f| *f != FINALIZER_PEERED).collect();
    let patch = serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": fc.resource_version()}});
    match fcs(&ctx.client).patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    ctx.event(fc, false, "Unjoined", format!("unjoined from cluster {remote_id}")).await;
    Ok(Action::await_change())
}

fn error_policy<P: Peers>(fc: Arc<ForeignCluster>, e: &Error, ctx: Arc<Ctx<P>>) -> Action {
    tracing::warn!(fc = %fc.name_any(), error = %e, label = e.label(), "reconcile failed");
    Action::requeue(ctx.timing.retry)
}

/// Runs the controller until shutdown. Also watches the Advertisements peers create here, so
/// a deleted one shows at once on its ForeignCluster.
pub async fn run<P: Peers>(
    ctx: Arc<Ctx<P>>,
    metrics: Arc<crate::metrics::Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<ForeignCluster> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watcher::Config::default().any_semantic());
    let store = controller.store();
    controller
        .watches(Api::<Advertisement>::all(ctx.client.clone()), watcher::Config::default().any_semantic(), move |adv| {
            let sender = adv.spec.cluster_id.clone();
            store
                .state()
                .into_iter()
                .filter(|fc| fc.spec.remote_cluster_id() == Some(sender.as_str()))
                .map(|fc| ObjectRef::from_obj(&*fc))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown)
        .run(
            move |fc, ctx| {
                let metrics = metrics.clone();
                async move {
                    let started = std::time::Instant::now();
                    let result = reconcile(fc, ctx).await;
                    metrics.observe("foreign_cluster", &result, started);
                    result
                }
            },
            error_policy,
            ctx,
        )
        .for_each(|_| async {})
        .await;
}
