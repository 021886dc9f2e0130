//! What one dashboard is: its stores, what RBAC lets its user see, its CSRF token, and the
//! pages it renders from them (the home view, a peer's view). The server ([`crate::server`])
//! serves one for the user of `kubectl liqo dashboard`, the sessions ([`crate::sessions`]) one per
//! logged-in user in the cluster.

use std::sync::Arc;

use kube::Client;
use kube::runtime::reflector::ObjectRef;

use crate::access::Visible;
use crate::html::{self, FormError};
use crate::model;
use crate::object_pages::{self, ListView};
use crate::objects::{self, Kind};
use crate::stores::Stores;

/// What the handlers share.
pub struct Dashboard {
    pub client: Client,
    pub namespace: String,
    pub stores: Stores,
    /// The token every form carries (random per process).
    pub csrf: String,
    /// What RBAC allows the user (asked every minute).
    pub permissions: crate::access::Permissions,
    /// The scheme pages are served with (`Origin` checks): `http` on loopback, `https` in a cluster.
    pub scheme: &'static str,
    /// One of the in-cluster form's per-user dashboards (the page offers Log out).
    pub per_user: bool,
    /// This user's own tasks (the permission checks), stopped with the dashboard.
    tasks: crate::stores::Tasks,
}

impl Dashboard {
    /// The dashboard `kubectl liqo dashboard` serves on loopback with the user's kubeconfig.
    pub fn new(client: Client, namespace: &str, stores: Stores) -> Arc<Self> {
        Arc::new(Self::with(client, namespace, stores, "http", false))
    }

    /// A dashboard of the in-cluster form, for the user whose token `client` carries.
    pub fn for_user(client: Client, namespace: &str, stores: Stores) -> Arc<Self> {
        Arc::new(Self::with(client, namespace, stores, "https", true))
    }

    fn with(client: Client, namespace: &str, stores: Stores, scheme: &'static str, per_user: bool) -> Self {
        let csrf = uuid::Uuid::new_v4().simple().to_string();
        let tasks = Default::default();
        Self { client, namespace: namespace.to_owned(), stores, csrf, permissions: Default::default(), scheme, per_user, tasks }
    }

    /// Runs `task` for as long as this dashboard lives.
    pub fn keep(&self, task: tokio::task::AbortHandle) {
        self.tasks.add(task);
    }

    fn this_cluster(&self, seen: &Visible) -> model::ThisCluster {
        let id = shown(&self.stores.cluster_id, seen.cluster_id).first().and_then(|c| c.data.as_ref()?.get("cluster-id").cloned());
        let config = shown(&self.stores.configs, seen.config).first().cloned();
        let spec = config.as_ref().map(|c| c.spec.clone()).unwrap_or_default();
        model::ThisCluster::of(id, &self.namespace, &spec, config.as_ref().and_then(|c| c.status.as_ref()))
    }

    /// Every peer the user may see (read off the stores as they are, nothing copied but the
    /// summaries).
    fn peers(&self, seen: &Visible) -> model::Peers {
        let fcs = if seen.foreign { self.stores.foreign.state() } else { Vec::new() };
        let adverts = if seen.advertisements { self.stores.advertisements.state() } else { Vec::new() };
        self.checked(model::peers(&fcs, &adverts), seen)
    }

    /// `peers`, each with its last check where the user may read the record of them.
    fn checked(&self, peers: model::Peers, seen: &Visible) -> model::Peers {
        if !seen.last_checks {
            return peers;
        }
        let mut peers = Some(peers);
        let checked = self.stores.last_checks.with(liqo_api::last_checks::CONFIGMAP, |record| peers.take().map(|p| p.checked(record)));
        checked.flatten().or(peers).unwrap_or_default()
    }

    /// The home view as `view` asks (a search, a state, a page of each table), with `error`
    /// at its form.
    pub fn home(&self, view: model::View, error: Option<&FormError>) -> String {
        // Asked once: one page shows one answer.
        let allowed = self.permissions.now();
        let seen = &allowed.visible;
        let domains = shown(&self.stores.domains, seen.domains);
        let listing = model::Listing::of(self.peers(seen), view);
        let now = k8s_openapi::jiff::Timestamp::now();
        let page = html::home(&self.this_cluster(seen), &listing, &model::domains(&domains), &self.csrf, error, &allowed, now);
        self.framed(page)
    }

