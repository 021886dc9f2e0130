//! The simulated peer answers as a real one: a hub joins a simulated peer and a real second
//! cluster (its own API server, our webhook and reconciler) the same way, and what was
//! written is compared — the hub's ForeignCluster status, its Secrets, the Advertisement the
//! peer wrote in the hub, our PeeringRequest and its Secret on the peer with the status the
//! peer's broadcaster gives it — then both are unjoined and compared again.

mod common;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::names::{advertisement_name, ca_data_secret, identity_secret, peering_kubeconfig_secret, tenant_namespace};
use liqo_api::{Advertisement, ForeignCluster, PeeringRequest};
use liqo_fleet::advertiser::{Broadcasters, HubAccess};
use liqo_fleet::scenarios::healthy;
use liqo_fleet::server::{Endpoints, Fleet};
use liqo_testenv::eventually;
use serde_json::{Value, json};

async fn cluster_id(client: &kube::Client) -> String {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "liqo");
    eventually("the cluster ID", || {
        let cms = cms.clone();
        async move { cms.get_opt("cluster-id").await.ok()??.data?.get("cluster-id").cloned() }
    })
    .await
}

async fn fc_where(api: &Api<ForeignCluster>, name: &str, what: &str, pred: impl Fn(&ForeignCluster) -> bool) -> ForeignCluster {
    eventually(&format!("{name}: {what}"), || async { api.get(name).await.ok().filter(|fc| pred(fc)) }).await
}

/// The conditions as (type, status, reason), and what else the status says, without names,
/// times and messages that differ by nature (fingerprints, Secret names).
fn status_shape(fc: &ForeignCluster) -> Value {
    let status = serde_json::to_value(fc.status.clone().unwrap_or_default()).unwrap();
    let conditions: BTreeMap<String, (String, String)> = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (c["type"].as_str().unwrap().to_owned(), (c["status"].as_str().unwrap().to_owned(), c["reason"].as_str().unwrap().to_owned()))
        })
        .collect();
    let outgoing = &status["outgoing"];
    json!({
        "conditions": conditions,
        "authStatus": status["authStatus"],
        "joined": outgoing["joined"],
        "requestNamed": outgoing["remotePeeringRequestName"],
        "advertisementNamed": !outgoing["advertisement"].is_null(),
        "caPinned": !status["caFingerprint"].is_null(),
        "trustMode": fc.spec.trust_mode,
    })
}

/// An object's labels and the keys of its spec (or data), with values that name the peer or
/// the hub replaced by their role.
fn object_shape(object: &Value, peer_id: &str, hub_id: &str) -> Value {
    let text = object.to_string().replace(peer_id, "<peer>").replace(hub_id, "<hub>");
    let object: Value = serde_json::from_str(&text).unwrap();
    let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    json!({"labels": object["metadata"]["labels"], "spec": keys(&object["spec"]), "data": keys(&object["data"]), "type": object["type"]})
}

