//! Everything the controllers ask of another cluster, behind one trait so reconcile logic is
//! tested with scripted peers: its auth service (trust probe, `/ids`, `/ca`, `/identity`) and
//! a Kubernetes client for its API server built from an issued kubeconfig.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use liqo_api::TrustMode;

use crate::machinery::error::{Error, Result, Step};
use crate::remote::auth::client::{self, Verify};
use crate::remote::auth::wire::{ChallengeResponse, IdentityRequest, IdentityResponse, Ids};

/// How to reach a peer's API server: the kubeconfig it issued us, the API URL to use instead
/// of the kubeconfig's (a ForeignCluster's `spec.apiUrl`, so an address change keeps the
/// peering), and the CA pinned for it (when given, never the one inside the kubeconfig).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteAccess {
    pub kubeconfig: String,
    pub api_url: Option<String>,
    pub ca_pem: Option<String>,
}

/// How a peer's certificate is checked on a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Against our roots.
    Roots,
    /// Not at all (an untrusted CA the operator allowed, or discovery's read-only `/ids`).
    Anything,
    /// The leaf presented, or the CA that signed it, must have this SHA-256 (lowercase hex):
    /// paired by `spec.trustedCAFingerprint`.
    Fingerprint(String),
}

impl From<TrustMode> for Trust {
    fn from(mode: TrustMode) -> Self {
        match mode {
            TrustMode::Untrusted => Trust::Anything,
            TrustMode::Trusted | TrustMode::Unknown => Trust::Roots,
        }
    }
}

