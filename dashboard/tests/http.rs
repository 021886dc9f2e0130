//! Every route and action of the dashboard over HTTP (tower `oneshot`), its stores filled as a
//! watch would fill them and its API calls answered by a scripted API server: status codes,
//! security headers, CSRF and cross-origin refusal, refusals shown at their field, live events.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kube::Client;
use kube::runtime::watcher;
use liqo_dashboard::{Dashboard, Stores, router};
use serde_json::{Value, json};
use tower::ServiceExt;

/// What the scripted API server saw: method, path, body.
type Seen = Arc<Mutex<Vec<(String, String, Value)>>>;

/// An API server answering every call with `status` and `answer`.
fn api(status: u16, answer: Value) -> (Client, Seen) {
    let (service, mut handle) = tower_test::mock::pair::<Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let seen: Seen = Default::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let (method, path) = (req.method().to_string(), req.uri().path().to_owned());
            let body: Value = serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap_or(Value::Null);
            record.lock().unwrap().push((method, path, body));
            let out =
                http::Response::builder().status(status).body(kube::client::Body::from(serde_json::to_vec(&answer).unwrap())).unwrap();
            send.send_response(out);
        }
    });
    (Client::new(service, "default"), seen)
}

fn fc(name: &str, message: &str) -> liqo_api::ForeignCluster {
    serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": name},
        "spec": {"clusterIdentity": {"clusterID": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"}, "join": false, "discoveryType": "LAN"},
        "status": {"conditions": [{"type": "Joined", "status": "False", "reason": "Unjoined", "message": message, "lastTransitionTime": "2026-11-23T10:00:00Z"}]}
    }))
    .unwrap()
}

struct Page {
    dashboard: Arc<Dashboard>,
    seen: Seen,
    _writers: liqo_dashboard::stores::StoreWriters,
}

fn dashboard(status: u16, answer: Value) -> Page {
    let (client, seen) = api(status, answer);
    let (stores, mut w) = Stores::detached();
    w.foreign.apply_watcher_event(&watcher::Event::Apply(fc("beta", "<script>alert(1)</script>")));
    let pr: liqo_api::PeeringRequest = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest", "metadata": {"name": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"},
        "spec": {"clusterIdentity": {"clusterID": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"}}, "status": {"advertisementStatus": "Refused"}
    }))
    .unwrap();
    w.requests.apply_watcher_event(&watcher::Event::Apply(pr));
    let dashboard = Dashboard::new(client, "liqo", stores);
    Page { dashboard, seen, _writers: w }
}

async fn send(d: &Arc<Dashboard>, req: Request<Body>) -> (StatusCode, http::HeaderMap, String) {
    let resp = router(d.clone()).oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, String::from_utf8_lossy(&bytes).into_owned())
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).header(header::HOST, "127.0.0.1:8090").body(Body::empty()).unwrap()
}

fn post(path: &str, form: &str, origin: Option<&str>) -> Request<Body> {
    let mut r =
        Request::post(path).header(header::HOST, "127.0.0.1:8090").header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(o) = origin {
        r = r.header(header::ORIGIN, o);
    }
    r.body(Body::from(form.to_owned())).unwrap()
}

