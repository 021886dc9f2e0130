//! Watch-fed maps from an object's name to the little of it a controller reads: a Secret's
//! data, whether an Advertisement exists. kube's `Store` keeps each object whole behind an
//! `Arc`, under a key holding its name, namespace, uid and resourceVersion: about 1.5 KiB a
//! Secret before its data, and a hub keeps two Secrets and an Advertisement per joined peer
//! (docs/scaling.md). A slim store keeps a name and a value.
//!
//! Keyed by name ([`slim_store`]: for objects of one namespace, or cluster-scoped ones), or by
//! `namespace/name` ([`slim_store_by_namespace`]: a watch of every namespace).
//!
//! Pure: a [`SlimWriter`] takes the events of a watch its owner runs (the reconciler's
//! `reflect_slim`, the dashboard's stores).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Secret;

use crate::secret_value::Value;
use kube::Resource;
use kube::runtime::watcher;
use tokio::sync::watch;

type Map<V> = HashMap<Box<str>, V>;

/// What a controller reads of a watched kind, by name. Cheap to clone (shared).
pub struct SlimStore<V> {
    map: Arc<RwLock<Map<V>>>,
    ready: watch::Receiver<bool>,
}

impl<V> Clone for SlimStore<V> {
    fn clone(&self) -> Self {
        Self { map: self.map.clone(), ready: self.ready.clone() }
    }
}

/// Fills a [`SlimStore`] from watch events, as kube's `Writer` fills a `Store`.
pub struct SlimWriter<K, V> {
    map: Arc<RwLock<Map<V>>>,
    slim: fn(&K) -> V,
    key: fn(&kube::api::ObjectMeta) -> Box<str>,
    /// What a relist gathered so far: swapped in whole when it ends, so readers never see a
    /// half-listed store.
    relisting: Option<Map<V>>,
    ready: watch::Sender<bool>,
}

/// An empty store and its writer; `slim` takes from each object what the store keeps.
pub fn slim_store<K, V>(slim: fn(&K) -> V) -> (SlimStore<V>, SlimWriter<K, V>) {
    keyed(slim, |m| m.name.as_deref().unwrap_or_default().into())
}

/// As [`slim_store`], keyed by `namespace/name` ([`namespaced_key`]; by name for an object of
/// no namespace).
pub fn slim_store_by_namespace<K, V>(slim: fn(&K) -> V) -> (SlimStore<V>, SlimWriter<K, V>) {
    keyed(slim, |m| {
        let name = m.name.as_deref().unwrap_or_default();
        match m.namespace.as_deref() {
            Some(ns) => namespaced_key(ns, name).into(),
            None => name.into(),
        }
    })
}

/// The key of object `name` of `namespace` in a store made by [`slim_store_by_namespace`].
pub fn namespaced_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn keyed<K, V>(slim: fn(&K) -> V, key: fn(&kube::api::ObjectMeta) -> Box<str>) -> (SlimStore<V>, SlimWriter<K, V>) {
    let map = Arc::new(RwLock::new(Map::new()));
    let (ready_tx, ready) = watch::channel(false);
    (SlimStore { map: map.clone(), ready }, SlimWriter { map, slim, key, relisting: None, ready: ready_tx })
}

impl<K: Resource, V> SlimWriter<K, V> {
    pub fn apply_watcher_event(&mut self, event: &watcher::Event<K>) {
        let key = self.key;
        let name = |o: &K| -> Box<str> { key(o.meta()) };
        match event {
            watcher::Event::Apply(o) => {
                let value = (self.slim)(o);
                self.map.write().expect("not poisoned").insert(name(o), value);
            }
            watcher::Event::Delete(o) => {
                self.map.write().expect("not poisoned").remove(&name(o));
            }
            watcher::Event::Init => self.relisting = Some(Map::new()),
            watcher::Event::InitApply(o) => {
                let value = (self.slim)(o);
                self.relisting.get_or_insert_with(Map::new).insert(name(o), value);
            }
            watcher::Event::InitDone => {
                let mut listed = self.relisting.take().unwrap_or_default();
                listed.shrink_to_fit();
                *self.map.write().expect("not poisoned") = listed;
                self.ready.send_replace(true);
            }
        }
    }
}