    /// `page`, with Log out where the user logged in.
    pub fn framed(&self, page: String) -> String {
        if self.per_user { html::signed_in(&page, &self.csrf) } else { page }
    }

    /// The view of peer `name` (its ForeignCluster's name, the name a user gave it with `kubectl
    /// liqo peer --name`, or its cluster ID), if there is one.
    pub fn peer(&self, name: &str) -> Option<String> {
        let allowed = self.permissions.now();
        let seen = &allowed.visible;
        let fc = self
            .stores
            .foreign
            .get(&ObjectRef::new(name))
            .or_else(|| {
                self.stores.foreign.find(|f| {
                    kube::ResourceExt::labels(f).get(liqo_api::names::LABEL_PEER_NAME).map(String::as_str) == Some(name)
                        || f.spec.remote_cluster_id() == Some(name)
                })
            })
            .filter(|_| seen.foreign)?;
        let name = fc.metadata.name.clone().unwrap_or_default();
        let name = name.as_str();
        let adverts = if seen.advertisements { self.stores.advertisements.state() } else { Vec::new() };
        let peers = self.checked(model::peers(std::slice::from_ref(&fc), &adverts), seen);
        let largest = model::largest_advertised(&adverts);
        let card = peers.connected.into_iter().chain(peers.available).next()?;
        let mut events = if seen.events { self.stores.events.collect(|e| (&*e.regarding == name).then(|| e.clone())) } else { Vec::new() };
        // The latest 20, latest first.
        events.sort_by_key(|e| std::cmp::Reverse(e.at));
        events.truncate(20);
        let events: Vec<_> = events
            .into_iter()
            .map(|e| ((if e.warning { "Warning" } else { "Normal" }).to_owned(), e.reason.into(), e.note.into()))
            .collect();
        let mut raw = (*fc).clone();
        raw.metadata.managed_fields = None;
        // The request the peer sent us (named after its cluster ID) says how our Advertisement fares.
        let incoming = self.stores.requests.get(&ObjectRef::new(&card.peer.cluster_id)).filter(|_| seen.requests).map(|pr| {
            let state = pr.status.as_ref().and_then(|s| s.advertisement_status);
            format!(
                "{}: our Advertisement {}",
                pr.metadata.name.clone().unwrap_or_default(),
                state.map_or("not reported yet".into(), |s| format!("{s:?}"))
            )
        });
        let raw_yaml = serde_yaml::to_string(&raw).unwrap_or_default();
        let history = self.stores.history.lock().unwrap_or_else(|e| e.into_inner()).of(name);
        let page = html::PeerPage {
            card: &card,
            incoming: incoming.as_deref(),
            events: &events,
            raw_yaml: &raw_yaml,
            history: history.as_ref(),
            largest: &largest,
            checks_recorded: seen.last_checks && self.stores.last_checks.contains(liqo_api::last_checks::CONFIGMAP),
            now: k8s_openapi::jiff::Timestamp::now(),
        };
        Some(self.framed(html::peer(&page, &self.csrf, &allowed)))
    }

    /// The question before forgetting peer `name`, if the user may see it.
    pub fn confirm_forget(&self, name: &str) -> Option<String> {
        let allowed = self.permissions.now();
        let fc = self.stores.foreign.get(&ObjectRef::new(name)).filter(|_| allowed.visible.foreign)?;
        let joined = fc.status.as_ref().and_then(|s| s.outgoing.as_ref()).is_some_and(|o| o.joined);
        let discovered = matches!(fc.spec.discovery_type, Some(liqo_api::DiscoveryType::Lan | liqo_api::DiscoveryType::Wan));
        Some(self.framed(html::confirm_forget(name, joined, discovered, &self.csrf, &allowed.forget)))
    }

