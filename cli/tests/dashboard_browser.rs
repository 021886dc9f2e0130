//! The dashboard in real browsers (headless Chromium and Firefox, driven over WebDriver)
//! against two real control planes with the reconcilers and our webhook running: a
//! ForeignCluster created with the API appears in Available Peers, Connect moves it to
//! Connected Peers once the peering completes, Disconnect moves it back, Add domain creates a
//! SearchDomain, Add remote peer with a malformed cluster ID shows the webhook's words at the
//! field, a condition message with `<script>` is shown as text, the picture shows the peer.
//! Each step saves a screenshot under `target/dashboard-screenshots/` (Firefox's in `firefox/`).
//! Skips loudly without the browser and its driver, the API server assets or the reconciler
//! binary.

#[path = "../../reconciler/tests/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::*;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::{ForeignCluster, SearchDomain};
use liqo_testenv::browser::{self, Killed, Kind, Locator, shot, text_where};
use liqo_testenv::{eventually, free_port, skip};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_chromium() {
    the_dashboard_in(Kind::Chromium).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_firefox() {
    the_dashboard_in(Kind::Firefox).await;
}

async fn the_dashboard_in(kind: Kind) {
    if reconciler_binary().is_none() {
        skip("the liqo-reconciler binary is not built (cargo test --workspace builds it)");
        return;
    }
    let Some(b) = browser::start(kind).await else { return };
    let Some(t) = two_clusters().await else { return };
    let _webhooks = (start_webhook(&t.home).await, start_webhook(&t.remote).await);

    let port = free_port();
    let kubeconfig = t.home_cp.kubeconfig(liqo_testenv::ADMIN_TOKEN);
    let _dashboard = Killed(
        Command::new(env!("CARGO_BIN_EXE_kubectl-liqo"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["dashboard", "--address", &format!("127.0.0.1:{port}")])
            .env_remove("KUBECONFIG")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}/");
    eventually("the dashboard answering", || async { tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok() }).await;
    b.open(&url).await;
    text_where(&b, "#this-cluster", "this cluster's ID", |s| s.contains(&t.home_id)).await;
    // What peers are told, as our reconciler published it: its auth URL, its CA's fingerprint.
    let ca = std::fs::read_to_string(t.home_cp.path().join("home-auth-certs/ca.crt")).unwrap();
    let fingerprint = liqo_certs::inspect::fingerprint_sha256(&ca).unwrap();
    text_where(&b, "#this-cluster", "what peers are told", |s| s.contains(&t.home_rec.auth_url) && s.contains(&fingerprint)).await;
    shot(&b, "01-home").await;

    // A ForeignCluster created with the API appears in Available Peers, live.
    let fc: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "remote"},
        "spec": {"authUrl": t.remote_rec.auth_url, "join": false, "allowUntrustedCA": true}
    }))
    .unwrap();
    let created = Instant::now();
    Api::<ForeignCluster>::all(t.home.clone()).create(&PostParams::default(), &fc).await.unwrap();
    text_where(&b, "#available-section", "the new peer in Available Peers", |s| s.contains("remote")).await;
    eprintln!("appeared in Available Peers {:.2} s after it was created", created.elapsed().as_secs_f64());
    shot(&b, "02-available").await;

    // Connect: join flips, and the peer moves to Connected Peers once the peering completes.
    b.click("button[aria-label='Connect remote']").await;
    text_where(&b, "#connected-section", "the peer in Connected Peers", |s| s.contains("remote") && s.contains("healthy")).await;
    assert!(Api::<ForeignCluster>::all(t.home.clone()).get("remote").await.unwrap().spec.join());
    let picture = text_where(&b, "#picture-section", "the picture showing the peer", |s| s.contains("remote")).await;
    assert!(picture.contains("Manual"), "the type as the node's badge: {picture}");
    // When our reconciler last checked it, from its record (ConfigMap liqo-last-checks).
    // Checked on time, so "checked within 12 s" (a late peer's would say "checked 3 min ago").
    text_where(&b, "#connected-section", "the peer's last check", |s| s.contains("checked within")).await;
    shot(&b, "03-connected").await;
    // The peer's view ticks the reconciler's checks made while the dashboard shows it joined:
    // the record written with the check made on the way to joined can reach the dashboard
    // before the status that says joined, so the tick comes with the next record (one health
    // period, 2 s here). Waited for here, before Disconnect ends the joined stretch.
    let peer_view = format!("{url}peers/remote");
    eventually("a check ticked on the peer's strip while joined", || async {
        b.open(&peer_view).await;
        let ticks = b.execute("return document.querySelectorAll('svg.strip rect.check').length", vec![]).await.ok()?;
        ticks.as_u64().filter(|n| *n >= 1)
    })
    .await;
    b.open(&url).await;
    text_where(&b, "#connected-section", "the peer in Connected Peers again", |s| s.contains("remote") && s.contains("healthy")).await;

    // Disconnect reverses it.
    b.click("[aria-label='Disconnect remote']").await;
    // It asks first, on a page of its own.
    let sure =
        b.wait().at_most(std::time::Duration::from_secs(30)).for_element(Locator::Css("button[aria-label='Yes, disconnect remote']"));
    sure.await.expect("the question before Disconnect").click().await.unwrap();
    text_where(&b, "#available-section", "the peer back in Available Peers", |s| s.contains("remote")).await;
    fc_where(&t.home, "remote", "unjoined", |f| !f.spec.join() && f.finalizers().is_empty()).await;

    // Add domain creates a SearchDomain.
    b.find(Locator::Id("domain-domain")).await.unwrap().send_keys("example.com").await.unwrap();
    b.click("form[action='/actions/domains'] button[type=submit]").await;
    eventually("the SearchDomain created", || async {
        Api::<SearchDomain>::all(t.home.clone()).get_opt("example.com").await.ok().flatten()
    })
    .await;

    // Add remote peer with a malformed cluster ID: the webhook's words at the field.
    b.find(Locator::Id("peer-api_url")).await.unwrap().send_keys("https://127.0.0.1:1").await.unwrap();
    b.find(Locator::Id("peer-cluster_id")).await.unwrap().send_keys("Not_A_Cluster_ID").await.unwrap();
    b.find(Locator::Id("peer-name")).await.unwrap().send_keys("bad").await.unwrap();
    b.click("form[action='/actions/peers'] button[type=submit]").await;
    let error = text_where(&b, "#peer-cluster_id-error", "the refusal at the cluster ID field", |s| !s.is_empty()).await;
    assert!(error.contains("denied the request"), "{error}");
    shot(&b, "04-refused-at-the-field").await;

    // A condition message a peer wrote with <script> in it is shown as text, never run.
    let hostile = json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "status": {"conditions": [{
        "type": "Joined", "status": "False", "reason": "PeerRefused", "lastTransitionTime": "2026-11-23T10:00:00Z",
        "message": "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"}]}});
    Api::<ForeignCluster>::all(t.home.clone())
        .patch_status("remote", &PatchParams::apply("hostile-test").force(), &Patch::Apply(hostile))
        .await
        .unwrap();
    b.open(&url).await;
    let shown = text_where(&b, "#available-section", "the hostile message shown", |s| s.contains("<script>")).await;
    assert!(shown.contains("document.title='pwned'"), "{shown}");
    assert_ne!(b.title().await.unwrap(), "pwned", "nothing a peer wrote ran");
    let scripts = b.execute("return document.querySelectorAll('script').length", vec![]).await.unwrap();
    assert_eq!(scripts, json!(1), "only our own script");
    shot(&b, "05-hostile-message-as-text").await;

    // Live updates are paced: a burst of changes costs the page a refresh a second at most, not
    // one each (at 10,000 peers a refresh of the home takes the server 100-250 ms).
    let fetches = || async {
        let n = b.execute("return performance.getEntriesByType('resource').filter(e => e.initiatorType === 'fetch').length", vec![]);
        n.await.unwrap().as_u64().unwrap()
    };
    let before = fetches().await;
    let burst = Instant::now();
    for i in 0..20 {
        let touched = json!({"metadata": {"labels": {"test.liqo.io/touched": i.to_string()}}});
        Api::<ForeignCluster>::all(t.home.clone()).patch("remote", &PatchParams::default(), &Patch::Merge(&touched)).await.unwrap();
    }
    eventually("the page refreshed after the burst", || async { (fetches().await > before).then_some(()) }).await;
    let (refreshes, took) = (fetches().await - before, burst.elapsed().as_secs_f64());
    assert!(refreshes as f64 <= took + 1.0, "{refreshes} refreshes for 20 changes in {took:.2} s");

    // The peer view.
    b.open(&format!("{url}peers/remote")).await;
    text_where(&b, "#peer-view", "the peer view", |s| s.contains("Phases") && s.contains("CA fingerprint") && s.contains("Ours to them"))
        .await;
    // Its health over time, as the dashboard's watch saw it: available, then joined on the way
    // (Connect), then available again (Disconnect).
    let strip = b
        .execute("return Array.from(document.querySelectorAll('svg.strip rect:not(.check)')).map(r => r.getAttribute('class'))", vec![])
        .await;
    let strip: Vec<String> = serde_json::from_value(strip.unwrap()).unwrap();
    assert!(strip.len() >= 3 && strip.contains(&"chip-joined".to_owned()), "{strip:?}");
    assert_eq!(strip.last().map(String::as_str), Some("chip-available"), "{strip:?}");
    // The reconciler's checks while it was joined, as ticks on the strip.
    let ticks = b.execute("return document.querySelectorAll('svg.strip rect.check').length", vec![]).await.unwrap();
    assert!(ticks.as_u64().is_some_and(|n| n >= 1), "{ticks}");
    shot(&b, "06-peer-view").await;

    // Its ForeignCluster as an object: the YAML, and its spec edited. Our webhook refuses an
    // http:// auth URL, in its words at the field; a harmless change is shown as a diff by
    // the dry run, then applied.
    b.open(&format!("{url}objects/foreignclusters/remote")).await;
    text_where(&b, "#stored", "the object's YAML", |s| s.contains("kind: ForeignCluster")).await;
    shot(&b, "10-object").await;
    let spec: String =
        serde_json::from_value(b.execute("return document.getElementById('edit-spec').value", vec![]).await.unwrap()).unwrap();
    let insecure: String = spec
        .lines()
        .map(|l| if l.starts_with("authUrl:") { "authUrl: http://insecure.example:1\n".into() } else { format!("{l}\n") })
        .collect();
    assert!(insecure.contains("http://insecure"), "the spec has an auth URL: {spec}");
    check_spec(&b, &insecure).await;
    text_where(&b, "#edit-spec-error", "the webhook's refusal at the field", |s| s.contains("https://")).await;
    shot(&b, "11-refused-by-the-webhook").await;
    // It was added allowing an untrusted CA; the edit stops allowing it.
    assert!(spec.contains("allowUntrustedCA: true\n"), "{spec}");
    check_spec(&b, &spec.replace("allowUntrustedCA: true\n", "allowUntrustedCA: false\n")).await;
    text_where(&b, "pre.diff", "what changes", |s| s.contains("- allowUntrustedCA: true") && s.contains("+ allowUntrustedCA: false")).await;
    shot(&b, "12-what-changes").await;
    let now = fc_where(&t.home, "remote", "as it was", |_| true).await;
    assert_eq!(now.spec.allow_untrusted_ca, Some(true), "a dry run stores nothing");
    b.click("form[action$='/apply'] button").await;
    fc_where(&t.home, "remote", "the edit applied", |f| f.spec.allow_untrusted_ca == Some(false)).await;
    text_where(&b, "#stored", "the object after the edit", |s| s.contains("allowUntrustedCA: false")).await;

    // Forget: it asks first, then the ForeignCluster is gone.
    b.open(&format!("{url}peers/remote")).await;
    b.click("[aria-label='Forget remote']").await;
    text_where(&b, "#confirm", "the question before Forget", |s| s.contains("Forget remote?")).await;
    assert!(fc_where(&t.home, "remote", "still there while asked", |_| true).await.metadata.deletion_timestamp.is_none());
    b.click("button[aria-label='Yes, forget remote']").await;
    let fcs = Api::<ForeignCluster>::all(t.home.clone());
    eventually("the ForeignCluster forgotten", || async { fcs.get_opt("remote").await.ok().filter(Option::is_none) }).await;
    b.client.clone().close().await.unwrap();
}

/// Writes `spec` in the object's editor and presses Check.
async fn check_spec(b: &browser::Browser, spec: &str) {
    b.execute("document.getElementById('edit-spec').value = arguments[0]", vec![json!(spec)]).await.unwrap();
    b.click("form.editor button[type=submit]").await;
}
