//! mDNS (RFC 6762/6763) with mdns-sd, I/O only: advertise this cluster as a `_liqo._tcp`
//! service and browse for others. Interfaces: up, multicast-capable and not loopback, unless
//! an allow-list names them or loopback is opted into (tests).

use std::net::IpAddr;
use std::path::Path;

use mdns_sd::{IfKind, IfPredicate, ServiceDaemon, ServiceEvent, ServiceInfo};

use super::records::{self, DiscoveredCluster, LiqoTxt, RecordError};
use crate::machinery::error::{Error, Result};

/// The mDNS port (RFC 6762).
pub const MDNS_PORT: u16 = 5353;

/// Which interfaces mDNS uses.
#[derive(Clone, Debug, Default)]
pub struct Interfaces {
    /// Only these interfaces (by name); empty: every eligible one.
    pub allow: Vec<String>,
    /// Also use loopback (off in production: peers are never on it).
    pub loopback: bool,
}

/// IFF_MULTICAST, as in `/sys/class/net/<if>/flags`.
const IFF_MULTICAST: u32 = 0x1000;

/// Whether interface `name` is multicast-capable (Linux; elsewhere assumed).
pub fn is_multicast_capable(name: &str) -> bool {
    let flags = Path::new("/sys/class/net").join(name).join("flags");
    match std::fs::read_to_string(flags) {
        Ok(text) => has_multicast_flag(&text),
        Err(_) => true,
    }
}

/// Whether interface flags as sysfs writes them (`0x1003`) include IFF_MULTICAST.
pub fn has_multicast_flag(sysfs_flags: &str) -> bool {
    u32::from_str_radix(sysfs_flags.trim().trim_start_matches("0x"), 16).is_ok_and(|f| f & IFF_MULTICAST != 0)
}

/// The service this cluster advertises (pure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advertised {
    /// `<clusterName or clusterID>`.
    pub instance: String,
    /// `<clusterID>.local.`
    pub host: String,
    /// The auth service port (SRV).
    pub port: u16,
    pub txt: LiqoTxt,
}

impl Advertised {
    /// What cluster `cluster_id` publishes: its name (or ID) as instance, `id`, `namespace`,
    /// `name`, and `auth`/`api` when they are known (without `auth`, browsers use the address
    /// and port of the service).
    pub fn new(
        cluster_id: &str,
        cluster_name: Option<&str>,
        namespace: &str,
        auth_url: Option<&str>,
        api_url: Option<&str>,
        port: u16,
    ) -> Self {
        let name = cluster_name.filter(|n| !n.is_empty());
        Self {
            instance: name.unwrap_or(cluster_id).to_owned(),
            host: format!("{cluster_id}.local."),
            port,
            txt: LiqoTxt {
                id: Some(cluster_id.to_owned()),
                namespace: Some(namespace.to_owned()),
                name: name.map(str::to_owned),
                auth: auth_url.and_then(records::https_url),
                api: api_url.and_then(records::https_url),
            },
        }
    }
}

/// What the browser saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sighting {
    /// A service resolved to a Liqo cluster.
    Found { fullname: String, cluster: DiscoveredCluster },
    /// A `_liqo._tcp` service we cannot use (no `id`, malformed key...).
    Unusable { fullname: String, why: RecordError },
    /// Resolved without a usable address yet (more answers follow).
    Pending { fullname: String },
    /// A service said goodbye or expired.
    Gone { fullname: String },
}

/// The cluster a resolved service describes (pure).
pub fn sighting(service: &mdns_sd::ResolvedService) -> Sighting {
    let txt: Vec<Vec<u8>> = service
        .get_properties()
        .iter()
        .map(|p| match p.val() {
            Some(v) => [p.key().as_bytes(), b"=", v].concat(),
            None => p.key().as_bytes().to_vec(),
        })
        .collect();
    let addresses: Vec<IpAddr> = service.get_addresses().iter().map(|a| a.to_ip_addr()).collect();
    let fullname = service.get_fullname().to_owned();
    match records::from_mdns(&txt, &addresses, service.get_port()) {
        Ok(cluster) => Sighting::Found { fullname, cluster },
        Err(RecordError::NoAddress) => Sighting::Pending { fullname },
        Err(why) => Sighting::Unusable { fullname, why },
    }
}

/// An mDNS daemon (its own thread) with our interface rules.
pub struct Mdns {
    daemon: ServiceDaemon,
    service_type: String,
}

impl Mdns {
    /// `service` is ClusterConfig's `service` (`_liqo._tcp`) and `domain` its `domain` (`local.`).
    pub fn start(service: &str, domain: &str, interfaces: &Interfaces) -> Result<Self> {
        Self::start_on_port(service, domain, interfaces, MDNS_PORT)
    }

