//! The hub: a real API server (etcd + kube-apiserver from `KUBEBUILDER_ASSETS`), our webhook
//! and our reconciler started from their binaries with the RBAC and webhook configurations
//! the manifests ship, and what is read of them: the reconciler's memory, CPU and log lines,
//! the API server's request counts, the webhook's admission-time histogram.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use kube::Client;
use liqo_testenv::{ControlPlane, Process, free_port};

/// The repository's manifests folder.
const MANIFESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests");

/// The resident memory of process `pid` now and at its peak (KiB; 0 when it is gone).
pub fn rss_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field =
        |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0);
    (field("VmRSS:"), field("VmHWM:"))
}

/// The hub and its two components.
pub struct Hub {
    pub cp: ControlPlane,
    pub admin: Client,
    pub bin: PathBuf,
    reconciler: Option<Process>,
    reconciler_token: String,
    reconciler_flags: Vec<String>,
    pub reconciler_ops: u16,
    /// The reconciler's auth service port: the same across restarts, as its Service's.
    reconciler_auth: u16,
    pub reconciler_log: PathBuf,
    _webhook: Process,
    pub webhook_ops: u16,
    /// The CPU limits of the run, when asked for: a reconciler started again goes into the
    /// hub's group.
    pub limits: Option<std::sync::Arc<crate::cpu_limit::CpuLimits>>,
}

impl Hub {
    /// Starts the hub with the binaries in `bin` (`liqo-webhook`, `liqo-reconciler`), the
    /// reconciler given `flags` besides what running outside a cluster needs.
    pub async fn start(bin: &Path, flags: &[String]) -> anyhow::Result<Self> {
        let cp = ControlPlane::start().await.map_err(|e| anyhow::anyhow!("the hub's control plane: {e:?}"))?;
        let admin = cp.admin();
        liqo_testenv::install_liqo(&admin, "liqo").await;
        for manifest in ["reconciler/rbac.yaml", "reconciler/peer-secrets.yaml", "webhook/rbac.yaml"] {
            let text = std::fs::read_to_string(Path::new(MANIFESTS).join(manifest))?;
            liqo_testenv::create_manifest(&admin, &text, "liqo").await;
        }
        let webhook_token = liqo_testenv::service_account_token(&admin, "liqo", "liqo-webhook").await;
        let reconciler_token = liqo_testenv::service_account_token(&admin, "liqo", "liqo-reconciler").await;
        let (webhook, webhook_ops) = start_webhook(&cp, bin, &webhook_token).await?;
        let mut hub = Self {
            admin,
            bin: bin.to_owned(),
            reconciler: None,
            reconciler_token,
            reconciler_flags: flags.to_vec(),
            reconciler_ops: free_port(),
            reconciler_auth: free_port(),
            reconciler_log: cp.path().join("reconciler.log"),
            cp,
            _webhook: webhook,
            webhook_ops,
            limits: None,
        };
        hub.start_reconciler().await?;
        Ok(hub)
    }

