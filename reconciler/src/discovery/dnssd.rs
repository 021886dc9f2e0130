//! DNS-SD over unicast DNS (protocol §5), I/O only: `PTR <domain>` lists targets; each target's
//! `SRV` gives host and port, its optional `TXT` Liqo's keys; the SRV host is resolved
//! (A/AAAA, following CNAMEs). Targets are looked up in parallel, at most
//! [`DnsSd::concurrency`] at a time.
//!
//! A failed lookup (server down, timeout, `NXDOMAIN` for the domain itself) is an error so
//! that nothing is deleted on it; a domain without PTR records lists no clusters. A target
//! whose records are missing or malformed is reported on its own and skipped.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures::StreamExt;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::{Resolver, TokioResolver};

use super::records::{self, WanTarget};
use crate::machinery::error::{Error, Result};

/// One target listed by a domain and what its records say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The PTR target, e.g. `liqo-cluster._liqo._tcp.example.com.`.
    pub instance: String,
    pub target: Result<WanTarget, TargetError>,
}

/// Why one target is skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetError {
    /// No SRV record for the target (or its name does not exist).
    NoSrv,
    /// Its records say nothing usable.
    Record(records::RecordError),
    /// The server failed to answer for this target: the whole lookup is unreliable.
    Lookup(String),
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSrv => write!(f, "no SRV record"),
            Self::Record(e) => write!(f, "{e}"),
            Self::Lookup(e) => write!(f, "lookup failed: {e}"),
        }
    }
}

/// A DNS-SD browser over unicast DNS.
#[derive(Clone)]
pub struct DnsSd {
    resolver: TokioResolver,
    /// URLs name the SRV host when the system resolver is in use (everyone can resolve it);
    /// with a dedicated nameserver they carry the address it resolved to.
    urls_by_name: bool,
    pub concurrency: usize,
}

fn options() -> ResolverOpts {
    let mut o = ResolverOpts::default();
    o.timeout = Duration::from_secs(3);
    o.attempts = 2;
    // Records change when clusters come and go: ask every time.
    o.cache_size = 0;
    o.negative_max_ttl = Some(Duration::ZERO);
    o
}

impl DnsSd {
    /// The resolver of `/etc/resolv.conf`.
    pub fn system() -> Result<Self> {
        let mut b = Resolver::builder_tokio().map_err(|e| Error::Dns(format!("reading the system resolver configuration: {e}")))?;
        *b.options_mut() = options();
        let resolver = b.build().map_err(|e| Error::Dns(e.to_string()))?;
        Ok(Self { resolver, urls_by_name: true, concurrency: 64 })
    }

    /// A dedicated nameserver (UDP, TCP on truncation).
    pub fn with_nameserver(server: SocketAddr) -> Result<Self> {
        let conn = |mut c: ConnectionConfig| {
            c.port = server.port();
            c
        };
        let ns = NameServerConfig::new(server.ip(), true, vec![conn(ConnectionConfig::udp()), conn(ConnectionConfig::tcp())]);
        let config = ResolverConfig::from_parts(None, vec![], vec![ns]);
        let resolver = Resolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(options())
            .build()
            .map_err(|e| Error::Dns(e.to_string()))?;
        Ok(Self { resolver, urls_by_name: false, concurrency: 64 })
    }

    /// Every target `domain` lists, and every target of the browsing domains it names
    /// (`b._dns-sd._udp.<domain>`, RFC 6763 §11): one PTR RRset fits in one DNS message, about
    /// 1,500 names, so a larger domain lists its clusters in sub-domains and names them there.
    /// Those are browsed one level deep (theirs are not followed). Errors only when the listing
    /// itself cannot be trusted: a domain or a named sub-domain that does not exist, a server
    /// that does not answer.
    pub async fn browse(&self, domain: &str) -> Result<Vec<Listed>> {
        let fqdn = fqdn(domain);
        let mut instances = self.ptr(&fqdn).await?;
        let subdomains = self.browsing_domains(&fqdn).await?;
        let listed: Vec<Result<Vec<String>>> = futures::stream::iter(subdomains)
            .map(|d| async move { self.ptr(&d).await })
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        for names in listed {
            instances.extend(names?);
        }
        instances.sort();
        instances.dedup();
        let listed: Vec<Listed> = futures::stream::iter(instances)
            .map(|instance| async move {
                let target = self.target(&instance).await;
                Listed { instance, target }
            })
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        if let Some(Listed { instance, target: Err(TargetError::Lookup(e)) }) =
            listed.iter().find(|l| matches!(l.target, Err(TargetError::Lookup(_))))
        {
            return Err(Error::Dns(format!("{instance}: {e}")));
        }
        let mut listed = listed;
        listed.sort_by(|a, b| a.instance.cmp(&b.instance));
        Ok(listed)
    }

