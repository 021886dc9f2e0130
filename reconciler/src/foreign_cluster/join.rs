//! `spec.join: true` — what happens, top to bottom, for both ways of reaching the remote
//! ([`Way`]): identify → trust → pin the CA → identity → reach → offer → finish.
//!
//! Each step records its phase in the [`Report`] and returns what the next needs, or a
//! `Stop`: the phase that stopped the join (written, then retried), a spec change (its watch
//! event brings the next reconcile), or a failure of our own API server. Every step is skipped
//! when already done, so a joined peer costs one remote request per health period and no write.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use liqo_api::names::{advertisement_name, ca_data_secret, tenant_namespace};
use liqo_api::reasons::{ConditionType as Phase, Reason, Status};
use liqo_api::{AuthStatus, ClusterConfigSpec, ForeignCluster, OutgoingStatus, PeeringRequest, SecretRef, TenantNamespaces, TrustMode};

use super::ctx::{self, Ctx, add_finalizer, patch_spec, read_token};
use super::decide::{self, Advertised, Offer, OnRemote, OurRequest, TrustVerdict};
use super::names::{CA_KEY, FIELD_MANAGER, KUBECONFIG_KEY, TOKEN_KEY, identity_secret, token_secret};
use super::report::Report;
use super::way::Way;
use crate::cluster::holder_key::HolderKey;
use crate::machinery::connect_first::{Gate, Silent};
use crate::machinery::error::{Error, Result};
use crate::machinery::work_queue::Action;
use crate::remote::auth::wire::{IdentityRequest, IdentityResponse, Proof, ProvenBy};
use crate::remote::peer::{ANONYMOUS_KUBECONFIG, Peers, RemoteAccess, Trust};
use crate::tenancy::binding;
use crate::tenancy::proof;
use liqo_api::chosen::stands_in;

/// Why the join stopped before finishing.
pub(super) enum Stop {
    /// The report says why: write it, come back after this.
    Report(Action),
    /// The spec was changed: its watch event brings the next reconcile.
    SpecChanged,
    /// Our own API server failed: the error policy retries.
    Fail(Error),
}

/// Only errors of our own API server convert implicitly: a remote's are recorded explicitly.
impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Fail(e)
    }
}

impl From<kube::Error> for Stop {
    fn from(e: kube::Error) -> Self {
        Stop::Fail(e.into())
    }
}

type Step<T> = std::result::Result<T, Stop>;

/// A cluster ID the remote's `/ids` claims is refused, before anything is written, when it is
/// ours or another ForeignCluster's (a peer impersonating another would otherwise take over its
/// Secrets, which are named by cluster ID). The one exception: a stand-in the incoming side
/// made because that cluster asked to peer with us (`IncomingPeering`, chosen by no one, not
/// joined) gives way to this one, which a person or discovery made: it is deleted, and the
/// incoming side records the request on this one.
fn refuse_claim<P: Peers>(j: Join<'_, P>, claimed: &str, r: &mut Report) -> Step<()> {
    let url = j.way.url();
    if claimed == j.own_id {
        r.set(Phase::Joined, Status::False, Reason::SelfPeering, format!("{url}/ids answers this cluster's own ID {claimed}"));
        return Err(Stop::Report(Action::await_change()));
    }
    let me = j.fc.metadata.name.as_deref();
    let holder = j.ctx.shared.standing_for(claimed).into_iter().find(|other| other.metadata.name.as_deref() != me);
    if let Some(other) = holder.filter(|o| !stands_in(o)) {
        let message =
            format!("{url}/ids answers cluster ID {claimed}, which ForeignCluster {} already stands for: refused", other.name_any());
        r.set(Phase::Joined, Status::False, Reason::ClusterIdTaken, message);
        return Err(Stop::Report(Action::requeue(j.ctx.timing.health)));
    }
    Ok(())
}

/// Deletes the incoming stand-ins for `cluster_id` (see [`refuse_claim`]): this ForeignCluster,
/// now identified, stands for it.
async fn give_way<P: Peers>(j: Join<'_, P>, cluster_id: &str) -> Step<()> {
    let me = j.fc.name_any();
    // By the index of cluster IDs: this runs at every round of every peer.
    let stand_ins = j
        .ctx
        .shared
        .standing_for(cluster_id)
        .into_iter()
        .filter(|o| o.name_any() != me && stands_in(o) && o.metadata.deletion_timestamp.is_none());
    for other in stand_ins {
        tracing::info!(fc = %me, stand_in = %other.name_any(), cluster_id, "an incoming stand-in gives way to this ForeignCluster");
        crate::machinery::writes::delete(&Api::<ForeignCluster>::all(j.ctx.shared.client.clone()), &other.name_any()).await?;
    }
    Ok(())
}

/// The remote as identified.
struct Remote {
    id: String,
    namespace: String,
    trust: Trust,
}

/// The remote API server's CA as pinned.
struct Pinned {
    pem: String,
    fingerprint: String,
}

/// Joins `fc`; writes the status the steps found.
pub(super) async fn join<P: Peers>(
    fc: &ForeignCluster,
    ctx: &Ctx<P>,
    own_id: &str,
    config: &ClusterConfigSpec,
    gate: Gate,
) -> Result<Action> {
    let mut report = Report::joining(fc.status.as_ref());
    let action = match pipeline(fc, ctx, own_id, config, gate, &mut report).await {
        Ok(action) => action,
        Err(Stop::Report(action)) => {
            if let Some(failed) = report.failing() {
                ctx.metrics.join_failed(failed.type_, failed.reason);
            }
            action
        }
        Err(Stop::SpecChanged) => return Ok(Action::await_change()),
        Err(Stop::Fail(e)) => return Err(e),
    };
    ctx.publish(fc, &report, true).await?;
    Ok(action)
}

