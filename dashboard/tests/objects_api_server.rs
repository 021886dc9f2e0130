//! Every Liqo object listed, viewed and edited against a real API server (KUBEBUILDER_ASSETS):
//! the dry run stores nothing and shows the diff, Apply stores it, and the API server's own
//! words come back at the field: a schema's refusal, a version edited since, and YAML
//! that does not read. Skips loudly without the assets.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kube::api::{Api, PostParams};
use liqo_api::{SearchDomain, SearchDomainSpec};
use liqo_dashboard::{Dashboard, Stores, router};
use liqo_testenv::{ControlPlane, eventually, install_liqo};
use tower::ServiceExt;

const HOST: &str = "127.0.0.1:8090";

async fn call(app: &Router, method: &str, path: &str, form: Option<String>) -> (StatusCode, String, String) {
    let mut r = Request::builder().method(method).uri(path).header(header::HOST, HOST);
    if form.is_some() {
        r = r.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded").header(header::ORIGIN, format!("http://{HOST}"));
    }
    let resp = app.clone().oneshot(r.body(form.map_or(Body::empty(), Body::from)).unwrap()).await.unwrap();
    let status = resp.status();
    let location = resp.headers().get(header::LOCATION).map(|l| l.to_str().unwrap().to_owned()).unwrap_or_default();
    let body = String::from_utf8_lossy(&resp.into_body().collect().await.unwrap().to_bytes()).into_owned();
    (status, location, body)
}

/// The value of hidden field `name` in `page`.
fn hidden(page: &str, name: &str) -> String {
    let at = page.find(&format!("name=\"{name}\" value=\"")).unwrap_or_else(|| panic!("no {name} in {page}"));
    let rest = &page[at + name.len() + 15..];
    rest[..rest.find('"').unwrap()].to_owned()
}

fn form(csrf: &str, version: &str, spec: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("csrf", csrf)
        .append_pair("version", version)
        .append_pair("spec", spec)
        .finish()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_is_checked_by_a_dry_run_shown_as_a_diff_and_applied() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let domains = Api::<SearchDomain>::all(admin.clone());
    let sd = SearchDomain::new("example.com", SearchDomainSpec { domain: "example.com".into(), autojoin: Some(false) });
    domains.create(&PostParams::default(), &sd).await.unwrap();
    let app = router(Dashboard::new(admin.clone(), "liqo", Stores::start(&admin, "liqo")));

    // Listed with its kind, then its page: the YAML and the editor with the spec.
    let list = eventually("the SearchDomain listed", || async {
        Some(call(&app, "GET", "/objects?kind=searchdomains", None).await.2).filter(|b| b.contains(">example.com</a>"))
    })
    .await;
    assert!(list.contains("SearchDomains (1)"), "{list}");
    let (status, _, page) = call(&app, "GET", "/objects/searchdomains/example.com", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("kind: SearchDomain") && !page.contains("managedFields"), "{page}");
    assert!(page.contains(">autojoin: false\ndomain: example.com\n</textarea>"), "{page}");
    let (csrf, version) = (hidden(&page, "csrf"), hidden(&page, "version"));

    // Check: the dry run's diff; nothing stored.
    let wanted = "autojoin: true\ndomain: example.com\n";
    let (status, _, diff) = call(&app, "POST", "/objects/searchdomains/example.com/check", Some(form(&csrf, &version, wanted))).await;
    assert_eq!(status, StatusCode::OK, "{diff}");
    assert!(diff.contains("<del>- autojoin: false</del>\n<ins>+ autojoin: true</ins>"), "{diff}");
    assert_eq!(domains.get("example.com").await.unwrap().spec.autojoin, Some(false), "a dry run stores nothing");

    // Refusals, in the API server's words at the field; nothing stored.
    let at_field = |body: &str| body[body.find("id=\"edit-spec-error\">").expect("an error at the field")..].to_owned();
    let (status, _, body) = call(
        &app,
        "POST",
        "/objects/searchdomains/example.com/check",
        Some(form(&csrf, &version, "autojoin: maybe\ndomain: example.com\n")),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(at_field(&body).contains("spec.autojoin") && body.contains(">autojoin: maybe\n"), "the schema's words, the text kept: {body}");
    let (_, _, body) = call(&app, "POST", "/objects/searchdomains/example.com/check", Some(form(&csrf, &version, "autojoin: [\n"))).await;
    assert!(at_field(&body).contains("line "), "{body}");
    let (_, _, body) = call(&app, "POST", "/objects/searchdomains/example.com/check", Some(form(&csrf, "1", wanted))).await;
    assert!(at_field(&body).contains("it changed since you opened it"), "{body}");
    let (status, _, _) = call(&app, "POST", "/objects/searchdomains/example.com/check", Some(form("forged", &version, wanted))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the CSRF token is checked");

    // Apply: stored, and back to its page.
    let (status, location, body) =
        call(&app, "POST", "/objects/searchdomains/example.com/apply", Some(form(&csrf, &version, wanted))).await;
    assert_eq!((status, location.as_str()), (StatusCode::SEE_OTHER, "/objects/searchdomains/example.com"), "{body}");
    let stored = domains.get("example.com").await.unwrap();
    assert_eq!(stored.spec.autojoin, Some(true));
    let managers: Vec<_> = stored.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|m| m.manager).collect();
    assert!(managers.contains(&"liqo-dashboard".to_owned()), "{managers:?}");

    // Not a Liqo kind, not an object: Not Found pages.
    assert_eq!(call(&app, "GET", "/objects/secrets/x", None).await.0, StatusCode::NOT_FOUND);
    assert_eq!(call(&app, "GET", "/objects/searchdomains/nothing", None).await.0, StatusCode::NOT_FOUND);
}