/// Calls to another cluster.
pub trait Peers: Send + Sync + 'static {
    /// Trusted when the auth service's certificate verifies against our roots, Untrusted when
    /// its issuer is unknown; any other failure is an error.
    fn probe_trust(&self, auth_url: &str) -> impl Future<Output = Result<TrustMode>> + Send;
    /// `GET /ids`, verified as `trust` says (Untrusted: not verified).
    fn ids(&self, auth_url: &str, trust: Trust) -> impl Future<Output = Result<Ids>> + Send;
    /// `GET /ca`: the peer's API server CA (PEM).
    fn ca(&self, auth_url: &str, trust: Trust) -> impl Future<Output = Result<String>> + Send;
    /// `POST /identity`.
    fn identity(&self, auth_url: &str, trust: Trust, request: &IdentityRequest) -> impl Future<Output = Result<IdentityResponse>> + Send;
    /// `POST /identity/challenge` (since 0.4). By default the peer has none (404).
    fn challenge(&self, auth_url: &str, trust: Trust, cluster_id: &str) -> impl Future<Output = Result<ChallengeResponse>> + Send {
        let _ = (trust, cluster_id);
        let message = format!("{auth_url}/identity/challenge: HTTP 404: not served");
        std::future::ready(Err(Error::Remote { step: Step::Identity, status: Some(404), message }))
    }
    /// A client for the peer's API server. Callers make one for each round that writes there and
    /// drop it after it: a client kept per peer held 23-31 KiB (its pool and buffer task), 300
    /// MiB at 10,000 peers. What is worth keeping is kept below it: the parsed configuration and
    /// the TLS session ([`crate::remote::sessions`]); the health check keeps its own connection
    /// ([`Peers::health_check`]). Measured by the fleet (docs/scaling.md).
    fn api_client(&self, access: &RemoteAccess) -> impl Future<Output = Result<Client>> + Send;
    /// [`Peers::api_client`] that waits up to `quiet` for the peer to say anything, so that it
    /// can hold a watch that long (a broadcaster's); its caller bounds its other calls itself.
    /// By default the same as [`Peers::api_client`].
    fn watching_client(&self, access: &RemoteAccess, quiet: Duration) -> impl Future<Output = Result<Client>> + Send {
        let _ = quiet;
        self.api_client(access)
    }
    /// [`Peers::api_client`] whose first connection is `stream`, already made to the API
    /// server ([`crate::machinery::connect_first`]). By default the stream is closed and the client
    /// makes its own.
    fn api_client_over(&self, access: &RemoteAccess, stream: tokio::net::TcpStream) -> impl Future<Output = Result<Client>> + Send {
        drop(stream);
        self.api_client(access)
    }
    /// The health check: `GET path` on the peer's API server for `access`, over `stream` when
    /// one was made first ([`crate::machinery::connect_first`]), the connection kept under the
    /// ForeignCluster `name` for its next check where it can be ([`crate::remote::kept`]). A
    /// client made for it comes back for the round's other calls. By default through
    /// [`Peers::api_client_over`] or [`Peers::api_client`], keeping nothing.
    fn health_check(
        &self,
        name: &str,
        access: &RemoteAccess,
        path: &str,
        stream: Option<tokio::net::TcpStream>,
    ) -> impl Future<Output = Result<(Answer, Option<Client>)>> + Send {
        let _ = name;
        async move {
            let client = match stream {
                Some(stream) => self.api_client_over(access, stream).await?,
                None => self.api_client(access).await?,
            };
            let answer = get_through(&client, path).await?;
            Ok((answer, Some(client)))
        }
    }
    /// The health check over the connection kept for `name`, when one is kept for `access`,
    /// within `wait`. By default none is.
    fn check_kept(&self, name: &str, access: &RemoteAccess, wait: Duration) -> impl Future<Output = Outcome> + Send {
        let _ = (name, access, wait);
        std::future::ready(Outcome::NotKept)
    }
    /// The health check of `name` (`GET path` for `access`) over `stream`, a connection just
    /// made first, within `wait`, outside the reconciles' turns, where the check can keep its
    /// connection ([`crate::remote::kept`]): a peer that took the connection and then went
    /// silent holds no turn, and a turn only reads the answer. By default not made here.
    fn check_first(
        &self,
        name: &str,
        access: &RemoteAccess,
        path: &str,
        stream: tokio::net::TcpStream,
        wait: Duration,
    ) -> impl Future<Output = FirstCheck> + Send {
        let _ = (name, access, path, wait);
        std::future::ready(FirstCheck::NotMade(stream))
    }
    /// Closes the connection kept for `name`, if any (unjoined, or deleted).
    fn forget_kept(&self, name: &str) {
        let _ = name;
    }
    /// The peer's API server CA from its `kube-public/cluster-info` (for peers known by
    /// `apiUrl` only), verified as `trust` says.
    fn cluster_info_ca(&self, api_url: &str, trust: Trust) -> impl Future<Output = Result<String>> + Send;
    /// The SHA-256 fingerprints (lowercase hex) the auth service at `auth_url` proves: its
    /// leaf's, then its CA's when it presents it (a copied certificate it did not prove
    /// is left out). What a user compares when pairing by fingerprint.
    fn presented_fingerprints(&self, auth_url: &str) -> impl Future<Output = Result<Vec<String>>> + Send {
        let url = auth_url.to_owned();
        async move { Err(Error::Tls(format!("{url}: reading fingerprints is not supported here"))) }
    }
}

/// The real network.
#[derive(Clone, Debug)]
pub struct Network {
    /// Roots that make a peer's auth service Trusted (the system's, or given by the operator).
    pub roots: Verify,
    /// Timeouts of calls to peers' API servers.
    pub api_timeout: Duration,
    /// What calls to peers' API servers keep from one to the next (their TLS sessions).
    pub sessions: Arc<Sessions>,
    /// The connections health checks keep ([`crate::remote::kept`]).
    pub kept: Arc<KeptConnections>,
}

impl Network {
    /// The network with `roots` and `api_timeout`, keeping sessions of its own.
    pub fn new(roots: Verify, api_timeout: Duration) -> Self {
        Self { roots, api_timeout, sessions: Arc::default(), kept: Arc::default() }
    }

    fn verify(&self, trust: Trust) -> Verify {
        match trust {
            Trust::Anything => Verify::Nothing,
            Trust::Fingerprint(fp) => Verify::Fingerprint(fp),
            Trust::Roots => self.roots.clone(),
        }
    }
}

