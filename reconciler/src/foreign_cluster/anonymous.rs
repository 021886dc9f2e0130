//! Joining a peer known only by its API server (seed 003's manual form: `clusterID` +
//! `apiUrl`, no `authUrl`, and ForeignClusters from seed-003-style DNS zones) the seed-001
//! way: no identity is issued to us, the remote admits anonymous PeeringRequests and Secrets
//! (the opt-in `manifests/anonymous-peering/` there) and its webhook judges
//! them by policy alone.
//!
//! - trust: the API server's certificate verified by our roots → Trusted; otherwise Untrusted,
//!   allowed only by `allowUntrustedCA` (or `autojoinUntrusted` for discovered peers);
//! - the CA comes from the anonymously readable `kube-public/cluster-info` (kubeadm and kind
//!   publish it), is stored in `<fc>-ca-data` and pinned by fingerprint like on the auth path;
//! - join: our Secret (a kubeconfig for the peer's Advertisement access here) and our
//!   PeeringRequest are created on the remote, anonymously; "already exists" is fine (an
//!   anonymous requester can create, never read, change or delete);
//! - health: the remote API server answers `/version` through the pinned CA; when the peer's
//!   Advertisement disappears, the offer is made again; `Joined` follows the Advertisement;
//! - unjoin: our Advertisement access here is revoked and the Advertisement deleted; the
//!   remote's PeeringRequest stays (its admin removes it), which the condition says.

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use liqo_api::names::ca_data_secret;
use liqo_api::{ClusterConfigSpec, ForeignCluster, PeeringRequest, TrustMode};

use super::decide::{self, OurRequest};
use super::{
    AUTHENTICATED, CA_KEY, CA_VERIFIED, Ctx, JOINED, REMOTE_REACHABLE, TRUSTED, add_finalizer, advertisement_present, condition, fcs,
    finish_join, peer_kubeconfig_secret, record_ca, remote_failed, store_ca, trusted_condition, unreachable_or_ca_changed, write_status,
};
use crate::error::{Error, Result, is_conflict};
use crate::peer::{ANONYMOUS_KUBECONFIG, Peers, RemoteAccess};

/// Whether `fc` peers this way: an API server URL and a cluster ID, no auth service.
pub fn applies(fc: &ForeignCluster) -> bool {
    fc.spec.auth_url.as_deref().is_none_or(str::is_empty)
        && fc.spec.api_url.as_deref().is_some_and(|u| !u.is_empty())
        && fc.spec.remote_cluster_id().is_some()
}

/// True for "the remote does not let anonymous requests do this" (401, 403).
fn is_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 401 || s.code == 403)
}