/// What every step knows: the ForeignCluster, the context, the way to the remote, our cluster
/// ID, the ClusterConfig, and whether the remote API server took no connection when connected
/// to first (then nothing calls the remote this round: [`crate::machinery::connect_first`]).
struct Join<'a, P: Peers> {
    fc: &'a ForeignCluster,
    ctx: &'a Ctx<P>,
    way: Way<'a>,
    own_id: &'a str,
    config: &'a ClusterConfigSpec,
    silent: Option<&'a Silent>,
}

impl<P: Peers> Clone for Join<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: Peers> Copy for Join<'_, P> {}

async fn pipeline<P: Peers>(
    fc: &ForeignCluster,
    ctx: &Ctx<P>,
    own_id: &str,
    config: &ClusterConfigSpec,
    mut gate: Gate,
    r: &mut Report,
) -> Step<Action> {
    let Some(way) = Way::of(fc) else {
        let message = "set spec.authUrl (the remote's auth service issues our identity there), or spec.apiUrl with the cluster ID for a remote that admits anonymous PeeringRequests";
        r.set(Phase::Joined, Status::False, Reason::NoAuthUrl, message);
        return Err(Stop::Report(Action::await_change()));
    };
    if fc.spec.remote_cluster_id() == Some(own_id) {
        r.set(Phase::Joined, Status::False, Reason::SelfPeering, "the remote cluster ID is this cluster's own ID");
        return Err(Stop::Report(Action::await_change()));
    }
    let silent = gate.silent().cloned();
    let early = gate.take_answer();
    let stream = gate.take_stream();
    let j = Join { fc, ctx, way, own_id, config, silent: silent.as_ref() };
    let remote = identify(j, r).await?;
    give_way(j, &remote.id).await?;
    // From here on remote objects may exist: the finalizer guarantees they are removed.
    add_finalizer(fc, &ctx.shared.client).await?;
    let pinned = pin_ca(j, &remote, r).await?;
    let Credentials { kubeconfig: credentials, tenant_made } = authenticate(j, &remote, r).await?;
    let there = tenant_on_remote(j, &remote, &credentials, r).await?;
    r.tenant_namespace = Some(TenantNamespaces { local: Some(tenant_namespace(&remote.id)), remote: Some(there.clone()) });
    let access = RemoteAccess { kubeconfig: credentials, api_url: fc.spec.api_url.clone(), ca_pem: Some(pinned.pem.clone()) };
    if let Some(silent) = j.silent {
        // The health check's answer, known before it is made: no client, no call.
        let unanswered: Result<()> = Err(silent_error(silent));
        ctx.metrics.observe_health_check(&unanswered, silent.waited);
        ctx.metrics.checks.checked(&fc.name_any(), std::time::Instant::now());
        return Err(remote_failed(j, r, silent_error(silent)));
    }
    let checked = Checked { access: &access, stream, early };
    let (reached, client) = reach(j, checked, &remote, &there, &pinned, r).await?;
    let client = RemoteClient { access: &access, client };
    offer(j, client, &remote, &there, reached, tenant_made, r).await?;
    Ok(finish(j, &remote, r))
}

/// What the round's health check goes over: the access, the connection made first, and the
/// answer got before the turn over a kept connection.
struct Checked<'a> {
    access: &'a RemoteAccess,
    stream: Option<tokio::net::TcpStream>,
    early: Option<Box<crate::machinery::connect_first::Early>>,
}

/// A client for the remote's API server, made only when the round writes there (a steady round
/// does not): the check's own when it made one.
struct RemoteClient<'a> {
    access: &'a RemoteAccess,
    client: Option<kube::Client>,
}

impl RemoteClient<'_> {
    async fn get<P: Peers>(self, peers: &P) -> Result<kube::Client> {
        match self.client {
            Some(client) => Ok(client),
            None => peers.api_client(self.access).await,
        }
    }
}

/// Our tenant namespace for the peer, made before we ask the remote for an identity (only
/// then: a joined peer's rounds cost nothing more): a full
/// unjoin may have just retired it, and it is waited for while it goes (Kubernetes empties a
/// deleted namespace 5 s later at the earliest). The remote takes back an identity left unused
/// for a few seconds (see [`crate::tenancy::retirement`]): asked for first, ours was taken back while
/// we waited here (the chaos soak, seed 7), and the join started over.
async fn our_tenant<P: Peers>(j: Join<'_, P>, remote: &Remote, r: &mut Report) -> Step<()> {
    match crate::tenancy::tenant::make(&j.ctx.shared.client, &remote.id, FIELD_MANAGER).await {
        Ok(_) => Ok(()),
        Err(e @ Error::TenantTerminating(_)) => Err(tenant_terminating(j, r, e)),
        Err(e) => Err(e.into()),
    }
}

/// Our tenant namespace for the peer is still going after [`crate::tenancy::tenant::TERMINATING_WAIT`]:
/// said, and looked at again within a health period.
fn tenant_terminating<P: Peers>(j: Join<'_, P>, r: &mut Report, e: Error) -> Stop {
    r.set(Phase::Joined, Status::False, Reason::TenantNamespaceTerminating, format!("{e}: offering once it is gone"));
    Stop::Report(Action::requeue(j.ctx.timing.retry.min(j.ctx.timing.health)))
}

