//! `liqo-reconciler discover`: browse the LAN and/or DNS domains and print the clusters found,
//! without any Kubernetes cluster; `--advertise` makes this machine visible too.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

use super::dnssd::DnsSd;
use super::identify::identify;
use super::mdns::{Advertised, Interfaces, MDNS_PORT, Mdns, Sighting, sighting_of};
use super::records::DiscoveredCluster;
use crate::machinery::error::Result;
use crate::remote::auth::client::Verify;
use crate::remote::peer::Network;
use crate::remote::peer::Peers;

/// What to browse and for how long.
#[derive(Clone, Debug)]
pub struct Options {
    pub lan: bool,
    pub domains: Vec<String>,
    /// A DNS server instead of `/etc/resolv.conf`'s.
    pub nameserver: Option<SocketAddr>,
    /// How long to listen on the LAN.
    pub wait: Duration,
    pub interfaces: Interfaces,
    pub mdns_port: u16,
    /// Publish this service while browsing.
    pub advertise: Option<Advertised>,
    /// Stop browsing the LAN once this many clusters are found.
    pub expect: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            lan: true,
            domains: vec![],
            nameserver: None,
            wait: Duration::from_secs(3),
            interfaces: Interfaces::default(),
            mdns_port: MDNS_PORT,
            advertise: None,
            expect: None,
        }
    }
}

/// One cluster found, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    pub cluster_id: String,
    pub cluster_name: Option<String>,
    pub namespace: Option<String>,
    pub auth_url: Option<String>,
    pub api_url: Option<String>,
    /// `LAN`, or `WAN <domain>`.
    pub found_by: String,
}

impl Found {
    fn new(c: DiscoveredCluster, found_by: String) -> Self {
        Self {
            cluster_id: c.cluster_id,
            cluster_name: c.cluster_name,
            namespace: c.namespace,
            auth_url: c.auth_url,
            api_url: c.api_url,
            found_by,
        }
    }
}

/// Everything found, and the problems met on the way (one line each).
#[derive(Debug, Default)]
pub struct Report {
    pub found: Vec<Found>,
    pub problems: Vec<String>,
    /// The DNS domains that did not resolve at all.
    pub failed_domains: Vec<String>,
}

/// Runs the discovery described by `opts`.
pub async fn discover<P: Peers>(opts: &Options, peers: &P) -> Result<Report> {
    let mut report = Report::default();
    let mut lan: BTreeMap<String, Found> = BTreeMap::new();
    let own_id = opts.advertise.as_ref().and_then(|a| a.txt.id.clone()).unwrap_or_default();
    let mdns = if opts.lan || opts.advertise.is_some() {
        Some(Mdns::start_on_port("_liqo._tcp", "local.", &opts.interfaces, opts.mdns_port)?)
    } else {
        None
    };
    if let (Some(m), Some(ad)) = (&mdns, &opts.advertise) {
        m.advertise(ad)?;
    }
    let browse = match (&mdns, opts.lan) {
        (Some(m), true) => Some(m.browse()?),
        _ => None,
    };

    for domain in &opts.domains {
        let dns = match opts.nameserver {
            Some(ns) => DnsSd::with_nameserver(ns)?,
            None => DnsSd::system()?,
        };
        match dns.browse(domain).await {
            Ok(listed) => {
                let ids =
                    identify(listed, &own_id, &[], |url| async move { peers.ids(&url, crate::remote::peer::Trust::Anything).await }).await;
                report.found.extend(ids.clusters.into_iter().map(|(_, c)| Found::new(c, format!("WAN {domain}"))));
                report.problems.extend(ids.skipped.into_iter().map(|s| format!("{domain}: {s}")));
            }
            Err(e) => {
                report.problems.push(format!("{domain}: {e}"));
                report.failed_domains.push(domain.clone());
            }
        }
    }

    if let Some(rx) = browse {
        let deadline = tokio::time::Instant::now() + opts.wait;
        while opts.expect.is_none_or(|n| lan.len() < n) {
            let Ok(Ok(ev)) = tokio::time::timeout_at(deadline, rx.recv_async()).await else { break };
            match sighting_of(ev) {
                Some(Sighting::Found { cluster, .. }) if cluster.cluster_id != own_id => {
                    lan.insert(cluster.cluster_id.clone(), Found::new(cluster, "LAN".into()));
                }
                Some(Sighting::Unusable { fullname, why }) => report.problems.push(format!("LAN: {fullname}: {why}")),
                _ => {}
            }
        }
    } else if opts.advertise.is_some() {
        tokio::time::sleep(opts.wait).await;
    }
    if let Some(m) = mdns {
        m.shutdown().await;
    }
    report.found.extend(lan.into_values());
    report.problems.dedup();
    Ok(report)
}

