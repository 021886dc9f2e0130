//! The leader's sweep of identities issued and not used (protocol §10). Each round looks at the
//! ServiceAccounts labelled as waiting identities (a watch with a label selector: only those
//! travel, and a round asks the API server nothing while none waits), marks
//! those whose peer is seen using them (in memory: a ForeignCluster joins it either way; or,
//! past their time, what the peer wrote in its tenant namespace), and retires with their tenant
//! namespace those nobody used within [`Sweep::unused_for`]. Everything it decides on is stored
//! in the API server, so a restarted reconciler forgets nothing: its first round runs once its
//! stores have synced.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use liqo_api::names::{ANNOTATION_ISSUED_AT, IDENTITY_IN_USE, IDENTITY_WAITING, LABEL_CLUSTER_ID, LABEL_IDENTITY};
use liqo_api::{FederationRequest, ForeignCluster, PeeringRequest};

use super::tenant::Retirement;
use super::waiting::Waiting;
use crate::machinery::error::Result;
use crate::reporting::metrics::{Metrics, StateLabels};

/// The sweep's settings and what it shares.
#[derive(Clone)]
pub struct Sweep {
    pub client: Client,
    pub foreign: Store<ForeignCluster>,
    pub waiting: Arc<Waiting>,
    pub metrics: Arc<Metrics>,
    /// The ServiceAccounts labelled as waiting identities, kept by a watch (so a round costs
    /// the API server nothing while none waits).
    pub accounts: Store<ServiceAccount>,
    /// How long an identity may wait unused (three health periods).
    pub unused_for: Duration,
    /// Time between rounds.
    pub period: Duration,
}

/// How many identities past their time a round looks at (and retires) at once.
pub const RETIRING_AT_ONCE: usize = 16;

/// How often the identities in use are looked at for expiry (and at the leader's start): one
/// LIST of them each time, none in between.
pub const EXPIRY_EVERY: Duration = Duration::from_secs(3600);

/// How long past its expiry an identity in use is given before its peer's requests are ended:
/// a holder renews at 80 % of the life, so one past it is gone (or its clock is).
pub const EXPIRY_GRACE: SignedDuration = SignedDuration::from_mins(5);

/// The names of those of `items` not being deleted.
fn standing<K>(items: &[kube::core::PartialObjectMeta<K>]) -> Vec<String> {
    items.iter().filter(|o| o.metadata.deletion_timestamp.is_none()).filter_map(|o| o.metadata.name.clone()).collect()
}

/// What one round found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Still waiting, within their time.
    pub waiting: usize,
    /// Seen in use this round (relabelled).
    pub used: usize,
    /// Retired with their tenant namespace.
    pub retired: usize,
}

/// What becomes of one waiting identity (pure, but for the look at the tenant namespace that
/// [`tenant::retire`](super::tenant::retire) makes when it is past its time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A ForeignCluster here needs it.
    Used,
    /// Within its time.
    Waits,
    /// Past its time and not seen used: look at the namespace, and retire it if empty.
    Due,
}

/// The verdict on an identity issued at `issued` (unknown: due) for a peer `in_use` or not, at
/// `now`, when identities may wait `unused_for`.
pub fn verdict(in_use: bool, issued: Option<Timestamp>, now: Timestamp, unused_for: Duration) -> Verdict {
    if in_use {
        return Verdict::Used;
    }
    let limit = SignedDuration::try_from(unused_for).unwrap_or(SignedDuration::MAX);
    match issued {
        Some(at) if now.duration_since(at) < limit => Verdict::Waits,
        _ => Verdict::Due,
    }
}