/// How calls to the remote are verified, or why we do not peer: its roots verify it; or the
/// user paired it by fingerprint (checked now, and again on every later connection); or an
/// untrusted CA is allowed; else it waits for approval, showing the fingerprint it presents.
async fn settle_trust<P: Peers>(j: Join<'_, P>, mode: TrustMode, probed: Option<TrustMode>, r: &mut Report) -> Step<Trust> {
    let Join { fc, ctx, way, config, .. } = j;
    let (spec, url) = (&fc.spec, way.url());
    r.presented_fingerprint(None);
    let record_probe = async {
        match decide::identification_patch(spec, probed, None) {
            Some(patch) => patch_spec(&ctx.shared.client, fc, patch).await,
            None => Ok(()),
        }
    };
    if mode == TrustMode::Untrusted
        && let Some(approved) = spec.approved_fingerprint()
    {
        let name = fc.name_any();
        let message = format!("{url} proves the certificate of the approved fingerprint (spec.trustedCAFingerprint), or one it signed");
        // Read off the auth service once per PROOF_PERIODS health periods (every call there
        // verifies it again on its own connection), and after any failed call to this peer.
        if ctx.proven(&name, url, &approved) {
            r.set(Phase::Trusted, Status::True, Reason::FingerprintApproved, message);
            return Ok(Trust::Fingerprint(approved));
        }
        if let Some(silent) = j.silent {
            return Err(remote_failed(j, r, silent_error(silent)));
        }
        let presented = ctx.shared.peers.presented_fingerprints(url).await.map_err(|e| remote_failed(j, r, e))?;
        if presented.contains(&approved) {
            ctx.record_proof(&name, url, &approved);
            r.set(Phase::Trusted, Status::True, Reason::FingerprintApproved, message);
            return Ok(Trust::Fingerprint(approved));
        }
        record_probe.await?;
        let shown = presented.last().map_or("no certificate".to_owned(), |f| format!("SHA-256 {f}"));
        r.presented_fingerprint(presented.last().cloned());
        let message =
            format!("{url} presents {shown}, neither the approved {approved} nor signed by it: refused (a new CA, or someone else)");
        r.set(Phase::Trusted, Status::False, Reason::FingerprintMismatch, message);
        return Err(Stop::Report(Action::requeue(ctx.timing.health)));
    }
    let verdict = decide::trust_verdict(spec, mode, &config.discovery_config);
    if !verdict.allows_peering() {
        record_probe.await?;
        let presented = ctx.shared.peers.presented_fingerprints(url).await.ok().and_then(|f| f.last().cloned());
        r.presented_fingerprint(presented.clone());
        let message = match presented {
            Some(fp) => format!(
                "{url} presents a certificate from an unknown authority, SHA-256 {fp}; if the remote's operator reads out the same, approve it: kubectl liqo trust {} --fingerprint {fp}",
                fc.name_any()
            ),
            None => format!(
                "{url} presents a certificate from an unknown authority; approve it with spec.trustedCAFingerprint, or set spec.allowUntrustedCA"
            ),
        };
        r.set(Phase::Trusted, Status::False, Reason::AwaitingApproval, message);
        return Err(Stop::Report(Action::await_change()));
    }
    let (status, reason, message) = match verdict {
        TrustVerdict::Trusted => (Status::True, Reason::Trusted, format!("the {} certificate verified", way.what())),
        TrustVerdict::AllowedBySpec => {
            (Status::False, Reason::UntrustedAllowed, "unknown certificate authority, allowed by spec.allowUntrustedCA".to_owned())
        }
        _ => (
            Status::False,
            Reason::UntrustedAllowed,
            "unknown certificate authority, allowed for discovered peers by autojoinUntrusted".to_owned(),
        ),
    };
    r.set(Phase::Trusted, status, reason, message);
    Ok(Trust::from(mode))
}

/// Trust (probed once, recorded in `spec.trustMode`) and, on the auth way, the remote's cluster
/// ID, name and namespace from `/ids` — written into the spec where the user left them empty.
async fn identify<P: Peers>(j: Join<'_, P>, r: &mut Report) -> Step<Remote> {
    let Join { fc, ctx, way, .. } = j;
    let spec = &fc.spec;
    let probed = match spec.trust_mode() {
        TrustMode::Unknown => Some(ctx.shared.peers.probe_trust(way.url()).await.map_err(|e| remote_failed(j, r, e))?),
        _ => None,
    };
    let trust = settle_trust(j, probed.unwrap_or(spec.trust_mode()), probed, r).await?;
    let ids = match way {
        Way::AuthService { auth_url } if decide::needs_identification(spec) => {
            Some(ctx.shared.peers.ids(auth_url, trust.clone()).await.map_err(|e| remote_failed(j, r, e))?)
        }
        _ => None,
    };
    if let Some(claimed) = ids.as_ref().map(|i| i.cluster_id.as_str()) {
        refuse_claim(j, claimed, r)?;
    }
    let answered = ids.as_ref().map(|i| (i.cluster_id.as_str(), i.cluster_name.as_str(), i.guest_namespace.as_str()));
    if let Some(patch) = decide::identification_patch(spec, probed, answered) {
        // Our finalizer goes on with it: the join goes on from here (the claim was not refused).
        let ops = decide::identification_and_finalizer(&patch, fc.metadata.finalizers.as_deref());
        ctx::patch_json(&ctx.shared.client, fc, ops).await?;
        return Err(Stop::SpecChanged);
    }
    let id = spec.remote_cluster_id().unwrap_or_default().to_owned();
    Ok(Remote { id, namespace: spec.remote_namespace().to_owned(), trust })
}

/// The remote API server CA: retrieved once (the way says where from), stored in Secret
/// `<fc>-ca-data` and pinned by fingerprint.
async fn pin_ca<P: Peers>(j: Join<'_, P>, remote: &Remote, r: &mut Report) -> Step<Pinned> {
    let Join { fc, ctx, way, .. } = j;
    let secret = ca_data_secret(&fc.name_any());
    let pem = match ctx.secret_value(&secret, CA_KEY) {
        Some(pem) => pem,
        None => match way.fetch_ca(&*ctx.shared.peers, remote.trust.clone()).await {
            Ok(pem) => {
                ctx.store_owned(fc, &secret, &remote.id, CA_KEY, &pem).await?;
                let note = format!("stored the remote API server CA (from {}) in Secret {secret}", way.ca_source());
                ctx.event(fc, false, "CaRetrieved", note).await;
                pem
            }
            Err(e) => {
                if !way.reads_requests() {
                    let message = format!("{e}; without the remote's CA nothing is sent to it (or set spec.authUrl)");
                    r.set(Phase::CaVerified, Status::False, Reason::NoCaAvailable, message);
                }
                return Err(remote_failed(j, r, e));
            }
        },
    };
    let fingerprint = liqo_certs::inspect::fingerprint_sha256(&pem).map_err(|e| Error::Tls(format!("{secret}: {e}")))?;
    r.ca_data_ref = Some(SecretRef { name: secret, namespace: Some(ctx.shared.namespace.clone()) });
    r.ca_fingerprint = Some(fingerprint.clone());
    Ok(Pinned { pem, fingerprint })
}

