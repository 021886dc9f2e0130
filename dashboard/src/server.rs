//! The HTTP server: the pages (from the shared stores), the live channel (server-sent events),
//! the embedded assets, and the actions — each a POST carrying the CSRF token, refused from
//! another origin, done with the user's credentials. Served on loopback unless asked otherwise.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, FromRequestParts, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::Stream;
use serde::Deserialize;

use crate::actions::{self, NewDomain, NewPeer, Refused};
pub use crate::dashboard::Dashboard;
use crate::edit::{self, Edit};
use crate::html;
use crate::model;
use crate::object_pages::{self, ListView};
use crate::objects::Kind;
use crate::sessions::{self, Sessions};

/// The page's policy: our own script and style only, no frames, forms to ourselves.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn secure(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // Not `no-referrer`: with it, browsers send `Origin: null` on our own form posts.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn html_page(status: StatusCode, body: String) -> Response {
    secure((status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response())
}

/// Where a form post comes from, as the browser says: `Origin`, `Sec-Fetch-Site` (which pages
/// cannot forge), and the host it was sent to (`Host` in HTTP/1.1, `:authority` in HTTP/2).
pub struct Sender {
    origin: Option<String>,
    fetch_site: Option<String>,
    host: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Sender {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        let header = |name| parts.headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok()).map(str::to_owned);
        let host = header(header::HOST.as_str()).or_else(|| parts.uri.authority().map(|a| a.to_string()));
        Ok(Sender { origin: header(header::ORIGIN.as_str()), fetch_site: header("sec-fetch-site"), host })
    }
}

impl Sender {
    /// The request comes from a page of ours (by `Origin`, else by `Sec-Fetch-Site`). Alone, it
    /// guards the login form, which no session's token protects yet.
    fn same_origin(&self, scheme: &str) -> bool {
        let fetch_site = self.fetch_site.as_deref();
        match (self.origin.as_deref(), self.host.as_deref()) {
            (Some("null") | None, _) => fetch_site.is_none_or(|s| s == "same-origin" || s == "none"),
            (Some(origin), Some(host)) => origin == format!("{scheme}://{host}") && fetch_site.is_none_or(|s| s == "same-origin"),
            (Some(_), None) => false,
        }
    }

    /// The request comes from a page of `d`'s: the right token, and no other origin.
    fn genuine(&self, d: &Dashboard, token: &str) -> bool {
        self.same_origin(d.scheme) && same_token(token, &d.csrf)
    }
}

