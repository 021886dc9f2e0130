//! `spec.join: false`, or deletion, with the finalizer present — the cascade, in order:
//!
//! 1. our PeeringRequest and its Secret on the remote (with an identity; an anonymous requester
//!    cannot delete). The remote's broadcaster then withdraws its Advertisement from us; if it
//!    arrives after step 2 it is refused, which the remote takes as done;
//! 2. here: the peer's access (ServiceAccount and RoleBinding in its tenant namespace), then
//!    its Advertisement;
//! 3. the wait for our PeeringRequest to be gone from the remote (`UnjoinPending` while the
//!    remote's reconciler holds it Terminating); then, once no direction is left (no request
//!    of the peer stands here), the identities we issued it and its tenant namespace; the
//!    identity Secret the remote issued us (and, on deletion, the CA Secret);
//! 4. the status (join false: every phase `Unknown`/`NotJoined`, `Joined` False `Unjoined`,
//!    outgoing cleared), then the finalizer, then one `Unjoined` Event.
//!
//! A remote that refuses us (it revoked our identity) is done with us. A remote that does not
//! answer holds a `join: false` as `UnjoinPending`; a deleted ForeignCluster whose remote stays
//! unreachable for the grace period completes locally (Event `RemoteGone`), so it never becomes
//! undeletable.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use liqo_api::names::{advertisement_name, ca_data_secret, peering_kubeconfig_secret, tenant_namespace};
use liqo_api::reasons::{ConditionType as Phase, Reason, Status};
use liqo_api::{Advertisement, ForeignCluster, OutgoingStatus, PeeringRequest, SecretRef};

use super::ctx::{self, Ctx, read_token, remove_finalizer};
use super::decide;
use super::names::{CA_KEY, KUBECONFIG_KEY, identity_secret};
use super::report::Report;
use super::way::Way;
use crate::machinery::error::{Error, Result, Step};
use crate::machinery::work_queue::Action;
use crate::machinery::writes;
use crate::remote::auth::wire::IdentityRequest;
use crate::remote::peer::{Peers, RemoteAccess, Trust};
use crate::tenancy::access::advertisement_access;
use crate::tenancy::grant;