/// Our identity on the remote, and whether this round made sure of our tenant namespace for
/// the peer (before asking for a new identity; the offer that follows then need not read it
/// again).
struct Credentials {
    kubeconfig: String,
    tenant_made: bool,
}

/// Our identity on the remote (auth way: asked for once with our token, stored in
/// `<fc>-identity`); the anonymous way has none.
async fn authenticate<P: Peers>(j: Join<'_, P>, remote: &Remote, r: &mut Report) -> Step<Credentials> {
    let Join { fc, ctx, way, own_id, .. } = j;
    let Way::AuthService { auth_url } = way else {
        r.auth_status = None;
        let message = "no identity on the remote: PeeringRequests are sent anonymously (no spec.authUrl)";
        r.set(Phase::Authenticated, Status::False, Reason::Anonymous, message);
        return Ok(Credentials { kubeconfig: ANONYMOUS_KUBECONFIG.to_owned(), tenant_made: false });
    };
    let secret = identity_secret(&fc.name_any());
    let kept = liqo_api::names::kept_identity_secret(&remote.id);
    let (kubeconfig, tenant_made) = match ctx.secret_value(&secret, KUBECONFIG_KEY) {
        Some(kubeconfig) => (renew_if_due(j, auth_url, remote, kubeconfig).await, false),
        // Kept from a ForeignCluster deleted while the remote was away: ours again.
        None if let Some(kubeconfig) = ctx.secret_value(&kept, KUBECONFIG_KEY) => {
            ctx.store_owned(fc, &secret, &remote.id, KUBECONFIG_KEY, &kubeconfig).await?;
            ctx.delete_local_secret(&kept).await?;
            ctx.event(
                fc,
                false,
                "IdentityAccepted",
                format!("took up our identity on the remote kept since an earlier ForeignCluster; stored in Secret {secret}"),
            )
            .await;
            (kubeconfig, false)
        }
        None => {
            our_tenant(j, remote, r).await?;
            let token = read_token(&ctx.shared.client, &ctx.shared.namespace, &remote.id).await?;
            let key = our_holder_key(j).await;
            let request = IdentityRequest { holder_key: key.as_ref().map(|k| k.public()), ..IdentityRequest::first(own_id, token.clone()) };
            // Held before (our status says so): the remote binds our ID, so our key goes first,
            // sparing a refused plain claim (its rate limit counts each request).
            let held = fc.status.as_ref().is_some_and(|s| matches!(s.auth_status, Some(AuthStatus::Accepted | AuthStatus::Refused)));
            let asked = if held { None } else { Some(ctx.shared.peers.identity(auth_url, remote.trust.clone(), &request).await) };
            let answer = match asked {
                Some(answer) if !bound(&answer) => answer,
                asked => prove(j, auth_url, remote, key.as_deref(), request, asked).await,
            };
            let by_key = answer.as_ref().is_ok_and(|a| a.proven_by == Some(ProvenBy::Key));
            match answer {
                Ok(answer) => {
                    ctx.store_owned(fc, &secret, &remote.id, KUBECONFIG_KEY, &answer.kubeconfig).await?;
                    let (reason, message) = if by_key {
                        (
                            "IdentityReclaimed",
                            format!(
                                "proved with our holder key that we hold our cluster ID there: the remote issued a new identity; stored in Secret {secret}"
                            ),
                        )
                    } else {
                        ("IdentityAccepted", format!("the remote issued our identity; stored in Secret {secret}"))
                    };
                    ctx.event(fc, false, reason, message).await;
                    (answer.kubeconfig, true)
                }
                Err(e) if e.answered() == Some(409) => {
                    // The remote binds our ID to an identity we no longer hold (protocol §10).
                    r.auth_status = Some(AuthStatus::Refused);
                    r.set(Phase::Authenticated, Status::False, Reason::IdentityBound, e.to_string());
                    return Err(Stop::Report(Action::requeue(ctx.timing.health)));
                }
                Err(e) if e.is_refusal() => {
                    let (auth_status, reason) = decide::refusal_status(token.is_empty());
                    r.auth_status = Some(auth_status);
                    let message = format!("{e}; put the remote's token in Secret {} (key {TOKEN_KEY})", token_secret(&remote.id));
                    r.set(Phase::Authenticated, Status::False, reason, message);
                    return Err(Stop::Report(Action::requeue(ctx.timing.refused)));
                }
                Err(e) => return Err(remote_failed(j, r, e)),
            }
        }
    };
    r.auth_status = Some(AuthStatus::Accepted);
    r.set(Phase::Authenticated, Status::True, Reason::IdentityIssued, format!("identity stored in Secret {secret}"));
    Ok(Credentials { kubeconfig, tenant_made })
}

