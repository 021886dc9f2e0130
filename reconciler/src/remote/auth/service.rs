//! The auth service: `GET /ids`, `POST /identity`, `GET /ca`, over HTTPS.
//!
//! `/identity` (protocol §3, §10) refuses at once what costs nothing to refuse: a caller over its
//! rate limit (429), a malformed body (400), an install missing what identities stand on (503),
//! more identities waiting unused than the cap (503). A caller that presents the current
//! token of the identity it asks for (`currentToken`, checked by a TokenReview) renews it.
//! Anyone else's token is checked against Secret `auth-token` (key `token`; an empty token only
//! while `authConfig.allowEmptyToken` is true), and the first of them takes the cluster ID:
//! ServiceAccount `remote-<clusterID>` in the peer's tenant namespace (made when missing) is
//! *created*, so a second caller finds it and is refused (409) while its holder's identities
//! last ([`crate::tenancy::binding`]). The RoleBinding of
//! [`crate::tenancy::access::peer_identity`] follows, then a token, in a kubeconfig for this
//! cluster's API server whose context names that namespace. `/ids` tells the protocol spoken.

use crate::cluster::addresses::Live;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use kube::runtime::reflector::Store;
use liqo_api::names::{
    ANNOTATION_EXPIRES_AT, ANNOTATION_HOLDER_KEY, ANNOTATION_ISSUED_AT, AUTH_TOKEN_SECRET, IDENTITY_IN_USE, IDENTITY_WAITING,
    LABEL_IDENTITY, peer_service_account, tenant_namespace,
};
use liqo_api::{ClusterConfigSpec, ForeignCluster};
use liqo_serve::{BodyBounds, bounded_body};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::rate::{Limiter, retry_after_seconds};
use super::wire::{ChallengeRequest, ChallengeResponse, ErrorBody, IdentityRequest, IdentityResponse, Ids, Proof, ProvenBy};
use crate::machinery::error::{Error, is_conflict};
use crate::tenancy::access::peer_identity;
use crate::tenancy::binding::{self, Claim, Holder};
use crate::tenancy::claims::Claims;
use crate::tenancy::install::InstallCheck;
use crate::tenancy::proof::{self, Challenges, ProofRefusal};
use crate::tenancy::waiting::{Reservation, Waiting};

/// Key of the token inside Secret `auth-token`.
pub const TOKEN_KEY: &str = "token";
/// Field manager of everything the auth service writes.
pub const FIELD_MANAGER: &str = "liqo-auth";

/// How peers reach this cluster's API server.
#[derive(Clone, Debug)]
pub struct ApiServer {
    /// URL a peer uses (not the in-cluster `kubernetes.default.svc`): fixed, or the one found
    /// at each use ([`crate::cluster::addresses`]).
    pub url: Live<String>,
    /// PEM of the CA that signed the API server's certificate.
    pub ca_pem: String,
}

impl ApiServer {
    /// The PEM (LF line endings, as Kubernetes writes `ca.crt`) of DER certificates, e.g. the
    /// roots of the kubeconfig or in-cluster config this process runs with.
    pub fn pem_of(der_certs: &[Vec<u8>]) -> String {
        let lf = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
        der_certs.iter().map(|d| pem::encode_config(&pem::Pem::new("CERTIFICATE", d.clone()), lf)).collect()
    }
}

pub struct AuthService {
    pub client: Client,
    pub namespace: String,
    pub cluster_id: watch::Receiver<Option<String>>,
    pub config: watch::Receiver<Option<ClusterConfigSpec>>,
    pub api_server: ApiServer,
    /// Lifetime requested for issued tokens (the API server may shorten it).
    pub token_lifetime: Duration,
    /// The per-source limit on `POST /identity`.
    pub limiter: Limiter,
    /// `POST /identity` answers, by result.
    pub outcomes: Family<IdentityLabels, Counter>,
    /// Who may be a cluster ID here (protocol §10).
    pub guard: IdentityGuard,
}

