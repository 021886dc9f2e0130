//! The SearchDomain controller against a real kube-apiserver (`KUBEBUILDER_ASSETS`) and a real
//! DNS server (hickory-server in process) serving both zone shapes of protocol §5; for the
//! auth-service zone, identities come from a real auth service's `/ids`. Skips loudly without the
//! assets.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use liqo_api::names::{LABEL_CLUSTER_ID, LABEL_DISCOVERY_TYPE, LABEL_SEARCHDOMAIN};
use liqo_api::{ClusterConfigSpec, DiscoveryType, ForeignCluster, SearchDomain, SearchDomainSpec};
use liqo_reconciler::context::Shared;
use liqo_reconciler::discovery::dnssd::DnsSd;
use liqo_reconciler::discovery::search_domain::{self, Ctx};
use liqo_reconciler::machinery::stores::reflect;
use liqo_reconciler::remote::auth::client::Verify;
use liqo_reconciler::remote::auth::service::{ApiServer, AuthService};
use liqo_reconciler::remote::peer::Network;
use liqo_reconciler::reporting::events::{Recorder, Reporter};
use liqo_reconciler::reporting::metrics::{Metrics, ReconcileLabels};
use liqo_serve::{CertFiles, ReloadingCert, serve_https, server_config};
use liqo_testenv::dns::{ZoneServer, zone_file};
use liqo_testenv::{ControlPlane, event, eventually, install_liqo};
use serde_json::json;
use tokio::sync::watch;

const OWN: &str = "11111111-2222-4333-8444-555555555555";
const ID: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const ID2: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
const ID3: &str = "c0ffee00-0000-4000-8000-000000000003";

fn api_zone(ids: &[&str]) -> String {
    let mut z = String::new();
    for (i, id) in ids.iter().enumerate() {
        z.push_str(&format!(
            "example.com. PTR c{i}._liqo._tcp.example.com.\n\
             c{i}._liqo._tcp.example.com. SRV 0 0 6443 api-{i}.example.com.\n\
             c{i}._liqo._tcp.example.com. TXT \"id={id}\" \"namespace=liqo\"\n\
             api-{i}.example.com. A 10.0.0.{n}\n",
            n = i + 1
        ));
    }
    // A cluster that lists us: never a ForeignCluster of ours.
    z.push_str(&format!(
        "example.com. PTR me._liqo._tcp.example.com.\nme._liqo._tcp.example.com. SRV 0 0 6443 api-0.example.com.\nme._liqo._tcp.example.com. TXT \"id={OWN}\" \"namespace=liqo\"\n"
    ));
    zone_file("example.com.", &z)
}

fn start_controller(client: &Client, dns: DnsSd, config: ClusterConfigSpec) -> watch::Sender<Option<ClusterConfigSpec>> {
    start_controller_with(client, dns, config, liqo_reconciler::context::MAX_DISCOVERED, Arc::default())
}

/// Lookups (reconciles of a SearchDomain) the controller made that ended without an error: a
/// failed DNS lookup is one (its status says so).
fn lookups(metrics: &Metrics) -> u64 {
    metrics.reconciles.get_or_create(&ReconcileLabels { controller: "search_domain", result: "ok" }).get()
}

fn start_controller_with(
    client: &Client,
    dns: DnsSd,
    config: ClusterConfigSpec,
    max: usize,
    metrics: Arc<Metrics>,
) -> watch::Sender<Option<ClusterConfigSpec>> {
    let (id_tx, id_rx) = watch::channel(Some(OWN.to_owned()));
    std::mem::forget(id_tx);
    let (cfg_tx, cfg_rx) = watch::channel(Some(config));
    let foreign = reflect(Api::<ForeignCluster>::all(client.clone()), Default::default());
    let peers = Arc::new(Network::new(Verify::Nothing, Duration::from_secs(5)));
    let recorder = Recorder::new(client.clone(), Reporter { controller: "liqo-reconciler".into(), instance: None });
    let shared = Shared::new(client.clone(), "liqo", id_rx, cfg_rx, peers, foreign).with_recorder(recorder).with_max_discovered(max);
    let ctx = Arc::new(Ctx::new(shared, dns, Duration::from_secs(1)));
    tokio::spawn(search_domain::run(ctx, metrics, std::future::pending()));
    cfg_tx
}