    /// Starts the reconciler (again: as its pod restarted, on the same ports, its log appended).
    pub async fn start_reconciler(&mut self) -> anyhow::Result<()> {
        self.reconciler = None;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.reconciler_log)?;
        let auth = self.reconciler_auth;
        let mut args = vec![
            "--namespace=liqo".to_owned(),
            format!("--auth-listen=127.0.0.1:{auth}"),
            format!("--ops-listen=127.0.0.1:{}", self.reconciler_ops),
            format!("--generate-cert-dir={}", self.cp.path().join("auth-certs").display()),
            format!("--api-url={}", self.cp.url),
            format!("--auth-url={}", self.auth_url()),
            "--no-mdns".to_owned(),
        ];
        args.extend(self.reconciler_flags.iter().cloned());
        let child = Command::new(self.bin.join("liqo-reconciler"))
            .env("KUBECONFIG", self.cp.kubeconfig(&self.reconciler_token))
            .args(args)
            .stdout(log.try_clone()?)
            .stderr(Stdio::from(log))
            .spawn()
            .context("starting liqo-reconciler")?;
        if let Some(limits) = &self.limits {
            limits.hub(child.id())?;
        }
        self.reconciler = Some(Process(child));
        wait_ready(self.reconciler_ops, Duration::from_secs(120)).await.with_context(|| self.log_tail())
    }

    /// Stops the reconciler as a pod is stopped (SIGTERM), waiting for it to exit.
    pub async fn stop_reconciler(&mut self) {
        if let Some(mut p) = self.reconciler.take() {
            let _ = Command::new("kill").args(["-TERM", &p.0.id().to_string()]).status();
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while p.0.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Where peers reach the reconciler's auth service.
    pub fn auth_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.reconciler_auth)
    }

    /// The reconciler's auth service, for callers on other local addresses.
    pub fn auth_addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.reconciler_auth))
    }

    /// The CA of the auth service's certificate (generated by the reconciler).
    pub fn auth_ca(&self) -> std::path::PathBuf {
        self.cp.path().join("auth-certs").join("ca.crt")
    }

    fn pid(&self) -> Option<u32> {
        self.reconciler.as_ref().map(|p| p.0.id())
    }

    /// The reconciler's resident memory now and at its peak (KiB).
    pub fn rss(&self) -> (u64, u64) {
        self.pid().map(rss_of).unwrap_or_default()
    }

    /// CPU seconds the reconciler used so far (user + system).
    pub fn cpu_seconds(&self) -> f64 {
        self.pid().map_or(0.0, cpu_seconds_of)
    }

    /// The hub's API server's resident memory now and at its peak, in KiB.
    pub fn api_rss(&self) -> (u64, u64) {
        self.cp.apiserver_pid().map(rss_of).unwrap_or_default()
    }

    /// CPU seconds the hub's API server used so far (user + system).
    pub fn api_cpu_seconds(&self) -> f64 {
        self.cp.apiserver_pid().map_or(0.0, cpu_seconds_of)
    }

    /// Lines the reconciler logged so far.
    pub fn log_lines(&self) -> usize {
        std::fs::read_to_string(&self.reconciler_log).map(|l| l.lines().count()).unwrap_or(0)
    }

    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.reconciler_log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The API server's `apiserver_request_total`, summed by (verb, resource, subresource).
    pub async fn api_requests(&self) -> anyhow::Result<Requests> {
        let text = self.admin.request_text(http::Request::get("/metrics").body(vec![])?).await?;
        Ok(Requests::parse(&text))
    }

    /// The reconciler's `/metrics`.
    pub async fn reconciler_metrics(&self) -> anyhow::Result<String> {
        http_get(self.reconciler_ops, "/metrics").await
    }

    /// The webhook's `/metrics`.
    pub async fn webhook_metrics(&self) -> anyhow::Result<String> {
        http_get(self.webhook_ops, "/metrics").await
    }
}

/// Requests the API server counted, by (verb, resource, subresource).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Requests(pub BTreeMap<(String, String, String), f64>);

impl Requests {
    /// From the Prometheus text of the API server's `/metrics` (pure).
    pub fn parse(text: &str) -> Self {
        let mut sums = BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            let label = |name: &str| label(series, name).unwrap_or_default().to_owned();
            let v: f64 = value.parse().unwrap_or(0.0);
            *sums.entry((label("verb"), label("resource"), label("subresource"))).or_insert(0.0) += v;
        }
        Self(sums)
    }

    /// The sum of what `pick(verb, resource, subresource)` selects.
    pub fn sum(&self, pick: impl Fn(&str, &str, &str) -> bool) -> f64 {
        self.0.iter().filter(|((v, r, s), _)| pick(v, r, s)).map(|(_, n)| n).sum()
    }

    /// The writes among them, `pick`ed by resource, as `verb resource[/subresource] count` by count.
    pub fn writes(&self, pick: impl Fn(&str) -> bool) -> String {
        self.by_count(|v, r| is_write(v) && pick(r))
    }

    /// The LISTs among them, as `LIST resource count` by count.
    pub fn lists(&self) -> String {
        self.by_count(|v, _| v == "LIST")
    }

    /// What `pick(verb, resource)` selects, as `verb resource[/subresource] count` by count.
    fn by_count(&self, pick: impl Fn(&str, &str) -> bool) -> String {
        let mut picked: Vec<(String, f64)> = self
            .0
            .iter()
            .filter(|((v, r, _), n)| pick(v, r) && **n > 0.0)
            .map(|((v, r, s), n)| (if s.is_empty() { format!("{v} {r}") } else { format!("{v} {r}/{s}") }, *n))
            .collect();
        picked.sort_by(|a, b| b.1.total_cmp(&a.1));
        picked.iter().map(|(w, n)| format!("{w} {n}")).collect::<Vec<_>>().join(", ")
    }

    pub fn since(&self, before: &Requests) -> Requests {
        Requests(self.0.iter().map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0.0))).collect())
    }
}

