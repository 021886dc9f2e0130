//! The seeded chaos soak (`just chaos SECONDS SEED`; ignored by `cargo test`): three real
//! control planes (A, B, C), each with its reconciler (the shipped RBAC, health period 2 s)
//! and its webhook; every pair peers both ways. A driver draws faults from a fixed menu with a
//! seeded generator, restores what a Deployment would restore (a killed process restarts, a
//! stopped API server comes back, a black hole closes), acts as an operator would where the
//! fault asks for one (a rotated CA approved again where it was paired by fingerprint), and
//! after each fault checks the invariants until they hold or the deadline passes:
//!
//! - every ordered pair is joined exactly when its ForeignCluster says `join: true` (our
//!   request and its kubeconfig Secret on the remote, the remote's Advertisement here, the
//!   remote's access here), and
//!   nothing of it is left when it says `join: false`;
//! - a joined pair says how it trusts the remote as its spec does (`FingerprintApproved` when
//!   paired by fingerprint, `UntrustedAllowed` otherwise);
//! - each cluster runs one broadcaster per request it holds;
//! - no per-peer ClusterRole or ClusterRoleBinding, ever; after a full unjoin, each side's
//!   tenant namespace gone or going;
//! - an identity a stranger took (and nobody used) is retired within [`STRANGER_PERIODS`]
//!   health periods, even when the reconciler that issued it was killed right after;
//! - no reconciler panicked, none is down;
//! - the logs stay bounded (lines per minute).
//!
//! Every identity lasts `CHAOS_TOKEN_HOURS` (default 0.2: 12 minutes, near the least an API
//! server issues): one that no fault issues again for 9.6 minutes is renewed amid the faults,
//! and the kubeconfig each cluster keeps on its peers written again; the summary counts both.
//! With a fault every few seconds, most identities would be issued again sooner (a strict soak
//! of 30 minutes renewed none). So in a soak long enough for renewals (two minutes past the
//! first one due), a fault that issues a pair's identity again (`FlipJoin`,
//! `DeleteIdentitySecret`, `RecreateForeignCluster` on it) is drawn again while that pair holds
//! an identity not yet renewed ([`Renewals`]): every identity is renewed once amid the other
//! faults before one of those may end it, and a pair whose identity was never renewed by the
//! end is a violation. Renewal itself is tested in `renewal.rs` and the fleet's row r.
//!
//! The deadline is `CHAOS_PERIODS` health periods, plus Kubernetes' fixed 5 s before a deleted
//! namespace is emptied when a join meets a tenant namespace still going ([`NAMESPACE_GRACE`]),
//! and the remote's look at a fresh identity when a ForeignCluster is re-created
//! ([`FRESH_GRACE`]).
//!
//! `CHAOS_FAULTS` (names, comma-separated) draws from those faults only.
//!
//! It prints the seed first and a one-line summary last; it fails when an invariant did not
//! hold within the deadline. The same seed replays the same faults.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use liqo_api::ForeignCluster;
use liqo_api::names::tenant_namespace;
use liqo_testenv::{ControlPlane, free_port};
use serde_json::json;

const NAMES: [&str; 3] = ["a", "b", "c"];
/// Every ordered pair of the three clusters: (`x`, `y`) is `x` peered with `y`.
const PAIRS: [(usize, usize); 6] = [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)];
/// A number from the environment, or `default`.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The health (and advertise) period every reconciler runs with, in seconds (`CHAOS_HEALTH`,
/// default 2).
static HEALTH: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| env_or("CHAOS_HEALTH", 2));

/// How long the identities every reconciler issues last, in hours (`CHAOS_TOKEN_HOURS`, default
/// 0.2: 12 minutes).
static TOKEN_HOURS: std::sync::LazyLock<f64> =
    std::sync::LazyLock::new(|| std::env::var("CHAOS_TOKEN_HOURS").ok().and_then(|s| s.parse().ok()).unwrap_or(0.2));

/// The reconcilers' flags beyond the test defaults.
static FLAGS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    vec![
        "--leader-election=false".to_owned(),
        format!("--health-period-seconds={}", *HEALTH),
        format!("--advertise-period-seconds={}", *HEALTH),
        format!("--token-lifetime-hours={}", *TOKEN_HOURS),
        // Every cluster here asks from 127.0.0.1, and a fault comes every few seconds: one
        // address's `/identity` limit (5 at once, 10 a minute, for one cluster whose period is
        // 30 s) held a genuine re-join 3 s past its deadline (seed 1, fault #23: an identity
        // freed, then the ForeignCluster re-created). Two clusters' worth, at this period's pace.
        "--auth-identity-burst=10".to_owned(),
        "--auth-identity-per-minute=60".to_owned(),
    ]
});

/// The health periods within which an identity a stranger took and nobody used is retired:
/// three unused (protocol §10), the sweep's round, and the convergence deadline's two.
const STRANGER_PERIODS: u64 = 6;

/// The flags, peers told to reach our API server through `api` and our auth service through
/// `auth`.
fn flags_via(api: &Proxy, auth: &Proxy) -> Vec<String> {
    let urls = [format!("--api-url=https://127.0.0.1:{}", api.port), format!("--auth-url={}", auth.url())];
    FLAGS.iter().cloned().chain(urls).collect()
}

/// A small seeded generator (SplitMix64): the same seed, the same faults.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// How long a fault lasts: 0.5 to 4.5 s.
    fn fault_length(&mut self) -> Duration {
        Duration::from_millis(500 + self.below(4000) as u64)
    }
}

