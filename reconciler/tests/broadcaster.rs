//! Broadcasters against mock API servers: exactly one per peer under concurrent events, the
//! Advertisement created once and left alone while nothing changes, withdrawn while
//! advertisement is disabled and when the last request goes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use k8s_openapi::api::core::v1::{Node, SecretReference};
use kube::Client;
use kube::client::Body;
use kube::runtime::reflector;
use kube::runtime::watcher;
use liqo_api::TrustMode;
use liqo_reconciler::Error;
use liqo_reconciler::incoming::broadcaster::Broadcasters;
use liqo_reconciler::remote::auth::wire::{IdentityRequest, IdentityResponse, Ids};
use liqo_reconciler::remote::peer::{Peers, RemoteAccess, Trust};
use serde_json::{Value, json};
use tokio::sync::watch;

const OWN: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

type Log = Arc<Mutex<Vec<(String, String)>>>;

/// A mock API server keeping one Advertisement (the peer's side) and answering the Secret
/// with the peer's kubeconfig (our side).
fn api(log: Log) -> Client {
    api_knowing(log, None)
}

/// [`api`], where ForeignCluster `known-peer` stands for PEER with `pinned` as the API server
/// CA we pinned when we joined it.
fn api_knowing(log: Log, pinned: Option<&'static str>) -> Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        let mut adv: Option<Value> = None;
        while let Some((req, send)) = handle.next_request().await {
            let method = req.method().to_string();
            let path = req.uri().path().to_owned();
            let query = req.uri().query().unwrap_or_default().to_owned();
            let body: Value = serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap_or(Value::Null);
            log.lock().unwrap().push((method.clone(), format!("{path}?{query}")));
            let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
            let (status, answer) = match (method.as_str(), path.as_str()) {
                ("GET", "/apis/discovery.liqo.io/v1alpha1/foreignclusters") => {
                    let items: Vec<Value> = pinned
                        .map(|_| {
                            json!({"metadata": {"name": "known-peer", "labels": {"discovery.liqo.io/cluster-id": PEER}},
                                        "spec": {"clusterIdentity": {"clusterID": PEER}}})
                        })
                        .into_iter()
                        .collect();
                    (200, json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignClusterList", "metadata": {}, "items": items}))
                }
                ("GET", p) if p.ends_with("/secrets/known-peer-ca-data") && pinned.is_some() => {
                    use base64::Engine;
                    let pem = base64::engine::general_purpose::STANDARD.encode(pinned.unwrap_or_default());
                    (
                        200,
                        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "known-peer-ca-data"}, "data": {"ca.crt": pem}}),
                    )
                }
                ("GET", p) if p.ends_with("/secrets/pr-kubeconfig") => (
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pr-kubeconfig", "namespace": "liqo"},
                           "data": {"kubeconfig": "cGVlci1rdWJlY29uZmln"}}),
                ),
                ("GET", p) if p.ends_with("/advertisements") => listed(&query, adv.as_ref()),
                ("GET", p) if p.contains("/advertisements/") => match &adv {
                    Some(a) => (200, a.clone()),
                    None => (404, not_found),
                },
                ("POST", p) if p.ends_with("/advertisements") => {
                    adv = Some(body.clone());
                    (201, body)
                }
                ("DELETE", p) if p.contains("/advertisements/") => match adv.take() {
                    Some(a) => (200, a),
                    None => (404, not_found),
                },
                _ => (500, json!({})),
            };
            send.send_response(Response::builder().status(status).body(Body::from(serde_json::to_vec(&answer).unwrap())).unwrap());
        }
    });
    Client::new(service, "default")
}

struct FakePeers {
    remote: Client,
    built: Mutex<Vec<String>>,
    /// The CA each client was pinned to (`None`: the kubeconfig's own).
    pinned: Mutex<Vec<Option<String>>>,
}

impl Peers for FakePeers {
    async fn probe_trust(&self, _: &str) -> Result<TrustMode, Error> {
        unreachable!("broadcasters do not probe")
    }
    async fn ids(&self, _: &str, _: Trust) -> Result<Ids, Error> {
        unreachable!()
    }
    async fn ca(&self, _: &str, _: Trust) -> Result<String, Error> {
        unreachable!()
    }
    async fn identity(&self, _: &str, _: Trust, _: &IdentityRequest) -> Result<IdentityResponse, Error> {
        unreachable!()
    }
    async fn api_client(&self, access: &RemoteAccess) -> Result<Client, Error> {
        self.built.lock().unwrap().push(access.kubeconfig.clone());
        self.pinned.lock().unwrap().push(access.ca_pem.clone());
        Ok(self.remote.clone())
    }
    async fn cluster_info_ca(&self, _: &str, _: Trust) -> Result<String, Error> {
        unreachable!()
    }
}