/// Our identity on the remote, renewed first when 80 % of its life has passed (protocol §10): with
/// itself as the proof, no re-join and no gap. A renewal that fails keeps the identity we have
/// (it is still valid) and is tried again next round.
async fn renew_if_due<P: Peers>(j: Join<'_, P>, auth_url: &str, remote: &Remote, kubeconfig: String) -> String {
    let Join { fc, ctx, own_id, .. } = j;
    let Some((issued, expires)) = ctx.kubeconfigs.of(&kubeconfig).token_times else { return kubeconfig };
    let now = Timestamp::now();
    if !binding::renew_due(issued, expires, now) && !outlives_remote(j, auth_url, remote, (issued, expires), now).await {
        return kubeconfig;
    }
    let Some(current) = crate::remote::peer::token_of(&kubeconfig) else { return kubeconfig };
    // Our current identity is the proof: no cluster token is read for it (a GET per renewal).
    // Only when it proves nothing any more (the remote's operator freed our ID) is the renewal
    // a first claim, which needs the token where the remote asks one.
    // Our holder key goes with it, so the remote records it (a holder of before 0.4 gets it
    // recorded at its first renewal), and proves us where the token no longer does.
    let key = our_holder_key(j).await;
    let mut request = IdentityRequest {
        current_token: Some(current),
        holder_key: key.as_ref().map(|k| k.public()),
        ..IdentityRequest::first(own_id, String::new())
    };
    let mut answer = ctx.shared.peers.identity(auth_url, remote.trust.clone(), &request).await;
    if answer.as_ref().is_err_and(|e| e.is_refusal()) {
        request.token = read_token(&ctx.shared.client, &ctx.shared.namespace, &remote.id).await.unwrap_or_default();
        if !request.token.is_empty() {
            answer = ctx.shared.peers.identity(auth_url, remote.trust.clone(), &request).await;
        }
    }
    let answer = if bound(&answer) { prove(j, auth_url, remote, key.as_deref(), request, Some(answer)).await } else { answer };
    let secret = identity_secret(&fc.name_any());
    let renewed = match answer {
        // The Secret is there (we renew what it holds): written over at once, one request.
        Ok(answer) => ctx.store_over(fc, &secret, &remote.id, KUBECONFIG_KEY, &answer.kubeconfig).await.map(|()| answer.kubeconfig),
        Err(e) => Err(e),
    };
    match renewed {
        Ok(new) => {
            tracing::info!(peer = %remote.id, expired = %expires, "renewed our identity on the remote");
            // A remote whose API server grants longer than the lifetime it tells (one that
            // extends tokens) is not asked again for an hour: no renewal each round.
            let renewed_times = crate::remote::peer::token_of(&new).and_then(|t| binding::token_times(&t));
            if let (Some((issued, expires)), Some(Some(told))) = (renewed_times, ctx.remote_lifetime(&remote.id))
                && binding::outlives(issued, expires, told, Timestamp::now())
            {
                ctx.record_remote_lifetime(&remote.id, None, Duration::from_secs(3600));
            }
            ctx.event(
                fc,
                false,
                "IdentityRenewed",
                format!("renewed our identity on the remote (the old one expires {expires}); stored in Secret {secret}"),
            )
            .await;
            new
        }
        Err(e) => {
            tracing::warn!(peer = %remote.id, error = %e, cause = e.label(), "renewing our identity on the remote failed; keeping the current one, next round again");
            ctx.event(fc, true, "IdentityRenewalFailed", format!("renewing our identity failed ({e}); the current one expires {expires}"))
                .await;
            kubeconfig
        }
    }
}

/// Our holder key ([`crate::cluster::holder_key`]); None, logged, when it cannot be read or made
/// now: the request then goes without it, as before 0.4.
async fn our_holder_key<P: Peers>(j: Join<'_, P>) -> Option<Arc<HolderKey>> {
    match j.ctx.shared.holder_key.get().await {
        Ok(key) => Some(key),
        Err(e) => {
            tracing::warn!(error = %e, cause = e.label(), "our holder key is not available: asking for an identity without it");
            None
        }
    }
}

/// Whether an identity request was refused because the remote binds our ID to a holder (409).
fn bound(answer: &Result<IdentityResponse>) -> bool {
    answer.as_ref().is_err_and(|e| e.answered() == Some(409))
}

/// `request` again with a proof that we hold our ID there: a challenge of the remote signed with
/// our key (the remote takes it as a first claim when the proof proves nothing, so a free ID is
/// issued all the same). Without a key, or when the remote gives no challenge (before 0.4, or
/// its rate limit), the answer without proof stands: `asked`, or asked now. A proof the remote
/// refused is a Warning Event `HolderProofRefused`.
async fn prove<P: Peers>(
    j: Join<'_, P>,
    auth_url: &str,
    remote: &Remote,
    key: Option<&HolderKey>,
    mut request: IdentityRequest,
    asked: Option<Result<IdentityResponse>>,
) -> Result<IdentityResponse> {
    let Join { fc, ctx, own_id, .. } = j;
    let peers = &ctx.shared.peers;
    let challenged = match key {
        Some(key) => match peers.challenge(auth_url, remote.trust.clone(), own_id).await {
            Ok(c) => Some((key, c.challenge)),
            Err(e) => {
                tracing::info!(peer = %remote.id, error = %e, "no proof of our ID by key this time");
                None
            }
        },
        None => None,
    };
    let Some((key, challenge)) = challenged else {
        return match asked {
            Some(answer) => answer,
            None => peers.identity(auth_url, remote.trust.clone(), &request).await,
        };
    };
    let signature = key.sign(&proof::message(&remote.id, own_id, &challenge));
    request.proof = Some(Proof { challenge, signature });
    let answer = peers.identity(auth_url, remote.trust.clone(), &request).await;
    if let Err(e) = &answer
        && e.answered() == Some(409)
    {
        ctx.event(fc, true, "HolderProofRefused", format!("the remote refused our proof by holder key: {e}")).await;
    }
    answer
}