/// `token` is `csrf`, compared in constant time.
fn same_token(token: &str, csrf: &str) -> bool {
    !token.is_empty() && token.len() == csrf.len() && token.bytes().zip(csrf.bytes()).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn forbidden() -> Response {
    secure((StatusCode::FORBIDDEN, "refused: this form did not come from this dashboard (CSRF)\n").into_response())
}

/// The tab's icon: two peers, linked (what asks `/favicon.ico` gets it too).
async fn favicon() -> Response {
    secure(([(header::CONTENT_TYPE, "image/svg+xml")], include_str!("../assets/favicon.svg")).into_response())
}

/// A page about peer `name`, or Not Found when there is none the user may see.
fn peer_page(page: Option<String>, name: &str) -> Response {
    match page {
        Some(page) => html_page(StatusCode::OK, page),
        None => html_page(StatusCode::NOT_FOUND, html::no_peer(name)),
    }
}

#[derive(Deserialize)]
struct InNamespace {
    namespace: Option<String>,
}

/// An object's page, or Not Found (no such kind, no such object, or not one the user may see).
async fn object(Viewer(d): Viewer, Path((kind, name)): Path<(String, String)>, Query(at): Query<InNamespace>) -> Response {
    match Kind::from_plural(&kind).and_then(|k| d.object(k, &name, at.namespace.as_deref(), None, None)) {
        Some(page) => html_page(StatusCode::OK, page),
        None => html_page(StatusCode::NOT_FOUND, html::no_object(&kind, &name)),
    }
}

/// The object's page again, the person's spec in the editor and the refusal at it.
fn refused_edit(d: &Dashboard, kind: Kind, name: &str, edit: &Edit, e: &Refused) -> Response {
    match d.object(kind, name, None, Some((&edit.spec, &edit.version)), Some(e)) {
        Some(page) => html_page(StatusCode::UNPROCESSABLE_ENTITY, page),
        None => html_page(StatusCode::NOT_FOUND, html::no_object(kind.plural(), name)),
    }
}

/// Check: the dry run, and what would change.
async fn check_edit(Viewer(d): Viewer, from: Sender, Path((kind, name)): Path<(String, String)>, Form(f): Form<Edit>) -> Response {
    if !from.genuine(&d, &f.csrf) {
        return forbidden();
    }
    let Some(kind) = Kind::from_plural(&kind) else { return html_page(StatusCode::NOT_FOUND, html::no_object(&kind, &name)) };
    match edit::check(&d.client, kind, None, &name, &f).await {
        Ok(c) => html_page(StatusCode::OK, d.framed(object_pages::checked(kind, &name, &f.spec, &f.version, &c, &d.csrf))),
        Err(e) => refused_edit(&d, kind, &name, &f, &e),
    }
}

/// Apply: the same spec, at the same version, for real; then the object's page.
async fn apply_edit(Viewer(d): Viewer, from: Sender, Path((kind, name)): Path<(String, String)>, Form(f): Form<Edit>) -> Response {
    if !from.genuine(&d, &f.csrf) {
        return forbidden();
    }
    let Some(kind) = Kind::from_plural(&kind) else { return html_page(StatusCode::NOT_FOUND, html::no_object(&kind, &name)) };
    match edit::apply(&d.client, kind, None, &name, &f).await {
        Ok(()) => secure(Redirect::to(&format!("/objects/{}/{}", kind.plural(), html::urlencode(&name))).into_response()),
        Err(e) => refused_edit(&d, kind, &name, &f, &e),
    }
}

/// After an action: back home, or the home view with the refusal at its form.
fn outcome(d: &Dashboard, result: Result<(), Refused>) -> Response {
    match result {
        Ok(()) => secure(Redirect::to("/").into_response()),
        Err(e) => html_page(StatusCode::UNPROCESSABLE_ENTITY, d.home(model::View::default(), Some(&e))),
    }
}

#[derive(Deserialize)]
struct NamedForm {
    #[serde(default)]
    csrf: String,
    name: String,
}

#[derive(Deserialize)]
struct ToggleForm {
    #[serde(default)]
    csrf: String,
    field: String,
    on: bool,
}

async fn connect(Viewer(d): Viewer, from: Sender, Form(f): Form<NamedForm>) -> Response {
    if !from.genuine(&d, &f.csrf) {
        return forbidden();
    }
    outcome(&d, actions::set_join(&d.client, &f.name, true).await)
}

async fn disconnect(Viewer(d): Viewer, from: Sender, Form(f): Form<NamedForm>) -> Response {
    if !from.genuine(&d, &f.csrf) {
        return forbidden();
    }
    outcome(&d, actions::set_join(&d.client, &f.name, false).await)
}

async fn forget(Viewer(d): Viewer, from: Sender, Form(f): Form<NamedForm>) -> Response {
    if !from.genuine(&d, &f.csrf) {
        return forbidden();
    }
    outcome(&d, actions::forget(&d.client, &f.name).await)
}

async fn toggle(Viewer(d): Viewer, from: Sender, Form(f): Form<ToggleForm>) -> Response {
    if !from.genuine(&d, &f.csrf) {
        return forbidden();
    }
    match actions::toggle_field(&f.field) {
        Some(field) => outcome(&d, actions::toggle(&d.client, field, f.on).await),
        None => secure((StatusCode::BAD_REQUEST, "unknown switch\n").into_response()),
    }
}

async fn add_domain(Viewer(d): Viewer, from: Sender, Form(f): Form<NewDomain>) -> Response {
    if !from.genuine(&d, &f.csrf) {
        return forbidden();
    }
    outcome(&d, actions::add_domain(&d.client, &f).await)
}

async fn add_peer(Viewer(d): Viewer, from: Sender, Form(f): Form<NewPeer>) -> Response {
    if !from.genuine(&d, &f.csrf) {
        return forbidden();
    }
    outcome(&d, actions::add_peer(&d.client, &f).await)
}

/// The live channel: a `change` event whenever a store changes. The stream holds its
/// dashboard, so an open page keeps its user's watches alive.
fn changes(d: Arc<Dashboard>) -> impl Stream<Item = Result<Event, std::convert::Infallible>> + use<> {
    use futures::StreamExt;
    tokio_stream::wrappers::WatchStream::from_changes(d.stores.changes.clone()).map(move |n| {
        let _open = &d;
        Ok(Event::default().event("change").data(n.to_string()))
    })
}

/// Whose dashboard a request sees.
pub enum Access {
    /// `kubectl liqo dashboard`: one user, the kubeconfig's.
    Local(Arc<Dashboard>),
    /// The in-cluster form: the user whose token the request's cookie holds.
    PerUser(Arc<Sessions>),
}

/// The dashboard of the user making the request (in-cluster: from the token in the cookie;
/// without a valid one, the request is sent to the login page).
pub struct Viewer(pub Arc<Dashboard>);

impl FromRequestParts<Arc<Access>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, access: &Arc<Access>) -> Result<Self, Response> {
        match &**access {
            Access::Local(d) => Ok(Viewer(d.clone())),
            Access::PerUser(sessions) => {
                let Some(token) = sessions::token_in(&parts.headers) else { return Err(to_login()) };
                sessions.dashboard_for(token).await.map(Viewer).map_err(|e| {
                    tracing::info!(error = %e, "a dashboard session ended");
                    let mut r = to_login();
                    r.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_str(&sessions::clear_cookie()).expect("ASCII"));
                    r
                })
            }
        }
    }
}

