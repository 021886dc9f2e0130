//! `kubectl liqo status [PEER]`: this cluster (identity, toggles, policy, the components) and
//! its peers; with PEER, everything about one peer. Exits 1 when a peer asked to join is not
//! joined, so scripts can gate on it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use liqo_api::{Advertisement, ClusterConfig, FederationRequest, ForeignCluster, PeeringRequest, SearchDomain};
use serde::Serialize;

use crate::error::{CliError, Result};
use crate::render::{self, Output};
use liqo_api::summary::Peer;

/// This cluster, as peers and its admin see it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThisCluster {
    pub cluster_id: Option<String>,
    pub cluster_name: Option<String>,
    pub namespace: String,
    pub discovery: bool,
    pub advertisement: bool,
    pub autojoin: bool,
    pub autojoin_untrusted: bool,
    pub peering_policy: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// The auth service and API server URLs peers are told (published by the reconciler in the
    /// ClusterConfig's status; else its Deployment's settings).
    pub auth_url: Option<String>,
    pub api_url: Option<String>,
    /// Where each URL came from (ConfigMap liqo-reconciler-env, cluster-info, a NodePort...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_url_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_url_from: Option<String>,
    /// Why peers may not reach those URLs (condition `AddressesReachable` not True), with
    /// the value to set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addresses_warning: Option<String>,
    /// SHA-256 of the CA the auth service's certificate chains to: what a peer's operator
    /// approves when pairing by fingerprint (`kubectl liqo trust`), as the reconciler
    /// published it in the ClusterConfig's status; or why it is not known.
    #[serde(rename = "authCAFingerprint")]
    pub auth_ca_fingerprint: String,
    pub reconciler: String,
    pub webhook: String,
    pub crds: String,
    /// PeeringRequests our policy refused lately (the webhook's record), the newest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused_requests: Vec<liqo_api::RefusedRequest>,
}

/// `status` without PEER.
#[derive(Clone, Debug, Serialize)]
pub struct Overview {
    pub cluster: ThisCluster,
    /// Every peer counted by state, before any selection.
    pub summary: Summary,
    /// The peers selected (`--phase`), at most `--limit` of them.
    pub peers: Vec<Peer>,
    /// Selected peers left out by `--limit`.
    #[serde(skip_serializing_if = "is_zero")]
    pub omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Every peer, counted by state, and those asked to join that are not joined.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub total: usize,
    /// How many peers are in each state ([`Peer::state_key`]), by state.
    pub by_state: std::collections::BTreeMap<String, usize>,
    /// Peers with `join: true` that are not joined (the first [`UNHEALTHY_NAMED`], by name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unhealthy: Vec<String>,
    pub unhealthy_count: usize,
}

/// How many unhealthy peers a summary names (the rest are counted).
pub const UNHEALTHY_NAMED: usize = 20;

/// Which peers `status` shows: `--phase` (a state as the summary names it, its phase or its
/// reason, any case) and `--limit` (0: all).
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub phase: Option<String>,
    pub limit: usize,
}

impl Selection {
    pub fn selects(&self, p: &Peer) -> bool {
        self.phase.as_deref().is_none_or(|want| p.in_state(want))
    }
}

impl Summary {
    /// Counts `peers` (sorted by name).
    pub fn of(peers: &[Peer]) -> Self {
        let mut s = Summary { total: peers.len(), ..Default::default() };
        for p in peers {
            *s.by_state.entry(p.state_key()).or_default() += 1;
            if !p.healthy() {
                s.unhealthy_count += 1;
                if s.unhealthy.len() < UNHEALTHY_NAMED {
                    s.unhealthy.push(p.name.clone());
                }
            }
        }
        s
    }

    /// One line: the total, then each state with its count, the most frequent first.
    pub fn line(&self) -> String {
        let mut states: Vec<(&String, &usize)> = self.by_state.iter().collect();
        states.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let each: Vec<String> = states.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if each.is_empty() { "0".into() } else { format!("{} ({})", self.total, each.join(", ")) }
    }
}

