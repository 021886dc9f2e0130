//! The seeded chaos soak (`just chaos SECONDS SEED`; ignored by `cargo test`): three real
//! control planes (A, B, C), each with its reconciler (the shipped RBAC, health period 2 s)
//! and its webhook; every pair peers both ways. A driver draws faults from a fixed menu with a
//! seeded generator, restores what a Deployment would restore (a killed process restarts, a
//! stopped API server comes back), and after each fault checks the invariants until they hold
//! or the deadline passes:
//!
//! - every ordered pair is joined exactly when its ForeignCluster says `join: true` (our
//!   request on the remote, the remote's Advertisement here, the remote's access here), and
//!   nothing of it is left when it says `join: false`;
//! - each cluster runs one broadcaster per request it holds;
//! - no reconciler panicked, none is down;
//! - the logs stay bounded (lines per minute).
//!
//! It prints the seed first and a one-line summary last; it fails when an invariant did not
//! hold within the deadline. The same seed replays the same faults.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use liqo_api::{Advertisement, ForeignCluster, PeeringRequest};
use liqo_testenv::ControlPlane;
use serde_json::json;

const NAMES: [&str; 3] = ["a", "b", "c"];
/// The health period every reconciler runs with, in seconds.
const HEALTH: u64 = 2;

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
}

const MENU: [Fault; 8] = [
    Fault::KillReconciler,
    Fault::StopApiServer,
    Fault::PauseReconciler,
    Fault::FlipJoin,
    Fault::DeletePeeringRequest,
    Fault::DeleteAdvertisement,
    Fault::DeleteKubeconfigSecret,
    Fault::RecreateForeignCluster,
];

struct Cluster {
    name: &'static str,
    cp: ControlPlane,
    admin: Client,
    token: String,
    id: String,
    rec: Option<Reconciler>,
    _webhook: Webhook,
    /// Log lines of earlier processes of this reconciler (each restart appends).
    panics_seen: usize,
}

impl Cluster {
    fn rec(&self) -> &Reconciler {
        self.rec.as_ref().expect("running")
    }
}

const FLAGS: [&str; 1] = ["--leader-election=false"];

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
        let mut rec = start_reconciler_with(&cp, name, &token, &FLAGS);
        ready(&mut rec).await;
        let id = cluster_id(&admin).await;
        let webhook = start_webhook(&admin).await;
        out.push(Cluster { name, cp, admin, token, id, rec: Some(rec), _webhook: webhook, panics_seen: 0 });
    }
    Some(out)
}

/// What the specs say: `join[x][y]`.
type Wanted = [[bool; 3]; 3];

