//! The dashboard's in-cluster form on a real API server (envtest convention:
//! `KUBEBUILDER_ASSETS`; skips loudly without it), with the RBAC of `manifests/dashboard/`:
//! users log in with their own tokens and see and act with what RBAC allows them; the
//! dashboard's own identity reviews tokens and reads, never writes, by one set of watches for
//! all users; the `liqo-dashboard` binary serves it over TLS; logging in and out works in real
//! browsers (headless Chromium and Firefox; each skips loudly when missing).

use std::path::Path;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use liqo_api::{ForeignCluster, ForeignClusterSpec};
use liqo_dashboard::sessions::Sessions;
use liqo_testenv::browser::{self, Killed, Kind, Locator, shot, text_where};
use liqo_testenv::{ControlPlane, create_manifest, eventually, install_liqo, service_account_token};
use serde_json::json;
use tower::ServiceExt;

const MANIFESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/dashboard");

struct Answer {
    status: StatusCode,
    location: String,
    cookie: String,
    body: String,
}

async fn call(app: &Router, method: &str, path: &str, cookie: Option<&str>, form: Option<&str>) -> Answer {
    let mut req = Request::builder().method(method).uri(path).header(header::HOST, "dashboard.example");
    if let Some(token) = cookie {
        req = req.header(header::COOKIE, format!("{}={token}", liqo_dashboard::sessions::COOKIE));
    }
    if form.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    let res = app.clone().oneshot(req.body(Body::from(form.unwrap_or_default().to_owned())).unwrap()).await.unwrap();
    let header = |name| res.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let (location, cookie) = (header(header::LOCATION), header(header::SET_COOKIE));
    let status = res.status();
    let body = String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    Answer { status, location, cookie, body }
}

/// The CSRF token in a page.
fn csrf(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a form with the CSRF token") + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}

/// Installs the overlay's RBAC and three users: alice (bound to liqo-peering-operator and
/// liqo-cluster-id-reader), bob (to liqo-peering-operator alone) and mallory (to nothing); the
/// tokens of the dashboard's ServiceAccount, alice and mallory.
async fn users(admin: &Client) -> (String, String, String) {
    for file in ["rbac.yaml", "user-role.yaml"] {
        create_manifest(admin, &std::fs::read_to_string(Path::new(MANIFESTS).join(file)).unwrap(), "liqo").await;
    }
    create_manifest(
        admin,
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {name: alice, namespace: liqo}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: mallory, namespace: liqo}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-liqo}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: liqo-peering-operator}
subjects: [{kind: ServiceAccount, name: alice, namespace: liqo}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-cluster-id, namespace: liqo}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: liqo-cluster-id-reader}
subjects: [{kind: ServiceAccount, name: alice, namespace: liqo}]
---
# Bob may use the dashboard as alice, but not read the cluster ID or the record of the checks.
apiVersion: v1
kind: ServiceAccount
metadata: {name: bob, namespace: liqo}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bob-liqo}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: liqo-peering-operator}
subjects: [{kind: ServiceAccount, name: bob, namespace: liqo}]
"#,
        "liqo",
    )
    .await;
    (
        service_account_token(admin, "liqo", "liqo-dashboard").await,
        service_account_token(admin, "liqo", "alice").await,
        service_account_token(admin, "liqo", "mallory").await,
    )
}

/// Watches of ForeignClusters open on the API server now (its own gauge).
async fn fc_watches(admin: &Client) -> f64 {
    liqo_testenv::watches_open(admin, "foreignclusters", liqo_testenv::WatchScope::Cluster).await
}