/// Whether our identity on the remote outlasts the lifetime the remote now gives (its `/ids`
/// tells it): issued by an earlier release for a year, or before the remote shortened it; it
/// is then renewed to that lifetime (protocol §10). The remote is asked only for an identity that
/// outlasts our own lifetime too, and at most once a health period (once an hour after it told
/// one): a peering of this release asks nothing.
async fn outlives_remote<P: Peers>(j: Join<'_, P>, auth_url: &str, remote: &Remote, times: (Timestamp, Timestamp), now: Timestamp) -> bool {
    let ctx = j.ctx;
    let (issued, expires) = times;
    if !binding::outlives(issued, expires, ctx.token_lifetime, now) {
        return false;
    }
    let lifetime = match ctx.remote_lifetime(&remote.id) {
        Some(known) => known,
        None => {
            let ids = ctx.shared.peers.ids(auth_url, remote.trust.clone()).await;
            let told = ids.ok().and_then(|ids| ids.token_lifetime_seconds).map(Duration::from_secs);
            let stands = if told.is_some() { Duration::from_secs(3600) } else { ctx.timing.health };
            ctx.record_remote_lifetime(&remote.id, told, stands);
            told
        }
    };
    lifetime.is_some_and(|lifetime| binding::outlives(issued, expires, lifetime, now))
}

/// Where on the remote our request goes: the tenant namespace our identity's kubeconfig names
/// (protocol §9); the remote's Liqo namespace on the anonymous way. An identity naming none was
/// issued by a remote of the cluster-scoped protocol (0.1): if its `/ids` now tells a protocol
/// with tenant namespaces (it was upgraded), a new identity is asked for; else the remote is
/// named as older, and asked again once per health period, never blindly.
async fn tenant_on_remote<P: Peers>(j: Join<'_, P>, remote: &Remote, credentials: &str, r: &mut Report) -> Step<String> {
    let Join { fc, ctx, way, .. } = j;
    let Way::AuthService { auth_url } = way else { return Ok(remote.namespace.clone()) };
    if let Some(namespace) = ctx.kubeconfigs.of(credentials).tenant.clone() {
        return Ok(namespace);
    }
    let ids = ctx.shared.peers.ids(auth_url, remote.trust.clone()).await.map_err(|e| remote_failed(j, r, e))?;
    if ids.tenant_namespaces() {
        ctx.delete_local_secret(&identity_secret(&fc.name_any())).await?;
        r.auth_status = Some(AuthStatus::Pending);
        let message = "the remote now keeps peers in tenant namespaces and our identity from before names none: asking for a new one";
        r.set(Phase::Authenticated, Status::False, Reason::IdentityRevoked, message);
        return Err(Stop::Report(Action::requeue(ctx.timing.retry.min(ctx.timing.health))));
    }
    let message = format!(
        "{auth_url}/ids tells no protocolVersion: the remote runs the cluster-scoped protocol of 0.1, which cannot hold our request in a tenant namespace; upgrade it (asked again every health period)"
    );
    r.set(Phase::Joined, Status::False, Reason::PeerOnOlderProtocol, message);
    // Nothing of a peering stands on that protocol: not joined, whatever was said before.
    r.outgoing = Some(not_joined(ctx, &remote.id));
    Err(Stop::Report(Action::requeue(ctx.timing.health)))
}

/// The remote API server answers through the pinned CA (and, with an identity, tells where our
/// PeeringRequest stands in `there`). No answer: down, or presenting another CA — reported,
/// never accepted.
async fn reach<P: Peers>(
    j: Join<'_, P>,
    checked: Checked<'_>,
    remote: &Remote,
    there: &str,
    pinned: &Pinned,
    r: &mut Report,
) -> Step<(Reached, Option<kube::Client>)> {
    let Join { fc, ctx, way, own_id, .. } = j;
    let name = fc.name_any();
    let path = way.check_path(there, own_id);
    // The check's own round trip has a deadline of its own: a peer that took the connection
    // and then went silent holds this turn that long, not the client's timeouts twice over.
    let deadline = ctx.check_deadline();
    // Made before the turn over the connection kept from the last check, for this very access
    // and path (else it is made now).
    let ours = |e: &crate::machinery::connect_first::Early| {
        let a = checked.access;
        e.path == path && e.access == crate::remote::sessions::key_of(&a.kubeconfig, a.api_url.as_deref(), a.ca_pem.as_deref())
    };
    let early = checked.early.filter(|e| ours(e));
    let (answer, took, timed_out, client) = match early {
        Some(early) => (Ok(crate::remote::http1::Answer { status: early.status, body: early.body }), early.took, false, None),
        None => {
            let started = std::time::Instant::now();
            let check = ctx.shared.peers.health_check(&name, checked.access, &path, checked.stream);
            match tokio::time::timeout(deadline, check).await {
                Ok(Ok((answer, client))) => (Ok(answer), started.elapsed(), false, client),
                // Not the remote's answer (a kubeconfig that does not parse, say): as before the check.
                Ok(Err(e)) if !matches!(e, Error::Remote { .. } | Error::RemoteInvalid { .. }) => return Err(e.into()),
                Ok(Err(e)) => (Err(e), started.elapsed(), false, None),
                Err(_) => (Err(no_answer_within(deadline)), started.elapsed(), true, None),
            }
        }
    };
    let reached = answer.and_then(|answer| way.read_answer(answer));
    ctx.metrics.observe_health_check(&reached, took);
    ctx.metrics.checks.checked(&name, std::time::Instant::now());
    let e = match reached {
        Ok(existing) => {
            r.set(Phase::RemoteReachable, Status::True, Reason::Reachable, "the remote API server answered");
            let message = format!("the remote API server certificate verified against CA {}", pinned.fingerprint);
            r.set(Phase::CaVerified, Status::True, Reason::Pinned, message);
            return Ok((Reached(existing), client));
        }
        Err(e) => e,
    };
    // What it proved is asked again; what we offered it stands (a repair follows if it lost it).
    ctx.forget_proof(&name);
    // 401 only: the remote no longer knows our identity (revoked, or reinstalled). A 403 is
    // not that: a restarted API server answers 403 until its RBAC cache is filled, and our
    // identity is still good; it is retried within a health period like any failure.
    if e.is_revocation() && way.reads_requests() {
        // Drop the identity so the next round asks for a new one.
        ctx.delete_local_secret(&identity_secret(&name)).await?;
        r.auth_status = Some(AuthStatus::Pending);
        let message = format!("the remote refused our identity ({e}); asking for a new one");
        r.set(Phase::Authenticated, Status::False, Reason::IdentityRevoked, message);
        return Err(Stop::Report(Action::requeue(ctx.timing.retry.min(ctx.timing.health))));
    }
    // A peer that did not answer in time presents nothing to read (and reading it would wait
    // as long again, in this turn): only a call that failed otherwise looks at its CA.
    if e.answered().is_none()
        && !timed_out
        && let Ok(Some(presented)) = tokio::time::timeout(deadline, way.presented_ca(&*ctx.shared.peers, remote.trust.clone())).await
        && let Ok(presented) = liqo_certs::inspect::fingerprint_sha256(&presented)
        && presented != pinned.fingerprint
    {
        let changed = Error::CaChanged { stored: pinned.fingerprint.clone(), presented };
        let message = format!("{changed}; delete Secret {} to trust the new CA", ca_data_secret(&name));
        r.set(Phase::CaVerified, Status::False, Reason::RemoteCaChanged, message);
        r.set(Phase::RemoteReachable, Status::False, Reason::RemoteCaChanged, e.to_string());
        return Err(Stop::Report(Action::requeue(ctx.timing.health)));
    }
    Err(remote_failed(j, r, e))
}