impl Overview {
    /// This cluster and every peer (sorted by name), shown as `selection` says.
    pub fn new(cluster: ThisCluster, all: Vec<Peer>, selection: &Selection) -> Self {
        let summary = Summary::of(&all);
        let mut peers: Vec<Peer> = all.into_iter().filter(|p| selection.selects(p)).collect();
        let omitted = if selection.limit > 0 { peers.len().saturating_sub(selection.limit) } else { 0 };
        peers.truncate(peers.len() - omitted);
        Self { cluster, summary, peers, omitted }
    }

    pub fn healthy(&self) -> bool {
        self.summary.unhealthy_count == 0
    }

    /// Why `status` exits 1: the unhealthy peers, the first few by name.
    pub fn unhealthy_line(&self) -> String {
        let s = &self.summary;
        let more = s.unhealthy_count - s.unhealthy.len();
        let more = if more > 0 { format!(" and {more} more (kubectl liqo status --phase …)") } else { String::new() };
        format!("not joined although join is true: {}{more}", s.unhealthy.join(", "))
    }

    pub fn render(&self, output: Output) -> String {
        match output {
            Output::Json | Output::Yaml => render::structured(self, output),
            _ => {
                let c = &self.cluster;
                let on = |b: bool| if b { "on" } else { "off" };
                let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
                let from = |v: &Option<String>, f: &Option<String>| match f {
                    Some(f) => format!("{} (from {f})", dash(v)),
                    None => dash(v),
                };
                let mut policy = c.peering_policy.clone();
                if !c.allow.is_empty() {
                    policy.push_str(&format!(" (allow: {})", c.allow.join(", ")));
                }
                if !c.deny.is_empty() {
                    policy.push_str(&format!(" (deny: {})", c.deny.join(", ")));
                }
                let mut out = render::fields(&[
                    ("CLUSTER-ID", dash(&c.cluster_id)),
                    ("CLUSTER-NAME", dash(&c.cluster_name)),
                    ("NAMESPACE", c.namespace.clone()),
                    ("DISCOVERY", on(c.discovery).into()),
                    ("ADVERTISEMENT", on(c.advertisement).into()),
                    ("AUTOJOIN", format!("{} (untrusted peers: {})", on(c.autojoin), on(c.autojoin_untrusted))),
                    ("PEERING-POLICY", policy),
                    ("AUTH-URL", from(&c.auth_url, &c.auth_url_from)),
                    ("API-URL", from(&c.api_url, &c.api_url_from)),
                    ("ADDRESSES", c.addresses_warning.as_ref().map_or_else(|| "ok".into(), |w| format!("WARNING: {w}"))),
                    ("AUTH-CA-FINGERPRINT", c.auth_ca_fingerprint.clone()),
                    ("RECONCILER", c.reconciler.clone()),
                    ("WEBHOOK", c.webhook.clone()),
                    ("CRDS", c.crds.clone()),
                    ("PEERS", self.summary.line()),
                ]);
                out.push('\n');
                if !c.refused_requests.is_empty() {
                    out.push_str("REFUSED PEERING REQUESTS (WHY says which: the peering policy, to accept one: set join: true on its ForeignCluster, create one, approve its fingerprint, or add it to peeringAllowList; or a claim on a cluster ID bound to another cluster, see kubectl liqo free)\n");
                    let rows: Vec<Vec<String>> = c
                        .refused_requests
                        .iter()
                        .map(|r| {
                            vec![
                                r.cluster_id.clone(),
                                r.cluster_name.clone().unwrap_or_else(|| "-".into()),
                                r.count.to_string(),
                                r.last_time.0.to_string(),
                                r.message.clone(),
                            ]
                        })
                        .collect();
                    out.push_str(&render::table(&["CLUSTER-ID", "NAME", "COUNT", "LAST", "WHY"], &rows));
                    out.push('\n');
                }
                if self.summary.total == 0 {
                    out.push_str("no peers (kubectl liqo discover, or kubectl liqo peer AUTH_URL)\n");
                } else if self.peers.is_empty() {
                    out.push_str("no peer in that state\n");
                } else {
                    out.push_str(&render::peers(&self.peers, output == Output::Wide));
                }
                if self.omitted > 0 {
                    out.push_str(&format!("… and {} more (--limit)\n", self.omitted));
                }
                out
            }
        }
    }
}