/// What the auth service keeps to bind cluster IDs to their first holder and to cap the
/// identities nobody uses (protocol §10; [`crate::tenancy`]).
#[derive(Clone)]
pub struct IdentityGuard {
    /// The identities issued and not yet used, with their cap.
    pub waiting: Arc<Waiting>,
    /// Claims on bound IDs refused, to be shown.
    pub claims: Arc<Claims>,
    /// The ForeignClusters, which tell an identity in use.
    pub foreign: Store<ForeignCluster>,
    /// What a caller over the cap is told to wait.
    pub retry_after: Duration,
    /// Whether what identities stand on is installed (none: not checked, as in unit tests).
    pub install: Option<Arc<InstallCheck>>,
    /// The challenges given to holders proving themselves by key, not yet answered.
    pub challenges: Arc<Challenges>,
}

impl IdentityGuard {
    /// A guard capping unused identities at `cap`, telling callers over it to come back after
    /// `retry_after` (the sweep's period).
    pub fn new(foreign: Store<ForeignCluster>, cap: usize, retry_after: Duration) -> Self {
        Self {
            waiting: Arc::new(Waiting::new(cap)),
            claims: Arc::default(),
            foreign,
            retry_after,
            install: None,
            challenges: Arc::default(),
        }
    }

    /// This guard, checking before each issue that what identities stand on is installed.
    pub fn with_install_check(mut self, check: Arc<InstallCheck>) -> Self {
        self.install = Some(check);
        self
    }

    /// A place among the identities waiting for `peer`'s, unless the cap is reached.
    fn reserve(&self, peer: &str) -> Option<Reservation> {
        self.waiting.reserve(peer, Timestamp::now(), |p| crate::tenancy::in_use_by_name(&self.foreign, p))
    }
}

/// What asking for an identity came to.
enum Issued {
    Identity(IdentityResponse),
    /// The ID is bound to another holder (until its identities expire, if known).
    Bound(Option<Timestamp>),
}

/// The largest `POST /identity` body read (a real one is under 200 bytes).
pub const MAX_IDENTITY_BODY: usize = 16 * 1024;
/// Time a client has to send the whole `POST /identity` body.
pub const IDENTITY_BODY_TIMEOUT: Duration = Duration::from_secs(10);

pub use crate::reporting::metrics::IdentityLabels;

/// Why a token was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum TokenRefusal {
    /// An empty token while empty tokens are not allowed.
    Empty,
    /// A token that is not the one in `auth-token`.
    Wrong,
}

/// Decide on a presented token. `stored` is the token of Secret `auth-token`, if any.
pub fn check_token(presented: &str, stored: Option<&str>, allow_empty: bool) -> Result<(), TokenRefusal> {
    if presented.is_empty() {
        return if allow_empty { Ok(()) } else { Err(TokenRefusal::Empty) };
    }
    match stored {
        // Comparing digests keeps the time taken independent of where the tokens differ.
        Some(s) if !s.is_empty() && Sha256::digest(s.as_bytes()) == Sha256::digest(presented.as_bytes()) => Ok(()),
        _ => Err(TokenRefusal::Wrong),
    }
}