impl<V> SlimStore<V> {
    /// `read` of the value kept for `name`, if any.
    pub fn with<R>(&self, name: &str, read: impl FnOnce(&V) -> R) -> Option<R> {
        self.map.read().expect("not poisoned").get(name).map(read)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.read().expect("not poisoned").contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.map.read().expect("not poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What `pick` makes of the values it picks (in no particular order), read under one lock.
    pub fn collect<R>(&self, mut pick: impl FnMut(&V) -> Option<R>) -> Vec<R> {
        self.map.read().expect("not poisoned").values().filter_map(&mut pick).collect()
    }

    /// Waits for the first full list; false when the writer is gone before it.
    pub async fn wait_until_ready(&self) -> bool {
        self.ready.clone().wait_for(|listed| *listed).await.is_ok()
    }
}

/// What a store of Secrets keeps of each: its data, key by key, a certificate held once
/// however many Secrets carry it ([`crate::secret_value`]).
pub type SecretData = Box<[(Box<str>, Value)]>;

/// A Secret's data (for [`slim_store`]): no metadata, no `stringData` (the API server never
/// returns it).
pub fn secret_data(s: &Secret) -> SecretData {
    s.data.iter().flatten().map(|(k, v)| (k.as_str().into(), Value::of(&v.0))).collect()
}

/// Nothing of an object but that it exists (for [`slim_store`]).
pub fn exists<K>(_: &K) {}

impl SlimStore<SecretData> {
    /// The value under `key` in Secret `name`, if it is UTF-8.
    pub fn text(&self, name: &str, key: &str) -> Option<String> {
        self.with(name, |data| {
            let (_, value) = data.iter().find(|(k, _)| &**k == key)?;
            String::from_utf8(value.bytes()).ok()
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use kube::api::ObjectMeta;

    fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("liqo".into()), uid: Some("u".into()), ..Default::default() },
            data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn applied_secrets_are_read_by_name_and_key_and_deleted_ones_are_gone() {
        let (store, mut writer) = slim_store(secret_data);
        writer.apply_watcher_event(&watcher::Event::Apply(secret("a", &[("ca.crt", "PEM"), ("other", "x")])));
        writer.apply_watcher_event(&watcher::Event::Apply(secret("b", &[("kubeconfig", "K")])));
        assert_eq!(store.text("a", "ca.crt").as_deref(), Some("PEM"));
        assert_eq!(store.text("a", "kubeconfig"), None);
        assert_eq!(store.text("b", "kubeconfig").as_deref(), Some("K"));
        // A change replaces the whole value.
        writer.apply_watcher_event(&watcher::Event::Apply(secret("a", &[("ca.crt", "NEW")])));
        assert_eq!(store.text("a", "ca.crt").as_deref(), Some("NEW"));
        assert_eq!(store.text("a", "other"), None);
        writer.apply_watcher_event(&watcher::Event::Delete(secret("a", &[])));
        assert_eq!(store.text("a", "ca.crt"), None);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn collect_reads_what_it_picks_of_every_value() {
        let (store, mut writer) = slim_store(secret_data);
        for (name, key) in [("a", "ca.crt"), ("b", "kubeconfig"), ("c", "ca.crt")] {
            writer.apply_watcher_event(&watcher::Event::Apply(secret(name, &[(key, name)])));
        }
        let mut cas = store.collect(|data| data.iter().find(|(k, _)| &**k == "ca.crt").map(|(_, v)| v.bytes()));
        cas.sort();
        assert_eq!(cas, [b"a".to_vec(), b"c".to_vec()]);
    }

    #[tokio::test]
    async fn a_relist_replaces_the_store_whole_when_it_ends_and_makes_it_ready() {
        let (store, mut writer) = slim_store(exists::<Secret>);
        writer.apply_watcher_event(&watcher::Event::Apply(secret("old", &[])));
        assert!(tokio::time::timeout(std::time::Duration::from_millis(10), store.wait_until_ready()).await.is_err(), "not listed yet");
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply(secret("new", &[])));
        assert!(store.contains("old") && !store.contains("new"), "the store is swapped only when the list ends");
        writer.apply_watcher_event(&watcher::Event::InitDone);
        assert!(!store.contains("old") && store.contains("new"), "what the list did not show is gone");
        assert!(store.wait_until_ready().await);
    }

    #[tokio::test]
    async fn readers_waiting_for_the_first_list_are_told_when_the_writer_is_gone() {
        let (store, writer) = slim_store(exists::<Secret>);
        drop(writer);
        assert!(!store.wait_until_ready().await);
    }
}