/// The report as a table, like `kubectl get`; what peers published is made printable (a
/// hostile TXT record cannot drive the terminal).
pub fn table(found: &[Found]) -> String {
    let rows: Vec<[String; 6]> = std::iter::once(["CLUSTER-ID", "NAME", "FOUND-BY", "AUTH-URL", "API-URL", "NAMESPACE"].map(str::to_owned))
        .chain(found.iter().map(|f| {
            let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
            [f.cluster_id.clone(), o(&f.cluster_name), f.found_by.clone(), o(&f.auth_url), o(&f.api_url), o(&f.namespace)]
                .map(|c| liqo_api::terminal::printable(&c).into_owned())
        }))
        .collect();
    let widths: Vec<usize> = (0..6).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    rows.iter()
        .map(|r| {
            let line: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            format!("{}\n", line.join("   ").trim_end())
        })
        .collect()
}

/// The flags of `discover` (`liqo-reconciler discover`, `kubectl liqo discover`).
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Browse the LAN with mDNS (the default when no --domain is given).
    #[arg(long)]
    pub lan: bool,
    /// DNS domain to browse with DNS-SD, as a SearchDomain would (repeatable).
    #[arg(long = "domain")]
    pub domains: Vec<String>,
    /// DNS server (ip:port) instead of /etc/resolv.conf's.
    #[arg(long)]
    pub nameserver: Option<std::net::SocketAddr>,
    /// Seconds to listen on the LAN.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Stop listening once this many LAN clusters are found.
    #[arg(long)]
    pub expect: Option<usize>,
    /// Make this machine visible on the LAN too, as a Liqo cluster.
    #[arg(long)]
    pub advertise: bool,
    /// Cluster ID to advertise (default: a new random one).
    #[arg(long)]
    pub cluster_id: Option<String>,
    /// Cluster name to advertise (default: the host name).
    #[arg(long)]
    pub cluster_name: Option<String>,
    /// Auth service URL to advertise (TXT auth=).
    #[arg(long)]
    pub auth_url: Option<String>,
    /// Port to advertise (SRV).
    #[arg(long, default_value_t = 8443)]
    pub port: u16,
    /// Interfaces to use (repeatable; default: every multicast-capable one but loopback).
    #[arg(long = "interface")]
    pub interfaces: Vec<String>,
    /// Also use loopback.
    #[arg(long)]
    pub loopback: bool,
    /// Print JSON (one object per cluster) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `discover` and prints what it finds (a table, or JSON lines); notes go to stderr.
/// False when a DNS domain did not resolve (nothing found is not a failure).
pub async fn run(a: Args) -> anyhow::Result<bool> {
    let advertise = if a.advertise {
        let id = a.cluster_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        liqo_api::validate_cluster_id(&id).map_err(|e| anyhow::anyhow!("--cluster-id {id:?}: {e}"))?;
        let name = a.cluster_name.clone().or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_owned()));
        eprintln!("advertising cluster {id} on the LAN");
        Some(Advertised::new(&id, name.as_deref(), "liqo", a.auth_url.as_deref(), None, a.port))
    } else {
        None
    };
    let opts = Options {
        lan: a.lan || a.domains.is_empty(),
        domains: a.domains,
        nameserver: a.nameserver,
        wait: Duration::from_secs_f64(a.seconds.max(0.0)),
        interfaces: Interfaces { allow: a.interfaces, loopback: a.loopback },
        advertise,
        expect: a.expect,
        ..Default::default()
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let peers = Network::new(Verify::Roots(std::sync::Arc::new(roots)), Duration::from_secs(5));
    let report = discover(&opts, &peers).await?;
    for p in &report.problems {
        eprintln!("note: {p}");
    }
    if a.json {
        for f in &report.found {
            println!("{}", serde_json::to_string(f)?);
        }
    } else if report.found.is_empty() {
        eprintln!("no Liqo clusters found");
    } else {
        print!("{}", table(&report.found));
    }
    for d in &report.failed_domains {
        eprintln!("error: DNS domain {d} did not resolve (check the zone, or --nameserver)");
    }
    Ok(report.failed_domains.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_aligns_columns_and_marks_missing_values() {
        let f = vec![Found {
            cluster_id: "abc".into(),
            cluster_name: Some("home".into()),
            namespace: None,
            auth_url: Some("https://10.0.0.1:8443".into()),
            api_url: None,
            found_by: "LAN".into(),
        }];
        assert_eq!(
            table(&f),
            "CLUSTER-ID   NAME   FOUND-BY   AUTH-URL                API-URL   NAMESPACE\n\
             abc          home   LAN        https://10.0.0.1:8443   -         -\n"
        );
        assert_eq!(table(&[]).lines().count(), 1);
    }

    #[test]
    fn a_hostile_name_is_printed_not_obeyed() {
        let f = vec![Found {
            cluster_id: "abc".into(),
            cluster_name: Some("\x1b[2J\x1b]0;pwned\x07\nfake".into()),
            namespace: None,
            auth_url: None,
            api_url: None,
            found_by: "LAN".into(),
        }];
        let t = table(&f);
        assert!(!t.contains('\x1b') && !t.contains('\x07') && t.lines().count() == 2, "{t:?}");
        assert!(t.contains("\\x1b[2J\\x1b]0;pwned\\x07\\x0afake"), "{t}");
    }
}
