//! `liqo-fleet`: a hub (a real API server, our webhook and reconciler from their release
//! binaries) against N simulated peers, through scenarios (a)–(i) and (r), one table row each.
//! `just fleet N` builds and runs it in a network namespace of its own.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use liqo_fleet::advertiser::{Broadcasters, HubAccess};
use liqo_fleet::hub::Hub;
use liqo_fleet::scenarios::{Row, Run, table};
use liqo_fleet::server::{Endpoints, Fleet};

#[derive(Parser, Debug)]
#[command(name = "liqo-fleet", version, about)]
struct Args {
    /// Simulated peers.
    #[arg(long, default_value_t = 100)]
    peers: usize,
    /// The reconciler's health period (its default: 30 s).
    #[arg(long, default_value_t = 30)]
    health_period_seconds: u64,
    /// How often each peer's broadcaster looks at its Advertisement in the hub (ours: 30 s).
    #[arg(long, default_value_t = 30)]
    advertise_period_seconds: u64,
    /// Where liqo-webhook, liqo-reconciler and liqo-dashboard are (default: beside this binary).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Scenarios to run, in order (a discovered, b joined, c steady, d cold start, e outage, f CA
    /// rotation, g the dashboard, h all black-holed, r every identity renewed, i strangers asking
    /// for identities).
    #[arg(long, default_value = "abcdefgh", value_parser = parse_scenarios)]
    scenarios: String,
    /// Also write the rows as JSON lines here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// In the outage (e), the peers down are wholly down: their broadcasters stop writing to
    /// the hub too (the whole cluster off, or cut off from the network). Without it they are
    /// down one way: the hub cannot reach them while they still reach it.
    #[arg(long)]
    outage_wholly: bool,
    /// The peers' broadcasters read their Advertisement every period instead of watching it
    /// (as an earlier release's do): a row of its own, to set beside the default.
    #[arg(long)]
    broadcasters_poll: bool,
    /// CPUs the hub's side may use (etcd, the API server, the webhook, the reconciler), as a
    /// control group's quota, e.g. 1.6: proves a row's margin on a hub given less.
    #[arg(long, value_parser = liqo_fleet::cpu_limit::parse_cpus)]
    hub_cpus: Option<f64>,
    /// CPUs the peers' side may use (this process: the simulated peers, their broadcasters),
    /// so that it cannot starve the hub on a shared machine.
    #[arg(long, value_parser = liqo_fleet::cpu_limit::parse_cpus)]
    peers_cpus: Option<f64>,
    /// Peers back from an outage (e) take this long to answer each request (0: at once): checks
    /// that fall behind, so that connections made first wait longer for their turns than they
    /// stay fresh (as on a saturated hub) when the black hole (h) opens.
    #[arg(long, default_value_t = 0)]
    answer_delay_after_outage_ms: u64,
    /// More flags for the reconciler (e.g. --reconciler-flag=--kube-api-qps=50).
    #[arg(long = "reconciler-flag")]
    reconciler_flags: Vec<String>,
    /// The peers' broadcasters run in this process instead of a child of their own (whose
    /// open files then hold their watches of the hub: fewer peers fit a limit on open files).
    #[arg(long)]
    broadcasters_in_process: bool,
    /// Be the child that runs a fleet's broadcasters (the fleet starts it; lines on stdin and stdout).
    #[arg(long, hide = true)]
    serve_broadcasters: bool,
    /// The folder of the npm tools (`npm i -E --prefix DIR lighthouse@12.2.3`): the dashboard's
    /// row (g) then audits its home and a peer's page with Lighthouse in Chromium, and holds
    /// accessibility and best practices to 0.95 and the home to 50 KB. With --json PATH, the
    /// whole reports are kept beside it (PATH.lighthouse-home.json, PATH.lighthouse-peer.json).
    #[arg(long)]
    lighthouse: Option<std::path::PathBuf>,
}