/// The faults the driver draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Fault {
    /// SIGKILL a reconciler; it restarts on the same ports.
    KillReconciler,
    /// Stop an API server, then start it again.
    StopApiServer,
    /// SIGSTOP a reconciler (its auth service and controllers hang), then SIGCONT.
    PauseReconciler,
    /// Flip `join` of a ForeignCluster.
    FlipJoin,
    /// A remote's admin deletes our PeeringRequest there.
    DeletePeeringRequest,
    /// An admin deletes a peer's Advertisement here.
    DeleteAdvertisement,
    /// A remote's admin deletes the kubeconfig Secret of our request there.
    DeleteKubeconfigSecret,
    /// Delete a ForeignCluster, then create it again (as a user re-adding the peer).
    RecreateForeignCluster,
    /// Our identity on a peer (the Secret `<fc>-identity`) deleted by our admin: the peer binds
    /// our cluster ID to the identity we lost (protocol §10), so we say `IdentityBound` until its
    /// operator frees the ID (`kubectl liqo free`), which it then does.
    DeleteIdentitySecret,
    /// A stranger asks a cluster's auth service for an identity under a peer's cluster ID that
    /// the peer holds there: it must be refused (409), and the peering goes on.
    ClaimIdentity,
    /// A stranger with no credentials writes a PeeringRequest for a peer's cluster ID that the
    /// peer holds there, in the cluster's Liqo namespace (the opt-in anonymous overlay of Liqo's
    /// manual form): our webhook must refuse it (409), and the peering goes on.
    AnonymousClaim,
    /// A stranger takes an identity for a fresh cluster ID, and the reconciler that issued it
    /// is killed at once (and restarted): the identity must be retired all the same.
    IssueThenKill,
    /// A cluster's API server, as its peers reach it, black-holed: connections accepted and
    /// held, nothing passed, then closed when it is restored.
    BlackHoleApiServer,
    /// Flip `enableAdvertisement` in a cluster's ClusterConfig.
    FlipAdvertisement,
    /// Kill a cluster's admission webhook (connections dropped), restart it after a while.
    KillWebhook,
    /// A cluster's auth service, as its peers reach it, black-holed for a while.
    BlackHoleAuthService,
    /// A cluster's `peeringPolicy` turned to `RejectAll` for a while, then to `AcceptAll` or
    /// `AcceptKnown` (every peer here was chosen by hand: both accept it).
    FlipPolicy,
    /// A pair's trust flipped: paired by the remote's CA fingerprint (`trustedCAFingerprint`,
    /// `allowUntrustedCA: false`), or back to `allowUntrustedCA`.
    FlipTrust,
    /// A cluster's auth-service CA rotated (new certificates, its reconciler restarted); its
    /// peers that paired by fingerprint must say `FingerprintMismatch`, then their operator
    /// approves the new one.
    RotateAuthCa,
    /// A cluster's service-account signing key replaced with no overlap (a control plane
    /// restored on new machines, a leaked key rotated at once): every token it issued is void,
    /// its own reconciler's (restarted with a new one, as its pod would be) and its peers'
    /// identities there, which they must get back by proving they hold their IDs with their
    /// holder keys, nothing typed.
    ReplaceSigningKey,
}

const MENU: [Fault; 19] = [
    Fault::KillReconciler,
    Fault::IssueThenKill,
    Fault::StopApiServer,
    Fault::PauseReconciler,
    Fault::FlipJoin,
    Fault::DeletePeeringRequest,
    Fault::DeleteAdvertisement,
    Fault::DeleteKubeconfigSecret,
    Fault::RecreateForeignCluster,
    Fault::DeleteIdentitySecret,
    Fault::ClaimIdentity,
    Fault::AnonymousClaim,
    Fault::BlackHoleApiServer,
    Fault::FlipAdvertisement,
    Fault::KillWebhook,
    Fault::BlackHoleAuthService,
    Fault::FlipPolicy,
    Fault::FlipTrust,
    Fault::RotateAuthCa,
];

/// Faults drawn only when `CHAOS_FAULTS` names them. `ReplaceSigningKey`: peers get their
/// identities back by key, but the kubeconfigs the cluster handed its peers' broadcasters are
/// void too and are not rewritten yet, so a peer cannot withdraw its Advertisement there (seed 1
/// at 180 s: "the remote's Advertisement is still here while it may not advertise"). It joins
/// [`MENU`] once that is mended (issue "state loss").
const ON_REQUEST: [Fault; 1] = [Fault::ReplaceSigningKey];

/// The faults drawn from: `CHAOS_FAULTS` (their names, comma-separated: one kind of fault
/// soaked alone, or one of [`ON_REQUEST`]), else all of [`MENU`].
fn menu() -> Vec<Fault> {
    let Ok(names) = std::env::var("CHAOS_FAULTS") else { return MENU.to_vec() };
    let chosen: Vec<Fault> =
        MENU.into_iter().chain(ON_REQUEST).filter(|f| names.split(',').any(|n| n.trim() == format!("{f:?}"))).collect();
    assert!(!chosen.is_empty(), "CHAOS_FAULTS={names} names none of {MENU:?} {ON_REQUEST:?}");
    chosen
}

/// A TCP proxy of the test's own in front of an API server, where its peers reach it (the
/// reconciler's `--api-url`): it passes bytes, or while `hole` is true black-holes every
/// connection (accepted and held, nothing passed; closed when restored).
struct Proxy {
    port: u16,
    hole: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    async fn start(upstream: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (hole, holes) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut holes = holes.clone();
                tokio::spawn(async move {
                    if !*holes.borrow() {
                        let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else { return };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => return,
                            _ = holes.wait_for(|h| *h) => {}
                        }
                    }
                    // Held, silent, until restored; then closed.
                    let _ = holes.wait_for(|h| !*h).await;
                });
            }
        });
        Self { port, hole }
    }

    /// Black-holes every connection for `held`, then passes bytes again.
    async fn black_hole_for(&self, held: Duration) {
        self.hole.send_replace(true);
        tokio::time::sleep(held).await;
        self.hole.send_replace(false);
    }

    /// The proxy's URL, for an auth service (its certificate names `localhost`).
    fn url(&self) -> String {
        format!("https://localhost:{}", self.port)
    }
}

struct Cluster {
    name: &'static str,
    cp: ControlPlane,
    admin: Client,
    token: String,
    id: String,
    rec: Option<Reconciler>,
    webhook: Webhook,
    /// Where its peers reach its API server.
    proxy: Proxy,
    /// Where its peers reach its auth service.
    auth_proxy: Proxy,
    /// Log lines of earlier processes of this reconciler (each restart appends).
    panics_seen: usize,
    /// Identities strangers took here (their cluster IDs), and when.
    strangers: Vec<(String, Instant)>,
}

impl Cluster {
    fn rec(&self) -> &Reconciler {
        self.rec.as_ref().expect("running")
    }

    /// Where its reconciler generates its auth service's certificates.
    fn auth_certs(&self) -> std::path::PathBuf {
        self.cp.path().join(format!("{}-auth-certs", self.name))
    }

    /// The SHA-256 fingerprint of its auth service's CA now.
    fn auth_ca_fingerprint(&self) -> String {
        let pem = std::fs::read_to_string(self.auth_certs().join("ca.crt")).expect("the auth service's CA");
        liqo_certs::inspect::fingerprint_sha256(&pem).unwrap()
    }
}

/// Creates ForeignCluster `name` on `home` for the auth service at `auth_url`, joined.
async fn peer_via(home: &Client, name: &str, auth_url: &str) {
    let fc: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": name},
        "spec": {"authUrl": auth_url, "join": true, "allowUntrustedCA": true}
    }))
    .unwrap();
    Api::<ForeignCluster>::all(home.clone()).create(&kube::api::PostParams::default(), &fc).await.unwrap();
}

/// The ForeignCluster on `x` standing for `y`.
fn fc_name(y: &Cluster) -> String {
    format!("to-{}", y.name)
}