/// The health check got no answer within `deadline`.
fn no_answer_within(deadline: std::time::Duration) -> Error {
    let message = format!("no answer within {} s (the TLS handshake and the call; --connect-wait-seconds)", deadline.as_secs());
    Error::unreachable(crate::machinery::error::Step::ApiServer, message)
}

/// What [`reach`] learnt of our PeeringRequest (`None`: the way cannot read it).
struct Reached(Option<Option<PeeringRequest>>);

/// Grants the peer its Advertisement access here and puts the kubeconfig for it and our
/// PeeringRequest on the remote, when [`decide::offer`] says so (`tenant_made`: this round
/// made sure of the peer's tenant namespace here already).
async fn offer<P: Peers>(
    j: Join<'_, P>,
    client: RemoteClient<'_>,
    remote: &Remote,
    there: &str,
    reached: Reached,
    tenant_made: bool,
    r: &mut Report,
) -> Step<()> {
    let Join { fc, ctx, way, own_id, config, .. } = j;
    let home_auth_url = ctx.auth_url.get();
    let ours = OurRequest {
        home_id: own_id,
        home_name: config.discovery_config.cluster_name.as_deref().filter(|n| !n.is_empty()),
        home_namespace: &ctx.shared.namespace,
        remote_namespace: there,
        home_auth_url: home_auth_url.as_deref(),
    };
    let on_remote = match &reached.0 {
        Some(existing) => OnRemote::of(&ours, existing.as_ref()),
        None => OnRemote::Unknown,
    };
    let previous = fc.status.as_ref().and_then(|s| s.outgoing.as_ref());
    let name = fc.name_any();
    let offered = ctx.offered(&name, previous.is_some_and(|o| o.remote_peering_request_name.is_some()));
    if r.handed.is_none() {
        r.handed = ctx.handed_unrecorded(&name);
    }
    let waiting_since = joined_since(fc, Reason::WaitingForAdvertisement);
    let overdue = || decide::anonymous_offer_overdue(waiting_since.as_ref(), &ctx::now(), ctx.refreshed_ago(&name), ctx.timing.refused);
    let advertised = match (ctx.advertisement_present(&remote.id), previous.is_some_and(|o| o.advertisement.is_some())) {
        (true, _) => Advertised::Present,
        (false, true) => Advertised::Vanished,
        (false, false) if overdue() => Advertised::Overdue,
        (false, false) => Advertised::Absent,
    };
    // What we keep on the remote follows our API server's address and CA, and its token is
    // renewed (protocol §10); what an earlier release handed (a status that names our request and
    // records nothing handed) is renewed to our lifetime once. A steady peering of this release
    // costs no write, nor does a status read before our first offer's was.
    let (url, ca) = (ctx.api_server.url.get(), ctx.api_ca_fingerprint());
    let by_earlier_release = r.handed.is_none() && previous.is_some_and(|o| o.remote_peering_request_name.is_some());
    let rewrite = (r.handed.is_some() || by_earlier_release)
        .then(|| decide::rewrite_kubeconfig(r.handed.as_ref(), &url, ca, ctx.token_lifetime, &ctx::now()))
        .flatten();
    let plan = match decide::offer(on_remote, offered, advertised) {
        Offer::Keep if rewrite.is_some() => Offer::Rewrite,
        plan => plan,
    };
    match plan {
        Offer::Keep => return Ok(()),
        Offer::AwaitDeletion => {
            if let Some(Some(terminating)) = &reached.0 {
                let client = client.get(&*ctx.shared.peers).await?;
                ctx.wake_when_gone(fc, kube::Api::namespaced(client, there), terminating);
            }
            let message = "a PeeringRequest of ours is still being deleted on the remote; offering again once it is gone";
            r.set(Phase::Joined, Status::False, Reason::WaitingForAdvertisement, message);
            return Err(Stop::Report(Action::requeue(ctx.timing.health)));
        }
        Offer::Make | Offer::Repair | Offer::Refresh | Offer::Rewrite => {}
    }
    let (secret, handed) = match ctx.grant_and_kubeconfig(&ours, &remote.id, tenant_made).await {
        Ok(made) => made,
        Err(e @ Error::TenantTerminating(_)) => return Err(tenant_terminating(j, r, e)),
        Err(e) => return Err(e.into()),
    };
    let client = client.get(&*ctx.shared.peers).await?;
    match way.put_offer(&client, &secret, &ours.object()).await {
        Ok(()) => {
            ctx.record_offer(&name, &handed);
            ctx.metrics.offered(plan.as_str(), on_remote.as_str());
            r.handed = Some(handed);
            let anonymously = if way.reads_requests() { "" } else { " (anonymously)" };
            let (warning, reason, note) = match plan {
                Offer::Repair => (
                    true,
                    "PeeringRequestRepaired",
                    format!("our PeeringRequest {own_id} on the remote was missing or changed; re-created"),
                ),
                Offer::Refresh => {
                    ctx.record_refresh(&name);
                    let waited = ctx.timing.refused.as_secs();
                    let note = format!(
                        "the remote has not advertised to us for {waited} s or more since our anonymous offer; made it again (in case the remote lost it)"
                    );
                    (true, "PeeringRequestRefreshed", note)
                }
                Offer::Rewrite => {
                    let why = rewrite.unwrap_or("it was due");
                    tracing::info!(peer = %remote.id, why, "wrote the kubeconfig we keep on the remote again");
                    (false, "KubeconfigRewritten", format!("wrote the kubeconfig we keep on the remote again: {why}"))
                }
                _ => (false, "PeeringRequestCreated", format!("created PeeringRequest {own_id} on the remote{anonymously}")),
            };
            ctx.event(fc, warning, reason, note).await;
            Ok(())
        }
        Err(e) if e.answered().is_some_and(|code| (400..500).contains(&code)) => {
            let (reason, message) = if way.reads_requests() {
                (Reason::PeerRefused, format!("the remote refuses our PeeringRequest: {e}"))
            } else {
                let message = format!(
                    "the remote refuses anonymous PeeringRequests ({e}): apply manifests/anonymous-peering/ there, or set spec.authUrl"
                );
                (Reason::AnonymousPeeringRefused, message)
            };
            let since = joined_since(fc, reason);
            r.set(Phase::Joined, Status::False, reason, message);
            r.outgoing = Some(not_joined(ctx, &remote.id));
            let after = decide::offer_again_after(since.as_ref(), &ctx::now(), ctx.timing.health, ctx.timing.refused);
            Err(Stop::Report(Action::requeue(after)))
        }
        Err(e) => Err(remote_failed(j, r, e)),
    }
}