async fn a_peer(admin: &Client, name: &str) {
    let fc = ForeignCluster::new(
        name,
        ForeignClusterSpec { cluster_id: Some("b1c2d3e4-0000-4000-8000-00000000000b".into()), ..Default::default() },
    );
    Api::<ForeignCluster>::all(admin.clone()).create(&PostParams::default(), &fc).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_sees_and_acts_with_their_own_token() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let (own, alice, mallory) = users(&admin).await;
    a_peer(&admin, "peer-one").await;

    // The dashboard's own identity reviews tokens and reads what the pages show; it writes nothing.
    let reviewer = cp.client(&own).unwrap();
    Api::<ForeignCluster>::all(reviewer.clone()).list(&Default::default()).await.unwrap();
    let patch = kube::api::Patch::Merge(serde_json::json!({"spec": {"join": true}}));
    let denied = Api::<ForeignCluster>::all(reviewer.clone()).patch("peer-one", &Default::default(), &patch).await.unwrap_err();
    assert!(matches!(&denied, kube::Error::Api(s) if s.code == 403), "{denied:?}");
    let sessions = Sessions::new(reviewer, cp.config().unwrap(), "liqo");
    eventually("the shared watch of ForeignClusters open", || async { (fc_watches(&admin).await == 1.0).then_some(()) }).await;
    let app = liqo_dashboard::server::in_cluster_router(sessions.clone());

    // No cookie, or a token the API server does not know: the login page.
    let home = call(&app, "GET", "/", None, None).await;
    assert_eq!((home.status, home.location.as_str()), (StatusCode::SEE_OTHER, "/login"));
    assert!(call(&app, "GET", "/login", None, None).await.body.contains("type=\"password\""));
    let refused = call(&app, "POST", "/login", None, Some("token=not-a-token")).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.body.contains("the API server refused this token"), "{}", refused.body);
    assert!(refused.cookie.is_empty());
    let stale = call(&app, "GET", "/", Some("not-a-token"), None).await;
    assert_eq!(stale.location, "/login");
    assert!(stale.cookie.contains("Max-Age=0"), "a refused cookie is cleared: {}", stale.cookie);

    // Alice logs in: the token goes into a Secure, HttpOnly, SameSite=Strict cookie, never the page.
    let login = call(&app, "POST", "/login", None, Some(&format!("token={alice}"))).await;
    assert_eq!((login.status, login.location.as_str()), (StatusCode::SEE_OTHER, "/"));
    for attr in ["Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(login.cookie.split("; ").any(|a| a == attr), "{attr} in {}", login.cookie);
    }
    let page = eventually("peer-one on alice's page", || {
        let app = app.clone();
        let alice = alice.clone();
        async move { Some(call(&app, "GET", "/", Some(&alice), None).await.body).filter(|b| b.contains("peer-one")) }
    })
    .await;
    assert!(!page.contains(&alice), "the token is never in the page");
    assert_eq!(fc_watches(&admin).await, 1.0, "alice's page reads the shared watch: none opened for her");
    assert!(page.contains("action=\"/logout\""), "Log out offered");

    // When the reconciler last checked the peer (its record, ConfigMap liqo-last-checks): on
    // the peer's page of a user whose role lets them read the record, and of no one else.
    let record = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "liqo-last-checks"},
        "data": {"last-checks": "peer-one 2026-12-04T15:00:12Z\n"}});
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(admin.clone(), "liqo")
        .create(&PostParams::default(), &serde_json::from_value(record).unwrap())
        .await
        .unwrap();
    eventually("the last check on alice's page of peer-one", || {
        let app = app.clone();
        let alice = alice.clone();
        async move {
            let body = call(&app, "GET", "/peers/peer-one", Some(&alice), None).await.body;
            body.contains("<dt>Last check</dt><dd><time datetime=\"2026-12-04T15:00:12Z\"").then_some(())
        }
    })
    .await;
    let bob = service_account_token(&admin, "liqo", "bob").await;
    assert_eq!(call(&app, "POST", "/login", None, Some(&format!("token={bob}"))).await.status, StatusCode::SEE_OTHER);
    let bobs = eventually("peer-one's page for bob", || {
        let app = app.clone();
        let bob = bob.clone();
        async move { Some(call(&app, "GET", "/peers/peer-one", Some(&bob), None).await.body).filter(|b| b.contains("<dt>Last check</dt>")) }
    })
    .await;
    assert!(!bobs.contains("2026-12-04T15:00:12Z"), "bob may not read the record: {bobs}");

    // Her Connect is done with her token: the object changes.
    let connect = call(&app, "POST", "/actions/connect", Some(&alice), Some(&format!("csrf={}&name=peer-one", csrf(&page)))).await;
    assert_eq!(connect.status, StatusCode::SEE_OTHER, "{}", connect.body);
    let fcs = Api::<ForeignCluster>::all(admin.clone());
    let joined = fcs.get("peer-one").await.unwrap();
    assert_eq!(joined.spec.join, Some(true), "alice joined peer-one");
    let setter = joined.managed_fields().iter().find(|e| e.fields_v1.as_ref().is_some_and(|f| f.0["f:spec"].get("f:join").is_some()));
    assert_eq!(setter.and_then(|e| e.manager.as_deref()), Some("liqo-dashboard"), "who set spec.join: {:?}", joined.managed_fields());

    // Mallory is authenticated but RBAC lets him see nothing and do nothing.
    let login = call(&app, "POST", "/login", None, Some(&format!("token={mallory}"))).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    let page =
        eventually("mallory's permissions asked", || {
            let app = app.clone();
            let mallory = mallory.clone();
            async move {
                Some(call(&app, "GET", "/", Some(&mallory), None).await.body).filter(|b| b.contains("you may not create foreignclusters"))
            }
        })
        .await;
    assert!(!page.contains("peer-one"), "mallory may not list ForeignClusters, so his page shows none: {page}");
    // Nor among the objects, where alice sees it; nor its page, nor its editor's dry run.
    let objects = call(&app, "GET", "/objects", Some(&mallory), None).await.body;
    assert!(objects.contains("ForeignClusters (0)") && !objects.contains("peer-one"), "{objects}");
    assert!(call(&app, "GET", "/objects", Some(&alice), None).await.body.contains("ForeignClusters (1)"));
    assert_eq!(call(&app, "GET", "/objects/foreignclusters/peer-one", Some(&mallory), None).await.status, StatusCode::NOT_FOUND);
    let check = call(
        &app,
        "POST",
        "/objects/foreignclusters/peer-one/check",
        Some(&mallory),
        Some(&format!("csrf={}&spec=join%3A+false", csrf(&page))),
    )
    .await;
    assert_eq!(check.status, StatusCode::NOT_FOUND, "{}", check.body);
    assert!(call(&app, "GET", "/peers/peer-one", Some(&mallory), None).await.status != StatusCode::OK, "nor its own page");
    assert_eq!(fc_watches(&admin).await, 1.0, "two users, one watch");
    let disconnect = call(&app, "POST", "/actions/disconnect", Some(&mallory), Some(&format!("csrf={}&name=peer-one", csrf(&page)))).await;
    assert_eq!(disconnect.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(disconnect.body.contains("forbidden"), "{}", disconnect.body);
    assert_eq!(fcs.get("peer-one").await.unwrap().spec.join, Some(true), "mallory changed nothing");
    // Alice's CSRF token is not mallory's.
    let crossed = call(
        &app,
        "POST",
        "/actions/disconnect",
        Some(&mallory),
        Some(&format!("csrf={}&name=peer-one", csrf(&call(&app, "GET", "/", Some(&alice), None).await.body))),
    )
    .await;
    assert_eq!(crossed.status, StatusCode::FORBIDDEN);

    // Log out: the cookie is cleared and the session's watches end.
    assert_eq!(sessions.len(), 3);
    let page = call(&app, "GET", "/", Some(&alice), None).await.body;
    let out = call(&app, "POST", "/logout", Some(&alice), Some(&format!("csrf={}", csrf(&page)))).await;
    assert_eq!((out.status, out.location.as_str()), (StatusCode::SEE_OTHER, "/login"));
    assert!(out.cookie.contains("Max-Age=0"), "{}", out.cookie);
    assert_eq!(sessions.len(), 2);
}