async fn start() -> Option<Vec<Cluster>> {
    let mut out = Vec::new();
    for name in NAMES {
        let cp = ControlPlane::start_or_skip().await?;
        let admin = cp.admin();
        liqo_testenv::install_liqo(&admin, "liqo").await;
        let token = reconciler_token(&admin).await;
        let upstream: u16 = cp.url.rsplit(':').next().unwrap().parse().unwrap();
        let proxy = Proxy::start(upstream).await;
        let auth = free_port();
        let auth_proxy = Proxy::start(auth).await;
        let flags = flags_via(&proxy, &auth_proxy);
        let mut rec = start_reconciler_on(&cp, name, &token, &flags.iter().map(String::as_str).collect::<Vec<_>>(), (auth, free_port()));
        ready(&mut rec).await;
        let id = cluster_id(&admin).await;
        let webhook = start_webhook(&admin).await;
        // Anonymous peering allowed, so that a stranger may try the anonymous path too.
        let overlay = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/anonymous-peering/anonymous-peering.yaml");
        liqo_testenv::create_manifest(&admin, &std::fs::read_to_string(overlay).unwrap(), "liqo").await;
        out.push(Cluster { name, cp, admin, token, id, rec: Some(rec), webhook, proxy, auth_proxy, panics_seen: 0, strangers: vec![] });
    }
    Some(out)
}

/// What the specs say: `join[x][y]` (the ForeignCluster on x for y), whether each
/// cluster's ClusterConfig lets it advertise, and whether x paired y by its fingerprint
/// (`paired[x][y]`; else it allows an untrusted CA).
#[derive(Clone, Copy)]
struct Wanted {
    join: [[bool; 3]; 3],
    advertising: [bool; 3],
    paired: [[bool; 3]; 3],
}

/// The kubeconfig Secret of `requester`'s request on `remote` (`None` when it cannot be read).
async fn kubeconfig(remote: &Cluster, requester: &Cluster) -> Option<Option<Secret>> {
    let tenant = tenant_namespace(&requester.id);
    Api::<Secret>::namespaced(remote.admin.clone(), &tenant).get_opt(&format!("pr-kubeconfig-{}", requester.id)).await.ok()
}

/// The first invariant that does not hold, if any.
async fn violation(cs: &[Cluster], wanted: &Wanted) -> Option<String> {
    for (x, cx) in cs.iter().enumerate() {
        let mut held = 0;
        for (y, cy) in cs.iter().enumerate() {
            if x == y {
                continue;
            }
            let fc = Api::<ForeignCluster>::all(cx.admin.clone()).get_opt(&fc_name(cy)).await.ok()?;
            let ours_there = requests_of(&cy.admin, &cx.id).get_opt(&cx.id).await.ok()?;
            let theirs_here = advertisements_of(&cx.admin, &cy.id).get_opt(&format!("advertisement-{}", cy.id)).await.ok()?;
            let access = identities_of(&cx.admin, &cy.id).get_opt(&cy.id).await.ok()?;
            let what = format!("{}→{}", cx.name, cy.name);
            if wanted.join[x][y] && !wanted.advertising[y] {
                // Joined but the remote advertises nothing: our request, its kubeconfig Secret
                // and access stand, its Advertisement is gone and the ForeignCluster says not
                // joined.
                if ours_there.as_ref().is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
                    return Some(format!("{what}: our PeeringRequest is not on the remote"));
                }
                if theirs_here.is_some() {
                    return Some(format!("{what}: the remote's Advertisement is still here while it may not advertise"));
                }
                if fc.as_ref().is_none_or(outgoing_joined) {
                    return Some(format!("{what}: joined, while the remote advertises nothing"));
                }
                if access.is_none() {
                    return Some(format!("{what}: the remote's access here is missing"));
                }
                if kubeconfig(cy, cx).await?.is_none() {
                    return Some(format!("{what}: the kubeconfig Secret of our request is not on the remote"));
                }
            } else if wanted.join[x][y] {
                let joined = fc.as_ref().is_some_and(|f| outgoing_joined(f) && phase(f, "Joined").is_some_and(|p| p.0 == "True"));
                if !joined {
                    let why = fc.as_ref().and_then(|f| phase(f, "Joined")).map(|p| format!("{} {}: {}", p.0, p.1, p.2));
                    return Some(format!("{what}: not joined ({})", why.unwrap_or_else(|| "no status".into())));
                }
                if ours_there.as_ref().is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
                    return Some(format!("{what}: our PeeringRequest is not on the remote"));
                }
                if theirs_here.is_none() {
                    return Some(format!("{what}: the remote's Advertisement is not here"));
                }
                let trusted = if wanted.paired[x][y] { "FingerprintApproved" } else { "UntrustedAllowed" };
                if let Some(t) = fc.as_ref().and_then(|f| phase(f, "Trusted")).filter(|t| t.1 != trusted) {
                    return Some(format!("{what}: Trusted {} {} ({}), while its spec says {trusted}", t.0, t.1, t.2));
                }
                if access.is_none() {
                    return Some(format!("{what}: the remote's access here is missing"));
                }
                if kubeconfig(cy, cx).await?.is_none() {
                    return Some(format!("{what}: the kubeconfig Secret of our request is not on the remote"));
                }
            } else {
                if ours_there.is_some() {
                    return Some(format!("{what}: our PeeringRequest is left on the remote after unjoin"));
                }
                if theirs_here.is_some() {
                    return Some(format!("{what}: the remote's Advertisement is left here after unjoin"));
                }
                if access.is_some() {
                    return Some(format!("{what}: the remote's access is left here after unjoin"));
                }
                // protocol §9: once neither way is joined, the tenant namespace goes (asked to go:
                // the namespace controller then empties it at its pace).
                if !wanted.join[y][x] {
                    let tenant = tenant_namespace(&cy.id);
                    let ns = Api::<Namespace>::all(cx.admin.clone()).get_opt(&tenant).await.ok()?;
                    if ns.is_some_and(|n| n.metadata.deletion_timestamp.is_none()) {
                        return Some(format!("{what}: tenant namespace {tenant} is left after a full unjoin"));
                    }
                }
            }
            if wanted.join[y][x] {
                held += 1;
            }
        }
        // protocol §9: nothing per peer is cluster-wide, at any time.
        let per_peer = kube::api::ListParams::default().labels(liqo_api::names::LABEL_CLUSTER_ID);
        let roles = Api::<ClusterRole>::all(cx.admin.clone()).list_metadata(&per_peer).await.ok()?.items.len();
        let bindings = Api::<ClusterRoleBinding>::all(cx.admin.clone()).list_metadata(&per_peer).await.ok()?.items.len();
        if roles + bindings > 0 {
            return Some(format!("{}: {roles} ClusterRoles and {bindings} ClusterRoleBindings made for a peer", cx.name));
        }
        let broadcasters = metric(cx.rec(), "liqo_reconciler_broadcasters").await;
        if broadcasters as usize != held {
            return Some(format!("{}: {broadcasters} broadcasters for {held} requests held", cx.name));
        }
        if let Some(left) = stranger_left(cx).await {
            return Some(left);
        }
    }
    None
}