/// Whether `verb` (as the API server's metrics spell it) writes.
pub fn is_write(verb: &str) -> bool {
    matches!(verb, "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION" | "CREATE" | "UPDATE")
}

/// The `q` quantile (seconds) of the Prometheus histogram `name` in `text`, summed over its
/// label sets, from the upper bounds of its buckets (pure).
pub fn quantile(text: &str, name: &str, q: f64) -> Option<f64> {
    let mut buckets: BTreeMap<u64, f64> = BTreeMap::new();
    let prefix = format!("{name}_bucket{{");
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        let (series, value) = line.rsplit_once(' ')?;
        let le = label(series, "le")?;
        let bound = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
        *buckets.entry(bound.to_bits()).or_insert(0.0) += value.parse::<f64>().ok()?;
    }
    let mut sorted: Vec<(f64, f64)> = buckets.into_iter().map(|(b, n)| (f64::from_bits(b), n)).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = sorted.last()?.1;
    if total == 0.0 {
        return None;
    }
    sorted.into_iter().find(|(_, n)| *n >= q * total).map(|(b, _)| b)
}

/// The value of the series `series` (exact name and labels as printed) in `text` (pure).
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.split_whitespace().next()?.parse().ok())
}

/// The reconciler's offers by plan and what was on the remote before (`make/missing 3,
/// make/matching 1`), from its metrics `text` (`none` without any).
pub fn offers(text: &str) -> String {
    let counted: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("liqo_reconciler_offers_total{"))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some(format!("{}/{} {value}", label(series, "plan")?, label(series, "on_remote")?))
        })
        .collect();
    if counted.is_empty() { "none".to_owned() } else { counted.join(", ") }
}

/// The value of label `name` in `series` as the Prometheus text prints it
/// (`name{a="x",b="y"}`), by its exact name (pure).
fn label<'a>(series: &'a str, name: &str) -> Option<&'a str> {
    let labels = series.split_once('{')?.1.strip_suffix('}')?;
    labels.split(',').find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
}

async fn start_webhook(cp: &ControlPlane, bin: &Path, token: &str) -> anyhow::Result<(Process, u16)> {
    let (port, ops) = (free_port(), free_port());
    let certs = cp.path().join("webhook-certs");
    let log = std::fs::File::create(cp.path().join("webhook.log"))?;
    let child = Command::new(bin.join("liqo-webhook"))
        .env("KUBECONFIG", cp.kubeconfig(token))
        .args([
            format!("--listen=127.0.0.1:{port}"),
            format!("--ops-listen=127.0.0.1:{ops}"),
            format!("--generate-cert-dir={}", certs.display()),
            "--namespace=liqo".to_owned(),
        ])
        .stdout(log.try_clone()?)
        .stderr(Stdio::from(log))
        .spawn()
        .context("starting liqo-webhook")?;
    let process = Process(child);
    wait_ready(ops, Duration::from_secs(60)).await?;
    let manifest = std::fs::read_to_string(Path::new(MANIFESTS).join("webhook/webhook-configurations.yaml"))?;
    let ca = std::fs::read_to_string(certs.join("ca.crt"))?;
    let yaml = liqo_certs::inject_ca_bundle(&manifest, &ca, Some(&format!("https://127.0.0.1:{port}")))?;
    liqo_testenv::create_manifest(&cp.admin(), &yaml, "liqo").await;
    Ok((process, ops))
}