fn parse_scenarios(s: &str) -> Result<String, String> {
    if let Some(c) = s.chars().find(|c| !"abcdefghri".contains(*c)) {
        return Err(format!("unknown scenario {c:?}: a–h, r, i"));
    }
    // b–g work on the ForeignClusters that a creates.
    match s.chars().next() {
        Some('a') => Ok(s.to_owned()),
        _ => Err("the scenarios start with a, which creates the ForeignClusters the others use (e.g. abe)".to_owned()),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let open_files = raise_open_files_limit();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if args.serve_broadcasters {
        let stdin = tokio::io::BufReader::new(tokio::io::stdin());
        return rt.block_on(liqo_fleet::advertiser::remote::serve(stdin, tokio::io::stdout()));
    }
    // Each peer holds the hub's kept health-check connection, and its broadcaster's watch of
    // the hub: one socket each in this process, and one in the broadcasters' child (or two
    // here), besides the hub's and the fleet's own.
    let per_peer = if args.broadcasters_in_process { 2 } else { 1 };
    let needed = args.peers as u64 * per_peer + 1_000;
    if open_files < needed {
        eprintln!(
            "liqo-fleet: WARNING: open files limited to {open_files} here (the hard limit), and {} peers need about {needed} in one process ({per_peer} a peer): peers will fail to accept or to watch; run at most {} peers, or raise the hard limit",
            args.peers,
            open_files.saturating_sub(1_000) / per_peer
        );
    }
    // Interrupted, the run is dropped: the hub's processes (etcd, the API server, the webhook,
    // the reconciler) are killed with it, none left behind.
    let rows = rt.block_on(async {
        tokio::select! {
            rows = run(&args) => rows,
            () = liqo_serve::shutdown_signal() => anyhow::bail!("interrupted"),
        }
    })?;
    println!("\n{}", table(&rows));
    if let Some(path) = &args.json {
        let lines: Vec<String> = rows.iter().map(|r| serde_json::to_string(r).expect("serializable")).collect();
        std::fs::write(path, lines.join("\n") + "\n")?;
    }
    let failed: Vec<&str> = rows.iter().filter(|r| !r.ok).map(|r| r.scenario.as_str()).collect();
    anyhow::ensure!(failed.is_empty(), "not within their deadlines: {}", failed.join(", "));
    Ok(())
}

async fn run(args: &Args) -> anyhow::Result<Vec<Row>> {
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?.parent().context("the binary's folder")?.to_owned(),
    };
    let endpoints = if own_network_namespace() { Endpoints::Addresses { port: 443 } } else { Endpoints::Ports };
    eprintln!(
        "liqo-fleet: {} peers ({endpoints:?}), health period {} s, binaries in {}",
        args.peers,
        args.health_period_seconds,
        bin.display()
    );
    let mut flags = vec![format!("--health-period-seconds={}", args.health_period_seconds)];
    flags.extend(args.reconciler_flags.iter().cloned());
    // The hub's processes inherit the hub's group from this process; then it leaves for the
    // peers' group.
    let limits = match (args.hub_cpus, args.peers_cpus) {
        (None, None) => None,
        (hub, peers) => Some(std::sync::Arc::new(liqo_fleet::cpu_limit::CpuLimits::new(hub, peers)?)),
    };
    if let Some(limits) = &limits {
        eprintln!("liqo-fleet: CPU limits: {}", limits.describe());
        limits.enter_hub()?;
    }
    let mut hub = Hub::start(&bin, &flags).await?;
    if let Some(limits) = &limits {
        limits.enter_peers()?;
        hub.limits = Some(limits.clone());
    }
    let access = HubAccess {
        url: hub.cp.url.clone(),
        ca_pem: hub.cp.ca_pem.clone(),
        period: Duration::from_secs(args.advertise_period_seconds),
        watch: !args.broadcasters_poll,
    };
    let made = std::time::Instant::now();
    let broadcasters = if args.broadcasters_in_process {
        Broadcasters::InProcess
    } else {
        Broadcasters::Child(std::env::current_exe().context("this binary, to run the broadcasters")?)
    };
    let fleet = Fleet::start(args.peers, endpoints, access, &broadcasters).await?;
    eprintln!("liqo-fleet: {} peers with their CAs made in {:.1} s", args.peers, made.elapsed().as_secs_f64());
    let mut run = Run::new(hub, fleet, Duration::from_secs(args.health_period_seconds));
    run.lighthouse = args.lighthouse.clone();
    run.lighthouse_reports = args.json.clone();
    if args.outage_wholly {
        run.outage = liqo_fleet::peer::Mode::Off;
    }
    if args.answer_delay_after_outage_ms > 0 {
        run.answering = liqo_fleet::peer::Mode::Slow(Duration::from_millis(args.answer_delay_after_outage_ms));
    }
    let mut rows = Vec::new();
    for s in args.scenarios.chars() {
        let new: Vec<Row> = match s {
            'a' => vec![run.discovered().await],
            'b' => vec![run.join_all().await],
            'c' => run.steady().await.into(),
            'd' => vec![run.cold_start().await],
            'e' => run.outage_both().await.to_vec(),
            'f' => vec![run.ca_rotation().await],
            'h' => run.black_holed().await.to_vec(),
            'r' => vec![run.renewals().await],
            'i' => vec![run.strangers().await],
            _ => vec![run.dashboard().await],
        };
        for mut row in new {
            row.judge();
            if let Some(limits) = &limits {
                let (hub, peers) = limits.throttled_seconds();
                eprintln!("  held back by their CPU quotas so far: the hub {hub:.1} s, the peers {peers:.1} s");
            }
            eprintln!("{}", table(std::slice::from_ref(&row)).lines().nth(1).unwrap_or_default());
            if !row.note.is_empty() {
                eprintln!("  {}", row.note);
            }
            if !row.writes.is_empty() {
                eprintln!("  our writes to the hub: {}", row.writes);
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Whether this process runs in a network namespace of its own, with no interface but
/// loopback (`unshare -n`): then one listener may take every 127.1.x.y address, and nothing
/// outside sees it.
fn own_network_namespace() -> bool {
    // /proc/self/net/dev lists the interfaces of this process's namespace (/sys/class/net
    // those of whoever mounted /sys).
    let Ok(dev) = std::fs::read_to_string("/proc/self/net/dev") else { return false };
    let names: Vec<&str> = dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
    names == ["lo"]
}

/// N peers hold two connections each: the soft limit on open files is raised to the hard one
/// (inherited by the hub's processes), which is returned.
fn raise_open_files_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                return limit.rlim_cur;
            }
        }
    }
    1024
}

#[cfg(test)]
mod tests {
    use super::parse_scenarios;

    #[test]
    fn scenarios_start_with_the_discovery_that_creates_the_foreign_clusters() {
        assert_eq!(parse_scenarios("abe").as_deref(), Ok("abe"));
        assert!(parse_scenarios("be").unwrap_err().contains("start with a"));
        assert!(parse_scenarios("").unwrap_err().contains("start with a"));
        assert!(parse_scenarios("abx").unwrap_err().contains("unknown scenario 'x'"));
        assert_eq!(parse_scenarios("abh").as_deref(), Ok("abh"));
        assert_eq!(parse_scenarios("abcri").as_deref(), Ok("abcri"));
    }
}
