//! Real Kubernetes control planes for integration tests, envtest-style: `KUBEBUILDER_ASSETS`
//! names a folder holding `etcd` and `kube-apiserver`; each [`ControlPlane`] runs both on
//! loopback with its own data directory and stops them when dropped.
//!
//! Without the binaries [`ControlPlane::start`] returns the reason, and tests print
//! `SKIPPED: <reason>` (visible in `cargo test` output) and pass without asserting anything else.
//!
//! Where the folder also has `kube-controller-manager`, it runs beside them with two
//! controllers only: `namespace` (a deleted namespace goes, with what it holds) and
//! `resourcequota` (what a quota's status says is used). No garbage collection, no token
//! controller. [`ControlPlane::controllers`] tells whether it runs.

pub mod browser;
pub mod dns;
pub mod https;
pub mod netns;
pub mod rbac;

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;

/// Why a control plane did not start.
#[derive(Debug)]
pub enum StartError {
    /// No binaries here: tests skip.
    Unavailable(String),
    /// The binaries exist but did not come up: tests fail.
    Failed(String),
}

impl From<String> for StartError {
    fn from(s: String) -> Self {
        Self::Failed(s)
    }
}

/// The admin token (user `admin`, group `system:masters`).
pub const ADMIN_TOKEN: &str = "liqo-testenv-admin-token";

/// Why integration tests cannot run here, or the asset folder. Without it, the command that
/// gets the binaries is said once per `cargo test` run.
pub fn assets() -> Result<PathBuf, String> {
    let found = assets_in(std::env::var_os("KUBEBUILDER_ASSETS"));
    if found.is_err() {
        say_once_per_run(TEST_ASSETS_HINT);
    }
    found
}

/// What a contributor runs to get the real tier's binaries.
pub const TEST_ASSETS_HINT: &str = "the real tier needs Kubernetes binaries: `just test-assets` (testenv/test-assets.sh) fetches \
     kube-apiserver, etcd and the node tier's four, checked against their published checksums, and prints the line to run the \
     tests with: KUBEBUILDER_ASSETS=<that folder> cargo test --workspace (docs/testing.md)";

fn assets_in(dir: Option<std::ffi::OsString>) -> Result<PathBuf, String> {
    let dir = dir.ok_or("KUBEBUILDER_ASSETS is not set (a folder with kube-apiserver and etcd)")?;
    let dir = PathBuf::from(dir);
    for bin in ["etcd", "kube-apiserver"] {
        if !dir.join(bin).is_file() {
            return Err(format!("KUBEBUILDER_ASSETS={} has no {bin}", dir.display()));
        }
    }
    Ok(dir)
}

