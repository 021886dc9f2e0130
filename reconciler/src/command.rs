//! The `liqo-reconciler` command: its flags and the wiring of the library modules (the binary,
//! and the image's multi-call `liqo`, call [`main`]).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::addresses;
use crate::cluster::config::ClusterConfigKeeper;
use crate::cluster::identity::ClusterIdentity;
use crate::cluster::published;
use crate::context::Shared;
use crate::discovery::dnssd::DnsSd;
use crate::discovery::mdns::{Interfaces, MDNS_PORT};
use crate::discovery::{lan, memory, search_domain};
use crate::incoming::broadcaster::Broadcasters;
use crate::machinery::singleton::keep;
use crate::machinery::slim_store;
use crate::machinery::stores::{reflect, reflect_lean};
use crate::remote::auth::client::Verify;
use crate::remote::auth::rate::{Limiter, Rate};
use crate::remote::auth::service::{ApiServer, AuthService, IdentityGuard, ensure_token_secret};
use crate::remote::peer::Network;
use crate::remote::sessions::Sessions;
use crate::reporting::events::{Recorder, Reporter};
use crate::reporting::metrics::Metrics;
use crate::{foreign_cluster, incoming};
use anyhow::Context;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use clap::Parser;
use k8s_openapi::api::core::v1::{ConfigMap, Node, ObjectReference, Secret};
use kube::Api;
use kube::runtime::watcher;
use liqo_api::{Advertisement, FederationRequest, ForeignCluster, PeeringRequest};
use liqo_serve::logging::LogFormat;
use liqo_serve::{CertFiles, Limits, ReloadingCert, serve_https_limited, server_config, shutdown_signal};
use tokio::sync::watch;

/// What the reconciler calls itself to its API server (`User-Agent`): its name, the field manager
/// of its writes that name none, and its version.
pub const USER_AGENT: &str = concat!("liqo-reconciler/", env!("CARGO_PKG_VERSION"));