/// Broadcasters of this cluster (OWN, no nodes, the default ClusterConfig: keep the sender to
/// change it) over `local`, reaching peers through `peers`, with a 50 ms period.
fn started(local: Client, peers: Arc<FakePeers>) -> (Arc<Broadcasters<FakePeers>>, watch::Sender<Option<liqo_api::ClusterConfigSpec>>) {
    let (_, id) = watch::channel(Some(OWN.to_owned()));
    let (config, config_rx) = watch::channel(Some(liqo_api::ClusterConfigSpec::default()));
    (Broadcasters::new(local, id, config_rx, reflector::store::<Node>().0, peers, Duration::from_millis(50), "liqo"), config)
}

/// A LIST of Advertisements by name (`adv` the one there is, if any) answered as an API
/// server does, with the list's version; a watch answered 405, as by a peer that serves no
/// watch: its broadcaster reads ours every period.
fn listed(query: &str, adv: Option<&Value>) -> (u16, Value) {
    if query.split('&').any(|kv| kv == "watch=true") {
        return (405, json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "MethodNotAllowed", "code": 405}));
    }
    let items: Vec<Value> = adv.cloned().into_iter().collect();
    (
        200,
        json!({"apiVersion": "sharing.liqo.io/v1alpha1", "kind": "AdvertisementList", "metadata": {"resourceVersion": "7"}, "items": items}),
    )
}

/// Requests of `method` whose path and query hold `needle`.
fn count(log: &Log, method: &str, needle: &str) -> usize {
    log.lock().unwrap().iter().filter(|(m, p)| m == method && p.contains(needle)).count()
}

#[tokio::test]
async fn one_broadcaster_per_peer_even_under_concurrent_events() {
    let (local_log, remote_log): (Log, Log) = Default::default();
    let peers = Arc::new(FakePeers { remote: api(remote_log.clone()), built: Default::default(), pinned: Default::default() });
    let (nodes, mut writer) = reflector::store::<Node>();
    writer.apply_watcher_event(&watcher::Event::Apply(
        serde_json::from_value(
            json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}),
        )
        .unwrap(),
    ));
    let (_, id) = watch::channel(Some(OWN.to_owned()));
    let (config, config_rx) = watch::channel(Some(liqo_api::ClusterConfigSpec::default()));
    let b = Broadcasters::new(api(local_log.clone()), id, config_rx.clone(), nodes, peers.clone(), Duration::from_millis(50), "liqo");
    let source = SecretReference { name: Some("pr-kubeconfig".into()), namespace: Some("liqo".into()) };

    // Many events at once, from a PeeringRequest and a FederationRequest of the same peer.
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (b, source) = (b.clone(), source.clone());
            tokio::spawn(async move { b.ensure(PEER, if i % 2 == 0 { "PeeringRequest" } else { "FederationRequest" }, "liqo", source) })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(b.peers(), [PEER]);
    // Let it run several periods: ours read (by LIST or GET) in at least three.
    liqo_testenv::eventually("ours read in three rounds", || async {
        (count(&remote_log, "GET", &format!("advertisement-{OWN}")) >= 3).then_some(())
    })
    .await;
    assert_eq!(*peers.built.lock().unwrap(), ["peer-kubeconfig"], "one client, built once");
    assert_eq!(*peers.pinned.lock().unwrap(), [None], "a peer we never joined: the kubeconfig's own CA");
    assert_eq!(count(&remote_log, "POST", "/advertisements"), 1, "created once");
    assert!(count(&remote_log, "GET", &format!("advertisement-{OWN}")) >= 3, "checked every period");
    assert_eq!(count(&remote_log, "PATCH", ""), 0, "nothing changed, nothing written");
    assert_eq!(count(&local_log, "GET", "/secrets/pr-kubeconfig"), 1);

    // The created Advertisement says who we are and what we offer.
    // (Read back through a GET the broadcaster does not make: the mock keeps the object.)
    let remote = peers.remote.clone();
    let adv: liqo_api::Advertisement =
        kube::Api::<liqo_api::Advertisement>::all(remote).get(&format!("advertisement-{OWN}")).await.unwrap();
    assert_eq!(adv.spec.cluster_id, OWN);
    assert_eq!(adv.spec.resources.cpu.as_ref().unwrap().0, "2000m");
    assert_eq!(adv.spec.resources.memory.as_ref().unwrap().0, "4Gi");

    // Advertisement turned off in the ClusterConfig: withdrawn once; back on: published again.
    config.send_modify(|c| c.as_mut().unwrap().discovery_config.enable_advertisement = false);
    let withdrawn = || count(&remote_log, "DELETE", &format!("advertisement-{OWN}"));
    liqo_testenv::eventually("withdrawn while disabled", || async { (withdrawn() >= 1).then_some(()) }).await;
    config.send_modify(|c| c.as_mut().unwrap().discovery_config.enable_advertisement = true);
    liqo_testenv::eventually("published again", || async { (count(&remote_log, "POST", "/advertisements") >= 2).then_some(()) }).await;
    assert_eq!(withdrawn(), 1, "withdrawn once while disabled");
    assert_eq!(count(&remote_log, "POST", "/advertisements"), 2, "published again, once");

    // The PeeringRequest goes: the FederationRequest still holds the broadcaster.
    b.release(PEER, "PeeringRequest", Some(source.clone())).await.unwrap();
    assert_eq!(b.peers(), [PEER]);
    assert_eq!(count(&remote_log, "DELETE", ""), 1);
    // The last one goes: stopped, and the Advertisement is withdrawn from the peer.
    b.release(PEER, "FederationRequest", Some(source.clone())).await.unwrap();
    assert!(b.peers().is_empty());
    assert_eq!(count(&remote_log, "DELETE", &format!("advertisement-{OWN}")), 2);
    let gets = count(&remote_log, "GET", "");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(count(&remote_log, "GET", ""), gets, "no broadcaster left running");

    // After a restart (no broadcaster in memory) the release still withdraws.
    b.ensure(PEER, "PeeringRequest", "liqo", source.clone());
    liqo_testenv::eventually("published by the new broadcaster", || async {
        (count(&remote_log, "POST", "/advertisements") >= 3).then_some(())
    })
    .await;
    let fresh = Broadcasters::new(
        api(Default::default()),
        watch::channel(Some(OWN.to_owned())).1,
        config_rx,
        reflector::store::<Node>().0,
        peers.clone(),
        Duration::from_secs(30),
        "liqo",
    );
    fresh.release(PEER, "PeeringRequest", Some(source)).await.unwrap();
    assert_eq!(count(&remote_log, "DELETE", &format!("advertisement-{OWN}")), 3);
}

