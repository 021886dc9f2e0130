//! The dashboard in a real browser (headless Chromium driven over WebDriver by chromedriver)
//! against two real control planes with the reconcilers and our webhook running: a
//! ForeignCluster created with the API appears in Available Peers, Connect moves it to
//! Connected Peers once the peering completes, Disconnect moves it back, Add domain creates a
//! SearchDomain, Add remote peer with a malformed cluster ID shows the webhook's words at the
//! field, a condition message with `<script>` is shown as text, the picture shows the peer.
//! Each step saves a screenshot under `target/dashboard-screenshots/`. Skips loudly without
//! Chromium, chromedriver, the API server assets or the reconciler binary.

#[path = "../../reconciler/tests/common/mod.rs"]
mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fantoccini::{Client as Browser, ClientBuilder, Locator};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::{ForeignCluster, SearchDomain};
use liqo_testenv::{eventually, free_port, skip};
use serde_json::json;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn screenshots() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shot(b: &Browser, name: &str) {
    let png = b.screenshot().await.unwrap();
    std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
}

/// The text of the element `css`, once `pred` holds for it (30 s at most; a screenshot of
/// the page when it never does).
async fn text_where(b: &Browser, css: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(el) = b.find(Locator::Css(css)).await
            && let Ok(text) = el.text().await
            && pred(&text)
        {
            return text;
        }
        if Instant::now() > deadline {
            shot(b, &format!("failed-{}", what.replace(' ', "-"))).await;
            let page = b.source().await.unwrap_or_default();
            panic!("timed out waiting for {what}; the page:\n{page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn start_browser() -> Option<(Killed, Browser, tempfile::TempDir)> {
    for bin in ["chromium", "chromedriver"] {
        if Command::new(bin).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            skip(&format!("{bin} not found (apt-get install chromium chromium-driver; .ci/run does)"));
            return None;
        }
    }
    let port = free_port();
    let driver =
        Killed(Command::new("chromedriver").arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let profile = tempfile::tempdir().unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"binary": "/usr/bin/chromium", "args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--window-size=1280,1700", format!("--user-data-dir={}", profile.path().display())]}),
    );
    let url = format!("http://127.0.0.1:{port}");
    let browser = eventually("chromedriver answering", || async {
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new()).capabilities(caps.clone()).connect(&url).await.ok()
    })
    .await;
    Some((driver, browser, profile))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_browser() {
    if reconciler_binary().is_none() {
        skip("the liqo-reconciler binary is not built (cargo test --workspace builds it)");
        return;
    }
    let Some(t) = two_clusters().await else { return };
    let Some((_driver, b, _profile)) = start_browser().await else { return };
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
    b.goto(&url).await.unwrap();
    text_where(&b, "#this-cluster", "this cluster's ID", |s| s.contains(&t.home_id)).await;
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
    b.find(Locator::Css("button[aria-label='Connect remote']")).await.unwrap().click().await.unwrap();
    text_where(&b, "#connected-section", "the peer in Connected Peers", |s| s.contains("remote") && s.contains("healthy")).await;
    assert!(Api::<ForeignCluster>::all(t.home.clone()).get("remote").await.unwrap().spec.join());
    let picture = text_where(&b, "#picture-section", "the picture showing the peer", |s| s.contains("remote")).await;
    assert!(picture.contains("Manual"), "the type as the node's badge: {picture}");
    shot(&b, "03-connected").await;

    // Disconnect reverses it.
    b.find(Locator::Css("button[aria-label='Disconnect remote']")).await.unwrap().click().await.unwrap();
    text_where(&b, "#available-section", "the peer back in Available Peers", |s| s.contains("remote")).await;
    fc_where(&t.home, "remote", "unjoined", |f| !f.spec.join() && f.finalizers().is_empty()).await;

    // Add domain creates a SearchDomain.
    b.find(Locator::Id("domain-domain")).await.unwrap().send_keys("example.com").await.unwrap();
    b.find(Locator::Css("form[action='/actions/domains'] button[type=submit]")).await.unwrap().click().await.unwrap();
    eventually("the SearchDomain created", || async {
        Api::<SearchDomain>::all(t.home.clone()).get_opt("example.com").await.ok().flatten()
    })
    .await;

    // Add remote peer with a malformed cluster ID: the webhook's words at the field.
    b.find(Locator::Id("peer-api_url")).await.unwrap().send_keys("https://127.0.0.1:1").await.unwrap();
    b.find(Locator::Id("peer-cluster_id")).await.unwrap().send_keys("Not_A_Cluster_ID").await.unwrap();
    b.find(Locator::Id("peer-name")).await.unwrap().send_keys("bad").await.unwrap();
    b.find(Locator::Css("form[action='/actions/peers'] button[type=submit]")).await.unwrap().click().await.unwrap();
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
    b.goto(&url).await.unwrap();
    let shown = text_where(&b, "#available-section", "the hostile message shown", |s| s.contains("<script>")).await;
    assert!(shown.contains("document.title='pwned'"), "{shown}");
    assert_ne!(b.title().await.unwrap(), "pwned", "nothing a peer wrote ran");
    let scripts = b.execute("return document.querySelectorAll('script').length", vec![]).await.unwrap();
    assert_eq!(scripts, json!(1), "only our own script");
    shot(&b, "05-hostile-message-as-text").await;

    // The peer view.
    b.goto(&format!("{url}peers/remote")).await.unwrap();
    text_where(&b, "#peer-view", "the peer view", |s| s.contains("Phases") && s.contains("CA fingerprint")).await;
    shot(&b, "06-peer-view").await;
    b.close().await.unwrap();
}
