//! mDNS with real multicast, only inside network namespaces these tests make: each test
//! re-runs itself in a namespace of its own (`liqo_testenv::netns`: `lo` and a veth pair v0
//! 10.77.0.1/24, v1 10.77.0.2/24) whose traffic never leaves it. Outside such a namespace no
//! mDNS socket is ever opened. Without `unshare`/`ip` or the right to use them, the tests print
//! SKIPPED and why.

use std::process::Command;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use liqo_reconciler::discovery::discover::{Options, discover};
use liqo_reconciler::discovery::mdns::{Advertised, Interfaces, Mdns};
use liqo_reconciler::remote::peer::Network;

const ID_A: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const ID_B: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

use liqo_testenv::netns::inside;

/// Runs test `name` of this binary in a network namespace of its own; returns whether it ran
/// (false: skipped, with the reason printed).
fn in_netns(name: &str) -> bool {
    if let Some(why) = liqo_testenv::netns::unavailable() {
        liqo_testenv::skip(&format!("{name}: {why}"));
        return false;
    }
    let out = liqo_testenv::netns::run(&[name, "--exact", "--nocapture", "--test-threads=1"]).expect("running the test in its namespace");
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
    Network::new(liqo_reconciler::remote::auth::client::Verify::Nothing, Duration::from_secs(2))
}

fn on(interface: &str) -> Interfaces {
    Interfaces { allow: vec![interface.into()], loopback: false }
}

