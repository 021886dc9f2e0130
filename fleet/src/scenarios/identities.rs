//! The scenarios of identities (protocol §10): (r) every peer's identity in the hub renewed at once,
//! and (i) strangers on many addresses asking the hub's auth service for identities as fast as
//! its limits allow while a genuine cluster joins.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::names::{identity_secret, tenant_namespace};
use serde_json::json;

use super::{Row, Run, round};
use crate::answer::{identity_kubeconfig, service_account_token};
use crate::hub::metric;
use crate::peer::{Peer, TOKEN_LIFETIME};

/// The strangers' addresses in (i): 127.3.0.1 onwards, each within its own rate limit.
const STRANGERS: u32 = 200;

impl Run {
    /// (r) Every peer's identity in the hub made due at once, as if 90 % of its life had passed
    /// for all of them together (the fleet writes each `<fc>-identity` Secret with such a
    /// token; those writes are taken out of the row), once every peer is joined and reachable.
    /// Each is renewed with itself as the proof (`/identity` with `currentToken`); the row
    /// gives how long after its Secret was written each was renewed (the slowest as the
    /// convergence, within 2 health periods each).
    pub async fn renewals(&self) -> Row {
        let scenario = "r. every identity renewed";
        let settled = self.until(&self.fleet.peers, 4.0, super::healthy).await;
        let secrets = Api::<Secret>::namespaced(self.hub.admin.clone(), "liqo");
        let counted = |p: &Peer| p.renewals.load(Ordering::Relaxed);
        let start: Vec<u64> = self.fleet.peers.iter().map(|p| counted(p)).collect();
        let before = self.mark().await;
        let failed = AtomicU64::new(0);
        let due: Vec<Option<Instant>> = futures::stream::iter(self.fleet.peers.iter())
            .map(|p| {
                let (secrets, failed) = (&secrets, &failed);
                async move {
                    let made = make_due(p, secrets).await;
                    made.inspect_err(|_| {
                        failed.fetch_add(1, Ordering::Relaxed);
                    })
                    .ok()
                    .map(|()| Instant::now())
                }
            })
            .buffered(32)
            .collect()
            .await;
        let written = Instant::now();
        let deadline = self.health * 2;
        let renewed = |i: usize, p: &Arc<Peer>| counted(p) > start[i];
        let all = loop {
            let left = self.fleet.peers.iter().enumerate().filter(|(i, p)| !renewed(*i, p)).count();
            if left == 0 {
                break true;
            }
            if written.elapsed() > deadline {
                eprintln!("  {left} identities not renewed {:.0} s after the last was made due", deadline.as_secs_f64());
                break false;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let mut lags: Vec<Duration> = self
            .fleet
            .peers
            .iter()
            .zip(&due)
            .filter_map(|(p, due)| Some(p.renewed_at.lock().expect("not poisoned").as_ref()?.saturating_duration_since((*due)?)))
            .collect();
        lags.sort();
        let slowest = lags.last().copied();
        let still = self.until(&self.fleet.peers, 1.0, super::healthy).await;
        let after = self.mark().await;
        let n = self.n();
        let ok = all && settled.is_some() && still.is_some() && slowest.is_some_and(|s| s <= deadline);
        let mut row = self.row(scenario, n, (&before, &after), slowest.filter(|_| ok), n as f64);
        let secs = |d: Option<&Duration>| d.map_or("-".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()));
        row.note = format!(
            "{n} identities made due over {:.1} s ({} writes failed; every peer joined first: {}); each renewed after its write: median {}, 90th percentile {}, slowest {} ({} renewed); every peer joined after: {}",
            (written - before.at).as_secs_f64(),
            failed.load(Ordering::Relaxed),
            settled.is_some(),
            secs(lags.get(lags.len() / 2)),
            secs(lags.get(lags.len() * 9 / 10)),
            secs(slowest.as_ref()),
            lags.len(),
            still.is_some()
        );
        row
    }

    /// (i) Strangers on [`STRANGERS`] addresses ask the hub's auth service for identities of
    /// fresh cluster IDs for [`Run::flood`], each as fast as its rate limit allows (after a refusal
    /// it waits the Retry-After it was told), while a genuine cluster asks for its identity and
    /// then puts its PeeringRequest in its tenant namespace. The row says the most identities
    /// waiting at once (the cap holds them), when the genuine one was in, and how long after
    /// the strangers stopped none of theirs was left (3 health periods, and the sweep's round).
    pub async fn strangers(&self) -> Row {
        let scenario = "i. strangers ask identities";
        let (addr, ca) = (self.hub.auth_addr(), self.hub.auth_ca());
        let before = self.mark().await;
        let started = Instant::now();
        let answers = Arc::new(Answers::default());
        let flood: Vec<_> =
            (0..STRANGERS).map(|i| tokio::spawn(stranger(i, addr, ca.clone(), started + self.flood, answers.clone()))).collect();
        let genuine = tokio::spawn(genuine_join(addr, ca.clone(), started + self.flood + self.health * 4));
        let mut most = 0.0f64;
        while started.elapsed() < self.flood {
            most = most.max(self.waiting().await);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        for f in flood {
            let _ = f.await;
        }
        let stopped = Instant::now();
        let mut left = self.waiting().await;
        most = most.max(left);
        let deadline = self.health * 4;
        while left > 0.0 && stopped.elapsed() < deadline {
            tokio::time::sleep(Duration::from_secs(1)).await;
            left = self.waiting().await;
        }
        let cleared = (left == 0.0).then(|| stopped.elapsed());
        let joined = genuine.await.unwrap_or_else(|e| Err(format!("{e}")));
        let after = self.mark().await;
        let ok = cleared.filter(|_| joined.is_ok());
        let mut row = self.row(scenario, STRANGERS as usize, (&before, &after), ok, 0.0);
        let periods = |d: Duration| round(d.as_secs_f64() / self.health.as_secs_f64());
        row.note = format!(
            "{} strangers for {} s: {}; waiting at most {most} at once; none left {} after they stopped; the genuine cluster: {}",
            STRANGERS,
            self.flood.as_secs(),
            answers,
            cleared.map_or(format!("NO: {left} still waiting after {} periods", periods(deadline)), |d| format!(
                "{:.1} s ({} periods)",
                d.as_secs_f64(),
                periods(d)
            )),
            match &joined {
                Ok((identity, request)) => format!(
                    "its identity {:.1} s after it first asked ({} the strangers stopped), its PeeringRequest accepted {:.1} s after",
                    identity.as_secs_f64(),
                    if *identity < self.flood { "before" } else { "after" },
                    request.as_secs_f64()
                ),
                Err(e) => format!("NOT IN: {e}"),
            }
        );
        row
    }

    /// Identities issued and not used yet, as the hub's last sweep counted them.
    async fn waiting(&self) -> f64 {
        let text = self.hub.reconciler_metrics().await.unwrap_or_default();
        metric(&text, r#"liqo_reconciler_tenant_identities{state="waiting"}"#).unwrap_or(0.0)
    }
}

/// Writes `peer`'s identity in the hub as one 90 % through its life: a token the peer issued
/// (so that it proves a renewal), in the Secret the hub keeps it in.
async fn make_due(peer: &Peer, secrets: &Api<Secret>) -> anyhow::Result<()> {
    let hub_id = peer.objects.lock().expect("not poisoned").tokens.values().next().cloned();
    let hub_id = hub_id.ok_or_else(|| anyhow::anyhow!("{}: the hub asked no identity", peer.name))?;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let life = TOKEN_LIFETIME.as_secs() as i64;
    let token = service_account_token(&hub_id, now - life * 9 / 10, now + life / 10);
    let config = identity_kubeconfig(peer, &hub_id, &token).ok_or_else(|| anyhow::anyhow!("kubeconfig"))?;
    peer.objects.lock().expect("not poisoned").tokens.insert(token, hub_id);
    let patch = json!({"stringData": {liqo_reconciler::foreign_cluster::KUBECONFIG_KEY: config}});
    secrets.patch(&identity_secret(&peer.name), &PatchParams::default(), &Patch::Merge(patch)).await?;
    Ok(())
}

/// What the strangers were answered.
#[derive(Default)]
struct Answers {
    issued: AtomicU64,
    capped: AtomicU64,
    limited: AtomicU64,
    other: AtomicU64,
}

impl std::fmt::Display for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        write!(
            f,
            "{} issued, {} capped (503), {} rate-limited (429), {} other",
            n(&self.issued),
            n(&self.capped),
            n(&self.limited),
            n(&self.other)
        )
    }
}

/// One stranger on address 127.3.x.y: asks for a fresh cluster ID's identity until `until`,
/// waiting after each refusal the Retry-After it was told.
async fn stranger(i: u32, addr: SocketAddr, ca: std::path::PathBuf, until: Instant, answers: Arc<Answers>) {
    let source = IpAddr::from([127, 3, (i / 250) as u8, (i % 250 + 1) as u8]);
    let mut asked = 0u32;
    while Instant::now() < until {
        let id = format!("5a000000-{i:04x}-4000-8000-{asked:012x}");
        asked += 1;
        let body = json!({"clusterID": id, "token": ""});
        let answer = tokio::spawn({
            let ca = ca.clone();
            async move { liqo_testenv::https::request_from(source, addr, &ca, "POST", "/identity", body).await }
        })
        .await;
        let (counter, wait) = match &answer {
            Ok(a) if a.status == 201 => (&answers.issued, None),
            Ok(a) if a.status == 503 => (&answers.capped, retry_after(a)),
            Ok(a) if a.status == 429 => (&answers.limited, retry_after(a)),
            _ => (&answers.other, Some(Duration::from_secs(1))),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(wait) = wait {
            tokio::time::sleep(wait.min(until.saturating_duration_since(Instant::now()))).await;
        }
    }
}

fn retry_after(a: &liqo_testenv::https::Answer) -> Option<Duration> {
    let seconds = a.headers.get("retry-after")?.to_str().ok()?.parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// A genuine cluster on its own address: asks for its identity (as a peer retries: after the
/// Retry-After it is told) until `until`, then creates its PeeringRequest in its tenant
/// namespace with that identity. How long each took. The strangers compete with it for each
/// place under the cap that frees: it gets one while they ask, or once they stopped.
async fn genuine_join(addr: SocketAddr, ca: std::path::PathBuf, until: Instant) -> Result<(Duration, Duration), String> {
    const ID: &str = "6e000000-0000-4000-8000-000000000001";
    let source = IpAddr::from([127, 4, 0, 1]);
    let started = Instant::now();
    let kubeconfig = loop {
        let body = json!({"clusterID": ID, "token": ""});
        let answer = liqo_testenv::https::request_from(source, addr, &ca, "POST", "/identity", body).await;
        if answer.status == 201 {
            let issued: serde_json::Value = serde_json::from_slice(&answer.body).map_err(|e| e.to_string())?;
            break issued["kubeconfig"].as_str().unwrap_or_default().to_owned();
        }
        if Instant::now() > until {
            return Err(format!("refused to the end: {} {}", answer.status, String::from_utf8_lossy(&answer.body)));
        }
        tokio::time::sleep(retry_after(&answer).unwrap_or(Duration::from_secs(1))).await;
    };
    let identity = started.elapsed();
    let config = kube::config::Kubeconfig::from_yaml(&kubeconfig).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default()).await.map_err(|e| e.to_string())?;
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let tenant = tenant_namespace(ID);
    let spec: liqo_api::PeeringRequestSpec = serde_json::from_value(json!({
        "clusterIdentity": {"clusterID": ID}, "namespace": "liqo",
        "kubeConfigRef": {"name": format!("pr-kubeconfig-{ID}"), "namespace": tenant}
    }))
    .map_err(|e| e.to_string())?;
    let requests = Api::<liqo_api::PeeringRequest>::namespaced(client, &tenant);
    requests.create(&PostParams::default(), &liqo_api::PeeringRequest::new(ID, spec)).await.map_err(|e| e.to_string())?;
    Ok((identity, started.elapsed() - identity))
}