impl Peers for Network {
    async fn probe_trust(&self, auth_url: &str) -> Result<TrustMode> {
        client::probe_trust(auth_url, &self.roots).await
    }
    async fn ids(&self, auth_url: &str, trust: Trust) -> Result<Ids> {
        client::ids(auth_url, &self.verify(trust)).await
    }
    async fn ca(&self, auth_url: &str, trust: Trust) -> Result<String> {
        client::ca(auth_url, &self.verify(trust)).await
    }
    async fn identity(&self, auth_url: &str, trust: Trust, request: &IdentityRequest) -> Result<IdentityResponse> {
        client::identity(auth_url, &self.verify(trust), request).await
    }
    async fn challenge(&self, auth_url: &str, trust: Trust, cluster_id: &str) -> Result<ChallengeResponse> {
        client::challenge(auth_url, &self.verify(trust), cluster_id).await
    }
    async fn cluster_info_ca(&self, api_url: &str, trust: Trust) -> Result<String> {
        client::cluster_info_ca(api_url, &self.verify(trust)).await
    }
    async fn presented_fingerprints(&self, auth_url: &str) -> Result<Vec<String>> {
        client::presented_fingerprints(auth_url).await
    }
    async fn api_client(&self, access: &RemoteAccess) -> Result<Client> {
        let p = self.prepared(access).await?;
        client_over(p.config, p.tls, None, p.tally)
    }
    async fn watching_client(&self, access: &RemoteAccess, quiet: Duration) -> Result<Client> {
        let mut p = self.prepared(access).await?;
        p.config.read_timeout = Some(quiet.max(self.api_timeout));
        client_over(p.config, p.tls, None, p.tally)
    }
    async fn api_client_over(&self, access: &RemoteAccess, stream: tokio::net::TcpStream) -> Result<Client> {
        let p = self.prepared(access).await?;
        client_over(p.config, p.tls, Some(stream), p.tally)
    }
    async fn health_check(
        &self,
        name: &str,
        access: &RemoteAccess,
        path: &str,
        stream: Option<tokio::net::TcpStream>,
    ) -> Result<(Answer, Option<Client>)> {
        let key = key_of(&access.kubeconfig, access.api_url.as_deref(), access.ca_pem.as_deref());
        let p = self.prepared_for(key, access).await?;
        let plan = self.keeping_plan(&p, path);
        let Some(plan) = plan else {
            let client = client_over(p.config, p.tls, stream, p.tally)?;
            let answer = get_through(&client, path).await?;
            return Ok((answer, Some(client)));
        };
        let address = format!("{}:{}", plan.host, plan.port);
        let stream = match stream {
            Some(stream) => stream,
            None => match tokio::time::timeout(self.api_timeout, tokio::net::TcpStream::connect((plan.host.as_str(), plan.port))).await {
                Ok(Ok(stream)) => stream,
                // The same words as a reset seen after the connect (and as connecting first).
                Ok(Err(e)) if crate::machinery::error::io_closed_before_a_word(&e) => {
                    return Err(Error::unreachable(Step::ApiServer, crate::machinery::error::CLOSED_BEFORE_A_WORD));
                }
                Ok(Err(e)) => return Err(Error::unreachable(Step::ApiServer, format!("connecting to {address}: {e}"))),
                Err(_) => {
                    return Err(Error::unreachable(
                        Step::ApiServer,
                        format!("connecting to {address}: no answer within {:?}", self.api_timeout),
                    ));
                }
            },
        };
        let answer = self.fresh_kept(name, key, path, plan, &p.tally, stream).await.map_err(|e| match e {
            FreshError::ClosedBeforeAWord => Error::unreachable(Step::ApiServer, crate::machinery::error::CLOSED_BEFORE_A_WORD),
            FreshError::Handshake(e) => Error::unreachable(Step::ApiServer, format!("TLS with {address}: {e}")),
            FreshError::Exchange(message) => Error::unreachable(Step::ApiServer, format!("{address}: {message}")),
        })?;
        Ok((answer, None))
    }
    async fn check_first(
        &self,
        name: &str,
        access: &RemoteAccess,
        path: &str,
        stream: tokio::net::TcpStream,
        wait: Duration,
    ) -> FirstCheck {
        let key = key_of(&access.kubeconfig, access.api_url.as_deref(), access.ca_pem.as_deref());
        let Ok(p) = self.prepared_for(key, access).await else { return FirstCheck::NotMade(stream) };
        let plan = self.keeping_plan(&p, path);
        let Some(plan) = plan else { return FirstCheck::NotMade(stream) };
        match tokio::time::timeout(wait, self.fresh_kept(name, key, path, plan, &p.tally, stream)).await {
            Ok(Ok(answer)) => FirstCheck::Answered { answer, key },
            Ok(Err(FreshError::ClosedBeforeAWord)) => FirstCheck::Closed,
            Ok(Err(_)) => FirstCheck::Failed,
            Err(_) => FirstCheck::Silent,
        }
    }
    async fn check_kept(&self, name: &str, access: &RemoteAccess, wait: Duration) -> Outcome {
        let key = key_of(&access.kubeconfig, access.api_url.as_deref(), access.ca_pem.as_deref());
        let Some(kept) = self.kept.take(name, &key, || self.sessions.full_next(&key)) else { return Outcome::NotKept };
        let Some(request) = self.sessions.request(&key, &access.kubeconfig, kept.path()) else { return Outcome::NotKept };
        self.kept.check(name, kept, request, wait).await
    }
    fn forget_kept(&self, name: &str) {
        self.kept.forget(name);
    }
}