    /// The names `PTR <name>` lists (none when it has no PTR record); an error when `name`
    /// does not exist.
    async fn ptr(&self, name: &str) -> Result<Vec<String>> {
        self.ptr_if_exists(name).await?.ok_or_else(|| Error::Dns(format!("{name} does not exist (NXDOMAIN)")))
    }

    /// As [`Self::ptr`], `None` when `name` does not exist.
    async fn ptr_if_exists(&self, name: &str) -> Result<Option<Vec<String>>> {
        match self.resolver.lookup(name, RecordType::PTR).await {
            Ok(l) => Ok(Some(
                l.answers()
                    .iter()
                    .filter_map(|r| match &r.data {
                        RData::PTR(p) => Some(p.0.to_ascii()),
                        _ => None,
                    })
                    .collect(),
            )),
            Err(e) if e.is_nx_domain() => Ok(None),
            Err(e) if e.is_no_records_found() => Ok(Some(vec![])),
            Err(e) => Err(Error::Dns(format!("PTR {name}: {e}"))),
        }
    }

    /// The browsing domains `fqdn` names besides itself (`b._dns-sd._udp.<fqdn>` PTR); none
    /// when it names none.
    async fn browsing_domains(&self, fqdn: &str) -> Result<Vec<String>> {
        let mut domains = self.ptr_if_exists(&format!("b._dns-sd._udp.{fqdn}")).await?.unwrap_or_default();
        domains.retain(|d| !d.eq_ignore_ascii_case(fqdn));
        domains.sort();
        domains.dedup();
        Ok(domains)
    }

    async fn target(&self, instance: &str) -> Result<WanTarget, TargetError> {
        let srv = match self.resolver.lookup(instance, RecordType::SRV).await {
            Ok(l) => l
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::SRV(s) => Some((s.priority, std::cmp::Reverse(s.weight), s.target.to_ascii(), s.port)),
                    _ => None,
                })
                .min(),
            Err(e) if e.is_no_records_found() => None,
            Err(e) => return Err(TargetError::Lookup(format!("SRV: {e}"))),
        };
        let Some((_, _, host, port)) = srv else { return Err(TargetError::NoSrv) };
        let txt: Vec<Vec<u8>> = match self.resolver.lookup(instance, RecordType::TXT).await {
            Ok(l) => l
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::TXT(t) => Some(t.txt_data.iter().map(|s| s.to_vec()).collect::<Vec<_>>()),
                    _ => None,
                })
                .flatten()
                .collect(),
            Err(e) if e.is_no_records_found() => vec![],
            Err(e) => return Err(TargetError::Lookup(format!("TXT: {e}"))),
        };
        let url_host = match self.resolve_host(&host).await? {
            Some(ip) if !self.urls_by_name => ip.to_string(),
            _ => host,
        };
        records::from_dns(&url_host, port, &txt).map_err(TargetError::Record)
    }

    /// The address of an SRV host (`None` when the name has no address: the URL then keeps the
    /// name, which another resolver may know).
    async fn resolve_host(&self, host: &str) -> Result<Option<IpAddr>, TargetError> {
        if let Ok(ip) = host.trim_end_matches('.').parse::<IpAddr>() {
            return Ok(Some(ip));
        }
        match self.resolver.lookup_ip(host).await {
            Ok(ips) => Ok(records::preferred_address(&ips.iter().collect::<Vec<_>>())),
            Err(e) if e.is_no_records_found() => Ok(None),
            Err(e) => Err(TargetError::Lookup(format!("address of {host}: {e}"))),
        }
    }
}

fn fqdn(domain: &str) -> String {
    let d = domain.trim();
    if d.ends_with('.') { d.to_owned() } else { format!("{d}.") }
}