/// The first invariant that does not hold, if any.
async fn violation(cs: &[Cluster], wanted: &Wanted) -> Option<String> {
    for (x, cx) in cs.iter().enumerate() {
        let mut held = 0;
        for (y, cy) in cs.iter().enumerate() {
            if x == y {
                continue;
            }
            let fc = Api::<ForeignCluster>::all(cx.admin.clone()).get_opt(&fc_name(cy)).await.ok()?;
            let ours_there = Api::<PeeringRequest>::all(cy.admin.clone()).get_opt(&cx.id).await.ok()?;
            let theirs_here = Api::<Advertisement>::all(cx.admin.clone()).get_opt(&format!("advertisement-{}", cy.id)).await.ok()?;
            let access = Api::<ServiceAccount>::namespaced(cx.admin.clone(), "liqo").get_opt(&cy.id).await.ok()?;
            let what = format!("{}→{}", cx.name, cy.name);
            if wanted[x][y] {
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
                if access.is_none() {
                    return Some(format!("{what}: the remote's access here is missing"));
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
            }
            if wanted[y][x] {
                held += 1;
            }
        }
        let broadcasters = metric(cx.rec(), "liqo_reconciler_broadcasters").await;
        if broadcasters as usize != held {
            return Some(format!("{}: {broadcasters} broadcasters for {held} requests held", cx.name));
        }
    }
    None
}

/// Waits for the invariants (`deadline`), then returns how long it took, or the violation.
async fn converge(cs: &[Cluster], wanted: &Wanted, deadline: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        let v = violation(cs, wanted).await;
        match v {
            None => return Ok(started.elapsed()),
            Some(v) if started.elapsed() >= deadline => return Err(v),
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

/// Lines of INFO and above in `r`'s log (the tests run it with `liqo_reconciler=debug`; the level
/// is between color codes, so the bare word is matched).
fn info_lines(r: &Reconciler) -> usize {
    std::fs::read_to_string(&r.log).unwrap_or_default().lines().filter(|l| !l.contains("DEBUG") && !l.contains("TRACE")).count()
}

async fn restart(c: &mut Cluster) {
    let rec = c.rec.as_mut().unwrap();
    restart_reconciler(&c.cp, rec, c.name, &c.token, &FLAGS);
    ready(rec).await;
}

/// Injects `fault` on the pair (`x`, `y`), updating `wanted`, and restores what a Deployment
/// or an operator would. Returns what it did.
async fn inject(cs: &mut [Cluster], wanted: &mut Wanted, fault: Fault, x: usize, y: usize, rng: &mut Rng) -> String {
    let (xn, yn) = (cs[x].name, cs[y].name);
    match fault {
        Fault::KillReconciler => {
            restart(&mut cs[x]).await;
            format!("killed and restarted {xn}'s reconciler")
        }
        Fault::StopApiServer => {
            cs[x].cp.stop_apiserver();
            let down = Duration::from_millis(500 + rng.below(4000) as u64);
            tokio::time::sleep(down).await;
            cs[x].cp.restart_apiserver().await;
            format!("stopped {xn}'s API server for {:.1} s", down.as_secs_f64())
        }
        Fault::PauseReconciler => {
            signal(cs[x].rec(), "STOP");
            let paused = Duration::from_millis(500 + rng.below(4000) as u64);
            tokio::time::sleep(paused).await;
            signal(cs[x].rec(), "CONT");
            format!("paused {xn}'s reconciler for {:.1} s", paused.as_secs_f64())
        }
        Fault::FlipJoin => {
            wanted[x][y] = !wanted[x][y];
            let patch = json!({"spec": {"join": wanted[x][y]}});
            let name = fc_name(&cs[y]);
            Api::<ForeignCluster>::all(cs[x].admin.clone()).patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
            format!("{xn}→{yn}: join {}", wanted[x][y])
        }
        Fault::DeletePeeringRequest => {
            let _ = Api::<PeeringRequest>::all(cs[y].admin.clone()).delete(&cs[x].id, &DeleteParams::default()).await;
            format!("{yn}'s admin deleted {xn}'s PeeringRequest")
        }
        Fault::DeleteAdvertisement => {
            let name = format!("advertisement-{}", cs[y].id);
            let _ = Api::<Advertisement>::all(cs[x].admin.clone()).delete(&name, &DeleteParams::default()).await;
            format!("{xn}'s admin deleted {yn}'s Advertisement")
        }
        Fault::DeleteKubeconfigSecret => {
            let name = format!("pr-kubeconfig-{}", cs[x].id);
            let _ = Api::<Secret>::namespaced(cs[y].admin.clone(), "liqo").delete(&name, &DeleteParams::default()).await;
            format!("{yn}'s admin deleted {xn}'s kubeconfig Secret")
        }
        Fault::RecreateForeignCluster => {
            let fcs = Api::<ForeignCluster>::all(cs[x].admin.clone());
            let name = fc_name(&cs[y]);
            let _ = fcs.delete(&name, &DeleteParams::default()).await;
            let deadline = Instant::now() + Duration::from_secs(60);
            while fcs.get_opt(&name).await.ok().flatten().is_some() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            peer_by_auth_url(&cs[x].admin, &name, cs[y].rec()).await;
            wanted[x][y] = true;
            format!("{xn} deleted and re-created its ForeignCluster for {yn}")
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the chaos soak: just chaos SECONDS SEED"]
async fn chaos_soak() {
    let seconds: u64 = std::env::var("CHAOS_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(180);
    let seed: u64 = std::env::var("CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    // The deadline for convergence after the last fault is restored: two health periods, plus
    // the time a restarted API server or reconciler takes to serve (measured, not assumed: a
    // run reports the longest it saw).
    let periods: u64 = std::env::var("CHAOS_PERIODS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let deadline = Duration::from_secs(periods * HEALTH);
    println!("chaos: seed {seed}, {seconds} s, health period {HEALTH} s, deadline {periods} periods");
    let Some(mut cs) = start().await else { return };
    let mut rng = Rng(seed);
    let mut wanted: Wanted = [[true; 3]; 3];
    for (x, y) in [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)] {
        peer_by_auth_url(&cs[x].admin.clone(), &fc_name(&cs[y]), cs[y].rec()).await;
    }
    converge(&cs, &wanted, Duration::from_secs(120)).await.unwrap_or_else(|v| panic!("the initial peering: {v}"));
    let lines_at_start: usize = cs.iter().map(|c| info_lines(c.rec())).sum();

    let started = Instant::now();
    let mut counts = std::collections::BTreeMap::<Fault, u32>::new();
    let (mut faults, mut checks, mut violations, mut slowest) = (0u32, 0u32, Vec::<String>::new(), Duration::ZERO);
    while started.elapsed() < Duration::from_secs(seconds) {
        let fault = MENU[rng.below(MENU.len())];
        let x = rng.below(3);
        let y = (x + 1 + rng.below(2)) % 3;
        let did = inject(&mut cs, &mut wanted, fault, x, y, &mut rng).await;
        faults += 1;
        *counts.entry(fault).or_default() += 1;
        checks += 1;
        let outcome = converge(&cs, &wanted, deadline).await;
        let mut health: Vec<String> = cs.iter_mut().filter_map(health_of).collect();
        match outcome {
            Ok(took) => {
                slowest = slowest.max(took);
                println!("#{faults} {did}: converged in {:.1} s", took.as_secs_f64());
            }
            Err(v) => {
                // Late or never: look longer, to tell a slow repair from a stuck one.
                let late = converge(&cs, &wanted, Duration::from_secs(60)).await;
                let verdict = match late {
                    Ok(t) => format!("converged {:.1} s late", t.as_secs_f64()),
                    Err(v2) => format!("still not after 60 s: {v2}"),
                };
                println!("#{faults} {did}: VIOLATION after {} periods: {v}; {verdict}", periods);
                for c in &cs {
                    println!("--- {}'s reconciler, last lines:\n{}", c.name, log_tail(c.rec()));
                }
                violations.push(format!("seed {seed} fault #{faults} ({did}): {v}; {verdict}"));
            }
        }
        for h in health.drain(..) {
            println!("#{faults} VIOLATION: {h}");
            violations.push(format!("seed {seed} fault #{faults}: {h}"));
        }
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let lines: usize = cs.iter().map(|c| info_lines(c.rec())).sum();
    let per_minute = (lines - lines_at_start) as f64 / minutes / 3.0;
    let by_kind: Vec<String> = counts.iter().map(|(f, n)| format!("{f:?} {n}")).collect();
    println!(
        "chaos: seed {seed}: {faults} faults in {:.1} min ({}), {checks} invariant checks, slowest convergence {:.1} s, {per_minute:.0} INFO+ log lines/min per reconciler, violations: {}",
        minutes,
        by_kind.join(", "),
        slowest.as_secs_f64(),
        violations.len()
    );
    assert!(violations.is_empty(), "{} violations:\n{}", violations.len(), violations.join("\n"));
}