/// LAN discovery on v1, our auth service at 10.77.0.2:8443.
fn lan_settings() -> liqo_reconciler::discovery::lan::Settings {
    liqo_reconciler::discovery::lan::Settings {
        interfaces: on("v1"),
        auth_port: 8443,
        auth_url: Some("https://10.77.0.2:8443".into()),
        api_url: None,
        mdns_port: liqo_reconciler::discovery::mdns::MDNS_PORT,
    }
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
        let opts = Options {
            interfaces: Interfaces { allow: vec!["lo".into()], loopback: true },
            wait: Duration::from_secs(8),
            expect: Some(1),
            ..Default::default()
        };
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
        .args([
            "discover",
            "--advertise",
            "--cluster-id",
            ID_B,
            "--cluster-name",
            "beta",
            "--auth-url",
            "https://10.77.0.1:8443",
            "--interface",
            "v0",
            "--seconds",
            "20",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out =
        Command::new(bin).args(["discover", "--lan", "--interface", "v1", "--json", "--expect", "1", "--seconds", "15"]).output().unwrap();
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

/// avahi, the independent mDNS implementation, running in the test's namespace on one
/// interface: `avahi-daemon` on a private D-Bus system bus (both killed on drop).
struct Avahi {
    dir: tempfile::TempDir,
    children: Vec<std::process::Child>,
}

const AVAHI_TOOLS: [&str; 4] = ["avahi-daemon", "avahi-publish", "avahi-browse", "dbus-daemon"];

/// Whether avahi is installed (checked before entering the namespace, to skip loudly).
fn avahi_missing(test: &str) -> bool {
    let missing: Vec<&str> = AVAHI_TOOLS
        .iter()
        .copied()
        .filter(|t| Command::new("sh").args(["-c", &format!("command -v {t}")]).output().map_or(true, |o| !o.status.success()))
        .collect();
    if !missing.is_empty() {
        liqo_testenv::skip(&format!("{test}: {missing:?} not installed (apt-get install avahi-daemon avahi-utils dbus)"));
    }
    !missing.is_empty()
}

impl Avahi {
    fn start(interface: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bus = dir.path().join("bus");
        std::fs::write(
            dir.path().join("bus.conf"),
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n\
                 <busconfig><type>system</type><listen>unix:path={}</listen><auth>EXTERNAL</auth>\
                 <policy context=\"default\"><allow user=\"*\"/><allow own=\"*\"/><allow send_destination=\"*\" eavesdrop=\"true\"/><allow receive_sender=\"*\"/></policy></busconfig>\n",
                bus.display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("avahi.conf"),
            format!("[server]\nhost-name=avahi-peer\nuse-ipv4=yes\nuse-ipv6=no\nallow-interfaces={interface}\nenable-dbus=yes\n[wide-area]\nenable-wide-area=no\n[publish]\npublish-hinfo=no\npublish-workstation=no\n"),
        )
        .unwrap();
        // avahi's pid file lives in /run/avahi-daemon: a private tmpfs in this mount namespace.
        std::fs::create_dir_all("/run/avahi-daemon").unwrap();
        assert!(Command::new("mount").args(["-t", "tmpfs", "tmpfs", "/run/avahi-daemon"]).status().unwrap().success());
        let mut me = Self { dir, children: vec![] };
        me.children.push(
            Command::new("dbus-daemon")
                .arg(format!("--config-file={}", me.dir.path().join("bus.conf").display()))
                .arg("--nofork")
                .spawn()
                .unwrap(),
        );
        wait_for("the private D-Bus", || bus.exists());
        let log = std::fs::File::create(me.dir.path().join("avahi.log")).unwrap();
        me.children.push(
            me.command("avahi-daemon")
                .args(["--no-drop-root", "--no-chroot", "--no-rlimits", "-f"])
                .arg(me.dir.path().join("avahi.conf"))
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        wait_for("avahi-daemon started", || me.log().contains("Server startup complete"));
        me
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("DBUS_SYSTEM_BUS_ADDRESS", format!("unix:path={}", self.dir.path().join("bus").display()));
        c
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("avahi.log")).unwrap_or_default()
    }

    /// `avahi-publish -s NAME _liqo._tcp PORT TXT...`, kept running.
    fn publish(&mut self, name: &str, port: u16, txt: &[&str]) {
        let child = self
            .command("avahi-publish")
            .args(["-s", name, "_liqo._tcp", &port.to_string()])
            .args(txt)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    /// `avahi-browse -rpt _liqo._tcp`: the resolved lines (`=;...`).
    fn browse(&self) -> Vec<String> {
        let out = self.command("avahi-browse").args(["-rpt", "_liqo._tcp"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with('=')).map(str::to_owned).collect()
    }
}

impl Drop for Avahi {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn our_browser_finds_a_service_avahi_publishes() {
    if !inside() {
        if !avahi_missing("our_browser_finds_a_service_avahi_publishes") {
            in_netns("our_browser_finds_a_service_avahi_publishes");
        }
        return;
    }
    let mut avahi = Avahi::start("v0");
    avahi.publish("peer-x", 8443, &[&format!("id={ID_B}"), "namespace=liqo", "name=peer-x"]);
    runtime().block_on(async {
        let opts = Options { interfaces: on("v1"), wait: Duration::from_secs(10), expect: Some(1), ..Default::default() };
        let report = discover(&opts, &peers()).await.unwrap();
        assert_eq!(report.found.len(), 1, "{report:?}\n{}", avahi.log());
        let f = &report.found[0];
        assert_eq!(f.cluster_id, ID_B);
        assert_eq!(f.cluster_name.as_deref(), Some("peer-x"));
        assert_eq!(f.namespace.as_deref(), Some("liqo"));
        assert_eq!(f.auth_url.as_deref(), Some("https://10.77.0.1:8443"), "avahi's address on v0 and the published port");
    });
}

#[test]
fn avahi_browse_sees_our_advertisement() {
    if !inside() {
        if !avahi_missing("avahi_browse_sees_our_advertisement") {
            in_netns("avahi_browse_sees_our_advertisement");
        }
        return;
    }
    let avahi = Avahi::start("v0");
    runtime().block_on(async {
        let ours = Mdns::start("_liqo._tcp", "local.", &on("v1")).unwrap();
        ours.advertise(&Advertised::new(ID_A, Some("alpha"), "liqo", Some("https://10.77.0.2:30443"), None, 30443)).unwrap();
        let mut lines = vec![];
        let deadline = Instant::now() + Duration::from_secs(15);
        while lines.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(300)).await;
            lines = avahi.browse();
        }
        // =;v0;IPv4;alpha;_liqo._tcp;local;<host>.local;10.77.0.2;30443;"..." "..."
        let line = lines.first().unwrap_or_else(|| panic!("avahi-browse saw nothing\n{}", avahi.log()));
        let fields: Vec<&str> = line.splitn(10, ';').collect();
        assert_eq!(&fields[1..6], ["v0", "IPv4", "alpha", "_liqo._tcp", "local"], "{line}");
        assert_eq!(fields[6], format!("{ID_A}.local"), "{line}");
        assert_eq!(fields[7], "10.77.0.2", "{line}");
        assert_eq!(fields[8], "30443", "{line}");
        for txt in
            [format!("\"id={ID_A}\""), "\"namespace=liqo\"".into(), "\"name=alpha\"".into(), "\"auth=https://10.77.0.2:30443\"".into()]
        {
            assert!(fields[9].contains(&txt), "{txt} missing in {line}");
        }
        ours.shutdown().await;
    });
}

/// LAN discovery in a cluster: a real API server (`KUBEBUILDER_ASSETS`, started inside the
/// test's namespace on its loopback) and real multicast between a peer on v0 and us on v1.
#[test]
fn lan_discovery_keeps_foreign_clusters_of_the_peers_it_sees() {
    if !inside() {
        match liqo_testenv::assets() {
            Ok(_) => {
                in_netns("lan_discovery_keeps_foreign_clusters_of_the_peers_it_sees");
            }
            Err(why) => liqo_testenv::skip(&format!("lan_discovery_keeps_foreign_clusters_of_the_peers_it_sees: {why}")),
        }
        return;
    }
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use liqo_api::{ClusterConfigSpec, DiscoveryType, ForeignCluster, ForeignClusterSpec};
    use liqo_reconciler::discovery::lan;
    use liqo_testenv::{ControlPlane, eventually, install_liqo};

    const OWN: &str = "11111111-2222-4333-8444-555555555555";
    runtime().block_on(async {
        let cp = ControlPlane::start().await.map_err(|e| format!("{e:?}")).unwrap();
        let admin = cp.admin();
        install_liqo(&admin, "liqo").await;
        let fcs: Api<ForeignCluster> = Api::all(admin.clone());
        // Known by hand already: only its empty fields get filled, never deleted by expiry.
        let manual = ForeignCluster::new(
            "by-hand",
            ForeignClusterSpec { cluster_id: Some(ID_B.into()), discovery_type: Some(DiscoveryType::Manual), ..Default::default() },
        );
        fcs.create(&PostParams::default(), &manual).await.unwrap();

        let (_id, id_rx) = tokio::sync::watch::channel(Some(OWN.to_owned()));
        let mut config = ClusterConfigSpec::default();
        config.discovery_config.ttl = 3; // a strike a second
        let (cfg_tx, cfg_rx) = tokio::sync::watch::channel(Some(config.clone()));
        let recorder = liqo_reconciler::reporting::events::Recorder::new(
            admin.clone(),
            liqo_reconciler::reporting::events::Reporter { controller: "liqo-reconciler".into(), instance: None },
        );
        let foreign = liqo_reconciler::machinery::stores::reflect(fcs.clone(), Default::default());
        let shared = liqo_reconciler::context::Shared::new(admin.clone(), "liqo", id_rx, cfg_rx, std::sync::Arc::new(peers()), foreign)
            .with_recorder(recorder);
        let settings = lan_settings();
        let ctx = std::sync::Arc::new(lan::Ctx::new(shared, settings));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let lan_task = tokio::spawn(lan::run(ctx, async move {
            let _ = stop_rx.await;
        }));

        // A peer appears: a LAN ForeignCluster named after it, joined by autojoin.
        let peer = Mdns::start("_liqo._tcp", "local.", &on("v0")).unwrap();
        let first = Advertised::new(ID_A, Some("alpha"), "liqo", Some("https://10.77.0.1:1"), None, 1);
        let name = peer.advertise(&first).unwrap();
        let fc = eventually("the peer's ForeignCluster", || async { fcs.get_opt(ID_A).await.unwrap() }).await;
        assert_eq!(fc.spec.discovery_type, Some(DiscoveryType::Lan));
        assert_eq!(fc.spec.join, Some(true));
        assert_eq!(fc.spec.auth_url.as_deref(), Some("https://10.77.0.1:1"));
        assert_eq!(fc.labels()["discovery.liqo.io/discovery-type"], "LAN");

        // The user says no; then the peer restarts elsewhere (goodbye, then at once its new
        // records): the address follows, the choice stays.
        fcs.patch(ID_A, &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"join": false}}))).await.unwrap();
        peer.withdraw(&name).await;
        peer.advertise(&Advertised::new(ID_A, Some("alpha"), "liqo", Some("https://10.77.0.1:2"), None, 2)).unwrap();
        let moved = eventually("the address updated in place", || async {
            fcs.get_opt(ID_A).await.unwrap().filter(|f| f.spec.auth_url.as_deref() == Some("https://10.77.0.1:2"))
        })
        .await;
        assert_eq!(moved.spec.join, Some(false), "the user's choice is remembered");
        assert_eq!(moved.uid(), fc.uid(), "updated, not re-created");

        // It moves again, announcing new records without a goodbye (a daemon re-registering).
        let renamed = peer.advertise(&Advertised::new(ID_A, Some("alpha"), "liqo", Some("https://10.77.0.1:4"), None, 4)).unwrap();
        assert_eq!(renamed, name, "the same service, new records");
        let restarted = eventually("the address after re-registering", || async {
            fcs.get_opt(ID_A).await.unwrap().filter(|f| f.spec.auth_url.as_deref() == Some("https://10.77.0.1:4"))
        })
        .await;
        assert_eq!((restarted.uid(), restarted.spec.join), (fc.uid(), Some(false)));

        // The hand-made one for ID_B gets its auth URL from the LAN.
        peer.advertise(&Advertised::new(ID_B, None, "liqo", Some("https://10.77.0.1:3"), None, 3)).unwrap();
        eventually("the manual ForeignCluster's authUrl filled", || async {
            fcs.get_opt("by-hand").await.unwrap().filter(|f| f.spec.auth_url.as_deref() == Some("https://10.77.0.1:3"))
        })
        .await;
        assert!(fcs.get_opt(ID_B).await.unwrap().is_none(), "never a second ForeignCluster for a cluster ID");

        // We are visible too, with our TXT.
        // (A browser on v0 also hears the peer's own services: look for ours among them.)
        let seen = discover(&Options { interfaces: on("v0"), wait: Duration::from_secs(5), ..Default::default() }, &peers()).await.unwrap();
        let us = seen.found.iter().find(|f| f.cluster_id == OWN).unwrap_or_else(|| panic!("{seen:?}"));
        assert_eq!(us.auth_url.as_deref(), Some("https://10.77.0.2:8443"));

        // The peer goes away and its auth service never answers: three misses, then gone.
        let gone_at = Instant::now();
        peer.shutdown().await;
        eventually("the vanished peer's ForeignCluster deleted", || async { fcs.get_opt(ID_A).await.unwrap().is_none().then_some(()) })
            .await;
        let found = eventually("a Discovered Event", || liqo_testenv::event(&admin, "Discovered", ID_A)).await;
        assert!(found.note.unwrap().contains("on the LAN (mDNS)"));
        let expired = eventually("an Expired Event", || liqo_testenv::event(&admin, "Expired", ID_A)).await;
        assert!(expired.note.unwrap().contains("3 checks in a row"));
        assert!(gone_at.elapsed() >= Duration::from_secs(2), "not before the strikes: {:?}", gone_at.elapsed());
        assert!(fcs.get_opt("by-hand").await.unwrap().is_some(), "a manual ForeignCluster is never expired");

        // Advertisement off at runtime: a new browser no longer finds us.
        config.discovery_config.enable_advertisement = false;
        cfg_tx.send(Some(config)).unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = discover(&Options { interfaces: on("v0"), wait: Duration::from_secs(3), ..Default::default() }, &peers()).await.unwrap();
        assert!(seen.found.iter().all(|f| f.cluster_id != OWN), "{seen:?}");

        let _ = stop_tx.send(());
        tokio::time::timeout(Duration::from_secs(10), lan_task).await.unwrap().unwrap();
    });
}

