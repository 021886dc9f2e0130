//! The HTTPS admission server and the plain-HTTP operations server (health, readiness, metrics).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::admission::{Endpoint, admit};
use crate::metrics::{Metrics, ReasonLabels};
use crate::state::ClusterView;

/// Largest body accepted. The API server caps objects at 3 MiB and a review carries the object
/// and the old object, so 16 MiB leaves ample room; anything larger is refused with 413.
pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;
/// Longest time a client may take to send its body (the API server waits at most 30 s).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handlers share.
pub struct App {
    pub view: Arc<dyn ClusterView>,
    pub metrics: Arc<Metrics>,
    pub max_body: usize,
    pub body_timeout: Duration,
}

impl App {
    pub fn new(view: Arc<dyn ClusterView>, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self { view, metrics, max_body: DEFAULT_MAX_BODY, body_timeout: BODY_TIMEOUT })
    }

    /// Counts and logs a refused request.
    fn count_refusal(&self, status: StatusCode, label: &'static str, message: &dyn std::fmt::Display) {
        self.metrics.bad_requests.get_or_create(&ReasonLabels { reason: label }).inc();
        tracing::debug!(%status, label, %message, "request refused");
    }

    fn refuse(&self, status: StatusCode, label: &'static str, message: String) -> Response {
        self.count_refusal(status, label, &message);
        (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message + "\n").into_response()
    }

    fn refuse_body(&self, refusal: &liqo_serve::BodyRefusal) -> Response {
        self.count_refusal(refusal.status(), refusal.label(), refusal);
        refusal.response()
    }
}

/// `POST /validate` and `POST /mutate`.
pub fn admission_router(app: Arc<App>) -> Router {
    Router::new()
        .route("/validate", post(|State(app): State<Arc<App>>, req: Request| handle(app, Endpoint::Validate, req)))
        .route("/mutate", post(|State(app): State<Arc<App>>, req: Request| handle(app, Endpoint::Mutate, req)))
        .with_state(app)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// The body, whole; an oversized one is drained before the 413 (see [`liqo_serve::read_bounded`]).
async fn read_body(app: &App, body: Body) -> Result<Bytes, Response> {
    let bounds = liqo_serve::BodyBounds { max_bytes: app.max_body, timeout: app.body_timeout };
    liqo_serve::read_bounded(body, bounds).await.map_err(|refusal| app.refuse_body(&refusal))
}

async fn handle(app: Arc<App>, endpoint: Endpoint, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    if !is_json(headers) {
        return app.refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, "content_type", "Content-Type must be application/json".into());
    }
    // Too large to be worth draining: refused before a byte of it is read.
    if let Some(len) = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        && len > app.max_body.saturating_add(liqo_serve::DRAIN_BEYOND)
    {
        return app.refuse_body(&liqo_serve::BodyRefusal::TooLarge { max_bytes: app.max_body });
    }
    let body = match read_body(&app, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let started = Instant::now();
    let decision = admit(endpoint, &body, app.view.as_ref());
    let elapsed = started.elapsed().as_secs_f64();
    match decision {
        Err(bad) => app.refuse(StatusCode::BAD_REQUEST, bad.label, bad.message),
        Ok(d) => {
            app.metrics.record_admission(endpoint, d.kind, d.operation, d.denied, elapsed);
            if let Some(reason) = d.denied {
                let msg = d.review.response.status.as_ref().map(|s| s.message.as_str()).unwrap_or("");
                if let Some(who) = &d.refused {
                    app.view.refused(who, msg);
                }
                tracing::info!(kind = d.kind, op = d.operation, uid = %d.review.response.uid, cause = reason.label(), message = msg, "denied");
            }
            // Sized for the usual answer, so encoding it does not grow the buffer.
            let mut json = Vec::with_capacity(256);
            serde_json::to_writer(&mut json, &d.review).expect("a review always serializes");
            ([(header::CONTENT_TYPE, "application/json")], json).into_response()
        }
    }
}

/// `/healthz` (the process runs), `/readyz` (stores synced), `/metrics`.
pub fn ops_router(app: Arc<App>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(|State(app): State<Arc<App>>| async move {
                if app.view.ready() { (StatusCode::OK, "ok\n") } else { (StatusCode::SERVICE_UNAVAILABLE, "stores not synced yet\n") }
            }),
        )
        .route(
            "/metrics",
            get(|State(app): State<Arc<App>>| async move {
                ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], app.metrics.encode())
            }),
        )
        .with_state(app)
}

pub use crate::tls::serve_https;
