//! The in-cluster form: each user logs in with a bearer token, kept in a `Secure; HttpOnly;
//! SameSite=Strict` cookie and never in a page. The dashboard's own ServiceAccount reviews
//! tokens (is this token valid?) and reads what the pages show, by one set of watches shared
//! by every user; what each user may see of it (a SelfSubjectAccessReview per kind, with the
//! user's token, at login and every minute; nothing until answered) and every action are the
//! user's own, so RBAC decides what each user sees and does. A user's session (its permission
//! checks) ends when the user has been away for [`IDLE`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use kube::config::AuthInfo;
use kube::{Client, Config};
use sha2::{Digest, Sha256};

use crate::dashboard::Dashboard;
use crate::stores::Stores;

/// What the dashboard calls itself to the API server (`User-Agent`) on its users' behalf, and so
/// the field manager of their writes through it.
pub const USER_AGENT: &str = concat!("liqo-dashboard/", env!("CARGO_PKG_VERSION"));

/// The cookie that holds the user's token.
pub const COOKIE: &str = "liqo-dashboard-token";
/// How long a session's watches live without a page view or an open page.
pub const IDLE: Duration = Duration::from_secs(15 * 60);
/// How often a token in use is reviewed again (a revoked token ends its session).
pub const REVIEW_EVERY: Duration = Duration::from_secs(5 * 60);
/// How long the browser keeps the cookie.
pub const COOKIE_MAX_AGE: Duration = Duration::from_secs(8 * 3600);

/// Why a token does not open a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginError {
    /// Empty, too long, or with characters a cookie cannot hold.
    Malformed(&'static str),
    /// The API server does not know the token.
    NotAuthenticated(String),
    /// The TokenReview itself failed.
    Review(String),
}

impl std::fmt::Display for LoginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "this is not a bearer token: {why}"),
            Self::NotAuthenticated(why) => write!(f, "the API server refused this token: {why}"),
            Self::Review(why) => write!(f, "the token could not be checked (TokenReview failed): {why}"),
        }
    }
}

/// A token that can be a cookie's value (pure): 1–8 KiB of visible ASCII, no `;`, `,`, `"` or `\`.
pub fn check_token(token: &str) -> Result<(), LoginError> {
    if token.is_empty() {
        return Err(LoginError::Malformed("it is empty"));
    }
    if token.len() > 8192 {
        return Err(LoginError::Malformed("it is longer than 8 KiB"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic() && !matches!(b, b';' | b',' | b'"' | b'\\')) {
        return Err(LoginError::Malformed("it holds spaces or characters a cookie cannot carry"));
    }
    Ok(())
}

/// The token in the request's `Cookie` headers, if any (pure).
pub fn token_in(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(name, value)| (name == COOKIE && !value.is_empty()).then_some(value))
}

/// The `Set-Cookie` value that stores `token` (pure).
pub fn set_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; Path=/; Max-Age={}; Secure; HttpOnly; SameSite=Strict", COOKIE_MAX_AGE.as_secs())
}

/// The `Set-Cookie` value that removes the token.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Strict")
}

struct Session {
    dashboard: Arc<Dashboard>,
    last_used: Instant,
    reviewed: Instant,
}

/// The open sessions, by the SHA-256 of their token.
pub struct Sessions {
    /// The dashboard's own client: it creates TokenReviews and keeps the shared watches.
    reviewer: Client,
    /// The watches every user's pages read (started with the dashboard's own client).
    shared: Stores,
    /// How to reach the API server; a user's client is this with the user's token.
    base: Config,
    namespace: String,
    open: Mutex<HashMap<[u8; 32], Session>>,
}

impl Sessions {
    /// Sessions over one set of watches, started now with `reviewer` (the dashboard's own
    /// identity) for Liqo namespace `namespace`.
    pub fn new(reviewer: Client, mut base: Config, namespace: &str) -> Arc<Self> {
        // Each user's writes are recorded as the dashboard's (their field manager), their audit
        // as the user's: the API server takes a write's manager from its User-Agent.
        base.headers.push((axum::http::header::USER_AGENT, axum::http::HeaderValue::from_static(USER_AGENT)));
        let shared = Stores::start(&reviewer, namespace);
        Arc::new(Self { reviewer, base, shared, namespace: namespace.to_owned(), open: Mutex::default() })
    }

    /// The dashboard of the user holding `token`: the open one, or a new one once the API
    /// server has confirmed the token.
    pub async fn dashboard_for(&self, token: &str) -> Result<Arc<Dashboard>, LoginError> {
        check_token(token)?;
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(s) = self.lock().get_mut(&key).filter(|s| now.duration_since(s.reviewed) < REVIEW_EVERY) {
            s.last_used = now;
            return Ok(s.dashboard.clone());
        }
        if let Err(e) = self.review(token).await {
            self.lock().remove(&key);
            return Err(e);
        }
        if let Some(s) = self.lock().get_mut(&key) {
            (s.last_used, s.reviewed) = (now, now);
            return Ok(s.dashboard.clone());
        }
        let dashboard = self.start(token).await.map_err(LoginError::Review)?;
        let mut open = self.lock();
        let session = open.entry(key).or_insert(Session { dashboard, last_used: now, reviewed: now });
        Ok(session.dashboard.clone())
    }

