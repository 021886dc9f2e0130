//! A controller's work queue: which objects to reconcile and when, each at most once at a time.
//!
//! kube's `Controller` keeps every reconcile in flight in one map that it polls whole at each
//! wake-up, each poll entering the reconcile's tracing span. A controller that lets every
//! ForeignCluster wait its turn inside its reconcile (see `foreign_cluster::run`) had 10,000
//! of them in flight at a hub of 10,000 peers, and each of the 333 reconciles started or
//! finished a second polled all 10,000: the reconciler's CPU grew with the square of its peers
//! (measured in BENCHMARKS.md, "The work queue"). Here each reconcile is a task of its own,
//! which tokio polls only when it can go on, and the queue keeps names and times.
//!
//! The rules are kube's: a trigger reconciles the object now (sooner than a requeue it had),
//! a trigger that arrives while the object is being reconciled runs it once more right after,
//! the [`Action`] a reconcile returns says when to come back unasked, an object no longer in the
//! store is not reconciled, nothing starts before the store is synced, and a shutdown lets
//! every running reconcile finish.
//!
//! With a bound ([`Bound`]), at most so many reconciles run at once; the others that are due
//! wait in the queue as names, first due first started, not as tasks (each a future and a
//! tracing span: at a hub of 10,000 peers coming back at once, about 2 KiB each held for as
//! long as the backlog lasted).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::time::Instant;
use tracing::Instrument;

/// When to reconcile an object again unasked: what a reconcile returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Again after `duration`, unless something asks sooner.
    pub const fn requeue(duration: Duration) -> Self {
        Self { requeue_after: Some(duration) }
    }

    /// Only when something asks (a change, a wake).
    pub const fn await_change() -> Self {
        Self { requeue_after: None }
    }

    pub const fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// Where each object named in the queue stands (pure: the clock is given).
#[derive(Debug, Default)]
pub struct Queue {
    entries: HashMap<String, Entry>,
    due: BTreeSet<(Instant, String)>,
    /// Due, waiting for a reconcile to finish (under a [`Bound`]), first due first; a name
    /// whose entry is no longer [`Entry::Ready`] is skipped.
    ready: VecDeque<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// To be reconciled at this time (in `due`).
    At(Instant),
    /// Due, waiting for a slot (in `ready`).
    Ready,
    /// Being reconciled; `again`: asked for meanwhile, so reconciled once more right after.
    Running { again: bool },
}

impl Queue {
    /// `name` is asked for now: whether to start it (`false`: it is running, and will run
    /// again when done).
    pub fn trigger(&mut self, name: &str) -> bool {
        match self.entries.get_mut(name) {
            Some(Entry::Running { again }) => {
                *again = true;
                false
            }
            Some(Entry::At(at)) => {
                let at = *at;
                self.due.remove(&(at, name.to_owned()));
                true
            }
            Some(Entry::Ready) => false,
            None => true,
        }
    }

    /// `name` is due but no slot is free: it waits, after those already waiting.
    pub fn defer(&mut self, name: &str) {
        if let Some(Entry::At(at)) = self.entries.insert(name.to_owned(), Entry::Ready) {
            self.due.remove(&(at, name.to_owned()));
        }
        self.ready.push_back(name.to_owned());
    }

    /// The first object waiting for a slot, taken out (start it).
    pub fn pop_ready(&mut self) -> Option<String> {
        while let Some(name) = self.ready.pop_front() {
            if self.entries.get(&name) == Some(&Entry::Ready) {
                self.entries.remove(&name);
                return Some(name);
            }
        }
        None
    }