#[test]
fn an_address_change_is_announced_again() {
    if !inside() {
        in_netns("an_address_change_is_announced_again");
        return;
    }
    use liqo_reconciler::discovery::mdns::{Sighting, sighting_of};
    runtime().block_on(async {
        let ad = Advertised::new(ID_A, None, "liqo", None, None, 8443);
        let peer = Mdns::start("_liqo._tcp", "local.", &on("v0")).unwrap();
        peer.advertise(&ad).unwrap();
        let browser = Mdns::start("_liqo._tcp", "local.", &on("v1")).unwrap();
        let rx = browser.browse().unwrap();
        let url_seen = |want: &'static str| {
            let rx = rx.clone();
            async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
                while let Ok(Ok(ev)) = tokio::time::timeout_at(deadline, rx.recv_async()).await {
                    if let Some(Sighting::Found { cluster, .. }) = sighting_of(ev)
                        && cluster.auth_url.as_deref() == Some(want)
                    {
                        return true;
                    }
                }
                false
            }
        };
        assert!(url_seen("https://10.77.0.1:8443").await, "first address");
        // The new address first, then the old one gone (as DHCP renumbering often goes).
        let ip = |args: &[&str]| assert!(Command::new("ip").args(args).status().unwrap().success());
        // (Promoted when the first one goes, instead of removed with it.)
        std::fs::write("/proc/sys/net/ipv4/conf/v0/promote_secondaries", "1").unwrap();
        ip(&["addr", "add", "10.77.0.9/24", "dev", "v0"]);
        ip(&["addr", "del", "10.77.0.1/24", "dev", "v0"]);
        // The daemon notices (it checks every 5 s) and announces the new address by itself.
        assert!(url_seen("https://10.77.0.9:8443").await, "the new address announced");
        peer.shutdown().await;
        browser.shutdown().await;
    });
}

