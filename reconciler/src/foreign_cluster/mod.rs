//! The ForeignCluster controller (home side of peering).
//!
//! - what happens when `spec.join` flips to true: [`join`] (identify → trust → pin the CA →
//!   identity → reach → offer → finish), the same for both ways of reaching a remote ([`way`]);
//! - when it flips to false, or the ForeignCluster is deleted: [`unjoin`];
//! - the pure decisions: [`decide`]; the status, computed whole and written by server-side
//!   apply, with one Event per real change: [`report`];
//! - what they share: [`ctx`] (the context, the timings, small writes) and [`names`];
//! - this file: one reconcile, and the run loop on the work queue.
//!
//! Steady state costs one request per joined peer per health period (GET of our PeeringRequest
//! on the remote, or `/version` for the anonymous way) and no writes: everything local is read
//! from watch-fed stores.
//!
//! It may use [`context`](crate::context) and every room below it; no other controller.

pub mod ctx;
pub mod decide;
pub mod join;
pub mod names;
pub mod report;
pub mod unjoin;
pub mod way;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use liqo_api::ForeignCluster;
use liqo_api::names::FINALIZER_PEERED;

use crate::machinery::error::Result;
use crate::machinery::work_queue::Action;
use crate::remote::peer::Peers;

pub use ctx::{Ctx, DEFAULT_MAX_CONCURRENT_RECONCILES, PROOF_PERIODS, TOKEN_LIFETIME, Timing, WATCH_SECONDS};
pub use liqo_api::chosen::stands_in;
pub use names::*;

/// One reconcile of one ForeignCluster: join or unjoin.
pub async fn reconcile<P: Peers>(fc: Arc<ForeignCluster>, ctx: Arc<Ctx<P>>) -> Result<Action> {
    reconcile_through(fc, ctx, crate::machinery::connect_first::Gate::Untried).await
}

/// [`reconcile`], with what connecting first to the peer found
/// ([`crate::machinery::connect_first`]).
pub async fn reconcile_through<P: Peers>(
    fc: Arc<ForeignCluster>,
    ctx: Arc<Ctx<P>>,
    gate: crate::machinery::connect_first::Gate,
) -> Result<Action> {
    let Some(own_id) = ctx.shared.own_id() else { return Ok(Action::requeue(ctx.timing.retry)) };
    let config = ctx.shared.settings();
    let peered = fc.finalizers().iter().any(|f| f == FINALIZER_PEERED);
    let deleting = fc.metadata.deletion_timestamp.is_some();
    tracing::debug!(fc = %fc.name_any(), version = ?fc.resource_version(), join = fc.spec.join(), deleting, peered, "reconciling");
    // Status fields an earlier release merge-patched are handed to their owners now, so the
    // next status apply drops the ones no longer set; the fold changes the object, so its
    // watch brings it back at once.
    if crate::machinery::managers::take_over_status(&Api::<ForeignCluster>::all(ctx.shared.client.clone()), &*fc, status_owner).await? {
        return Ok(Action::await_change());
    }
    if deleting || !fc.spec.join() {
        ctx.metrics.checks.forget(&fc.name_any());
        ctx.shared.peers.forget_kept(&fc.name_any());
        if peered {
            return unjoin::unjoin(&fc, &ctx, &own_id).await;
        }
        return Ok(Action::await_change());
    }
    ctx.set_withdrawing(&fc.name_any(), false);
    join::join(&fc, &ctx, &own_id, &config, gate).await
}

/// Which field manager owns a top-level field of a ForeignCluster's status (`f:incoming`: the
/// incoming controller; the rest: this one).
fn status_owner(key: &str) -> &'static str {
    if key == "f:incoming" { liqo_api::names::INCOMING_STATUS_MANAGER } else { report::STATUS_MANAGER }
}

