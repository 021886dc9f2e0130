//! Which URLs peers must use for this cluster's API server and auth service, from what the
//! cluster shows (pure): an override first (ConfigMap `liqo-reconciler-env`, then the flag),
//! else the first candidate a peer can reach, in the order the kind of cluster publishes it.
//!
//! API server: `kube-public/cluster-info` (kubeadm, kind), the `kubernetes` Service's endpoint
//! (the API server's advertised address), the URL this process uses.
//! Auth service: the Ingress `liqo-auth` (the auth-ingress overlay), a LoadBalancer address of
//! Service `liqo-auth`, its NodePort on a node's ExternalIP, else its InternalIP (our own node
//! first, then by name).

use std::fmt;
use std::net::IpAddr;

/// The env ConfigMap's (and flags') names of the two values.
pub const API_URL_KEY: &str = "LIQO_API_URL";
pub const AUTH_URL_KEY: &str = "LIQO_AUTH_URL";
/// The ConfigMap whose keys override what is found (read live, no restart).
pub const ENV_CONFIGMAP: &str = "liqo-reconciler-env";

/// Values set by hand.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub api_url: Option<String>,
    pub auth_url: Option<String>,
}

/// Service `liqo-auth` as seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthService {
    pub type_: String,
    pub node_port: Option<u16>,
    /// Its port (`spec.ports[0].port`), for a LoadBalancer.
    pub port: u16,
    /// `status.loadBalancer.ingress[*]`: IPs or host names.
    pub load_balancer: Vec<String>,
}

/// A node as seen: its addresses by type and the pod ranges it hands out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub external_ips: Vec<String>,
    pub internal_ips: Vec<String>,
    pub pod_cidrs: Vec<String>,
}

/// Everything the cluster shows that an address can come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// ConfigMap `liqo-reconciler-env` (read each round).
    pub config_map: Overrides,
    /// `--api-url` / `--auth-url` (or their env variables), fixed at start.
    pub flags: Overrides,
    /// `server` of `kube-public/cluster-info`'s kubeconfig.
    pub cluster_info: Option<String>,
    /// The `kubernetes` Service's endpoint: (address, port).
    pub kubernetes_endpoint: Option<(String, u16)>,
    /// The API server URL this process uses (in a pod: the `kubernetes` Service's ClusterIP).
    pub in_cluster: String,
    /// Hosts of Ingress `liqo-auth` (its first rule's host).
    pub ingress_host: Option<String>,
    pub auth_service: Option<AuthService>,
    pub nodes: Vec<Node>,
    /// The node this process runs on (`NODE_NAME`), preferred for the NodePort.
    pub own_node: Option<String>,
    /// ClusterIPs known here (the `kubernetes` Service's, `liqo-auth`'s): never reachable from
    /// another cluster.
    pub cluster_ips: Vec<String>,
}

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    ConfigMap,
    Flag,
    ClusterInfo,
    KubernetesEndpoint,
    InCluster,
    Ingress,
    LoadBalancer,
    /// The NodePort on a node's address of that type (`ExternalIP` or `InternalIP`).
    NodePort {
        node: String,
        address_type: &'static str,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::ConfigMap => write!(f, "ConfigMap {ENV_CONFIGMAP}"),
            Source::Flag => f.write_str("the reconciler's flag or environment"),
            Source::ClusterInfo => f.write_str("ConfigMap kube-public/cluster-info"),
            Source::KubernetesEndpoint => f.write_str("EndpointSlice default/kubernetes"),
            Source::InCluster => f.write_str("this process's API server URL"),
            Source::Ingress => f.write_str("Ingress liqo-auth"),
            Source::LoadBalancer => f.write_str("Service liqo-auth (LoadBalancer)"),
            Source::NodePort { node, address_type } => write!(f, "Service liqo-auth (NodePort) on node {node} ({address_type})"),
        }
    }
}

/// One URL and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub url: String,
    pub source: Source,
}

/// Which of the two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Api,
    Auth,
}

impl Which {
    pub fn key(self) -> &'static str {
        match self {
            Which::Api => API_URL_KEY,
            Which::Auth => AUTH_URL_KEY,
        }
    }
}