/// `status PEER`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerDetail {
    pub peer: Peer,
    /// The peer's Advertisement here: its resources, when it is there.
    pub advertisement: Option<serde_json::Value>,
    /// Recent Events about the ForeignCluster: type, reason, note, count, last seen.
    pub events: Vec<EventLine>,
    /// When the reconciler last checked it (its record, ConfigMap liqo-last-checks), when on
    /// record: a time, or `since <time>` (checked on time, at or after it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_check: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub note: String,
    pub count: i32,
    pub last_seen: String,
}

impl PeerDetail {
    pub fn render(&self, output: Output) -> String {
        match output {
            Output::Json | Output::Yaml => render::structured(self, output),
            _ => {
                let p = &self.peer;
                let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
                let advertisement = match (&p.advertisement, &self.advertisement) {
                    (Some(name), Some(resources)) => format!("{name} ({resources})"),
                    (Some(name), None) => name.clone(),
                    _ => "-".into(),
                };
                let mut out = render::fields(&[
                    ("NAME", p.name.clone()),
                    ("CLUSTER-ID", p.cluster_id.clone()),
                    ("CLUSTER-NAME", dash(&p.cluster_name)),
                    ("TYPE", p.discovery_type.clone()),
                    ("JOIN", p.join.to_string()),
                    ("OUTGOING", p.outgoing.to_string()),
                    ("INCOMING", p.incoming.to_string()),
                    ("STATE", p.state()),
                    ("LAST-CHECK", dash(&self.last_check)),
                    ("AUTH-URL", dash(&p.auth_url)),
                    ("API-URL", dash(&p.api_url)),
                    ("CA-FINGERPRINT", dash(&p.fingerprint_shown())),
                    ("OUR-PEERINGREQUEST", p.remote_peering_request.as_ref().map_or("-".into(), |n| format!("{n} (on the remote)"))),
                    ("ADVERTISEMENT", advertisement),
                    ("TENANT-NAMESPACE", p.tenant_namespace.as_ref().map_or("-".into(), |n| format!("{n} (its, here)"))),
                    ("REMOTE-TENANT", p.remote_tenant_namespace.as_ref().map_or("-".into(), |n| format!("{n} (ours, on the remote)"))),
                ]);
                out.push_str("\nPHASES\n");
                out.push_str(&if p.phases.is_empty() { "  none yet\n".into() } else { render::phases(&p.phases) });
                out.push_str("\nEVENTS\n");
                if self.events.is_empty() {
                    out.push_str("  none\n");
                } else {
                    let rows: Vec<Vec<String>> = self
                        .events
                        .iter()
                        .map(|e| vec![e.last_seen.clone(), e.type_.clone(), e.reason.clone(), format!("x{}", e.count), e.note.clone()])
                        .collect();
                    for line in render::table(&["LAST-SEEN", "TYPE", "REASON", "COUNT", "MESSAGE"], &rows).lines() {
                        out.push_str(&format!("  {line}\n"));
                    }
                }
                out
            }
        }
    }
}

/// Reads `what` (a ConfigMap, a Lease...), `None` when absent, the reason when not readable.
async fn read<K>(api: &Api<K>, name: &str) -> std::result::Result<Option<K>, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 403 => "not readable with your credentials".to_owned(),
        other => other.to_string(),
    })
}

