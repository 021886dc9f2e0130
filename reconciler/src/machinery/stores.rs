//! Watch-fed stores the controllers read instead of calling the API server.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedSender;

use crate::machinery::index::Index;

/// A store kept by a watch of `api` (restarted with backoff on errors) for as long as the
/// process runs.
pub fn reflect<K>(api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    Reflected::start(api, config, |_| {}).store
}

/// [`reflect`], keeping no managed fields (for stores nobody asks who set a field): a
/// Secret's or an Advertisement's managed fields are often as large as the rest of it, and
/// a hub keeps thousands of them.
pub fn reflect_lean<K>(api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    Reflected::start(api, config, |o: &mut K| o.meta_mut().managed_fields = None).store
}

/// A watch-fed store whose changes a controller can follow ([`Reflected::follow`]): one copy
/// of each object for the controller and everyone else (a controller's own store held each
/// ForeignCluster a second time).
pub struct Reflected<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    pub store: Store<K>,
    followers: Followers<K>,
}

impl<K: Resource + 'static> Clone for Reflected<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self { store: self.store.clone(), followers: self.followers.clone() }
    }
}

type Followers<K> = Arc<Mutex<Vec<UnboundedSender<Change<K>>>>>;

/// One change a follower is told of: the object, and the resourceVersion the watch showed it
/// at (so that the echo of a write of our own can be told from someone else's change).
pub struct Change<K: Resource>
where
    K::DynamicType: Eq + Hash + Clone,
{
    pub object: ObjectRef<K>,
    pub version: Option<String>,
}

impl<K: Resource> Clone for Change<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self { object: self.object.clone(), version: self.version.clone() }
    }
}

impl<K: Resource> Change<K>
where
    K::DynamicType: Eq + Hash + Clone + Default,
{
    fn of(o: &K) -> Self {
        Self { object: ObjectRef::from_obj(o), version: o.meta().resource_version.clone() }
    }
}

impl<K> Reflected<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    /// Starts the watch; `trim` takes from each object what the store need not keep.
    pub fn start(api: Api<K>, config: watcher::Config, trim: fn(&mut K)) -> Self {
        Self::start_indexed(api, config, trim, None)
    }

    /// [`Reflected::start`], `index` following the same events once the store applied each.
    pub fn start_indexed(api: Api<K>, config: watcher::Config, trim: fn(&mut K), index: Option<Index<K>>) -> Self {
        let (store, writer) = reflector::store();
        let followers: Followers<K> = Arc::default();
        let told = followers.clone();
        let watch = watcher(api, config).backoff(liqo_api::watch_backoff::WatchBackoff::default()).modify(trim);
        let stream = reflector::reflector(writer, watch)
            .inspect(move |event| {
                if let (Some(index), Ok(event)) = (&index, event) {
                    index.apply(event);
                }
            })
            .applied_objects();
        tokio::spawn(stream.for_each(move |o| {
            if let Ok(o) = o {
                let changed = Change::of(&o);
                told.lock().expect("not poisoned").retain(|f| f.send(changed.clone()).is_ok());
            }
            async {}
        }));
        Self { store, followers }
    }

    /// Every object in the store now, then each object the watch changes, once it is in the
    /// store (a controller's trigger: `Controller::reconcile_on`).
    pub fn follow(&self) -> impl futures::Stream<Item = Change<K>> + Send + 'static {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // Followed first, then listed: an object changed in between comes twice, never not at all.
        self.followers.lock().expect("not poisoned").push(tx);
        let now: Vec<Change<K>> = self.store.state().iter().map(|o| Change::of(&**o)).collect();
        futures::stream::iter(now).chain(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
    }
}

/// `stream` restarted on its own backoff (`WatchBackoff`), its errors logged (debug, with
/// `what`) and dropped. For the streams of a controller that watches several kinds: kube's
/// controller backs off its merged trigger stream on any one error, so two watches failing in
/// turn after an outage kept every trigger of it deaf for many seconds (the chaos soak saw 12 s).
pub fn retried_alone<T, S>(stream: S, what: &'static str) -> impl futures::Stream<Item = Result<T, watcher::Error>> + Send
where
    S: futures::Stream<Item = Result<T, watcher::Error>> + Send,
    T: Send,
{
    kube::runtime::utils::StreamBackoff::new(stream, liqo_api::watch_backoff::WatchBackoff::default()).filter(move |item| {
        if let Err(e) = item {
            tracing::debug!(error = %e, watch = what, "watch failed; retrying");
        }
        std::future::ready(item.is_ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A watch's errors never reach the controller fed by it (they would pause all of its
    /// triggers); the watch itself waits its own backoff before going on.
    #[tokio::test(start_paused = true)]
    async fn errors_are_retried_here_and_never_passed_on() {
        let items = vec![Err(watcher::Error::NoResourceVersion), Ok(1u32), Err(watcher::Error::NoResourceVersion), Ok(2)];
        let started = tokio::time::Instant::now();
        let passed: Vec<Result<u32, watcher::Error>> = retried_alone(futures::stream::iter(items), "test").collect().await;
        assert_eq!(passed.iter().map(|r| *r.as_ref().unwrap()).collect::<Vec<_>>(), [1, 2]);
        // Two errors: 200 ms, then 400 (the success between came at once, not WATCH_STEADY of
        // answers: no start over).
        assert_eq!(started.elapsed(), Duration::from_millis(600));
    }
}