/// Why no peer can reach an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreachable {
    Loopback,
    Unspecified,
    LinkLocal,
    ClusterIp,
    PodAddress,
    InClusterName,
    /// A name under `.invalid`, which never resolves (RFC 6761): a placeholder, such as the
    /// Ingress host `manifests/auth-ingress/` ships with until it is set.
    Placeholder,
    NotAUrl,
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unreachable::Loopback => "a loopback address",
            Unreachable::Unspecified => "an unspecified address",
            Unreachable::LinkLocal => "a link-local address",
            Unreachable::ClusterIp => "a Service ClusterIP",
            Unreachable::PodAddress => "a pod address",
            Unreachable::InClusterName => "a name only this cluster's DNS resolves",
            Unreachable::Placeholder => "a placeholder under .invalid, a name that never resolves",
            Unreachable::NotAUrl => "not an https URL with a host",
        })
    }
}

/// A value in use that no peer can reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub which: Which,
    pub url: String,
    pub why: Unreachable,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.which {
            Which::Api => "the API server URL",
            Which::Auth => "the auth URL",
        };
        write!(f, "{what} {} is {}, which no peer can reach: set {} in ConfigMap {ENV_CONFIGMAP}", self.url, self.why, self.which.key())
    }
}

/// What peers are told, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub api: Address,
    /// None: no way to reach the auth service was found (mDNS then advertises each
    /// interface's address with the auth port).
    pub auth: Option<Address>,
    pub problems: Vec<Problem>,
}

impl Found {
    /// Before the cluster was looked at: the overrides, else the URL this process uses.
    pub fn initial(flags: &Overrides, in_cluster: &str) -> Found {
        choose(&Seen { flags: flags.clone(), in_cluster: in_cluster.to_owned(), ..Default::default() })
    }
}

/// The addresses to tell peers (pure).
pub fn choose(seen: &Seen) -> Found {
    let api = pick(seen, overrides(seen, |o| &o.api_url), api_candidates(seen))
        .unwrap_or_else(|| Address { url: seen.in_cluster.clone(), source: Source::InCluster });
    let auth = pick(seen, overrides(seen, |o| &o.auth_url), auth_candidates(seen));
    let mut problems = Vec::new();
    for (which, address) in [(Which::Api, Some(&api)), (Which::Auth, auth.as_ref())] {
        if let Some(a) = address
            && let Some(why) = unreachable(&a.url, seen)
        {
            problems.push(Problem { which, url: a.url.clone(), why });
        }
    }
    Found { api, auth, problems }
}

fn overrides(seen: &Seen, value: impl Fn(&Overrides) -> &Option<String>) -> Option<Address> {
    let set = |o: &Overrides| value(o).as_deref().map(str::trim).filter(|v| !v.is_empty()).map(|v| v.trim_end_matches('/').to_owned());
    set(&seen.config_map)
        .map(|url| Address { url, source: Source::ConfigMap })
        .or_else(|| set(&seen.flags).map(|url| Address { url, source: Source::Flag }))
}

/// An override as it is; else the first candidate a peer can reach; else the first one.
fn pick(seen: &Seen, chosen: Option<Address>, candidates: Vec<Address>) -> Option<Address> {
    if chosen.is_some() {
        return chosen;
    }
    let first = candidates.first().cloned();
    candidates.into_iter().find(|a| unreachable(&a.url, seen).is_none()).or(first)
}

fn api_candidates(seen: &Seen) -> Vec<Address> {
    let mut out = Vec::new();
    if let Some(server) = seen.cluster_info.as_deref().map(|s| s.trim().trim_end_matches('/')).filter(|s| !s.is_empty()) {
        out.push(Address { url: server.to_owned(), source: Source::ClusterInfo });
    }
    if let Some((host, port)) = &seen.kubernetes_endpoint {
        out.push(Address { url: https(host, *port), source: Source::KubernetesEndpoint });
    }
    out.push(Address { url: seen.in_cluster.trim_end_matches('/').to_owned(), source: Source::InCluster });
    out
}