/// A zone listing more clusters than `--max-discovered-peers` allows: only that many
/// ForeignClusters, and the SearchDomain's status says which were not added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_listing_too_many_clusters_fills_only_the_cap() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let dns_server = ZoneServer::start("example.com.", &api_zone(&[ID, ID2, ID3])).await;
    let _cfg =
        start_controller_with(&admin, DnsSd::with_nameserver(dns_server.addr).unwrap(), ClusterConfigSpec::default(), 2, Arc::default());
    let sd = SearchDomain::new("example.com", SearchDomainSpec { domain: "example.com".into(), autojoin: Some(false) });
    Api::<SearchDomain>::all(admin.clone()).create(&PostParams::default(), &sd).await.unwrap();

    let (status, reason, message) = eventually("the status saying one was not added", || async {
        ready(&sd_status(&admin, "example.com").await).filter(|(_, _, m)| m.contains("not added"))
    })
    .await;
    assert_eq!((status.as_str(), reason.as_str()), ("True", "LookupPartial"), "{message}");
    assert!(message.contains(&format!("{ID3}: not added, 2 discovered peers already")), "{message}");
    let fcs = Api::<ForeignCluster>::all(admin.clone()).list(&Default::default()).await.unwrap().items;
    let mut names: Vec<String> = fcs.iter().map(|f| f.name_any()).collect();
    names.sort();
    assert_eq!(names, [ID.to_owned(), ID2.to_owned()], "two, the cap");
}

async fn fc(client: &Client, name: &str) -> Option<ForeignCluster> {
    Api::<ForeignCluster>::all(client.clone()).get_opt(name).await.unwrap()
}

async fn sd_status(client: &Client, name: &str) -> liqo_api::SearchDomainStatus {
    Api::<SearchDomain>::all(client.clone()).get(name).await.unwrap().status.unwrap_or_default()
}