    /// Objects waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.entries.values().filter(|e| **e == Entry::Ready).count()
    }

    /// `name` starts now.
    pub fn start(&mut self, name: &str) {
        if let Some(Entry::At(at)) = self.entries.insert(name.to_owned(), Entry::Running { again: false }) {
            self.due.remove(&(at, name.to_owned()));
        }
    }

    /// `name` finished at `now`, asking to come back after `requeue`: whether to start it again
    /// at once (it was asked for while running).
    pub fn finish(&mut self, name: &str, requeue: Option<Duration>, now: Instant) -> bool {
        if let Some(Entry::Running { again: true }) = self.entries.remove(name) {
            return true;
        }
        if let Some(after) = requeue {
            let at = now + after;
            self.entries.insert(name.to_owned(), Entry::At(at));
            self.due.insert((at, name.to_owned()));
        }
        false
    }

    /// `name` is not reconciled (no longer in the store): nothing of it is kept. Whether it was
    /// waiting for a slot.
    pub fn forget(&mut self, name: &str) -> bool {
        match self.entries.remove(name) {
            Some(Entry::At(at)) => {
                self.due.remove(&(at, name.to_owned()));
                false
            }
            Some(Entry::Ready) => true,
            Some(running @ Entry::Running { .. }) => {
                self.entries.insert(name.to_owned(), running);
                false
            }
            None => false,
        }
    }

    /// The earliest time an object is due, if any.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// The objects due at `now`, earliest first, taken out of the queue (start each).
    pub fn take_due(&mut self, now: Instant) -> Vec<String> {
        let mut taken = Vec::new();
        while let Some((at, _)) = self.due.first()
            && *at <= now
        {
            let (_, name) = self.due.pop_first().expect("just seen");
            self.entries.remove(&name);
            taken.push(name);
        }
        taken
    }

    /// Objects running or waiting for their time.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The window around a requeue in which each object keeps its place ([`jittered`]): a
/// tenth of the time asked for, centred on it.
pub const JITTER: f64 = 0.1;

/// `after`, moved within [`JITTER`] of itself by `name`'s place (pure, the same each time):
/// objects that finished together (a whole fleet back at once) come back spread over a tenth
/// of the period, the next round over two tenths, and so on, instead of in one burst every
/// period; on average, exactly `after`.
pub fn jittered(after: Duration, name: &str) -> Duration {
    after.mul_f64(1.0 - JITTER / 2.0 + JITTER * spread_of(name))
}

/// A key's place (0..1) in a window, from the key alone (pure, the same each time): keys spread
/// evenly, each keeping its place. The queue's requeues and the broadcasters' retries use it.
pub fn spread_of(key: &str) -> f64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() % 10_000) as f64 / 10_000.0
}

/// How early an object may start before its time, so that those due close together start on
/// one wake-up of the queue: at 1,000 peers checked every 30 s, a check falls due every 30 ms,
/// and each had a wake-up of its own (a timer, a worker thread unparked, its tasks polled); a
/// quarter of a second gathers about eight (at 10,000, about eighty). A check that comes a
/// quarter of a second early in a 30 s period changes nothing a user sees.
pub const GATHER: Duration = Duration::from_millis(250);

/// How long a reconcile that panicked waits before it is tried again (the panic is logged).
pub const AFTER_PANIC: Duration = Duration::from_secs(30);

/// Reconciles the (cluster-scoped) objects of `store` that `triggers` names (and again as each reconcile's
/// [`Action`] says, [`jittered`]) until `shutdown`, then waits for the running reconciles. `what` names the
/// controller in the reconcile's span, as `object.ref` names the object.
pub async fn run<K, F, Fut>(
    what: &'static str,
    store: Store<K>,
    triggers: impl Stream<Item = String> + Send,
    reconcile: F,
    shutdown: impl Future<Output = ()> + Send,
) where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    F: Fn(Arc<K>) -> Fut,
    Fut: Future<Output = Action> + Send + 'static,
{
    run_bounded(what, store, triggers, reconcile, Bound::default(), shutdown).await
}

/// How many reconciles [`run_bounded`] runs at once (`max: None`: no bound), and the gauge
/// that counts those due and waiting for one to finish.
#[derive(Clone, Debug, Default)]
pub struct Bound {
    pub max: Option<usize>,
    pub waiting: Option<prometheus_client::metrics::gauge::Gauge>,
}