fn auth_candidates(seen: &Seen) -> Vec<Address> {
    let mut out = Vec::new();
    if let Some(host) = seen.ingress_host.as_deref().filter(|h| !h.is_empty()) {
        out.push(Address { url: format!("https://{host}"), source: Source::Ingress });
    }
    let Some(service) = &seen.auth_service else { return out };
    if service.type_ == "LoadBalancer" {
        for lb in &service.load_balancer {
            out.push(Address { url: https(lb, service.port), source: Source::LoadBalancer });
        }
    }
    let Some(port) = service.node_port.filter(|_| service.type_ == "NodePort" || service.type_ == "LoadBalancer") else { return out };
    let mut nodes: Vec<&Node> = seen.nodes.iter().collect();
    nodes.sort_by_key(|n| (Some(&n.name) != seen.own_node.as_ref(), n.name.clone()));
    for (address_type, of) in
        [("ExternalIP", (|n: &Node| &n.external_ips) as fn(&Node) -> &Vec<String>), ("InternalIP", |n: &Node| &n.internal_ips)]
    {
        for node in &nodes {
            for ip in of(node) {
                out.push(Address { url: https(ip, port), source: Source::NodePort { node: node.name.clone(), address_type } });
            }
        }
    }
    out
}

/// `https://host:port`, an IPv6 address in brackets.
fn https(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("https://[{v6}]:{port}"),
        _ => format!("https://{host}:{port}"),
    }
}

/// Why no peer can reach `url`, when that is plain from here (pure).
pub fn unreachable(url: &str, seen: &Seen) -> Option<Unreachable> {
    let Ok(parsed) = url::Url::parse(url) else { return Some(Unreachable::NotAUrl) };
    if parsed.scheme() != "https" {
        return Some(Unreachable::NotAUrl);
    }
    let ip = match parsed.host() {
        None => return Some(Unreachable::NotAUrl),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if name == "localhost" || name.ends_with(".localhost") {
                return Some(Unreachable::Loopback);
            }
            if name == "invalid" || name.ends_with(".invalid") {
                return Some(Unreachable::Placeholder);
            }
            let in_cluster = name.ends_with(".svc")
                || name.contains(".svc.")
                || name.ends_with(".cluster.local")
                || name == "kubernetes"
                || name.starts_with("kubernetes.default");
            return in_cluster.then_some(Unreachable::InClusterName);
        }
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
    };
    if ip.is_loopback() {
        return Some(Unreachable::Loopback);
    }
    if ip.is_unspecified() {
        return Some(Unreachable::Unspecified);
    }
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    if link_local {
        return Some(Unreachable::LinkLocal);
    }
    if seen.cluster_ips.iter().filter_map(|c| c.parse::<IpAddr>().ok()).any(|c| c == ip) {
        return Some(Unreachable::ClusterIp);
    }
    if seen.nodes.iter().flat_map(|n| &n.pod_cidrs).any(|cidr| in_cidr(ip, cidr)) {
        return Some(Unreachable::PodAddress);
    }
    None
}