#[tokio::test]
async fn pages_are_served_from_the_stores_with_a_strict_policy() {
    let p = dashboard(200, json!({}));
    let (status, headers, body) = send(&p.dashboard, get("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("script-src 'self'"));
    assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
    assert!(body.contains("Available Peers") && body.contains(">beta</a>"), "{body}");
    assert!(!body.contains("<script>alert(1)"), "a peer's message is shown as text");
    // The search is the query string: what it does not select is not listed, but counted.
    let (status, _, body) = send(&p.dashboard, get("/?q=nobody&state=Joined&connected=2")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.contains(">beta</a>") && body.contains(" · 0 match the search</p>"), "{body}");
    let (status, _, _) = send(&p.dashboard, get("/?available=many")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a page is a number");
    let (status, _, body) = send(&p.dashboard, get("/peers/beta")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Peer beta") && body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(body.contains("9a596a4b-591c-4ac6-8fd6-80258b4b3bf9: our Advertisement Refused"), "the peer's request here, from the stores");
    let (status, _, body) = send(&p.dashboard, get("/peers/%3Cb%3Enobody")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("&lt;b&gt;nobody") && !body.contains("<b>nobody"));
    let (status, headers, body) = send(&p.dashboard, get("/app.js")).await;
    assert_eq!((status, headers[header::CONTENT_TYPE].to_str().unwrap()), (StatusCode::OK, "text/javascript; charset=utf-8"));
    assert!(body.contains("EventSource"));
    assert_eq!(send(&p.dashboard, get("/app.css")).await.0, StatusCode::OK);
    for icon in ["/favicon.svg", "/favicon.ico"] {
        let (status, headers, body) = send(&p.dashboard, get(icon)).await;
        assert_eq!((status, headers[header::CONTENT_TYPE].to_str().unwrap()), (StatusCode::OK, "image/svg+xml"), "{icon}");
        assert!(body.starts_with("<svg"), "{icon}");
    }
    assert!(p.seen.lock().unwrap().is_empty(), "a page view costs no API request");
}

#[tokio::test]
async fn actions_need_the_token_and_our_origin() {
    let p = dashboard(200, json!({}));
    let token = p.dashboard.csrf.clone();
    for (path, form) in [
        ("/actions/connect", "name=beta".to_owned()),
        ("/actions/disconnect", "name=beta".to_owned()),
        ("/actions/toggle", "field=enableDiscovery&on=false".to_owned()),
        ("/actions/domains", "domain=example.com".to_owned()),
        ("/actions/peers", "auth_url=https://10.0.0.2:30443".to_owned()),
    ] {
        let (status, _, _) = send(&p.dashboard, post(path, &form, None)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path} without a token");
        let (status, _, _) = send(&p.dashboard, post(path, &format!("{form}&csrf=wrong{}", &token[5..]), None)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path} with a wrong token");
        let (status, _, _) = send(&p.dashboard, post(path, &format!("{form}&csrf={token}"), Some("http://evil.example"))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path} from another origin");
    }
    // A browser says where a request comes from even when it sends no Origin.
    let mut cross = post("/actions/connect", &format!("name=beta&csrf={token}"), None);
    cross.headers_mut().insert("sec-fetch-site", "cross-site".parse().unwrap());
    assert_eq!(send(&p.dashboard, cross).await.0, StatusCode::FORBIDDEN, "a cross-site post");
    assert!(p.seen.lock().unwrap().is_empty(), "nothing refused reached the API server");

    // HTTP/2 carries the host as the URI's authority, with no Host header: still our origin.
    let h2 = |origin: &str| {
        Request::post("http://127.0.0.1:8090/actions/connect")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ORIGIN, origin)
            .body(Body::from(format!("name=beta&csrf={token}")))
            .unwrap()
    };
    assert_eq!(send(&p.dashboard, h2("http://evil.example")).await.0, StatusCode::FORBIDDEN, "HTTP/2 from another origin");
    assert_ne!(send(&p.dashboard, h2("http://127.0.0.1:8090")).await.0, StatusCode::FORBIDDEN, "HTTP/2 from our own page");
}

#[tokio::test]
async fn each_action_does_its_write() {
    let p = dashboard(200, json!({"apiVersion": "v1", "kind": "Status", "status": "Success"}));
    let t = p.dashboard.csrf.clone();
    let origin = Some("http://127.0.0.1:8090");
    let cases = [
        ("/actions/connect", format!("csrf={t}&name=beta"), "PATCH", "/apis/discovery.liqo.io/v1alpha1/foreignclusters/beta"),
        ("/actions/disconnect", format!("csrf={t}&name=beta"), "PATCH", "/apis/discovery.liqo.io/v1alpha1/foreignclusters/beta"),
        (
            "/actions/toggle",
            format!("csrf={t}&field=enableDiscovery&on=false"),
            "PATCH",
            "/apis/config.liqo.io/v1alpha1/clusterconfigs/liqo-configuration",
        ),
        (
            "/actions/domains",
            format!("csrf={t}&domain=example.com&autojoin=true"),
            "POST",
            "/apis/discovery.liqo.io/v1alpha1/searchdomains",
        ),
        (
            "/actions/peers",
            format!("csrf={t}&auth_url=https%3A%2F%2F10.0.0.2%3A30443&join=true"),
            "POST",
            "/apis/discovery.liqo.io/v1alpha1/foreignclusters",
        ),
        ("/actions/forget", format!("csrf={t}&name=beta"), "DELETE", "/apis/discovery.liqo.io/v1alpha1/foreignclusters/beta"),
    ];
    for (i, (path, form, method, api_path)) in cases.iter().enumerate() {
        let (status, headers, _) = send(&p.dashboard, post(path, form, origin)).await;
        // The mock answers a Status, which the typed client cannot read back as the object: the
        // write was sent, the answer is a refusal page; what matters here is the write.
        assert!(status == StatusCode::SEE_OTHER || status == StatusCode::UNPROCESSABLE_ENTITY, "{path}: {status} {headers:?}");
        let seen = p.seen.lock().unwrap()[i].clone();
        assert_eq!((seen.0.as_str(), seen.1.as_str()), (*method, *api_path), "{path}");
    }
    let seen = p.seen.lock().unwrap().clone();
    assert_eq!(seen[0].2, json!({"spec": {"join": true}}));
    assert_eq!(seen[1].2, json!({"spec": {"join": false}}));
    assert_eq!(seen[2].2, json!({"spec": {"discoveryConfig": {"enableDiscovery": false}}}));
    assert_eq!(seen[3].2["spec"], json!({"domain": "example.com", "autojoin": true}));
    assert_eq!(seen[4].2["spec"]["authUrl"], "https://10.0.0.2:30443");
    assert_eq!(seen[4].2["spec"]["join"], true);
    let (status, _, _) = send(&p.dashboard, post("/actions/toggle", &format!("csrf={t}&field=deleteAll&on=true"), origin)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "only the three switches");
}

#[tokio::test]
async fn a_success_goes_back_home_and_a_refusal_shows_at_its_field() {
    let beta = serde_json::to_value(fc("beta", "m")).unwrap();
    let p = dashboard(200, beta);
    let t = p.dashboard.csrf.clone();
    let (status, headers, _) = send(&p.dashboard, post("/actions/connect", &format!("csrf={t}&name=beta"), None)).await;
    assert_eq!((status, headers[header::LOCATION].to_str().unwrap()), (StatusCode::SEE_OTHER, "/"));

    let refusal = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400, "reason": "BadRequest",
        "message": "admission webhook \"foreignclusters.liqo.io\" denied the request: spec.clusterIdentity.clusterID: \"Not_An_ID\" is not a DNS-1123 label"});
    let p = dashboard(400, refusal);
    let t = p.dashboard.csrf.clone();
    let form = format!("csrf={t}&api_url=https%3A%2F%2F10.0.0.2%3A6443&cluster_id=Not_An_ID&name=x");
    let (status, _, body) = send(&p.dashboard, post("/actions/peers", &form, None)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let field = body.find("id=\"peer-cluster_id\"").unwrap();
    let error = body.find("id=\"peer-cluster_id-error\"").expect("the refusal at the cluster ID field");
    assert!(error > field && body[error..].contains("is not a DNS-1123 label"), "{body}");
}

fn event(name: &str, about: &str, reason: &str, minute: u32) -> k8s_openapi::api::events::v1::Event {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": format!("2026-11-26T10:{minute:02}:00.000000Z"),
        "regarding": {"kind": "ForeignCluster", "name": about},
        "type": "Normal", "reason": reason, "note": format!("{reason} at minute {minute}"),
        "reportingController": "liqo-reconciler", "reportingInstance": "r", "action": "Peering"
    }))
    .unwrap()
}

