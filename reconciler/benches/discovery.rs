//! Discovery benchmarks (not tests), printed as figures and ratios against a baseline measured
//! in the same run:
//!
//! 1. DNS-SD: resolving a domain that lists 1,000 clusters (PTR, then SRV + TXT + address of
//!    each) from a real DNS server on 127.0.0.1 (hickory-server in process, and BIND 9 when
//!    installed), with our bounded parallelism against the same lookups one at a time. Past
//!    1,000 (`BENCH_CLUSTERS`), the domain lists them in sub-domains of 1,000 it names.
//! 2. mDNS: time from a peer's announcement to our ForeignCluster decision (records parsed,
//!    merge decided), against the time mdns-sd itself takes to resolve the service, over real
//!    multicast on a veth pair inside a network namespace this benchmark makes
//!    (`liqo_testenv::netns`); never in the machine's own namespace.

use std::time::{Duration, Instant};

use liqo_reconciler::discovery::dnssd::DnsSd;
use liqo_reconciler::discovery::mdns::{Advertised, Interfaces, Mdns, Sighting, sighting_of};
use liqo_reconciler::discovery::merge::{self, Change, Finder};
use liqo_testenv::dns::{Named, ZoneServer, clusters_zone};

async fn time_browse(dns: &DnsSd, expect: usize) -> Duration {
    let started = Instant::now();
    let listed = dns.browse("example.com").await.expect("the lookup");
    let took = started.elapsed();
    assert_eq!(listed.len(), expect);
    assert!(listed.iter().all(|l| l.target.is_ok()), "every target resolved");
    took
}

async fn dns_bench(server: &str, addr: std::net::SocketAddr, n: usize) {
    let mut parallel = DnsSd::with_nameserver(addr).unwrap();
    let mut sequential = parallel.clone();
    sequential.concurrency = 1;
    parallel.concurrency = 64;
    // Warm up once (the server's first answers, our sockets).
    time_browse(&parallel, n).await;
    let seq = time_browse(&sequential, n).await;
    let par = [time_browse(&parallel, n).await, time_browse(&parallel, n).await, time_browse(&parallel, n).await];
    let best = *par.iter().min().unwrap();
    println!(
        "DNS-SD, {n} clusters, {server}: one at a time (baseline) {:.2} s; 64 in parallel {:.2} s (best of 3; {:.2} / {:.2} / {:.2}) = {:.1}x faster; target <= 5 s: {}",
        seq.as_secs_f64(),
        best.as_secs_f64(),
        par[0].as_secs_f64(),
        par[1].as_secs_f64(),
        par[2].as_secs_f64(),
        seq.as_secs_f64() / best.as_secs_f64(),
        if best <= Duration::from_secs(5) { "met" } else { "NOT met" }
    );
}

fn mdns_bench_inside(rounds: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let mut raw = vec![];
        let mut ours = vec![];
        for round in 0..rounds {
            let id = format!("bench-{round}");
            let peer = Mdns::start("_liqo._tcp", "local.", &Interfaces { allow: vec!["v0".into()], loopback: false }).unwrap();
            let browser = Mdns::start("_liqo._tcp", "local.", &Interfaces { allow: vec!["v1".into()], loopback: false }).unwrap();
            let rx = browser.browse().unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await; // the browser's first queries out of the way
            let announced = Instant::now();
            peer.advertise(&Advertised::new(&id, None, "liqo", Some("https://10.77.0.1:8443"), None, 8443)).unwrap();
            let mut resolved = None;
            loop {
                let ev = tokio::time::timeout(Duration::from_secs(10), rx.recv_async()).await.expect("resolved within 10 s").unwrap();
                let is_resolved = matches!(ev, mdns_sd::ServiceEvent::ServiceResolved(_));
                if is_resolved && resolved.is_none() {
                    resolved = Some(announced.elapsed());
                }
                if let Some(Sighting::Found { cluster, .. }) = sighting_of(ev) {
                    let decision = merge::merge(None, &cluster, &Finder::Lan, true);
                    assert!(matches!(decision, Change::Create(_)));
                    ours.push(announced.elapsed());
                    raw.push(resolved.unwrap());
                    break;
                }
            }
            peer.shutdown().await;
            browser.shutdown().await;
        }
        raw.sort();
        ours.sort();
        let median = |v: &[Duration]| v[v.len() / 2];
        let (r, o) = (median(&raw), median(&ours));
        println!(
            "mDNS announcement -> ForeignCluster decision, {rounds} rounds on a veth pair: mdns-sd resolved (baseline) median {:.0} ms, max {:.0} ms; our decision median {:.0} ms, max {:.0} ms = {:.3}x the baseline; target <= 1.5 s: {}",
            r.as_secs_f64() * 1e3,
            raw.last().unwrap().as_secs_f64() * 1e3,
            o.as_secs_f64() * 1e3,
            ours.last().unwrap().as_secs_f64() * 1e3,
            o.as_secs_f64() / r.as_secs_f64(),
            if *ours.last().unwrap() <= Duration::from_millis(1500) { "met" } else { "NOT met" }
        );
    });
}

fn mdns_bench() {
    if let Some(why) = liqo_testenv::netns::unavailable() {
        println!("mDNS benchmark SKIPPED: {why}");
        return;
    }
    // The re-run process reads the same BENCH_ROUNDS.
    match liqo_testenv::netns::run(&["--bench"]) {
        Ok(out) => print!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        Err(e) => println!("mDNS benchmark SKIPPED: {e}"),
    }
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    if liqo_testenv::netns::inside() {
        mdns_bench_inside(rounds);
        return;
    }
    let n: usize = std::env::var("BENCH_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        // Past one DNS message (about 1,500 names in a PTR RRset), the domain lists its
        // clusters in sub-domains of 1,000 that it names (RFC 6763 §11), as such a domain must.
        let per = if n > 1_000 { 1_000 } else { 0 };
        let z = clusters_zone(n, per);
        let server = ZoneServer::start("example.com.", &z).await;
        dns_bench("hickory-server in process", server.addr, n).await;
        match Named::start("example.com.", &z).await {
            Ok(named) => dns_bench("BIND 9 named", named.addr, n).await,
            Err(e) => println!("DNS-SD with BIND 9 SKIPPED: {e}"),
        }
    });
    mdns_bench();
}
