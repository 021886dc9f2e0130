//! Reconciler steady state with 1,000 joined peers: memory held by the stores (RSS against the
//! same process before they were filled) and API requests per peer per health period, counted
//! by mock API servers while every ForeignCluster is reconciled once (one health period).
//!
//! `cargo bench -p liqo-reconciler --bench steady_state` (or `just bench`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::{Request, Response};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::client::Body;
use kube::runtime::reflector;
use kube::runtime::watcher;
use liqo_api::{Advertisement, AdvertisementSpec, ClusterConfigSpec, ForeignCluster, TrustMode};
use liqo_reconciler::Error;
use liqo_reconciler::context::Shared;
use liqo_reconciler::foreign_cluster::{Ctx, MANAGED_BY, reconcile};
use liqo_reconciler::machinery::slim_store::{exists, secret_data, slim_store};
use liqo_reconciler::remote::auth::service::{ApiServer, kubeconfig};
use liqo_reconciler::remote::auth::wire::{IdentityRequest, IdentityResponse, Ids};
use liqo_reconciler::remote::peer::{Peers, RemoteAccess, Trust};
use serde_json::json;
use tokio::sync::watch;

const PEERS: usize = 1000;
const HOME: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

/// Bytes the heap holds, counted by the allocator below.
static LIVE: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; only sizes are counted.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_bytes() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

#[derive(Default)]
struct Counts {
    reads: AtomicUsize,
    writes: AtomicUsize,
}

/// What the mock API server keeps: the status last written for each ForeignCluster.
type Written = Arc<std::sync::Mutex<std::collections::HashMap<String, serde_json::Value>>>;

/// A mock API server that answers every GET with our PeeringRequest (a healthy remote), keeps
/// the ForeignCluster statuses written to it, and counts reads and writes.
fn counting_api(counts: Arc<Counts>, written: Written) -> Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let counter = if req.method() == http::Method::GET { &counts.reads } else { &counts.writes };
            counter.fetch_add(1, Ordering::Relaxed);
            let path = req.uri().path().to_owned();
            let body: serde_json::Value = serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap_or_default();
            let answer = match path.strip_suffix("/status").and_then(|p| p.rsplit('/').next()) {
                Some(name) => {
                    written.lock().unwrap().insert(name.to_owned(), body["status"].clone());
                    json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": name},
                           "spec": {}, "status": body["status"]})
                }
                None => json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest", "metadata": {"name": HOME},
                    "spec": {"clusterIdentity": {"clusterID": HOME}, "namespace": "liqo",
                             "kubeConfigRef": {"name": format!("pr-kubeconfig-{HOME}"), "namespace": "liqo"}}}),
            };
            send.send_response(Response::builder().status(200).body(Body::from(serde_json::to_vec(&answer).unwrap())).unwrap());
        }
    });
    Client::new(service, "default")
}

struct OneRemote(Client);

impl Peers for OneRemote {
    async fn probe_trust(&self, _: &str) -> Result<TrustMode, Error> {
        Err(Error::NotReady("not in steady state"))
    }
    async fn ids(&self, _: &str, _: Trust) -> Result<Ids, Error> {
        Err(Error::NotReady("not in steady state"))
    }
    async fn ca(&self, _: &str, _: Trust) -> Result<String, Error> {
        Err(Error::NotReady("not in steady state"))
    }
    async fn identity(&self, _: &str, _: Trust, _: &IdentityRequest) -> Result<IdentityResponse, Error> {
        Err(Error::NotReady("not in steady state"))
    }
    async fn api_client(&self, _: &RemoteAccess) -> Result<Client, Error> {
        Ok(self.0.clone())
    }
    async fn cluster_info_ca(&self, _: &str, _: Trust) -> Result<String, Error> {
        Err(Error::NotReady("not in steady state"))
    }
}

fn peer_id(i: usize) -> String {
    format!("{i:08x}-0000-4000-8000-000000000000")
}

fn secret(name: String, key: &str, value: &str) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            namespace: Some("liqo".into()),
            labels: Some([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())].into()),
            ..Default::default()
        },
        data: Some([(key.to_owned(), ByteString(value.as_bytes().to_vec()))].into()),
        ..Default::default()
    }
}