#[tokio::test]
async fn a_peers_page_lists_its_own_events_latest_first_at_most_twenty() {
    let mut p = dashboard(200, json!({}));
    for minute in 0..25 {
        let e = event(&format!("beta.{minute}"), "beta", &format!("R{minute}"), minute);
        p._writers.events.apply_watcher_event(&watcher::Event::Apply(e));
    }
    p._writers.events.apply_watcher_event(&watcher::Event::Apply(event("gamma.1", "gamma", "NotBetas", 59)));
    let (status, _, body) = send(&p.dashboard, get("/peers/beta")).await;
    assert_eq!(status, StatusCode::OK);
    let shown: Vec<usize> = (0..25).filter_map(|m| body.find(&format!("R{m} at minute {m}"))).collect();
    assert_eq!(shown.len(), 20, "the latest 20: {body}");
    assert!(!body.contains("R4 at minute 4") && body.contains("R5 at minute 5"), "the oldest five left out");
    assert!(body.find("R24 at").unwrap() < body.find("R5 at").unwrap(), "latest first");
    assert!(!body.contains("NotBetas"), "another peer's Event is not on this page");
    // Deleted (its TTL): gone from the page.
    p._writers.events.apply_watcher_event(&watcher::Event::Delete(event("beta.24", "beta", "R24", 24)));
    let (_, _, body) = send(&p.dashboard, get("/peers/beta")).await;
    assert!(!body.contains("R24 at") && body.contains("R4 at minute 4"), "{body}");
}