/// Starts the `liqo-dashboard` binary with a generated certificate, as the overlay's
/// ServiceAccount (`own` is its token); its HTTPS address and CA file, once it serves.
async fn start_binary(cp: &ControlPlane, own: &str) -> (Killed, std::net::SocketAddr, std::path::PathBuf) {
    let port = liqo_testenv::free_port();
    let certs = cp.path().join("dashboard-certs");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_liqo-dashboard"))
        .env("KUBECONFIG", cp.kubeconfig(own))
        .args([format!("--listen=127.0.0.1:{port}"), format!("--generate-cert-dir={}", certs.display())])
        .stderr(std::fs::File::create(cp.path().join("dashboard.log")).unwrap())
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let ca = certs.join("ca.crt");
    eventually("the dashboard serving", || async { tokio::net::TcpStream::connect(addr).await.ok().filter(|_| ca.exists()) }).await;
    (Killed(child), addr, ca)
}

/// In real browsers: the login page, the token typed in, the peers shown, the cookie out of
/// the page's reach (HttpOnly), Log out.
async fn login_in(kind: Kind) {
    let Some(b) = browser::start(kind).await else { return };
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let (own, alice, _) = users(&admin).await;
    a_peer(&admin, "peer-one").await;
    let (_dashboard, addr, _) = start_binary(&cp, &own).await;
    let url = format!("https://localhost:{}/", addr.port());

    b.open(&url).await;
    text_where(&b, "#login", "the login page", |s| s.contains("Log in")).await;
    shot(&b, "07-login").await;
    b.find(Locator::Id("token")).await.unwrap().send_keys(&alice).await.unwrap();
    b.find(Locator::Css("form[action='/login'] button[type=submit]")).await.unwrap().click().await.unwrap();
    text_where(&b, "#available-section", "alice's peers", |s| s.contains("peer-one")).await;
    shot(&b, "08-logged-in").await;
    let cookies = b.get_all_cookies().await.unwrap();
    let cookie = cookies.iter().find(|c| c.name() == liqo_dashboard::sessions::COOKIE).expect("the session cookie");
    assert_eq!((cookie.secure(), cookie.http_only()), (Some(true), Some(true)), "{cookie:?}");
    assert_eq!(format!("{:?}", cookie.same_site()), "Some(Strict)", "{cookie:?}");
    let visible = b.execute("return document.cookie", vec![]).await.unwrap();
    assert_eq!(visible, serde_json::json!(""), "the page's script cannot read the token");
    assert!(!b.source().await.unwrap().contains(&alice), "the token is not in the page");

    keyboard_only(&b, &admin).await;
    themes_and_widths(&b).await;

    b.find(Locator::Css("form[action='/logout'] button[type=submit]")).await.unwrap().click().await.unwrap();
    text_where(&b, "#login", "the login page after Log out", |s| s.contains("Log in")).await;
    assert!(b.get_all_cookies().await.unwrap().iter().all(|c| c.name() != liqo_dashboard::sessions::COOKIE), "the cookie is gone");
    b.client.clone().close().await.unwrap();
}

