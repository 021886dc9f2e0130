//! Slim stores (`liqo_api::slim_store`: a name and the little read of each object), and the
//! watch that keeps one.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

pub use liqo_api::slim_store::*;

/// A slim store kept by a watch of `api` (restarted with backoff on errors) for as long as the
/// process runs.
pub fn reflect_slim<K, V>(api: Api<K>, config: watcher::Config, slim: fn(&K) -> V) -> SlimStore<V>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    follow(api, config, slim, None)
}

/// As [`reflect_slim`], and each object the watch touches (applied, deleted or listed) told by
/// the key `touch` gives it in the returned [`Touched`]: one watch for the store and for
/// whoever acts on each change (the controller's Advertisement trigger).
pub fn reflect_slim_touching<K, V>(
    api: Api<K>,
    config: watcher::Config,
    slim: fn(&K) -> V,
    touch: fn(&K) -> String,
) -> (SlimStore<V>, Touched)
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    let touched = Touched::default();
    (follow(api, config, slim, Some(Teller::new(touched.clone(), touch))), touched)
}

fn follow<K, V>(api: Api<K>, config: watcher::Config, slim: fn(&K) -> V, mut teller: Option<Teller<K>>) -> SlimStore<V>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    // A watch of every namespace keeps `namespace/name` (just `name` for a cluster-scoped kind).
    let (store, mut writer) = match api.namespace() {
        None => slim_store_by_namespace(slim),
        Some(_) => slim_store(slim),
    };
    let events = watcher(api, config).backoff(liqo_api::watch_backoff::WatchBackoff::default());
    tokio::spawn(events.for_each(move |event| {
        if let Ok(event) = event {
            writer.apply_watcher_event(&event);
            if let Some(teller) = teller.as_mut() {
                teller.on(&event);
            }
        }
        std::future::ready(())
    }));
    store
}

/// Tells a [`Touched`] the key of each object a watch touched once the store shows it: at once
/// for a change, at the end of a (re)list for what it listed (the store swaps a relist in
/// whole, so a key told earlier would be acted on against the store before it).
struct Teller<K> {
    touched: Touched,
    key: fn(&K) -> String,
    listed: Vec<String>,
}

impl<K> Teller<K> {
    fn new(touched: Touched, key: fn(&K) -> String) -> Self {
        Self { touched, key, listed: Vec::new() }
    }

    fn on(&mut self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => self.touched.add((self.key)(o)),
            watcher::Event::Init => self.listed.clear(),
            watcher::Event::InitApply(o) => self.listed.push((self.key)(o)),
            watcher::Event::InitDone => self.listed.drain(..).for_each(|k| self.touched.add(k)),
        }
    }
}

/// Keys of touched objects waiting to be taken, first touched first taken, each at most once
/// however often it was touched meanwhile: bounded by the number of objects watched, even
/// while no one takes them (a standby replica). Cheap to clone (shared); one taker.
#[derive(Clone, Default)]
pub struct Touched {
    waiting: Arc<Mutex<Waiting>>,
    notify: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct Waiting {
    order: VecDeque<String>,
    keys: HashSet<String>,
}

impl Touched {
    pub fn add(&self, key: String) {
        let mut w = self.waiting.lock().expect("not poisoned");
        if w.keys.insert(key.clone()) {
            w.order.push_back(key);
        }
        drop(w);
        self.notify.notify_one();
    }

    fn take(&self) -> Option<String> {
        let mut w = self.waiting.lock().expect("not poisoned");
        let key = w.order.pop_front()?;
        w.keys.remove(&key);
        Some(key)
    }

    /// The keys as they are touched, for ever.
    pub fn stream(self) -> impl futures::Stream<Item = String> + Send {
        futures::stream::unfold(self, |touched| async move {
            loop {
                if let Some(key) = touched.take() {
                    return Some((key, touched));
                }
                touched.notify.notified().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm
    }

    /// What a relist gathers is told only when it ends, when the store has swapped it in; a
    /// change is told at once.
    #[test]
    fn a_relist_is_told_at_its_end_and_a_change_at_once() {
        let touched = Touched::default();
        let mut teller =
            Teller::new(touched.clone(), |cm: &k8s_openapi::api::core::v1::ConfigMap| cm.metadata.name.clone().unwrap_or_default());
        teller.on(&watcher::Event::Apply(config_map("changed")));
        assert_eq!(touched.take().as_deref(), Some("changed"));
        teller.on(&watcher::Event::Init);
        teller.on(&watcher::Event::InitApply(config_map("a")));
        teller.on(&watcher::Event::InitApply(config_map("b")));
        assert_eq!(touched.take(), None, "nothing before the relist ends");
        teller.on(&watcher::Event::InitDone);
        assert_eq!((touched.take().as_deref(), touched.take().as_deref(), touched.take()), (Some("a"), Some("b"), None));
    }

    #[tokio::test]
    async fn keys_are_taken_in_the_order_first_touched_each_once_while_waiting() {
        let touched = Touched::default();
        for key in ["a", "b", "a", "c", "b"] {
            touched.add(key.into());
        }
        let mut keys = Box::pin(touched.clone().stream());
        let first: Vec<String> = (&mut keys).take(3).collect().await;
        assert_eq!(first, ["a", "b", "c"]);
        // Taken, a key waits again when touched again; the taker wakes for it.
        let later = tokio::spawn(async move { keys.next().await });
        tokio::task::yield_now().await;
        touched.add("a".into());
        assert_eq!(tokio::time::timeout(std::time::Duration::from_secs(5), later).await.unwrap().unwrap().as_deref(), Some("a"));
    }
}