    /// The question before disconnecting peer `name`, if the user may see it.
    pub fn confirm_disconnect(&self, name: &str) -> Option<String> {
        let allowed = self.permissions.now();
        let fc = self.stores.foreign.get(&ObjectRef::new(name)).filter(|_| allowed.visible.foreign)?;
        let joined = fc.status.as_ref().and_then(|s| s.outgoing.as_ref()).is_some_and(|o| o.joined);
        Some(self.framed(html::confirm_disconnect(name, joined, &self.csrf, &allowed.join)))
    }
}

impl Dashboard {
    /// Whether the user may see objects of `kind`.
    fn sees(&self, kind: Kind, seen: &Visible) -> bool {
        match kind {
            Kind::ForeignClusters => seen.foreign,
            Kind::SearchDomains => seen.domains,
            Kind::PeeringRequests => seen.requests,
            Kind::Advertisements => seen.advertisements,
            Kind::ClusterConfigs => seen.config,
        }
    }

    /// The names and namespaces of the `kind` objects the user may see.
    fn listed(&self, kind: Kind, seen: &Visible) -> Vec<objects::Listed> {
        if !self.sees(kind, seen) {
            return Vec::new();
        }
        let s = &self.stores;
        match kind {
            Kind::ForeignClusters => objects::listed(&s.foreign.state()),
            Kind::SearchDomains => objects::listed(&s.domains.state()),
            Kind::PeeringRequests => objects::listed(&s.requests.state()),
            Kind::Advertisements => objects::listed(&s.advertisements.state()),
            Kind::ClusterConfigs => objects::listed(&s.configs.state()),
        }
    }

    /// The list of every Liqo object of the kind `view` asks (ForeignClusters by default).
    pub fn objects(&self, view: ListView) -> String {
        let seen = self.permissions.now().visible;
        let kind = Kind::from_plural(&view.kind).unwrap_or(Kind::ForeignClusters);
        let counts: Vec<(Kind, usize)> = Kind::ALL.iter().map(|k| (*k, self.listed(*k, &seen).len())).collect();
        self.framed(object_pages::list(kind, &counts, &self.listed(kind, &seen), &view))
    }

    /// Object `name` of `kind` (in `namespace` for Advertisements) as YAML and its version,
    /// from the stores, if the user may see it.
    fn stored(&self, kind: Kind, name: &str, namespace: Option<&str>) -> Option<(String, String, String)> {
        fn of<K: kube::Resource + serde::Serialize + Clone>(o: std::sync::Arc<K>) -> (String, String, String) {
            (objects::yaml(&*o), objects::spec_yaml(&*o), o.meta().resource_version.clone().unwrap_or_default())
        }
        if !self.sees(kind, &self.permissions.now().visible) {
            return None;
        }
        let s = &self.stores;
        match kind {
            Kind::ForeignClusters => s.foreign.get(&ObjectRef::new(name)).map(of),
            Kind::SearchDomains => s.domains.get(&ObjectRef::new(name)).map(of),
            Kind::PeeringRequests => s.requests.get(&ObjectRef::new(name)).map(of),
            Kind::Advertisements => s.advertisements.get(&ObjectRef::new(name).within(namespace?)).map(of),
            Kind::ClusterConfigs => s.configs.get(&ObjectRef::new(name)).map(of),
        }
    }

    /// An object's page: its YAML, and its spec's editor holding `written` (what the person
    /// last wrote, at the version they read) or the spec as stored, with `error` at it.
    pub fn object(
        &self,
        kind: Kind,
        name: &str,
        namespace: Option<&str>,
        written: Option<(&str, &str)>,
        error: Option<&FormError>,
    ) -> Option<String> {
        let (yaml, spec, version) = self.stored(kind, name, namespace)?;
        let (spec, version) = written.unwrap_or((&spec, &version));
        let page = object_pages::ObjectPage { kind, name, namespace, yaml: &yaml, spec, version };
        Some(self.framed(object_pages::object(&page, &self.csrf, error)))
    }
}

/// What `store` holds, if the user may see that kind (else nothing).
fn shown<K: Clone + kube::Resource + 'static>(store: &kube::runtime::reflector::Store<K>, visible: bool) -> Vec<K>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    if visible { store.state().iter().map(|o| (**o).clone()).collect() } else { Vec::new() }
}