/// `GET path` through `client`: the answer whatever its status, read whole (up to
/// [`crate::remote::client_over::MAX_API_ANSWER`]).
pub async fn get_through(client: &Client, path: &str) -> Result<Answer> {
    use http_body_util::BodyExt;
    let request = http::Request::get(path).body(kube::client::Body::empty()).map_err(|e| Error::invalid("path", e.to_string()))?;
    let response = client.send(request).await.map_err(|e| Error::remote_api(Step::ApiServer, e))?;
    let status = response.status().as_u16();
    let body = http_body_util::Limited::new(response.into_body(), crate::remote::client_over::MAX_API_ANSWER)
        .collect()
        .await
        .map_err(|e| Error::unreachable(Step::ApiServer, format!("reading the answer: {e}")))?
        .to_bytes();
    Ok(Answer { status, body: body.to_vec() })
}

impl Network {
    /// What a client for `access` is built from: kept from an earlier call with the same access,
    /// or made now and kept ([`crate::remote::sessions`]).
    async fn prepared(&self, access: &RemoteAccess) -> Result<Prepared> {
        let key = key_of(&access.kubeconfig, access.api_url.as_deref(), access.ca_pem.as_deref());
        self.prepared_for(key, access).await
    }

    /// The first check over a new connection ([`kept::fresh`]), kept for `name`'s next check when
    /// it can be.
    async fn fresh_kept(
        &self,
        name: &str,
        key: [u8; 32],
        path: &str,
        plan: crate::remote::sessions::CheckPlan,
        tally: &crate::remote::sessions::Tally,
        stream: tokio::net::TcpStream,
    ) -> std::result::Result<Answer, FreshError> {
        let fresh = kept::fresh(stream, plan.tls, plan.server, &plan.request, |kind| tally.saw(kind)).await?;
        if let Some((stream, secrets)) = fresh.keep
            && let Some(kept) = Kept::new(stream, secrets, key, path)
        {
            self.kept.put(name, kept);
            self.sessions.kept_a_connection(&key);
        }
        Ok(fresh.answer)
    }

    /// How a check of `path` goes over a connection it keeps, when its access may keep one
    /// (a bearer token or none, a pinned CA) and connections are kept at all.
    fn keeping_plan(&self, p: &Prepared, path: &str) -> Option<crate::remote::sessions::CheckPlan> {
        if p.keepable && self.kept.keeps() { p.check_plan(path) } else { None }
    }

    /// [`Network::prepared`] for the access of `key`.
    async fn prepared_for(&self, key: [u8; 32], access: &RemoteAccess) -> Result<Prepared> {
        if let Some(prepared) = self.sessions.reuse(&key, &access.kubeconfig) {
            return Ok(prepared);
        }
        let config = self.api_config(access).await?;
        let tls = Tls::of(&config).map_err(|e| Error::Tls(format!("a client for the remote API server: {e}")))?;
        Ok(self.sessions.keep(key, &access.kubeconfig, config, tls))
    }