/// Liqo reconciler: keeps the cluster ID and the ClusterConfig, serves the auth service
/// (/ids, /identity, /ca) to peers, joins the ForeignClusters with spec.join=true, serves
/// incoming PeeringRequests/FederationRequests with one broadcaster per peer. Connects to the
/// API server in-cluster or via KUBECONFIG.
#[derive(Parser, Debug)]
#[command(name = "liqo-reconciler", version, about, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// The Liqo namespace.
    #[arg(long, env = "POD_NAMESPACE", default_value = "liqo")]
    namespace: String,
    /// HTTPS address of the auth service.
    #[arg(long, env = "AUTH_LISTEN", default_value = "0.0.0.0:8443")]
    auth_listen: SocketAddr,
    /// Plain-HTTP address for /healthz, /readyz and /metrics.
    #[arg(long, env = "OPS_LISTEN", default_value = "0.0.0.0:8080")]
    ops_listen: SocketAddr,
    /// PEM certificate chain of the auth service (reloaded when it changes).
    #[arg(long, env = "AUTH_TLS_CERT", default_value = "/etc/liqo/auth-tls/tls.crt")]
    auth_tls_cert: PathBuf,
    /// PEM private key of that certificate.
    #[arg(long, env = "AUTH_TLS_KEY", default_value = "/etc/liqo/auth-tls/tls.key")]
    auth_tls_key: PathBuf,
    /// Create (or renew) a CA and a certificate for localhost/127.0.0.1 (plus --auth-host) in
    /// this directory and serve it, instead of --auth-tls-cert/--auth-tls-key.
    #[arg(long)]
    generate_cert_dir: Option<PathBuf>,
    /// Extra names or addresses for the generated certificate (repeatable).
    #[arg(long = "auth-host")]
    auth_hosts: Vec<String>,
    /// URL peers use to reach this cluster's API server (default: found in the cluster —
    /// kube-public/cluster-info, else the `kubernetes` Service's endpoint; ConfigMap
    /// liqo-reconciler-env's LIQO_API_URL, read live, wins over this flag).
    #[arg(long, env = "LIQO_API_URL")]
    api_url: Option<String>,
    /// PEM file of the API server's CA, handed to peers (default: the CA this process trusts).
    #[arg(long, env = "LIQO_API_CA_FILE")]
    api_ca_file: Option<PathBuf>,
    /// URL of this cluster's auth service as peers reach it, written into our PeeringRequests
    /// and advertised on the LAN (`--advertised-auth-url` is its older name). Default: found in
    /// the cluster (Ingress liqo-auth, else Service liqo-auth's LoadBalancer address or NodePort
    /// on a node's ExternalIP, else InternalIP); ConfigMap liqo-reconciler-env's LIQO_AUTH_URL,
    /// read live, wins over this flag.
    #[arg(long, env = "LIQO_AUTH_URL", alias = "advertised-auth-url")]
    auth_url: Option<String>,
    /// The node this process runs on: its address is preferred for the auth service's NodePort.
    #[arg(long, env = "NODE_NAME")]
    node_name: Option<String>,
    /// PEM file of extra CAs that make peers' auth services Trusted (besides the system roots).
    #[arg(long, env = "LIQO_TRUSTED_CA_FILE")]
    trusted_ca_file: Option<PathBuf>,
    /// Seconds between health checks of a joined peer.
    #[arg(long, default_value_t = 30)]
    health_period_seconds: u64,
    /// Keep the record of when each joined peer was last checked (ConfigMap liqo-last-checks,
    /// written every half health period; the dashboard and `kubectl liqo status` read it). One
    /// line while every peer is checked on time, a line more for each late peer.
    #[arg(long, env = "LIQO_LAST_CHECKS_RECORD", default_value_t = true, action = clap::ArgAction::Set)]
    last_checks_record: bool,
    /// Seconds the deletion of a ForeignCluster waits for an unreachable remote before it
    /// completes locally.
    #[arg(long, default_value_t = 120)]
    unjoin_grace_seconds: u64,
    /// Seconds between refreshes of the Advertisements we keep in peers.
    #[arg(long, default_value_t = 30)]
    advertise_period_seconds: u64,
    /// Lifetime requested for the identities we issue peers, in hours (fractions allowed; at
    /// least 10 minutes, at most a year; the API server may shorten it): those the auth
    /// service issues and the one we hand a peer's broadcaster with our PeeringRequest. Their
    /// holders renew them after 80 % of it.
    #[arg(long, env = "LIQO_TOKEN_LIFETIME_HOURS", default_value = "168", value_parser = parse_lifetime_hours)]
    token_lifetime_hours: Duration,
    /// Identities issued and not used yet that may wait at once; beyond, POST /identity
    /// answers 503 with Retry-After until the sweep retires unused ones (three health periods).
    #[arg(long, env = "LIQO_MAX_WAITING_IDENTITIES", default_value_t = crate::tenancy::waiting::DEFAULT_CAP, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_waiting_identities: usize,
    /// ForeignClusters reconciled at once at most (0: no bound): bounds the memory a cold start
    /// or the end of an outage takes with thousands of peers.
    #[arg(long, env = "LIQO_MAX_CONCURRENT_RECONCILES", default_value_t = foreign_cluster::DEFAULT_MAX_CONCURRENT_RECONCILES)]
    max_concurrent_reconciles: u16,
    /// Joined peers' API servers connected to at once before their reconcile's turn, each
    /// health check then made over its connection before the turn too (0: the check connects
    /// in its turn): a peer that drops packets is told within seconds, holding no turn while it
    /// is waited for (each waits `--connect-wait-seconds` at most).
    #[arg(long, env = "LIQO_CONNECTS_IN_FLIGHT", default_value_t = crate::machinery::connect_first::DEFAULT_CONNECTS_IN_FLIGHT)]
    connects_in_flight: usize,
    /// How long a joined peer's API server has to take a TCP connection, when connected to
    /// first, before its status says it does not answer, and as long again to answer the health
    /// check made over it (5: three SYNs; raise it for peers behind slow or lossy links).
    #[arg(long, env = "LIQO_CONNECT_WAIT_SECONDS", default_value_t = crate::machinery::connect_first::CONNECT_WAIT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=60))]
    connect_wait_seconds: u64,
    /// Connections kept from one health check of a peer to the next, at most (0: none; each
    /// check then makes a connection and a TLS handshake of its own). A kept connection is a
    /// socket and about 0.4 KiB here; the peer's API server holds it open between checks. No
    /// more are kept than the open files limit (raised to its hard one) leaves room for.
    #[arg(long, env = "LIQO_KEPT_CONNECTIONS", default_value_t = crate::remote::kept::DEFAULT_MOST)]
    kept_connections: usize,
    /// POST /identity requests one client address (an IPv6 /64) may make at once…
    #[arg(long, default_value_t = 5)]
    auth_identity_burst: u32,
    /// …and regains per minute; beyond that it gets 429 with Retry-After.
    #[arg(long, default_value_t = 10)]
    auth_identity_per_minute: u32,
    /// Connections the auth service keeps open at once; more are closed as they arrive.
    #[arg(long, default_value_t = 512)]
    auth_max_connections: usize,
    /// At most this many ForeignClusters made by discovery (LAN and WAN together); clusters
    /// found beyond it are not recorded (said in the SearchDomain's status, logged for the LAN).
    #[arg(long, env = "LIQO_MAX_DISCOVERED_PEERS", default_value_t = crate::context::MAX_DISCOVERED)]
    max_discovered_peers: usize,
    /// Interfaces mDNS uses (repeatable; default: every interface that is up and
    /// multicast-capable, loopback excluded).
    #[arg(long = "mdns-interface", env = "LIQO_MDNS_INTERFACES", value_delimiter = ',')]
    mdns_interfaces: Vec<String>,
    /// Also use loopback for mDNS (testing only: peers are never there).
    #[arg(long)]
    mdns_loopback: bool,
    /// Never use mDNS in this process: LAN discovery and advertisement stay off whatever the
    /// ClusterConfig says (for networks where multicast must not be sent).
    #[arg(long, env = "LIQO_NO_MDNS")]
    no_mdns: bool,
    /// DNS server (ip:port) for SearchDomain lookups instead of /etc/resolv.conf's.
    #[arg(long, env = "LIQO_DNS_SERVER")]
    dns_server: Option<std::net::SocketAddr>,
    /// Requests a second to our API server, after a burst (client-go's token bucket; 0: no
    /// limit). The default lets a status write per peer of 10,000 through in 25 s, and 10,000
    /// peers join at once within 600 s.
    #[arg(long, env = "LIQO_KUBE_API_QPS", default_value_t = crate::machinery::throttle::DEFAULT_QPS)]
    kube_api_qps: f64,
    /// Requests to our API server at once before `--kube-api-qps` paces them.
    #[arg(long, env = "LIQO_KUBE_API_BURST", default_value_t = crate::machinery::throttle::DEFAULT_BURST)]
    kube_api_burst: u32,
    /// Events of one kind (reason and object kind) a second after a burst; those over it are
    /// counted and told every 10 s in one Event about the Lease (0: no limit).
    #[arg(long, env = "LIQO_EVENTS_PER_SECOND", default_value_t = crate::reporting::event_budget::DEFAULT_PER_SECOND)]
    events_per_second: f64,
    /// Events of one kind at once before `--events-per-second` paces them.
    #[arg(long, env = "LIQO_EVENTS_BURST", default_value_t = crate::reporting::event_budget::DEFAULT_BURST)]
    events_burst: u32,
    /// Seconds between lookups of a SearchDomain.
    #[arg(long, default_value_t = 30)]
    search_domain_period_seconds: u64,
    /// Run the controllers only while holding Lease `liqo-reconciler` in the namespace, so a
    /// second replica or a copy run from a laptop waits as a standby (`false`: run them at once).
    #[arg(long, env = "LIQO_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Browse the LAN (mDNS) and/or DNS domains (DNS-SD) for Liqo clusters and print them; no
    /// Kubernetes cluster needed.
    Discover(crate::discovery::discover::Args),
}

