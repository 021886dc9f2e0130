//! The URLs peers must use for this cluster, found in the cluster rather than typed: what
//! [`choose`] decides from what [`look`] reads, kept current by [`keep`] (a node replaced, the
//! NodePort changed, ConfigMap `liqo-reconciler-env` edited: picked up within a period, no
//! restart). Every replica keeps its own copy (each serves `/identity`); the leader publishes
//! it in the ClusterConfig's status ([`crate::cluster::published`]).

pub mod choose;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use tokio::sync::watch;

pub use choose::{Address, Found, Overrides, Problem, Seen, Source};

/// How often the cluster is looked at again (a handful of GETs; the nodes come from the
/// watch-fed store the broadcasters share).
pub const PERIOD: Duration = Duration::from_secs(30);

/// The names [`look`] reads.
pub const AUTH_SERVICE: &str = "liqo-auth";
pub const AUTH_INGRESS: &str = "liqo-auth";

/// A value that is fixed, or read from the addresses found at each use.
#[derive(Clone)]
pub enum Live<T> {
    Fixed(T),
    Found(watch::Receiver<Found>, fn(&Found) -> T),
}

impl<T: Clone> Live<T> {
    /// The value now.
    pub fn get(&self) -> T {
        match self {
            Live::Fixed(v) => v.clone(),
            Live::Found(rx, pick) => pick(&rx.borrow()),
        }
    }
}

impl Live<String> {
    /// The API server URL found.
    pub fn api_url(found: watch::Receiver<Found>) -> Self {
        Live::Found(found, |f| f.api.url.clone())
    }
}

impl Live<Option<String>> {
    /// The auth URL found, if any.
    pub fn auth_url(found: watch::Receiver<Found>) -> Self {
        Live::Found(found, |f| f.auth.as_ref().map(|a| a.url.clone()))
    }
}

impl From<String> for Live<String> {
    fn from(v: String) -> Self {
        Live::Fixed(v)
    }
}

impl From<&str> for Live<String> {
    fn from(v: &str) -> Self {
        Live::Fixed(v.to_owned())
    }
}

impl<T: Clone + std::fmt::Debug> std::fmt::Debug for Live<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Live::Fixed(v) => write!(f, "{v:?}"),
            Live::Found(..) => write!(f, "found: {:?}", self.get()),
        }
    }
}

/// Where to look and what was set by hand.
#[derive(Clone, Debug)]
pub struct Lookup {
    pub namespace: String,
    pub flags: Overrides,
    /// The API server URL this process uses.
    pub in_cluster: String,
    pub own_node: Option<String>,
}

/// `Ok(None)` for a 404 (or a 403: not ours to read), the object otherwise.
async fn get_opt<K>(api: &Api<K>, name: &str) -> kube::Result<Option<K>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(None),
        other => other,
    }
}

/// Reads what the cluster shows. A read that fails for another reason than absence fails the
/// whole look (the last answer is kept meanwhile).
pub async fn look(client: &Client, lookup: &Lookup, nodes: &[Arc<Node>]) -> kube::Result<Seen> {
    let ns = lookup.namespace.as_str();
    let env = get_opt(&Api::<ConfigMap>::namespaced(client.clone(), ns), choose::ENV_CONFIGMAP).await?;
    let value = |key: &str| env.as_ref().and_then(|c| c.data.as_ref()).and_then(|d| d.get(key)).cloned();
    let cluster_info = get_opt(&Api::<ConfigMap>::namespaced(client.clone(), "kube-public"), "cluster-info").await?;
    let endpoint = get_opt(&Api::<EndpointSlice>::namespaced(client.clone(), "default"), "kubernetes").await?;
    let kubernetes = get_opt(&Api::<Service>::namespaced(client.clone(), "default"), "kubernetes").await?;
    let auth = get_opt(&Api::<Service>::namespaced(client.clone(), ns), AUTH_SERVICE).await?;
    let ingress = get_opt(&Api::<Ingress>::namespaced(client.clone(), ns), AUTH_INGRESS).await?;
    let mut cluster_ips: Vec<String> = Vec::new();
    for service in [&kubernetes, &auth].into_iter().flatten() {
        cluster_ips.extend(service.spec.as_ref().and_then(|s| s.cluster_ips.clone()).unwrap_or_default());
    }
    Ok(Seen {
        config_map: Overrides { api_url: value(choose::API_URL_KEY), auth_url: value(choose::AUTH_URL_KEY) },
        flags: lookup.flags.clone(),
        cluster_info: cluster_info.as_ref().and_then(server_of_cluster_info),
        kubernetes_endpoint: endpoint.as_ref().and_then(endpoint_of),
        in_cluster: lookup.in_cluster.clone(),
        ingress_host: ingress.as_ref().and_then(|i| i.spec.as_ref()?.rules.as_ref()?.iter().find_map(|r| r.host.clone())),
        auth_service: auth.as_ref().map(auth_service_of),
        nodes: nodes.iter().map(|n| node_of(n)).collect(),
        own_node: lookup.own_node.clone(),
        cluster_ips,
    })
}

/// The `server` of the kubeconfig in `kube-public/cluster-info`.
fn server_of_cluster_info(cm: &ConfigMap) -> Option<String> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(cm.data.as_ref()?.get("kubeconfig")?).ok()?;
    kubeconfig.clusters.iter().find_map(|c| c.cluster.as_ref()?.server.clone())
}

