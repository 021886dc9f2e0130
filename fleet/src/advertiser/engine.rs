//! The peers' broadcasters: a peer that accepted a hub's PeeringRequest keeps its
//! Advertisement in the hub with the kubeconfig the request's Secret carries, as our
//! broadcaster does (`liqo_reconciler::incoming::broadcaster::follow`): a GET, a create when it is
//! missing, then a watch of it by name after a LIST of it (what the hub has now, and the
//! version to watch from), opened again when it ends (every 20 to 30 periods), after a spread
//! wait when it breaks, and a round when it shows the Advertisement missing or deleted. It says how that goes in the request's status
//! (`advertisementStatus`, condition `Advertised`).
//!
//! One HTTP client to the hub serves every peer's rounds (each request carries its peer's
//! token), over a pool of connections; another, which waits as long as a watch lasts, holds
//! their watches: one connection each, as N peers would.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::client::Body;
use liqo_api::AdvertisementSpec;
use liqo_api::names::{LABEL_CLUSTER_ID, advertisement_name};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use liqo_reconciler::incoming::broadcaster::follow;

use super::round::Round;
use super::side::{Credentials, Side, Who};
use crate::counts::Counts;

/// The hub as the peers reach it.
#[derive(Clone, Debug)]
pub struct HubAccess {
    /// Its API server URL (what the kubeconfigs it hands out must name).
    pub url: String,
    /// Its API server's CA (PEM).
    pub ca_pem: String,
    /// How often each broadcaster looks at its Advertisement (our default: 30 s).
    pub period: Duration,
    /// Whether the broadcasters watch it between their rounds (ours do), or read it every period
    /// (an earlier release's did).
    pub watch: bool,
}

/// Every running broadcaster, by peer and requester.
pub struct Advertiser {
    hub: HubAccess,
    client: Client,
    /// For the watches: waits as long as one lasts.
    watcher: Client,
    /// Watches open now.
    watching: Arc<std::sync::atomic::AtomicUsize>,
    counts: Arc<Counts>,
    /// The peers they run for.
    side: Arc<dyn Side>,
    running: Mutex<HashMap<(usize, String), JoinHandle<()>>>,
}

impl Advertiser {
    pub fn new(hub: HubAccess, counts: Arc<Counts>, side: Arc<dyn Side>) -> anyhow::Result<Self> {
        let mut config = kube::Config::new(hub.url.parse()?);
        config.root_cert = Some(vec![pem_der(&hub.ca_pem)?]);
        config.read_timeout = Some(Duration::from_secs(30));
        let client = Client::try_from(config.clone())?;
        config.read_timeout = Some(follow::longest_watch(hub.period) + liqo_reconciler::incoming::broadcaster::QUIET_MARGIN);
        let watcher = Client::try_from(config)?;
        Ok(Self { hub, client, watcher, watching: Arc::default(), counts, side, running: Mutex::default() })
    }

    /// `requester`'s PeeringRequest was accepted by `peer` (new or changed): its broadcaster
    /// starts again, its first round at once.
    pub fn offered(self: &Arc<Self>, who: Who, requester: String) {
        let key = (who.index, requester.clone());
        let task = tokio::spawn(self.clone().broadcast(who, requester));
        if let Some(old) = self.running.lock().expect("not poisoned").insert(key, task) {
            old.abort();
        }
    }

    /// `requester`'s PeeringRequest was deleted: the broadcaster stops and its Advertisement
    /// is withdrawn (the hub may have revoked our access first: then it removed it itself).
    pub fn withdrawn(self: &Arc<Self>, who: &Who, requester: &str) {
        if let Some(task) = self.running.lock().expect("not poisoned").remove(&(who.index, requester.to_owned())) {
            task.abort();
        }
        let (this, id) = (self.clone(), who.id.clone());
        let secret = self.side.credentials(who, requester);
        tokio::spawn(async move {
            if let Some(Credentials { token, namespace }) = secret {
                let path = format!("/apis/sharing.liqo.io/v1alpha1/namespaces/{namespace}/advertisements/{}", advertisement_name(&id));
                this.counts.hub_writes.fetch_add(1, Ordering::Relaxed);
                let _ = this.call(http::Method::DELETE, &path, &token, None).await;
            }
        });
    }