    pub fn start_on_port(service: &str, domain: &str, interfaces: &Interfaces, port: u16) -> Result<Self> {
        let daemon = ServiceDaemon::new_with_port(port).map_err(|e| Error::Mdns(e.to_string()))?;
        let set = |r: mdns_sd::Result<()>| r.map_err(|e| Error::Mdns(e.to_string()));
        // Later selections win: the allow-list, then never an interface without multicast
        // (loopback only when opted into), then no loopback unless opted into.
        if !interfaces.allow.is_empty() {
            set(daemon.disable_interface(IfKind::All))?;
            for name in &interfaces.allow {
                set(daemon.enable_interface(IfKind::Name(name.clone())))?;
            }
        }
        let loopback = interfaces.loopback;
        set(daemon.disable_interface(IfKind::Predicate(IfPredicate::new(move |i| {
            // Off: not multicast-capable, unless it is loopback and loopback was opted into.
            let opted_loopback = loopback && i.is_loopback();
            !opted_loopback && !is_multicast_capable(&i.name)
        }))))?;
        if !loopback {
            set(daemon.disable_interface(vec![IfKind::LoopbackV4, IfKind::LoopbackV6]))?;
        }
        let service_type =
            format!("{}.{}", service.trim_end_matches('.'), if domain.ends_with('.') { domain.to_owned() } else { format!("{domain}.") });
        Ok(Self { daemon, service_type })
    }

    pub fn service_type(&self) -> &str {
        &self.service_type
    }

    /// Publishes `ad` (addresses follow the interfaces' as they change). Returns its full name.
    pub fn advertise(&self, ad: &Advertised) -> Result<String> {
        let props: Vec<(String, String)> =
            ad.txt.to_strings().into_iter().filter_map(|s| s.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned()))).collect();
        let info = ServiceInfo::new(&self.service_type, &ad.instance, &ad.host, (), ad.port, props.as_slice())
            .map_err(|e| Error::Mdns(e.to_string()))?
            .enable_addr_auto();
        let fullname = info.get_fullname().to_owned();
        self.daemon.register(info).map_err(|e| Error::Mdns(e.to_string()))?;
        Ok(fullname)
    }

    /// Says goodbye for a service published with [`Mdns::advertise`].
    pub async fn withdraw(&self, fullname: &str) {
        match self.daemon.unregister(fullname) {
            Ok(rx) => {
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), rx.recv_async()).await;
            }
            Err(e) => tracing::debug!(error = %e, "unregistering {fullname}"),
        }
    }

    /// Starts browsing; sightings arrive on the returned channel.
    pub fn browse(&self) -> Result<mdns_sd::Receiver<ServiceEvent>> {
        self.daemon.browse(&self.service_type).map_err(|e| Error::Mdns(e.to_string()))
    }

    /// Asks a service to confirm it is still there (RFC 6762 §10.4): without an answer its
    /// records are flushed and the browser reports it gone.
    pub fn verify(&self, fullname: &str) {
        if let Err(e) = self.daemon.verify(fullname.to_owned(), mdns_sd::VERIFY_TIMEOUT_DEFAULT) {
            tracing::debug!(error = %e, "verifying {fullname}");
        }
    }

    /// Records the daemon's cache holds now (PTR, SRV, TXT, addresses, NSEC, subtypes), or
    /// `None` when it does not say within 2 s.
    pub async fn cached_records(&self) -> Option<u64> {
        const CACHED: [&str; 6] = ["cached-ptr", "cached-srv", "cached-txt", "cached-addr", "cached-nsec", "cached-subtype"];
        let rx = self.daemon.get_metrics().ok()?;
        let metrics = tokio::time::timeout(std::time::Duration::from_secs(2), rx.recv_async()).await.ok()?.ok()?;
        Some(CACHED.iter().filter_map(|k| metrics.get(*k)).map(|v| u64::try_from(*v).unwrap_or(0)).sum())
    }

    pub fn stop_browse(&self) {
        let _ = self.daemon.stop_browse(&self.service_type);
    }

    /// Stops the daemon (after goodbyes for what it published).
    pub async fn shutdown(self) {
        if let Ok(rx) = self.daemon.shutdown() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), rx.recv_async()).await;
        }
    }
}

/// The sighting an event stands for, if any.
pub fn sighting_of(event: ServiceEvent) -> Option<Sighting> {
    match event {
        ServiceEvent::ServiceResolved(s) => Some(sighting(&s)),
        ServiceEvent::ServiceRemoved(_, fullname) => Some(Sighting::Gone { fullname }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn we_advertise_our_name_id_namespace_and_known_urls() {
        let ad = Advertised::new("abc-1", Some("home"), "liqo", Some("https://10.0.0.1:30443/"), None, 30443);
        assert_eq!(ad.instance, "home");
        assert_eq!(ad.host, "abc-1.local.");
        assert_eq!(ad.txt.to_strings(), vec!["id=abc-1", "namespace=liqo", "name=home", "auth=https://10.0.0.1:30443"]);
        let ad = Advertised::new("abc-1", Some(""), "liqo", None, Some("https://api.example:6443"), 8443);
        assert_eq!(ad.instance, "abc-1");
        assert_eq!(ad.txt.to_strings(), vec!["id=abc-1", "namespace=liqo", "api=https://api.example:6443"]);
    }

    #[test]
    fn multicast_capability_comes_from_the_interface_flags() {
        assert!(has_multicast_flag("0x1003\n"), "UP|BROADCAST|MULTICAST (a veth or ethernet)");
        assert!(!has_multicast_flag("0x9\n"), "UP|LOOPBACK (lo)");
        assert!(!has_multicast_flag("garbage"));
        assert!(is_multicast_capable("no-such-interface-here"), "unknown: left to mdns-sd");
    }
}