fn to_login() -> Response {
    secure(Redirect::to("/login").into_response())
}

fn routes(access: Arc<Access>) -> Router {
    Router::new()
        .route("/", get(|Viewer(d): Viewer, Query(view): Query<model::View>| async move { html_page(StatusCode::OK, d.home(view, None)) }))
        .route("/peers/{name}", get(|Viewer(d): Viewer, Path(name): Path<String>| async move { peer_page(d.peer(&name), &name) }))
        .route(
            "/peers/{name}/disconnect",
            get(|Viewer(d): Viewer, Path(name): Path<String>| async move { peer_page(d.confirm_disconnect(&name), &name) }),
        )
        .route(
            "/events",
            get(|Viewer(d): Viewer| async move { secure(Sse::new(changes(d)).keep_alive(KeepAlive::default()).into_response()) }),
        )
        .route(
            "/app.js",
            get(|| async {
                secure(([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("../assets/app.js")).into_response())
            }),
        )
        .route("/favicon.svg", get(favicon))
        .route("/favicon.ico", get(favicon))
        .route(
            "/app.css",
            get(|| async {
                secure(([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../assets/app.css")).into_response())
            }),
        )
        .route("/objects", get(|Viewer(d): Viewer, Query(view): Query<ListView>| async move { html_page(StatusCode::OK, d.objects(view)) }))
        .route("/objects/{kind}/{name}", get(object))
        .route("/objects/{kind}/{name}/check", post(check_edit))
        .route("/objects/{kind}/{name}/apply", post(apply_edit))
        .route("/actions/connect", post(connect))
        .route("/actions/disconnect", post(disconnect))
        .route("/actions/forget", post(forget))
        .route(
            "/peers/{name}/forget",
            get(|Viewer(d): Viewer, Path(name): Path<String>| async move { peer_page(d.confirm_forget(&name), &name) }),
        )
        .route("/actions/toggle", post(toggle))
        .route("/actions/domains", post(add_domain))
        .route("/actions/peers", post(add_peer))
        .with_state(access)
}

/// The routes of `kubectl liqo dashboard`: one user, `d`.
pub fn router(d: Arc<Dashboard>) -> Router {
    routes(Arc::new(Access::Local(d)))
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

async fn login_page() -> Response {
    html_page(StatusCode::OK, html::login(None))
}

async fn login(State(sessions): State<Arc<Sessions>>, from: Sender, Form(f): Form<LoginForm>) -> Response {
    if !from.same_origin("https") {
        return forbidden();
    }
    let token = f.token.trim();
    match sessions.dashboard_for(token).await {
        Ok(_) => {
            let mut r = secure(Redirect::to("/").into_response());
            r.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_str(&sessions::set_cookie(token)).expect("checked token"));
            r
        }
        Err(e) => html_page(StatusCode::UNAUTHORIZED, html::login(Some(&e.to_string()))),
    }
}

async fn logout(State(sessions): State<Arc<Sessions>>, headers: HeaderMap, from: Sender, Form(f): Form<CsrfForm>) -> Response {
    let Some(token) = sessions::token_in(&headers) else { return to_login() };
    match sessions.dashboard_for(token).await {
        Ok(d) if from.genuine(&d, &f.csrf) => {}
        Ok(_) => return forbidden(),
        Err(_) => return to_login(),
    }
    sessions.logout(token);
    let mut r = to_login();
    r.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_str(&sessions::clear_cookie()).expect("ASCII"));
    r
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// The routes of the in-cluster form: every page and action as the user whose token the
/// cookie holds, plus the login and logout forms.
pub fn in_cluster_router(sessions: Arc<Sessions>) -> Router {
    let login = Router::new()
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(sessions.clone());
    routes(Arc::new(Access::PerUser(sessions))).merge(login)
}

/// Why an address is refused (pure): not loopback, unless the user insists.
pub fn check_address(addr: SocketAddr, anywhere: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || anywhere {
        Ok(())
    } else {
        Err(format!(
            "{addr} is not a loopback address: the dashboard acts with your credentials; pass --insecure-listen-anywhere to serve it there anyway"
        ))
    }
}