/// `--token-lifetime-hours`: hours, fractions allowed, from 10 minutes (the least a TokenRequest
/// may ask for) to a year.
fn parse_lifetime_hours(s: &str) -> Result<Duration, String> {
    let hours: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number of hours"))?;
    let seconds = (hours * 3600.0).round();
    if !(600.0..=365.0 * 24.0 * 3600.0).contains(&seconds) {
        return Err(format!("{s} hours: from 10 minutes (0.1667) to a year (8760)"));
    }
    Ok(Duration::from_secs(seconds as u64))
}

/// Runs `liqo-reconciler` with `args` (the first is the program name), until SIGTERM.
pub fn main(args: impl IntoIterator<Item = OsString>) -> anyhow::Result<()> {
    let args = Args::parse_from(args);
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(args))
}

async fn run(mut args: Args) -> anyhow::Result<()> {
    liqo_serve::logging::init(args.log_format);
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Some(Command::Discover(d)) = args.command.take() {
        if !crate::discovery::discover::run(d).await? {
            std::process::exit(1);
        }
        return Ok(());
    }

    liqo_serve::listen_for_shutdown();
    let mut kube_config = kube::Config::infer().await.context("finding the API server (in-cluster or KUBECONFIG)")?;
    // Who we are to the API server: its logs, its audit, and the field manager of every write
    // that names none (a patch adding our finalizer is recorded as ours, not as "unknown").
    kube_config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT)));
    let lookup = addresses::Lookup {
        namespace: args.namespace.clone(),
        flags: addresses::Overrides { api_url: args.api_url.clone(), auth_url: args.auth_url.clone() },
        in_cluster: kube_config.cluster_url.to_string().trim_end_matches('/').to_owned(),
        own_node: args.node_name.clone().filter(|n| !n.is_empty()),
    };
    let ca_pem = match &args.api_ca_file {
        Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        None => ApiServer::pem_of(kube_config.root_cert.as_deref().unwrap_or_default()),
    };
    let metrics = Arc::new(Metrics::default());
    let throttle = crate::machinery::throttle::ThrottleLayer::new(args.kube_api_qps, args.kube_api_burst, metrics.throttled.clone());
    let client = kube::client::ClientBuilder::try_from(kube_config).context("building the API client")?.with_layer(&throttle).build();

    // The URLs peers use, found in the cluster (and kept current), before anything hands
    // them out: the first look is awaited for a few seconds.
    let nodes = reflect_lean(Api::<Node>::all(client.clone()), watcher::Config::default().any_semantic());
    let (found_tx, mut found) = watch::channel(addresses::Found::initial(&lookup.flags, &lookup.in_cluster));
    tokio::spawn(addresses::keep(client.clone(), lookup, nodes.clone(), found_tx, addresses::PERIOD));
    if tokio::time::timeout(Duration::from_secs(5), found.changed()).await.is_err() {
        tracing::warn!("the addresses peers use are not found yet; telling the flags' or this process's until they are");
    }
    let api_server = ApiServer { url: addresses::Live::api_url(found.clone()), ca_pem };

    let (id_tx, id_rx) = watch::channel(None);
    let (cfg_tx, cfg_rx) = watch::channel(None);
    let identity = ClusterIdentity { client: client.clone() };
    tokio::spawn(keep(identity, Api::<ConfigMap>::namespaced(client.clone(), &args.namespace), id_tx));
    tokio::spawn(crate::cluster::identity::record(client.clone(), id_rx.clone()));
    tokio::spawn(keep(ClusterConfigKeeper, Api::all(client.clone()), cfg_tx));
    if let Err(e) = ensure_token_secret(&client, &args.namespace).await {
        tracing::warn!(error = %e, "cannot create the auth-token Secret; tokens other than empty ones will be refused");
    }

    let files = match &args.generate_cert_dir {
        Some(dir) => {
            let mut sans = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
            sans.extend(args.auth_hosts.iter().cloned());
            liqo_certs::files::ensure(dir, &sans, time::OffsetDateTime::now_utc(), &Default::default())?;
            CertFiles { cert: dir.join("tls.crt"), key: dir.join("tls.key") }
        }
        None => CertFiles { cert: args.auth_tls_cert.clone(), key: args.auth_tls_key.clone() },
    };
    let cert = ReloadingCert::load(files).context("loading the auth service certificate")?;
    let mut told = published::Told { auth_ca_fingerprint: published::approved_fingerprint(&cert.chain()), ..Default::default() };
    told.set_addresses(&found.borrow_and_update());
    let (told_tx, told_rx) = watch::channel(told);
    let told_tx = Arc::new(told_tx);
    tokio::spawn(published::follow_addresses(found.clone(), told_tx.clone()));
    let install_told = told_tx.clone();
    metrics.auth_certificate_expiry.set(liqo_certs::inspect::leaf_not_after_unix(&cert.chain()));
    let (served, reloaded) = (cert.clone(), metrics.clone());
    cert.clone().spawn_reloader(Duration::from_secs(5), move |result| {
        tracing::debug!(result, "auth certificate poll");
        let chain = served.chain();
        told_tx.send_modify(|t| t.auth_ca_fingerprint = published::approved_fingerprint(&chain));
        reloaded.auth_certificate_expiry.set(liqo_certs::inspect::leaf_not_after_unix(&chain));
    });

    // The peering controllers, on watch-fed stores.
    let ns = args.namespace.clone();
    let managed = format!("{}={}", foreign_cluster::MANAGED_BY.0, foreign_cluster::MANAGED_BY.1);
    // One watch of our Secrets: their data, and which hold an identity due for renewal.
    let (secrets, identities_due) = slim_store::reflect_slim_touching(
        Api::<Secret>::namespaced(client.clone(), &ns),
        watcher::Config::default().labels(&managed).any_semantic(),
        slim_store::secret_data,
        foreign_cluster::due_identity_of,
    );
    // One watch of the Advertisements: which exist, and whose changed (the controller's trigger).
    let (advertisements, adverts_touched) = slim_store::reflect_slim_touching(
        Api::<Advertisement>::all(client.clone()),
        watcher::Config::default().any_semantic(),
        slim_store::exists,
        |a: &Advertisement| a.spec.cluster_id.clone(),
    );
    // One copy of each ForeignCluster, for the controller and everyone else, with only the
    // managed fields someone reads.
    let foreign_ids = crate::context::foreign_cluster_ids();
    let foreign_followed = crate::machinery::stores::Reflected::start_indexed(
        Api::<ForeignCluster>::all(client.clone()),
        watcher::Config::default().any_semantic(),
        |fc: &mut ForeignCluster| crate::machinery::managers::trim(&mut fc.metadata.managed_fields),
        Some(foreign_ids.clone()),
    );
    let foreign = foreign_followed.store.clone();
    // Identities nobody uses are swept every third of a health period, and retired after
    // three health periods (protocol §10).
    let sweep_period = Duration::from_secs(args.health_period_seconds).div_f64(3.0).max(Duration::from_secs(1));
    let install_check =
        Arc::new(crate::tenancy::install::InstallCheck::new(client.clone()).with_gauge(metrics.install_parts_watched.clone()));
    let auth = Arc::new(AuthService {
        client: client.clone(),
        namespace: args.namespace.clone(),
        cluster_id: id_rx.clone(),
        config: cfg_rx.clone(),
        api_server,
        token_lifetime: args.token_lifetime_hours,
        limiter: Limiter::new(Rate { burst: args.auth_identity_burst, per_minute: args.auth_identity_per_minute }),
        outcomes: metrics.auth_identity.clone(),
        guard: IdentityGuard::new(foreign.clone(), args.max_waiting_identities, sweep_period).with_install_check(install_check.clone()),
    });
    let listener = std::net::TcpListener::bind(args.auth_listen).with_context(|| format!("binding {}", args.auth_listen))?;
    let handle = axum_server::Handle::new();
    let limits = Limits { max_connections: args.auth_max_connections, ..Limits::default() };
    let refused = metrics.auth_connections_refused.clone();
    let https = tokio::spawn(serve_https_limited(listener, server_config(cert), auth.clone().router(), handle.clone(), limits, refused));
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(file) = &args.trusted_ca_file {
        let pem = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        if let Verify::Roots(extra) = Verify::pinned(&pem).context("--trusted-ca-file")? {
            roots.roots.extend(extra.roots.iter().cloned());
        }
    }
    let sessions = Arc::new(Sessions::counting(metrics.tls_handshakes.clone()));
    let open_files = crate::remote::kept::raise_open_files();
    let keeping = crate::remote::kept::most_within(args.kept_connections, open_files, args.connects_in_flight);
    if keeping < args.kept_connections {
        tracing::warn!(
            asked = args.kept_connections,
            keeping,
            open_files,
            "fewer connections kept than asked: the open files limit leaves room for no more"
        );
    }
    let kept = Arc::new(crate::remote::kept::KeptConnections::keeping(keeping));
    let peers = Arc::new(Network { roots: Verify::Roots(Arc::new(roots)), api_timeout: Duration::from_secs(10), sessions, kept });
    let recorder =
        Recorder::new(client.clone(), Reporter { controller: "liqo-reconciler".into(), instance: std::env::var("POD_NAME").ok() })
            .with_budget(args.events_per_second, args.events_burst);
    let lease = ObjectReference {
        api_version: Some("coordination.k8s.io/v1".into()),
        kind: Some("Lease".into()),
        name: Some(crate::machinery::leader::LEASE_NAME.into()),
        namespace: Some(ns.clone()),
        ..Default::default()
    };
    let summaries = recorder.clone().tell_left_out(lease, metrics.events_left_out.clone());
    tokio::spawn(auth.guard.claims.clone().write_until(client.clone(), foreign.clone(), recorder.clone(), shutdown_signal()));
    let waiting_selector = format!("{}={}", liqo_api::names::LABEL_IDENTITY, liqo_api::names::IDENTITY_WAITING);
    let identity_accounts = reflect_lean(
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::all(client.clone()),
        watcher::Config::default().labels(&waiting_selector).any_semantic(),
    );
    let sweep = crate::tenancy::sweep::Sweep {
        accounts: identity_accounts,
        client: client.clone(),
        foreign: foreign.clone(),
        waiting: auth.guard.waiting.clone(),
        metrics: metrics.clone(),
        unused_for: 3 * Duration::from_secs(args.health_period_seconds),
        period: sweep_period,
    };
    // A standby's auth service counts the waiting identities too (the leader's sweep retires them).
    tokio::spawn(sweep.clone().count(shutdown_signal()));
    let stores_ready = {
        let (s, a, n, f) = (secrets.clone(), advertisements.clone(), nodes.clone(), foreign.clone());
        async move {
            s.wait_until_ready().await
                && a.wait_until_ready().await
                && n.wait_until_ready().await.is_ok()
                && f.wait_until_ready().await.is_ok()
        }
    };
    let memory = reflect(
        Api::<ConfigMap>::namespaced(client.clone(), &ns),
        watcher::Config::default().fields(&format!("metadata.name={}", memory::KNOWN_PEERS)).any_semantic(),
    );
    let shared = Shared::new(client.clone(), &ns, id_rx.clone(), cfg_rx.clone(), peers.clone(), foreign.clone())
        .with_foreign_ids(foreign_ids)
        .with_recorder(recorder)
        .with_memory(memory.clone())
        .with_max_discovered(args.max_discovered_peers);
    let remember = memory::keep(client.clone(), ns.clone(), foreign.clone(), memory, Duration::from_secs(2));
    let timing = foreign_cluster::Timing {
        health: Duration::from_secs(args.health_period_seconds),
        unjoin_grace: Duration::from_secs(args.unjoin_grace_seconds),
        ..Default::default()
    };
    let auth_url = args.auth_url.clone().filter(|u| !u.is_empty());
    metrics.health_period.set(timing.health.as_secs() as i64);
    let fc_ctx = Arc::new(
        // Both URLs it hands peers are read from the addresses found, at each use.
        foreign_cluster::Ctx::new(shared.clone(), auth.api_server.clone(), None, secrets, advertisements)
            .with_addresses(found.clone())
            .with_metrics(metrics.clone())
            .with_timing(timing)
            .with_token_lifetime(args.token_lifetime_hours)
            .with_max_concurrent_reconciles(args.max_concurrent_reconciles)
            .with_connect_first(args.connects_in_flight, Duration::from_secs(args.connect_wait_seconds)),
    );
    let broadcasters = Broadcasters::new(
        client.clone(),
        id_rx.clone(),
        cfg_rx.clone(),
        nodes,
        peers.clone(),
        Duration::from_secs(args.advertise_period_seconds),
        &ns,
    );
    let broadcasters_view = broadcasters.clone();
    let foreign_for_metrics = foreign.clone();
    let dns = match args.dns_server {
        Some(server) => DnsSd::with_nameserver(server)?,
        None => DnsSd::system().context("the DNS resolver for SearchDomains (or set --dns-server)")?,
    };
    let sd_ctx = Arc::new(search_domain::Ctx::new(shared.clone(), dns, Duration::from_secs(args.search_domain_period_seconds.max(1))));
    let lan = lan::Settings {
        interfaces: Interfaces { allow: args.mdns_interfaces.clone(), loopback: args.mdns_loopback },
        auth_port: auth_url
            .as_deref()
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u.port_or_known_default())
            .unwrap_or(args.auth_listen.port()),
        // The URLs advertised are the addresses found (`with_addresses`), overrides included.
        auth_url: None,
        api_url: None,
        mdns_port: MDNS_PORT,
    };
    let lan_ctx = Arc::new(lan::Ctx::new(shared.clone(), lan).with_metrics(metrics.clone()).with_addresses(found.clone()));
    let sources = broadcasters.clone().follow_sources(shutdown_signal());
    let in_ctx = Arc::new(incoming::Ctx::new(shared, broadcasters, Duration::from_secs(args.unjoin_grace_seconds)));
    let no_mdns = args.no_mdns;
    let (m1, m2, m3, m4) = (metrics.clone(), metrics.clone(), metrics.clone(), metrics.clone());
    let scraped = broadcasters_view.clone();
    let scraped_fcs = foreign_for_metrics;
    let mut leadership = match args.leader_election {
        true => {
            let identity = crate::machinery::leader::identity();
            let claim = crate::machinery::leader::compete(client.clone(), &ns, &identity).await.context("competing for the Lease")?;
            tracing::info!(identity, lease = crate::machinery::leader::LEASE_NAME, "competing for the Lease");
            Some(claim)
        }
        false => None,
    };
    let mut held = leadership.as_ref().map(|l| l.is_leader.clone());
    let leader_gauge = metrics.clone();
    let published_client = client.clone();
    let record = args.last_checks_record.then(|| {
        let period = Duration::from_secs(args.health_period_seconds).max(Duration::from_secs(1));
        crate::reporting::checks_record::keep(client.clone(), args.namespace.clone(), metrics.clone(), period, shutdown_signal())
    });
    let controllers = tokio::spawn(async move {
        if !stores_ready.await {
            tracing::error!("the watch-fed stores never became ready");
            return;
        }
        if let Some(rx) = held.as_mut() {
            tracing::info!("stores ready; waiting for the Lease (standby)");
            tokio::select! {
                acquired = rx.wait_for(|held| *held) => if acquired.is_err() { return },
                _ = shutdown_signal() => return,
            }
        }
        leader_gauge.leader.set(1);
        tracing::info!("controllers starting");
        // Each part is a task of its own, polled when it is woken: one future joining them all
        // would poll every part at each wake of any (a health check's answer polled the install
        // watches, the LAN, the other controllers and a dozen signal handlers).
        let mut parts = Parts::default();
        parts.spawn(
            "foreign-clusters",
            foreign_cluster::run(fc_ctx, foreign_followed.follow(), adverts_touched, identities_due, m1, shutdown_signal()),
        );
        parts.spawn("peering-requests", incoming::run::<PeeringRequest, _>(in_ctx.clone(), m2, shutdown_signal()));
        parts.spawn("federation-requests", incoming::run::<FederationRequest, _>(in_ctx, m3, shutdown_signal()));
        parts.spawn("search-domains", search_domain::run(sd_ctx, m4, shutdown_signal()));
        parts.spawn("sweep", sweep.run(shutdown_signal()));
        parts.spawn("install-watch", install_check.clone().watch(shutdown_signal()));
        parts.spawn("install-check", async move {
            install_check
                .follow(
                    move |said| {
                        install_told.send_if_modified(|t| {
                            let changed = t.install_missing != said;
                            t.install_missing = said;
                            changed
                        });
                    },
                    Duration::from_secs(10),
                    shutdown_signal(),
                )
                .await
        });
        parts.spawn("broadcaster-sources", sources);
        parts.spawn("checks-record", async move {
            if let Some(record) = record {
                record.await
            }
        });
        parts.spawn("identities-remembered", async move {
            tokio::select! {
                _ = remember => {}
                _ = shutdown_signal() => {}
            }
        });
        parts.spawn("summaries", async move {
            tokio::select! {
                _ = summaries => {}
                _ = shutdown_signal() => {}
            }
        });
        parts.spawn("published", async move {
            tokio::select! {
                _ = published::keep(published_client, told_rx, crate::context::RETRY) => {}
                _ = shutdown_signal() => {}
            }
        });
        parts.spawn("lan", async move {
            if no_mdns {
                tracing::info!("mDNS disabled by --no-mdns: no LAN discovery or advertisement");
            } else {
                lan::run(lan_ctx, shutdown_signal()).await;
            }
        });
        // A part that panicked leaves the process without it: exit, to be started again whole,
        // rather than run on lamed.
        if let Err(part) = parts.wait().await {
            tracing::error!(part, "a part of the reconciler panicked: exiting");
            std::process::exit(1);
        }
    });

    let ready = move || id_rx.borrow().is_some() && cfg_rx.borrow().is_some();
    let ops = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let (metrics, broadcasters, fcs) = (metrics.clone(), scraped.clone(), scraped_fcs.clone());
                async move {
                    metrics.broadcasters.set(broadcasters.peers().len() as i64);
                    let fcs = fcs.state();
                    metrics.count_foreign_clusters(fcs.iter().map(|f| &**f));
                    // The peers are the leader's to tell: a standby's copy would double every alert.
                    let leading = metrics.leader.get() == 1;
                    metrics.count_peers(fcs.iter().filter(|_| leading).map(|f| &**f), std::time::SystemTime::now());
                    ([(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], metrics.encode())
                }
            }),
        )
        .route(
            "/readyz",
            get(move || async move {
                if ready() {
                    (StatusCode::OK, "ready\n")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "cluster ID or ClusterConfig not known yet\n")
                }
            }),
        );
    let ops_listener = tokio::net::TcpListener::bind(args.ops_listen).await.with_context(|| format!("binding {}", args.ops_listen))?;
    tracing::info!(namespace = %args.namespace, auth = %args.auth_listen, ops = %args.ops_listen, "liqo-reconciler starting");
    let ops_server = tokio::spawn(async move { axum::serve(ops_listener, ops).with_graceful_shutdown(shutdown_signal()).await });

    match leadership.as_mut() {
        Some(claim) => {
            tokio::select! {
                _ = shutdown_signal() => {}
                _ = claim.lost() => {
                    tracing::error!("lost the Lease: exiting so that the new holder runs alone");
                    std::process::exit(1);
                }
            }
        }
        None => shutdown_signal().await,
    }
    tracing::info!("shutting down");
    handle.graceful_shutdown(Some(Duration::from_secs(10)));
    https.await.context("auth server task")?.context("auth server")?;
    ops_server.await.context("ops server task")?.context("ops server")?;
    controllers.await.context("controllers task")?;
    if let Some(claim) = leadership {
        claim.release().await;
    }
    Ok(())
}