/// What one round of reconciles over every peer cost.
struct Period {
    requests: usize,
    writes: usize,
    took: Duration,
}

impl Period {
    async fn measure(ctx: &Arc<Ctx<OneRemote>>, fcs: &[Arc<ForeignCluster>], local: &Counts, remote: &Counts) -> Self {
        let sum = |c: &Counts| (c.reads.load(Ordering::Relaxed), c.writes.load(Ordering::Relaxed));
        let ((lr, lw), (rr, rw)) = (sum(local), sum(remote));
        let started = Instant::now();
        for fc in fcs {
            reconcile(fc.clone(), ctx.clone()).await.unwrap();
        }
        let took = started.elapsed();
        let ((lr2, lw2), (rr2, rw2)) = (sum(local), sum(remote));
        Self { requests: (lr2 - lr) + (rr2 - rr), writes: (lw2 - lw) + (rw2 - rw), took }
    }

    fn print(&self, what: &str) {
        println!(
            "  {what}: {} requests for {PEERS} peers = {:.2} per peer, {} writes; {:.1} µs of reconcile per peer",
            self.requests,
            self.requests as f64 / PEERS as f64,
            self.writes,
            self.took.as_secs_f64() * 1e6 / PEERS as f64
        );
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let (local, remote) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
        let written: Written = Default::default();
        let ca = liqo_certs::issue::new_ca("remote-api-ca", time::OffsetDateTime::now_utc(), time::Duration::days(1)).unwrap().cert_pem;
        let fp = liqo_certs::inspect::fingerprint_sha256(&ca).unwrap();
        let api_server = ApiServer { url: "https://remote.example:6443".into(), ca_pem: ca.clone() };
        let issued = kubeconfig(&api_server, "remote", "liqo-remote", "liqo", "x".repeat(900)).unwrap();
        let baseline = rss_kib();

        // The stores of 1,000 joined peers: ForeignClusters, their two Secrets, their Advertisements.
        let (secrets, mut secrets_w) = slim_store(secret_data);
        let (adverts, mut adverts_w) = slim_store(exists::<Advertisement>);
        let (fcs, mut fcs_w) = reflector::store::<ForeignCluster>();
        for i in 0..PEERS {
            let id = peer_id(i);
            let name = format!("peer-{i}");
            secrets_w.apply_watcher_event(&watcher::Event::Apply(secret(format!("{name}-ca-data"), "ca.crt", &ca)));
            secrets_w.apply_watcher_event(&watcher::Event::Apply(secret(format!("{name}-identity"), "kubeconfig", &issued)));
            let spec = AdvertisementSpec { cluster_id: id.clone(), kube_config_ref: None, resources: Default::default(), timestamp: None };
            adverts_w.apply_watcher_event(&watcher::Event::Apply(Advertisement::new(&format!("advertisement-{id}"), spec)));
            let fc: ForeignCluster = serde_json::from_value(json!({
                "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
                "metadata": {"name": name, "uid": format!("uid-{i}"), "resourceVersion": "1", "generation": 1,
                             "finalizers": ["discovery.liqo.io/peered"]},
                "spec": {"clusterIdentity": {"clusterID": id}, "namespace": "liqo", "join": true, "authUrl": "https://remote.example:8443",
                         "discoveryType": "Manual", "allowUntrustedCA": true, "trustMode": "Untrusted"},
                "status": {}
            }))
            .unwrap();
            fcs_w.apply_watcher_event(&watcher::Event::Apply(fc));
        }
        let filled = rss_kib();

        let (_, id_rx) = watch::channel(Some(HOME.to_owned()));
        let (_, cfg_rx) = watch::channel(Some(ClusterConfigSpec::default()));
        let shared = Shared::new(
            counting_api(local.clone(), written.clone()),
            "liqo",
            id_rx,
            cfg_rx,
            Arc::new(OneRemote(counting_api(remote.clone(), written.clone()))),
            fcs.clone(),
        );
        let api_server = ApiServer { url: "https://home.example:6443".into(), ca_pem: ca.clone() };
        let ctx = Arc::new(Ctx::new(shared, api_server, None, secrets, adverts));

        // The ForeignClusters as the API server holds them once their status settled.
        let steady: Vec<Arc<ForeignCluster>> = fcs.state().into_iter().map(|fc| settle(fc, &fp)).collect();
        let period = Period::measure(&ctx, &steady, &local, &remote).await;
        let after_period = rss_kib();

        // A round where every peer's Advertisement disappeared (one status write each), one where
        // it came back (one more), then a health period again: nothing left to write.
        let ids: Vec<String> = (0..PEERS).map(peer_id).collect();
        for id in &ids {
            let spec = AdvertisementSpec { cluster_id: id.clone(), kube_config_ref: None, resources: Default::default(), timestamp: None };
            adverts_w.apply_watcher_event(&watcher::Event::Delete(Advertisement::new(&format!("advertisement-{id}"), spec)));
        }
        let lost = Period::measure(&ctx, &steady, &local, &remote).await;
        let as_written = |fcs: &[Arc<ForeignCluster>]| -> Vec<Arc<ForeignCluster>> {
            let written = written.lock().unwrap();
            fcs.iter()
                .map(|fc| {
                    let mut fc = (**fc).clone();
                    if let Some(status) = written.get(&fc.metadata.name.clone().unwrap()) {
                        fc.status = Some(serde_json::from_value(status.clone()).unwrap());
                    }
                    Arc::new(fc)
                })
                .collect()
        };
        let after_loss = as_written(&steady);
        for id in &ids {
            let spec = AdvertisementSpec { cluster_id: id.clone(), kube_config_ref: None, resources: Default::default(), timestamp: None };
            adverts_w.apply_watcher_event(&watcher::Event::Apply(Advertisement::new(&format!("advertisement-{id}"), spec)));
        }
        let back = Period::measure(&ctx, &after_loss, &local, &remote).await;
        let settled_again = as_written(&after_loss);
        let again = Period::measure(&ctx, &settled_again, &local, &remote).await;
        let after = rss_kib();

        println!("reconciler steady state, {PEERS} joined peers (mock API servers)");
        println!("  RSS before the stores were filled: {:.1} MiB", baseline as f64 / 1024.0);
        println!(
            "  RSS with {PEERS} ForeignClusters, {} Secrets, {PEERS} Advertisements in the stores: {:.1} MiB ({:.2}x the empty process, +{:.1} MiB)",
            2 * PEERS,
            filled as f64 / 1024.0,
            filled as f64 / baseline.max(1) as f64,
            (filled - baseline) as f64 / 1024.0
        );
        println!("  RSS after a health period over every peer: {:.1} MiB", after_period as f64 / 1024.0);
        println!("  RSS after the rounds where Advertisements went and came back: {:.1} MiB", after as f64 / 1024.0);
        period.print("one health period");
        lost.print("the round where every Advertisement disappeared");
        back.print("the round where they came back");
        again.print("the next health period");
    });
    drop(rt);
    check_cost::run();
}