/// `spec.join=true` for a ForeignCluster that [`applies`].
pub(super) async fn join<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, own_id: &str, config: &ClusterConfigSpec) -> Result<Action> {
    let name = fc.name_any();
    let api_url = fc.spec.api_url.as_deref().unwrap_or_default();
    let mut status = fc.status.clone().unwrap_or_default();
    let remote_id = fc.spec.remote_cluster_id().unwrap_or_default().to_owned();
    if remote_id == own_id {
        condition(&mut status, fc, JOINED, false, "SelfPeering", "the remote cluster ID is this cluster's own ID");
        write_status(&ctx.client, fc, &status).await?;
        return Ok(Action::await_change());
    }

    // Trust in the API server's certificate, recorded once in spec.trustMode.
    let mut trust = fc.spec.trust_mode();
    if trust == TrustMode::Unknown {
        match ctx.peers.probe_trust(api_url).await {
            Ok(t) => trust = t,
            Err(e) => return remote_failed(fc, ctx, status, e).await,
        }
        if let Some(patch) = decide::identification_patch(&fc.spec, Some(trust), None) {
            fcs(&ctx.client).patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await?;
            return Ok(Action::await_change());
        }
    }
    let verdict = decide::trust_verdict(&fc.spec, trust, &config.discovery_config);
    if !verdict.allows_peering() {
        let message = format!("{api_url} presents a certificate from an unknown authority; set spec.allowUntrustedCA: true to peer anyway");
        condition(&mut status, fc, TRUSTED, false, "UntrustedNotAllowed", message);
        write_status(&ctx.client, fc, &status).await?;
        return Ok(Action::await_change());
    }
    trusted_condition(&mut status, fc, verdict, "API server");
    add_finalizer(fc, &ctx.client).await?;

    // The CA from kube-public/cluster-info, retrieved once and pinned.
    let ca_pem = match ctx.secret_value(&ca_data_secret(&name), CA_KEY) {
        Some(pem) => pem,
        None => match ctx.peers.cluster_info_ca(api_url, trust).await {
            Ok(pem) => store_ca(fc, ctx, &remote_id, pem, "kube-public/cluster-info").await?,
            Err(e) => {
                let message = format!("{e}; without the remote's CA nothing is sent to it (or set spec.authUrl)");
                condition(&mut status, fc, CA_VERIFIED, false, "NoCaAvailable", message.clone());
                return remote_failed(fc, ctx, status, Error::Remote { what: "API server", message }).await;
            }
        },
    };
    let fingerprint = record_ca(ctx, &mut status, &name, &ca_pem)?;
    status.auth_status = None;
    condition(
        &mut status,
        fc,
        AUTHENTICATED,
        false,
        "Anonymous",
        "no identity on the remote: PeeringRequests are sent anonymously (no spec.authUrl)",
    );

    // Health: the remote API server answers through the pinned CA.
    let access = RemoteAccess { kubeconfig: ANONYMOUS_KUBECONFIG.into(), api_url: Some(api_url.to_owned()), ca_pem: Some(ca_pem) };
    let remote = ctx.remote_client(&name, access).await?;
    if let Err(e) = remote.apiserver_version().await {
        ctx.forget_remote(&name);
        // Fetched unverified: only compared with the pinned CA, never accepted.
        let presented = ctx.peers.cluster_info_ca(api_url, TrustMode::Untrusted).await.ok();
        return unreachable_or_ca_changed(fc, ctx, status, &fingerprint, presented, e).await;
    }
    condition(&mut status, fc, REMOTE_REACHABLE, true, "Reachable", "the remote API server answered");
    condition(&mut status, fc, CA_VERIFIED, true, "Pinned", format!("the remote API server certificate verified against CA {fingerprint}"));

    // The offer: made once, and again when the peer's Advertisement, seen before, is gone (the
    // remote's PeeringRequest may have been deleted: an anonymous requester cannot look). Not
    // every round while waiting: each offer mints a token for the peer.
    let outgoing = status.outgoing.as_ref();
    let offered = outgoing.is_some_and(|o| o.remote_peering_request_name.is_some());
    let advertised_before = outgoing.is_some_and(|o| o.advertisement.is_some());
    if !advertisement_present(ctx, &remote_id) && (!offered || advertised_before) {
        let ours = OurRequest {
            home_id: own_id,
            home_name: config.discovery_config.cluster_name.as_deref().filter(|n| !n.is_empty()),
            home_namespace: &ctx.namespace,
            remote_namespace: fc.spec.remote_namespace(),
            home_auth_url: ctx.auth_url.as_deref(),
        };
        match offer(ctx, &remote, &ours, &remote_id).await {
            Ok(created) => {
                if created {
                    ctx.event(fc, false, "PeeringRequestCreated", format!("created PeeringRequest {own_id} on the remote (anonymously)"))
                        .await;
                }
            }
            Err(Error::Kube(e)) if is_refusal(&e) => {
                let message = format!(
                    "the remote refuses anonymous PeeringRequests ({e}): apply manifests/anonymous-peering/ there, or set spec.authUrl"
                );
                condition(&mut status, fc, JOINED, false, "AnonymousPeeringRefused", message);
                write_status(&ctx.client, fc, &status).await?;
                return Ok(Action::requeue(ctx.timing.health));
            }
            Err(e) => return Err(e),
        }
    }
    finish_join(fc, ctx, status, own_id, &remote_id).await
}

/// Creates our Secret and PeeringRequest on the remote; true when the PeeringRequest is new.
async fn offer<P: Peers>(ctx: &Ctx<P>, remote: &Client, ours: &OurRequest<'_>, remote_id: &str) -> Result<bool> {
    let secret = peer_kubeconfig_secret(ctx, ours, remote_id).await?;
    let pp = PostParams::default();
    match Api::<k8s_openapi::api::core::v1::Secret>::namespaced(remote.clone(), ours.remote_namespace).create(&pp, &secret).await {
        Ok(_) => {}
        Err(e) if is_conflict(&e) => {}
        Err(e) => return Err(e.into()),
    }
    match Api::<PeeringRequest>::all(remote.clone()).create(&pp, &ours.object()).await {
        Ok(_) => Ok(true),
        Err(e) if is_conflict(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
