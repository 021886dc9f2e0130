//! Admission throughput and latency over TLS keep-alive on loopback, against the floor of
//! our own bare TLS endpoint, in the same run.
//!
//! The real webhook server (same TLS setup, same router) serves `/validate` and an extra
//! `/floor` route that reads the body and answers with a canned response of the same size,
//! decoding nothing. `wrk` posts the captured PeeringRequest fixture (as compact JSON, the
//! form the API server sends) to each with 16 and 64 connections and we print admissions/s,
//! p50/p99, the server's CPU per request and the ratios.
//!
//! Run with `just bench` (or `cargo bench -p liqo-webhook --bench admission`).
//! `BENCH_ROUNDS` (default 3) rounds of floor and `/validate`, alternating which goes first.
//! `BENCH_SECONDS` (default 10) sets the length of each wrk run; `BENCH_THREADS` (default 2)
//! the wrk threads. `BENCH_BODY=pretty` sends the fixture file as it is rather than in its
//! wire form (compact, as the API server sends it). `BENCH_ONLY=floor` or `validate` loads
//! one endpoint only (for profiling). Needs `wrk` on PATH (Debian package `wrk`).

/// The allocator of the binary, so the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use http_body_util::BodyExt;
use liqo_webhook::admission::{Endpoint, admit};
use liqo_webhook::metrics::Metrics;
use liqo_webhook::server::{App, admission_router, serve_https};
use liqo_webhook::state::{StoreView, store_of};
use liqo_webhook::tls::{CertFiles, ReloadingCert, server_config};

const FIXTURE: &str = "tests/fixtures/admission/peeringrequest-create-by-peer-sa.json";
const OWN_ID: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

struct Run {
    requests_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    requests: u64,
    errors: u64,
    /// CPU time this process (the server; `wrk` is another process) spent per request, in µs.
    server_cpu_us: f64,
}