    /// Ends the session of `token` (its watches stop once no page holds them).
    pub fn logout(&self, token: &str) {
        self.lock().remove(&<[u8; 32]>::from(Sha256::digest(token.as_bytes())));
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the sessions unused for [`IDLE`] whose pages are all closed (an open page holds
    /// its dashboard through its live channel).
    pub fn sweep(&self, now: Instant) {
        self.lock().retain(|_, s| now.duration_since(s.last_used) < IDLE || Arc::strong_count(&s.dashboard) > 1);
    }

    /// Sweeps every minute, until the returned task is aborted.
    pub fn sweep_every_minute(self: &Arc<Self>) -> tokio::task::AbortHandle {
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                let Some(this) = this.upgrade() else { return };
                this.sweep(Instant::now());
            }
        })
        .abort_handle()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn review(&self, token: &str) -> Result<(), LoginError> {
        let review = TokenReview { spec: TokenReviewSpec { token: token.to_owned(), ..Default::default() }, ..Default::default() };
        let answer = Api::<TokenReview>::all(self.reviewer.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| LoginError::Review(e.to_string()))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated == Some(true) {
            Ok(())
        } else {
            Err(LoginError::NotAuthenticated(status.error.filter(|e| !e.is_empty()).unwrap_or_else(|| "not authenticated".into())))
        }
    }

    /// A user's dashboard over the shared watches: what it shows, its permission checks and
    /// its actions with the user's token. Shows nothing until the first checks have answered.
    async fn start(&self, token: &str) -> Result<Arc<Dashboard>, String> {
        let mut config = self.base.clone();
        config.auth_info = AuthInfo { token: Some(token.to_owned().into()), ..AuthInfo::default() };
        let client = Client::try_from(config).map_err(|e| e.to_string())?;
        let dashboard = Dashboard::for_user(client.clone(), &self.namespace, self.shared.clone());
        dashboard.permissions.set(crate::access::ask_user(&client, &self.namespace).await);
        dashboard.keep(dashboard.permissions.follow(client, Some(self.namespace.clone()), Duration::from_secs(60)));
        Ok(dashboard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue, header};

    #[test]
    fn the_token_is_read_from_its_cookie_only() {
        let mut h = HeaderMap::new();
        assert_eq!(token_in(&h), None);
        h.append(header::COOKIE, HeaderValue::from_static("theme=dark; liqo-dashboard-tokenx=no"));
        assert_eq!(token_in(&h), None);
        h.append(header::COOKIE, HeaderValue::from_static("a=b; liqo-dashboard-token=eyJ.abc-_.sig; c=d"));
        assert_eq!(token_in(&h), Some("eyJ.abc-_.sig"));
        let mut empty = HeaderMap::new();
        empty.append(header::COOKIE, HeaderValue::from_static("liqo-dashboard-token="));
        assert_eq!(token_in(&empty), None);
    }

    #[test]
    fn the_cookie_is_secure_http_only_and_same_site_strict() {
        let c = set_cookie("t0k");
        assert!(c.starts_with("liqo-dashboard-token=t0k;"));
        for attr in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/"] {
            assert!(c.split("; ").any(|a| a == attr), "{attr} in {c}");
        }
        assert!(clear_cookie().contains("Max-Age=0"));
    }

    #[tokio::test]
    async fn idle_sessions_end_unless_a_page_is_open() {
        let (mock, _handle) = tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        let client = Client::new(mock, "default");
        let sessions = Sessions::new(client.clone(), Config::new("https://127.0.0.1:1".parse().unwrap()), "liqo");
        let now = Instant::now();
        let long_ago = now - IDLE - Duration::from_secs(1);
        let session = |last_used| Session {
            dashboard: Dashboard::for_user(client.clone(), "liqo", Stores::detached().0),
            last_used,
            reviewed: last_used,
        };
        let (recent, idle, watched) = (session(now), session(long_ago), session(long_ago));
        let open_page = watched.dashboard.clone();
        sessions.lock().extend([([1; 32], recent), ([2; 32], idle), ([3; 32], watched)]);
        sessions.sweep(now);
        let mut left: Vec<_> = sessions.lock().keys().map(|k| k[0]).collect();
        left.sort();
        assert_eq!(left, [1, 3], "the idle one without an open page is gone");
        drop(open_page);
        sessions.sweep(now);
        assert_eq!(sessions.len(), 1);
    }

    #[test]
    fn a_token_must_fit_in_a_cookie() {
        assert!(check_token("eyJhbGciOi.J9.x-_").is_ok());
        for bad in ["", "a b", "a;b", "a,b", "a\"b", "a\\b", "é", &"x".repeat(8193)] {
            assert!(matches!(check_token(bad), Err(LoginError::Malformed(_))), "{bad:?}");
        }
    }
}
