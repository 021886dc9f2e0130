//! One object followed by a watch (a field selector on its name) instead of polled: its latest
//! state, known once the first list is in.

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde::de::DeserializeOwned;

pub struct Followed<K> {
    events: BoxStream<'static, watcher::Result<Event<K>>>,
    /// The object as last seen (`None`: it does not exist).
    pub current: Option<K>,
    /// The first list is in: `current` is the truth, not a guess.
    pub known: bool,
    /// The last failure of the watch (it restarts with a backoff).
    pub error: Option<String>,
    listed: Option<K>,
}

impl<K> Followed<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    pub fn new(api: Api<K>, name: &str) -> Self {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        Self { events: watcher(api, config).default_backoff().boxed(), current: None, known: false, error: None, listed: None }
    }

    /// Waits for the next change and applies it; false when the watch has ended.
    pub async fn changed(&mut self) -> bool {
        match self.events.next().await {
            None => false,
            Some(event) => {
                self.apply(event);
                true
            }
        }
    }

    fn apply(&mut self, event: watcher::Result<Event<K>>) {
        match event {
            // A (re)list: what it brings replaces what we had, once it is complete.
            Ok(Event::Init) => self.listed = None,
            Ok(Event::InitApply(o)) => self.listed = Some(o),
            Ok(Event::InitDone) => {
                self.current = self.listed.take();
                self.known = true;
            }
            Ok(Event::Apply(o)) => self.current = Some(o),
            Ok(Event::Delete(_)) => self.current = None,
            Err(e) => self.error = Some(e.to_string()),
        }
    }
}