/// Unjoins `fc` (see the module documentation).
pub(super) async fn unjoin<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, own_id: &str) -> Result<Action> {
    let name = fc.name_any();
    let deleting = fc.metadata.deletion_timestamp.is_some();
    let remote_id = fc.spec.remote_cluster_id().unwrap_or_default().to_owned();

    // 1. The remote side: our PeeringRequest and its Secret deleted there.
    let anonymous = Way::of(fc).is_some_and(|w| !w.reads_requests());
    let mut how = if anonymous { RemoteSide::Anonymous } else { RemoteSide::Removed };
    let mut gone_note = None;
    // A round after one that found our request terminating only looks again: the deletes
    // and the revocation are done.
    let again = ctx.withdrawing(&name);
    let withdrawal = match withdraw_offer(fc, ctx, own_id, again).await {
        Ok(w) => w,
        // Only a 401 (the remote no longer knows our identity): a 403 is retried below, as a
        // restarted API server answers 403 for a good identity until its RBAC cache is filled
        // (taking that for the end left our request on the remote).
        Err(e) if e.is_revocation() => {
            how = RemoteSide::Revoked;
            gone_note = Some(format!("the remote no longer knows our identity ({e}): it is done with us; unjoined locally"));
            Withdrawal::Gone
        }
        Err(e) => {
            ctx.forget_remote(&name);
            let why = format!("cannot remove our PeeringRequest from the remote yet: {e}");
            // Within a health period, like a failed join: a remote answering again is
            // unjoined within one (the chaos soak saw a 10 s wait here with a 2 s period).
            match pending(fc, ctx, deleting, why, ctx.timing.retry.min(ctx.timing.health)).await? {
                Some(action) => return Ok(action),
                None => {
                    gone_note = Some(given_up(ctx, &e.to_string()));
                    Withdrawal::Gone
                }
            }
        }
    };

    // 2. Our side: the peer's access, then its Advertisement (its withdrawal from us, if it
    // comes later, is refused, which the remote takes as done). Access first, so that the
    // peer cannot write it again after we deleted it; the Advertisement every round, for a
    // write authorized just before the revocation that lands after (found by the chaos soak,
    // seed 7: an Advertisement left here after an unjoin).
    if !remote_id.is_empty() {
        if !again {
            grant::revoke(&ctx.shared.client, &advertisement_access(&remote_id)).await?;
        }
        let tenant = tenant_namespace(&remote_id);
        writes::delete(&Api::<Advertisement>::namespaced(ctx.shared.client.clone(), &tenant), &advertisement_name(&remote_id)).await?;
    }

    // 3. Done only once our PeeringRequest is gone from the remote (NotFound, not Terminating:
    // the remote's reconciler holds it until its broadcaster has stopped).
    ctx.set_withdrawing(&name, withdrawal == Withdrawal::Terminating);
    let waiting = match withdrawal {
        Withdrawal::Gone => None,
        Withdrawal::Terminating => {
            Some(("our PeeringRequest on the remote is terminating: the remote's reconciler has not released it yet", ctx.timing.health))
        }
        Withdrawal::Standing => Some((
            "our PeeringRequest on the remote is not deleted yet (it is there and not terminating): deleting it again",
            ctx.timing.retry.min(ctx.timing.health),
        )),
    };
    if let Some((why, again)) = waiting {
        match pending(fc, ctx, deleting, why.to_owned(), again).await? {
            Some(action) => return Ok(action),
            None => gone_note = Some(given_up(ctx, "our PeeringRequest was still there")),
        }
    }
    ctx.forget_unjoined(&name, &remote_id);
    // No direction left (the incoming one is its request's, which keeps the namespace while it
    // stands): the identities we issued the peer and its tenant namespace go.
    if !remote_id.is_empty() {
        // An identity the peer was issued in the last few seconds is for a join of its own
        // under way: its request comes next (looked at again if it does not).
        let since = crate::tenancy::retirement::fresh_after(k8s_openapi::jiff::Timestamp::now());
        crate::tenancy::retirement::retire(&ctx.shared.client, &ctx.shared.foreign, &remote_id, since).await?;
    }
    // The identity the remote issued us is for this peering: the remote retires it with its
    // tenant namespace for us once no direction is left there, so a re-join asks for a new
    // one instead of meeting a revoked one (a 401, told as a warning). Unjoined without the
    // remote, it is kept apart instead: the remote still binds our cluster ID to it (protocol §10),
    // and the next ForeignCluster for that peer takes it up rather than being refused.
    if gone_note.is_some()
        && how != RemoteSide::Revoked
        && !remote_id.is_empty()
        && let Some(kubeconfig) = ctx.secret_value(&identity_secret(&name), KUBECONFIG_KEY)
    {
        let kept = liqo_api::names::kept_identity_secret(&remote_id);
        ctx.store(None, &kept, &remote_id, KUBECONFIG_KEY, &kubeconfig).await?;
    }
    ctx.delete_local_secret(&identity_secret(&name)).await?;
    if deleting {
        // Owner references would remove it with a garbage collector; do not depend on one.
        ctx.delete_local_secret(&ca_data_secret(&name)).await?;
    } else {
        // 4. The status, then the finalizer.
        ctx.publish(fc, &unjoined(fc, ctx, how), false).await?;
    }
    // Told before the finalizer goes: whoever waits for the ForeignCluster to go (`kubectl liqo
    // unpeer --delete --wait`) then finds why it went without the remote (a CI run saw the
    // plugin look before this Event existed and say our request was gone from the remote).
    if let Some(note) = gone_note {
        ctx.event(fc, true, "RemoteGone", note).await;
    }
    remove_finalizer(fc, &ctx.shared.client).await?;
    ctx.event(fc, false, "Unjoined", format!("unjoined from cluster {remote_id}")).await;
    Ok(Action::await_change())
}

/// An unjoin waiting for the remote, saying `why` (`UnjoinPending`) and coming back after
/// `again`: `None` once a deleted ForeignCluster has waited the grace period (it then completes
/// locally).
async fn pending<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, deleting: bool, why: String, again: Duration) -> Result<Option<Action>> {
    if decide::give_up_on_remote(fc.metadata.deletion_timestamp.as_ref(), &ctx::now(), ctx.timing.unjoin_grace) {
        return Ok(None);
    }
    if !deleting {
        let mut r = Report::joining(fc.status.as_ref());
        r.set(Phase::Joined, Status::True, Reason::UnjoinPending, why);
        ctx.publish(fc, &r, false).await?;
    }
    Ok(Some(Action::requeue(again)))
}

/// The `RemoteGone` note of a deletion completed locally after the grace period.
fn given_up<P: Peers>(ctx: &Ctx<P>, why: &str) -> String {
    let grace = ctx.timing.unjoin_grace.as_secs();
    format!(
        "the remote did not finish unjoining within {grace}s after deletion ({why}); unjoined locally, our PeeringRequest may remain there"
    )
}

/// Where our PeeringRequest on the remote stands after [`withdraw_offer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Withdrawal {
    /// Gone (or never there, or we hold no identity to remove it with).
    Gone,
    /// Deleted, but still there: the remote holds it until its broadcaster is done.
    Terminating,
    /// There and not being deleted, in a round that only looked: made again since our delete
    /// (it is deleted again, not waited for).
    Standing,
}

/// How the remote side of an unjoin ended, as the `Joined` condition tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RemoteSide {
    Removed,
    /// An anonymous requester cannot delete what it created there.
    Anonymous,
    /// The remote no longer knows our identity (401).
    Revoked,
}