impl Sweep {
    /// Rounds every [`Sweep::period`] until `shutdown`, the first at once.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        self.metrics.waiting_identities_cap.set(self.waiting.cap as i64);
        let rounds = async {
            match self.adopt_earlier().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(identities = n, "identities issued by an earlier release labelled for the sweep"),
                Err(e) => {
                    tracing::warn!(error = %e, cause = e.label(), "labelling identities of an earlier release failed; next start again")
                }
            }
            if self.accounts.wait_until_ready().await.is_err() {
                return;
            }
            let mut tick = tokio::time::interval(self.period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut looked_for_expired: Option<std::time::Instant> = None;
            loop {
                tick.tick().await;
                if looked_for_expired.is_none_or(|at| at.elapsed() >= EXPIRY_EVERY) {
                    looked_for_expired = Some(std::time::Instant::now());
                    match self.end_expired().await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(peers = n, "ended the requests of peers whose identities all expired"),
                        Err(e) => tracing::warn!(error = %e, cause = e.label(), "looking for expired identities failed; next time"),
                    }
                }
                match self.round().await {
                    Ok(r) if r.retired > 0 || r.used > 0 => tracing::debug!(?r, "identities swept"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, cause = e.label(), "sweeping unused identities failed; next round in a moment"),
                }
            }
        };
        tokio::select! {
            _ = rounds => {}
            _ = shutdown => {}
        }
    }

    /// On every replica (a standby's auth service answers `/identity` too, and runs no
    /// rounds): keeps its count of waiting identities to what the watch holds, every
    /// [`Sweep::period`], until `shutdown`. Retires nothing, asks the API server nothing.
    pub async fn count(self, shutdown: impl std::future::Future<Output = ()>) {
        let counts = async {
            let mut tick = tokio::time::interval(self.period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                // What was reserved within an identity's time and is not listed yet may be
                // being issued: kept (the count errs high, never low).
                let since = Timestamp::now() - SignedDuration::try_from(self.unused_for).unwrap_or(SignedDuration::ZERO);
                self.waiting.replace(self.waiting_now(), since);
            }
        };
        tokio::select! {
            _ = counts => {}
            _ = shutdown => {}
        }
    }

    /// The identities labelled waiting, with their issue times.
    fn waiting_now(&self) -> Vec<(String, Timestamp)> {
        let now = Timestamp::now();
        self.accounts
            .state()
            .iter()
            .filter(|sa| sa.metadata.deletion_timestamp.is_none())
            .filter_map(|sa| {
                let peer = sa.labels().get(LABEL_CLUSTER_ID)?.clone();
                let issued = sa.annotations().get(ANNOTATION_ISSUED_AT).and_then(|t| t.parse().ok()).unwrap_or(now);
                Some((peer, issued))
            })
            .collect()
    }

    /// One round over the identities labelled waiting. Those past their time are looked at
    /// [`RETIRING_AT_ONCE`] at a time: one after another, a flood of strangers' identities (a
    /// retirement is some ten requests) took longer than three health periods to go.
    pub async fn round(&self) -> Result<Round> {
        let accounts = self.accounts.state();
        let now = Timestamp::now();
        let since = now - SignedDuration::try_from(self.unused_for).unwrap_or(SignedDuration::ZERO);
        let (mut round, mut kept, mut due) = (Round::default(), Vec::new(), Vec::new());
        for sa in accounts.iter().filter(|sa| sa.metadata.deletion_timestamp.is_none()) {
            let Some(peer) = sa.labels().get(LABEL_CLUSTER_ID).cloned() else { continue };
            let issued = sa.annotations().get(ANNOTATION_ISSUED_AT).and_then(|t| t.parse::<Timestamp>().ok());
            let namespace = sa.namespace().unwrap_or_default();
            match verdict(super::in_use(&self.foreign, &peer), issued, now, self.unused_for) {
                Verdict::Used => self.mark_in_use(&namespace, &sa.name_any(), &mut round).await,
                Verdict::Waits => kept.push((peer, issued.unwrap_or(now))),
                Verdict::Due => due.push((peer, namespace, sa.name_any(), issued)),
            }
        }
        let looked = futures::stream::iter(due)
            .map(|(peer, namespace, name, issued)| async move {
                let retired = self.retire_due(&peer, since).await;
                (peer, namespace, name, issued, retired)
            })
            .buffer_unordered(RETIRING_AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        for (peer, namespace, name, issued, retired) in looked {
            match retired {
                Ok(Retirement::Retired) => {
                    // Room for a new identity at once, not at the end of the round.
                    self.waiting.forget(&peer);
                    tracing::info!(%peer, source = "sweep", "retired an identity nobody used in time, with its tenant namespace");
                    self.metrics.identities_retired.inc();
                    round.retired += 1;
                }
                Ok(Retirement::InUse) => self.mark_in_use(&namespace, &name, &mut round).await,
                Ok(Retirement::IssuedAt(at)) => kept.push((peer, at)),
                Err(e) => {
                    tracing::warn!(%peer, error = %e, cause = e.label(), "looking at an unused identity failed; next round");
                    kept.push((peer, issued.unwrap_or(now)));
                }
            }
        }
        round.waiting = kept.len();
        self.waiting.replace(kept, since);
        self.publish(round.waiting);
        Ok(round)
    }

    /// Retires `peer`'s identity, past its time: with its tenant namespace, but while we join
    /// the peer its namespace stays and only the identity goes.
    async fn retire_due(&self, peer: &str, since: Timestamp) -> Result<Retirement> {
        match super::joining(&self.foreign, peer) {
            true => super::tenant::retire_requester(&self.client, peer, since).await,
            false => super::tenant::retire(&self.client, peer, since).await,
        }
    }

    /// Ends the requests of each peer whose identities in use have all expired (past
    /// [`EXPIRY_GRACE`]): nobody can renew them any more, so the ID is free again once the
    /// departure that follows retires them (protocol §10: a peer that lost its credential, e.g.
    /// reinstalled, recovers by itself within a token's lifetime). Returns how many peers.
    pub async fn end_expired(&self) -> Result<usize> {
        let sas: Api<ServiceAccount> = Api::all(self.client.clone());
        let selector = format!("{LABEL_IDENTITY}={IDENTITY_IN_USE}");
        let list = sas.list_metadata(&ListParams::default().labels(&selector)).await?;
        let now = Timestamp::now();
        let mut ended = 0;
        for sa in list.items.iter().filter(|sa| sa.metadata.deletion_timestamp.is_none()) {
            let Some(peer) = sa.labels().get(LABEL_CLUSTER_ID).cloned() else { continue };
            let holder = super::binding::Holder::of(&sa.metadata);
            if !holder.expired(now - EXPIRY_GRACE) {
                continue;
            }
            let namespace = sa.namespace().unwrap_or_default();
            let lp = ListParams::default();
            let requests = Api::<PeeringRequest>::namespaced(self.client.clone(), &namespace);
            let federation = Api::<FederationRequest>::namespaced(self.client.clone(), &namespace);
            let (prs, frs) = (standing(&requests.list_metadata(&lp).await?.items), standing(&federation.list_metadata(&lp).await?.items));
            if prs.is_empty() && frs.is_empty() {
                continue;
            }
            for name in prs {
                crate::machinery::writes::delete(&requests, &name).await?;
            }
            for name in frs {
                crate::machinery::writes::delete(&federation, &name).await?;
            }
            tracing::info!(%peer, expired = ?holder.expires(), "every identity of the peer expired: its requests ended, its ID is free once they are gone");
            ended += 1;
        }
        Ok(ended)
    }

    /// Labels the identities an earlier release issued (no [`LABEL_IDENTITY`]): in use when a
    /// ForeignCluster here needs them, else waiting, which the rounds then retire if they stay
    /// unused (their issue time is recorded). Once per start: afterwards none is left.
    pub async fn adopt_earlier(&self) -> Result<usize> {
        let sas: Api<ServiceAccount> = Api::all(self.client.clone());
        let selector = format!("{LABEL_CLUSTER_ID},!{LABEL_IDENTITY}");
        let list = sas.list_metadata(&ListParams::default().labels(&selector)).await?;
        let mut adopted = 0;
        for sa in list.items.iter().filter(|sa| sa.metadata.deletion_timestamp.is_none()) {
            let Some(peer) = sa.labels().get(LABEL_CLUSTER_ID).cloned() else { continue };
            // The requester identity the auth service issued, not the broadcaster's we grant.
            if sa.name_any() != liqo_api::names::peer_service_account(&peer) {
                continue;
            }
            let state = if super::in_use(&self.foreign, &peer) { IDENTITY_IN_USE } else { IDENTITY_WAITING };
            self.label(&sa.namespace().unwrap_or_default(), &sa.name_any(), state).await?;
            adopted += 1;
        }
        Ok(adopted)
    }

    /// Sets identity `namespace/name`'s [`LABEL_IDENTITY`] to `state`.
    async fn label(&self, namespace: &str, name: &str, state: &str) -> Result<()> {
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let body = serde_json::json!({"metadata": {"labels": {LABEL_IDENTITY: state}}});
        sas.patch(name, &PatchParams::default(), &Patch::Merge(body)).await?;
        Ok(())
    }

    async fn mark_in_use(&self, namespace: &str, name: &str, round: &mut Round) {
        match self.label(namespace, name, IDENTITY_IN_USE).await {
            Ok(_) => round.used += 1,
            Err(e) => tracing::debug!(%namespace, error = %e, "marking an identity in use failed; next round"),
        }
    }

    fn publish(&self, waiting: usize) {
        let in_use = self.foreign.state().iter().filter(|fc| super::joined_us(fc)).count();
        self.metrics.tenant_identities.get_or_create(&StateLabels { state: "waiting" }).set(waiting as i64);
        self.metrics.tenant_identities.get_or_create(&StateLabels { state: "in_use" }).set(in_use as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_waits_its_time_then_is_looked_at_unless_used() {
        let unused_for = Duration::from_secs(90);
        let issued: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        assert_eq!(verdict(false, Some(issued), at("2026-11-28T10:01:29Z"), unused_for), Verdict::Waits);
        assert_eq!(verdict(false, Some(issued), at("2026-11-28T10:01:30Z"), unused_for), Verdict::Due);
        assert_eq!(verdict(true, Some(issued), at("2026-11-28T10:00:01Z"), unused_for), Verdict::Used);
        assert_eq!(verdict(false, None, at("2026-11-28T10:00:01Z"), unused_for), Verdict::Due, "no issue time: looked at now");
        assert_eq!(verdict(false, Some(issued), at("2026-11-28T09:00:00Z"), unused_for), Verdict::Waits, "a clock behind waits");
    }
}