/// The element that has the focus: what it is called, and its outline (the focus ring).
async fn focused(b: &browser::Browser) -> (String, String) {
    let v = b
        .execute(
            "const e = document.activeElement; return [e.getAttribute('aria-label') || e.id || e.textContent.trim(), getComputedStyle(e).outlineStyle];",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(v).unwrap()
}

/// Keyboard only: Tab reaches the header's theme toggle and Connect, each stop with a
/// visible focus ring, and Enter does what a click does.
async fn keyboard_only(b: &browser::Browser, admin: &kube::Client) {
    use browser::Key;
    let fcs = Api::<ForeignCluster>::all(admin.clone());
    assert_ne!(fcs.get("peer-one").await.unwrap().spec.join, Some(true));
    let mut stops = Vec::new();
    let mut themed = false;
    for _ in 0..60 {
        b.active_element().await.unwrap().send_keys(&Key::Tab.to_string()).await.unwrap();
        let (name, outline) = focused(b).await;
        assert_ne!(outline, "none", "{}: {name} shows no focus ring", b.kind.name());
        stops.push(name.clone());
        if name == "theme" && !themed {
            b.active_element().await.unwrap().send_keys(&Key::Enter.to_string()).await.unwrap();
            let theme = b.execute("return document.documentElement.getAttribute('data-theme')", vec![]).await.unwrap();
            assert_eq!(theme, json!("dark"), "Enter on the toggle");
            themed = true;
        }
        if name == "Connect peer-one" {
            b.active_element().await.unwrap().send_keys(&Key::Enter.to_string()).await.unwrap();
            eventually("Connect pressed with Enter", || {
                let fcs = fcs.clone();
                async move { fcs.get("peer-one").await.ok().filter(|f| f.spec.join == Some(true)) }
            })
            .await;
            assert!(themed, "the toggle comes first, in the header: {stops:?}");
            return;
        }
    }
    panic!("{}: Tab never reached Connect: {stops:?}", b.kind.name());
}

/// The page in both themes, at a phone's width and a desktop's: screenshots the docs show,
/// and the page never wider than the window.
async fn themes_and_widths(b: &browser::Browser) {
    for (width, theme) in [(1440, "dark"), (390, "dark"), (390, "light"), (1440, "light")] {
        b.set_window_size(width, 1400).await.unwrap();
        b.execute("document.documentElement.setAttribute('data-theme', arguments[0])", vec![json!(theme)]).await.unwrap();
        text_where(b, "#available-section", "the peers after resizing", |s| s.contains("peer-one")).await;
        let wide = b.execute("return document.documentElement.scrollWidth <= window.innerWidth", vec![]).await.unwrap();
        assert_eq!(wide, json!(true), "{}: at {width} px the page scrolls sideways", b.kind.name());
        shot(b, &format!("09-home-{theme}-{width}")).await;
    }
    // A peer's page, dark at a phone's width; then back home.
    let home = b.current_url().await.unwrap();
    b.open(home.join("/peers/peer-one").unwrap().as_str()).await;
    b.set_window_size(390, 1400).await.unwrap();
    b.execute("document.documentElement.setAttribute('data-theme', 'dark')", vec![]).await.unwrap();
    text_where(b, "#peer-view", "the peer's page", |s| s.contains("Ours to them")).await;
    let wide = b.execute("return document.documentElement.scrollWidth <= window.innerWidth", vec![]).await.unwrap();
    assert_eq!(wide, json!(true), "{}: the peer's page scrolls sideways at 390 px", b.kind.name());
    shot(b, "09-peer-dark-390").await;
    b.set_window_size(1280, 1700).await.unwrap();
    b.open(home.as_str()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logging_in_with_chromium() {
    login_in(Kind::Chromium).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logging_in_with_firefox() {
    login_in(Kind::Firefox).await;
}

/// The `liqo-dashboard` binary: HTTPS with the certificate it was given, the login page, and
/// TokenReviews made with its own (KUBECONFIG) identity.
#[tokio::test]
async fn the_binary_serves_the_login_over_tls() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let (own, _, _) = users(&admin).await;
    let (_dashboard, addr, ca) = start_binary(&cp, &own).await;
    let healthy = liqo_testenv::https::request(addr, &ca, "GET", "/healthz", None).await;
    assert_eq!(healthy.status, 200);
    let login = liqo_testenv::https::request(addr, &ca, "GET", "/login", None).await;
    assert!(login.text().contains("Log in"), "{}", login.text());
    let mut conn = liqo_testenv::https::connect(addr, &ca).await;
    let refused =
        liqo_testenv::https::send(&mut conn, "POST", "/login", Some("application/x-www-form-urlencoded"), b"token=nope".to_vec()).await;
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert!(refused.text().contains("the API server refused this token"), "{}", refused.text());
}