/// Prints `SKIPPED: <what>` once per run of the process that started this one (`cargo test`
/// runs each test binary as its child): a marker in the temporary folder, named after that
/// process and its start time, says it was printed.
fn say_once_per_run(what: &str) {
    let parent = std::os::unix::process::parent_id();
    let started = std::fs::read_to_string(format!("/proc/{parent}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(19).map(str::to_owned)))
        .unwrap_or_default();
    let marker = std::env::temp_dir().join(format!("liqo-testenv-said-{parent}-{started}"));
    if std::fs::OpenOptions::new().write(true).create_new(true).open(marker).is_ok() {
        skip(what);
    }
}

/// The ports [`free_port`] hands out: below Linux's ephemeral range (32768–60999 by default),
/// so an outgoing connection of a busy API server never takes a port between the moment it is
/// handed out and the moment its server binds it (a port from `bind(0)` was such a race).
const PORTS: std::ops::Range<u16> = 20_000..32_000;

/// `GET path` over plain HTTP on 127.0.0.1:`port` (an ops port: `/metrics`, `/readyz`): the
/// status line and the body, `None` when it does not answer.
pub async fn plain_get(port: u16, path: &str) -> Option<(String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.ok()?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

/// A TCP port free on 127.0.0.1 right now, never handed out before in this process.
pub fn free_port() -> u16 {
    use std::sync::Mutex;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    // Start somewhere different in each process so two test processes rarely try the same ports.
    let seed = std::process::id() as usize * 7919 + given.len() * 104_729;
    let span = PORTS.len();
    let port = (0..span)
        .map(|i| PORTS.start + ((seed + i) % span) as u16)
        .find(|p| !given.contains(p) && TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port in 20000..32000");
    given.push(port);
    port
}

/// A child process killed (and reaped) when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One etcd + kube-apiserver pair on loopback.
pub struct ControlPlane {
    /// `https://127.0.0.1:<port>`
    pub url: String,
    /// CA that signed the API server's serving certificate (PEM).
    pub ca_pem: String,
    pub dir: tempfile::TempDir,
    /// How the API server is started, to start it again after [`ControlPlane::stop_apiserver`].
    apiserver_command: (PathBuf, Vec<String>),
    // Dropped in field order: the controllers, then the API server, then etcd.
    _controllers: Option<Process>,
    _apiserver: Option<Process>,
    _etcd: Process,
}

impl ControlPlane {
    /// Starts a control plane when the assets exist: `None` (after printing `SKIPPED: why`) when
    /// they do not; panics when they exist but the control plane does not come up.
    pub async fn start_or_skip() -> Option<Self> {
        match Self::start().await {
            Ok(cp) => Some(cp),
            Err(StartError::Unavailable(reason)) => {
                skip(&reason);
                None
            }
            Err(StartError::Failed(reason)) => panic!("control plane failed to start: {reason}"),
        }
    }

    /// Starts a control plane and waits until it is ready (up to 90 s).
    pub async fn start() -> Result<Self, StartError> {
        let assets = assets().map_err(StartError::Unavailable)?;
        Self::start_with(&assets).await.map_err(|e| match e {
            StartError::Unavailable(m) => StartError::Failed(m),
            failed => failed,
        })
    }

    async fn start_with(assets: &Path) -> Result<Self, StartError> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let d = dir.path();
        let log = |name: &str| std::fs::File::create(d.join(name)).map(Stdio::from).map_err(|e| e.to_string());

        let (client_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd = Command::new(assets.join("etcd"))
            .current_dir(d)
            .args([
                "--name=default".to_owned(),
                format!("--data-dir={}", d.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                "--unsafe-no-fsync=true".to_owned(),
            ])
            .stdout(log("etcd.log")?)
            .stderr(log("etcd.err.log")?)
            .spawn()
            .map_err(|e| format!("starting etcd: {e}"))?;
        let etcd = Process(etcd);

        // Serving certificate for 127.0.0.1 from our own CA, so clients verify it.
        let certs = d.join("certs");
        liqo_certs::files::ensure(&certs, &["127.0.0.1".into(), "localhost".into()], time::OffsetDateTime::now_utc(), &Default::default())
            .map_err(|e| e.to_string())?;
        let sa_key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        std::fs::write(d.join("sa.key"), sa_key.serialize_pem()).map_err(|e| e.to_string())?;
        std::fs::write(d.join("sa.pub"), sa_key.public_key_pem()).map_err(|e| e.to_string())?;
        let mut tokens = std::fs::File::create(d.join("tokens.csv")).map_err(|e| e.to_string())?;
        writeln!(tokens, "{ADMIN_TOKEN},admin,admin-uid,\"system:masters\"").map_err(|e| e.to_string())?;

        let mut args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", d.join("apiserver-certs").display()),
            format!("--tls-cert-file={}", certs.join("tls.crt").display()),
            format!("--tls-private-key-file={}", certs.join("tls.key").display()),
            "--service-account-issuer=https://kubernetes.default.svc".to_owned(),
            format!("--service-account-key-file={}", d.join("sa.pub").display()),
            format!("--service-account-signing-key-file={}", d.join("sa.key").display()),
            format!("--token-auth-file={}", d.join("tokens.csv").display()),
            "--authorization-mode=RBAC".to_owned(),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            "--allow-privileged=true".to_owned(),
        ];
        // Flags for a diagnostic run (an audit log, say), split on whitespace.
        let extra = std::env::var("LIQO_TESTENV_APISERVER_FLAGS").unwrap_or_default();
        args.extend(extra.split_whitespace().map(str::to_owned));
        let apiserver_command = (assets.join("kube-apiserver"), args);
        let apiserver = spawn_apiserver(d, &apiserver_command)?;

        let ca_pem = std::fs::read_to_string(certs.join("ca.crt")).map_err(|e| e.to_string())?;
        let mut cp = Self {
            url: format!("https://127.0.0.1:{api_port}"),
            ca_pem,
            dir,
            apiserver_command,
            _controllers: None,
            _apiserver: Some(apiserver),
            _etcd: etcd,
        };
        cp.wait_ready(Duration::from_secs(90)).await.map_err(StartError::Failed)?;
        let controllers = assets.join("kube-controller-manager");
        if controllers.exists() {
            cp._controllers = Some(cp.spawn_controllers(&controllers)?);
        }
        Ok(cp)
    }

    /// kube-controller-manager with the namespace and resourcequota controllers, serving
    /// nothing, on the admin's kubeconfig.
    fn spawn_controllers(&self, binary: &Path) -> Result<Process, StartError> {
        let d = self.dir.path();
        let kubeconfig = self.kubeconfig(ADMIN_TOKEN);
        let log = |name: &str| std::fs::File::create(d.join(name)).map(Stdio::from).map_err(|e| e.to_string());
        let child = Command::new(binary)
            .current_dir(d)
            .args([
                format!("--kubeconfig={}", kubeconfig.display()),
                "--controllers=namespace,resourcequota".to_owned(),
                "--leader-elect=false".to_owned(),
                "--secure-port=0".to_owned(),
                "--use-service-account-credentials=false".to_owned(),
            ])
            .stdout(log("controllers.log")?)
            .stderr(log("controllers.err.log")?)
            .spawn()
            .map_err(|e| format!("starting kube-controller-manager: {e}"))?;
        Ok(Process(child))
    }

    /// Whether kube-controller-manager runs beside the API server (deleted namespaces go).
    pub fn controllers(&self) -> bool {
        self._controllers.is_some()
    }

    fn log_tail(&self, name: &str) -> String {
        let log = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    async fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let client = self.client(ADMIN_TOKEN)?;
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self._etcd.0.try_wait() {
                return Err(format!("etcd exited ({status}):\n{}", self.log_tail("etcd.err.log")));
            }
            if let Some(Ok(Some(status))) = self._apiserver.as_mut().map(|p| p.0.try_wait()) {
                return Err(format!("kube-apiserver exited ({status}):\n{}", self.log_tail("apiserver.err.log")));
            }
            match client.request_text(http_get("/readyz")).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                _ if started.elapsed() > limit => {
                    return Err(format!("kube-apiserver not ready after {limit:?}:\n{}", self.log_tail("apiserver.err.log")));
                }
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// The API server's process ID, while it runs.
    pub fn apiserver_pid(&self) -> Option<u32> {
        self._apiserver.as_ref().map(|p| p.0.id())
    }

    /// Stops the API server (SIGKILL), leaving etcd and every stored object: the cluster is
    /// unreachable until [`ControlPlane::restart_apiserver`].
    pub fn stop_apiserver(&mut self) {
        self._apiserver = None;
    }

    /// Replaces the service-account signing key with a new one, with no overlap (the old one is
    /// no longer accepted), and starts the API server again: every ServiceAccount token it
    /// issued before is void, as on a control plane restored on new machines or a leaked key
    /// rotated at once. Waits until ready.
    pub async fn replace_signing_key(&mut self) {
        let key = rcgen::KeyPair::generate().expect("a new signing key");
        std::fs::write(self.dir.path().join("sa.key"), key.serialize_pem()).expect("writing sa.key");
        std::fs::write(self.dir.path().join("sa.pub"), key.public_key_pem()).expect("writing sa.pub");
        self.restart_apiserver().await;
    }

    /// Starts the API server again on the same address, with the same state; waits until ready.
    pub async fn restart_apiserver(&mut self) {
        self._apiserver = None;
        let started = Instant::now();
        // The port is ours again once the killed process let go of it.
        loop {
            match spawn_apiserver(self.dir.path(), &self.apiserver_command) {
                Ok(p) => {
                    self._apiserver = Some(p);
                    match self.wait_ready(Duration::from_secs(60)).await {
                        Ok(()) => return,
                        Err(e) if started.elapsed() > Duration::from_secs(90) => panic!("kube-apiserver did not come back: {e}"),
                        Err(_) => self._apiserver = None,
                    }
                }
                Err(e) => panic!("{e:?}"),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// How to reach the API server, verifying it against our CA, with no credentials.
    pub fn config(&self) -> Result<kube::Config, String> {
        let mut config = kube::Config::new(self.url.parse().map_err(|e| format!("{e}"))?);
        config.root_cert = Some(vec![pem_to_der(&self.ca_pem)?]);
        Ok(config)
    }

    /// A client authenticating with a bearer `token` and verifying the server against our CA.
    pub fn client(&self, token: &str) -> Result<Client, String> {
        let mut config = self.config()?;
        config.auth_info.token = Some(secrecy::SecretString::from(token.to_owned()));
        Client::try_from(config).map_err(|e| e.to_string())
    }

    /// The admin client.
    pub fn admin(&self) -> Client {
        self.client(ADMIN_TOKEN).expect("admin client")
    }

    /// Writes a kubeconfig for `token` (for kubectl) and returns its path.
    pub fn kubeconfig(&self, token: &str) -> PathBuf {
        let ca = self.dir.path().join("certs/ca.crt");
        let path = self.dir.path().join(format!("kubeconfig-{}", token.len()));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: t, user: u}}\ncurrent-context: c\n",
            self.url,
            ca.display()
        );
        std::fs::write(&path, text).expect("writing a kubeconfig");
        path
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn spawn_apiserver(dir: &Path, (binary, args): &(PathBuf, Vec<String>)) -> Result<Process, StartError> {
    let log =
        |name: &str| std::fs::OpenOptions::new().create(true).append(true).open(dir.join(name)).map(Stdio::from).map_err(|e| e.to_string());
    let child = Command::new(binary)
        .current_dir(dir)
        .args(args)
        .stdout(log("apiserver.log")?)
        .stderr(log("apiserver.err.log")?)
        .spawn()
        .map_err(|e| format!("starting kube-apiserver: {e}"))?;
    Ok(Process(child))
}

fn http_get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(vec![]).expect("a static request")
}

fn pem_to_der(pem: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD.decode(body).map_err(|e| e.to_string())
}

/// Prints the skip reason where `cargo test` shows it even for a passing test: straight to
/// the process's stderr (the print macros are captured by the test harness).
pub fn skip(reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
}

/// What a watch looks at, as the API server's `scope` label says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchScope {
    /// One object by name (`fieldSelector=metadata.name=…` counts as naming it).
    ByName,
    /// All of a resource over the whole cluster.
    Cluster,
}

impl WatchScope {
    fn label(self) -> &'static str {
        match self {
            WatchScope::ByName => "scope=\"resource\"",
            WatchScope::Cluster => "scope=\"cluster\"",
        }
    }
}

/// Watches of `resource` within `scope` the API server holds open now (its gauge
/// `apiserver_longrunning_requests`), read with a client allowed `GET /metrics` (the admin).
///
/// The scope tells ours from kube-controller-manager's: its resourcequota controller watches
/// every namespaced resource over the whole cluster, Advertisements included, from about 30 s
/// after their CRD is made.
pub async fn watches_open(admin: &Client, resource: &str, scope: WatchScope) -> f64 {
    let request = http::Request::get("/metrics").body(Vec::new()).expect("a GET");
    let text = admin.request_text(request).await.unwrap_or_default();
    let wanted = format!("resource=\"{resource}\"");
    text.lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{"))
        .filter(|l| l.contains(&wanted) && l.contains("verb=\"WATCH\"") && l.contains(scope.label()))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Polls `f` every 200 ms until it returns `Some`, for at most 30 s (then panics naming `what`).
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The fixed ClusterRoles of peers (`manifests/reconciler/peer-roles.yaml`), which the
/// reconciler binds in tenant namespaces.
pub const PEER_ROLES: &str = include_str!("../../manifests/reconciler/peer-roles.yaml");

/// Creates `namespace`, installs the generated CRDs, waiting until they are established, and
/// the fixed ClusterRoles of peers ([`PEER_ROLES`]).
pub async fn install_liqo(client: &Client, namespace: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, ObjectMeta, PostParams};

    let ns = Namespace { metadata: ObjectMeta { name: Some(namespace.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in liqo_api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    crds_established(client).await;
    create_manifest(client, PEER_ROLES, namespace).await;
}

/// Waits until every CRD of Liqo is established.
pub async fn crds_established(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::ResourceExt;
    use kube::api::Api;

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in liqo_api::crds::all() {
        let name = crd.name_any();
        eventually(&format!("{name} established"), || {
            let crds = crds.clone();
            let name = name.clone();
            async move {
                let c = crds.get(&name).await.ok()?;
                c.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
            }
        })
        .await;
    }
}

/// Creates every object of the multi-document YAML `text` (any kind the API server serves;
/// namespaced objects without a namespace go to `default_namespace`), in order.
/// Then waits until each RoleBinding and ClusterRoleBinding among them is in force
/// ([`rbac::in_force`]).
pub async fn create_manifest(client: &Client, text: &str, default_namespace: &str) -> Vec<kube::api::DynamicObject> {
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::core::GroupVersionKind;
    use kube::discovery::{Scope, pinned_kind};
    use serde::Deserialize;

    let mut created = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = serde_json::to_value(serde_yaml::Value::deserialize(doc).expect("YAML")).expect("JSON");
        if value.is_null() {
            continue;
        }
        let obj: DynamicObject = serde_json::from_value(value).expect("a Kubernetes object");
        let types = obj.types.clone().expect("apiVersion and kind");
        let gvk = GroupVersionKind::try_from(&types).expect("apiVersion");
        let (resource, caps) = pinned_kind(client, &gvk).await.unwrap_or_else(|e| panic!("{gvk:?} unknown: {e}"));
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => {
                Api::namespaced_with(client.clone(), obj.metadata.namespace.as_deref().unwrap_or(default_namespace), &resource)
            }
        };
        let name = obj.metadata.name.clone().unwrap_or_default();
        created.push(api.create(&PostParams::default(), &obj).await.unwrap_or_else(|e| panic!("creating {} {name}: {e}", gvk.kind)));
    }
    for binding in created.iter().filter(|o| o.types.as_ref().is_some_and(|t| t.kind.ends_with("RoleBinding"))) {
        rbac::in_force(client, binding).await;
    }
    created
}

/// A token of ServiceAccount `namespace/name` (TokenRequest), to run a component with exactly
/// the permissions its manifests grant.
pub async fn service_account_token(client: &Client, namespace: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{Api, PostParams};
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let issued = sas.create_token_request(name, &PostParams::default(), &TokenRequest::default()).await.expect("TokenRequest");
    issued.status.and_then(|s| s.token).unwrap_or_else(|| panic!("no token for {namespace}/{name}"))
}

/// The Event (events.k8s.io/v1) of `reason` about the object named `regarding`, if there is one.
pub async fn event(client: &Client, reason: &str, regarding: &str) -> Option<k8s_openapi::api::events::v1::Event> {
    let events = kube::api::Api::<k8s_openapi::api::events::v1::Event>::all(client.clone()).list(&Default::default()).await.ok()?;
    events
        .items
        .into_iter()
        .find(|e| e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding))
}

/// A loopback address that drops connection attempts: a listener whose accept queue is
/// full (Linux then drops SYNs, as a black hole does) and never accepts.
pub struct BlackHole {
    pub addr: std::net::SocketAddr,
    _listener: tokio::net::TcpListener,
    _queued: Vec<tokio::net::TcpStream>,
}

/// A [`BlackHole`] on 127.0.0.1: connects to its listener until the queue is full (the
/// connection that is not taken within 200 ms is the first dropped), then holds the queue.
pub async fn black_hole() -> BlackHole {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    // A backlog of 0 queues one connection; the next SYNs are dropped.
    let mut queued = Vec::new();
    while let Ok(Ok(s)) = tokio::time::timeout(Duration::from_millis(200), tokio::net::TcpStream::connect(addr)).await {
        queued.push(s);
        assert!(queued.len() < 8, "the accept queue never filled");
    }
    BlackHole { addr, _listener: listener, _queued: queued }
}

/// Waits until the API server publishes its OpenAPI document: `kubectl apply` validates against
/// it, and a freshly started API server may still be building it.
pub async fn openapi_published(client: &Client) {
    eventually("/openapi/v2 published", || async {
        let req = http::Request::get("/openapi/v2").body(Vec::new()).unwrap();
        client.request_text(req).await.ok().filter(|t| t.len() > 1000).map(drop)
    })
    .await;
}

/// What kubeadm (and kind) publish: `kube-public/cluster-info` with the API server's CA,
/// readable anonymously.
pub async fn publish_cluster_info(cp: &ControlPlane, admin: &Client) {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(&cp.ca_pem);
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {}\n  name: \"\"\n",
        cp.url
    );
    let manifest = format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: cluster-info, namespace: kube-public}}
data:
  kubeconfig: {kubeconfig:?}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: "kubeadm:bootstrap-signer-clusterinfo", namespace: kube-public}}
rules:
  - {{apiGroups: [""], resources: [configmaps], resourceNames: [cluster-info], verbs: [get]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: "kubeadm:bootstrap-signer-clusterinfo", namespace: kube-public}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: "kubeadm:bootstrap-signer-clusterinfo"}}
subjects:
  - {{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:anonymous"}}
"#
    );
    create_manifest(admin, &manifest, "kube-public").await;
}

/// A manifest tool (`kubectl`, `kubernetes-validate`): from `$LIQO_MANIFEST_TOOLS`, then
/// /opt/manifest-tools/bin (where `.ci/run` installs them from PyPI), then the PATH.
pub fn manifest_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LIQO_MANIFEST_TOOLS").map(PathBuf::from).into_iter().collect();
    dirs.push(PathBuf::from("/opt/manifest-tools/bin"));
    dirs.extend(std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default());
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// The README and every page of docs/, in order: what the docs tests read.
pub fn doc_pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    std::iter::once(root.join("README.md")).chain(docs).collect()
}

/// `path` as the repository names it (`docs/scaling.md`), for messages.
pub fn repo_relative(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace");
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(root.canonicalize().unwrap_or_else(|_| root.to_path_buf())).unwrap_or(&path).display().to_string()
}

/// The PATH with `tool`'s folder first, for a shell that runs the docs' commands as written.
pub fn path_with(tool: &Path) -> String {
    format!("{}:{}", tool.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default())
}