fn error_policy<P: Peers>(fc: Arc<ForeignCluster>, e: &crate::Error, ctx: Arc<Ctx<P>>) -> Action {
    tracing::warn!(fc = %fc.name_any(), error = %e, cause = e.label(), "reconcile failed");
    // Within a health period: whatever failed is repaired within one of answering again.
    Action::requeue(ctx.timing.retry.min(ctx.timing.health))
}

/// The ForeignCluster whose identity Secret `secret` is, when the identity it holds is due for
/// renewal now; `""` for any other Secret (pure but for the clock). Keys the watch of our
/// Secrets tells [`run`]: an identity made due while its ForeignCluster waits for its next
/// health period (a clock set forward, a Secret restored from a backup) is renewed at once.
/// What we write ourselves, a fresh identity, wakes nothing.
pub fn due_identity_of(secret: &Secret) -> String {
    let name = secret.metadata.name.as_deref().unwrap_or_default();
    let Some(fc) = name.strip_suffix(liqo_api::names::IDENTITY_SECRET_SUFFIX) else { return String::new() };
    let kubeconfig = secret.data.as_ref().and_then(|d| d.get(KUBECONFIG_KEY)).and_then(|b| std::str::from_utf8(&b.0).ok());
    let times = kubeconfig.and_then(crate::remote::peer::token_of).and_then(|t| crate::tenancy::binding::token_times(&t));
    match times {
        Some((issued, expires)) if crate::tenancy::binding::renew_due(issued, expires, k8s_openapi::jiff::Timestamp::now()) => {
            fc.to_owned()
        }
        _ => String::new(),
    }
}

/// Runs the controller until shutdown, reconciling each ForeignCluster `changes` names (from
/// the shared store's watch: [`crate::machinery::stores::Reflected::follow`]; the controller reads
/// the objects from that store, `ctx.shared.foreign`). Also reconciles the ForeignClusters of the
/// peers whose Advertisement here was touched (`adverts`: their cluster IDs, told by the watch that
/// keeps the Advertisements' store), so a deleted one shows at once on its ForeignCluster, and
/// those whose identity Secret shows an identity due for renewal (`identities`: their names, see
/// [`due_identity_of`]).
pub async fn run<P: Peers>(
    ctx: Arc<Ctx<P>>,
    changes: impl futures::Stream<Item = crate::machinery::stores::Change<ForeignCluster>> + Send + 'static,
    adverts: crate::machinery::slim_store::Touched,
    identities: crate::machinery::slim_store::Touched,
    metrics: Arc<crate::reporting::metrics::Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    // Every reconcile starts when it is due (`crate::machinery::work_queue`), then waits its turn
    // (`Ctx::turns`, first asked first served). Bounded by kube's own `Config::concurrency`, a
    // controller kept busy starved some ForeignClusters for as long as the load lasted: what
    // was due while every slot was taken waited in a hash set and was taken from it in hash
    // order, not in turn (the fleet saw peers not reconciled once in 14 minutes while 10,000
    // joined). Unbounded, kube's controller polled every waiting reconcile at each wake-up.
    let store = ctx.shared.foreign.clone();
    // Reconciles due beyond those that may run wait as names (and count as waiting).
    let bound = crate::machinery::work_queue::Bound { max: ctx.running_bound(), waiting: Some(ctx.metrics.turns_waiting.clone()) };
    // Reconciles our own watches ask for (see `Ctx::wake_when_gone`).
    let (wakes, mut woken) = tokio::sync::mpsc::unbounded_channel();
    let _ = ctx.wakes.set(wakes);
    // The echo of a settled status write of ours is not a change (`crate::machinery::own_writes`).
    let heard = ctx.clone();
    let changes = changes.filter_map(move |change| {
        let what = heard.own_writes.heard(&change.object.name, change.version.as_deref());
        if what != crate::machinery::own_writes::Heard::Change {
            tracing::debug!(fc = %change.object.name, version = ?change.version, ?what, "our status write told back: not reconciled");
        }
        std::future::ready((what == crate::machinery::own_writes::Heard::Change).then_some(change.object.name))
    });
    let woken = futures::stream::poll_fn(move |cx| woken.poll_recv(cx));
    let senders = store.clone();
    let adverts = adverts.stream().flat_map(move |sender| {
        let of_sender = senders.state_filter(|fc| fc.spec.remote_cluster_id() == Some(sender.as_str()));
        futures::stream::iter(of_sender.into_iter().map(|fc| fc.name_any()))
    });
    let identities = identities.stream().filter(|fc| std::future::ready(!fc.is_empty()));
    let triggers = futures::stream::select_all([changes.boxed(), woken.boxed(), adverts.boxed(), identities.boxed()]);
    let reconcile = move |fc: Arc<ForeignCluster>| {
        let (ctx, metrics) = (ctx.clone(), metrics.clone());
        async move {
            let (gate, _turn) = connect_then_turn(&fc, &ctx).await;
            let started = std::time::Instant::now();
            // Boxed: a reconcile waiting its turn holds a few bytes, not the whole pipeline's
            // state.
            let result = Box::pin(reconcile_through(fc.clone(), ctx.clone(), gate)).await;
            metrics.observe("foreign_cluster", &result, started);
            match result {
                Ok(action) => action,
                Err(e) => error_policy(fc, &e, ctx),
            }
        }
    };
    crate::machinery::work_queue::run_bounded("foreigncluster", store, triggers, reconcile, bound, shutdown).await;
}