/// Deletes our PeeringRequest and its Secret on the remote (unless `deleted` already, in an
/// earlier round), when we hold an identity there, and tells whether the request is gone yet.
async fn withdraw_offer<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, own_id: &str, deleted: bool) -> Result<Withdrawal> {
    let name = fc.name_any();
    let Some(ca_pem) = ctx.secret_value(&ca_data_secret(&name), CA_KEY) else { return Ok(Withdrawal::Gone) };
    let offered = fc.status.as_ref().and_then(|s| s.outgoing.as_ref()).is_some_and(|o| o.remote_peering_request_name.is_some());
    let kubeconfig = match ctx.secret_value(&identity_secret(&name), KUBECONFIG_KEY) {
        Some(kubeconfig) => kubeconfig,
        // Our identity there deleted while our request stands (found by the chaos soak, seed
        // 7): a new one is asked for to withdraw it with, or the request would stay.
        None if offered => match reissue(fc, ctx, own_id).await? {
            Some(kubeconfig) => kubeconfig,
            None => return Ok(Withdrawal::Gone),
        },
        None => return Ok(Withdrawal::Gone),
    };
    // Our request is in the tenant namespace our identity names. One naming none came from a
    // remote of the cluster-scoped protocol: nothing of ours there is in a namespace we could
    // name (it goes when that remote is upgraded, with its cluster-scoped kinds).
    let Some(there) = crate::remote::peer::tenant_of(&kubeconfig) else { return Ok(Withdrawal::Gone) };
    let access = RemoteAccess { kubeconfig, api_url: fc.spec.api_url.clone(), ca_pem: Some(ca_pem) };
    let remote = ctx.shared.peers.api_client(&access).await?;
    let remote_err = |e| Error::remote_api(Step::ApiServer, e);
    let requests = Api::<PeeringRequest>::namespaced(remote.clone(), &there);
    if !deleted {
        // The Secret first: a request gone with no Secret of ours left tells the remote we
        // unjoined (it then retires our identity and tenant namespace there); its broadcaster
        // keeps the client it made from it to withdraw its Advertisement.
        let secrets = Api::<Secret>::namespaced(remote, &there);
        writes::delete_raw(&secrets, &peering_kubeconfig_secret(own_id)).await.map_err(remote_err)?;
        writes::delete_raw(&requests, own_id).await.map_err(remote_err)?;
    }
    let standing = match requests.get_opt(own_id).await {
        // Our request deleted (now or in an earlier round), then our identity refused: the
        // remote retires a peer's identity with its tenant namespace once nothing of it is
        // left there, so the request is gone.
        Err(kube::Error::Api(s)) if decide::retired_us(s.code, deleted) => return Ok(Withdrawal::Gone),
        other => other.map_err(|e| Error::remote_api(Step::ApiServer, e))?,
    };
    match standing {
        Some(terminating) if terminating.metadata.deletion_timestamp.is_some() => {
            ctx.wake_when_gone(fc, requests, &terminating);
            Ok(Withdrawal::Terminating)
        }
        Some(_) => Ok(Withdrawal::Standing),
        None => Ok(Withdrawal::Gone),
    }
}

/// A new identity from the remote's auth service, stored as the join stores it (`None` on the
/// anonymous way, which has none).
async fn reissue<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, own_id: &str) -> Result<Option<String>> {
    let Some(Way::AuthService { auth_url }) = Way::of(fc) else { return Ok(None) };
    let remote_id = fc.spec.remote_cluster_id().unwrap_or_default();
    let token = read_token(&ctx.shared.client, &ctx.shared.namespace, remote_id).await?;
    let trust = fc.spec.approved_fingerprint().map_or_else(|| Trust::from(fc.spec.trust_mode()), Trust::Fingerprint);
    let request = IdentityRequest::first(own_id, token);
    let answer = ctx.shared.peers.identity(auth_url, trust, &request).await?;
    ctx.store_owned(fc, &identity_secret(&fc.name_any()), remote_id, KUBECONFIG_KEY, &answer.kubeconfig).await?;
    Ok(Some(answer.kubeconfig))
}

/// The status after unjoin: no phase is checked, the pinned CA (kept) is still named.
fn unjoined<P: Peers>(fc: &ForeignCluster, ctx: &Ctx<P>, how: RemoteSide) -> Report {
    let mut r = Report::default();
    let ca = ca_data_secret(&fc.name_any());
    if ctx.secret_value(&ca, CA_KEY).is_some() {
        r.ca_data_ref = Some(SecretRef { name: ca, namespace: Some(ctx.shared.namespace.clone()) });
        r.ca_fingerprint = fc.status.as_ref().and_then(|s| s.ca_fingerprint.clone());
    }
    r.outgoing = Some(OutgoingStatus { joined: false, ..Default::default() });
    let message = match how {
        RemoteSide::Anonymous => {
            "spec.join is false: the peer's access here is revoked; our PeeringRequest stays on the remote (an anonymous requester cannot delete it)"
        }
        RemoteSide::Revoked => {
            "spec.join is false: the peer's access here is revoked; the remote no longer knows our identity (it is done with us)"
        }
        RemoteSide::Removed => "spec.join is false: our PeeringRequest is gone from the remote",
    };
    r.set(Phase::Joined, Status::False, Reason::Unjoined, message);
    r
}