/// The reconciler: who holds its Lease and how its Deployment fares.
async fn reconciler(client: &Client, ns: &str) -> (String, Option<String>, Option<String>) {
    let lease = match read(&Api::<Lease>::namespaced(client.clone(), ns), "liqo-reconciler").await {
        Ok(Some(l)) => {
            let spec = l.spec.unwrap_or_default();
            let holder = spec.holder_identity.unwrap_or_default();
            let renewed = spec.renew_time.map(|t| k8s_openapi::jiff::Timestamp::now().as_second() - t.0.as_second());
            let limit = i64::from(spec.lease_duration_seconds.unwrap_or(15));
            match renewed {
                Some(age) if !holder.is_empty() && age <= limit => format!("running, leader {holder} (renewed {age}s ago)"),
                _ => "no leader: the Lease expired (is the reconciler running?)".into(),
            }
        }
        Ok(None) => "not running (no Lease liqo-reconciler)".into(),
        Err(e) => format!("unknown: Lease {e}"),
    };
    let deployment = read(&Api::<Deployment>::namespaced(client.clone(), ns), "liqo-reconciler").await.ok().flatten();
    let env = |name: &str| {
        deployment
            .as_ref()?
            .spec
            .template
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.env.iter().flatten())
            .find(|e| e.name == name)?
            .value
            .clone()
    };
    let ready = deployment.as_ref().map(|d| {
        let s = d.status.clone().unwrap_or_default();
        format!("; Deployment {}/{} ready", s.ready_replicas.unwrap_or(0), d.spec.replicas.unwrap_or(1))
    });
    (lease + &ready.unwrap_or_default(), env("LIQO_AUTH_URL"), env("LIQO_API_URL"))
}

async fn webhook(client: &Client, ns: &str) -> String {
    match read(&Api::<Deployment>::namespaced(client.clone(), ns), "liqo-webhook").await {
        Ok(Some(d)) => {
            let s = d.status.unwrap_or_default();
            let want = d.spec.replicas.unwrap_or(1);
            format!("Deployment {}/{want} ready", s.ready_replicas.unwrap_or(0))
        }
        Ok(None) => "no Deployment liqo-webhook here (run elsewhere, or not installed)".into(),
        Err(e) => format!("unknown: Deployment {e}"),
    }
}

/// Which of Liqo's CRDs answer.
async fn crds(client: &Client) -> String {
    async fn served<K>(client: &Client) -> std::result::Result<(), String>
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        match Api::<K>::all(client.clone()).list(&ListParams::default().limit(1)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(()), // served, just not readable by us
            Err(_) => Err(K::kind(&()).into_owned()),
        }
    }
    let missing: Vec<String> = [
        served::<ForeignCluster>(client).await,
        served::<SearchDomain>(client).await,
        served::<PeeringRequest>(client).await,
        served::<FederationRequest>(client).await,
        served::<ClusterConfig>(client).await,
        served::<Advertisement>(client).await,
    ]
    .into_iter()
    .filter_map(|r| r.err())
    .collect();
    if missing.is_empty() { "installed".into() } else { format!("missing: {} (kubectl apply -k manifests/crds)", missing.join(", ")) }
}

/// How many ForeignClusters one LIST asks for (`--chunk-size`, as kubectl's): the API server
/// answers in pages, each turned into peer summaries before the next is read.
pub const CHUNK: u32 = 500;

/// Reads every ForeignCluster `chunk` at a time (0: in one LIST), handing each page to `visit`
/// before the next is read; stops at the first page `visit` finds what it wants in.
async fn each_page<T>(client: &Client, chunk: u32, mut visit: impl FnMut(Vec<ForeignCluster>) -> Option<T>) -> Result<Option<T>> {
    let api = Api::<ForeignCluster>::all(client.clone());
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default();
        if chunk > 0 {
            lp = lp.limit(chunk);
        }
        if let Some(t) = token.take() {
            lp = lp.continue_token(&t);
        }
        let page = api.list(&lp).await.map_err(|e| CliError::api("listing ForeignClusters", e))?;
        if let Some(found) = visit(page.items) {
            return Ok(Some(found));
        }
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(None),
        }
    }
}

/// Every ForeignCluster as a peer summary, sorted by name, read in pages of `chunk`.
pub async fn all_peers(client: &Client, chunk: u32) -> Result<Vec<Peer>> {
    let mut peers = Vec::new();
    each_page(client, chunk, |items| {
        peers.extend(items.iter().map(Peer::of));
        None::<()>
    })
    .await?;
    peers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(peers)
}