#[tokio::test]
async fn a_change_in_the_stores_reaches_the_live_channel() {
    let p = dashboard(200, json!({}));
    let resp = router(p.dashboard.clone()).oneshot(get("/events")).await.unwrap();
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = resp.into_body();
    p._writers.changed.send_modify(|n| *n += 1);
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), body.frame()).await.expect("an event").unwrap().unwrap();
    let text = String::from_utf8_lossy(frame.data_ref().unwrap()).into_owned();
    assert!(text.contains("event: change"), "{text}");
}

#[test]
fn only_loopback_unless_insisted() {
    use liqo_dashboard::server::check_address;
    assert!(check_address("127.0.0.1:8090".parse().unwrap(), false).is_ok());
    assert!(check_address("[::1]:8090".parse().unwrap(), false).is_ok());
    assert!(check_address("0.0.0.0:8090".parse().unwrap(), false).unwrap_err().contains("--insecure-listen-anywhere"));
    assert!(check_address("0.0.0.0:8090".parse().unwrap(), true).is_ok());
}

/// A peer's page is found by its ForeignCluster's name, by its cluster ID, and by the name a
/// user gave it (`kubectl liqo peer URL --name N` on a ForeignCluster discovery made first).
#[tokio::test]
async fn a_peers_page_is_found_by_the_name_given_and_its_cluster_id() {
    let p = dashboard(200, json!({}));
    let mut named = fc("9a596a4b-591c-4ac6-8fd6-80258b4b3bf9", "joined");
    named.metadata.labels = Some([("discovery.liqo.io/peer-name".to_owned(), "node-b".to_owned())].into());
    named.spec.cluster_identity.as_mut().unwrap().cluster_id = "1f3c0bd4-8a0e-4b7e-9a57-4e5a2c2d9c11".into();
    let (stores, mut w) = Stores::detached();
    w.foreign.apply_watcher_event(&watcher::Event::Apply(named));
    let d = Dashboard::new(p.dashboard.client.clone(), "liqo", stores);
    for path in ["/peers/node-b", "/peers/1f3c0bd4-8a0e-4b7e-9a57-4e5a2c2d9c11", "/peers/9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"] {
        let (status, _, body) = send(&d, get(path)).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(body.contains("Peer 9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"), "{path}: the ForeignCluster's own page");
    }
    assert_eq!(send(&d, get("/peers/node-c")).await.0, StatusCode::NOT_FOUND);
}