/// The ForeignCluster as the API server holds it after its status settled: the status the
/// controller computes for a healthy peer (were it different, the run would show writes).
fn settle(fc: Arc<ForeignCluster>, fp: &str) -> Arc<ForeignCluster> {
    let mut fc = (*fc).clone();
    let id = fc.spec.remote_cluster_id().unwrap().to_owned();
    let name = fc.metadata.name.clone().unwrap();
    let status = fc.status.get_or_insert_with(Default::default);
    status.ca_data_ref = Some(liqo_api::SecretRef { name: format!("{name}-ca-data"), namespace: Some("liqo".into()) });
    status.ca_fingerprint = Some(fp.to_owned());
    status.auth_status = Some(liqo_api::AuthStatus::Accepted);
    status.outgoing = Some(liqo_api::OutgoingStatus {
        joined: true,
        remote_peering_request_name: Some(HOME.into()),
        advertisement: Some(format!("advertisement-{id}")),
        presented_fingerprint: None,
        // What the home below handed it, renewed long after the run.
        handed_kubeconfig: Some(liqo_api::HandedKubeconfig {
            api_url: "https://home.example:6443".into(),
            ca_fingerprint: fp.to_owned(),
            renew_after: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_hours(24 * 300),
            )),
        }),
    });
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    use liqo_api::reasons::{ConditionType as T, Reason as R, Status as S};
    let c = liqo_reconciler::reporting::conditions::Wanted::new;
    for w in [
        c(T::Trusted, S::False, R::UntrustedAllowed, "unknown certificate authority, allowed by spec.allowUntrustedCA".to_owned()),
        c(T::Authenticated, S::True, R::IdentityIssued, format!("identity stored in Secret {name}-identity")),
        c(T::RemoteReachable, S::True, R::Reachable, "the remote API server answered".to_owned()),
        c(T::CaVerified, S::True, R::Pinned, format!("the remote API server certificate verified against CA {fp}")),
        c(T::Joined, S::True, R::Joined, "the remote accepted our PeeringRequest and advertises to us".to_owned()),
    ] {
        liqo_reconciler::reporting::conditions::set(&mut status.conditions, w, fc.metadata.generation, now.clone());
    }
    Arc::new(fc)
}

