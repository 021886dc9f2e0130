//! `kubectl liqo` against two real control planes (envtest convention: `KUBEBUILDER_ASSETS`),
//! each with `liqo-reconciler` running as in the reconciler's two-cluster tests and our webhook
//! serving the remote; the plugin run as a user runs it, with a kubeconfig. Skips loudly
//! without the assets (or without the reconciler binary, which `cargo test --workspace` builds).

#[path = "../../reconciler/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};

use common::*;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use liqo_api::{ForeignCluster, SearchDomain};
use liqo_testenv::{ControlPlane, eventually, skip};

fn kubectl_liqo(cp: &ControlPlane, args: &[&str]) -> Output {
    let kubeconfig = cp.kubeconfig(liqo_testenv::ADMIN_TOKEN);
    Command::new(env!("CARGO_BIN_EXE_kubectl-liqo"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("running kubectl-liqo")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The cells of ForeignCluster `name`'s row, by column name, as `kubectl get -o wide` gets
/// them (the API server's Table, every priority).
async fn wide_row(client: &kube::Client, name: &str) -> std::collections::BTreeMap<String, String> {
    let request = http::Request::get(format!("/apis/discovery.liqo.io/v1alpha1/foreignclusters/{name}"))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: serde_json::Value = client.request(request).await.unwrap();
    let columns = table["columnDefinitions"].as_array().unwrap();
    let cells = table["rows"][0]["cells"].as_array().unwrap();
    columns.iter().zip(cells).map(|(c, v)| (c["name"].as_str().unwrap().to_owned(), v.as_str().unwrap_or_default().to_owned())).collect()
}

fn ready_to_run() -> bool {
    if reconciler_binary().is_none() {
        skip("the liqo-reconciler binary is not built (cargo build -p liqo-reconciler; cargo test --workspace builds it)");
        return false;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_status_and_unpeer_as_a_user_runs_them() {
    if !ready_to_run() {
        return;
    }
    let Some(mut t) = two_clusters_with(&["--leader-election=false"]).await else { return };
    let _webhooks = (start_webhook(&t.home).await, start_webhook(&t.remote).await);

    // peer --wait, piped: one plain line per phase, then joined.
    let out = kubectl_liqo(&t.home_cp, &["peer", &t.remote_rec.auth_url, "--allow-untrusted-ca", "--name", "remote", "--wait=60s"]);
    let said = text(&out);
    eprintln!("{said}");
    assert!(out.status.success(), "{said}");
    for phase in ["✓ Trusted", "✓ Authenticated", "✓ RemoteReachable", "✓ CaVerified", "✓ Joined"] {
        assert!(said.contains(phase), "{phase} missing from:\n{said}");
    }
    assert!(said.contains(&format!("joined remote (cluster {})", t.remote_id)), "{said}");
    assert!(!said.contains('\x1b'), "no terminal codes when piped:\n{said}");
    let fc = Api::<ForeignCluster>::all(t.home.clone()).get("remote").await.unwrap();
    assert!(outgoing_joined(&fc), "the resulting object says joined");
    let setter = fc.managed_fields().iter().find(|e| e.fields_v1.as_ref().is_some_and(|f| f.0["f:spec"].get("f:join").is_some()));
    assert_eq!(setter.and_then(|e| e.manager.as_deref()), Some("kubectl-liqo"), "who set spec.join: {:?}", fc.managed_fields());

    // status: both sides, exit 0.
    let out = kubectl_liqo(&t.home_cp, &["status"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&t.home_id) && said.contains(&t.remote_id) && said.contains("Joined"), "{said}");
    let out = kubectl_liqo(&t.remote_cp, &["status", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let remote: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(remote["cluster"]["clusterId"], t.remote_id.as_str());
    let incoming = remote["peers"].as_array().unwrap().iter().find(|p| p["clusterId"] == t.home_id.as_str()).unwrap();
    assert_eq!(incoming["incoming"], true, "{remote}");
    let out = kubectl_liqo(&t.home_cp, &["status", "remote"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("CA-FINGERPRINT") && said.contains(&format!("{} (on the remote)", t.home_id)), "{said}");
    assert!(said.contains("IdentityAccepted") && said.contains("PeeringRequestCreated"), "the peer's Events:\n{said}");

    // status exits 1 while the joined peer's API server is down.
    t.remote_cp.stop_apiserver();
    fc_where(&t.home, "remote", "the remote seen down", |f| phase(f, "RemoteReachable").is_some_and(|p| p.0 == "False")).await;
    let out = kubectl_liqo(&t.home_cp, &["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not joined although join is true: remote"), "{}", text(&out));
    t.remote_cp.restart_apiserver().await;
    fc_where(&t.home, "remote", "joined again", |f| outgoing_joined(f) && phase(f, "RemoteReachable").is_some_and(|p| p.0 == "True")).await;

    // unpeer --wait: the cascade completes and is told.
    let out = kubectl_liqo(&t.home_cp, &["unpeer", "remote", "--wait=60s"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("our PeeringRequest is gone from the remote") && said.contains("unpeered remote"), "{said}");
    gone(&requests_of(&t.remote, &t.home_id), &t.home_id, "our PeeringRequest gone from the remote").await;

    // unpeer --delete --wait with the remote down: the ForeignCluster goes after the grace
    // period, but our request may remain on the remote: said, and exit 1.
    let out = kubectl_liqo(&t.home_cp, &["peer", &t.remote_rec.auth_url, "--allow-untrusted-ca", "--name", "remote", "--wait=60s"]);
    assert!(out.status.success(), "{}", text(&out));
    t.remote_cp.stop_apiserver();
    let out = kubectl_liqo(&t.home_cp, &["unpeer", "remote", "--delete", "--wait=60s"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("ForeignCluster remote deleted, but not on the remote's side") && said.contains("may remain there"), "{said}");
    gone(&Api::<ForeignCluster>::all(t.home.clone()), "remote", "the ForeignCluster deleted").await;
    t.remote_cp.restart_apiserver().await;

    // A malformed cluster ID: the webhook's words, exit 1.
    let out = kubectl_liqo(&t.home_cp, &["peer", "--cluster-id", "Not_A_Cluster_ID", "--api-url", "https://127.0.0.1:1", "--name", "bad"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("creating ForeignCluster bad") && said.contains("denied the request"), "{said}");

    // Usage errors exit 2.
    let out = kubectl_liqo(&t.home_cp, &["peer"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// Liqo's listed limitation "not possible to trust or not CAs" lifted: a self-signed remote waits for
/// approval showing the fingerprint it presents; a wrong fingerprint is refused; the one its
/// operator reads out (from the remote's own certificate) peers it.
/// `status` over many peers reads them in pages (`--chunk-size`, here 2 for 7 peers), counts
/// every one in the summary, and shows what `--phase` and `--limit` select; `status ID` finds a
/// peer by its cluster ID (the label our webhook sets) without listing them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_pages_through_many_peers_and_selects_some() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    liqo_testenv::install_liqo(&admin, "liqo").await;
    let _webhook = start_webhook(&admin).await;
    let fcs: Api<ForeignCluster> = Api::all(admin.clone());
    for i in 0..7 {
        let id = format!("00000000-0000-4000-8000-00000000000{i}");
        let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": format!("peer-{i}")},
            "spec": {"clusterIdentity": {"clusterID": id}, "authUrl": "https://127.0.0.1:9", "join": i < 2}
        }))
        .unwrap();
        eventually("a ForeignCluster admitted", || async { fcs.create(&Default::default(), &fc).await.ok() }).await;
    }

    let out = kubectl_liqo(&cp, &["status", "--chunk-size", "2"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "two peers asked to join are not joined (no reconciler): {said}");
    let summary = said.lines().find(|l| l.starts_with("PEERS")).unwrap_or_else(|| panic!("a PEERS line: {said}"));
    assert!(summary.ends_with(" 7 (NotJoining 5, Pending 2)"), "{summary}");
    for i in 0..7 {
        assert!(said.contains(&format!("\npeer-{i} ")), "peer-{i} read from its page: {said}");
    }
    assert!(said.contains("not joined although join is true: peer-0, peer-1"), "{said}");

    let out = kubectl_liqo(&cp, &["status", "--chunk-size", "2", "--phase", "notjoining", "--limit", "2", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let names: Vec<&str> = json["peers"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["peer-2", "peer-3"]);
    assert_eq!(json["omitted"], 3);
    assert_eq!(json["summary"]["total"], 7);
    assert_eq!(json["summary"]["byState"], serde_json::json!({"NotJoining": 5, "Pending": 2}));

    let out = kubectl_liqo(&cp, &["status", "00000000-0000-4000-8000-000000000004"]);
    assert!(out.status.success(), "a peer not asked to join is healthy: {}", text(&out));
    assert!(text(&out).lines().any(|l| l.starts_with("NAME") && l.ends_with(" peer-4")), "{}", text(&out));
    let out = kubectl_liqo(&cp, &["status", "00000000-0000-4000-8000-000000000009"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no ForeignCluster of that name or cluster ID"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_by_fingerprint_as_a_user_does_it() {
    if !ready_to_run() {
        return;
    }
    let Some(t) = two_clusters_with(&["--leader-election=false"]).await else { return };
    let _webhooks = (start_webhook(&t.home).await, start_webhook(&t.remote).await);
    let out = kubectl_liqo(&t.home_cp, &["peer", &t.remote_rec.auth_url, "--name", "remote"]);
    assert!(out.status.success(), "{}", text(&out));
    let waiting =
        fc_where(&t.home, "remote", "awaiting approval", |f| phase(f, "Trusted").is_some_and(|p| p.1 == "AwaitingApproval")).await;
    let message = phase(&waiting, "Trusted").unwrap().2;

    // What the remote's operator reads out (`kubectl liqo status`, as its reconciler published
    // it): the fingerprint of the CA its auth service's certificate chains to.
    let certs = t.remote_cp.path().join("remote-auth-certs");
    let ca_pem = std::fs::read_to_string(certs.join("ca.crt")).unwrap();
    let theirs = liqo_certs::inspect::fingerprint_sha256(&ca_pem).unwrap();
    let read_out = eventually("the remote's reconciler publishing it", || async {
        let out = text(&kubectl_liqo(&t.remote_cp, &["status"]));
        out.contains(&format!("AUTH-CA-FINGERPRINT   {theirs}")).then_some(out)
    })
    .await;
    assert!(read_out.contains(&format!("AUTH-URL              {}", t.remote_rec.auth_url)), "{read_out}");
    assert!(message.contains(&format!("SHA-256 {theirs}")), "the page shows what the remote presents: {message}");
    let said = text(&kubectl_liqo(&t.home_cp, &["status", "remote"]));
    assert!(said.contains("kubectl liqo trust remote --fingerprint"), "{said}");
    // As data: the status field, the detail's CA-FINGERPRINT, `kubectl get -o wide`'s column.
    let presented = |f: &ForeignCluster| f.status.as_ref()?.outgoing.as_ref()?.presented_fingerprint.clone();
    assert_eq!(presented(&waiting).as_deref(), Some(theirs.as_str()), "status.outgoing.presentedFingerprint");
    assert!(said.contains(&format!("CA-FINGERPRINT       {theirs} (presented, not approved)")), "{said}");
    let wide = wide_row(&t.home, "remote").await;
    assert_eq!(wide.get("Presented-Fingerprint").map(String::as_str), Some(theirs.as_str()), "kubectl get -o wide: {wide:?}");

    // Not a fingerprint: a usage error. Another one: refused, nothing joined.
    let out = kubectl_liqo(&t.home_cp, &["trust", "remote", "--fingerprint", "12:34"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = kubectl_liqo(&t.home_cp, &["trust", "remote", "--fingerprint", &"0".repeat(64)]);
    assert!(out.status.success(), "{}", text(&out));
    fc_where(&t.home, "remote", "a mismatch", |f| phase(f, "Trusted").is_some_and(|p| p.1 == "FingerprintMismatch")).await;

    // The right one, written as openssl prints it.
    let colons: Vec<String> = theirs.as_bytes().chunks(2).map(|c| String::from_utf8_lossy(c).to_uppercase()).collect();
    let out = kubectl_liqo(&t.home_cp, &["trust", "remote", "--fingerprint", &colons.join(":")]);
    assert!(text(&out).contains(&format!("trusted by fingerprint {theirs}")), "{}", text(&out));
    let joined = fc_where(&t.home, "remote", "joined by fingerprint", outgoing_joined).await;
    assert_eq!(phase(&joined, "Trusted").unwrap().1, "FingerprintApproved");
    assert_eq!(presented(&joined), None, "approved: nothing awaits approval");
    assert!(!joined.spec.allow_untrusted_ca(), "no allowUntrustedCA needed");

    // The remote's leaf is renewed (same CA), as every year: the pairing holds.
    use liqo_reconciler::remote::auth::client::presented_fingerprints;
    let before = presented_fingerprints(&t.remote_rec.auth_url).await.unwrap();
    std::fs::remove_file(certs.join("tls.crt")).unwrap();
    let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    liqo_certs::files::ensure(&certs, &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    let renewed = eventually("the remote serving its renewed leaf", || async {
        let now = presented_fingerprints(&t.remote_rec.auth_url).await.ok()?;
        (now[0] != before[0]).then_some(now)
    })
    .await;
    assert_eq!(renewed, [renewed[0].clone(), theirs.clone()], "a new leaf, the same CA");
    reconciles_later(&t.home_rec, 3.0).await;
    let still = Api::<ForeignCluster>::all(t.home.clone()).get("remote").await.unwrap();
    assert_eq!(phase(&still, "Trusted").unwrap().1, "FingerprintApproved", "{still:?}");
    assert!(outgoing_joined(&still));

    // The remote's CA replaced: its reconciler publishes the new fingerprint, and ours refuses
    // the remote until the new one is approved.
    for f in ["ca.crt", "ca.key"] {
        std::fs::remove_file(certs.join(f)).unwrap();
    }
    liqo_certs::files::ensure(&certs, &sans, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    let new_ca = liqo_certs::inspect::fingerprint_sha256(&std::fs::read_to_string(certs.join("ca.crt")).unwrap()).unwrap();
    assert_ne!(new_ca, theirs);
    eventually("the remote publishing its new CA's fingerprint", || async {
        text(&kubectl_liqo(&t.remote_cp, &["status"])).contains(&format!("AUTH-CA-FINGERPRINT   {new_ca}")).then_some(())
    })
    .await;
    let refused = fc_where(&t.home, "remote", "a mismatch after the CA change", |f| {
        phase(f, "Trusted").is_some_and(|p| p.1 == "FingerprintMismatch")
    })
    .await;
    assert!(phase(&refused, "Trusted").unwrap().2.contains(&new_ca), "the message shows the new CA: {refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_wait_on_a_terminal_shows_live_progress() {
    if !ready_to_run() {
        return;
    }
    if Command::new("script").arg("--version").output().is_err() {
        skip("script (util-linux) not found: no pseudo-terminal to run under");
        return;
    }
    let Some(t) = two_clusters().await else { return };
    let kubeconfig = t.home_cp.kubeconfig(liqo_testenv::ADMIN_TOKEN);
    let command = format!(
        "{} --kubeconfig {} peer {} --allow-untrusted-ca --name remote --wait=60s",
        env!("CARGO_BIN_EXE_kubectl-liqo"),
        kubeconfig.display(),
        t.remote_rec.auth_url
    );
    // `script` runs it under a pseudo-terminal and copies what it showed.
    let out = Command::new("script").args(["-qec", &command, "/dev/null"]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("\x1b[2K"), "the line in progress is redrawn:\n{shown:?}");
    assert!(liqo_cli_spinner().iter().any(|f| shown.contains(f)), "a spinner turns:\n{shown:?}");
    assert!(shown.contains("✓ Joined") && shown.contains("joined remote"), "{shown:?}");
}

fn liqo_cli_spinner() -> [&'static str; 10] {
    ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn domain_add_finds_the_clusters_a_zone_lists() {
    if !ready_to_run() {
        return;
    }
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    liqo_testenv::install_liqo(&admin, "liqo").await;
    const LISTED: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
    let zone = liqo_testenv::dns::zone_file(
        "example.com.",
        &format!(
            "example.com. PTR beta._liqo._tcp.example.com.\nbeta._liqo._tcp.example.com. SRV 0 0 6443 api.example.com.\nbeta._liqo._tcp.example.com. TXT \"id={LISTED}\" \"namespace=liqo\"\napi.example.com. A 10.0.0.2\n"
        ),
    );
    let dns = liqo_testenv::dns::ZoneServer::start("example.com.", &zone).await;
    let mut rec = start_reconciler_with(
        &cp,
        "single",
        &reconciler_token(&admin).await,
        &[&format!("--dns-server={}", dns.addr), "--search-domain-period-seconds=2"],
    );
    ready(&mut rec).await;

    let out = kubectl_liqo(&cp, &["domain", "add", "example.com", "--no-autojoin"]);
    assert!(out.status.success(), "{}", text(&out));
    let sd = Api::<SearchDomain>::all(admin.clone()).get("example.com").await.unwrap();
    assert_eq!((sd.spec.domain.as_str(), sd.spec.autojoin), ("example.com", Some(false)));
    eventually("the listed cluster found", || async {
        let fcs = Api::<ForeignCluster>::all(admin.clone()).list(&ListParams::default()).await.ok()?;
        fcs.items.iter().any(|f| f.spec.remote_cluster_id() == Some(LISTED)).then_some(())
    })
    .await;
    let listed = eventually("domain list showing it", || async {
        let out = kubectl_liqo(&cp, &["domain", "list"]);
        let said = text(&out);
        (out.status.success() && said.contains("LookupSucceeded") && said.contains(LISTED)).then_some(said)
    })
    .await;
    assert!(listed.contains("example.com"), "{listed}");

    // The switches, at runtime.
    let out = kubectl_liqo(&cp, &["discovery", "off"]);
    assert!(out.status.success() && text(&out).contains("discovery       off"), "{}", text(&out));
    let config = Api::<liqo_api::ClusterConfig>::all(admin.clone()).get("liqo-configuration").await.unwrap();
    assert!(!config.spec.discovery_config.enable_discovery);

    let out = kubectl_liqo(&cp, &["domain", "remove", "example.com"]);
    assert!(out.status.success(), "{}", text(&out));
    gone(&Api::<SearchDomain>::all(admin.clone()), "example.com", "the SearchDomain removed").await;
}

/// `peer URL` for a cluster known already (found on the LAN at another address): that
/// ForeignCluster is joined and said so, nothing else is created, and the `--name` given finds
/// it in every later command (`status`, `trust`, `unpeer`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_url_of_a_cluster_known_already_joins_it() {
    if !ready_to_run() {
        return;
    }
    let Some(t) = two_clusters_with(&["--leader-election=false"]).await else { return };
    let _webhooks = (start_webhook(&t.home).await, start_webhook(&t.remote).await);
    // As LAN discovery records it: named after the cluster ID, another address of the same
    // auth service, not joined.
    let lan_url = match t.remote_rec.auth_url.contains("localhost") {
        true => t.remote_rec.auth_url.replace("localhost", "127.0.0.1"),
        false => t.remote_rec.auth_url.replace("127.0.0.1", "localhost"),
    };
    assert_ne!(lan_url, t.remote_rec.auth_url);
    let found: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": t.remote_id, "labels": {"discovery.liqo.io/cluster-id": t.remote_id, "discovery.liqo.io/discovery-type": "LAN"}},
        "spec": {"clusterIdentity": {"clusterID": t.remote_id}, "authUrl": lan_url, "discoveryType": "LAN", "join": false}
    }))
    .unwrap();
    let fcs = Api::<ForeignCluster>::all(t.home.clone());
    fcs.create(&Default::default(), &found).await.unwrap();

    let out = kubectl_liqo(&t.home_cp, &["peer", &t.remote_rec.auth_url, "--name", "node-b", "--allow-untrusted-ca", "--wait=60s"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let note = format!(
        "cluster {} is known already as ForeignCluster {} (found on the LAN): joining it (also found as node-b by every kubectl liqo command)",
        t.remote_id, t.remote_id
    );
    assert!(said.contains(&note), "{said}");
    assert!(said.contains(&format!("joined {} (cluster {})", t.remote_id, t.remote_id)), "{said}");
    let fc = fcs.get(&t.remote_id).await.unwrap();
    assert!(outgoing_joined(&fc) && fc.spec.join == Some(true), "the known ForeignCluster joined");
    assert_eq!(fc.spec.auth_url.as_deref(), Some(lan_url.as_str()), "its address is discovery's to keep");
    assert!(fcs.get_opt("node-b").await.unwrap().is_none(), "no second ForeignCluster for the same cluster");
    assert_eq!(fcs.list(&ListParams::default()).await.unwrap().items.len(), 1);
    assert_eq!(fc.labels().get("discovery.liqo.io/peer-name").map(String::as_str), Some("node-b"));

    // The name given works in every later command.
    let out = kubectl_liqo(&t.home_cp, &["status", "node-b", "-o", "json"]);
    assert!(out.status.success() && text(&out).contains(&t.remote_id), "{}", text(&out));
    let fp = "ab".repeat(32);
    let out = kubectl_liqo(&t.home_cp, &["trust", "node-b", "--fingerprint", &fp]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fcs.get(&t.remote_id).await.unwrap().spec.trusted_ca_fingerprint.as_deref(), Some(fp.as_str()));
    let out = kubectl_liqo(&t.home_cp, &["unpeer", "node-b"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fcs.get(&t.remote_id).await.unwrap().spec.join, Some(false), "unpeer node-b unjoined the known ForeignCluster");
}

/// The line `install` prints to pin a cluster's CA, `peer URL --fingerprint SHA`, pasted whole
/// on a second cluster: with LAN discovery off (no ForeignCluster yet: one is made, pinned), and
/// on (the one discovery made is pinned and joined).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pinned_peer_line_works_whatever_discovery_did() {
    if !ready_to_run() {
        return;
    }
    let Some(t) = two_clusters_with(&["--leader-election=false"]).await else { return };
    let _webhooks = (start_webhook(&t.home).await, start_webhook(&t.remote).await);
    let configs = Api::<liqo_api::ClusterConfig>::all(t.remote.clone());
    let fingerprint = eventually("the remote's auth CA fingerprint published", || async {
        configs.get_opt("liqo-configuration").await.ok()??.status?.auth_ca_fingerprint
    })
    .await;
    // What `install` prints (its unit test `the_peer_line_is_what_another_cluster_runs` holds the
    // line to this form).
    let url = &t.remote_rec.auth_url;
    let args = ["peer", url.as_str(), "--fingerprint", fingerprint.as_str(), "--wait=60s"];
    let fcs = Api::<ForeignCluster>::all(t.home.clone());

    // Discovery off: nothing known, a ForeignCluster is made, pinned, and joins.
    let out = kubectl_liqo(&t.home_cp, &args);
    assert!(out.status.success(), "{}", text(&out));
    let made = fcs.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].spec.trusted_ca_fingerprint.as_deref(), Some(fingerprint.as_str()));
    assert!(made[0].spec.allow_untrusted_ca != Some(true));
    assert!(outgoing_joined(&fcs.get(&made[0].name_any()).await.unwrap()));

    // Discovery on: the ForeignCluster it made (named after the ID, not pinned) is the one
    // pinned and joined by the same line.
    fcs.delete(&made[0].name_any(), &Default::default()).await.unwrap();
    gone(&fcs, &made[0].name_any(), "the first ForeignCluster deleted").await;
    let found: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": t.remote_id, "labels": {"discovery.liqo.io/cluster-id": t.remote_id, "discovery.liqo.io/discovery-type": "LAN"}},
        "spec": {"clusterIdentity": {"clusterID": t.remote_id}, "authUrl": t.remote_rec.auth_url, "discoveryType": "LAN", "join": false}
    }))
    .unwrap();
    fcs.create(&Default::default(), &found).await.unwrap();
    let out = kubectl_liqo(&t.home_cp, &args);
    assert!(out.status.success(), "{}", text(&out));
    let fc = fcs.get(&t.remote_id).await.unwrap();
    assert_eq!(fc.spec.trusted_ca_fingerprint.as_deref(), Some(fingerprint.as_str()));
    assert!(outgoing_joined(&fc) && fc.spec.join == Some(true));
    assert_eq!(fcs.list(&ListParams::default()).await.unwrap().items.len(), 1);
}

/// A home that lost its identity on the remote (its Secret deleted) proves it holds its cluster
/// ID with its holder key and joins again by itself (protocol §10). One whose identity there
/// carries no key (issued before 0.4) is refused a new one while the remote binds its ID, says so
/// (`IdentityBound`, `NoKeyRecorded`), and joins again once the remote's operator runs `kubectl
/// liqo free ID`; freeing an ID that is not bound fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_identity_is_told_and_recovered_by_freeing_the_id() {
    if !ready_to_run() {
        return;
    }
    // A health period of 2 s retries faster than the auth service's per-source limit allows.
    let Some(t) = two_clusters_with(&["--leader-election=false", "--auth-identity-per-minute=600"]).await else { return };
    let _webhooks = (start_webhook(&t.home).await, start_webhook(&t.remote).await);
    peer_by_auth_url(&t.home, "to-remote", &t.remote_rec).await;
    fc_where(&t.home, "to-remote", "joined", outgoing_joined).await;

    // Our identity there, lost here: proved by our key, issued again.
    let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(t.home.clone(), "liqo");
    secrets.delete("to-remote-identity", &Default::default()).await.unwrap();
    liqo_testenv::eventually("IdentityReclaimed", || liqo_testenv::event(&t.home, "IdentityReclaimed", "to-remote")).await;
    fc_where(&t.home, "to-remote", "joined again by our key", |f| {
        outgoing_joined(f) && phase(f, "Authenticated").is_some_and(|(s, _, _)| s == "True")
    })
    .await;

    // The same, where the identity there carries no key (as one of before 0.4).
    let sas =
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(t.remote.clone(), &liqo_api::names::tenant_namespace(&t.home_id));
    let no_key = serde_json::json!({"metadata": {"annotations": {liqo_api::names::ANNOTATION_HOLDER_KEY: null}}});
    let sa = liqo_api::names::peer_service_account(&t.home_id);
    sas.patch(&sa, &Default::default(), &kube::api::Patch::Merge(&no_key)).await.unwrap();
    secrets.delete("to-remote-identity", &Default::default()).await.unwrap();
    // (A round whose challenge the remote's rate limit refused says IdentityBound without why.)
    let bound = fc_where(&t.home, "to-remote", "Authenticated False IdentityBound, NoKeyRecorded", |f| {
        phase(f, "Authenticated").is_some_and(|(s, reason, m)| s == "False" && reason == "IdentityBound" && m.contains("NoKeyRecorded"))
    })
    .await;
    let (_, _, message) = phase(&bound, "Authenticated").unwrap();
    assert!(message.contains(&format!("kubectl liqo free {}", t.home_id)), "{message}");

    // The remote's operator frees our ID: we get a new identity and join again.
    let out = kubectl_liqo(&t.remote_cp, &["free", &t.home_id]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("cluster ID {} freed", t.home_id)), "{}", text(&out));
    fc_where(&t.home, "to-remote", "joined again with a new identity", |f| {
        outgoing_joined(f) && phase(f, "Authenticated").is_some_and(|(s, _, _)| s == "True")
    })
    .await;
    assert!(secrets.get_opt("to-remote-identity").await.unwrap().is_some());

    // An ID bound to nobody: nothing to free.
    let out = kubectl_liqo(&t.remote_cp, &["free", "0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not bound here"), "{}", text(&out));
}
