//! The auth service under abuse, on loopback, bounded: an honest peer asks `/ids` (a new TLS
//! connection each time, as a peer does) 3,000 times alone, then 3,000 times while 8 connections
//! flood `POST /identity` with wrong tokens as fast as they can. Reports the honest peer's
//! success rate and latency in both rounds (the first is the baseline), what the flood got
//! (403 before the limit, 429 after), and how many API requests the flood caused.
//!
//! `cargo bench -p liqo-reconciler --bench auth_abuse` (or `just bench`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use liqo_api::ClusterConfigSpec;
use liqo_reconciler::remote::auth::rate::{Limiter, Rate};
use liqo_reconciler::remote::auth::service::{ApiServer, AuthService, IdentityLabels};
use liqo_serve::{CertFiles, Limits, Refused, ReloadingCert, serve_https_limited, server_config};
use liqo_testenv::https::{connect, request, send};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::json;
use tokio::sync::watch;

const HONEST_REQUESTS: usize = 3000;
const FLOODERS: usize = 8;
const OWN: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

/// An API server that knows Secret `auth-token` and counts the requests it gets.
fn fake_api(requests: Arc<AtomicUsize>) -> Client {
    let service = tower::service_fn(move |_req: Request<Body>| {
        requests.fetch_add(1, Ordering::Relaxed);
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "auth-token", "namespace": "liqo"},
                            "data": {"token": "czNjcmV0"}});
        async move { Ok::<_, Infallible>(Response::new(Body::from(serde_json::to_vec(&secret).unwrap()))) }
    });
    Client::new(service, "default")
}

struct Round {
    ok: usize,
    latencies: Vec<Duration>,
}

impl Round {
    fn percentile(&self, p: f64) -> Duration {
        let mut l = self.latencies.clone();
        l.sort();
        l[((l.len() as f64 - 1.0) * p).round() as usize]
    }
}

async fn honest_round(addr: SocketAddr, ca: &Path) -> Round {
    let mut round = Round { ok: 0, latencies: Vec::with_capacity(HONEST_REQUESTS) };
    for _ in 0..HONEST_REQUESTS {
        let started = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(5), request(addr, ca, "GET", "/ids", None)).await;
        round.latencies.push(started.elapsed());
        if answer.is_ok_and(|a| a.status == 200) {
            round.ok += 1;
        }
    }
    round
}

fn report(name: &str, r: &Round) {
    println!(
        "  {name:<22} {:>3}/{HONEST_REQUESTS} answered 200   p50 {:>7.2} ms   p99 {:>7.2} ms",
        r.ok,
        r.percentile(0.5).as_secs_f64() * 1e3,
        r.percentile(0.99).as_secs_f64() * 1e3
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    liqo_certs::files::ensure(certs.path(), &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    let ca: PathBuf = certs.path().join("ca.crt");
    let cert = ReloadingCert::load(CertFiles { cert: certs.path().join("tls.crt"), key: certs.path().join("tls.key") }).unwrap();
    let api_requests = Arc::new(AtomicUsize::new(0));
    let outcomes = Family::<IdentityLabels, Counter>::default();
    let (_id, cluster_id) = watch::channel(Some(OWN.to_owned()));
    let (_cfg, config) = watch::channel(Some(ClusterConfigSpec::default()));
    let service = Arc::new(AuthService {
        client: fake_api(api_requests.clone()),
        namespace: "liqo".into(),
        cluster_id,
        config,
        api_server: ApiServer { url: "https://api.example:6443".into(), ca_pem: String::new() },
        token_lifetime: Duration::from_secs(3600),
        limiter: Limiter::new(Rate::default()),
        outcomes: outcomes.clone(),
        guard: liqo_reconciler::remote::auth::service::IdentityGuard::new(
            kube::runtime::reflector::store::<liqo_api::ForeignCluster>().0,
            100,
            std::time::Duration::from_secs(10),
        ),
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = axum_server::Handle::new();
    let refused = Refused::default();
    tokio::spawn(serve_https_limited(listener, server_config(cert), service.router(), handle.clone(), Limits::default(), refused.clone()));
    handle.listening().await.unwrap();

    println!("auth service under abuse (loopback, {HONEST_REQUESTS} honest /ids requests per round, each on a new TLS connection)");
    let baseline = honest_round(addr, &ca).await;

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let flood_started = Instant::now();
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|_| {
            let (stop, sent, ca) = (stop.clone(), sent.clone(), ca.clone());
            tokio::spawn(async move {
                let mut conn = connect(addr, &ca).await;
                let body = serde_json::to_vec(&json!({"clusterID": PEER, "token": "guess"})).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    send(&mut conn, "POST", "/identity", Some("application/json"), body.clone()).await;
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let flooded = honest_round(addr, &ca).await;
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        let _ = f.await;
    }
    let flood_seconds = flood_started.elapsed().as_secs_f64();

    report("alone (baseline)", &baseline);
    report("during the flood", &flooded);
    let count = |result| outcomes.get_or_create(&IdentityLabels { result }).get();
    let total = sent.load(Ordering::Relaxed);
    println!(
        "  flood: {total} wrong-token requests in {flood_seconds:.1} s ({:.0}/s): {} answered 403, {} answered 429",
        total as f64 / flood_seconds,
        count("wrong_token"),
        count("rate_limited")
    );
    println!("  API requests caused by the flood: {} (one per request that got past the limit)", api_requests.load(Ordering::Relaxed));
    println!(
        "  honest p50 during / alone: {:.2}×; connections refused at the cap: {}",
        flooded.percentile(0.5).as_secs_f64() / baseline.percentile(0.5).as_secs_f64(),
        refused.get()
    );
}