/// Whether `ip` is in `cidr` (`10.244.0.0/24`, `fd00::/64`); false for a malformed range.
fn in_cidr(ip: IpAddr, cidr: &str) -> bool {
    let Some((net, bits)) = cidr.split_once('/') else { return false };
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else { return false };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, external: &[&str], internal: &[&str]) -> Node {
        Node {
            name: name.into(),
            external_ips: external.iter().map(|s| s.to_string()).collect(),
            internal_ips: internal.iter().map(|s| s.to_string()).collect(),
            pod_cidrs: vec!["10.244.0.0/24".into()],
        }
    }

    fn node_port(port: u16) -> Option<AuthService> {
        Some(AuthService { type_: "NodePort".into(), node_port: Some(port), port: 443, load_balancer: vec![] })
    }

    /// A kubeadm-like cluster: cluster-info published, one node, the NodePort Service.
    fn kubeadm() -> Seen {
        Seen {
            cluster_info: Some("https://192.168.1.10:6443".into()),
            kubernetes_endpoint: Some(("192.168.1.10".into(), 6443)),
            in_cluster: "https://10.96.0.1:443".into(),
            auth_service: node_port(31443),
            nodes: vec![node("cp", &[], &["192.168.1.10"])],
            cluster_ips: vec!["10.96.0.1".into()],
            ..Default::default()
        }
    }

    #[test]
    fn cluster_info_is_the_api_server_url_and_the_node_port_on_the_internal_ip_the_auth_url() {
        let found = choose(&kubeadm());
        assert_eq!(found.api, Address { url: "https://192.168.1.10:6443".into(), source: Source::ClusterInfo });
        let auth = found.auth.unwrap();
        assert_eq!(auth.url, "https://192.168.1.10:31443");
        assert_eq!(auth.source, Source::NodePort { node: "cp".into(), address_type: "InternalIP" });
        assert!(found.problems.is_empty(), "{:?}", found.problems);
    }

    #[test]
    fn without_cluster_info_the_kubernetes_endpoint_is_used() {
        let seen = Seen { cluster_info: None, ..kubeadm() };
        assert_eq!(choose(&seen).api, Address { url: "https://192.168.1.10:6443".into(), source: Source::KubernetesEndpoint });
        let v6 = Seen { cluster_info: None, kubernetes_endpoint: Some(("fd00::10".into(), 6443)), ..kubeadm() };
        assert_eq!(choose(&v6).api.url, "https://[fd00::10]:6443");
    }

    #[test]
    fn a_cluster_info_no_peer_can_reach_gives_way_to_the_endpoint() {
        let seen = Seen { cluster_info: Some("https://127.0.0.1:6443".into()), ..kubeadm() };
        assert_eq!(choose(&seen).api.source, Source::KubernetesEndpoint);
        assert!(choose(&seen).problems.is_empty());
    }

    #[test]
    fn only_the_in_cluster_url_is_used_but_refused_with_the_value_to_set() {
        let seen = Seen { cluster_info: None, kubernetes_endpoint: None, ..kubeadm() };
        let found = choose(&seen);
        assert_eq!(found.api, Address { url: "https://10.96.0.1:443".into(), source: Source::InCluster });
        assert_eq!(found.problems, vec![Problem { which: Which::Api, url: "https://10.96.0.1:443".into(), why: Unreachable::ClusterIp }]);
        let message = found.problems[0].to_string();
        assert!(message.contains("LIQO_API_URL") && message.contains("liqo-reconciler-env") && message.contains("ClusterIP"), "{message}");
    }

    #[test]
    fn an_external_ip_wins_over_internal_ones_and_our_own_node_over_others() {
        let seen = Seen {
            nodes: vec![node("a", &[], &["10.0.0.1"]), node("b", &[], &["10.0.0.2"]), node("c", &["203.0.113.7"], &["10.0.0.3"])],
            own_node: Some("b".into()),
            ..kubeadm()
        };
        assert_eq!(choose(&seen).auth.unwrap().url, "https://203.0.113.7:31443");
        let internal_only = Seen { nodes: seen.nodes[..2].to_vec(), ..seen.clone() };
        let auth = choose(&internal_only).auth.unwrap();
        assert_eq!(auth.url, "https://10.0.0.2:31443");
        assert_eq!(auth.source.to_string(), "Service liqo-auth (NodePort) on node b (InternalIP)");
        let no_own = Seen { own_node: None, ..internal_only };
        assert_eq!(choose(&no_own).auth.unwrap().url, "https://10.0.0.1:31443", "by name without our own node");
    }

    #[test]
    fn the_ingress_then_a_load_balancer_win_over_the_node_port() {
        let lb =
            AuthService { type_: "LoadBalancer".into(), node_port: Some(31443), port: 443, load_balancer: vec!["198.51.100.4".into()] };
        let seen = Seen { auth_service: Some(lb), ..kubeadm() };
        assert_eq!(choose(&seen).auth.unwrap(), Address { url: "https://198.51.100.4:443".into(), source: Source::LoadBalancer });
        let ingress = Seen { ingress_host: Some("liqo-auth.example.com".into()), ..seen.clone() };
        assert_eq!(choose(&ingress).auth.unwrap(), Address { url: "https://liqo-auth.example.com".into(), source: Source::Ingress });
    }

    #[test]
    fn the_ingress_placeholder_is_never_told_to_peers() {
        // manifests/auth-ingress/ as shipped, its host not set yet: the NodePort is told.
        let placeholder = Seen { ingress_host: Some("liqo-auth.invalid".into()), auth_service: node_port(31443), ..kubeadm() };
        let found = choose(&placeholder);
        assert_eq!(found.auth.unwrap().source, Source::NodePort { node: "cp".into(), address_type: "InternalIP" });
        assert!(found.problems.is_empty());
        assert_eq!(unreachable("https://liqo-auth.invalid", &placeholder), Some(Unreachable::Placeholder));
        // With nothing else to tell, the placeholder is named as a problem, never silently used.
        let alone = Seen { ingress_host: Some("liqo-auth.invalid".into()), auth_service: None, ..kubeadm() };
        let found = choose(&alone);
        assert_eq!(found.problems[0].why, Unreachable::Placeholder);
        assert!(found.problems[0].to_string().contains("placeholder under .invalid"));
    }

    #[test]
    fn a_cluster_ip_service_or_none_gives_no_auth_url() {
        let cluster_ip =
            Seen { auth_service: Some(AuthService { type_: "ClusterIP".into(), port: 443, ..Default::default() }), ..kubeadm() };
        assert_eq!(choose(&cluster_ip).auth, None);
        assert_eq!(choose(&Seen { auth_service: None, ..kubeadm() }).auth, None);
        let no_nodes = Seen { nodes: vec![], ..kubeadm() };
        assert_eq!(choose(&no_nodes).auth, None);
    }

    #[test]
    fn the_config_map_overrides_the_flag_which_overrides_what_is_found_even_when_unreachable() {
        let flags = Overrides { api_url: Some("https://api.example.com:6443/".into()), auth_url: Some("https://127.0.0.1:8443".into()) };
        let seen = Seen { flags: flags.clone(), ..kubeadm() };
        let found = choose(&seen);
        assert_eq!(found.api, Address { url: "https://api.example.com:6443".into(), source: Source::Flag });
        assert_eq!(found.auth.as_ref().unwrap().source, Source::Flag);
        assert_eq!(found.problems, vec![Problem { which: Which::Auth, url: "https://127.0.0.1:8443".into(), why: Unreachable::Loopback }]);
        assert!(found.problems[0].to_string().contains("LIQO_AUTH_URL"));
        let cm = Seen { config_map: Overrides { api_url: Some("https://1.2.3.4:6443".into()), auth_url: Some(" ".into()) }, ..seen };
        let found = choose(&cm);
        assert_eq!(found.api, Address { url: "https://1.2.3.4:6443".into(), source: Source::ConfigMap });
        assert_eq!(found.auth.unwrap().source, Source::Flag, "an empty ConfigMap value does not override");
    }

    #[test]
    fn unreachable_addresses_are_told_apart() {
        let seen = kubeadm();
        let cases = [
            ("https://127.0.0.1:6443", Some(Unreachable::Loopback)),
            ("https://[::1]:6443", Some(Unreachable::Loopback)),
            ("https://localhost:6443", Some(Unreachable::Loopback)),
            ("https://0.0.0.0:6443", Some(Unreachable::Unspecified)),
            ("https://169.254.1.1:6443", Some(Unreachable::LinkLocal)),
            ("https://[fe80::1]:6443", Some(Unreachable::LinkLocal)),
            ("https://10.96.0.1:443", Some(Unreachable::ClusterIp)),
            ("https://10.244.0.17:8443", Some(Unreachable::PodAddress)),
            ("https://kubernetes.default.svc:443", Some(Unreachable::InClusterName)),
            ("https://liqo-auth.liqo.svc.cluster.local", Some(Unreachable::InClusterName)),
            ("http://192.168.1.10:6443", Some(Unreachable::NotAUrl)),
            ("not a url", Some(Unreachable::NotAUrl)),
            ("https://192.168.1.10:6443", None),
            ("https://10.244.1.17:8443", None),
            ("https://api.example.com", None),
            ("https://kind-control-plane:6443", None),
        ];
        for (url, want) in cases {
            assert_eq!(unreachable(url, &seen), want, "{url}");
        }
    }

    #[test]
    fn ranges_are_matched_by_their_bits() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(in_cidr(ip("10.244.3.4"), "10.244.0.0/16"));
        assert!(!in_cidr(ip("10.245.3.4"), "10.244.0.0/16"));
        assert!(in_cidr(ip("fd00::5"), "fd00::/64"));
        assert!(!in_cidr(ip("fd00::5"), "10.0.0.0/8"));
        assert!(in_cidr(ip("1.2.3.4"), "0.0.0.0/0"));
        assert!(!in_cidr(ip("1.2.3.4"), "garbage"));
        assert!(!in_cidr(ip("1.2.3.4"), "1.2.3.0/40"));
    }

    #[test]
    fn the_initial_value_is_the_flag_else_the_in_cluster_url() {
        let none = Found::initial(&Overrides::default(), "https://10.96.0.1:443");
        assert_eq!(none.api.source, Source::InCluster);
        assert_eq!(none.auth, None);
        let set = Found::initial(&Overrides { api_url: Some("https://a:1".into()), auth_url: None }, "https://10.96.0.1:443");
        assert_eq!(set.api, Address { url: "https://a:1".into(), source: Source::Flag });
    }
}