    /// The client configuration for a peer's API server: its pinned kubeconfig, our timeouts.
    async fn api_config(&self, access: &RemoteAccess) -> Result<kube::Config> {
        let kubeconfig = pinned_kubeconfig(access)?;
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::invalid("kubeconfig", e.to_string()))?;
        config.connect_timeout = Some(self.api_timeout);
        config.read_timeout = Some(self.api_timeout);
        config.write_timeout = Some(self.api_timeout);
        Ok(config)
    }
}

/// The URL of the API server `access` reaches (pure): `api_url` when given, else the server of
/// the kubeconfig's current context (its first cluster when it names none).
pub fn api_url_of(access: &RemoteAccess) -> Option<String> {
    if let Some(url) = access.api_url.as_deref().filter(|u| !u.is_empty()) {
        return Some(url.to_owned());
    }
    server_in(&Kubeconfig::from_yaml(&access.kubeconfig).ok()?)
}

/// The server of `k`'s current context, its first cluster when it names none (pure).
pub fn server_in(k: &Kubeconfig) -> Option<String> {
    let current = k.current_context.as_deref().and_then(|c| k.contexts.iter().find(|n| n.name == c));
    let cluster_name = current.and_then(|c| c.context.as_ref()).map(|c| c.cluster.clone());
    let cluster = match cluster_name {
        Some(name) => k.clusters.iter().find(|c| c.name == name),
        None => k.clusters.first(),
    };
    cluster?.cluster.as_ref()?.server.clone()
}

use crate::remote::client_over::client_over;
use crate::remote::http1::Answer;
use crate::remote::kept::{self, FirstCheck, FreshError, Kept, KeptConnections, Outcome};
use crate::remote::sessions::{Prepared, Sessions, Tls, key_of};

/// A kubeconfig without credentials: requests are anonymous. Its server is a placeholder;
/// [`RemoteAccess::api_url`] gives the real one.
pub const ANONYMOUS_KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: https://api-url.invalid\nusers:\n- name: anonymous\n  user: {}\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: anonymous\ncurrent-context: remote\n";

/// `access.kubeconfig` with every cluster pointed at `api_url` and verified against `ca_pem`
/// only, when those are given (pure).
pub fn pinned_kubeconfig(access: &RemoteAccess) -> Result<Kubeconfig> {
    let mut kubeconfig = Kubeconfig::from_yaml(&access.kubeconfig).map_err(|e| Error::invalid("kubeconfig", e.to_string()))?;
    if kubeconfig.clusters.is_empty() {
        return Err(Error::invalid("kubeconfig", "no cluster"));
    }
    self_contained(&kubeconfig).map_err(|why| Error::invalid("kubeconfig", why))?;
    for named in &mut kubeconfig.clusters {
        let cluster = named.cluster.get_or_insert_with(Default::default);
        if let Some(url) = access.api_url.as_deref().filter(|u| !u.is_empty()) {
            cluster.server = Some(url.to_owned());
        }
        if let Some(pem) = &access.ca_pem {
            cluster.certificate_authority = None;
            cluster.insecure_skip_tls_verify = None;
            cluster.certificate_authority_data = Some(base64::engine::general_purpose::STANDARD.encode(pem));
        }
    }
    Ok(kubeconfig)
}

/// The tenant namespace the current context of `kubeconfig` names (pure): where a remote of
/// the tenant-namespace protocol (protocol §9) keeps what we write there. `None` for a kubeconfig
/// naming another namespace (the Liqo namespace of a remote of the cluster-scoped protocol),
/// none, or that does not parse.
pub fn tenant_of(kubeconfig: &str) -> Option<String> {
    tenant_in(&Kubeconfig::from_yaml(kubeconfig).ok()?)
}

/// [`tenant_of`] a parsed kubeconfig (pure).
pub fn tenant_in(k: &Kubeconfig) -> Option<String> {
    let current = k.current_context.as_deref()?;
    let context = k.contexts.iter().find(|c| c.name == current)?.context.as_ref()?;
    context.namespace.clone().filter(|ns| ns.starts_with(liqo_api::names::TENANT_NAMESPACE_PREFIX))
}

