//! The work queue under a bound: at most so many reconciles exist at once (each a task with its
//! future and span); the others that are due wait as names, first due first, and the gauge of
//! those waiting says how many. At a hub of 10,000 peers coming back together, the ForeignCluster
//! controller held a task per peer for as long as the backlog lasted.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use liqo_reconciler::machinery::work_queue::{self, Action, Bound};

const OBJECTS: usize = 100;
const MAX: usize = 4;

fn store() -> (Store<Namespace>, reflector::store::Writer<Namespace>) {
    let (store, mut writer) = reflector::store::<Namespace>();
    writer.apply_watcher_event(&watcher::Event::Init);
    for i in 0..OBJECTS {
        let ns =
            Namespace { metadata: kube::api::ObjectMeta { name: Some(format!("ns-{i:03}")), ..Default::default() }, ..Default::default() };
        writer.apply_watcher_event(&watcher::Event::InitApply(ns));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    (store, writer)
}

/// Counts the reconciles alive (made and not finished) and the most at once.
#[derive(Default)]
struct Alive {
    now: AtomicUsize,
    most: AtomicUsize,
    order: std::sync::Mutex<Vec<String>>,
}

impl Alive {
    fn born(&self, name: &str) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.order.lock().unwrap().push(name.to_owned());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_queue_holds_at_most_its_bound_in_reconciles_and_the_rest_as_names_first_due_first() {
    let (store, _writer) = store();
    let alive = Arc::new(Alive::default());
    let waiting = prometheus_client::metrics::gauge::Gauge::<i64, std::sync::atomic::AtomicI64>::default();
    let most_waiting = Arc::new(AtomicUsize::new(0));
    let triggers = futures::stream::iter((0..OBJECTS).map(|i| format!("ns-{i:03}"))).chain(futures::stream::pending());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (a, w, mw) = (alive.clone(), waiting.clone(), most_waiting.clone());
    let reconcile = move |ns: Arc<Namespace>| {
        let name = ns.metadata.name.clone().unwrap_or_default();
        a.born(&name);
        mw.fetch_max(usize::try_from(w.get()).unwrap_or(0), Ordering::SeqCst);
        let a = a.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            a.now.fetch_sub(1, Ordering::SeqCst);
            Action::await_change()
        }
    };
    let bound = Bound { max: Some(MAX), waiting: Some(waiting.clone()) };
    let running = tokio::spawn(work_queue::run_bounded("bounded", store, triggers, reconcile, bound, async move {
        let _ = stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(60), async {
        while alive.order.lock().unwrap().len() < OBJECTS || alive.now.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every object reconciled within 60 s");
    let _ = stop.send(());
    running.await.expect("the queue ran");

    let most = alive.most.load(Ordering::SeqCst);
    assert!(most <= MAX, "{most} reconciles alive at once under a bound of {MAX}");
    assert_eq!(waiting.get(), 0, "none waits at the end");
    assert!(most_waiting.load(Ordering::SeqCst) >= OBJECTS / 2, "the backlog was counted as waiting");
    let order = alive.order.lock().unwrap().clone();
    let expected: Vec<String> = (0..OBJECTS).map(|i| format!("ns-{i:03}")).collect();
    assert_eq!(order, expected, "each once, in the order they fell due");
}