/// Each entry of an object's managed fields (manager, operation, subresource, the fields), with
/// values that name the peer or the hub replaced by their role.
fn managed_shape(object: &Value, peer_id: &str, hub_id: &str) -> Value {
    let text = object["metadata"]["managedFields"].to_string().replace(peer_id, "<peer>").replace(hub_id, "<hub>");
    let entries: Value = serde_json::from_str(&text).unwrap();
    let mut shape: Vec<Value> =
        entries.as_array().into_iter().flatten().map(|e| json!([e["manager"], e["operation"], e["subresource"], e["fieldsV1"]])).collect();
    shape.sort_by_key(|e| e.to_string());
    Value::Array(shape)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_peer_is_joined_and_unjoined_as_a_real_one() {
    let Some(hub) = common::hub().await else { return };
    let Some(real) = common::hub().await else { return };
    let access = HubAccess { url: hub.cp.url.clone(), ca_pem: hub.cp.ca_pem.clone(), period: common::HEALTH, watch: true };
    let fleet = Fleet::start(1, Endpoints::Ports, access, &Broadcasters::InProcess).await.unwrap();
    let sim = fleet.peers[0].clone();
    let hub_id = cluster_id(&hub.admin).await;
    let real_id = cluster_id(&real.admin).await;

    let fcs: Api<ForeignCluster> = Api::all(hub.admin.clone());
    for (name, url) in [("sim", sim.url()), ("real", real.auth_url())] {
        let fc: ForeignCluster = serde_json::from_value(json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name}, "spec": {"authUrl": url, "join": true, "allowUntrustedCA": true}}))
        .unwrap();
        fcs.create(&PostParams::default(), &fc).await.unwrap();
    }
    let sim_fc = fc_where(&fcs, "sim", "joined", healthy).await;
    let real_fc = fc_where(&fcs, "real", "joined", healthy).await;
    assert_eq!(status_shape(&sim_fc), status_shape(&real_fc), "the hub's ForeignCluster status");

    // The hub's Secrets for each: the same, with the same keys.
    let secrets: Api<Secret> = Api::namespaced(hub.admin.clone(), "liqo");
    for of in ["sim", "real"] {
        for name in [ca_data_secret(of), identity_secret(of)] {
            secrets.get(&name).await.unwrap_or_else(|e| panic!("Secret {name} on the hub: {e}"));
        }
    }
    let shape = |s: Secret, peer_id: &str| object_shape(&serde_json::to_value(s).unwrap(), peer_id, &hub_id);
    assert_eq!(
        shape(secrets.get(&identity_secret("sim")).await.unwrap(), &sim.id),
        shape(secrets.get(&identity_secret("real")).await.unwrap(), &real_id),
        "the identity Secrets"
    );
    // The token in each: a ServiceAccount token with the same claims, and as large as a real
    // one at least (the hub keeps it for each peer). The test's API server signs with an ECDSA
    // P-256 key (a 64-byte signature), the simulated peers as kubeadm's RSA 2048 key (256).
    let token = |s: Secret| {
        let text = String::from_utf8(s.data.unwrap()[liqo_reconciler::foreign_cluster::KUBECONFIG_KEY].0.clone()).unwrap();
        liqo_reconciler::remote::peer::token_of(&text).expect("a bearer token")
    };
    let (sim_token, real_token) =
        (token(secrets.get(&identity_secret("sim")).await.unwrap()), token(secrets.get(&identity_secret("real")).await.unwrap()));
    let claims = |t: &str| {
        use base64::Engine;
        let part = t.split('.').nth(1).expect("a JWT's claims");
        let value: Value = serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap();
        let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        (keys(&value), keys(&value["kubernetes.io"]), keys(&value["kubernetes.io"]["serviceaccount"]))
    };
    assert_eq!(claims(&sim_token), claims(&real_token), "the tokens' claims");
    let signature = |t: &str| t.rsplit('.').next().unwrap().len();
    assert_eq!(signature(&real_token), 86, "the test API server's signature: ES256");
    assert_eq!(signature(&sim_token), 342, "the simulated peer's: RS256 with a 2048-bit key");
    // The rest as long, give or take the issuer and audience (kubeadm's, 14 characters longer
    // than the test API server's, twice, in base64).
    let unsigned = |t: &str| t.len() - signature(t);
    let (sim_len, real_len) = (unsigned(&sim_token), unsigned(&real_token));
    assert!(sim_len >= real_len && sim_len <= real_len + 64, "the same header and claims: {sim_token} and {real_token}");

    // The Advertisement each peer wrote in the hub.
    // Each in the sender's tenant namespace on the hub (protocol §9).
    let adverts = |id: &str| Api::<Advertisement>::namespaced(hub.admin.clone(), &tenant_namespace(id));
    let sim_adv = serde_json::to_value(adverts(&sim.id).get(&advertisement_name(&sim.id)).await.unwrap()).unwrap();
    let real_adv = serde_json::to_value(adverts(&real_id).get(&advertisement_name(&real_id)).await.unwrap()).unwrap();
    assert_eq!(object_shape(&sim_adv, &sim.id, &hub_id), object_shape(&real_adv, &real_id, &hub_id), "the Advertisements");
    assert_eq!(sim_adv["spec"]["resources"], real_adv["spec"]["resources"], "an empty cluster's resources either way");

    // Our PeeringRequest and its Secret on each peer.
    let ours_on_real = || Api::<PeeringRequest>::namespaced(real.admin.clone(), &tenant_namespace(&hub_id));
    let real_pr = serde_json::to_value(ours_on_real().get(&hub_id).await.unwrap()).unwrap();
    let sim_pr = sim.objects.lock().unwrap().requests.get(&hub_id).cloned().expect("our request on the simulated peer");
    assert_eq!(sim_pr["spec"], real_pr["spec"], "the same request");
    assert_eq!(object_shape(&sim_pr, &sim.id, &hub_id), object_shape(&real_pr, &real_id, &hub_id));
    let advertised = |pr: &Value| {
        let c =
            pr["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Advertised").cloned()).unwrap_or_default();
        (pr["status"]["advertisementStatus"].clone(), c["status"].clone(), c["reason"].clone())
    };
    let real_pr = eventually("the real peer's broadcaster reports", || async {
        let pr = serde_json::to_value(ours_on_real().get(&hub_id).await.ok()?).ok()?;
        (!pr["status"]["advertisementStatus"].is_null()).then_some(pr)
    })
    .await;
    let sim_pr = sim.objects.lock().unwrap().requests.get(&hub_id).cloned().unwrap();
    assert_eq!(advertised(&sim_pr), advertised(&real_pr), "what the peers' broadcasters say");
    // What the hub's health check reads each period: the same managed fields, about as long.
    let path = format!("/apis/discovery.liqo.io/v1alpha1/namespaces/{}/peeringrequests/{hub_id}", tenant_namespace(&hub_id));
    let real_body = real.admin.request_text(http::Request::get(&path).body(Vec::new()).unwrap()).await.unwrap();
    let real_raw: Value = serde_json::from_str(&real_body).unwrap();
    let sim_body = serde_json::to_string(&sim_pr).unwrap();
    assert_eq!(managed_shape(&sim_pr, &sim.id, &hub_id), managed_shape(&real_raw, &real_id, &hub_id), "the managed fields");
    assert_eq!(sim_pr["metadata"]["generation"], real_raw["metadata"]["generation"], "the generation");
    let ratio = sim_body.len() as f64 / real_body.trim_end().len() as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "the answer's length: {} bytes simulated, {} real\n{sim_body}\n{real_body}",
        sim_body.len(),
        real_body.len()
    );
    let name = peering_kubeconfig_secret(&hub_id);
    let tenant = tenant_namespace(&hub_id);
    let real_secret = serde_json::to_value(Api::<Secret>::namespaced(real.admin.clone(), &tenant).get(&name).await.unwrap()).unwrap();
    let sim_secret =
        sim.objects.lock().unwrap().secrets.get(&format!("{tenant}/{name}")).cloned().expect("our Secret on the simulated peer");
    assert_eq!(object_shape(&sim_secret, &sim.id, &hub_id), object_shape(&real_secret, &real_id, &hub_id), "the kubeconfig Secrets");

    // Checks over about three periods go over the connection kept from the check before, with
    // the simulated peer as with the real API server (which keeps an idle connection 90 s): the
    // hub's checks and handshakes with both, less the simulated peer's (counted where it
    // serves), are the real one's.
    let (sim_kept, sim_handshakes, real_kept, real_handshakes) = three_periods_of_checks(&hub, &fleet, &sim).await;
    println!(
        "over about 3 periods: simulated {sim_kept} checks over a kept connection, {sim_handshakes} handshakes; real {real_kept}, {real_handshakes}"
    );
    // Each keeps its connection, but for the one retired on purpose in the window (every 16
    // checks a peer gets a new connection and a full handshake).
    assert!(real_kept >= 3 && real_handshakes <= 1, "the real API server: {real_kept} kept, {real_handshakes} handshakes");
    assert!(sim_kept >= 3 && sim_handshakes <= 1, "the simulated peer: {sim_kept} kept, {sim_handshakes} handshakes");

    // The cipher suite each chooses for a client that prefers another (rustls's own order,
    // AES-256-GCM first): the simulated peer as the real API server (Go's crypto/tls).
    let real_addr: std::net::SocketAddr = real.cp.url.trim_start_matches("https://").parse().unwrap();
    let (sim_suite, real_suite) = (negotiated(sim.addr, &sim.certs().ca.cert_pem).await, negotiated(real_addr, &real.cp.ca_pem).await);
    assert_eq!(sim_suite, real_suite, "the TLS cipher suite chosen");

    // Unjoined: gone from both peers and the hub, the same status.
    for name in ["sim", "real"] {
        fcs.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"join": false}}))).await.unwrap();
    }
    let unjoined = |fc: &ForeignCluster| {
        fc.status.as_ref().and_then(|s| s.outgoing.as_ref()).is_some_and(|o| !o.joined && o.remote_peering_request_name.is_none())
    };
    let sim_fc = fc_where(&fcs, "sim", "unjoined", unjoined).await;
    let real_fc = fc_where(&fcs, "real", "unjoined", unjoined).await;
    assert_eq!(status_shape(&sim_fc), status_shape(&real_fc), "the unjoined status");
    eventually("our request gone from the real peer", || async { ours_on_real().get_opt(&hub_id).await.ok()?.is_none().then_some(()) })
        .await;
    {
        let objects = sim.objects.lock().unwrap();
        assert!(objects.requests.is_empty() && objects.secrets.is_empty(), "our request and Secret gone from the simulated peer");
    }
    for id in [&sim.id, &real_id] {
        eventually("the Advertisement gone from the hub", || async {
            adverts(id).get_opt(&advertisement_name(id)).await.ok()?.is_none().then_some(())
        })
        .await;
    }
}