/// A request naming a Secret this cluster keeps (our identity with another peer, another
/// requester's kubeconfig, our tokens) never has it read: the broadcaster fails without a
/// client, and releasing such a request withdraws nothing (nothing was published with it).
#[tokio::test]
async fn a_secret_this_cluster_keeps_is_never_used_as_a_peers_kubeconfig() {
    let (local_log, remote_log): (Log, Log) = Default::default();
    let peers = Arc::new(FakePeers { remote: api(remote_log.clone()), built: Default::default(), pinned: Default::default() });
    let (b, _config) = started(api(local_log.clone()), peers.clone());
    for name in ["beta-identity", "pr-kubeconfig-11111111-2222-3333-4444-555555555555", "auth-token"] {
        let source = SecretReference { name: Some(name.into()), namespace: Some("liqo".into()) };
        b.release(PEER, "PeeringRequest", Some(source.clone())).await.unwrap();
        let reports = count(&local_log, "PATCH", "/status");
        b.ensure(PEER, "PeeringRequest", "liqo", source.clone());
        liqo_testenv::eventually("the broadcaster's round reported", || async {
            (count(&local_log, "PATCH", "/status") > reports).then_some(())
        })
        .await;
        b.release(PEER, "PeeringRequest", Some(source)).await.unwrap();
    }
    assert!(local_log.lock().unwrap().iter().all(|(_, p)| !p.contains("/secrets/")), "no Secret read: {:?}", local_log.lock().unwrap());
    assert!(peers.built.lock().unwrap().is_empty(), "no client built");
    assert!(remote_log.lock().unwrap().is_empty(), "nothing sent anywhere");
}