fn ready(status: &liqo_api::SearchDomainStatus) -> Option<(String, String, String)> {
    let c = status.conditions.iter().find(|c| c.type_ == "Ready")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_domain_keeps_one_foreign_cluster_per_listed_cluster() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let fcs: Api<ForeignCluster> = Api::all(admin.clone());

    // A peer that already peered with us: upgraded, not duplicated.
    let incoming = liqo_reconciler::incoming::incoming_foreign_cluster(ID2, &Default::default());
    fcs.create(&PostParams::default(), &incoming).await.unwrap();

    let mut dns_server = ZoneServer::start("example.com.", &api_zone(&[ID, ID2])).await;
    let metrics = Arc::new(Metrics::default());
    let dns = DnsSd::with_nameserver(dns_server.addr).unwrap();
    let _cfg = start_controller_with(&admin, dns, ClusterConfigSpec::default(), liqo_reconciler::context::MAX_DISCOVERED, metrics.clone());
    let sd = SearchDomain::new("example.com", SearchDomainSpec { domain: "example.com".into(), autojoin: Some(true) });
    let sd = Api::<SearchDomain>::all(admin.clone()).create(&PostParams::default(), &sd).await.unwrap();

    let first = eventually("the listed cluster's ForeignCluster", || async { fc(&admin, ID).await }).await;
    assert_eq!(first.labels()[LABEL_CLUSTER_ID], ID);
    assert_eq!(first.labels()[LABEL_DISCOVERY_TYPE], "WAN");
    assert_eq!(first.labels()[LABEL_SEARCHDOMAIN], "example.com");
    assert_eq!(first.spec.discovery_type, Some(DiscoveryType::Wan));
    assert_eq!(first.spec.join, Some(true), "spec.autojoin of the SearchDomain");
    assert_eq!(first.spec.api_url.as_deref(), Some("https://10.0.0.1:6443"));
    assert_eq!(first.spec.namespace.as_deref(), Some("liqo"));
    assert_eq!(first.owner_references()[0].uid, sd.uid().unwrap());

    let upgraded = eventually("the IncomingPeering ForeignCluster upgraded", || async {
        fc(&admin, ID2).await.filter(|f| f.spec.discovery_type == Some(DiscoveryType::Wan))
    })
    .await;
    assert_eq!(upgraded.spec.join, Some(true));
    assert_eq!(upgraded.spec.api_url.as_deref(), Some("https://10.0.0.2:6443"));
    assert!(fc(&admin, OWN).await.is_none(), "we never make a ForeignCluster for ourselves");
    assert_eq!(fcs.list(&Default::default()).await.unwrap().items.len(), 2, "one ForeignCluster per cluster ID");

    let status = eventually("the status listing both", || async {
        let s = sd_status(&admin, "example.com").await;
        (s.foreign_clusters.len() == 2).then_some(s)
    })
    .await;
    let (st, reason, message) = ready(&status).unwrap();
    assert_eq!((st.as_str(), reason.as_str()), ("True", "LookupSucceeded"), "{message}");
    // `kubectl get searchdomains` shows the result (the API server's Table of the CRD's columns).
    let table = http::Request::get("/apis/discovery.liqo.io/v1alpha1/searchdomains")
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: serde_json::Value = serde_json::from_str(&admin.request_text(table).await.unwrap()).unwrap();
    let columns: Vec<&str> = table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Name", "Domain", "Autojoin", "Ready", "Reason", "Age"]);
    assert_eq!(
        table["rows"][0]["cells"].as_array().unwrap()[..5],
        [json!("example.com"), json!("example.com"), json!(true), json!("True"), json!("LookupSucceeded")]
    );

    // A cluster no longer listed loses its ForeignCluster; a new one gets one.
    dns_server.set_zone(&api_zone(&[ID, ID3])).await;
    eventually("the new cluster found", || async { fc(&admin, ID3).await }).await;
    eventually("the unlisted cluster's ForeignCluster deleted", || async { fc(&admin, ID2).await.is_none().then_some(()) }).await;
    // Events say what happened to whom.
    let discovered = eventually("a Discovered Event", || async { event(&admin, "Discovered", ID3).await }).await;
    assert!(discovered.note.unwrap().contains("in DNS domain example.com (SearchDomain example.com)"));
    assert_eq!(discovered.type_.as_deref(), Some("Normal"));
    eventually("a NoLongerListed Event", || async { event(&admin, "NoLongerListed", ID2).await }).await;

    // The server goes down: the status says so, nothing is deleted.
    dns_server.stop().await;
    let (_, reason, message) = eventually("the lookup failure in the status", || async {
        ready(&sd_status(&admin, "example.com").await).filter(|(s, _, _)| s == "False")
    })
    .await;
    assert_eq!(reason, "DnsLookupFailed", "{message}");
    assert!(message.contains("nothing deleted"), "{message}");
    let warning = eventually("a DnsLookupFailed Event", || async { event(&admin, "DnsLookupFailed", "example.com").await }).await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    // Two more lookups fail (one a second); then still nothing is deleted.
    let failed_once = lookups(&metrics);
    eventually("two more lookups", || async { (lookups(&metrics) >= failed_once + 2).then_some(()) }).await;
    assert!(fc(&admin, ID).await.is_some() && fc(&admin, ID3).await.is_some(), "a failed lookup deletes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_service_zones_are_identified_through_the_auth_service() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;

    // The remote's real auth service on 127.0.0.1, as the SRV record points at it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    liqo_certs::files::ensure(certs.path(), &["127.0.0.1".to_owned()], time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    let cert = ReloadingCert::load(CertFiles { cert: certs.path().join("tls.crt"), key: certs.path().join("tls.key") }).unwrap();
    let (_id, id_rx) = watch::channel(Some(ID.to_owned()));
    let mut config = ClusterConfigSpec::default();
    config.discovery_config.cluster_name = Some("remote-one".into());
    let (_c, cfg_rx) = watch::channel(Some(config));
    let service = Arc::new(AuthService {
        client: admin.clone(),
        namespace: "liqo".into(),
        cluster_id: id_rx,
        config: cfg_rx,
        api_server: ApiServer { url: cp.url.clone().into(), ca_pem: cp.ca_pem.clone() },
        token_lifetime: Duration::from_secs(3600),
        limiter: liqo_reconciler::remote::auth::rate::Limiter::new(Default::default()),
        outcomes: Default::default(),
        guard: liqo_reconciler::remote::auth::service::IdentityGuard::new(
            kube::runtime::reflector::store::<liqo_api::ForeignCluster>().0,
            100,
            std::time::Duration::from_secs(10),
        ),
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = axum_server::Handle::new();
    tokio::spawn(serve_https(listener, server_config(cert), service.router(), handle.clone()));
    handle.listening().await.unwrap();

    let zone = zone_file(
        "example.com.",
        &format!(
            "example.com. PTR liqo-cluster.example.com.\n\
             example.com. PTR liqo-cluster-2.example.com.\n\
             liqo-cluster.example.com. SRV 0 0 {port} auth.server.example.com.\n\
             liqo-cluster-2.example.com. SRV 0 0 1 auth.server-2.example.com.\n\
             auth.server.example.com. A 127.0.0.1\n\
             auth.server-2.example.com. A 127.0.0.1\n"
        ),
    );
    let dns_server = ZoneServer::start("example.com.", &zone).await;
    // No spec.autojoin: ClusterConfig's autojoin (off here) decides.
    let mut config = ClusterConfigSpec::default();
    config.discovery_config.autojoin = false;
    let _cfg = start_controller(&admin, DnsSd::with_nameserver(dns_server.addr).unwrap(), config);
    let sd = SearchDomain {
        metadata: ObjectMeta { name: Some("example".into()), ..Default::default() },
        spec: SearchDomainSpec { domain: "example.com".into(), autojoin: None },
        status: None,
    };
    Api::<SearchDomain>::all(admin.clone()).create(&PostParams::default(), &sd).await.unwrap();

    let found = eventually("the ForeignCluster identified through /ids", || async { fc(&admin, ID).await }).await;
    assert_eq!(found.spec.auth_url.as_deref(), Some(format!("https://127.0.0.1:{port}").as_str()));
    assert_eq!(found.spec.cluster_identity.as_ref().and_then(|i| i.cluster_name.as_deref()), Some("remote-one"));
    assert_eq!(found.spec.join, Some(false));
    let (st, reason, message) =
        eventually("the partial lookup in the status", || async { ready(&sd_status(&admin, "example").await) }).await;
    assert_eq!((st.as_str(), reason.as_str()), ("True", "LookupPartial"));
    assert!(message.contains("liqo-cluster-2.example.com.") && message.contains("/ids"), "{message}");
}

/// Wi-Fi-like memory: a user's "don't join" on a discovered peer is remembered; when its
/// ForeignCluster is gone and discovery finds the cluster again, the choice wins over autojoin;
/// once forgotten, autojoin decides again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_choice_outlives_the_foreign_cluster() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{DeleteParams, Patch, PatchParams};
    use liqo_reconciler::discovery::memory;
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let fcs: Api<ForeignCluster> = Api::all(admin.clone());
    let dns_server = ZoneServer::start("example.com.", &api_zone(&[ID])).await;

    let (_id, id_rx) = watch::channel(Some(OWN.to_owned()));
    let (_cfg, cfg_rx) = watch::channel(Some(ClusterConfigSpec::default()));
    let foreign = reflect(Api::<ForeignCluster>::all(admin.clone()), Default::default());
    let known = reflect(
        Api::<ConfigMap>::namespaced(admin.clone(), "liqo"),
        kube::runtime::watcher::Config::default().fields(&format!("metadata.name={}", memory::KNOWN_PEERS)),
    );
    let peers = Arc::new(Network::new(Verify::Nothing, Duration::from_secs(5)));
    let shared = Shared::new(admin.clone(), "liqo", id_rx, cfg_rx, peers, foreign.clone()).with_memory(known.clone());
    let ctx = Arc::new(Ctx::new(shared, DnsSd::with_nameserver(dns_server.addr).unwrap(), Duration::from_secs(1)));
    tokio::spawn(search_domain::run(ctx, Arc::new(Metrics::default()), std::future::pending()));
    tokio::spawn(memory::keep(admin.clone(), "liqo".into(), foreign, known.clone(), Duration::from_millis(200)));
    let sd = SearchDomain::new("example.com", SearchDomainSpec { domain: "example.com".into(), autojoin: Some(true) });
    Api::<SearchDomain>::all(admin.clone()).create(&PostParams::default(), &sd).await.unwrap();
    let found = eventually("the autojoined ForeignCluster", || async { fc(&admin, ID).await }).await;
    assert_eq!(found.spec.join, Some(true));

    // The user says no.
    let by_user = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    fcs.patch(ID, &by_user, &Patch::Merge(json!({"spec": {"join": false}}))).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "liqo");
    eventually("the choice remembered", || async {
        cms.get_opt(memory::KNOWN_PEERS).await.ok()??.data?.get(ID).filter(|v| *v == "no-join").map(drop)
    })
    .await;

    // Gone, then found again: the remembered choice wins over the SearchDomain's autojoin.
    let old_uid = fcs.get(ID).await.unwrap().uid();
    fcs.delete(ID, &DeleteParams::default()).await.unwrap();
    let again = eventually("found again", || async { fc(&admin, ID).await.filter(|f| f.uid() != old_uid) }).await;
    assert_eq!(again.spec.join, Some(false), "the user's choice, not autojoin's");

    // Forgotten: autojoin decides again.
    assert!(memory::forget(&admin, "liqo", ID).await.unwrap());
    eventually("the controller's view of the memory emptied", || async { memory::recall(&known, "liqo", ID).is_none().then_some(()) })
        .await;
    let old_uid = again.uid();
    fcs.delete(ID, &DeleteParams::default()).await.unwrap();
    let third = eventually("found a third time", || async { fc(&admin, ID).await.filter(|f| f.uid() != old_uid) }).await;
    assert_eq!(third.spec.join, Some(true));
    assert!(!memory::forget(&admin, "liqo", ID).await.unwrap(), "nothing left to forget");
}