/// `status.outgoing` of a peering with no request of ours standing on the remote: not joined,
/// naming the peer's Advertisement while it is still here.
fn not_joined<P: Peers>(ctx: &Ctx<P>, remote_id: &str) -> OutgoingStatus {
    OutgoingStatus {
        joined: false,
        remote_peering_request_name: None,
        advertisement: ctx.advertisement_present(remote_id).then(|| advertisement_name(remote_id)),
        presented_fingerprint: None,
        handed_kubeconfig: None,
    }
}

/// Joined once the remote advertises to us: `outgoing` and `Joined` follow the peer's
/// Advertisement; the next health check is scheduled.
fn finish<P: Peers>(j: Join<'_, P>, remote: &Remote, r: &mut Report) -> Action {
    let Join { fc, ctx, own_id, .. } = j;
    let present = ctx.advertisement_present(&remote.id);
    let had = fc.status.as_ref().and_then(|s| s.outgoing.as_ref()).is_some_and(|o| o.advertisement.is_some());
    let said_lost = joined_since(fc, Reason::AdvertisementDeleted).is_some();
    let (joined, reason, message) = decide::joined_reason(present, had || said_lost);
    r.outgoing = Some(OutgoingStatus {
        joined,
        remote_peering_request_name: Some(own_id.to_owned()),
        advertisement: present.then(|| advertisement_name(&remote.id)),
        presented_fingerprint: None,
        handed_kubeconfig: r.handed.clone(),
    });
    r.set(Phase::Joined, Status::of(joined), reason, message);
    r.settle();
    Action::requeue(ctx.timing.health)
}

/// Since when the stored `Joined` condition has said `reason` (`None`: it says something else).
fn joined_since(fc: &ForeignCluster, reason: Reason) -> Option<Time> {
    let joined = crate::reporting::conditions::get(&fc.status.as_ref()?.conditions, Phase::Joined.as_str())?;
    (joined.reason == reason.as_str()).then(|| joined.last_transition_time.clone())
}

/// The remote API server took no connection when connected to first: unreachable, as a call
/// that got no answer.
fn silent_error(silent: &Silent) -> Error {
    Error::unreachable(crate::machinery::error::Step::ApiServer, silent.message())
}

/// A failed call to the remote: recorded on the phase it concerns, retried (logged once per
/// cause and interval: see `liqo_serve::quiet`).
fn remote_failed<P: Peers>(j: Join<'_, P>, r: &mut Report, e: Error) -> Stop {
    let Join { fc, ctx, .. } = j;
    tracing::info!(error = %e, cause = e.label(), "remote call failed");
    // What the peer proved is asked of it again next round.
    ctx.forget_proof(&fc.name_any());
    let reason = e.reason();
    let phase = match reason {
        Reason::InvalidSpec => Phase::Joined,
        Reason::TlsError => Phase::Trusted,
        _ => Phase::RemoteReachable,
    };
    r.set(phase, Status::False, reason, e.to_string());
    r.settle();
    // Called again sooner the newer the failure, within a health period, so a peer that
    // answers again is repaired within one; one down for long is called once per period.
    let since = failing_since(fc, phase, reason);
    Stop::Report(Action::requeue(decide::retry_after_failure(since.as_ref(), &ctx::now(), ctx.timing.retry, ctx.timing.health)))
}

/// Since when the stored `phase` condition has said False for `reason`, if it does.
fn failing_since(fc: &ForeignCluster, phase: Phase, reason: Reason) -> Option<Time> {
    let c = crate::reporting::conditions::get(&fc.status.as_ref()?.conditions, phase.as_str())?;
    (c.status == "False" && c.reason == reason.as_str()).then(|| c.last_transition_time.clone())
}