/// An identity a stranger took on `c` more than [`STRANGER_PERIODS`] health periods ago whose
/// tenant namespace is still there (not going).
async fn stranger_left(c: &Cluster) -> Option<String> {
    let limit = Duration::from_secs(STRANGER_PERIODS * *HEALTH);
    for (id, at) in c.strangers.iter().filter(|(_, at)| at.elapsed() > limit) {
        let tenant = tenant_namespace(id);
        let ns = Api::<Namespace>::all(c.admin.clone()).get_opt(&tenant).await.ok()?;
        if ns.is_some_and(|n| n.metadata.deletion_timestamp.is_none()) {
            let age = at.elapsed().as_secs_f64();
            return Some(format!("{}: the identity a stranger took {age:.1} s ago is not retired ({tenant} is left)", c.name));
        }
    }
    None
}

/// Strangers' claims on a held ID made so far (each from an address of its own).
static CLAIMS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Strangers' identities issued so far (each stranger asks from an address of its own).
/// Whether `fault` on the pair (`x`, `y`) issues `x`'s identity on `y` again.
fn issues_again(fault: Fault) -> bool {
    matches!(fault, Fault::FlipJoin | Fault::DeleteIdentitySecret | Fault::RecreateForeignCluster)
}

/// What the soak knows of each pair's identity (`x`'s on `y`: the ServiceAccount
/// `remote-<x>` on `y`): which one it is (its UID), when it was first seen issued, and whether
/// it has been renewed since (a later `issued-at` on the same ServiceAccount).
#[derive(Default)]
struct Renewals {
    seen: std::collections::BTreeMap<(usize, usize), (String, String, bool)>,
    /// Pairs whose identity has been renewed at least once in the soak.
    renewed: std::collections::BTreeSet<(usize, usize)>,
}

impl Renewals {
    /// Looks at every pair's identity again (a pair its API server does not answer for keeps
    /// what was known).
    async fn look(&mut self, cs: &[Cluster]) {
        for (x, y) in PAIRS {
            let sa = liqo_api::names::peer_service_account(&cs[x].id);
            let Ok(found) = identities_of(&cs[y].admin, &cs[x].id).get_opt(&sa).await else { continue };
            let Some(found) = found.filter(|sa| sa.metadata.deletion_timestamp.is_none()) else {
                self.seen.remove(&(x, y));
                continue;
            };
            let uid = found.metadata.uid.clone().unwrap_or_default();
            let issued = found.metadata.annotations.as_ref().and_then(|a| a.get(liqo_api::names::ANNOTATION_ISSUED_AT)).cloned();
            let issued = issued.unwrap_or_default();
            match self.seen.get_mut(&(x, y)) {
                Some((u, first, renewed)) if *u == uid => {
                    if issued != *first && !*renewed {
                        *renewed = true;
                        self.renewed.insert((x, y));
                    }
                }
                _ => {
                    self.seen.insert((x, y), (uid, issued, false));
                }
            }
        }
    }

    /// Whether the pair holds an identity not yet renewed.
    fn waits_renewal(&self, x: usize, y: usize) -> bool {
        self.seen.get(&(x, y)).is_some_and(|(_, _, renewed)| !renewed)
    }
}