/// Waits until `/readyz` on the operations port answers 200.
async fn wait_ready(ops: u16, limit: Duration) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if http_status(ops, "/readyz").await == Some(200) {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            bail!("127.0.0.1:{ops}/readyz not 200 after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn http_status(port: u16, path: &str) -> Option<u16> {
    let (head, _) = liqo_testenv::plain_get(port, path).await?;
    head.split_whitespace().nth(1)?.parse().ok()
}

async fn http_get(port: u16, path: &str) -> anyhow::Result<String> {
    Ok(liqo_testenv::plain_get(port, path).await.with_context(|| format!("GET 127.0.0.1:{port}{path}"))?.1)
}

/// Connections dropped so far because a listener's accept queue was full, in this process's
/// network namespace (`ListenOverflows` of `/proc/net/netstat`): the peers' listener not
/// keeping up looks, to the hub, like a peer that drops packets.
pub fn listen_overflows() -> u64 {
    listen_overflows_in(&std::fs::read_to_string("/proc/net/netstat").unwrap_or_default())
}

/// `ListenOverflows` of a `/proc/net/netstat` text (pure): its `TcpExt:` lines are a header of
/// names and a line of values.
pub fn listen_overflows_in(netstat: &str) -> u64 {
    let lines: Vec<&str> = netstat.lines().filter(|l| l.starts_with("TcpExt:")).collect();
    let [names, values] = lines[..] else { return 0 };
    let at = names.split_whitespace().position(|n| n == "ListenOverflows");
    at.and_then(|i| values.split_whitespace().nth(i)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// CPU seconds this process (the fleet: the simulated peers, their broadcasters, the
/// scenarios) used so far.
pub fn fleet_cpu_seconds() -> f64 {
    cpu_seconds_of(std::process::id())
}

/// CPU seconds process `pid` used so far (user + system), from `/proc/PID/stat`.
pub fn cpu_seconds_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_overflows_are_read_from_the_tcpext_lines() {
        let netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 17 17\nIpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(listen_overflows_in(netstat), 17);
        assert_eq!(listen_overflows_in(""), 0);
    }

    #[test]
    fn api_server_requests_are_summed_by_verb_resource_and_subresource() {
        let text = "# HELP x\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"discovery.liqo.io\",resource=\"foreignclusters\",scope=\"cluster\",subresource=\"status\",verb=\"APPLY\",version=\"v1alpha1\"} 3\n\
            apiserver_request_total{code=\"409\",component=\"apiserver\",group=\"discovery.liqo.io\",resource=\"foreignclusters\",scope=\"cluster\",subresource=\"status\",verb=\"APPLY\",version=\"v1alpha1\"} 2\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"\",resource=\"secrets\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 7\n";
        let r = Requests::parse(text);
        assert_eq!(r.sum(|v, r, s| v == "APPLY" && r == "foreignclusters" && s == "status"), 5.0);
        assert_eq!(r.sum(|v, _, _| is_write(v)), 5.0);
        assert_eq!(r.sum(|v, _, _| v == "LIST"), 7.0);
        let later = Requests::parse(&text.replace("} 7", "} 9"));
        assert_eq!(later.since(&r).sum(|v, _, _| v == "LIST"), 2.0);
        assert_eq!(later.since(&r).lists(), "LIST secrets 2");
    }

    #[test]
    fn offers_are_listed_by_plan_and_what_the_remote_had() {
        let text = "# HELP liqo_reconciler_offers Offers\n\
            liqo_reconciler_offers_total{plan=\"make\",on_remote=\"missing\"} 3\n\
            liqo_reconciler_offers_total{plan=\"make\",on_remote=\"matching\"} 1\n\
            liqo_reconciler_reconciles_total{controller=\"foreign_cluster\",result=\"ok\"} 9\n";
        assert_eq!(offers(text), "make/missing 3, make/matching 1");
        assert_eq!(offers("liqo_reconciler_reconciles_total{result=\"ok\"} 9\n"), "none");
    }

    #[test]
    fn a_quantile_is_the_bound_of_the_first_bucket_holding_it() {
        let text = "h_bucket{e=\"a\",le=\"0.001\"} 90\nh_bucket{e=\"a\",le=\"0.01\"} 99\nh_bucket{e=\"a\",le=\"0.1\"} 100\nh_bucket{e=\"a\",le=\"+Inf\"} 100\n";
        assert_eq!(quantile(text, "h", 0.5), Some(0.001));
        assert_eq!(quantile(text, "h", 0.99), Some(0.01));
        assert_eq!(quantile(text, "h", 1.0), Some(0.1));
        assert_eq!(quantile("", "h", 0.5), None);
        assert_eq!(metric("a{b=\"c\"} 4\n", "a{b=\"c\"}"), Some(4.0));
    }
}