/// The bearer token of the current context's user of `kubeconfig` (pure), if it has one.
pub fn token_of(kubeconfig: &str) -> Option<String> {
    token_in(&Kubeconfig::from_yaml(kubeconfig).ok()?)
}

/// [`token_of`] a parsed kubeconfig (pure).
pub fn token_in(k: &Kubeconfig) -> Option<String> {
    use secrecy::ExposeSecret;
    let current = k.current_context.as_deref()?;
    let user = k.contexts.iter().find(|c| c.name == current)?.context.as_ref()?.user.clone()?;
    let auth = k.auth_infos.iter().find(|a| a.name == user)?.auth_info.as_ref()?;
    auth.token.as_ref().map(|t| t.expose_secret().to_owned())
}

/// Why a kubeconfig a peer gave us may not be used (pure): it must carry its credentials
/// inline. A command to run (`exec`, `auth-provider`), a local file to read (`tokenFile`,
/// `client-certificate`, `client-key`, `certificate-authority` — e.g. our own ServiceAccount
/// token, which would then be sent to the peer), a proxy, impersonation or a plain-HTTP server
/// would let a peer act on this machine or through it.
pub fn self_contained(kubeconfig: &Kubeconfig) -> std::result::Result<(), String> {
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else { continue };
        let refused = [
            (user.exec.is_some(), "an exec credential plugin (never run)"),
            (user.auth_provider.is_some(), "an auth-provider (never run)"),
            (user.token_file.is_some(), "a tokenFile (a local file)"),
            (user.client_certificate.is_some(), "a client-certificate path (a local file)"),
            (user.client_key.is_some(), "a client-key path (a local file)"),
            (user.impersonate.is_some() || user.impersonate_groups.is_some() || user.impersonate_uid.is_some(), "impersonation"),
        ];
        if let Some((_, what)) = refused.iter().find(|(present, _)| *present) {
            return Err(format!("user {:?} has {what}: only inline credentials are accepted from a peer", named.name));
        }
    }
    for named in &kubeconfig.clusters {
        let Some(cluster) = &named.cluster else { continue };
        if cluster.certificate_authority.is_some() {
            return Err(format!("cluster {:?} names a certificate-authority file: only inline data is accepted from a peer", named.name));
        }
        if cluster.proxy_url.is_some() {
            return Err(format!("cluster {:?} names a proxy-url: not accepted from a peer", named.name));
        }
        if let Some(server) = &cluster.server
            && !server.starts_with("https://")
        {
            return Err(format!("cluster {:?} server {server:?} is not an https:// URL", named.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUED: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority-data: b2xk\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: u\ncurrent-context: remote\n";

    #[test]
    fn the_pinned_ca_and_the_spec_api_url_win() {
        let access =
            RemoteAccess { kubeconfig: ISSUED.into(), api_url: Some("https://api.remote.example:6443".into()), ca_pem: Some("PEM".into()) };
        let k = pinned_kubeconfig(&access).unwrap();
        let c = k.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(c.server.as_deref(), Some("https://api.remote.example:6443"));
        assert_eq!(c.certificate_authority_data.as_deref(), Some("UEVN"));
        assert_eq!(c.insecure_skip_tls_verify, None);
        // Without an API URL the issued one stays.
        let k = pinned_kubeconfig(&RemoteAccess { api_url: None, ..access }).unwrap();
        assert_eq!(k.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some("https://10.0.0.1:6443"));
        // Without a pinned CA the kubeconfig's own stays.
        let k = pinned_kubeconfig(&RemoteAccess { kubeconfig: ISSUED.into(), api_url: None, ca_pem: None }).unwrap();
        assert_eq!(k.clusters[0].cluster.as_ref().unwrap().certificate_authority_data.as_deref(), Some("b2xk"));
    }

    #[test]
    fn the_anonymous_kubeconfig_has_no_credentials_and_takes_the_pinned_ca() {
        let access = RemoteAccess {
            kubeconfig: ANONYMOUS_KUBECONFIG.into(),
            api_url: Some("https://1.2.3.4:6443".into()),
            ca_pem: Some("PEM".into()),
        };
        let k = pinned_kubeconfig(&access).unwrap();
        let c = k.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(c.server.as_deref(), Some("https://1.2.3.4:6443"));
        assert_eq!(c.certificate_authority_data.as_deref(), Some("UEVN"));
        let user = k.auth_infos[0].auth_info.clone().unwrap_or_default();
        assert!(user.token.is_none() && user.client_certificate_data.is_none() && user.username.is_none());
    }

    #[test]
    fn a_peers_kubeconfig_may_not_run_commands_read_files_or_proxy() {
        let with_user = |user: &str| ISSUED.replace("  user:\n    token: t\n", &format!("  user:\n{user}"));
        let cases = [
            (
                with_user(
                    "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, 'touch /tmp/pwned']\n",
                ),
                "exec",
            ),
            (with_user("    auth-provider:\n      name: gcp\n      config: {cmd-path: /bin/sh}\n"), "auth-provider"),
            (with_user("    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n"), "tokenFile"),
            (with_user("    client-certificate: /etc/ssl/private/c.crt\n    client-key: /etc/ssl/private/c.key\n"), "client-certificate"),
            (with_user("    token: t\n    as: system:admin\n"), "impersonation"),
            (ISSUED.replace("    certificate-authority-data: b2xk\n", "    certificate-authority: /etc/passwd\n"), "certificate-authority"),
            (ISSUED.replace("    insecure-skip-tls-verify: true\n", "    proxy-url: http://10.0.0.9:3128\n"), "proxy-url"),
            (ISSUED.replace("https://10.0.0.1:6443", "http://10.0.0.1:6443"), "https://"),
        ];
        for (kubeconfig, what) in cases {
            let access = RemoteAccess { kubeconfig: kubeconfig.clone(), api_url: None, ca_pem: Some("PEM".into()) };
            let err = pinned_kubeconfig(&access).unwrap_err().to_string();
            assert!(err.contains(what), "{what}: {err}\n{kubeconfig}");
        }
        // Inline credentials are fine.
        let inline = with_user("    client-certificate-data: Y2VydA==\n    client-key-data: a2V5\n");
        assert!(pinned_kubeconfig(&RemoteAccess { kubeconfig: inline, api_url: None, ca_pem: None }).is_ok());
    }

    /// Through the real client path: the exec plugin a hostile Secret names is never run.
    #[tokio::test]
    async fn the_network_never_runs_a_peers_exec_plugin() {
        let marker = std::env::temp_dir().join(format!("liqo-exec-ran-{}", std::process::id()));
        let user = format!(
            "  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, 'touch {}']\n",
            marker.display()
        );
        let kubeconfig = ISSUED.replace("  user:\n    token: t\n", &user);
        let network = Network::new(Verify::Nothing, Duration::from_secs(1));
        let Err(err) = network.api_client(&RemoteAccess { kubeconfig, api_url: None, ca_pem: None }).await else {
            panic!("a client was made from a kubeconfig with an exec plugin");
        };
        assert!(err.to_string().contains("exec credential plugin (never run)"), "{err}");
        assert!(!marker.exists(), "the command ran");
    }

    #[test]
    fn the_tenant_namespace_is_the_current_contexts_when_it_is_one() {
        let with = |ns: &str| ISSUED.replace("    user: u\n", &format!("    user: u\n    namespace: {ns}\n"));
        assert_eq!(tenant_of(&with("liqo-tenant-abc")).as_deref(), Some("liqo-tenant-abc"));
        assert_eq!(tenant_of(&with("liqo")), None, "the cluster-scoped protocol's Liqo namespace");
        assert_eq!(tenant_of(ISSUED), None);
        assert_eq!(tenant_of(ANONYMOUS_KUBECONFIG), None);
        assert_eq!(tenant_of("not yaml: ["), None);
    }

    #[test]
    fn a_kubeconfig_without_clusters_is_refused() {
        let access = RemoteAccess { kubeconfig: "apiVersion: v1\nkind: Config\n".into(), api_url: None, ca_pem: None };
        assert_eq!(pinned_kubeconfig(&access).unwrap_err().label(), "InvalidSpec");
    }
}
