//! mDNS with real multicast, only inside network namespaces these tests make: each test
//! re-runs itself under `unshare -n` in a namespace holding `lo` and a veth pair (v0
//! 10.77.0.1/24, v1 10.77.0.2/24; `accept_local` so each end takes the other's IPv4 packets)
//! whose traffic never leaves it. Outside such a namespace no
//! mDNS socket is ever opened. Without `unshare`/`ip` or the right to use them, the tests print
//! SKIPPED and why.

use std::process::Command;
use std::time::{Duration, Instant};

use liqo_reconciler::discovery::discover::{Options, discover};
use liqo_reconciler::discovery::mdns::{Advertised, Interfaces, Mdns};
use liqo_reconciler::peer::Network;

const INSIDE: &str = "LIQO_TEST_IN_NETNS";
const ID_A: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const ID_B: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

fn netns_id(pid: &str) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()
}

/// True when this process runs inside a namespace made by [`in_netns`]; panics if it was
/// told so but shares the machine's namespace (no multicast may leave this machine).
fn inside() -> bool {
    if std::env::var_os(INSIDE).is_none() {
        return false;
    }
    let (mine, init) = (netns_id("self"), netns_id("1"));
    assert!(mine.is_some() && mine != init, "refusing to run mDNS in the machine's own network namespace");
    true
}

/// Runs test `name` of this binary in a new network namespace; returns whether it ran (false:
/// skipped, with the reason printed).
fn in_netns(name: &str) -> bool {
    let probe = Command::new("unshare").args(["-n", "--", "ip", "link", "add", "t0", "type", "veth", "peer", "name", "t1"]).output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!("SKIPPED {name}: cannot make a network namespace with a veth pair here: {}", String::from_utf8_lossy(&o.stderr).trim());
            return false;
        }
        Err(e) => {
            eprintln!("SKIPPED {name}: unshare/ip not available ({e})");
            return false;
        }
    }
    let exe = std::env::current_exe().unwrap();
    let setup = "set -e; ip link set lo up; ip link add v0 type veth peer name v1; \
                 ip addr add 10.77.0.1/24 dev v0; ip addr add 10.77.0.2/24 dev v1; \
                 for i in v0 v1 all; do echo 1 > /proc/sys/net/ipv4/conf/$i/accept_local; echo 0 > /proc/sys/net/ipv4/conf/$i/rp_filter; done; \
                 ip link set v0 up; ip link set v1 up; exec \"$0\" \"$1\" --exact --nocapture --test-threads=1";
    let out = Command::new("unshare")
        .args(["-n", "--", "sh", "-c", setup])
        .arg(&exe)
        .arg(name)
        .env(INSIDE, "1")
        .output()
        .expect("running the test in its namespace");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("--- {name}, inside its network namespace ---\n{text}");
    assert!(out.status.success(), "{name} failed inside its network namespace");
    assert!(text.contains("1 passed"), "{name} did not run inside its namespace");
    true
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn peers() -> Network {
    Network { roots: liqo_reconciler::auth::client::Verify::Nothing, api_timeout: Duration::from_secs(2) }
}

fn on(interface: &str) -> Interfaces {
    Interfaces { allow: vec![interface.into()], loopback: false }
}

#[test]
fn a_peer_advertisement_is_found_with_its_txt() {
    if !inside() {
        in_netns("a_peer_advertisement_is_found_with_its_txt");
        return;
    }
    runtime().block_on(async {
        let peer = Mdns::start("_liqo._tcp", "local.", &on("v0")).unwrap();
        let ad = Advertised::new(ID_A, Some("alpha"), "liqo", Some("https://10.77.0.1:30443"), Some("https://alpha.example:6443"), 30443);
        peer.advertise(&ad).unwrap();
        let started = Instant::now();
        let opts = Options { interfaces: on("v1"), wait: Duration::from_secs(10), expect: Some(1), ..Default::default() };
        let report = discover(&opts, &peers()).await.unwrap();
        eprintln!("found in {:?}", started.elapsed());
        assert_eq!(report.found.len(), 1, "{report:?}");
        let f = &report.found[0];
        assert_eq!(f.cluster_id, ID_A);
        assert_eq!(f.cluster_name.as_deref(), Some("alpha"));
        assert_eq!(f.namespace.as_deref(), Some("liqo"));
        assert_eq!(f.auth_url.as_deref(), Some("https://10.77.0.1:30443"));
        assert_eq!(f.api_url.as_deref(), Some("https://alpha.example:6443"));
        assert_eq!(f.found_by, "LAN");
        peer.shutdown().await;
    });
}

