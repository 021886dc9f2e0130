//! Objects of a watch-fed store by a key of theirs (pure bookkeeping, fed by the same watch
//! events as the store): finding the objects with a key costs a lookup, not a scan of the store.
//! A scan per reconcile is a scan per object per period, quadratic in the objects (a search of
//! every ForeignCluster for the cluster ID each round joins was the reconciler's largest cost
//! at 10,000 peers).
//!
//! The index follows the store's events as the store does: a relist (`Init`, `InitApply`s,
//! `InitDone`) replaces it whole when it ends. It may lag the store by the event being applied;
//! readers get the objects from the store by name and check the key there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Resource;
use kube::runtime::watcher::Event;

/// Names of objects by key. A key's names are a sorted `Vec` (almost always of one): a
/// `BTreeSet` of one name allocates a whole node, about 400 bytes a key, 4 MiB at 10,000 peers.
#[derive(Default)]
struct Keys {
    names: HashMap<String, Vec<String>>,
    key_of: HashMap<String, String>,
    /// What a relist under way has shown so far.
    relist: Option<Vec<(String, String)>>,
}

impl Keys {
    fn remove(&mut self, name: &str) {
        if let Some(old) = self.key_of.remove(name)
            && let Some(names) = self.names.get_mut(&old)
        {
            if let Ok(at) = names.binary_search_by(|n| n.as_str().cmp(name)) {
                names.remove(at);
            }
            if names.is_empty() {
                self.names.remove(&old);
            }
        }
    }

    fn insert(&mut self, name: String, key: Option<String>) {
        self.remove(&name);
        if let Some(key) = key {
            let names = self.names.entry(key.clone()).or_default();
            if let Err(at) = names.binary_search(&name) {
                names.insert(at, name.clone());
            }
            self.key_of.insert(name, key);
        }
    }
}

/// The objects of kind `K` by the key `key` gives each (none: not indexed).
pub struct Index<K> {
    keys: Arc<Mutex<Keys>>,
    key: fn(&K) -> Option<String>,
}

impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        Self { keys: self.keys.clone(), key: self.key }
    }
}

impl<K: Resource> Index<K> {
    /// An empty index by `key`.
    pub fn new(key: fn(&K) -> Option<String>) -> Self {
        Self { keys: Arc::default(), key }
    }

    /// Follows one watch event, as the store does.
    pub fn apply(&self, event: &Event<K>) {
        let mut keys = self.keys.lock().expect("not poisoned");
        let name = |o: &K| o.meta().name.clone().unwrap_or_default();
        match event {
            Event::Apply(o) => keys.insert(name(o), (self.key)(o)),
            Event::Delete(o) => keys.remove(&name(o)),
            Event::Init => keys.relist = Some(Vec::new()),
            Event::InitApply(o) => {
                if let (Some(relist), Some(key)) = (keys.relist.as_mut(), (self.key)(o)) {
                    relist.push((name(o), key));
                }
            }
            Event::InitDone => {
                let shown = keys.relist.take().unwrap_or_default();
                *keys = Keys::default();
                for (name, key) in shown {
                    keys.insert(name, Some(key));
                }
            }
        }
    }

    /// The names of the objects with `key`.
    pub fn names(&self, key: &str) -> Vec<String> {
        self.keys.lock().expect("not poisoned").names.get(key).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(name: &str, key: Option<&str>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.data = key.map(|k| [("key".to_owned(), k.to_owned())].into());
        cm
    }

    fn index() -> Index<ConfigMap> {
        Index::new(|cm| cm.data.as_ref()?.get("key").cloned())
    }

    #[test]
    fn applies_and_deletes_move_names_between_keys() {
        let i = index();
        i.apply(&Event::Apply(cm("b", Some("x"))));
        i.apply(&Event::Apply(cm("a", Some("x"))));
        i.apply(&Event::Apply(cm("b", Some("x"))));
        i.apply(&Event::Apply(cm("c", None)));
        assert_eq!(i.names("x"), ["a", "b"], "sorted, each name once");
        i.apply(&Event::Apply(cm("a", Some("y"))));
        assert_eq!((i.names("x"), i.names("y")), (vec!["b".to_owned()], vec!["a".to_owned()]));
        i.apply(&Event::Apply(cm("b", None)));
        i.apply(&Event::Delete(cm("a", Some("y"))));
        assert!(i.names("x").is_empty() && i.names("y").is_empty());
        assert!(i.keys.lock().unwrap().names.is_empty(), "no empty key left behind");
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_ends() {
        let i = index();
        i.apply(&Event::Apply(cm("gone", Some("x"))));
        i.apply(&Event::Init);
        i.apply(&Event::InitApply(cm("new", Some("x"))));
        assert_eq!(i.names("x"), ["gone"], "as the store: the old state until the relist ends");
        i.apply(&Event::InitDone);
        assert_eq!(i.names("x"), ["new"]);
        i.apply(&Event::Delete(cm("new", Some("x"))));
        assert!(i.names("x").is_empty());
    }
}