/// Gathers this cluster's status and every peer, shown as `selection` says.
pub async fn overview(client: &Client, ns: &str, selection: &Selection, chunk: u32) -> Result<Overview> {
    let id = read(&Api::<ConfigMap>::namespaced(client.clone(), ns), "cluster-id").await.ok().flatten();
    let cluster_id = id.and_then(|c| c.data?.get("cluster-id").cloned());
    let config = read(&Api::<ClusterConfig>::all(client.clone()), "liqo-configuration").await.ok().flatten();
    // What the running reconciler tells peers, as it published it; else its Deployment's settings.
    let told = config.as_ref().and_then(|c| c.status.clone()).unwrap_or_default();
    let refused_requests = told.refused_requests.clone();
    let spec = config.map(|c| c.spec).unwrap_or_default();
    let d = &spec.discovery_config;
    let (reconciler, auth_url, api_url) = reconciler(client, ns).await;
    let cluster = ThisCluster {
        cluster_id,
        cluster_name: d.cluster_name.clone().filter(|n| !n.is_empty()),
        namespace: ns.to_owned(),
        discovery: d.enable_discovery,
        advertisement: d.enable_advertisement,
        autojoin: d.autojoin,
        autojoin_untrusted: d.autojoin_untrusted,
        peering_policy: spec.peering_policy.as_str().to_owned(),
        allow: spec.peering_allow_list.clone(),
        deny: spec.peering_deny_list.clone(),
        auth_url_from: told.auth_url.as_ref().and(told.auth_url_from.clone()),
        api_url_from: told.api_url.as_ref().and(told.api_url_from.clone()),
        addresses_warning: told.addresses_warning().map(|c| format!("{} ({})", c.message, c.reason)),
        auth_url: told.auth_url.or(auth_url),
        api_url: told.api_url.or(api_url),
        auth_ca_fingerprint: told
            .auth_ca_fingerprint
            .unwrap_or_else(|| "unknown: not published in the ClusterConfig's status (is the reconciler running?)".into()),
        reconciler,
        webhook: webhook(client, ns).await,
        crds: crds(client).await,
        refused_requests,
    };
    let peers = all_peers(client, chunk).await?;
    Ok(Overview::new(cluster, peers, selection))
}

/// The ForeignCluster named `peer`, or standing for cluster ID `peer`: one GET by name, then one
/// LIST by the cluster-ID label (our webhook sets it); every ForeignCluster only when neither
/// finds it.
pub async fn find(client: &Client, peer: &str) -> Result<ForeignCluster> {
    let api = Api::<ForeignCluster>::all(client.clone());
    if let Some(fc) = api.get_opt(peer).await.map_err(|e| CliError::api(format!("reading ForeignCluster {peer}"), e))? {
        return Ok(fc);
    }
    let labelled = if is_label_value(peer) {
        let lp = ListParams::default().labels(&format!("{}={peer}", liqo_api::names::LABEL_CLUSTER_ID));
        api.list(&lp).await.map_err(|e| CliError::api("listing ForeignClusters by cluster ID", e))?.items
    } else {
        vec![]
    };
    if let Some(fc) = labelled.into_iter().find(|f| f.spec.remote_cluster_id() == Some(peer)) {
        return Ok(fc);
    }
    // A name the user gave a peer that discovery had found first (`peer URL --name N`).
    if is_label_value(peer) {
        let lp = ListParams::default().labels(&format!("{}={peer}", liqo_api::names::LABEL_PEER_NAME));
        let named = api.list(&lp).await.map_err(|e| CliError::api("listing ForeignClusters by the name given", e))?.items;
        if let Some(fc) = named.into_iter().next() {
            return Ok(fc);
        }
    }
    // One made without our webhook carries no label: looked for among all, a page at a time.
    if let Some(fc) = each_page(client, CHUNK, |items| items.into_iter().find(|f| f.spec.remote_cluster_id() == Some(peer))).await? {
        return Ok(fc);
    }
    Err(CliError::NotFound {
        what: format!("peer {peer} (no ForeignCluster of that name or cluster ID)"),
        hint: "kubectl liqo status lists the peers",
    })
}