    /// How many watches of the hub are open.
    pub fn watching(&self) -> usize {
        self.watching.load(Ordering::Relaxed)
    }

    /// How many broadcasters run.
    pub fn running(&self) -> usize {
        self.running.lock().expect("not poisoned").len()
    }

    async fn broadcast(self: Arc<Self>, peer: Who, requester: String) {
        let (mut last, mut previous) = (None, None);
        let (mut failures, spread) = (0u32, liqo_reconciler::incoming::broadcaster::spread_of(&format!("{}/{requester}", peer.name)));
        // A peer whose hub refused its watch is not asked again before then.
        let mut unwatchable_until: Option<tokio::time::Instant> = None;
        // The last version of ours a watch told, with the token it was told to: as ours
        // (`follow::Following::resume`), a round after a break resumes the watch from it.
        let mut seen: Option<(String, String)> = None;
        loop {
            let watchable = unwatchable_until.is_none_or(|t| tokio::time::Instant::now() >= t);
            // As ours: a round after which a watch opens reads by the LIST that watch starts from.
            let listing = watchable && self.hub.watch;
            let (round, watch_from) = match self.side.credentials(&peer, &requester) {
                // A peer that is off reaches nothing: its round fails without a request.
                _ if self.side.off(&peer) => (Round::Failed, None),
                // As ours: the round is the watch resumed from the version seen (one request;
                // its answer is the round's, told when the watch opens or fails).
                Some(c) if listing && seen.as_ref().is_some_and(|(t, _)| *t == c.token) => {
                    (Round::Created, seen.as_ref().map(|(_, v)| v.clone()))
                }
                Some(Credentials { token, namespace }) => self.publish(&peer, &token, &namespace, listing).await,
                None => (Round::KubeconfigMissing, None),
            };
            // A 403 is told once the next try is refused too, as our broadcaster does.
            let passing = round == Round::Forbidden && previous != Some(Round::Forbidden);
            if !passing && last != Some(round) {
                self.side.report(&peer, &requester, round);
                last = Some(round);
            }
            previous = Some(round);
            failures = if round == Round::Created { 0 } else { failures.saturating_add(1) };
            if round == Round::Created && listing {
                match self.follow(&peer, &requester, spread, watch_from, &mut seen).await {
                    Followed::Changed | Followed::Off => continue,
                    Followed::Refused => {
                        unwatchable_until = Some(tokio::time::Instant::now() + self.hub.period * follow::UNWATCHABLE_PERIODS)
                    }
                }
            }
            tokio::time::sleep(round.next_after(self.hub.period, failures, spread)).await;
        }
    }