/// A kubeconfig for `token` on the API server `api`.
pub fn kubeconfig(api: &ApiServer, cluster_name: &str, user: &str, namespace: &str, token: String) -> Result<String, Error> {
    use base64::Engine;
    let config = Kubeconfig {
        clusters: vec![NamedCluster {
            name: cluster_name.to_owned(),
            cluster: Some(Cluster {
                server: Some(api.url.get()),
                certificate_authority_data: Some(base64::engine::general_purpose::STANDARD.encode(&api.ca_pem)),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user.to_owned(),
            auth_info: Some(AuthInfo { token: Some(token.into()), ..Default::default() }),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: cluster_name.to_owned(),
            context: Some(Context {
                cluster: cluster_name.to_owned(),
                user: Some(user.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some(cluster_name.to_owned()),
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        ..Default::default()
    };
    serde_yaml::to_string(&config).map_err(|e| Error::Serialization(e.to_string()))
}

/// A fresh random token (256 bits, hex).
pub fn random_token() -> String {
    let a = uuid::Uuid::new_v4().simple().to_string();
    let b = uuid::Uuid::new_v4().simple().to_string();
    a + &b
}

/// Creates Secret `auth-token` with a random token when it does not exist.
pub async fn ensure_token_secret(client: &Client, namespace: &str) -> Result<(), Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = Secret {
        metadata: ObjectMeta { name: Some(AUTH_TOKEN_SECRET.into()), ..Default::default() },
        string_data: Some([(TOKEN_KEY.to_owned(), random_token())].into()),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(namespace, "created Secret {AUTH_TOKEN_SECRET} with a random token");
            Ok(())
        }
        Err(e) if is_conflict(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(ErrorBody { message: message.into() })).into_response()
}

impl AuthService {
    /// The routes; `POST /identity` reads at most [`MAX_IDENTITY_BODY`] bytes, for at most
    /// [`IDENTITY_BODY_TIMEOUT`]. Served by `liqo_serve::serve_https*` (the handlers need the
    /// client's address).
    pub fn router(self: Arc<Self>) -> Router {
        let bounds = BodyBounds { max_bytes: MAX_IDENTITY_BODY, timeout: IDENTITY_BODY_TIMEOUT };
        let identity = post(identity).layer(axum::middleware::from_fn_with_state(bounds, bounded_body));
        let challenge = post(challenge).layer(axum::middleware::from_fn_with_state(bounds, bounded_body));
        Router::new()
            .route("/ids", get(ids))
            .route("/ca", get(ca))
            .route("/identity", identity)
            .route("/identity/challenge", challenge)
            .with_state(self)
    }

    fn ids(&self) -> Option<Ids> {
        let cluster_id = self.cluster_id.borrow().clone()?;
        let name = self.config.borrow().as_ref().and_then(|c| c.discovery_config.cluster_name.clone());
        Some(Ids {
            cluster_name: name.filter(|n| !n.is_empty()).unwrap_or_else(|| cluster_id.clone()),
            cluster_id,
            guest_namespace: self.namespace.clone(),
            protocol_version: Some(liqo_api::names::PROTOCOL_VERSION),
            token_lifetime_seconds: Some(self.token_lifetime.as_secs()),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        })
    }

    async fn stored_token(&self) -> Result<Option<String>, Error> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = api.get_opt(AUTH_TOKEN_SECRET).await?;
        Ok(secret
            .and_then(|s| s.data)
            .and_then(|d| d.get(TOKEN_KEY).cloned())
            .and_then(|b| String::from_utf8(b.0).ok())
            .map(|s| s.trim().to_owned()))
    }

    /// Whether `token` is a valid token of `peer`'s identity here (a TokenReview).
    async fn proves(&self, peer: &str, token: &str) -> Result<bool, Error> {
        let review = TokenReview { spec: TokenReviewSpec { token: token.to_owned(), ..Default::default() }, ..Default::default() };
        let reviewed = Api::<TokenReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        let status = reviewed.status.unwrap_or_default();
        let want = format!("system:serviceaccount:{}:{}", tenant_namespace(peer), peer_service_account(peer));
        Ok(status.authenticated == Some(true) && status.user.and_then(|u| u.username).as_deref() == Some(want.as_str()))
    }

    /// Whether `proof` is `peer`'s holder key signing a challenge given here for it: the key
    /// recorded on its identity when it is. The challenge is used up either way.
    async fn proves_by_key(&self, peer: &str, own_id: &str, proof: &Proof) -> Result<Result<String, ProofRefusal>, Error> {
        if !self.guard.challenges.take(&proof.challenge, peer, std::time::Instant::now()) {
            return Ok(Err(ProofRefusal::UnknownChallenge));
        }
        let recorded = self.recorded_key(peer).await?;
        let signed = proof::message(own_id, peer, &proof.challenge);
        Ok(proof::verify(recorded.as_deref(), &signed, &proof.signature).map(|()| recorded.unwrap_or_default()))
    }

    /// The holder key recorded on `peer`'s identity here, if any.
    async fn recorded_key(&self, peer: &str) -> Result<Option<String>, Error> {
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &tenant_namespace(peer));
        let sa = sas.get_metadata_opt(&peer_service_account(peer)).await?;
        Ok(sa.and_then(|sa| sa.metadata.annotations?.get(ANNOTATION_HOLDER_KEY).cloned()))
    }

    /// Issues `peer` an identity: a renewal (the caller proved it holds the current one), or a
    /// first claim, which takes the ID only if nobody holds it ([`binding`]): the
    /// ServiceAccount is created, not applied, so of two first callers one wins.
    async fn issue(&self, peer: &str, own_id: &str, grant: &Grant) -> Result<Issued, Error> {
        let renewal = grant.renewal();
        // A first claim most likely comes from a peer new here: its namespace is made first.
        let namespace = if renewal {
            crate::tenancy::tenant::ensure(&self.client, peer, FIELD_MANAGER).await?
        } else {
            crate::tenancy::tenant::make(&self.client, peer, FIELD_MANAGER).await?
        };
        let issued = self.issue_in(peer, &namespace, own_id, grant).await;
        if issued.is_err() && !renewal {
            self.undo_namespace(peer, &namespace).await;
        }
        issued
    }

    /// A first claim that failed before its identity's ServiceAccount was made (an API error
    /// under load, a quota not yet in force) leaves a tenant namespace that no sweep looks at:
    /// it is retired at once, unless something of the peer stands in it, an identity of it
    /// exists there, or we join the peer ourselves.
    async fn undo_namespace(&self, peer: &str, namespace: &str) {
        if crate::tenancy::joining(&self.guard.foreign, peer) {
            return;
        }
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        match sas.get_metadata_opt(peer_identity(peer).service_account_name()).await {
            Ok(None) => {}
            // Its identity is there (the sweep's to retire), or it cannot be told now.
            _ => return,
        }
        // A claim of the same ID from another caller within the last minute keeps it.
        let since = Timestamp::now() - SignedDuration::from_mins(1);
        match crate::tenancy::tenant::retire(&self.client, peer, since).await {
            Ok(r) => tracing::info!(%peer, outcome = ?r, "an identity not issued: its tenant namespace looked at again"),
            Err(e) => {
                tracing::warn!(%peer, error = %e, cause = e.label(), "retiring the tenant namespace of an identity not issued failed")
            }
        }
    }

    /// [`AuthService::issue`] once `peer`'s tenant namespace is there.
    async fn issue_in(&self, peer: &str, namespace: &str, own_id: &str, grant: &Grant) -> Result<Issued, Error> {
        let renewal = grant.renewal();
        let access = peer_identity(peer);
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let now = Timestamp::now();
        let lifetime = SignedDuration::try_from(self.token_lifetime).unwrap_or(SignedDuration::MAX);
        // A renewal keeps the key recorded unless its holder sent one (its proof is its token).
        let holder_key = match (&grant.holder_key, renewal) {
            (None, true) => self.recorded_key(peer).await?,
            (key, _) => key.clone(),
        };
        let sa = identity_account(&access, now, now + lifetime, renewal, holder_key.as_deref());
        if renewal {
            crate::machinery::writes::apply(&sas, FIELD_MANAGER, &sa).await?;
        } else if let Some(until) = self.take(&sas, namespace, &sa, now).await? {
            return Ok(Issued::Bound(until));
        }
        crate::machinery::writes::apply(&Api::<RoleBinding>::namespaced(self.client.clone(), namespace), FIELD_MANAGER, &access.binding)
            .await?;
        let sa_name = access.service_account_name();
        let (token, granted) = crate::tenancy::grant::token_until(&self.client, namespace, sa_name, self.token_lifetime).await?;
        if let Some(granted) = granted.filter(|g| *g < now + lifetime - SignedDuration::from_secs(60)) {
            // The API server shortened it: the binding expires with what was granted.
            let body = serde_json::json!({"metadata": {"annotations": {ANNOTATION_EXPIRES_AT: granted.to_string()}}});
            sas.patch(sa_name, &PatchParams::default(), &Patch::Merge(body)).await?;
        }
        let user = format!("{namespace}-{sa_name}");
        Ok(Issued::Identity(IdentityResponse {
            kubeconfig: kubeconfig(&self.api_server, own_id, &user, namespace, token)?,
            namespace: namespace.to_owned(),
            cluster_id: own_id.to_owned(),
            holder_key_recorded: Some(holder_key.is_some()),
            proven_by: grant.proven_by,
        }))
    }

    /// Takes the ID for a first caller: creates its identity's ServiceAccount `sa`, or, when one
    /// exists, takes it over only if its holder's identities have all expired and no request of
    /// the peer stands. `Some(until)`: the ID is bound to another holder.
    async fn take(
        &self,
        sas: &Api<ServiceAccount>,
        namespace: &str,
        sa: &ServiceAccount,
        now: Timestamp,
    ) -> Result<Option<Option<Timestamp>>, Error> {
        let create = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match sas.create(&create, sa).await {
            Ok(_) => return Ok(None),
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e.into()),
        }
        let name = sa.metadata.name.as_deref().unwrap_or_default();
        let holder = sas.get_opt(name).await?.map(|existing| Holder::of(&existing.metadata));
        let claim = match binding::decide(holder.as_ref(), false, now) {
            Claim::Expired => binding::after_expiry(crate::tenancy::tenant::held(&self.client, namespace).await?.requests > 0),
            claim => claim,
        };
        match claim {
            Claim::Bound { until } => Ok(Some(until)),
            // Expired and unused, or deleted meanwhile: the caller's now.
            _ => {
                crate::machinery::writes::apply(sas, FIELD_MANAGER, sa).await?;
                Ok(None)
            }
        }
    }
}

/// The ServiceAccount of `access`'s identity, issued at `now` until `expires`: waiting to be
/// used, or in use when renewed (pure).
pub fn identity_account(
    access: &crate::tenancy::access::Access,
    now: Timestamp,
    expires: Timestamp,
    renewal: bool,
    holder_key: Option<&str>,
) -> ServiceAccount {
    let mut sa = access.service_account.clone();
    let state = if renewal { IDENTITY_IN_USE } else { IDENTITY_WAITING };
    sa.metadata.labels.get_or_insert_default().insert(LABEL_IDENTITY.to_owned(), state.to_owned());
    let mut annotations: std::collections::BTreeMap<String, String> =
        [(ANNOTATION_ISSUED_AT.to_owned(), now.to_string()), (ANNOTATION_EXPIRES_AT.to_owned(), expires.to_string())].into();
    if let Some(key) = holder_key {
        annotations.insert(ANNOTATION_HOLDER_KEY.to_owned(), key.to_owned());
    }
    sa.metadata.annotations = Some(annotations);
    sa
}

/// How an identity is given: a renewal (proven) or a first claim, with the holder key to record.
pub struct Grant {
    pub holder_key: Option<String>,
    /// What proved the caller the holder: a renewal. None: a first claim.
    pub proven_by: Option<ProvenBy>,
}

impl Grant {
    pub fn renewal(&self) -> bool {
        self.proven_by.is_some()
    }
}

async fn ids(State(s): State<Arc<AuthService>>) -> Response {
    match s.ids() {
        Some(ids) => Json(ids).into_response(),
        None => error(StatusCode::SERVICE_UNAVAILABLE, "the cluster ID is not known yet"),
    }
}

async fn ca(State(s): State<Arc<AuthService>>) -> Response {
    ([(header::CONTENT_TYPE, "application/x-pem-file")], s.api_server.ca_pem.clone()).into_response()
}

async fn identity(
    State(s): State<Arc<AuthService>>,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    body: Result<Json<IdentityRequest>, JsonRejection>,
) -> Response {
    // Answered to the end in a task of its own: a caller that hangs up mid-issue (a stranger's
    // client timing out on a loaded API server) must not stop it between the tenant namespace
    // and the identity's ServiceAccount, which would leave a namespace no sweep looks at.
    let answering = tokio::spawn(async move {
        let (result, response) = answer_identity(&s, from, body).await;
        s.outcomes.get_or_create(&IdentityLabels { result }).inc();
        response
    });
    match answering.await {
        Ok(response) => response,
        Err(e) => {
            tracing::error!(error = %e, "answering an identity request failed");
            error(StatusCode::INTERNAL_SERVER_ERROR, "answering the identity request failed")
        }
    }
}

/// `POST /identity/challenge`: a challenge for a holder to sign with its key ([`proof`]), under
/// the same per-source limit as `/identity`; 503 with `Retry-After` while too many are
/// outstanding.
async fn challenge(
    State(s): State<Arc<AuthService>>,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    body: Result<Json<ChallengeRequest>, JsonRejection>,
) -> Response {
    let (result, response) = answer_challenge(&s, from, body);
    s.outcomes.get_or_create(&IdentityLabels { result }).inc();
    response
}

/// A request to `/identity` or `/identity/challenge` past what costs nothing to refuse: the
/// per-source rate limit first (a refused caller costs no API request), then the body and the
/// cluster ID it names (`id_of`). Else the refusal, with its metric label.
#[allow(clippy::result_large_err)] // returned at once by each caller, as large as any answer
fn admitted<T>(
    s: &AuthService,
    from: SocketAddr,
    body: Result<Json<T>, JsonRejection>,
    id_of: impl Fn(&T) -> &str,
) -> Result<T, (&'static str, Response)> {
    if let Err(wait) = s.limiter.take(from.ip(), std::time::Instant::now()) {
        tracing::info!(source = %from.ip(), "identity refused: too many requests from this source");
        let seconds = retry_after_seconds(wait);
        let mut r = error(StatusCode::TOO_MANY_REQUESTS, format!("too many identity requests from {}: retry in {seconds} s", from.ip()));
        r.headers_mut().insert(header::RETRY_AFTER, seconds.into());
        return Err(("rate_limited", r));
    }
    let req = match body {
        Ok(Json(r)) => r,
        Err(e) => return Err(("bad_request", error(StatusCode::BAD_REQUEST, format!("body: {}", e.body_text())))),
    };
    if let Err(e) = liqo_api::validate_cluster_id(id_of(&req)) {
        return Err(("bad_request", error(StatusCode::BAD_REQUEST, format!("clusterID: {e}"))));
    }
    Ok(req)
}

fn answer_challenge(s: &AuthService, from: SocketAddr, body: Result<Json<ChallengeRequest>, JsonRejection>) -> (&'static str, Response) {
    let req = match admitted(s, from, body, |r: &ChallengeRequest| r.cluster_id.as_str()) {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    let lifetime = s.guard.challenges.lifetime().as_secs();
    match s.guard.challenges.issue(&req.cluster_id, std::time::Instant::now()) {
        Some(challenge) => ("challenge", Json(ChallengeResponse { challenge, expires_in_seconds: lifetime }).into_response()),
        None => {
            tracing::info!(source = %from.ip(), "challenge refused: too many outstanding");
            let mut r = error(StatusCode::SERVICE_UNAVAILABLE, format!("too many challenges outstanding: ask again in {lifetime} s"));
            r.headers_mut().insert(header::RETRY_AFTER, lifetime.into());
            ("challenge_capped", r)
        }
    }
}

/// The answer to `POST /identity` from `from`, with its metric label. The rate limit comes
/// first: a refused caller costs no API request.
async fn answer_identity(
    s: &AuthService,
    from: SocketAddr,
    body: Result<Json<IdentityRequest>, JsonRejection>,
) -> (&'static str, Response) {
    let req = match admitted(s, from, body, |r: &IdentityRequest| r.cluster_id.as_str()) {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    let Some(own_id) = s.cluster_id.borrow().clone() else {
        return ("unavailable", error(StatusCode::SERVICE_UNAVAILABLE, "the cluster ID is not known yet"));
    };
    if req.cluster_id == own_id {
        return ("bad_request", error(StatusCode::BAD_REQUEST, "clusterID: that is this cluster's own ID"));
    }
    if let Some(check) = &s.guard.install {
        let missing = check.missing().await;
        if !missing.is_empty() {
            let message = crate::tenancy::install::message(&missing);
            tracing::warn!(peer = %req.cluster_id, missing = %message, "identity not issued: a part of the install is missing");
            return ("unavailable", error(StatusCode::SERVICE_UNAVAILABLE, format!("this cluster cannot issue identities yet: {message}")));
        }
    }
    if req.holder_key.as_deref().is_some_and(|k| proof::public_key(k).is_none()) {
        return ("bad_request", error(StatusCode::BAD_REQUEST, format!("holderKey: not {}<base64 of 32 bytes>", proof::KEY_PREFIX)));
    }
    let renewal = Grant { holder_key: req.holder_key.clone(), proven_by: Some(ProvenBy::Token) };
    if let Some(current) = req.current_token.as_deref().filter(|t| !t.is_empty()) {
        match s.proves(&req.cluster_id, current).await {
            Ok(true) => return answer_issue(s, &req.cluster_id, &own_id, from, &renewal, None).await,
            Ok(false) => {
                tracing::info!(peer = %req.cluster_id, source = %from.ip(), "a renewal's current token is not that identity's: taken as a first claim")
            }
            Err(e) => {
                tracing::warn!(peer = %req.cluster_id, error = %e, "reviewing a renewal's current token failed");
                return (
                    "unavailable",
                    error(StatusCode::SERVICE_UNAVAILABLE, format!("reviewing the current token failed: {}", e.label())),
                );
            }
        }
    }
    // A holder whose token proves nothing any more (the signing key replaced, a restore)
    // proves itself by its key; a proof refused is told with the 409 that follows.
    let mut refused = None;
    if let Some(proof) = &req.proof {
        match s.proves_by_key(&req.cluster_id, &own_id, proof).await {
            Ok(Ok(key)) => {
                let by_key = Grant { holder_key: Some(key), proven_by: Some(ProvenBy::Key) };
                return answer_issue(s, &req.cluster_id, &own_id, from, &by_key, None).await;
            }
            Ok(Err(why)) => {
                tracing::info!(peer = %req.cluster_id, source = %from.ip(), reason = why.label(), "a holder's proof by key refused: taken as a first claim");
                refused = Some(why);
            }
            Err(e) => {
                tracing::warn!(peer = %req.cluster_id, error = %e, "checking a holder's proof failed");
                return ("unavailable", error(StatusCode::SERVICE_UNAVAILABLE, format!("checking the proof failed: {}", e.label())));
            }
        }
    }
    let allow_empty = s.config.borrow().as_ref().is_none_or(|c| c.auth_config.allow_empty_token);
    let stored = match s.stored_token().await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "reading the auth token failed");
            return ("unavailable", error(StatusCode::SERVICE_UNAVAILABLE, format!("reading the auth token failed: {}", e.label())));
        }
    };
    match check_token(&req.token, stored.as_deref(), allow_empty) {
        Err(TokenRefusal::Empty) => {
            tracing::info!(peer = %req.cluster_id, "identity refused: empty token");
            let message = "an empty token is not accepted here (authConfig.allowEmptyToken is false)";
            return ("empty_token", error(StatusCode::FORBIDDEN, message));
        }
        Err(TokenRefusal::Wrong) => {
            tracing::info!(peer = %req.cluster_id, source = %from.ip(), "identity refused: wrong token");
            return ("wrong_token", error(StatusCode::FORBIDDEN, "wrong token"));
        }
        Ok(()) => {}
    }
    let Some(place) = s.guard.reserve(&req.cluster_id) else {
        tracing::info!(peer = %req.cluster_id, source = %from.ip(), cap = s.guard.waiting.cap, "identity refused: too many identities issued and not used yet");
        let seconds = s.guard.retry_after.as_secs().max(1);
        let message = format!("{} identities issued here are not used yet; ask again in {seconds} s", s.guard.waiting.cap);
        let mut r = error(StatusCode::SERVICE_UNAVAILABLE, message);
        r.headers_mut().insert(header::RETRY_AFTER, seconds.into());
        return ("capped", r);
    };
    let first = Grant { holder_key: req.holder_key.clone(), proven_by: None };
    let answer = answer_issue(s, &req.cluster_id, &own_id, from, &first, refused).await;
    if answer.0 != "issued" {
        s.guard.waiting.release(&req.cluster_id, place);
    }
    answer
}

/// The answer to an identity asked for `peer` by `from` (a renewal, or a first claim; `refused`:
/// the proof by key that came with it and was not taken).
async fn answer_issue(
    s: &AuthService,
    peer: &str,
    own_id: &str,
    from: SocketAddr,
    grant: &Grant,
    refused: Option<ProofRefusal>,
) -> (&'static str, Response) {
    let renewal = grant.renewal();
    match s.issue(peer, own_id, grant).await {
        Ok(Issued::Identity(answer)) => {
            tracing::info!(%peer, renewal, "identity issued");
            let result = if renewal { "renewed" } else { "issued" };
            (result, (StatusCode::CREATED, Json(answer)).into_response())
        }
        Ok(Issued::Bound(until)) => {
            tracing::warn!(%peer, source = %from.ip(), "identity refused: the cluster ID is bound to another holder");
            let mut message = binding::bound_message(peer, until);
            s.guard.claims.record(peer, from.ip(), "the cluster ID is bound to the cluster that first took it");
            if let Some(why) = refused {
                message = format!("the proof of holding it by key was refused ({}: {}); {message}", why.label(), why.message());
                return ("proof_refused", error(StatusCode::CONFLICT, message));
            }
            ("bound", error(StatusCode::CONFLICT, message))
        }
        Err(e @ Error::TenantTerminating(_)) => {
            tracing::info!(%peer, error = %e, "identity not issued yet: the tenant namespace is still going");
            ("unavailable", error(StatusCode::SERVICE_UNAVAILABLE, format!("{e}: ask again in a few seconds")))
        }
        Err(e) => {
            tracing::warn!(%peer, error = %e, "issuing an identity failed");
            ("error", error(StatusCode::INTERNAL_SERVER_ERROR, format!("issuing the identity failed: {}", e.label())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert_eq!(check_token("", Some("s3cret"), true), Ok(()));
        assert_eq!(check_token("", Some("s3cret"), false), Err(TokenRefusal::Empty));
        assert_eq!(check_token("s3cret", Some("s3cret"), false), Ok(()));
        assert_eq!(check_token("s3cre", Some("s3cret"), true), Err(TokenRefusal::Wrong));
        assert_eq!(check_token("x", None, true), Err(TokenRefusal::Wrong));
        assert_eq!(check_token("x", Some(""), true), Err(TokenRefusal::Wrong));
        let t = random_token();
        assert_eq!(t.len(), 64);
        assert_ne!(t, random_token());
    }

    #[test]
    fn api_server_ca_is_plain_lf_pem_of_every_root() {
        let pem = ApiServer::pem_of(&[vec![1, 2, 3], vec![4, 5]]);
        assert_eq!(
            pem,
            "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nBAU=\n-----END CERTIFICATE-----\n"
        );
        assert_eq!(ApiServer::pem_of(&[]), "");
    }

    #[test]
    fn kubeconfig_points_at_the_api_server_with_its_ca_and_the_token() {
        let api = ApiServer {
            url: "https://api.example.com:6443".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n".into(),
        };
        let text = kubeconfig(&api, "home", "liqo-remote-x", "liqo", "tok".into()).unwrap();
        let parsed = Kubeconfig::from_yaml(&text).unwrap();
        let cluster = parsed.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://api.example.com:6443"));
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.decode(cluster.certificate_authority_data.as_ref().unwrap()).unwrap();
        assert_eq!(ca, api.ca_pem.as_bytes());
        use secrecy::ExposeSecret;
        assert_eq!(parsed.auth_infos[0].auth_info.as_ref().unwrap().token.as_ref().unwrap().expose_secret(), "tok");
        assert_eq!(parsed.current_context.as_deref(), Some("home"));
        assert_eq!(parsed.contexts[0].context.as_ref().unwrap().namespace.as_deref(), Some("liqo"));
    }

    /// The Secrets' store keeps the CA of the kubeconfig we issue once, shared with the peer's
    /// pinned `ca.crt` of the same bytes, and gives the kubeconfig back byte for byte.
    #[test]
    fn the_kubeconfig_we_issue_shares_its_ca_in_the_secrets_store() {
        use liqo_api::secret_value::Value;
        // A CA of an RSA key's size: 1.2 KiB of PEM in lines of 64.
        let ca_pem = ApiServer::pem_of(&[(0..900u32).map(|i| (i * 7) as u8).collect()]);
        let api = ApiServer { url: "https://api.example.com:6443".into(), ca_pem };
        let text = kubeconfig(&api, "home", "liqo-remote-x", "liqo", "x".repeat(1100)).unwrap();
        let kept = Value::of(text.as_bytes());
        assert_eq!(kept.bytes(), text.as_bytes());
        let Value::Kubeconfig { head, ca, tail } = &kept else { panic!("our kubeconfig kept whole: {text}") };
        let Value::Pem(pinned) = Value::of(api.ca_pem.as_bytes()) else { panic!("the CA not shared") };
        assert!(std::sync::Arc::ptr_eq(ca, &pinned));
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(&api.ca_pem);
        assert_eq!(head.len() + encoded.len() + tail.len(), text.len(), "only the CA's base64 is left out of the text kept");
    }
}