/// A peer we joined ourselves: its kubeconfig is used with the API server CA we pinned then,
/// so one pointing at a third cluster fails the handshake instead of getting our Advertisement.
#[tokio::test]
async fn a_peer_we_joined_is_reached_with_its_pinned_ca_only() {
    let (local_log, remote_log): (Log, Log) = Default::default();
    let peers = Arc::new(FakePeers { remote: api(remote_log.clone()), built: Default::default(), pinned: Default::default() });
    let (b, _config) = started(api_knowing(local_log.clone(), Some("PINNED-PEM")), peers.clone());
    b.ensure(PEER, "PeeringRequest", "liqo", SecretReference { name: Some("pr-kubeconfig".into()), namespace: Some("liqo".into()) });
    liqo_testenv::eventually("the client built", || async { (!peers.pinned.lock().unwrap().is_empty()).then_some(()) }).await;
    assert_eq!(*peers.pinned.lock().unwrap(), [Some("PINNED-PEM".to_owned())]);
    assert_eq!(count(&local_log, "GET", "/secrets/known-peer-ca-data"), 1);
}

/// A peer known only from its incoming request (no ForeignCluster here, so no CA of its API
/// server pinned when we joined it): the kubeconfig it handed us is used with its own CA, the
/// only one there is; the third-cluster check (a kubeconfig naming a Secret this cluster keeps,
/// such as our identity with another peer) is tested just above for this case too.
#[tokio::test]
async fn a_peer_known_only_from_its_request_is_reached_with_its_kubeconfigs_own_ca() {
    let (local_log, remote_log): (Log, Log) = Default::default();
    let peers = Arc::new(FakePeers { remote: api(remote_log.clone()), built: Default::default(), pinned: Default::default() });
    let (b, _config) = started(api_knowing(local_log.clone(), None), peers.clone());
    b.ensure(PEER, "PeeringRequest", "liqo", SecretReference { name: Some("pr-kubeconfig".into()), namespace: Some("liqo".into()) });
    liqo_testenv::eventually("the client built", || async { (!peers.pinned.lock().unwrap().is_empty()).then_some(()) }).await;
    assert_eq!(*peers.pinned.lock().unwrap(), [None], "no pinned CA: the kubeconfig's own");
    assert_eq!(*peers.built.lock().unwrap(), ["peer-kubeconfig"], "the kubeconfig the request names");
    assert_eq!(count(&local_log, "GET", "-ca-data"), 0, "no ForeignCluster, no CA Secret read");
    liqo_testenv::eventually("our Advertisement created with it", || async {
        (count(&remote_log, "POST", "/advertisements") == 1).then_some(())
    })
    .await;
}