    /// Follows the peer's Advertisement in the hub until it needs a round (it changed, or the
    /// kubeconfig did), the peer goes off, or the hub refuses the watch.
    /// The first watch starts from `first_version` when the round before read ours at it.
    async fn follow(
        &self,
        peer: &Who,
        requester: &str,
        spread: f64,
        mut first_version: Option<String>,
        seen: &mut Option<(String, String)>,
    ) -> Followed {
        use futures::StreamExt;
        let (period, own) = (self.hub.period, peer.id.clone());
        let resources = liqo_reconciler::cluster::resources::summarize(std::iter::empty());
        let mut breaks = 0u32;
        loop {
            let Some(Credentials { token, namespace }) = self.side.credentials(peer, requester) else { return Followed::Changed };
            let seconds = follow::watch_seconds(period, spread);
            let (opened, lasts) = (tokio::time::Instant::now(), Duration::from_secs(seconds.into()));
            self.counts.hub_watches.fetch_add(1, Ordering::Relaxed);
            let _open = Open::new(&self.watching);
            let mut events = std::pin::pin!(self.watch(&own, &token, &namespace, seconds, first_version.take()));
            let next = loop {
                let told = tokio::select! {
                    told = events.next() => told,
                    // The peer going off drops its connections; checked each period.
                    () = tokio::time::sleep(period) => {
                        if self.side.off(peer) { return Followed::Off }
                        continue;
                    }
                };
                let version = follow::seen_after(None, 0, told.as_ref()).map(|(_, v)| v);
                // A watch the hub answered with an error: the next round lists.
                if matches!(told, Some(Err((Some(_), _)))) {
                    *seen = None;
                }
                match follow::judge(told, &own, &resources, opened.elapsed(), lasts) {
                    follow::Next::Keep => {}
                    // Too old (410): the round that follows lists.
                    follow::Next::Round { rewatch: true } => {
                        *seen = None;
                        return Followed::Changed;
                    }
                    other => break other,
                }
                if let Some(version) = version {
                    *seen = Some((token.clone(), version));
                }
            };
            let wait = match next {
                follow::Next::Keep | follow::Next::Reopen => {
                    breaks = 0;
                    Duration::ZERO
                }
                follow::Next::Round { .. } => return Followed::Changed,
                follow::Next::Unwatchable(_) => return Followed::Refused,
                follow::Next::Broken(_) => {
                    breaks += 1;
                    if breaks == 1 {
                        follow::reopen_after(period, spread)
                    } else {
                        liqo_reconciler::incoming::broadcaster::backoff(period, breaks - 1, spread)
                    }
                }
            };
            tokio::time::sleep(wait).await;
            if self.side.off(peer) {
                return Followed::Off;
            }
        }
    }

    /// A watch of `own`'s Advertisement in `namespace` of the hub, lasting `seconds`, after a
    /// LIST of it that tells what the hub has now (as our broadcaster's: ours, or none told as
    /// a deletion) and the version to watch from: its events, or why it failed.
    /// From `from` instead when given (the round before read ours at it): no LIST.
    fn watch(
        &self,
        own: &str,
        token: &str,
        namespace: &str,
        seconds: u32,
        from: Option<String>,
    ) -> impl futures::Stream<Item = follow::Told> + use<> {
        use futures::StreamExt;
        let name = advertisement_name(own);
        let collection =
            format!("/apis/sharing.liqo.io/v1alpha1/namespaces/{namespace}/advertisements?fieldSelector=metadata.name%3D{name}");
        let bearer = format!("Bearer {token}");
        let request = move |path: String| {
            http::Request::builder()
                .uri(path)
                .header(http::header::AUTHORIZATION, bearer.clone())
                .body(Vec::new())
                .expect("a valid request")
        };
        let list = request(collection.clone());
        let watch = move |version: &str| {
            request(format!("{collection}&watch=true&allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds={seconds}"))
        };
        let (client, counts) = (self.watcher.clone(), self.counts.clone());
        futures::stream::once(async move {
            let (now, version) = match from {
                Some(version) => (None, version),
                None => {
                    counts.hub_lists.fetch_add(1, Ordering::Relaxed);
                    let listed = match client.request::<kube::core::ObjectList<liqo_api::Advertisement>>(list).await {
                        Ok(listed) => listed,
                        Err(e) => return futures::stream::iter([Err(follow::failure(e))]).boxed(),
                    };
                    let (now, version) = follow::listed_now(listed, &name);
                    (Some(now), version)
                }
            };
            let request = watch(&version);
            let watched =
                futures::stream::once(async move { client.request_events::<liqo_api::Advertisement>(request).await }).flat_map(|opened| {
                    match opened {
                        Ok(events) => events.map(|e| e.map_err(follow::failure)).left_stream(),
                        Err(e) => futures::stream::iter([Err(follow::failure(e))]).right_stream(),
                    }
                });
            futures::stream::iter(now.map(Ok)).chain(watched).boxed()
        })
        .flatten()
    }