/// Connects first to `fc`'s API server, many at a time (a peer that does not answer holds no
/// turn while it is waited for: `crate::machinery::connect_first`), then waits for a turn. A
/// connection that went stale while waiting is not used: the turn is given back and the peer
/// connected to again, [`STALE_RETRIES`](crate::machinery::connect_first::STALE_RETRIES) times at
/// most, then waits for one of the turns kept apart for such ([`ctx::express_turns`]), rather
/// than connected to in the turn (where a peer gone silent meanwhile would hold the
/// turn for as long as the connect waits; the fleet saw 64 turns so held tell 229 of 10,000
/// black-holed peers in three periods).
async fn connect_then_turn<P: Peers>(
    fc: &ForeignCluster,
    ctx: &Ctx<P>,
) -> (crate::machinery::connect_first::Gate, Option<tokio::sync::OwnedSemaphorePermit>) {
    let mut retries = 0;
    // Counted as waiting from when it is due until its turn, connecting first included: a
    // backlog of connections (1,024 at a time, each given the connect wait) is one too.
    ctx.metrics.turns_waiting.inc();
    let _waited = decrement_on_drop(&ctx.metrics.turns_waiting);
    loop {
        // Boxed: a reconcile waiting for its turn (a thousand may, each a task) holds its gate
        // and a few words, not the state of a kept connection's check or of a connect (about
        // 4 KiB each, by heaptrack at 3,000 peers: 4.6 MiB of task cells at a return's peak).
        let (mut gate, connecting) = Box::pin(ctx.connect_first(fc)).await;
        // Connected again after a stale connection: a turn apart, not the back of the queue
        // (where it went stale once already, and would again behind a backlog that lasts).
        let lane = if retries > 0 { &ctx.express } else { &ctx.turns };
        let turn = match lane {
            Some(turns) => Some(turns.clone().acquire_owned().await.expect("never closed")),
            None => None,
        };
        drop(connecting);
        if gate.settle() {
            ctx.metrics.connects_first.get_or_create(&crate::reporting::metrics::OutcomeLabels { outcome: "closed" }).inc();
        }
        if gate.stale() && retries < crate::machinery::connect_first::STALE_RETRIES {
            retries += 1;
            ctx.metrics.connects_first.get_or_create(&crate::reporting::metrics::OutcomeLabels { outcome: "stale" }).inc();
            continue;
        }
        return (gate, turn);
    }
}

