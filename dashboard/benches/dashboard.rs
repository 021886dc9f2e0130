//! The dashboard with N ForeignClusters (and their Advertisements) in its stores (`BENCH_PEERS`,
//! default 1,000): the home view's render time and size (its first page, a search, a state),
//! how long a change takes to reach 20 open pages' live channels, the API requests those page
//! views and channels cost (counted by a mock API server), and the RSS.
//!
//! `cargo bench -p liqo-dashboard --bench dashboard` (or `just bench`);
//! `BENCH_PEERS=10000 cargo bench -p liqo-dashboard --bench dashboard`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use http_body_util::BodyExt;
use kube::Client;
use kube::runtime::watcher;
use liqo_dashboard::{Dashboard, Stores, router};
use serde_json::json;
use tower::ServiceExt;

static PEERS: std::sync::LazyLock<usize> =
    std::sync::LazyLock::new(|| std::env::var("BENCH_PEERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000));
const PAGES: usize = 20;
const ROUNDS: usize = 15;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn counting_api(requests: Arc<AtomicUsize>) -> Client {
    let (service, mut handle) = tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    tokio::spawn(async move {
        while let Some((_, send)) = handle.next_request().await {
            requests.fetch_add(1, Ordering::Relaxed);
            send.send_response(http::Response::builder().status(500).body(kube::client::Body::from(b"{}".to_vec())).unwrap());
        }
    });
    Client::new(service, "default")
}

fn foreign_cluster(i: usize) -> liqo_api::ForeignCluster {
    let joined = i.is_multiple_of(3);
    serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": format!("peer-{i:05}"), "labels": {"discovery.liqo.io/searchdomain": "example.com"}},
        "spec": {"clusterIdentity": {"clusterID": format!("{i:08x}-0000-4000-8000-000000000000")}, "join": i.is_multiple_of(2),
                 "discoveryType": if i.is_multiple_of(2) { "LAN" } else { "WAN" }, "authUrl": format!("https://10.0.{}.{}:30443", i / 250, i % 250)},
        "status": {"conditions": [
            {"type": "Trusted", "status": "True", "reason": "Trusted", "message": "the auth service certificate verified", "lastTransitionTime": "2026-11-23T10:00:00Z"},
            {"type": "Authenticated", "status": if i.is_multiple_of(7) { "False" } else { "True" }, "reason": if i.is_multiple_of(7) { "TokenRefused" } else { "IdentityIssued" },
             "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"},
            {"type": "Joined", "status": if joined { "True" } else { "False" }, "reason": if joined { "Joined" } else { "WaitingForAdvertisement" },
             "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"}],
            "outgoing": {"joined": joined}, "incoming": {"joined": i.is_multiple_of(5)}}
    }))
    .unwrap()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let baseline = rss_kib();
        let requests = Arc::new(AtomicUsize::new(0));
        let (stores, mut w) = Stores::detached();
        for i in 0..*PEERS {
            w.foreign.apply_watcher_event(&watcher::Event::Apply(foreign_cluster(i)));
            let spec = serde_json::from_value(json!({"clusterId": format!("{i:08x}-0000-4000-8000-000000000000"),
                "resources": {"cpu": "8", "memory": "32Gi", "pods": "220"}}))
            .unwrap();
            let mut advertisement = liqo_api::Advertisement::new(&format!("advertisement-{i}"), spec);
            advertisement.metadata.namespace = Some(liqo_api::names::tenant_namespace(&format!("{i:08x}-0000-4000-8000-000000000000")));
            w.advertisements.apply_watcher_event(&watcher::Event::Apply(advertisement));
        }
        let dashboard = Dashboard::new(counting_api(requests.clone()), "liqo", stores);
        let filled = rss_kib();

        // The home view, rendered as a page view renders it: its first page, a search for one
        // peer, the peers in one state.
        let view = |path: &'static str| {
            let dashboard = dashboard.clone();
            async move {
                let mut renders = vec![];
                let mut size = 0;
                for _ in 0..ROUNDS {
                    let started = Instant::now();
                    let resp = router(dashboard.clone()).oneshot(http::Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
                    assert_eq!(resp.status(), http::StatusCode::OK);
                    size = resp.into_body().collect().await.unwrap().to_bytes().len();
                    renders.push(started.elapsed());
                }
                (median(renders), size)
            }
        };
        let views = [
            ("first page", view("/").await),
            ("search for one peer (q=peer-00042)", view("/?q=peer-00042").await),
            ("state TokenRefused, page 2", view("/?state=TokenRefused&available=2").await),
        ];

        // 20 open pages' live channels; a change reaches all of them.
        let mut channels = vec![];
        for _ in 0..PAGES {
            let resp = router(dashboard.clone()).oneshot(http::Request::get("/events").body(Body::empty()).unwrap()).await.unwrap();
            channels.push(resp.into_body());
        }
        let mut reach = vec![];
        for _ in 0..ROUNDS {
            let started = Instant::now();
            w.changed.send_modify(|n| *n += 1);
            for c in &mut channels {
                loop {
                    let frame = c.frame().await.unwrap().unwrap();
                    if frame.data_ref().is_some_and(|d| String::from_utf8_lossy(d).contains("event: change")) {
                        break;
                    }
                }
            }
            reach.push(started.elapsed());
        }
        // And every open page fetching the view again, as the live page does.
        for _ in 0..PAGES {
            let resp = router(dashboard.clone()).oneshot(http::Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
            let _ = resp.into_body().collect().await.unwrap();
        }
        let after = rss_kib();

        let n = *PEERS;
        println!("dashboard, {n} ForeignClusters and {n} Advertisements in the stores");
        for (what, (render, size)) in views {
            println!(
                "  home view, {what}: median {:.1} ms over {ROUNDS} renders ({} KiB of HTML)",
                render.as_secs_f64() * 1e3,
                size / 1024
            );
        }
        println!(
            "  a change reaching {PAGES} open pages' live channels: median {:.2} ms over {ROUNDS} changes",
            median(reach).as_secs_f64() * 1e3
        );
        println!("  API requests for {} page views and {PAGES} live channels: {}", ROUNDS + PAGES, requests.load(Ordering::Relaxed));
        println!(
            "  RSS: {:.1} MiB empty, {:.1} MiB with the stores filled, {:.1} MiB after serving",
            baseline as f64 / 1024.0,
            filled as f64 / 1024.0,
            after as f64 / 1024.0
        );
    });
}