/// The parts of the reconciler that run while it leads, each a task of its own.
#[derive(Default)]
struct Parts {
    tasks: tokio::task::JoinSet<()>,
    names: std::collections::HashMap<tokio::task::Id, &'static str>,
}

impl Parts {
    fn spawn(&mut self, name: &'static str, part: impl std::future::Future<Output = ()> + Send + 'static) {
        let id = self.tasks.spawn(part).id();
        self.names.insert(id, name);
    }

    /// Until every part has ended (at shutdown), or the name of the first that panicked.
    async fn wait(mut self) -> Result<(), &'static str> {
        while let Some(ended) = self.tasks.join_next_with_id().await {
            if let Err(e) = ended
                && e.is_panic()
            {
                return Err(self.names.get(&e.id()).copied().unwrap_or("?"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parts_end_together_and_a_panic_names_its_part() {
        let mut parts = Parts::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        parts.spawn("quick", async {});
        parts.spawn("waits", async move {
            let _ = rx.await;
        });
        let waited = tokio::spawn(parts.wait());
        tx.send(()).unwrap();
        assert_eq!(waited.await.unwrap(), Ok(()));

        let mut parts = Parts::default();
        parts.spawn("steady", std::future::pending());
        parts.spawn("broken", async { panic!("a part fails") });
        assert_eq!(parts.wait().await, Err("broken"));
    }

    #[test]
    fn the_client_rate_limit_has_documented_defaults_and_can_be_turned_off() {
        let a = Args::try_parse_from(["liqo-reconciler"]).unwrap();
        assert_eq!((a.kube_api_qps, a.kube_api_burst), (400.0, 400));
        let off = Args::try_parse_from(["liqo-reconciler", "--kube-api-qps", "0", "--kube-api-burst", "10"]).unwrap();
        assert_eq!((off.kube_api_qps, off.kube_api_burst), (0.0, 10));
    }

    #[test]
    fn the_auth_url_has_one_name_and_keeps_its_old_one() {
        let a = Args::try_parse_from(["liqo-reconciler", "--auth-url", "https://a:1"]).unwrap();
        assert_eq!(a.auth_url.as_deref(), Some("https://a:1"));
        let old = Args::try_parse_from(["liqo-reconciler", "--advertised-auth-url", "https://b:2"]).unwrap();
        assert_eq!(old.auth_url.as_deref(), Some("https://b:2"));
        let json = Args::try_parse_from(["liqo-reconciler", "--log-format", "json"]).unwrap();
        assert_eq!(json.log_format, LogFormat::Json);
        assert!(Args::try_parse_from(["liqo-reconciler", "--log-format", "xml"]).is_err());
    }

    #[test]
    fn the_connect_wait_is_five_seconds_unless_told_and_bounded() {
        let a = Args::try_parse_from(["liqo-reconciler"]).unwrap();
        assert_eq!(a.connect_wait_seconds, 5);
        let long = Args::try_parse_from(["liqo-reconciler", "--connect-wait-seconds", "15"]).unwrap();
        assert_eq!(long.connect_wait_seconds, 15);
        for bad in ["0", "61", "-1", "five"] {
            assert!(Args::try_parse_from(["liqo-reconciler", "--connect-wait-seconds", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn identities_last_a_week_unless_told_and_their_cap_is_a_hundred() {
        let a = Args::try_parse_from(["liqo-reconciler"]).unwrap();
        assert_eq!(a.token_lifetime_hours, Duration::from_secs(7 * 24 * 3600));
        assert_eq!(a.max_waiting_identities, 100);
        let short = Args::try_parse_from(["liqo-reconciler", "--token-lifetime-hours", "0.1667", "--max-waiting-identities", "3"]).unwrap();
        assert_eq!((short.token_lifetime_hours, short.max_waiting_identities), (Duration::from_secs(600), 3));
        for bad in ["0.1", "8761", "-1", "week"] {
            assert!(Args::try_parse_from(["liqo-reconciler", "--token-lifetime-hours", bad]).is_err(), "{bad}");
        }
        assert!(Args::try_parse_from(["liqo-reconciler", "--max-waiting-identities", "0"]).is_err());
    }
}