/// A LAN flooding us with services cannot fill our memory: once the mDNS cache holds more
/// than its bound (`lan::cache_cap`: 8 records a cluster of `--max-discovered-peers`, plus
/// 256), it is emptied, counted, and discovery starts afresh.
#[test]
fn a_flood_of_mdns_services_is_bounded() {
    if !inside() {
        in_netns("a_flood_of_mdns_services_is_bounded");
        return;
    }
    use liqo_reconciler::discovery::lan;
    const OWN: &str = "11111111-2222-4333-8444-555555555555";
    runtime().block_on(async {
        // 120 services (about 500 records) against a bound of 8 * 2 + 256 = 272 records.
        let flooder = Mdns::start("_liqo._tcp", "local.", &on("v0")).unwrap();
        for i in 0..120 {
            let id = format!("flood-{i}");
            let ad = Advertised::new(&id, None, "liqo", Some("https://10.77.0.1:1"), None, 1);
            // The daemon's command queue is short ("try again"): register at its pace.
            let deadline = Instant::now() + Duration::from_secs(30);
            while let Err(e) = flooder.advertise(&ad) {
                assert!(Instant::now() < deadline, "registering {id}: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        // Nothing is written anywhere: every flooding service is unusable (no cluster ID).
        let nowhere = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no API server in this test"))
        });
        let client = kube::Client::new(nowhere, "default");
        let (_id, id_rx) = tokio::sync::watch::channel(Some(OWN.to_owned()));
        let (_cfg, cfg_rx) = tokio::sync::watch::channel(Some(liqo_api::ClusterConfigSpec::default()));
        let foreign = kube::runtime::reflector::store().0;
        let shared = liqo_reconciler::context::Shared::new(client, "liqo", id_rx, cfg_rx, std::sync::Arc::new(peers()), foreign)
            .with_max_discovered(2);
        let settings = lan_settings();
        assert_eq!(lan::cache_cap(2), 272);
        let metrics = std::sync::Arc::new(liqo_reconciler::reporting::metrics::Metrics::default());
        let ctx = std::sync::Arc::new(lan::Ctx::new(shared, settings).with_metrics(metrics.clone()));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let lan_task = tokio::spawn(lan::run(ctx, async move {
            let _ = stop_rx.await;
        }));
        liqo_testenv::eventually("the mDNS cache emptied for holding too much", || async {
            (metrics.mdns_cache_flushes.get() >= 1).then_some(())
        })
        .await;
        let exported = metrics.encode();
        assert!(exported.contains("liqo_reconciler_mdns_cache_flushes_total"), "{exported}");
        let _ = stop_tx.send(());
        tokio::time::timeout(Duration::from_secs(10), lan_task).await.unwrap().unwrap();
        flooder.shutdown().await;
    });
}

/// A cluster seen while the API server refuses to record it (our webhook not serving yet, as
/// at install, when both start together) is recorded once it accepts: mDNS tells a cluster once
/// and then only when it changes, so a failed recording is tried again, not dropped.
#[test]
fn a_cluster_seen_while_the_api_server_refuses_is_recorded_once_it_accepts() {
    const NAME: &str = "a_cluster_seen_while_the_api_server_refuses_is_recorded_once_it_accepts";
    if !inside() {
        match liqo_testenv::assets() {
            Ok(_) => {
                in_netns(NAME);
            }
            Err(why) => liqo_testenv::skip(&format!("{NAME}: {why}")),
        }
        return;
    }
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use kube::api::{Api, DeleteParams, PostParams};
    use liqo_api::{ClusterConfigSpec, DiscoveryType, ForeignCluster};
    use liqo_reconciler::discovery::lan;
    use liqo_testenv::{ControlPlane, eventually, install_liqo};

    const OWN: &str = "11111111-2222-4333-8444-555555555555";
    runtime().block_on(async {
        let cp = ControlPlane::start().await.map_err(|e| format!("{e:?}")).unwrap();
        let admin = cp.admin();
        install_liqo(&admin, "liqo").await;
        // A webhook that does not serve (nothing listens there), failurePolicy Fail: every
        // ForeignCluster write is refused, as before our webhook's pods are ready.
        let not_serving: ValidatingWebhookConfiguration = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "not-serving-yet"},
            "webhooks": [{"name": "not-serving-yet.liqo.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "timeoutSeconds": 1,
                "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                "rules": [{"apiGroups": ["discovery.liqo.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["foreignclusters"]}]}]
        }))
        .unwrap();
        let configurations: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
        configurations.create(&PostParams::default(), &not_serving).await.unwrap();
        let fcs: Api<ForeignCluster> = Api::all(admin.clone());
        let probe = ForeignCluster::new("probe", Default::default());
        eventually("the API server refusing ForeignClusters", || async { fcs.create(&PostParams::default(), &probe).await.is_err().then_some(()) })
            .await;

        let (_id, id_rx) = tokio::sync::watch::channel(Some(OWN.to_owned()));
        let (_cfg, cfg_rx) = tokio::sync::watch::channel(Some(ClusterConfigSpec::default()));
        let foreign = liqo_reconciler::machinery::stores::reflect(fcs.clone(), Default::default());
        let shared = liqo_reconciler::context::Shared::new(admin.clone(), "liqo", id_rx, cfg_rx, std::sync::Arc::new(peers()), foreign);
        let ctx = std::sync::Arc::new(lan::Ctx::new(shared, lan_settings()));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let lan_task = tokio::spawn(lan::run(ctx, async move {
            let _ = stop_rx.await;
        }));

        // The peer is seen while every write is refused (the webhook's own metric counts the
        // refused calls), then the webhook goes: the peer is recorded without being seen again.
        let calls = || async {
            let text = admin.request_text(http::Request::get("/metrics").body(Vec::new()).unwrap()).await.ok()?;
            let counted = ["apiserver_admission_webhook_request_total", "apiserver_admission_webhook_rejection_count"];
            let calls: f64 = text
                .lines()
                .filter(|l| counted.iter().any(|c| l.starts_with(c)) && l.contains("not-serving-yet.liqo.io"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            Some(calls)
        };
        let before = calls().await.unwrap_or(0.0);
        let peer = Mdns::start("_liqo._tcp", "local.", &on("v0")).unwrap();
        peer.advertise(&Advertised::new(ID_A, Some("alpha"), "liqo", Some("https://10.77.0.1:1"), None, 1)).unwrap();
        eventually("our recording of the peer refused", || async { (calls().await? > before).then_some(()) }).await;
        assert!(fcs.get_opt(ID_A).await.unwrap().is_none());
        configurations.delete("not-serving-yet", &DeleteParams::default()).await.unwrap();
        let fc = eventually("the peer recorded once the API server accepts", || async { fcs.get_opt(ID_A).await.unwrap() }).await;
        assert_eq!(fc.spec.discovery_type, Some(DiscoveryType::Lan));
        assert_eq!(fc.spec.auth_url.as_deref(), Some("https://10.77.0.1:1"));

        peer.shutdown().await;
        let _ = stop_tx.send(());
        tokio::time::timeout(Duration::from_secs(10), lan_task).await.unwrap().unwrap();
    });
}
