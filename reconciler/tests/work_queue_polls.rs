//! Why the ForeignClusters run on our own work queue: when many fall due together (a fleet
//! coming back, every identity made due, all joining), each waits its turn inside its
//! reconcile, and kube's controller runner polls every reconcile in flight at each of its
//! wake-ups. At 10,000 peers that was most of the reconciler's CPU, and a whole fleet's return
//! was not healed within 2 health periods (BENCHMARKS.md, "The work queue").
//!
//! The mechanism, at 200 objects: all due at once, each waiting for one shared turn. Counted
//! is what the profile showed costly, not time: how often a reconcile's span ("reconciling
//! object", kube's and ours alike) is entered, once per poll of the reconcile. On the work
//! queue each is polled a few times (started, given its turn, done); under kube's runner every
//! waiting reconcile is polled again at each wake-up of the runner, the square of the objects
//! waiting.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::controller::{Action as KubeAction, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use liqo_reconciler::machinery::work_queue::{self, Action};

const OBJECTS: usize = 200;

/// A store of `OBJECTS` Namespaces, synced (its writer kept alive by the caller).
fn store() -> (Store<Namespace>, reflector::store::Writer<Namespace>) {
    let (store, mut writer) = reflector::store::<Namespace>();
    writer.apply_watcher_event(&watcher::Event::Init);
    for i in 0..OBJECTS {
        let ns =
            Namespace { metadata: kube::api::ObjectMeta { name: Some(format!("ns-{i}")), ..Default::default() }, ..Default::default() };
        writer.apply_watcher_event(&watcher::Event::InitApply(ns));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    (store, writer)
}

/// Counts the entries into spans named [`RECONCILE_SPAN`], whichever thread enters them.
#[derive(Default)]
struct SpanEntries {
    next: AtomicU64,
    reconciles: Mutex<HashSet<u64>>,
    entered: AtomicUsize,
}

const RECONCILE_SPAN: &str = "reconciling object";

impl tracing::Subscriber for SpanEntries {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        if span.metadata().name() == RECONCILE_SPAN {
            self.reconciles.lock().unwrap().insert(id);
        }
        tracing::span::Id::from_u64(id)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, span: &tracing::span::Id) {
        if self.reconciles.lock().unwrap().contains(&span.into_u64()) {
            self.entered.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The entries into reconcile spans so far, in the whole process.
fn entered() -> usize {
    ENTRIES.get().map_or(0, |e| e.entered.load(Ordering::Relaxed))
}

static ENTRIES: std::sync::OnceLock<Arc<SpanEntries>> = std::sync::OnceLock::new();

/// What each reconcile does: waits for the one turn, holds it a millisecond (as a check of a
/// peer holds it for its calls: the reconciles end one by one, each waking the runner), and
/// says it is done.
async fn reconcile_in_turn(turns: Arc<tokio::sync::Semaphore>, done: Arc<AtomicUsize>) {
    let _turn = turns.acquire_owned().await.expect("never closed");
    tokio::time::sleep(Duration::from_millis(1)).await;
    done.fetch_add(1, Ordering::Relaxed);
}

async fn until_all(done: &AtomicUsize) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while done.load(Ordering::Relaxed) < OBJECTS {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every object reconciled within 60 s");
}

/// Entries into reconcile spans on our work queue for `OBJECTS` due at once.
async fn polls_of_the_work_queue() -> usize {
    let (store, _writer) = store();
    let (turns, done) = (Arc::new(tokio::sync::Semaphore::new(1)), Arc::new(AtomicUsize::new(0)));
    let triggers = futures::stream::iter((0..OBJECTS).map(|i| format!("ns-{i}"))).chain(futures::stream::pending());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (t, d) = (turns.clone(), done.clone());
    let reconcile = move |_: Arc<Namespace>| {
        let in_turn = reconcile_in_turn(t.clone(), d.clone());
        async move {
            in_turn.await;
            Action::await_change()
        }
    };
    let before = entered();
    let running = tokio::spawn(work_queue::run("polls", store, triggers, reconcile, async move {
        let _ = stopped.await;
    }));
    until_all(&done).await;
    let _ = stop.send(());
    running.await.expect("the queue ran");
    entered() - before
}

/// The same under kube's controller, unbounded (as the ForeignClusters ran before).
async fn polls_of_kubes_runner() -> usize {
    let (store, _writer) = store();
    let (turns, done) = (Arc::new(tokio::sync::Semaphore::new(1)), Arc::new(AtomicUsize::new(0)));
    let triggers =
        futures::stream::iter((0..OBJECTS).map(|i| ObjectRef::<Namespace>::new(&format!("ns-{i}")))).chain(futures::stream::pending());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let context = Arc::new((turns, done.clone()));
    let before = entered();
    let running = tokio::spawn(
        Controller::for_stream(futures::stream::pending(), store)
            .reconcile_on(triggers)
            .graceful_shutdown_on(async move {
                let _ = stopped.await;
            })
            .run(
                |_: Arc<Namespace>, ctx: Arc<(Arc<tokio::sync::Semaphore>, Arc<AtomicUsize>)>| {
                    let in_turn = reconcile_in_turn(ctx.0.clone(), ctx.1.clone());
                    async move {
                        in_turn.await;
                        Ok::<_, std::convert::Infallible>(KubeAction::await_change())
                    }
                },
                |_, _, _| KubeAction::await_change(),
                context,
            )
            .for_each(|_| async {}),
    );
    until_all(&done).await;
    let _ = stop.send(());
    running.await.expect("the controller ran");
    entered() - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_waiting_their_turn_cost_a_few_polls_each_not_a_poll_per_wake_up_of_any_of_them() {
    let entries = Arc::new(SpanEntries::default());
    tracing::subscriber::set_global_default(entries.clone()).expect("the only subscriber of this test binary");
    ENTRIES.set(entries).ok();
    let ours = polls_of_the_work_queue().await;
    let kubes = polls_of_kubes_runner().await;
    eprintln!("{OBJECTS} objects due at once, one turn: {ours} reconcile polls on the work queue, {kubes} under kube's controller runner");
    assert!(ours >= OBJECTS, "every reconcile's span entered at least once: {ours}");
    assert!(ours <= 6 * OBJECTS, "the work queue polled its reconciles {ours} times for {OBJECTS}: more than a few each");
    // The mechanism itself: should kube's runner stop polling every reconcile at each wake-up,
    // this fails, and the work queue may no longer be needed (docs/scaling.md, "Where one replica stops", its point "The work queue").
    assert!(kubes > 5 * ours, "kube's runner polled {kubes} times where the work queue polled {ours}");
}