/// What one health check costs the reconciler's CPU over real TLS on loopback (the server on a
/// thread of its own, not counted): as before sessions were kept (a Network made for each check:
/// the kubeconfig parsed, the TLS configuration built, a full handshake) and now (one Network:
/// the session resumed, a full handshake every `FULL_HANDSHAKE_EVERY`) and with the connection
/// kept from one check to the next (a new one, in full, every `RETIRE_AFTER` checks), in
/// alternating rounds; and the memory an access kept costs, over 1,000 identities.
mod check_cost {
    use std::sync::Arc;
    use std::time::Duration;

    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper_util::rt::TokioIo;
    use liqo_reconciler::remote::auth::client::Verify;
    use liqo_reconciler::remote::peer::{Network, Peers, RemoteAccess};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    const CHECKS: usize = 400;
    const ROUNDS: usize = 5;
    const ACCESSES: usize = 1000;

    fn thread_cpu() -> Duration {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }

    /// An API server as kube-apiserver serves TLS (stateless tickets, one per handshake, the cipher
    /// suite chosen as Go chooses it; `STEADY_RUSTLS_SUITES=1`: rustls's order, as the fleet's peers
    /// chose before they chose as Go) on a
    /// thread of its own; its address and CA.
    fn server() -> (std::net::SocketAddr, String) {
        let now = time::OffsetDateTime::now_utc();
        let ca = liqo_certs::issue::new_ca("peer-ca", now, time::Duration::days(1)).unwrap();
        let leaf = liqo_certs::issue::issue_serving(&ca, &["127.0.0.1".to_owned()], now, time::Duration::days(1)).unwrap();
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
            .chain(CertificateDer::pem_slice_iter(ca.cert_pem.as_bytes()))
            .collect::<Result<_, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
        // Chooses the cipher suite as kube-apiserver (Go's crypto/tls) does.
        let provider = if std::env::var_os("STEADY_RUSTLS_SUITES").is_some() {
            rustls::crypto::ring::default_provider()
        } else {
            liqo_testenv::https::as_go_chooses()
        };
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        tls.ignore_client_order = true;
        tls.ticketer = rustls::crypto::ring::Ticketer::new().unwrap();
        tls.send_tls13_tickets = 1;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((stream, _)) = listener.accept().await {
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(stream).await else { return };
                        let service = hyper::service::service_fn(|_req: hyper::Request<hyper::body::Incoming>| async {
                            let body = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"liqo"}}"#;
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(body))))
                        });
                        let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
                    });
                }
            });
        });
        (addr, ca.cert_pem)
    }

    fn access(addr: std::net::SocketAddr, ca: &str, token: &str) -> RemoteAccess {
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: https://{addr}\n    certificate-authority-data: {}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: u\n    namespace: liqo-tenant-x\ncurrent-context: remote\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca)
        );
        RemoteAccess { kubeconfig, api_url: Some(format!("https://{addr}")), ca_pem: Some(ca.to_owned()) }
    }

    async fn check(network: &Network, access: &RemoteAccess) {
        let client = network.api_client(access).await.unwrap();
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        api.get("liqo").await.unwrap();
    }

    /// A health check as the reconciler makes it now: over the connection kept from the last
    /// one, else over a new one (kept after it); the answer read as the object it is.
    async fn kept_check(network: &Network, access: &RemoteAccess) {
        use liqo_reconciler::remote::kept::Outcome;
        let answer = match network.check_kept("peer", access, Duration::from_secs(5)).await {
            Outcome::Answered { answer, .. } => answer,
            _ => network.health_check("peer", access, "/api/v1/namespaces/liqo", None).await.unwrap().0,
        };
        let _: k8s_openapi::api::core::v1::Namespace = serde_json::from_slice(&answer.body).unwrap();
    }

    /// How a round's checks are made.
    #[derive(Clone, Copy)]
    enum Way<'a> {
        Fresh,
        Resumed(&'a Network),
        Kept(&'a Network),
    }

    /// Client CPU per check, in microseconds, over `CHECKS` checks.
    async fn round(way: Way<'_>, access: &RemoteAccess) -> f64 {
        let started = thread_cpu();
        for _ in 0..CHECKS {
            match way {
                Way::Resumed(network) => check(network, access).await,
                Way::Fresh => check(&Network::new(Verify::Nothing, Duration::from_secs(10)), access).await,
                Way::Kept(network) => kept_check(network, access).await,
            }
        }
        (thread_cpu() - started).as_secs_f64() * 1e6 / CHECKS as f64
    }

    fn median(mut xs: Vec<f64>) -> f64 {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    }

    pub fn run() {
        let (addr, ca) = server();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let ours = access(addr, &ca, &"t".repeat(900));
            let kept = Network::new(Verify::Nothing, Duration::from_secs(10));
            check(&kept, &ours).await;
            let connections = Network::new(Verify::Nothing, Duration::from_secs(10));
            kept_check(&connections, &ours).await;
            let (mut fresh, mut resumed, mut over_kept) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                fresh.push(round(Way::Fresh, &ours).await);
                resumed.push(round(Way::Resumed(&kept), &ours).await);
                over_kept.push(round(Way::Kept(&connections), &ours).await);
            }
            let (before, after) = (median(fresh.clone()), median(resumed.clone()));
            let on_kept = median(over_kept.clone());
            println!("a health check's client CPU over real TLS, {ROUNDS} alternating rounds of {CHECKS} checks, medians");
            println!(
                "  a client made from nothing (kubeconfig parsed, TLS configuration built, full handshake): {before:.0} us {fresh:.0?}"
            );
            println!(
                "  sessions kept (resumed, a full handshake every {}): {after:.0} us {resumed:.0?}",
                liqo_reconciler::remote::sessions::FULL_HANDSHAKE_EVERY
            );
            println!("  ratio: {:.2}x", after / before);
            println!(
                "  connections kept (a new one, in full, every {} checks): {on_kept:.0} us {over_kept:.0?}: {:.2}x the resumed, {:.2}x from nothing",
                liqo_reconciler::remote::kept::RETIRE_AFTER,
                on_kept / after,
                on_kept / before
            );
            println!(
                "  handshakes of the kept connections: {} full, {} resumed",
                connections.sessions.handshakes("full"),
                connections.sessions.handshakes("resumed")
            );
            println!(
                "  handshakes of the kept sessions: {} full, {} resumed",
                kept.sessions.handshakes("full"),
                kept.sessions.handshakes("resumed")
            );

            // What an access kept costs: 1,000 identities, their clients made (kept without a
            // ticket), then each checked twice (kept with one), in bytes the heap holds.
            let many = Network::new(Verify::Nothing, Duration::from_secs(10));
            let accesses: Vec<RemoteAccess> = (0..ACCESSES).map(|i| access(addr, &ca, &format!("{i:0>900}"))).collect();
            let settled = || async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                super::live_bytes()
            };
            let before = settled().await;
            for a in &accesses {
                drop(many.api_client(a).await.unwrap());
            }
            let made = settled().await;
            for a in &accesses {
                check(&many, a).await;
                check(&many, a).await;
            }
            let ticketed = settled().await;
            let per = |from: isize, to: isize| (to - from) as f64 / ACCESSES as f64 / 1024.0;
            println!(
                "  heap kept per access ({} identities): {:.2} KiB its configurations, {:.2} KiB more with its ticket: {:.2} KiB",
                many.sessions.len(),
                per(before, made),
                per(made, ticketed),
                per(before, ticketed)
            );
        });
    }
}