/// Whether `v` may be a label value (else no ForeignCluster can carry it as its cluster ID
/// label, and the API server would refuse the selector).
fn is_label_value(v: &str) -> bool {
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    !v.is_empty()
        && v.len() <= 63
        && v.chars().all(inner)
        && v.starts_with(|c: char| c.is_ascii_alphanumeric())
        && v.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// When the reconciler last checked `name`, from its record in `namespace` (none when not on
/// record or not readable): its time, or `since <time>` for a peer we joined that is checked
/// on time (at or after that time, see [`liqo_api::last_checks`]).
async fn last_check(client: &Client, namespace: &str, name: &str, joined: bool) -> Option<String> {
    use liqo_api::last_checks::{CONFIGMAP, KEY, LastCheck, parse};
    let cm = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), namespace).get_opt(CONFIGMAP).await.ok()??;
    let record = parse(cm.data?.get(KEY)?);
    match record.of(name, joined)? {
        LastCheck::At(t) => Some(t.to_string()),
        LastCheck::Since(t) => Some(format!("since {t}")),
    }
}

/// Everything about one peer (`namespace`: the Liqo namespace).
pub async fn detail(client: &Client, namespace: &str, peer: &str) -> Result<PeerDetail> {
    let fc = find(client, peer).await?;
    let summary = Peer::of(&fc);
    let advertisement = match &summary.advertisement {
        Some(name) => Api::<Advertisement>::namespaced(client.clone(), &liqo_api::names::tenant_namespace(&summary.cluster_id))
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .map(|a| serde_json::to_value(&a.spec.resources).unwrap_or_default()),
        None => None,
    };
    let events = Api::<Event>::all(client.clone())
        .list(&ListParams::default().fields(&format!("regarding.name={}", fc.name_any())))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut lines: Vec<EventLine> = events
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("ForeignCluster"))
        .map(|e| {
            let last = liqo_api::summary::event_last_seen(&e).map(|t| t.to_string());
            EventLine {
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                note: e.note.unwrap_or_default(),
                count: e.series.as_ref().map_or(1, |s| s.count),
                last_seen: last.unwrap_or_default(),
            }
        })
        .collect();
    lines.sort_by(|a, b| a.last_seen.cmp(&b.last_seen));
    let recent = lines.split_off(lines.len().saturating_sub(10));
    let last_check = last_check(client, namespace, &fc.name_any(), summary.outgoing).await;
    Ok(PeerDetail { peer: summary, advertisement, events: recent, last_check })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// Compares `text` with `cli/tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites the file.
    fn golden(name: &str, text: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, text).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
        assert_eq!(text, want, "{name} differs from its golden file (UPDATE_GOLDEN=1 rewrites it)");
    }

    fn fc(json: serde_json::Value) -> ForeignCluster {
        serde_json::from_value(json).unwrap()
    }

    fn c(t: &str, s: &str, r: &str, m: &str) -> serde_json::Value {
        serde_json::json!({"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": "2026-11-23T10:00:00Z", "observedGeneration": 1})
    }

    fn peers() -> Vec<Peer> {
        let joined = fc(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "beta"},
            "spec": {"clusterIdentity": {"clusterID": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9", "clusterName": "beta"}, "join": true,
                     "discoveryType": "LAN", "authUrl": "https://10.77.0.2:8443"},
            "status": {"conditions": [
                c("Trusted", "False", "UntrustedAllowed", "unknown certificate authority, allowed by spec.allowUntrustedCA"),
                c("Authenticated", "True", "IdentityIssued", "identity stored in Secret beta-identity"),
                c("RemoteReachable", "True", "Reachable", "the remote API server answered"),
                c("CaVerified", "True", "Pinned", "the remote API server certificate verified against CA ab:cd"),
                c("Joined", "True", "Joined", "the remote accepted our PeeringRequest and advertises to us")],
                "caFingerprint": "ab:cd",
                "outgoing": {"joined": true, "remotePeeringRequestName": "0558de48-097b-4b7d-ba04-6bd2a0f9d24f",
                             "advertisement": "advertisement-9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"},
                "incoming": {"joined": true, "peeringRequest": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"},
                "tenantNamespace": {"local": "liqo-tenant-9a596a4b-591c-4ac6-8fd6-80258b4b3bf9",
                                    "remote": "liqo-tenant-0558de48-097b-4b7d-ba04-6bd2a0f9d24f"}}
        }));
        let refused = fc(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "gamma"},
            "spec": {"clusterIdentity": {"clusterID": "11111111-2222-3333-4444-555555555555"}, "join": true,
                     "discoveryType": "Manual", "authUrl": "https://gamma.example:30443"},
            "status": {"conditions": [
                c("Trusted", "True", "Trusted", "the auth service certificate verified"),
                c("Authenticated", "False", "TokenRefused", "remote auth service /identity: HTTP 403: wrong token"),
                c("RemoteReachable", "Unknown", "Waiting", "not checked: Authenticated is False (TokenRefused)"),
                c("CaVerified", "Unknown", "Waiting", "not checked: Authenticated is False (TokenRefused)"),
                c("Joined", "Unknown", "Waiting", "not checked: Authenticated is False (TokenRefused)")],
                "authStatus": "Refused"}
        }));
        vec![Peer::of(&joined), Peer::of(&refused)]
    }

    fn overview() -> Overview {
        Overview::new(
            ThisCluster {
                cluster_id: Some("0558de48-097b-4b7d-ba04-6bd2a0f9d24f".into()),
                cluster_name: Some("alpha".into()),
                namespace: "liqo".into(),
                discovery: true,
                advertisement: true,
                autojoin: true,
                autojoin_untrusted: false,
                peering_policy: "AcceptKnown".into(),
                allow: vec![],
                deny: vec!["66666666-7777-8888-9999-000000000000".into()],
                auth_url: Some("https://10.77.0.1:30443".into()),
                api_url: Some("https://10.77.0.1:6443".into()),
                auth_url_from: Some("Service liqo-auth (NodePort) on node alpha-cp (InternalIP)".into()),
                api_url_from: Some("ConfigMap kube-public/cluster-info".into()),
                addresses_warning: None,
                auth_ca_fingerprint: "3f1c5e0a9b7d2c4e6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e".into(),
                reconciler: "running, leader liqo-reconciler-7d9f (renewed 2s ago); Deployment 1/1 ready".into(),
                webhook: "Deployment 2/2 ready".into(),
                crds: "installed".into(),
                refused_requests: vec![liqo_api::RefusedRequest {
                    cluster_id: "44444444-5555-6666-7777-888888888888".into(),
                    cluster_name: Some("stranger".into()),
                    message: "peeringPolicy AcceptKnown: cluster 44444444-5555-6666-7777-888888888888 was not chosen here".into(),
                    first_time: Time(k8s_openapi::jiff::Timestamp::from_second(1_795_000_000).unwrap()),
                    last_time: Time(k8s_openapi::jiff::Timestamp::from_second(1_795_000_600).unwrap()),
                    count: 7,
                }],
            },
            peers(),
            &Selection::default(),
        )
    }

    #[test]
    fn the_summary_counts_every_peer_and_the_selection_shows_some() {
        let all = || {
            let mut many = peers();
            for i in 0..30 {
                let mut p = many[1].clone();
                p.name = format!("refused-{i:02}");
                many.push(p);
            }
            many
        };
        let o = Overview::new(overview().cluster, all(), &Selection { phase: Some("tokenrefused".into()), limit: 5 });
        assert_eq!(o.summary.total, 32);
        assert_eq!(o.summary.by_state.get("Authenticated: TokenRefused"), Some(&31));
        assert_eq!(o.summary.by_state.get("Joined"), Some(&1));
        assert_eq!(o.summary.line(), "32 (Authenticated: TokenRefused 31, Joined 1)");
        assert_eq!((o.peers.len(), o.omitted), (5, 26), "five shown of the 31 selected");
        assert!(o.peers.iter().all(|p| p.state() == "Authenticated: TokenRefused"));
        // Unhealthy: every refused peer counted, the first 20 named.
        assert_eq!((o.summary.unhealthy_count, o.summary.unhealthy.len()), (31, UNHEALTHY_NAMED));
        assert!(o.unhealthy_line().ends_with(" and 11 more (kubectl liqo status --phase …)"), "{}", o.unhealthy_line());
        let text = o.render(Output::Table);
        assert!(text.contains("PEERS                 32 (Authenticated: TokenRefused 31, Joined 1)"), "{text}");
        assert!(text.ends_with("… and 26 more (--limit)\n"), "{text}");
        // By phase, by reason, by the whole state; NotJoining for a peer not asked to join.
        for phase in ["Joined", "joined"] {
            let o = Overview::new(overview().cluster, all(), &Selection { phase: Some(phase.into()), limit: 0 });
            assert_eq!(o.peers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["beta"]);
        }
        let o = Overview::new(overview().cluster, all(), &Selection { phase: Some("Authenticated".into()), limit: 0 });
        assert_eq!((o.peers.len(), o.omitted), (31, 0));
        let o = Overview::new(overview().cluster, all(), &Selection { phase: Some("RemoteUnreachable".into()), limit: 0 });
        assert!(o.peers.is_empty());
        assert!(o.render(Output::Table).ends_with("no peer in that state\n"));
        let mut idle = peers().remove(1);
        idle.join = false;
        assert_eq!(idle.state_key(), "NotJoining");
    }

    #[test]
    fn only_label_values_are_looked_up_by_label() {
        assert!(is_label_value("9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"));
        for bad in ["", "-a", "a b", "a/b", &"x".repeat(64)] {
            assert!(!is_label_value(bad), "{bad:?}");
        }
    }

    #[test]
    fn status_in_every_output_format() {
        let o = overview();
        assert!(!o.healthy(), "gamma asks to join and is not joined");
        golden("status.table", &o.render(Output::Table));
        golden("status.wide", &o.render(Output::Wide));
        golden("status.json", &o.render(Output::Json));
        golden("status.yaml", &o.render(Output::Yaml));
    }

    #[test]
    fn where_the_addresses_came_from_and_a_warning_are_shown() {
        let mut o = overview();
        let table = o.render(Output::Table);
        assert!(table.contains("https://10.77.0.1:6443 (from ConfigMap kube-public/cluster-info)"), "{table}");
        assert!(table.contains("ADDRESSES             ok\n"), "{table}");
        o.cluster.addresses_warning = Some("the API server URL https://10.96.0.1:443 is a Service ClusterIP, which no peer can reach: set LIQO_API_URL in ConfigMap liqo-reconciler-env (AddressUnreachable)".into());
        let table = o.render(Output::Table);
        assert!(
            table.contains("ADDRESSES             WARNING: the API server URL https://10.96.0.1:443 is a Service ClusterIP"),
            "{table}"
        );
        let json: serde_json::Value = serde_json::from_str(&o.render(Output::Json)).unwrap();
        assert!(json["cluster"]["addressesWarning"].as_str().unwrap().contains("LIQO_API_URL"), "{json}");
        assert_eq!(json["cluster"]["apiUrlFrom"], "ConfigMap kube-public/cluster-info");
    }

    #[test]
    fn one_peer_in_every_output_format() {
        let mut p = peers();
        let refused = PeerDetail {
            peer: p.remove(1),
            advertisement: None,
            events: vec![EventLine {
                type_: "Warning".into(),
                reason: "TokenRefused".into(),
                note: "remote auth service /identity: HTTP 403: wrong token".into(),
                count: 1,
                last_seen: "2026-11-23T10:00:00Z".into(),
            }],
            last_check: None,
        };
        golden("peer-refused.table", &refused.render(Output::Table));
        golden("peer-refused.json", &refused.render(Output::Json));
        let joined = PeerDetail {
            peer: p.remove(0),
            advertisement: Some(serde_json::json!({"cpu": "8", "memory": "32Gi", "pods": "220"})),
            events: vec![],
            last_check: Some("2026-11-23T10:04:48Z".into()),
        };
        golden("peer-joined.table", &joined.render(Output::Table));
        golden("peer-joined.yaml", &joined.render(Output::Yaml));
    }
}