/// [`run`], at most `bound.max` reconciles at once: the others due wait in the queue, first due
/// first started.
pub async fn run_bounded<K, F, Fut>(
    what: &'static str,
    store: Store<K>,
    triggers: impl Stream<Item = String> + Send,
    reconcile: F,
    bound: Bound,
    shutdown: impl Future<Output = ()> + Send,
) where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    F: Fn(Arc<K>) -> Fut,
    Fut: Future<Output = Action> + Send + 'static,
{
    let mut shutdown = std::pin::pin!(shutdown.fuse());
    tokio::select! {
        ready = store.wait_until_ready() => if ready.is_err() { return },
        () = &mut shutdown => return,
    }
    let mut triggers = std::pin::pin!(triggers.fuse());
    let (done, mut finished) = tokio::sync::mpsc::unbounded_channel::<(String, Option<Duration>)>();
    let mut queue = Queue::default();
    let mut running = 0usize;
    let mut stopping = false;
    let max = bound.max.unwrap_or(usize::MAX).max(1);
    let waits = |n: i64| {
        if let Some(g) = &bound.waiting {
            g.inc_by(n);
        }
    };
    let start = |name: String, queue: &mut Queue, running: &mut usize| {
        let Some(object) = store.get(&ObjectRef::new(&name)) else {
            if queue.forget(&name) {
                waits(-1);
            }
            return;
        };
        if *running >= max {
            queue.defer(&name);
            waits(1);
            return;
        }
        queue.start(&name);
        *running += 1;
        let span = tracing::info_span!("reconciling object", controller = what, object.ref = %name);
        let reconciled = std::panic::AssertUnwindSafe(reconcile(object)).catch_unwind().instrument(span);
        let done = done.clone();
        tokio::spawn(async move {
            let requeue = match reconciled.await {
                Ok(action) => action.requeue_after(),
                Err(_) => {
                    tracing::error!(controller = what, object = %name, "reconcile panicked; trying again later");
                    Some(AFTER_PANIC)
                }
            };
            let _ = done.send((name, requeue));
        });
    };
    loop {
        let next = queue.next_due();
        let sleep = async move {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = &mut shutdown, if !stopping => stopping = true,
            Some((name, requeue)) = finished.recv() => {
                running -= 1;
                let requeue = requeue.map(|after| jittered(after, &name));
                if queue.finish(&name, requeue, Instant::now()) && !stopping {
                    start(name, &mut queue, &mut running);
                }
                while running < max && !stopping && let Some(next) = queue.pop_ready() {
                    waits(-1);
                    start(next, &mut queue, &mut running);
                }
            }
            Some(name) = triggers.next(), if !stopping => {
                if queue.trigger(&name) {
                    start(name, &mut queue, &mut running);
                }
            }
            () = sleep, if !stopping => {
                for name in queue.take_due(Instant::now() + GATHER) {
                    start(name, &mut queue, &mut running);
                }
            }
        }
        if stopping && running == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_trigger_while_running_runs_it_once_more_right_after_and_not_twice_at_once() {
        let (mut q, now) = (Queue::default(), Instant::now());
        assert!(q.trigger("a"), "new: start");
        q.start("a");
        assert!(!q.trigger("a"), "running: not a second one at once");
        assert!(!q.trigger("a"));
        assert!(q.finish("a", Some(secs(30)), now), "asked for meanwhile: once more at once");
        q.start("a");
        assert!(!q.finish("a", Some(secs(30)), now), "nothing asked this time");
        assert_eq!(q.next_due(), Some(now + secs(30)));
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn a_trigger_comes_before_a_requeue_and_takes_its_place() {
        let (mut q, now) = (Queue::default(), Instant::now());
        q.start("a");
        q.finish("a", Some(secs(30)), now);
        assert!(q.trigger("a"), "due later: started now instead");
        q.start("a");
        assert_eq!(q.next_due(), None, "the later time is gone");
        assert!(q.take_due(now + secs(60)).is_empty());
    }

    #[test]
    fn objects_waiting_for_a_slot_start_first_come_first_and_are_triggered_once() {
        let (mut q, now) = (Queue::default(), Instant::now());
        for name in ["b", "a", "c"] {
            q.start(name);
            q.finish(name, Some(secs(1)), now);
        }
        q.defer("b");
        q.defer("a");
        assert_eq!(q.waiting(), 2);
        assert!(!q.trigger("a"), "already waiting to run now");
        assert_eq!(q.next_due(), Some(now + secs(1)), "c still due at its time");
        assert!(q.forget("b"), "b was waiting");
        assert_eq!(q.pop_ready().as_deref(), Some("a"), "b forgotten, skipped");
        q.start("a");
        assert_eq!(q.pop_ready(), None);
        assert!(q.trigger("b"), "forgotten: new again");
        q.defer("b");
        q.defer("c");
        assert_eq!(q.waiting(), 2);
        assert_eq!((q.pop_ready().as_deref(), q.pop_ready().as_deref()), (Some("b"), Some("c")));
        assert_eq!(q.next_due(), None, "c's time is gone with its wait");
    }

    #[test]
    fn due_objects_come_out_earliest_first_and_only_when_due() {
        let (mut q, now) = (Queue::default(), Instant::now());
        for (name, after) in [("c", 3), ("a", 1), ("b", 2)] {
            q.start(name);
            q.finish(name, Some(secs(after)), now);
        }
        assert!(q.take_due(now).is_empty());
        assert_eq!(q.take_due(now + secs(2)), ["a", "b"]);
        assert_eq!(q.next_due(), Some(now + secs(3)));
        assert_eq!(q.take_due(now + secs(5)), ["c"]);
        assert!(q.is_empty(), "taken out: the caller starts them");
    }

    #[test]
    fn a_forgotten_object_leaves_nothing_behind() {
        let (mut q, now) = (Queue::default(), Instant::now());
        q.start("a");
        q.finish("a", Some(secs(1)), now);
        assert!(q.trigger("a"));
        q.forget("a");
        assert!(q.is_empty());
        assert!(q.take_due(now + secs(5)).is_empty());
    }

    #[test]
    fn a_requeue_is_moved_within_a_tenth_of_itself_each_object_keeping_its_place() {
        let period = secs(30);
        let times: Vec<Duration> = (0..1000).map(|i| jittered(period, &format!("fc-{i}"))).collect();
        assert!(times.iter().all(|t| *t >= secs(30).mul_f64(0.95) && *t <= secs(30).mul_f64(1.05)), "within 28.5 to 31.5 s");
        assert_eq!(jittered(period, "fc-7"), times[7], "the same place each time");
        let mean = times.iter().sum::<Duration>() / 1000;
        assert!(mean > Duration::from_millis(29_800) && mean < Duration::from_millis(30_200), "on average the period: {mean:?}");
        let early = times.iter().filter(|t| **t < period).count();
        assert!((400..600).contains(&early), "spread around it, not to one side: {early} of 1000 early");
    }

    #[test]
    fn awaiting_a_change_leaves_nothing_behind() {
        let (mut q, now) = (Queue::default(), Instant::now());
        q.start("a");
        assert!(!q.finish("a", None, now));
        assert!(q.is_empty());
        assert_eq!(q.next_due(), None);
    }

    use k8s_openapi::api::core::v1::Namespace;
    use kube::runtime::{reflector, watcher};
    use std::sync::Mutex;

    fn namespace(name: &str) -> Namespace {
        Namespace { metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() }
    }

    /// What the reconciles of a [`run`] saw: each start, in order, and how many at once at most.
    #[derive(Default)]
    struct Seen {
        starts: Mutex<Vec<String>>,
        now: Mutex<usize>,
        most: Mutex<usize>,
    }

    /// `run` over Namespaces `a` and `b`: `a` asks to come back after 10 s and takes 2 s, `b`
    /// awaits a change and takes 1 s; triggers from `rx`, shutdown when `stop` is told.
    async fn started(
        seen: Arc<Seen>,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<String>,
        stop: tokio::sync::oneshot::Receiver<()>,
    ) -> tokio::task::JoinHandle<()> {
        let (store, mut writer) = reflector::store::<Namespace>();
        writer.apply_watcher_event(&watcher::Event::Init);
        for name in ["a", "b"] {
            writer.apply_watcher_event(&watcher::Event::InitApply(namespace(name)));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let triggers = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let reconcile = move |ns: Arc<Namespace>| {
            let seen = seen.clone();
            async move {
                let name = ns.metadata.name.clone().unwrap_or_default();
                seen.starts.lock().unwrap().push(name.clone());
                let at_once = {
                    let mut now = seen.now.lock().unwrap();
                    *now += 1;
                    *now
                };
                {
                    let mut most = seen.most.lock().unwrap();
                    *most = (*most).max(at_once);
                }
                let (takes, action) = if name == "a" { (2, Action::requeue(secs(10))) } else { (1, Action::await_change()) };
                tokio::time::sleep(secs(takes)).await;
                *seen.now.lock().unwrap() -= 1;
                action
            }
        };
        tokio::spawn(async move {
            let _writer = writer;
            run("test", store, triggers, reconcile, async move {
                let _ = stop.await;
            })
            .await
        })
    }

    #[tokio::test(start_paused = true)]
    async fn objects_due_within_the_gathering_window_start_on_one_wake_up() {
        let (store, mut writer) = reflector::store::<Namespace>();
        writer.apply_watcher_event(&watcher::Event::Init);
        let names: Vec<String> = (0..40).map(|i| format!("ns-{i}")).collect();
        for name in &names {
            writer.apply_watcher_event(&watcher::Event::InitApply(namespace(name)));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let starts: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
        let seen = starts.clone();
        let reconcile = move |ns: Arc<Namespace>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((ns.metadata.name.clone().unwrap_or_default(), Instant::now()));
                Action::requeue(secs(30))
            }
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        for name in &names {
            tx.send(name.clone()).unwrap();
        }
        let triggers = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            let _writer = writer;
            run("test", store, triggers, reconcile, async move {
                let _ = stopped.await;
            })
            .await
        });
        tokio::time::sleep(secs(40)).await;
        stop.send(()).unwrap();
        handle.await.unwrap();
        let starts = starts.lock().unwrap().clone();
        let again: Vec<&(String, Instant)> = starts.iter().skip(names.len()).collect();
        assert_eq!(again.len(), names.len(), "each came back once, after 28.5 to 31.5 s");
        // Requeued 28.5 to 31.5 s after one start: 3 s of due times, each started at most
        // GATHER early, on wake-ups at least GATHER apart.
        let mut wake_ups: Vec<Instant> = again.iter().map(|(_, at)| *at).collect();
        wake_ups.dedup();
        assert!(wake_ups.len() <= 13, "40 objects due over 3 s started on {} wake-ups", wake_ups.len());
        assert!(wake_ups.windows(2).all(|w| w[1] - w[0] >= GATHER), "wake-ups a gathering window apart");
        let first = starts[0].1;
        for (name, at) in again {
            let due = first + jittered(secs(30), name);
            let (early, late) = (due.saturating_duration_since(*at), at.saturating_duration_since(due));
            // The timer wakes on the millisecond at or after the time asked.
            assert!(
                early <= GATHER && late <= Duration::from_millis(1),
                "{name} started at most GATHER before its time, never after: {early:?} early, {late:?} late"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn run_reconciles_each_object_once_at_a_time_comes_back_as_asked_and_drains_on_shutdown() {
        let seen = Arc::new(Seen::default());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let handle = started(seen.clone(), rx, stopped).await;
        let starts = |seen: &Seen| seen.starts.lock().unwrap().clone();
        for name in ["a", "a", "b", "gone", "a"] {
            tx.send(name.to_owned()).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(starts(&seen), ["a", "b"], "one a at a time; an object not in the store is not reconciled");
        tokio::time::sleep(secs(2)).await;
        assert_eq!(starts(&seen), ["a", "b", "a"], "a was asked for while running: once more right after");
        // The second a ends at 4 s and asks for 10 s more (jittered: 9.5 to 10.5): due at
        // 13.5 to 14.5 s, not before.
        tokio::time::sleep(secs(10)).await;
        assert_eq!(starts(&seen).len(), 3, "b awaits a change; a is not due yet");
        tokio::time::sleep(secs(2)).await;
        assert_eq!(starts(&seen), ["a", "b", "a", "a"], "a came back as its Action asked");
        // Shut down while a runs (from 13.5–14.5 s for 2 s): it finishes, and nothing more starts.
        tx.send("b".to_owned()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(()).unwrap();
        tokio::time::timeout(secs(5), handle).await.expect("drained within the running reconciles' time").unwrap();
        assert_eq!(*seen.now.lock().unwrap(), 0, "every running reconcile finished before run returned");
        assert_eq!(*seen.most.lock().unwrap(), 2, "a and b at once, never two of one");
        assert_eq!(starts(&seen), ["a", "b", "a", "a", "b"]);
    }
}