/// The first ready address of the `kubernetes` EndpointSlice, with its `https` port.
fn endpoint_of(slice: &EndpointSlice) -> Option<(String, u16)> {
    let port = slice.ports.as_ref()?.iter().find(|p| p.name.as_deref().is_none_or(|n| n == "https"))?.port?;
    let ready = |e: &&k8s_openapi::api::discovery::v1::Endpoint| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
    let address = slice.endpoints.iter().flatten().filter(ready).find_map(|e| e.addresses.first().cloned())?;
    Some((address, u16::try_from(port).ok()?))
}

fn auth_service_of(s: &Service) -> choose::AuthService {
    let spec = s.spec.clone().unwrap_or_default();
    let port = spec.ports.as_ref().and_then(|p| p.first());
    let lb = s.status.as_ref().and_then(|st| st.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_ref());
    choose::AuthService {
        type_: spec.type_.clone().unwrap_or_else(|| "ClusterIP".into()),
        node_port: port.and_then(|p| p.node_port).and_then(|p| u16::try_from(p).ok()),
        port: port.and_then(|p| u16::try_from(p.port).ok()).unwrap_or(443),
        load_balancer: lb.map(|l| l.iter().filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone())).collect()).unwrap_or_default(),
    }
}

fn node_of(n: &Node) -> choose::Node {
    let addresses = n.status.as_ref().and_then(|s| s.addresses.clone()).unwrap_or_default();
    let of = |t: &str| addresses.iter().filter(|a| a.type_ == t).map(|a| a.address.clone()).collect();
    let spec = n.spec.clone().unwrap_or_default();
    choose::Node {
        name: n.metadata.name.clone().unwrap_or_default(),
        external_ips: of("ExternalIP"),
        internal_ips: of("InternalIP"),
        pod_cidrs: spec.pod_cidrs.or(spec.pod_cidr.map(|c| vec![c])).unwrap_or_default(),
    }
}

/// Looks once `nodes` is filled, then every `period` until every receiver is gone, sending
/// what is found when it changes.
pub async fn keep(client: Client, lookup: Lookup, nodes: Store<Node>, found: watch::Sender<Found>, period: Duration) {
    if nodes.wait_until_ready().await.is_err() {
        tracing::error!("the nodes' store never became ready; the auth URL will not be found");
    }
    let mut first = true;
    loop {
        match look(&client, &lookup, &nodes.state()).await {
            Ok(seen) => {
                let now = choose::choose(&seen);
                // The first look is always told (a receiver may wait for it).
                let was_first = std::mem::take(&mut first);
                found.send_if_modified(|told| {
                    let changed = *told != now;
                    if changed || was_first {
                        tell(&now);
                    }
                    *told = now.clone();
                    changed || was_first
                });
            }
            Err(e) => tracing::warn!(error = %e, "looking for the addresses peers use; keeping the last ones"),
        }
        if found.is_closed() {
            return;
        }
        tokio::time::sleep(period).await;
    }
}

fn tell(found: &Found) {
    let auth = found.auth.as_ref();
    tracing::info!(
        api_url = %found.api.url, api_url_from = %found.api.source,
        auth_url = auth.map(|a| a.url.as_str()).unwrap_or("-"),
        auth_url_from = %auth.map(|a| a.source.to_string()).unwrap_or_else(|| "none found".into()),
        "addresses peers are told"
    );
    for p in &found.problems {
        tracing::warn!(problem = %p, "an address no peer can reach");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_info_gives_its_server() {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": "apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    certificate-authority-data: AAAA\n    server: https://kind-control-plane:6443\ncontexts: []\nusers: []\n"}
        }))
        .unwrap();
        assert_eq!(server_of_cluster_info(&cm).as_deref(), Some("https://kind-control-plane:6443"));
        let empty: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": "cluster-info"}})).unwrap();
        assert_eq!(server_of_cluster_info(&empty), None);
    }

    #[test]
    fn the_endpoint_slice_gives_a_ready_address_and_the_https_port() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.213.0.9"], "conditions": {"ready": false}},
                {"addresses": ["10.213.0.11"], "conditions": {"ready": true}}
            ],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]
        }))
        .unwrap();
        assert_eq!(endpoint_of(&slice), Some(("10.213.0.11".into(), 6443)));
    }

    #[test]
    fn a_service_and_a_node_are_read_as_seen() {
        let s: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "liqo-auth"},
            "spec": {"type": "NodePort", "ports": [{"name": "https", "port": 443, "nodePort": 31443}], "clusterIPs": ["10.96.5.5"]},
            "status": {"loadBalancer": {}}
        }))
        .unwrap();
        assert_eq!(
            auth_service_of(&s),
            choose::AuthService { type_: "NodePort".into(), node_port: Some(31443), port: 443, load_balancer: vec![] }
        );
        let n: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"podCIDR": "10.244.0.0/24"},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.213.0.11"}, {"type": "Hostname", "address": "n1"}]}
        }))
        .unwrap();
        let seen = node_of(&n);
        assert_eq!(
            (seen.internal_ips, seen.external_ips, seen.pod_cidrs),
            (vec!["10.213.0.11".to_string()], vec![], vec!["10.244.0.0/24".to_string()])
        );
    }
}