    /// One round: the Advertisement exists in the hub. With `listing` (a watch follows) it is
    /// read by a LIST by name, as ours does, and the version to watch from is returned.
    async fn publish(&self, peer: &Who, token: &str, namespace: &str, listing: bool) -> (Round, Option<String>) {
        let name = advertisement_name(&peer.id);
        let path = format!("/apis/sharing.liqo.io/v1alpha1/namespaces/{namespace}/advertisements/{name}");
        let (read, version) = if listing {
            self.counts.hub_lists.fetch_add(1, Ordering::Relaxed);
            let list = format!("/apis/sharing.liqo.io/v1alpha1/namespaces/{namespace}/advertisements?fieldSelector=metadata.name%3D{name}");
            match self.list(&list, token).await {
                Some((200, listed)) => {
                    let version = listed["metadata"]["resourceVersion"].as_str().map(str::to_owned);
                    let found = listed["items"].as_array().is_some_and(|items| !items.is_empty());
                    (Some(if found { 200 } else { 404 }), version)
                }
                Some((code, _)) => (Some(code), None),
                None => (None, None),
            }
        } else {
            self.counts.hub_reads.fetch_add(1, Ordering::Relaxed);
            (self.call(http::Method::GET, &path, token, None).await, None)
        };
        let round = self.publish_read(peer, token, namespace, read).await;
        // A create's version is fresh too, but the next LIST is cheap enough for the fleet:
        // only a read one is handed on.
        (round, version.filter(|_| round == Round::Created && read == Some(200)))
    }

    /// The rest of a round, after ours was read with status `read`.
    async fn publish_read(&self, peer: &Who, token: &str, namespace: &str, read: Option<u16>) -> Round {
        let name = advertisement_name(&peer.id);
        match read {
            Some(200) => Round::Created,
            Some(404) => {
                let spec = AdvertisementSpec {
                    cluster_id: peer.id.clone(),
                    kube_config_ref: None,
                    resources: liqo_reconciler::cluster::resources::summarize(std::iter::empty()),
                    timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())),
                };
                let body = json!({"apiVersion": "sharing.liqo.io/v1alpha1", "kind": "Advertisement",
                    "metadata": {"name": name, "labels": {LABEL_CLUSTER_ID: peer.id}}, "spec": spec});
                self.counts.hub_writes.fetch_add(1, Ordering::Relaxed);
                let create = format!("/apis/sharing.liqo.io/v1alpha1/namespaces/{namespace}/advertisements?fieldManager=liqo-broadcaster");
                match self.call(http::Method::POST, &create, token, Some(body)).await {
                    Some(201 | 409) => Round::Created,
                    Some(401) => Round::Refused,
                    Some(403) => Round::Forbidden,
                    _ => Round::Failed,
                }
            }
            Some(401) => Round::Refused,
            Some(403) => Round::Forbidden,
            _ => Round::Failed,
        }
    }

    /// A LIST of the hub with `token`: its status and body, `None` when it was not answered.
    async fn list(&self, path: &str, token: &str) -> Option<(u16, Value)> {
        let request =
            http::Request::builder().uri(path).header(http::header::AUTHORIZATION, format!("Bearer {token}")).body(Body::empty()).ok()?;
        let response = tokio::time::timeout(Duration::from_secs(30), self.client.send(request)).await.ok()?.ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect_bytes().await.ok()?;
        Some((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }

    /// The status code of one request to the hub with `token`, `None` when it was not answered.
    async fn call(&self, method: http::Method, path: &str, token: &str, body: Option<Value>) -> Option<u16> {
        let body = body.map(|b| serde_json::to_vec(&b).expect("serializable")).unwrap_or_default();
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .ok()?;
        let response = tokio::time::timeout(Duration::from_secs(30), self.client.send(request)).await.ok()?.ok()?;
        let status = response.status().as_u16();
        let _ = response.into_body().collect_bytes().await;
        Some(status)
    }
}

/// Counts a watch as open for as long as it lives (a broadcaster aborted included).
struct Open(Arc<std::sync::atomic::AtomicUsize>);

impl Open {
    fn new(count: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How following an Advertisement ended.
enum Followed {
    /// A round is due: the Advertisement changed, or the kubeconfig did.
    Changed,
    /// The peer went off.
    Off,
    /// The hub does not let the peer watch: it asks every period.
    Refused,
}

fn pem_der(pem: &str) -> anyhow::Result<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    Ok(CertificateDer::from_pem_slice(pem.as_bytes())?.to_vec())
}