/// A stranger's unauthenticated PeeringRequest for `x`'s cluster ID in `y`'s Liqo namespace,
/// where `x` holds an identity: refused (409) by `y`'s webhook. Its other answers while the
/// webhook or the API server is coming back from a fault (500, 503, a failed connection) are
/// tried again for up to 20 s; an admitted one fails the soak (and is removed).
async fn anonymous_claim(x: &Cluster, y: &Cluster) -> Result<String, String> {
    let (xn, yn) = (x.name, y.name);
    let sa = liqo_api::names::peer_service_account(&x.id);
    let held = identities_of(&y.admin, &x.id).get_opt(&sa).await.ok().flatten();
    // An identity issued a moment ago may not be in the webhook's view yet (a watch away).
    let settled = held
        .and_then(|sa| sa.metadata.creation_timestamp)
        .is_some_and(|t| k8s_openapi::jiff::Timestamp::now().duration_since(t.0) > k8s_openapi::jiff::SignedDuration::from_secs(5));
    if !settled {
        return Ok(format!("{xn} holds no settled identity on {yn}: no anonymous claim tried"));
    }
    let stranger = Client::try_from(y.cp.config().unwrap()).unwrap();
    let requests = Api::<liqo_api::PeeringRequest>::namespaced(stranger, "liqo");
    let pr: liqo_api::PeeringRequest = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest",
        "metadata": {"name": x.id, "namespace": "liqo"},
        "spec": {"clusterIdentity": {"clusterID": x.id, "clusterName": "stranger"}, "namespace": "liqo",
                 "kubeConfigRef": {"name": liqo_api::names::peering_kubeconfig_secret(&x.id), "namespace": "liqo"}}
    }))
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let last = match requests.create(&kube::api::PostParams::default(), &pr).await {
            Err(kube::Error::Api(s)) if s.code == 409 && s.message.contains("kubectl liqo free") => {
                return Ok(format!("a stranger's anonymous PeeringRequest for {xn}'s ID on {yn}: 409"));
            }
            Ok(_) => {
                let _ = Api::<liqo_api::PeeringRequest>::namespaced(y.admin.clone(), "liqo").delete(&x.id, &DeleteParams::default()).await;
                return Err(format!("a stranger's anonymous PeeringRequest for {xn}'s bound ID was admitted on {yn}"));
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            return Err(format!("a stranger's anonymous PeeringRequest for {xn}'s ID on {yn} was not refused with 409 in 20 s: {last}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

static STRANGERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// kube-controller-manager's namespace controller waits this long before it empties a deleted
/// namespace (`namespaceDeletionGracePeriod`, fixed): a join that meets its peer's tenant
/// namespace still going (a full unjoin just retired it) waits that long for it, whatever the
/// health period (30 s by default; 2 s here, which the 5 s would otherwise outgrow).
const NAMESPACE_GRACE: Duration = Duration::from_secs(5);

/// A ForeignCluster re-created right after its identity was issued (by a re-creation just
/// before, say) gets a new identity only once the remote looked again at the old one, the peer
/// having had `USE_WITHIN` to write its request with it (an identity that fresh may be for a
/// join under way: revoked at once, it broke that join on the node tier). A re-creation's
/// deadline has that much more (seed 2 saw one 0.4 s past the 2 periods).
const FRESH_GRACE: Duration = liqo_reconciler::tenancy::retirement::USE_WITHIN;

/// How many checks met a tenant namespace still going (their deadline had [`NAMESPACE_GRACE`]).
static MET_GOING: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Whether a pair that should be joined meets a tenant namespace still going, on either side.
async fn meets_tenant_going(cs: &[Cluster], wanted: &Wanted) -> bool {
    for (x, y) in (0..3).flat_map(|x| (0..3).map(move |y| (x, y))).filter(|&(x, y)| x != y && wanted.join[x][y]) {
        for (here, peer) in [(x, y), (y, x)] {
            let tenant = tenant_namespace(&cs[peer].id);
            let ns = Api::<Namespace>::all(cs[here].admin.clone()).get_opt(&tenant).await.ok().flatten();
            if ns.is_some_and(|n| n.metadata.deletion_timestamp.is_some()) {
                return true;
            }
        }
    }
    false
}

/// Waits for the invariants (`deadline`, plus [`NAMESPACE_GRACE`] when a join met a tenant
/// namespace still going), then returns how long it took, or the violation.
async fn converge(cs: &[Cluster], wanted: &Wanted, deadline: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    let mut limit = deadline;
    loop {
        if limit == deadline && meets_tenant_going(cs, wanted).await {
            limit = deadline + NAMESPACE_GRACE;
            MET_GOING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let v = violation(cs, wanted).await;
        match v {
            None => return Ok(started.elapsed()),
            Some(v) if started.elapsed() >= limit => return Err(v),
            Some(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// New panics in the logs of `c`'s reconciler, and whether it still runs.
fn health_of(c: &mut Cluster) -> Option<String> {
    let log = std::fs::read_to_string(&c.rec().log).unwrap_or_default();
    let panics = log.matches("panicked").count();
    if panics > c.panics_seen {
        c.panics_seen = panics;
        return Some(format!("{}: the reconciler panicked:\n{}", c.name, log_tail(c.rec())));
    }
    if let Some(status) = c.rec.as_mut().unwrap().child.try_wait().unwrap() {
        return Some(format!("{}: the reconciler exited ({status}):\n{}", c.name, log_tail(c.rec())));
    }
    None
}

/// The time of day (UTC, to the millisecond), as the reconcilers' logs write it.
fn clock() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() % 86_400_000;
    format!("{:02}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

/// Copies every reconciler's whole log to `$CHAOS_LOGS` (default: a folder in the system's
/// temporary directory named by the seed), for a late or violated fault.
fn keep_logs(cs: &[Cluster], seed: u64, fault: u32) {
    let dir = std::env::var_os("CHAOS_LOGS").map_or_else(|| std::env::temp_dir().join(format!("liqo-chaos-seed-{seed}")), Into::into);
    let _ = std::fs::create_dir_all(&dir);
    for c in cs {
        let to = dir.join(format!("fault-{fault}-{}-reconciler.log", c.name));
        if std::fs::copy(&c.rec().log, &to).is_ok() {
            println!("--- {}'s whole log: {}", c.name, to.display());
        }
    }
}

/// Waits until `c`'s namespace controller deletes a namespace again after its API server
/// restarted: kube-controller-manager's watches come back with their own backoff (a tenant
/// namespace asked to go just after a restart took 30 s to go in the soak, seed 7). Until then
/// a retired tenant namespace stays and a re-join waits, which is the control plane's, not
/// ours: the convergence clock starts after. Returns the wait, [`NAMESPACE_GRACE`] included.
async fn namespaces_go_again(c: &Cluster) -> Duration {
    let started = Instant::now();
    if !c.cp.controllers() {
        return Duration::ZERO;
    }
    let namespaces = Api::<Namespace>::all(c.admin.clone());
    let probe: Namespace = serde_json::from_value(json!({"metadata": {"name": "chaos-probe"}})).unwrap();
    let _ = namespaces.create(&kube::api::PostParams::default(), &probe).await;
    let _ = namespaces.delete("chaos-probe", &DeleteParams::default()).await;
    while namespaces.get_opt("chaos-probe").await.map_or(true, |ns| ns.is_some()) {
        assert!(started.elapsed() < Duration::from_secs(120), "{}'s namespace controller deleted nothing for 120 s", c.name);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    started.elapsed()
}

/// After `x`'s signing key was replaced: waits until every peer that joins `x` holds an identity
/// there that `x`'s API server accepts again (a TokenReview), which a peer gets back only by
/// proving its ID with its holder key; at most 12 health periods after `started` (the change).
/// Returns the time since the change.
async fn identities_valid_again(cs: &[Cluster], wanted: &Wanted, x: usize, started: Instant) -> Result<Duration, String> {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    let limit = Duration::from_secs(12 * *HEALTH);
    for p in (0..3).filter(|&p| p != x && wanted.join[p][x]) {
        let secret = liqo_api::names::identity_secret(&fc_name(&cs[x]));
        loop {
            let kubeconfig = Api::<Secret>::namespaced(cs[p].admin.clone(), "liqo")
                .get_opt(&secret)
                .await
                .ok()
                .flatten()
                .and_then(|s| s.data?.get("kubeconfig").map(|b| String::from_utf8_lossy(&b.0).into_owned()));
            let token = kubeconfig.as_deref().and_then(liqo_reconciler::remote::peer::token_of);
            if let Some(token) = token {
                let review = TokenReview { spec: TokenReviewSpec { token, ..Default::default() }, ..Default::default() };
                let reviewed = Api::<TokenReview>::all(cs[x].admin.clone()).create(&Default::default(), &review).await;
                if reviewed.ok().and_then(|r| r.status?.authenticated) == Some(true) {
                    break;
                }
            }
            if started.elapsed() > limit {
                return Err(format!(
                    "{}'s identity on {} still void {} s after {}'s signing key was replaced",
                    cs[p].name,
                    cs[x].name,
                    limit.as_secs(),
                    cs[x].name
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(started.elapsed())
}

/// Waits until `c`'s restarted API server authorizes its reconciler again: a fresh API server
/// answers 403 to service accounts until its RBAC cache is filled, seconds after it reports
/// ready. Until then nothing is restored, so the convergence clock starts after. Returns the wait.
async fn authorized_again(c: &Cluster) -> Duration {
    let started = Instant::now();
    let reconciler = c.cp.client(&c.token).expect("the reconciler's client");
    // A cluster-wide grant (ClusterRoleBinding) and a namespaced one (RoleBinding): their
    // caches fill apart.
    let fcs = Api::<ForeignCluster>::all(reconciler.clone());
    let secrets = Api::<Secret>::namespaced(reconciler, "liqo");
    let lp = kube::api::ListParams::default().limit(1);
    while fcs.list_metadata(&lp).await.is_err() || secrets.list_metadata(&lp).await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "{}'s API server still refuses its reconciler after 60 s", c.name);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

async fn restart(c: &mut Cluster) {
    let rec = c.rec.as_mut().unwrap();
    let flags = flags_via(&c.proxy, &c.auth_proxy);
    restart_reconciler(&c.cp, rec, c.name, &c.token, &flags.iter().map(String::as_str).collect::<Vec<_>>());
    ready(rec).await;
}

/// Injects `fault` on the pair (`x`, `y`), updating `wanted`, and restores what a Deployment
/// or an operator would. Returns what it did, or a violation it saw on the way.
async fn inject(cs: &mut [Cluster], wanted: &mut Wanted, fault: Fault, x: usize, y: usize, rng: &mut Rng) -> Result<String, String> {
    if fault == Fault::RotateAuthCa {
        return rotate_auth_ca(cs, wanted, x).await;
    }
    let (xn, yn) = (cs[x].name, cs[y].name);
    Ok(match fault {
        Fault::KillReconciler => {
            restart(&mut cs[x]).await;
            format!("killed and restarted {xn}'s reconciler")
        }
        Fault::ReplaceSigningKey => {
            let replaced = Instant::now();
            cs[x].cp.replace_signing_key().await;
            cs[x].token = liqo_testenv::service_account_token(&cs[x].admin, "liqo", "liqo-reconciler").await;
            let warm_up = authorized_again(&cs[x]).await;
            restart(&mut cs[x]).await;
            let back = identities_valid_again(cs, wanted, x, replaced).await?;
            format!(
                "replaced {xn}'s service-account signing key with no overlap (every token it issued void; RBAC served again {:.1} s after ready); its reconciler restarted with a new token; its peers held valid identities on it again {:.1} s after the key changed",
                warm_up.as_secs_f64(),
                back.as_secs_f64()
            )
        }
        Fault::StopApiServer => {
            cs[x].cp.stop_apiserver();
            let down = rng.fault_length();
            tokio::time::sleep(down).await;
            cs[x].cp.restart_apiserver().await;
            let warm_up = authorized_again(&cs[x]).await;
            let namespaces = namespaces_go_again(&cs[x]).await;
            format!(
                "stopped {xn}'s API server for {:.1} s (RBAC served again {:.1} s after ready, a namespace deleted {:.1} s after that)",
                down.as_secs_f64(),
                warm_up.as_secs_f64(),
                namespaces.as_secs_f64()
            )
        }
        Fault::PauseReconciler => {
            signal(cs[x].rec(), "STOP");
            let paused = rng.fault_length();
            tokio::time::sleep(paused).await;
            signal(cs[x].rec(), "CONT");
            format!("paused {xn}'s reconciler for {:.1} s", paused.as_secs_f64())
        }
        Fault::FlipJoin => {
            wanted.join[x][y] = !wanted.join[x][y];
            let patch = json!({"spec": {"join": wanted.join[x][y]}});
            let name = fc_name(&cs[y]);
            Api::<ForeignCluster>::all(cs[x].admin.clone()).patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
            format!("{xn}→{yn}: join {}", wanted.join[x][y])
        }
        Fault::DeletePeeringRequest => {
            let _ = requests_of(&cs[y].admin, &cs[x].id).delete(&cs[x].id, &DeleteParams::default()).await;
            format!("{yn}'s admin deleted {xn}'s PeeringRequest")
        }
        Fault::DeleteAdvertisement => {
            let name = format!("advertisement-{}", cs[y].id);
            let _ = advertisements_of(&cs[x].admin, &cs[y].id).delete(&name, &DeleteParams::default()).await;
            format!("{xn}'s admin deleted {yn}'s Advertisement")
        }
        Fault::DeleteKubeconfigSecret => {
            let name = format!("pr-kubeconfig-{}", cs[x].id);
            let tenant = tenant_namespace(&cs[x].id);
            let _ = Api::<Secret>::namespaced(cs[y].admin.clone(), &tenant).delete(&name, &DeleteParams::default()).await;
            format!("{yn}'s admin deleted {xn}'s kubeconfig Secret")
        }
        Fault::DeleteIdentitySecret => {
            let name = liqo_api::names::identity_secret(&fc_name(&cs[y]));
            let _ = Api::<Secret>::namespaced(cs[x].admin.clone(), "liqo").delete(&name, &DeleteParams::default()).await;
            // While x joins y, y still binds x's ID: x proves it holds it with its holder key and
            // is issued a new identity. Were it told IdentityBound instead (no key recorded
            // there), y's operator frees the ID.
            let bound = Instant::now();
            let (mut said, mut reclaimed) = (false, false);
            let before =
                liqo_testenv::event(&cs[x].admin, "IdentityReclaimed", &fc_name(&cs[y])).await.and_then(|e| e.metadata.resource_version);
            while wanted.join[x][y] && bound.elapsed() < Duration::from_secs(10) {
                let fc = Api::<ForeignCluster>::all(cs[x].admin.clone()).get_opt(&fc_name(&cs[y])).await.ok().flatten();
                if fc.as_ref().and_then(|f| phase(f, "Authenticated")).is_some_and(|(_, reason, _)| reason == "IdentityBound") {
                    said = true;
                    break;
                }
                let now = liqo_testenv::event(&cs[x].admin, "IdentityReclaimed", &fc_name(&cs[y]))
                    .await
                    .and_then(|e| e.metadata.resource_version);
                if now.is_some() && now != before {
                    reclaimed = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let freed = said && {
                let sa = liqo_api::names::peer_service_account(&cs[x].id);
                identities_of(&cs[y].admin, &cs[x].id).delete(&sa, &DeleteParams::default()).await.is_ok()
            };
            format!(
                "{xn}'s admin deleted {xn}'s identity Secret for {yn}; {xn} reclaimed its ID by key: {reclaimed}, said IdentityBound: {said} (after {:.1} s); {yn}'s operator freed {xn}'s ID: {freed}",
                bound.elapsed().as_secs_f64()
            )
        }
        Fault::ClaimIdentity => {
            let sa = liqo_api::names::peer_service_account(&cs[x].id);
            if identities_of(&cs[y].admin, &cs[x].id).get_opt(&sa).await.ok().flatten().is_none() {
                return Ok(format!("{xn} holds no identity on {yn}: no stranger's claim tried"));
            }
            let port: u16 = cs[y].rec().auth_url.rsplit(':').next().unwrap().parse().unwrap();
            let body = json!({"clusterID": cs[x].id, "token": ""});
            let ca = cs[y].auth_certs().join("ca.crt");
            // The stranger asks from an address of its own, as one would: from the peers' own
            // 127.0.0.1 its claims would spend their rate limit and delay their genuine joins.
            let n = CLAIMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let source = std::net::IpAddr::from([127, 0, 2, (n % 250 + 1) as u8]);
            let answer = liqo_testenv::https::request_from(source, ([127, 0, 0, 1], port).into(), &ca, "POST", "/identity", body).await;
            // 429: the stranger's address is over its rate limit, which refuses it as well.
            if ![409, 429].contains(&answer.status) {
                return Err(format!("a stranger claiming {xn}'s ID on {yn} got {}: {}", answer.status, answer.text()));
            }
            format!("a stranger claimed {xn}'s ID on {yn}: {}", answer.status)
        }
        Fault::AnonymousClaim => anonymous_claim(&cs[x], &cs[y]).await?,
        Fault::IssueThenKill => {
            let n = STRANGERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let source = std::net::IpAddr::from([127, 0, 3 + (n / 250) as u8, (n % 250 + 1) as u8]);
            let id = format!("5e000000-0000-4000-8000-{n:012x}");
            let port: u16 = cs[x].rec().auth_url.rsplit(':').next().unwrap().parse().unwrap();
            let ca = cs[x].auth_certs().join("ca.crt");
            let body = json!({"clusterID": id, "token": ""});
            let answer = liqo_testenv::https::request_from(source, ([127, 0, 0, 1], port).into(), &ca, "POST", "/identity", body).await;
            restart(&mut cs[x]).await;
            // 503: the waiting identities are at the cap; nothing was issued.
            match answer.status {
                201 => cs[x].strangers.push((id, Instant::now())),
                503 => {}
                other => return Err(format!("a stranger asking {xn} for a fresh ID's identity got {other}: {}", answer.text())),
            }
            format!("a stranger took an identity on {xn} ({}); {xn}'s reconciler killed at once and restarted", answer.status)
        }
        Fault::BlackHoleApiServer => {
            let held = rng.fault_length();
            cs[x].proxy.black_hole_for(held).await;
            format!("black-holed {xn}'s API server, as its peers reach it, for {:.1} s", held.as_secs_f64())
        }
        Fault::FlipAdvertisement => {
            wanted.advertising[x] = !wanted.advertising[x];
            let patch = json!({"spec": {"discoveryConfig": {"enableAdvertisement": wanted.advertising[x]}}});
            Api::<liqo_api::ClusterConfig>::all(cs[x].admin.clone())
                .patch("liqo-configuration", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
            format!("{xn}: enableAdvertisement {}", wanted.advertising[x])
        }
        Fault::KillWebhook => {
            let down = rng.fault_length();
            cs[x].webhook.kill_and_restart(down).await;
            format!("killed {xn}'s webhook, restarted after {:.1} s", down.as_secs_f64())
        }
        Fault::BlackHoleAuthService => {
            let held = rng.fault_length();
            cs[x].auth_proxy.black_hole_for(held).await;
            format!("black-holed {xn}'s auth service, as its peers reach it, for {:.1} s", held.as_secs_f64())
        }
        Fault::FlipPolicy => {
            let held = rng.fault_length();
            set_policy(&cs[x].admin, "RejectAll").await;
            tokio::time::sleep(held).await;
            let then = ["AcceptAll", "AcceptKnown"][rng.below(2)];
            set_policy(&cs[x].admin, then).await;
            format!("{xn}: peeringPolicy RejectAll for {:.1} s, then {then}", held.as_secs_f64())
        }
        Fault::FlipTrust => {
            wanted.paired[x][y] = !wanted.paired[x][y];
            let spec = if wanted.paired[x][y] {
                json!({"trustedCAFingerprint": cs[y].auth_ca_fingerprint(), "allowUntrustedCA": false})
            } else {
                json!({"trustedCAFingerprint": null, "allowUntrustedCA": true})
            };
            let name = fc_name(&cs[y]);
            Api::<ForeignCluster>::all(cs[x].admin.clone())
                .patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": spec})))
                .await
                .unwrap();
            format!("{xn}→{yn}: {}", if wanted.paired[x][y] { "paired by fingerprint" } else { "untrusted CA allowed" })
        }
        Fault::RotateAuthCa => unreachable!("above"),
        Fault::RecreateForeignCluster => {
            let fcs = Api::<ForeignCluster>::all(cs[x].admin.clone());
            let name = fc_name(&cs[y]);
            let _ = fcs.delete(&name, &DeleteParams::default()).await;
            let deadline = Instant::now() + Duration::from_secs(60);
            while fcs.get_opt(&name).await.ok().flatten().is_some() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            peer_via(&cs[x].admin, &name, &cs[y].auth_proxy.url()).await;
            wanted.join[x][y] = true;
            wanted.paired[x][y] = false;
            format!("{xn} deleted and re-created its ForeignCluster for {yn}")
        }
    })
}

/// Rotates `x`'s auth-service CA (new certificates, its reconciler restarted). Each peer that
/// paired it by fingerprint and wants it joined must say `FingerprintMismatch` within the
/// periods between two proofs (plus two); its operator then approves the new fingerprint (at
/// once where it does not want it joined).
async fn rotate_auth_ca(cs: &mut [Cluster], wanted: &Wanted, x: usize) -> Result<String, String> {
    let old = cs[x].auth_ca_fingerprint();
    std::fs::remove_dir_all(cs[x].auth_certs()).unwrap();
    restart(&mut cs[x]).await;
    let new = cs[x].auth_ca_fingerprint();
    assert_ne!(old, new, "a new CA");
    let mut told = Vec::new();
    for y in (0..3).filter(|&y| y != x && wanted.paired[y][x]) {
        let name = fc_name(&cs[x]);
        let fcs = Api::<ForeignCluster>::all(cs[y].admin.clone());
        let approve = json!({"spec": {"trustedCAFingerprint": new}});
        if !wanted.join[y][x] {
            // Not joined: nothing looks; its operator approves the new one at once.
            fcs.patch(&name, &PatchParams::default(), &Patch::Merge(approve)).await.unwrap();
            continue;
        }
        let started = Instant::now();
        let limit = Duration::from_secs((liqo_reconciler::foreign_cluster::PROOF_PERIODS as u64 + 2) * *HEALTH);
        let mismatch = |f: &ForeignCluster| phase(f, "Trusted").is_some_and(|t| t.1 == "FingerprintMismatch");
        while !fcs.get_opt(&name).await.ok().flatten().is_some_and(|f| mismatch(&f)) {
            if started.elapsed() > limit {
                let (xn, yn, s) = (cs[x].name, cs[y].name, limit.as_secs());
                return Err(format!(
                    "rotated {xn}'s auth CA: {yn}, paired by its old fingerprint, did not say FingerprintMismatch within {s} s"
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        told.push(format!("{} told in {:.1} s", cs[y].name, started.elapsed().as_secs_f64()));
        fcs.patch(&name, &PatchParams::default(), &Patch::Merge(approve)).await.unwrap();
    }
    let told = if told.is_empty() { String::new() } else { format!(" ({}; approved again)", told.join(", ")) };
    Ok(format!("rotated {}'s auth CA{told}", cs[x].name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the chaos soak: just chaos SECONDS SEED"]
async fn chaos_soak() {
    let seconds = env_or("CHAOS_SECONDS", 180);
    let seed = env_or("CHAOS_SEED", 1);
    // The deadline for convergence once what a Deployment restores is back (a restarted API
    // server or reconciler serving again): PERIODS health periods.
    let periods = env_or("CHAOS_PERIODS", 2);
    let deadline = Duration::from_secs(periods * *HEALTH);
    // `CHAOS_LATE=report`: a convergence past the deadline is reported and counted, not a
    // violation (CI, where a loaded machine stretches any timing); one that never comes (60 s
    // more) always is.
    let late_fails = std::env::var("CHAOS_LATE").map_or(true, |v| v != "report");
    println!(
        "chaos: seed {seed}, {seconds} s, health period {} s, deadline {periods} periods ({})",
        *HEALTH,
        if late_fails { "late is a violation" } else { "late is reported" }
    );
    let Some(mut cs) = start().await else { return };
    let mut rng = Rng(seed);
    let mut wanted = Wanted { join: [[true; 3]; 3], advertising: [true; 3], paired: [[false; 3]; 3] };
    for (x, y) in PAIRS {
        peer_via(&cs[x].admin.clone(), &fc_name(&cs[y]), &cs[y].auth_proxy.url()).await;
    }
    converge(&cs, &wanted, Duration::from_secs(120)).await.unwrap_or_else(|v| panic!("the initial peering: {v}"));
    let lines_at_start: usize = cs.iter().map(|c| info_lines(c.rec())).sum();

    let started = Instant::now();
    let mut counts = std::collections::BTreeMap::<Fault, u32>::new();
    let (mut faults, mut checks, mut violations, mut slowest) = (0u32, 0u32, Vec::<String>::new(), Duration::ZERO);
    let mut late = Vec::<String>::new();
    // Long enough for every pair's identity to be renewed: two minutes past the first renewal due.
    let renewal_due = Duration::from_secs_f64(*TOKEN_HOURS * 3600.0 * 0.8);
    let renewing = Duration::from_secs(seconds) >= renewal_due + Duration::from_secs(120);
    let mut renewals = Renewals::default();
    let menu = menu();
    while started.elapsed() < Duration::from_secs(seconds) {
        if renewing {
            renewals.look(&cs).await;
        }
        let (fault, x, y) = loop {
            let fault = menu[rng.below(menu.len())];
            let x = rng.below(3);
            let y = (x + 1 + rng.below(2)) % 3;
            if !(renewing && issues_again(fault) && renewals.waits_renewal(x, y)) {
                break (fault, x, y);
            }
        };
        let at = clock();
        let did = match inject(&mut cs, &mut wanted, fault, x, y, &mut rng).await {
            Ok(did) => format!("[{at}] {did}"),
            Err(v) => {
                println!("#{} [{at}] VIOLATION: {v}", faults + 1);
                violations.push(format!("seed {seed} fault #{}: {v}", faults + 1));
                format!("[{at}] {fault:?} (violated)")
            }
        };
        faults += 1;
        *counts.entry(fault).or_default() += 1;
        checks += 1;
        let allowed = if fault == Fault::RecreateForeignCluster { deadline + FRESH_GRACE } else { deadline };
        let outcome = converge(&cs, &wanted, allowed).await;
        let mut health: Vec<String> = cs.iter_mut().filter_map(health_of).collect();
        match outcome {
            Ok(took) => {
                slowest = slowest.max(took);
                println!("#{faults} {did}: converged in {:.1} s", took.as_secs_f64());
            }
            Err(v) => {
                // Late or never: look longer, to tell a slow repair from a stuck one.
                let again = converge(&cs, &wanted, Duration::from_secs(60)).await;
                let (verdict, stuck) = match again {
                    Ok(t) => {
                        slowest = slowest.max(allowed + t);
                        (format!("converged {:.1} s late", t.as_secs_f64()), false)
                    }
                    Err(v2) => (format!("still not after 60 s: {v2}"), true),
                };
                let what = if stuck || late_fails { "VIOLATION" } else { "LATE" };
                println!("#{faults} {did}: {what} after {periods} periods: {v}; {verdict}");
                for c in &cs {
                    println!("--- {}'s reconciler, last lines:\n{}", c.name, log_tail(c.rec()));
                }
                keep_logs(&cs, seed, faults);
                let record = format!("seed {seed} fault #{faults} ({did}): {v}; {verdict}");
                if stuck || late_fails { violations.push(record) } else { late.push(record) }
            }
        }
        for h in health.drain(..) {
            println!("#{faults} VIOLATION: {h}");
            violations.push(format!("seed {seed} fault #{faults}: {h}"));
        }
    }
    // The last strangers' identities: retired within their periods too.
    let last = cs.iter().flat_map(|c| c.strangers.iter().map(|(_, at)| *at)).max();
    if let Some(last) = last {
        let limit = Duration::from_secs(STRANGER_PERIODS * *HEALTH);
        tokio::time::sleep((limit + Duration::from_secs(1)).saturating_sub(last.elapsed())).await;
        if let Err(v) = converge(&cs, &wanted, deadline).await {
            println!("after the last fault: VIOLATION: {v}");
            violations.push(format!("seed {seed} after the last fault: {v}"));
        }
    }
    if renewing {
        renewals.look(&cs).await;
        let never: Vec<String> =
            PAIRS.into_iter().filter(|p| !renewals.renewed.contains(p)).map(|(x, y)| format!("{}→{}", cs[x].name, cs[y].name)).collect();
        println!(
            "identities renewed amid the faults: {} of 6 pairs ({})",
            6 - never.len(),
            if never.is_empty() { "all".into() } else { format!("never: {}", never.join(", ")) }
        );
        if !never.is_empty() {
            violations.push(format!("seed {seed}: no identity of {} was renewed in {seconds} s", never.join(", ")));
        }
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let renewals: usize = cs.iter().map(|c| log_count(c.rec(), "renewed our identity on the remote")).sum();
    let rewritten: usize = cs.iter().map(|c| log_count(c.rec(), "wrote the kubeconfig we keep on the remote again")).sum();
    let strangers: usize = cs.iter().map(|c| c.strangers.len()).sum();
    let lines: usize = cs.iter().map(|c| info_lines(c.rec())).sum();
    let per_minute = (lines - lines_at_start) as f64 / minutes / 3.0;
    let by_kind: Vec<String> = counts.iter().map(|(f, n)| format!("{f:?} {n}")).collect();
    for record in late.iter().map(|r| format!("late: {r}")).chain(violations.iter().map(|v| format!("violation: {v}"))) {
        println!("{record}");
    }
    println!(
        "chaos: seed {seed}: {faults} faults in {:.1} min ({}), {checks} invariant checks ({} met a tenant namespace still going: deadline + {} s), slowest convergence {:.1} s, late {}, identities of {:.0} min renewed {renewals} times and kubeconfigs on peers written again {rewritten} times amid them, {strangers} strangers' identities retired, {per_minute:.0} INFO+ log lines/min per reconciler, violations: {}",
        minutes,
        by_kind.join(", "),
        MET_GOING.load(std::sync::atomic::Ordering::Relaxed),
        NAMESPACE_GRACE.as_secs(),
        slowest.as_secs_f64(),
        late.len(),
        *TOKEN_HOURS * 60.0,
        violations.len()
    );
    assert!(violations.is_empty(), "{} violations (listed above the summary)", violations.len());
}