/// While our own API server is down, the watch of the kubeconfig Secrets is restarted with
/// backoff, not in a loop: the chaos soak once saw 7,699 failed connects in 10 s.
#[tokio::test]
async fn a_down_api_server_is_not_dialled_in_a_loop() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dials = Arc::new(AtomicUsize::new(0));
    let counted = dials.clone();
    let down = tower::service_fn(move |_req: Request<Body>| {
        counted.fetch_add(1, Ordering::Relaxed);
        async { Err::<Response<Body>, _>(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused")) }
    });
    let remote_log: Log = Default::default();
    let peers = Arc::new(FakePeers { remote: api(remote_log), built: Default::default(), pinned: Default::default() });
    let (b, _config) = started(Client::new(down, "default"), peers);
    let watched = Duration::from_secs(2);
    b.follow_sources(tokio::time::sleep(watched)).await;
    // The backoff starts at 200 ms and doubles: about 5 attempts in 2 s; a loop makes thousands.
    let n = dials.load(Ordering::Relaxed);
    assert!((1..=20).contains(&n), "{n} attempts to reach the API server in {watched:?}");
}

/// Advertisement turned back on in the ClusterConfig is acted on at once, not at the end of the
/// broadcaster's period (found by the chaos soak, 1.5 s late with a 2 s period; here the period
/// is 10 minutes).
#[tokio::test]
async fn advertisement_turned_on_is_published_at_once() {
    let (local_log, remote_log): (Log, Log) = Default::default();
    let peers = Arc::new(FakePeers { remote: api(remote_log.clone()), built: Default::default(), pinned: Default::default() });
    let (_, id) = watch::channel(Some(OWN.to_owned()));
    let mut off = liqo_api::ClusterConfigSpec::default();
    off.discovery_config.enable_advertisement = false;
    let (config, config_rx) = watch::channel(Some(off));
    let b = Broadcasters::new(api(local_log.clone()), id, config_rx, reflector::store::<Node>().0, peers, Duration::from_secs(600), "liqo");
    b.ensure(PEER, "PeeringRequest", "liqo", SecretReference { name: Some("pr-kubeconfig".into()), namespace: Some("liqo".into()) });
    liqo_testenv::eventually("the first round reported", || async { (count(&local_log, "PATCH", "/status") >= 1).then_some(()) }).await;
    assert_eq!(count(&remote_log, "POST", "/advertisements"), 0, "nothing published while off");
    config.send_modify(|c| c.as_mut().unwrap().discovery_config.enable_advertisement = true);
    liqo_testenv::eventually("published once turned on", || async { (count(&remote_log, "POST", "/advertisements") == 1).then_some(()) })
        .await;
}

/// A local API server whose kubeconfig Secret goes once `gone` is set, and a remote that
/// refuses (403) the deletion of our Advertisement: a peer that unjoined, whose API server
/// still authenticates our token from its cache but no longer grants it anything.
fn unjoined_peer(log: Log, gone: Arc<std::sync::atomic::AtomicBool>, remote: bool) -> Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let (method, path) = (req.method().to_string(), req.uri().path().to_owned());
            let query = req.uri().query().unwrap_or_default().to_owned();
            log.lock().unwrap().push((method.clone(), format!("{path}?{query}")));
            let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
            let forbidden = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403});
            let (status, answer) = match (method.as_str(), path.as_str()) {
                ("GET", "/apis/discovery.liqo.io/v1alpha1/foreignclusters") => {
                    (200, json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignClusterList", "metadata": {}, "items": []}))
                }
                ("GET", p) if !remote && p.ends_with("/secrets/pr-kubeconfig") => {
                    if gone.load(std::sync::atomic::Ordering::Relaxed) {
                        (404, not_found)
                    } else {
                        (
                            200,
                            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pr-kubeconfig", "namespace": "liqo"},
                                     "data": {"kubeconfig": "cGVlci1rdWJlY29uZmln"}}),
                        )
                    }
                }
                ("GET", p) if remote && p.ends_with("/advertisements") => listed(&query, None),
                ("GET", p) if remote && p.contains("/advertisements/") => (404, not_found),
                ("POST", p) if remote && p.ends_with("/advertisements") => (201, advertisement()),
                ("DELETE", p) if remote && p.contains("/advertisements/") => (403, forbidden),
                (_, p) if !remote && p.ends_with("/status") => (200, json!({})),
                _ => (500, json!({})),
            };
            send.send_response(Response::builder().status(status).body(Body::from(serde_json::to_vec(&answer).unwrap())).unwrap());
        }
    });
    Client::new(service, "default")
}

fn advertisement() -> Value {
    json!({"apiVersion": "sharing.liqo.io/v1alpha1", "kind": "Advertisement", "metadata": {"name": format!("advertisement-{OWN}")},
           "spec": {"clusterId": OWN}})
}

/// Found by the chaos soak (seed 7): a peer that unjoins removes its kubeconfig Secret, our
/// access and our Advertisement on its side, then its request. Our withdrawal meets a 403 (its
/// API server still holds our token in its cache): with the Secret gone that is the end, not
/// a failure retried 10 s later. With the Secret still there (an admin deleted the request)
/// the 403 is retried.
#[tokio::test]
async fn a_403_from_a_peer_that_removed_its_kubeconfig_ends_the_withdrawal() {
    let (local_log, remote_log): (Log, Log) = Default::default();
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let remote = unjoined_peer(remote_log.clone(), gone.clone(), true);
    let peers = Arc::new(FakePeers { remote, built: Default::default(), pinned: Default::default() });
    let (b, _config) = started(unjoined_peer(local_log.clone(), gone.clone(), false), peers);
    let source = SecretReference { name: Some("pr-kubeconfig".into()), namespace: Some("liqo".into()) };

    b.ensure(PEER, "PeeringRequest", "liqo", source.clone());
    liqo_testenv::eventually("published", || async { (count(&remote_log, "POST", "/advertisements") >= 1).then_some(()) }).await;
    let refused = b.release(PEER, "PeeringRequest", Some(source.clone())).await;
    assert!(refused.is_err(), "the Secret is there: a 403 is retried");

    let before = count(&remote_log, "POST", "/advertisements");
    b.ensure(PEER, "PeeringRequest", "liqo", source.clone());
    liqo_testenv::eventually("published again", || async { (count(&remote_log, "POST", "/advertisements") > before).then_some(()) }).await;
    gone.store(true, std::sync::atomic::Ordering::Relaxed);
    b.release(PEER, "PeeringRequest", Some(source)).await.expect("the peer unjoined: nothing left to withdraw");
    assert_eq!(count(&remote_log, "DELETE", "/advertisements/"), 2, "the withdrawal was tried, with the client we had");
}