fn main() {
    // `BENCH_DECIDE_ONLY=<rounds>`: only the decision loop, for profiling (`perf record`).
    if let Some(rounds) = std::env::var("BENCH_DECIDE_ONLY").ok().and_then(|v| v.parse::<u32>().ok()) {
        let (body, _) = request_body();
        let view = store_view();
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            let d = admit(Endpoint::Validate, std::hint::black_box(&body), &view).unwrap();
            std::hint::black_box(serde_json::to_vec(&d.review).unwrap());
        }
        println!("{:.2} µs per review", started.elapsed().as_secs_f64() * 1e6 / rounds as f64);
        return;
    }
    if Command::new("wrk").arg("--version").output().is_err() {
        eprintln!("SKIPPED: the admission benchmark needs `wrk` on PATH (apt-get install wrk)");
        return;
    }
    let seconds: u64 = std::env::var("BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let threads: u64 = std::env::var("BENCH_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let (body, form) = request_body();

    let view = store_view();
    // The answer the webhook gives; the floor returns the same number of bytes.
    let decision = admit(Endpoint::Validate, &body, &view).expect("fixture is a valid review");
    assert!(decision.denied.is_none(), "the benchmark request must be admitted");
    let answer = serde_json::to_vec(&decision.review).unwrap();
    let canned: &'static [u8] = Box::leak(vec![b' '; answer.len()].into_boxed_slice());

    // The decision alone, in this thread: what an admission costs above the floor's work.
    let started = std::time::Instant::now();
    let rounds = 20_000;
    for _ in 0..rounds {
        let d = admit(Endpoint::Validate, std::hint::black_box(&body), &view).unwrap();
        std::hint::black_box(serde_json::to_vec(&d.review).unwrap());
    }
    let decide_us = started.elapsed().as_secs_f64() * 1e6 / rounds as f64;

    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let metrics = Arc::new(Metrics::default());
    let addr = rt.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let sans = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        liqo_certs::files::ensure(dir.path(), &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
        let files = CertFiles { cert: dir.path().join("tls.crt"), key: dir.path().join("tls.key") };
        let cert = ReloadingCert::load(files).unwrap();
        cert.clone().spawn_reloader(Duration::from_secs(5), metrics.tls_reload_observer(cert.clone()));
        let app = App::new(Arc::new(view), metrics.clone());
        let router = admission_router(app).route(
            "/floor",
            post(move |b: Body| async move {
                let _ = b.collect().await;
                ([(header::CONTENT_TYPE, "application/json")], canned).into_response()
            }),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = axum_server::Handle::new();
        tokio::spawn(serve_https(listener, server_config(cert), router, handle.clone()));
        handle.listening().await.expect("listening");
        addr
    });

    let body_path = dir.path().join("review.json");
    std::fs::write(&body_path, &body).unwrap();
    let script = dir.path().join("post.lua");
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
             local f = assert(io.open(\"{}\", \"rb\"))\nwrk.body = f:read(\"*a\")\nf:close()\n",
            body_path.display()
        ),
    )
    .unwrap();

    println!(
        "admission benchmark: {} bytes of PeeringRequest in ({form}), {} bytes out, wrk -t{threads} -d{seconds}s, TLS keep-alive on loopback",
        body.len(),
        answer.len()
    );
    println!("decoding, deciding and encoding one review alone: {decide_us:.1} µs");
    println!("{:>5}  {:<9} {:>12} {:>9} {:>9} {:>8} {:>14}", "conns", "endpoint", "req/s", "p50 ms", "p99 ms", "errors", "server µs/req");
    // Rounds alternate which endpoint goes first, so a drift of the machine during the run
    // (other load, clock changes) does not always favour the same side; the ratio reported
    // is the median of the rounds' ratios.
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3).max(1);
    // `BENCH_ONLY=floor|validate`: one endpoint only, for profiling (`perf record`).
    if let Ok(path) = std::env::var("BENCH_ONLY") {
        for conns in [16u64, 64] {
            let r = wrk(&script, addr, &format!("/{path}"), conns, threads, seconds);
            println!(
                "{conns:>5}  {path:<9} {:>12.0} {:>9.2} {:>9.2} {:>8} {:>14.1}",
                r.requests_per_sec, r.p50_ms, r.p99_ms, r.errors, r.server_cpu_us
            );
        }
        let count = metric_sum(&metrics, |l| l.starts_with("liqo_webhook_admission_duration_seconds_count"));
        if count > 0.0 {
            println!(
                "mean time in admit() per review: {:.2} µs",
                metric_sum(&metrics, |l| l.starts_with("liqo_webhook_admission_duration_seconds_sum")) * 1e6 / count
            );
        }
        return;
    }
    for conns in [16u64, 64] {
        let mut ratios = Vec::new();
        let mut p99s = Vec::new();
        for round in 0..rounds {
            let run_floor = || wrk(&script, addr, "/floor", conns, threads, seconds);
            let run_validate = || {
                let before = admitted(&metrics);
                let r = wrk(&script, addr, "/validate", conns, threads, seconds);
                (r, admitted(&metrics) - before)
            };
            let (floor, (adm, counted)) = if round % 2 == 0 {
                let f = run_floor();
                (f, run_validate())
            } else {
                let v = run_validate();
                (run_floor(), v)
            };
            for (name, r) in [("floor", &floor), ("validate", &adm)] {
                println!(
                    "{conns:>5}  {name:<9} {:>12.0} {:>9.2} {:>9.2} {:>8} {:>14.1}",
                    r.requests_per_sec, r.p50_ms, r.p99_ms, r.errors, r.server_cpu_us
                );
            }
            assert!(counted >= adm.requests, "every request to /validate was admitted by the webhook ({counted} < {})", adm.requests);
            let ratio = adm.requests_per_sec / floor.requests_per_sec;
            println!(
                "{conns:>5}  round {}  throughput {:.0}% of floor, p99 {:.2}x floor, server CPU +{:.1} µs/req; {counted} admissions counted by the webhook",
                round + 1,
                100.0 * ratio,
                adm.p99_ms / floor.p99_ms,
                adm.server_cpu_us - floor.server_cpu_us
            );
            ratios.push(ratio);
            p99s.push(adm.p99_ms / floor.p99_ms);
        }
        ratios.sort_by(f64::total_cmp);
        p99s.sort_by(f64::total_cmp);
        println!(
            "{conns:>5}  median over {rounds} rounds: throughput {:.0}% of floor (min {:.0}%, max {:.0}%), p99 {:.2}x floor",
            100.0 * ratios[ratios.len() / 2],
            100.0 * ratios[0],
            100.0 * ratios[ratios.len() - 1],
            p99s[p99s.len() / 2]
        );
    }
}