/// Takes one from `gauge` when dropped (a reconcile dropped while it waits included).
fn decrement_on_drop(gauge: &prometheus_client::metrics::gauge::Gauge) -> impl Drop + '_ {
    struct Dec<'a>(&'a prometheus_client::metrics::gauge::Gauge);
    impl Drop for Dec<'_> {
        fn drop(&mut self) {
            self.0.dec();
        }
    }
    Dec(gauge)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    /// Secret `name` holding a kubeconfig whose token was issued `issued` and expires `expires`
    /// (Unix seconds).
    fn identity(name: &str, issued: i64, expires: i64) -> Secret {
        use base64::Engine;
        let enc = |v: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let token = format!("{}.{}.sig", enc(serde_json::json!({"alg": "RS256"})), enc(serde_json::json!({"iat": issued, "exp": expires})));
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters: []\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: t, user: u}}\ncurrent-context: c\n"
        );
        Secret {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            data: Some(BTreeMap::from([(KUBECONFIG_KEY.to_owned(), ByteString(kubeconfig.into_bytes()))])),
            ..Default::default()
        }
    }

    #[test]
    fn an_identity_secret_made_due_wakes_its_foreign_cluster_a_fresh_one_or_another_secret_nothing() {
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let week = 7 * 24 * 3600;
        assert_eq!(due_identity_of(&identity("to-b-identity", now - week * 9 / 10, now + week / 10)), "to-b", "90 % through its life");
        assert_eq!(due_identity_of(&identity("to-b-identity", now - 60, now + week)), "", "fresh: what we write ourselves");
        assert_eq!(due_identity_of(&identity("to-b-ca-data", now - week, now)), "", "not an identity Secret");
        let mut empty = identity("to-b-identity", 0, 0);
        empty.data = None;
        assert_eq!(due_identity_of(&empty), "", "no kubeconfig: nothing to renew");
    }
}

#[cfg(test)]
mod held_while_waiting {
    use super::*;
    use std::time::Duration;

    /// A context on the real network's peers, connecting first (nothing is called).
    fn ctx() -> Ctx<crate::remote::peer::Network> {
        let client = kube::Client::try_from(kube::Config::new("https://127.0.0.1:9".parse().unwrap())).unwrap();
        let peers = Arc::new(crate::remote::peer::Network::new(crate::remote::auth::client::Verify::Nothing, Duration::from_secs(10)));
        let (foreign, _) = kube::runtime::reflector::store::<ForeignCluster>();
        let (_, id) = tokio::sync::watch::channel(Some("home".to_owned()));
        let (_, config) = tokio::sync::watch::channel(None::<liqo_api::ClusterConfigSpec>);
        let shared = crate::context::Shared::new(client, "liqo", id, config, peers, foreign);
        let (secrets, _) = crate::machinery::slim_store::slim_store(crate::machinery::slim_store::secret_data);
        let (adverts, _) =
            crate::machinery::slim_store::slim_store_by_namespace(crate::machinery::slim_store::exists::<liqo_api::Advertisement>);
        let live = crate::cluster::addresses::Live::Fixed("https://home.example:6443".to_owned());
        let api = crate::remote::auth::service::ApiServer { url: live, ca_pem: String::new() };
        Ctx::new(shared, api, None, secrets, adverts).with_connect_first(1024, Duration::from_secs(5))
    }

    /// Up to `--connects-in-flight` (1,024) reconciles wait on a connection at once, each a task:
    /// what a TLS handshake's state needs (about 5 KiB) is taken when the handshake starts, not
    /// held by every one waiting for a SYN to be answered (5 MiB at a whole fleet's black hole).
    #[tokio::test]
    async fn a_reconcile_waiting_for_its_connection_holds_well_under_a_kibibyte() {
        let ctx = ctx();
        let fc = ForeignCluster::new("peer", Default::default());
        let connecting = ctx.connect_first(&fc);
        assert!(std::mem::size_of_val(&connecting) <= 1024, "connect_first: {} bytes", std::mem::size_of_val(&connecting));
        let waiting = connect_then_turn(&fc, &ctx);
        assert!(std::mem::size_of_val(&waiting) <= 512, "connect_then_turn: {} bytes", std::mem::size_of_val(&waiting));
    }
}