/// Our side for [`a_brief_outage_of_the_peer_costs_no_status_write_a_long_one_is_told`]: the
/// kubeconfig Secret, and every status write of the request kept as the state it wrote.
fn local_keeping_reports(written: Arc<Mutex<Vec<String>>>) -> Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let (method, path) = (req.method().to_string(), req.uri().path().to_owned());
            let body: Value = serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap_or(Value::Null);
            let (status, answer) = match method.as_str() {
                "GET" if path.ends_with("/secrets/pr-kubeconfig") => (
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pr-kubeconfig", "namespace": "liqo"},
                           "data": {"kubeconfig": "cGVlci1rdWJlY29uZmln"}}),
                ),
                "GET" if path == "/apis/discovery.liqo.io/v1alpha1/foreignclusters" => {
                    (200, json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignClusterList", "metadata": {}, "items": []}))
                }
                "PATCH" if path.ends_with(&format!("/peeringrequests/{PEER}/status")) => {
                    let state = body["status"]["advertisementStatus"].as_str().unwrap_or_default();
                    let reason = body["status"]["conditions"][0]["reason"].as_str().unwrap_or_default();
                    written.lock().unwrap().push(format!("{state} {reason}"));
                    (
                        200,
                        json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest",
                                 "metadata": {"name": PEER, "namespace": "liqo"}, "spec": {}, "status": body["status"]}),
                    )
                }
                _ => (404, json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})),
            };
            send.send_response(Response::builder().status(status).body(Body::from(serde_json::to_vec(&answer).unwrap())).unwrap());
        }
    });
    Client::new(service, "default")
}

/// A peer that goes down for less than the grace (three periods) leaves its request saying
/// `Created`: no status write when it goes, none when it is back (a whole fleet's outage and
/// return cost the hub two writes a peer before). One down for longer is told
/// (`RemoteUnreachable`), and so is its return. The outages are held for a set time (what the
/// test is about); what follows each is waited for.
#[tokio::test]
async fn a_brief_outage_of_the_peer_costs_no_status_write_a_long_one_is_told() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let period = Duration::from_secs(1);
    let (remote_log, written): (Log, Arc<Mutex<Vec<String>>>) = Default::default();
    let up = api(remote_log.clone());
    let down = Arc::new(AtomicBool::new(false));
    let flag = down.clone();
    let switchable = tower::service_fn(move |req: Request<Body>| {
        let (up, down) = (up.clone(), flag.load(Ordering::Relaxed));
        async move {
            if down {
                return Err::<Response<Body>, tower::BoxError>(
                    std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused").into(),
                );
            }
            up.send(req).await.map_err(Into::into)
        }
    });
    let peers = Arc::new(FakePeers { remote: Client::new(switchable, "default"), built: Default::default(), pinned: Default::default() });
    let (_, id) = watch::channel(Some(OWN.to_owned()));
    let (_config, config_rx) = watch::channel(Some(liqo_api::ClusterConfigSpec::default()));
    let b = Broadcasters::new(local_keeping_reports(written.clone()), id, config_rx, reflector::store::<Node>().0, peers, period, "liqo");
    b.ensure(PEER, "PeeringRequest", "liqo", SecretReference { name: Some("pr-kubeconfig".into()), namespace: Some("liqo".into()) });
    let reports = || written.lock().unwrap().clone();
    let asked = || remote_log.lock().unwrap().len();
    liqo_testenv::eventually("the first round told", || async { (!reports().is_empty()).then_some(()) }).await;
    assert_eq!(reports(), ["Created Published"]);

    // Down for two periods, then back: nothing written either way.
    down.store(true, Ordering::Relaxed);
    tokio::time::sleep(period * 2).await;
    down.store(false, Ordering::Relaxed);
    let before = asked();
    liqo_testenv::eventually("the peer asked again once back", || async { (asked() > before + 1).then_some(()) }).await;
    assert_eq!(reports(), ["Created Published"], "a brief outage is no news to the request");

    // Down for five periods: told once the grace is over, and its end too.
    down.store(true, Ordering::Relaxed);
    liqo_testenv::eventually("a long outage told", || async { (reports().len() > 1).then_some(()) }).await;
    assert_eq!(reports(), ["Created Published", "Pending RemoteUnreachable"], "told once");
    down.store(false, Ordering::Relaxed);
    liqo_testenv::eventually("the return told", || async { (reports().len() > 2).then_some(()) }).await;
    assert_eq!(reports(), ["Created Published", "Pending RemoteUnreachable", "Created Published"]);
}