/// The captured review as the benchmark sends it. The fixture file is pretty-printed for
/// reading (its README says so); the API server sends the same review as compact JSON, which
/// is the default here (`wire`). `BENCH_BODY=pretty` sends the file as it is.
fn request_body() -> (Vec<u8>, &'static str) {
    let file = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)).expect("fixture");
    if std::env::var("BENCH_BODY").as_deref() == Ok("pretty") {
        return (file, "the fixture file as it is, pretty-printed");
    }
    let wire = compact(&file);
    let same = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap();
    assert_eq!(same(&wire), same(&file), "compacting changes nothing but white space");
    (wire, "the fixture in its wire form: compact JSON, keys in the captured order")
}

/// `json` without the white space between tokens (strings untouched).
fn compact(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b.is_ascii_whitespace() {
            continue;
        } else if b == b'"' {
            in_string = true;
        }
        out.push(b);
    }
    out
}

/// Allowed admissions the webhook itself counted (its Prometheus counter).
fn admitted(metrics: &Metrics) -> u64 {
    metric_sum(metrics, |l| l.starts_with("liqo_webhook_admissions_total{") && l.contains("decision=\"allowed\"")) as u64
}

/// The sum of the webhook's samples on the lines `pick` chooses.
fn metric_sum(metrics: &Metrics, pick: impl Fn(&str) -> bool) -> f64 {
    metrics.encode().lines().filter(|l| pick(l)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

/// User + system CPU time of this process so far, in seconds (`/proc/self/stat`, clock ticks).
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

fn wrk(script: &Path, addr: std::net::SocketAddr, path: &str, conns: u64, threads: u64, seconds: u64) -> Run {
    let cpu_before = process_cpu_seconds();
    let out = Command::new("wrk")
        .args([
            format!("-t{threads}"),
            format!("-c{conns}"),
            format!("-d{seconds}s"),
            "--latency".into(),
            "-s".into(),
            script.display().to_string(),
            format!("https://127.0.0.1:{}{path}", addr.port()),
        ])
        .output()
        .expect("running wrk");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "wrk failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let cpu = process_cpu_seconds() - cpu_before;
    let mut run = parse_wrk(&text).unwrap_or_else(|| panic!("unexpected wrk output:\n{text}"));
    run.server_cpu_us = cpu * 1e6 / run.requests.max(1) as f64;
    run
}

fn parse_wrk(text: &str) -> Option<Run> {
    let mut run = Run { requests_per_sec: 0.0, p50_ms: 0.0, p99_ms: 0.0, requests: 0, errors: 0, server_cpu_us: 0.0 };
    for line in text.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("Requests/sec:"), Some(v)) => run.requests_per_sec = v.parse().ok()?,
            (Some("50%"), Some(v)) => run.p50_ms = millis(v)?,
            (Some("99%"), Some(v)) => run.p99_ms = millis(v)?,
            (Some(n), Some("requests")) => run.requests = n.parse().ok()?,
            (Some("Non-2xx"), _) => run.errors += line.rsplit(' ').next()?.parse::<u64>().ok()?,
            (Some("Socket"), Some("errors:")) => {
                run.errors += line.split(',').filter_map(|p| p.split_whitespace().last()?.parse::<u64>().ok()).sum::<u64>()
            }
            _ => {}
        }
    }
    (run.requests_per_sec > 0.0).then_some(run)
}

fn millis(v: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = v.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return None;
    };
    Some(num.parse::<f64>().ok()? * scale)
}

/// The view the binary decides with: watch-fed stores, here filled as the watches would fill
/// them (our cluster-id ConfigMap, the default ClusterConfig, no ForeignClusters).
fn store_view() -> StoreView {
    let cm = k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("cluster-id".into()), namespace: Some("liqo".into()), ..Default::default() },
        data: Some([("cluster-id".to_owned(), OWN_ID.to_owned())].into()),
        ..Default::default()
    };
    let cc = liqo_api::ClusterConfig::new("liqo-configuration", Default::default());
    StoreView::new("liqo", store_of([cm]), store_of([cc]), store_of([]), store_of([]), std::sync::Arc::new(true.into()))
}