#[test]
fn without_an_auth_key_the_address_and_port_are_used_and_records_without_id_are_ignored() {
    if !inside() {
        in_netns("without_an_auth_key_the_address_and_port_are_used_and_records_without_id_are_ignored");
        return;
    }
    runtime().block_on(async {
        let peer = Mdns::start("_liqo._tcp", "local.", &on("v0")).unwrap();
        peer.advertise(&Advertised::new(ID_B, None, "liqo", None, None, 31234)).unwrap();
        // A `_liqo._tcp` service without `id`: logged, never a cluster.
        let mut anonymous = Advertised::new("anonymous", None, "liqo", None, None, 1);
        anonymous.txt.id = None;
        peer.advertise(&anonymous).unwrap();
        let opts = Options { interfaces: on("v1"), wait: Duration::from_secs(4), ..Default::default() };
        let report = discover(&opts, &peers()).await.unwrap();
        assert_eq!(report.found.len(), 1, "{report:?}");
        assert_eq!(report.found[0].cluster_id, ID_B);
        assert_eq!(report.found[0].cluster_name, None);
        assert_eq!(report.found[0].auth_url.as_deref(), Some("https://10.77.0.1:31234"), "v0's address and the SRV port");
        assert!(report.problems.iter().any(|p| p.contains("anonymous") && p.contains("no id=")), "{:?}", report.problems);
        peer.shutdown().await;
    });
}

#[test]
fn loopback_is_used_only_when_opted_into() {
    if !inside() {
        in_netns("loopback_is_used_only_when_opted_into");
        return;
    }
    runtime().block_on(async {
        // lo has no MULTICAST flag by default; give it one so only our rule keeps it out.
        assert!(Command::new("ip").args(["link", "set", "lo", "multicast", "on"]).status().unwrap().success());
        let lo_only = Interfaces { allow: vec!["lo".into()], loopback: false };
        let peer = Mdns::start("_liqo._tcp", "local.", &Interfaces { allow: vec!["lo".into()], loopback: true }).unwrap();
        peer.advertise(&Advertised::new(ID_A, Some("alpha"), "liqo", None, None, 8443)).unwrap();
        let opts = Options { interfaces: lo_only, wait: Duration::from_secs(3), ..Default::default() };
        assert!(discover(&opts, &peers()).await.unwrap().found.is_empty(), "loopback not opted into: nothing");
        let opts = Options { interfaces: Interfaces { allow: vec!["lo".into()], loopback: true }, wait: Duration::from_secs(8), expect: Some(1), ..Default::default() };
        let report = discover(&opts, &peers()).await.unwrap();
        assert_eq!(report.found.len(), 1, "{report:?}");
        assert_eq!(report.found[0].auth_url.as_deref(), Some("https://127.0.0.1:8443"));
        peer.shutdown().await;
    });
}

#[test]
fn the_discover_command_sees_another_discover_advertising() {
    if !inside() {
        in_netns("the_discover_command_sees_another_discover_advertising");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_liqo-reconciler");
    let mut advertiser = Command::new(bin)
        .args(["discover", "--advertise", "--cluster-id", ID_B, "--cluster-name", "beta", "--auth-url", "https://10.77.0.1:8443", "--interface", "v0", "--seconds", "20"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = Command::new(bin).args(["discover", "--lan", "--interface", "v1", "--json", "--expect", "1", "--seconds", "15"]).output().unwrap();
    let _ = advertiser.kill();
    let _ = advertiser.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8(out.stdout).unwrap();
    let found: serde_json::Value = serde_json::from_str(line.lines().next().unwrap_or("null")).unwrap();
    assert_eq!(found["clusterId"], ID_B, "{line}");
    assert_eq!(found["clusterName"], "beta");
    assert_eq!(found["authUrl"], "https://10.77.0.1:8443");
    assert_eq!(found["foundBy"], "LAN");
}