/// A counter of the hub reconciler's metrics (`series` with its labels), 0 while it has none.
async fn hub_counter(hub: &liqo_fleet::hub::Hub, series: &str) -> u64 {
    let text = hub.reconciler_metrics().await.unwrap();
    let series = format!("{series} ");
    text.lines().find_map(|l| l.strip_prefix(&series)).map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

/// From now until each peer has answered at least three checks over a kept connection (about
/// three health periods): the simulated peer's checks over a kept connection and its handshakes
/// (as it counted them), then the real one's (the hub's less the simulated peer's).
async fn three_periods_of_checks(
    hub: &liqo_fleet::hub::Hub,
    fleet: &liqo_fleet::server::Fleet,
    sim: &liqo_fleet::peer::Peer,
) -> (u64, u64, u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let sim_now = || (sim.reads.load(Relaxed), fleet.counts.handshakes.load(Relaxed));
    let hub_now = || async {
        let kept = hub_counter(hub, r#"liqo_reconciler_connects_first_total{outcome="kept_answered"}"#).await;
        let full = hub_counter(hub, r#"liqo_reconciler_tls_handshakes_total{kind="full"}"#).await;
        let resumed = hub_counter(hub, r#"liqo_reconciler_tls_handshakes_total{kind="resumed"}"#).await;
        (kept, full + resumed)
    };
    let (sim_before, hub_before) = (sim_now(), hub_now().await);
    eventually("three checks of each peer over a kept connection", || async {
        let (sim_after, hub_after) = (sim_now(), hub_now().await);
        let sim_handshakes = sim_after.1 - sim_before.1;
        // Each new connection carries one check; the others went over a kept one.
        let sim_kept = (sim_after.0 - sim_before.0).saturating_sub(sim_handshakes);
        let (hub_kept, hub_handshakes) = (hub_after.0 - hub_before.0, hub_after.1 - hub_before.1);
        let (real_kept, real_handshakes) = (hub_kept.saturating_sub(sim_kept), hub_handshakes.saturating_sub(sim_handshakes));
        (sim_kept >= 3 && real_kept >= 3).then_some((sim_kept, sim_handshakes, real_kept, real_handshakes))
    })
    .await
}

/// The cipher suite a server at `addr` (verified against `ca_pem`) chooses for a client with
/// rustls's default preferences.
async fn negotiated(addr: std::net::SocketAddr, ca_pem: &str) -> rustls::CipherSuite {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await.unwrap();
    tls.get_ref().1.negotiated_cipher_suite().unwrap().suite()
}
