//! What a call to a peer's API server keeps from the one before, so that a health check costs a
//! resumed TLS handshake instead of a kubeconfig parse, a TLS configuration built anew and a full
//! handshake:
//!
//! - per [`RemoteAccess`] (the identity's kubeconfig, the API URL and the pinned CA, by their
//!   SHA-256): the parsed client configuration and what the TLS configuration that verifies
//!   against the pinned CA is made from, built once;
//! - with them, the peer's TLS 1.3 session ticket (one: the one its last handshake gave us). The
//!   next connection offers it; an API server that knows it resumes the session without sending
//!   its certificate again.
//!
//! What this never weakens:
//! - A ticket belongs to one access: a new identity, a new API URL or a new pinned CA is another
//!   key, with an empty store. A session made under one pinned CA is never resumed under another.
//! - A resumed session proves the server holds the ticket key of a server that proved itself
//!   under the pinned CA; it does not show the certificate the server holds now. So every
//!   [`FULL_HANDSHAKE_EVERY`]-th connection to a peer is a full handshake (its ticket dropped
//!   first; each access's first one at a place of its own, [`first_count`]), and a certificate
//!   replaced in place (the same API server process, its ticket keys kept) is seen within that
//!   many checks. An API server restarted with a new certificate has
//!   new ticket keys: it refuses the ticket, the handshake is full, and the change is seen at once.
//!
//! Memory: an entry holds the client configuration (the identity's token as where it stands in
//! the kubeconfig, which every call comes with: [`Token`]), the pinned CA's
//! verifier (the TLS configuration is made around it at each call, [`Tls`]) and one ticket with
//! the certificate chain it was made under;
//! entries unused for [`IDLE`] are dropped. docs/scaling.md gives the measured bytes per peer.
//! The connection itself is kept by the health checks ([`crate::remote::kept`]); while one is,
//! the access's ticket is let go ([`Sessions::kept_a_connection`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_rustls::MaybeHttpsStream;
use kube::client::ConfigExt;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rustls::NamedGroup;
use rustls::client::{ClientSessionStore, Resumption, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::ServerName;
use sha2::{Digest, Sha256};

use crate::reporting::metrics::HandshakeLabels;

/// At least every this many connections to a peer, one is a full handshake.
pub const FULL_HANDSHAKE_EVERY: u32 = 16;

/// Entries unused this long are dropped (a peer no longer checked, an identity replaced).
pub const IDLE: Duration = Duration::from_secs(15 * 60);

/// How often unused entries are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The key of an access (pure): the SHA-256 of its kubeconfig, API URL and pinned CA, each
/// length-prefixed so that no two accesses share one.
pub fn key_of(kubeconfig: &str, api_url: Option<&str>, ca_pem: Option<&str>) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in [Some(kubeconfig), api_url, ca_pem] {
        match part {
            Some(text) => {
                hash.update([1]);
                hash.update((text.len() as u64).to_be_bytes());
                hash.update(text.as_bytes());
            }
            None => hash.update([0]),
        }
    }
    hash.finalize().into()
}

/// Whether the next connection must be a full handshake (pure), after `resumed` resumed ones
/// since the last that was made full on purpose.
pub fn full_due(resumed: u32) -> bool {
    resumed + 1 >= FULL_HANDSHAKE_EVERY
}

/// Where an access starts counting toward its first full handshake made on purpose (pure, from
/// its key: `0..FULL_HANDSHAKE_EVERY`). Peers joined together are spread over
/// [`FULL_HANDSHAKE_EVERY`] periods instead of all shaking hands in full in the same one.
pub fn first_count(key: &[u8; 32]) -> u32 {
    u32::from(key[0]) % FULL_HANDSHAKE_EVERY
}

/// The session store of one access: the server's last TLS 1.3 ticket and key-exchange group
/// (TLS 1.2 sessions are not kept: kube-apiserver speaks 1.3). A few hundred bytes, where
/// rustls's smallest memory cache takes a kilobyte before it holds anything.
#[derive(Debug, Default)]
struct OneTicket {
    kx_hint: Mutex<Option<(ServerName<'static>, NamedGroup)>>,
    ticket: Mutex<Option<(ServerName<'static>, Tls13ClientSessionValue)>>,
}

impl OneTicket {
    /// Lets go of the ticket held, if any.
    fn let_go(&self) {
        self.ticket.lock().expect("not poisoned").take();
    }

    fn holds(&self) -> bool {
        self.ticket.lock().expect("not poisoned").is_some()
    }
}

impl ClientSessionStore for OneTicket {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        *self.kx_hint.lock().expect("not poisoned") = Some((server_name, group));
    }
    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.kx_hint.lock().expect("not poisoned").as_ref().filter(|(name, _)| name == server_name).map(|(_, group)| *group)
    }
    fn set_tls12_session(&self, _: ServerName<'static>, _: Tls12ClientSessionValue) {}
    fn tls12_session(&self, _: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        None
    }
    fn remove_tls12_session(&self, _: &ServerName<'static>) {}
    fn insert_tls13_ticket(&self, server_name: ServerName<'static>, value: Tls13ClientSessionValue) {
        *self.ticket.lock().expect("not poisoned") = Some((server_name, value));
    }
    fn take_tls13_ticket(&self, server_name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        let mut ticket = self.ticket.lock().expect("not poisoned");
        if ticket.as_ref().is_some_and(|(name, _)| name == server_name) { ticket.take().map(|(_, value)| value) } else { None }
    }
}

/// The client configuration of an access, kept small. A `kube::Config` is 1.1 KiB before what
/// it points to; for the kubeconfigs peers issue (a server, a namespace, a bearer token) what a
/// call needs is the URL, the namespace and the token, and the configuration is made again
/// from them at each call (a few allocations). Any other kubeconfig is kept whole.
enum Target {
    Small {
        url: http::Uri,
        namespace: Box<str>,
        server_name: Option<Box<str>>,
        disable_compression: bool,
        timeouts: [Option<Duration>; 3],
        token: Token,
    },
    Whole(Box<kube::Config>),
}

/// A small target's bearer token. A ServiceAccount token is about 1 KiB, and every call comes
/// with the kubeconfig it is in (the access's key is that kubeconfig's SHA-256), so it is kept as
/// where it stands in that text, not as a second copy (10 MiB at 10,000 peers).
#[derive(Debug)]
enum Token {
    /// Anonymous.
    None,
    /// These bytes of the kubeconfig.
    At(std::ops::Range<u32>),
    /// Not written as it is in the kubeconfig (a quoted or folded scalar): a copy.
    Own(secrecy::SecretString),
}

impl Token {
    fn of(token: Option<secrecy::SecretString>, kubeconfig: &str) -> Self {
        use secrecy::ExposeSecret;
        let Some(token) = token else { return Self::None };
        let found = kubeconfig.find(token.expose_secret()).and_then(|start| {
            let end = start + token.expose_secret().len();
            Some(u32::try_from(start).ok()?..u32::try_from(end).ok()?)
        });
        found.map_or(Self::Own(token), Self::At)
    }

    /// The token, read from `kubeconfig` (the one it was kept from); `Err` when it is not there
    /// (another text: nothing of this access is used then).
    fn read<'a>(&'a self, kubeconfig: &'a str) -> Result<Option<&'a str>, ()> {
        use secrecy::ExposeSecret;
        match self {
            Self::None => Ok(None),
            Self::At(at) => kubeconfig.get(at.start as usize..at.end as usize).map(Some).ok_or(()),
            Self::Own(token) => Ok(Some(token.expose_secret())),
        }
    }
}

impl Target {
    fn of(config: kube::Config, kubeconfig: &str) -> Self {
        if !only_a_token(&config.auth_info) || config.proxy_url.is_some() || !config.headers.is_empty() || config.accept_invalid_certs {
            return Self::Whole(Box::new(config));
        }
        Self::Small {
            url: config.cluster_url,
            namespace: config.default_namespace.into(),
            server_name: config.tls_server_name.map(Into::into),
            disable_compression: config.disable_compression,
            timeouts: [config.connect_timeout, config.read_timeout, config.write_timeout],
            token: Token::of(config.auth_info.token, kubeconfig),
        }
    }

    /// The configuration, its token read from `kubeconfig` (the one it was kept from).
    fn config(&self, kubeconfig: &str) -> Option<kube::Config> {
        match self {
            Self::Whole(config) => Some((**config).clone()),
            Self::Small { url, namespace, server_name, disable_compression, timeouts, token } => {
                let mut config = kube::Config::new(url.clone());
                config.default_namespace = namespace.to_string();
                config.tls_server_name = server_name.as_deref().map(str::to_owned);
                config.disable_compression = *disable_compression;
                [config.connect_timeout, config.read_timeout, config.write_timeout] = *timeouts;
                config.auth_info.token = token.read(kubeconfig).ok()?.map(|t| t.to_owned().into());
                Some(config)
            }
        }
    }
}

/// What an access keeps to make its TLS configuration. For a kubeconfig of a token and a CA (what
/// peers issue, the CA pinned), the verifier of that CA alone: the configuration is made around
/// it at each call (a few allocations, as many as the clone a kept one needed); a kept one held
/// the configuration and a root list with room for four besides (BENCHMARKS.md, "Less held per
/// peer"). The verifier and the client-certificate resolver are the
/// same objects from call to call: rustls resumes a session only under the very ones it was
/// made with, so a session made under another pinned CA is never resumed. Anything else (client
/// certificates, no CA, a CA file, certificates not checked) keeps the configuration kube makes,
/// whole.
pub enum Tls {
    Pinned(Arc<rustls::client::WebPkiServerVerifier>),
    Whole(Box<rustls::ClientConfig>),
}

/// Presents no client certificate: one for every access, so that sessions resume.
#[derive(Debug)]
struct NoClientCert;

impl rustls::client::ResolvesClientCert for NoClientCert {
    fn resolve(&self, _: &[&[u8]], _: &[rustls::SignatureScheme]) -> Option<Arc<rustls::sign::CertifiedKey>> {
        None
    }
    fn has_certs(&self) -> bool {
        false
    }
}

static NO_CLIENT_CERT: std::sync::LazyLock<Arc<NoClientCert>> = std::sync::LazyLock::new(|| Arc::new(NoClientCert));

impl Tls {
    /// What `config`'s TLS configuration is made from.
    pub fn of(config: &kube::Config) -> Result<Self, String> {
        let plain = only_a_token(&config.auth_info) && !config.accept_invalid_certs && config.root_cert_file.is_none();
        if let (true, Some(certs)) = (plain, config.root_cert.as_deref()) {
            let mut roots = rustls::RootCertStore { roots: Vec::with_capacity(certs.len()) };
            for der in certs {
                roots.add(rustls::pki_types::CertificateDer::from(der.as_slice())).map_err(|e| format!("a root certificate: {e}"))?;
            }
            roots.roots.shrink_to_fit();
            let verifier = rustls::client::WebPkiServerVerifier::builder(Arc::new(roots)).build().map_err(|e| e.to_string())?;
            return Ok(Self::Pinned(verifier));
        }
        let mut whole = config.rustls_client_config().map_err(|e| e.to_string())?;
        // Its own session store (rustls's default, 16 KiB before it holds anything) is
        // replaced by the entry's at each call.
        whole.resumption = Resumption::disabled();
        Ok(Self::Whole(Box::new(whole)))
    }

    /// The configuration of a call (its session store still to be set).
    fn config(&self) -> rustls::ClientConfig {
        match self {
            Self::Pinned(verifier) => rustls::ClientConfig::builder()
                .dangerous()
                .with_custom_certificate_verifier(verifier.clone())
                .with_client_cert_resolver(NO_CLIENT_CERT.clone()),
            Self::Whole(config) => (**config).clone(),
        }
    }
}

/// Whether `user` holds nothing but (at most) a bearer token.
fn only_a_token(user: &kube::config::AuthInfo) -> bool {
    let bare = kube::config::AuthInfo { token: user.token.clone(), ..Default::default() };
    matches!((serde_json::to_value(user), serde_json::to_value(&bare)), (Ok(a), Ok(b)) if a == b)
}

/// What one access keeps.
struct Entry {
    kept: Kept,
    used: Instant,
}

/// What a call takes from an entry: shared, so that the entries' lock is held for a few
/// reference counts, not while a call's configurations are made.
#[derive(Clone)]
struct Kept {
    config: Arc<Target>,
    tls: Arc<Tls>,
    store: Arc<OneTicket>,
    resumed: Arc<AtomicU32>,
}

#[derive(Default)]
struct Entries {
    map: HashMap<[u8; 32], Entry>,
    swept: Option<Instant>,
}

/// What a call needs: the client configuration, the TLS configuration with the session store to
/// resume from, and who counts its handshake.
pub struct Prepared {
    pub config: kube::Config,
    pub tls: rustls::ClientConfig,
    pub tally: Tally,
    /// Whether its health checks may keep their connection ([`crate::remote::kept`]): a bearer
    /// token (or none) and a pinned CA, nothing else.
    pub keepable: bool,
}

impl Prepared {
    /// Where a health check of `path` connects, and what it sends: the host and port, the TLS
    /// server name, and the GET ([`crate::remote::http1::get`]).
    pub fn check_plan(&self, path: &str) -> Option<CheckPlan> {
        let url = &self.config.cluster_url;
        let host = url.host()?.trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = url.port_u16().unwrap_or(443);
        let name = self.config.tls_server_name.clone().unwrap_or_else(|| host.clone());
        let server = ServerName::try_from(name).ok()?;
        use secrecy::ExposeSecret;
        let token = self.config.auth_info.token.as_ref().map(|t| t.expose_secret().to_owned());
        let request = request_of(url, path, token.as_deref());
        let mut tls = self.tls.clone();
        tls.enable_secret_extraction = true;
        Some(CheckPlan { host, port, server, request, tls: Arc::new(tls) })
    }
}

/// The GET of `path` (under `url`'s own path, if it has one) with `token`.
fn request_of(url: &http::Uri, path: &str, token: Option<&str>) -> Vec<u8> {
    let authority = url.authority().map_or("", |a| a.as_str());
    let base = url.path().trim_end_matches('/');
    if base.is_empty() {
        crate::remote::http1::get(authority, path, token)
    } else {
        crate::remote::http1::get(authority, &format!("{base}{path}"), token)
    }
}

/// What a health check over a new connection needs ([`Prepared::check_plan`]).
pub struct CheckPlan {
    pub host: String,
    pub port: u16,
    pub server: ServerName<'static>,
    pub request: Vec<u8>,
    pub tls: Arc<rustls::ClientConfig>,
}

/// The entries of every access, and the handshake counts.
#[derive(Default)]
pub struct Sessions {
    entries: Mutex<Entries>,
    handshakes: Family<HandshakeLabels, Counter>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("accesses", &self.len()).finish()
    }
}

impl Sessions {
    /// Sessions counting handshakes in `handshakes` (the reconciler's metric).
    pub fn counting(handshakes: Family<HandshakeLabels, Counter>) -> Self {
        Self { entries: Mutex::default(), handshakes }
    }

    /// Accesses kept.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("not poisoned").map.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Handshakes of `kind` (`full`, `resumed`) counted so far.
    pub fn handshakes(&self, kind: &'static str) -> u64 {
        self.handshakes.get_or_create(&HandshakeLabels { kind }).get()
    }

    /// What a call with the access of `key` (made of `kubeconfig`) reuses; `None` when nothing
    /// is kept for it yet.
    pub fn reuse(&self, key: &[u8; 32], kubeconfig: &str) -> Option<Prepared> {
        let kept = {
            let mut entries = self.entries.lock().expect("not poisoned");
            let now = Instant::now();
            entries.sweep(now);
            let entry = entries.map.get_mut(key)?;
            entry.used = now;
            if full_due(entry.kept.resumed.load(Ordering::Relaxed)) {
                // Dropped, so this connection cannot resume: a full handshake, whose ticket the
                // next ones resume.
                entry.kept.store = Arc::default();
                entry.kept.resumed.store(0, Ordering::Relaxed);
            }
            entry.kept.clone()
        };
        self.prepared(&kept, kubeconfig)
    }

    /// The GET of `path` a health check over a kept connection sends for the access of `key`
    /// (made of `kubeconfig`; `None`: nothing kept for it, or not a token's). Counts as a use
    /// of the access, and lets go of a ticket another call's connection brought meanwhile (a
    /// call of the join's, whose connection got its ticket after this one was kept: about 1 KiB
    /// a peer, held until the kept connection retired, 10 MiB at 10,000 peers).
    pub fn request(&self, key: &[u8; 32], kubeconfig: &str, path: &str) -> Option<Vec<u8>> {
        let mut entries = self.entries.lock().expect("not poisoned");
        let entry = entries.map.get_mut(key)?;
        entry.used = Instant::now();
        entry.kept.store.let_go();
        match &*entry.kept.config {
            Target::Small { url, token, .. } => Some(request_of(url, path, token.read(kubeconfig).ok()?)),
            Target::Whole(_) => None,
        }
    }

    /// The access of `key` holds a connection now ([`crate::remote::kept`]): its session ticket
    /// is let go (a connection that goes between its retirements makes a full handshake).
    pub fn kept_a_connection(&self, key: &[u8; 32]) {
        if let Some(entry) = self.entries.lock().expect("not poisoned").map.get(key) {
            entry.kept.store.let_go();
        }
    }

    /// Whether a session ticket is held for the access of `key`.
    pub fn holds_ticket(&self, key: &[u8; 32]) -> bool {
        let entries = self.entries.lock().expect("not poisoned");
        entries.map.get(key).is_some_and(|e| e.kept.store.holds())
    }

    /// The next connection of the access of `key` is to be a full handshake (a kept connection
    /// retired after its checks).
    pub fn full_next(&self, key: &[u8; 32]) {
        if let Some(entry) = self.entries.lock().expect("not poisoned").map.get(key) {
            entry.kept.resumed.store(FULL_HANDSHAKE_EVERY, Ordering::Relaxed);
        }
    }

    /// Keeps `config` and `tls` (just made from `kubeconfig`) for the access of `key`, and what
    /// a call with them needs.
    pub fn keep(&self, key: [u8; 32], kubeconfig: &str, config: kube::Config, tls: Tls) -> Prepared {
        let kept = Kept {
            config: Arc::new(Target::of(config, kubeconfig)),
            tls: Arc::new(tls),
            store: Arc::default(),
            resumed: Arc::new(AtomicU32::new(first_count(&key))),
        };
        let prepared = self.prepared(&kept, kubeconfig).expect("the token read from the text it was found in");
        self.entries.lock().expect("not poisoned").map.insert(key, Entry { kept, used: Instant::now() });
        prepared
    }

    fn prepared(&self, kept: &Kept, kubeconfig: &str) -> Option<Prepared> {
        let mut tls = kept.tls.config();
        // TLS 1.2 sessions are not resumed (the store keeps none).
        tls.resumption = Resumption::store(kept.store.clone()).tls12_resumption(rustls::client::Tls12Resumption::Disabled);
        let tally = Tally { resumed: kept.resumed.clone(), handshakes: self.handshakes.clone() };
        let keepable = matches!(*kept.config, Target::Small { .. }) && matches!(*kept.tls, Tls::Pinned(_));
        Some(Prepared { config: kept.config.config(kubeconfig)?, tls, tally, keepable })
    }
}

impl Entries {
    fn sweep(&mut self, now: Instant) {
        if self.swept.is_some_and(|at| now.duration_since(at) < SWEEP_EVERY) {
            return;
        }
        self.swept = Some(now);
        self.map.retain(|_, e| now.duration_since(e.used) < IDLE);
    }
}

/// Counts a connection's handshake, and its access's resumed ones since the last full handshake
/// made on purpose (a full one the peer chose, refusing the ticket, does not restart the count:
/// the one made on purpose still comes at its place).
#[derive(Clone)]
pub struct Tally {
    resumed: Arc<AtomicU32>,
    handshakes: Family<HandshakeLabels, Counter>,
}

impl Tally {
    /// Counts a handshake of `kind`.
    pub fn saw(&self, kind: Option<rustls::HandshakeKind>) {
        let resumed = matches!(kind, Some(rustls::HandshakeKind::Resumed));
        if resumed {
            self.resumed.fetch_add(1, Ordering::Relaxed);
        }
        let kind = if resumed { "resumed" } else { "full" };
        self.handshakes.get_or_create(&HandshakeLabels { kind }).inc();
    }
}

/// An HTTPS connector whose TLS connections are counted by their handshake ([`Tally`]) and
/// end without a word ([`Unsaid`]).
#[derive(Clone)]
pub struct Counted<C> {
    pub inner: C,
    pub tally: Tally,
}

type Connecting<T> = Pin<Box<dyn Future<Output = Result<Unsaid<MaybeHttpsStream<T>>, tower::BoxError>> + Send>>;

impl<C, T> tower::Service<http::Uri> for Counted<C>
where
    C: tower::Service<http::Uri, Response = MaybeHttpsStream<T>>,
    C::Error: Into<tower::BoxError>,
    C::Future: Send + 'static,
    T: Send + 'static,
{
    type Response = Unsaid<MaybeHttpsStream<T>>;
    type Error = tower::BoxError;
    type Future = Connecting<T>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let (connecting, tally) = (self.inner.call(uri), self.tally.clone());
        Box::pin(async move {
            let stream = connecting.await.map_err(Into::into)?;
            if let MaybeHttpsStream::Https(tls) = &stream {
                tally.saw(tls.inner().get_ref().1.handshake_kind());
            }
            Ok(Unsaid(stream))
        })
    }
}

/// A connection to a peer's API server that ends by closing its socket, without TLS's
/// close_notify: every call reads an answer whose length it knows (a truncation cannot pass
/// for a whole answer), and the alert cost both sides a record to seal, send and open at the
/// end of every check (a few percent of the reconciler's CPU in steady state). The server sees
/// the connection end as a client that went away between requests.
pub struct Unsaid<S>(S);

impl<S: hyper::rt::Read + Unpin> hyper::rt::Read for Unsaid<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: hyper::rt::ReadBufCursor<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: hyper::rt::Write + Unpin> hyper::rt::Write for Unsaid<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    /// Nothing to say: the socket closes when the connection is dropped.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
}

impl<S: hyper_util::client::legacy::connect::Connection> hyper_util::client::legacy::connect::Connection for Unsaid<S> {
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        self.0.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access<'a>(kubeconfig: &'a str, api_url: Option<&'a str>, ca: Option<&'a str>) -> (&'a str, Option<&'a str>, Option<&'a str>) {
        (kubeconfig, api_url, ca)
    }

    fn key(parts: (&str, Option<&str>, Option<&str>)) -> [u8; 32] {
        key_of(parts.0, parts.1, parts.2)
    }

    #[test]
    fn each_part_of_an_access_makes_its_own_key() {
        let base = key(access("k", Some("https://a"), Some("CA")));
        assert_eq!(base, key(access("k", Some("https://a"), Some("CA"))));
        for other in [
            access("k2", Some("https://a"), Some("CA")),
            access("k", Some("https://b"), Some("CA")),
            access("k", Some("https://a"), Some("CA2")),
            access("k", None, Some("CA")),
            access("k", Some("https://a"), None),
            // Where one part ends and the next starts is part of the key.
            access("kh", Some("ttps://a"), Some("CA")),
            access("k", Some(""), Some("CA")),
        ] {
            assert_ne!(base, key(other), "{other:?}");
        }
    }

    #[test]
    fn a_full_handshake_comes_every_so_many_connections() {
        let mut resumed = 0;
        let mut full = 0;
        for _ in 0..FULL_HANDSHAKE_EVERY * 10 {
            if full_due(resumed) {
                full += 1;
                resumed = 0;
            } else {
                resumed += 1;
            }
        }
        assert_eq!(full, 10, "one in {FULL_HANDSHAKE_EVERY}");
        assert!(full_due(FULL_HANDSHAKE_EVERY - 1) && !full_due(FULL_HANDSHAKE_EVERY - 2));
    }

    #[test]
    fn a_token_kubeconfig_is_kept_small_and_made_again_the_same() {
        let yaml = "apiVersion: v1\nkind: Config\nclusters:\n- name: r\n  cluster:\n    server: https://10.0.0.1:6443\n    tls-server-name: api.remote\nusers:\n- name: u\n  user:\n    token: abc\ncontexts:\n- name: r\n  context:\n    cluster: r\n    user: u\n    namespace: liqo-tenant-x\ncurrent-context: r\n";
        let made = |yaml: &str| {
            let k = kube::config::Kubeconfig::from_yaml(yaml).unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let mut c = rt.block_on(kube::Config::from_custom_kubeconfig(k, &Default::default())).unwrap();
            c.read_timeout = Some(Duration::from_secs(10));
            c
        };
        let config = made(yaml);
        let target = Target::of(config.clone(), yaml);
        // The token is kept as where it stands in the kubeconfig, not copied.
        let at = yaml.find("abc").unwrap() as u32;
        assert!(matches!(&target, Target::Small { token: Token::At(r), .. } if *r == (at..at + 3)));
        let again = target.config(yaml).unwrap();
        let shown = |c: &kube::Config| {
            use secrecy::ExposeSecret;
            (
                c.cluster_url.to_string(),
                c.default_namespace.clone(),
                c.tls_server_name.clone(),
                [c.connect_timeout, c.read_timeout, c.write_timeout],
                c.auth_info.token.as_ref().map(|t| t.expose_secret().to_owned()),
                c.default_retry,
                c.proxy_url.is_none(),
            )
        };
        assert_eq!(shown(&again), shown(&config));
        // A text too short for where the token stood (not the kubeconfig it was kept from):
        // no configuration at all, rather than one with another token.
        assert!(target.config("apiVersion: v1").is_none());
        // A token written otherwise than as it is (quoted, with an escape): a copy of its own.
        let quoted = yaml.replace("    token: abc\n", "    token: \"a\\x62c\"\n");
        let target = Target::of(made(&quoted), &quoted);
        assert!(matches!(&target, Target::Small { token: Token::Own(_), .. }));
        assert_eq!(shown(&target.config(&quoted).unwrap()), shown(&config));
        // Client certificates, or anything else besides a token: kept whole.
        let certs = yaml.replace("    token: abc\n", "    client-certificate-data: Y2VydA==\n    client-key-data: a2V5\n");
        assert!(matches!(Target::of(made(&certs), &certs), Target::Whole(_)));
        let anonymous = yaml.replace("    token: abc\n", "    {}\n").replace("  user:\n    {}", "  user: {}");
        assert!(matches!(Target::of(made(&anonymous), &anonymous), Target::Small { token: Token::None, .. }));
    }

    /// A kubeconfig of `user` lines for a server whose CA is `ca_pem` (none: no CA).
    fn kubeconfig_with(ca_pem: Option<&str>, user: &str) -> kube::Config {
        use base64::Engine;
        let ca = ca_pem.map_or(String::new(), |pem| {
            format!("    certificate-authority-data: {}\n", base64::engine::general_purpose::STANDARD.encode(pem))
        });
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: r\n  cluster:\n    server: https://127.0.0.1:6443\n{ca}users:\n- name: u\n  user:\n{user}contexts:\n- name: r\n  context:\n    cluster: r\n    user: u\ncurrent-context: r\n"
        );
        let k = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(kube::Config::from_custom_kubeconfig(k, &Default::default())).unwrap()
    }

    /// Whether a client of `tls` completes a handshake with a server presenting `pair` for
    /// 127.0.0.1 (in memory, no socket).
    fn handshake(tls: rustls::ClientConfig, pair: &liqo_certs::issue::Pair) -> Result<(), rustls::Error> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).unwrap();
        let server = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(chain, key).unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server)).unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(tls), name).unwrap();
        for _ in 0..10 {
            let mut bytes = Vec::new();
            client.write_tls(&mut bytes).unwrap();
            server.read_tls(&mut &bytes[..]).unwrap();
            let _ = server.process_new_packets();
            bytes.clear();
            server.write_tls(&mut bytes).unwrap();
            client.read_tls(&mut &bytes[..]).unwrap();
            client.process_new_packets()?;
            if !client.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake neither ended nor failed");
    }

    #[test]
    fn a_token_and_a_ca_keep_the_cas_verifier_alone_and_its_configuration_verifies_against_it_only() {
        use liqo_certs::issue::{issue_serving, new_ca};
        let now = time::OffsetDateTime::now_utc();
        let life = time::Duration::days(1);
        let (ca, other) = (new_ca("pinned", now, life).unwrap(), new_ca("someone else", now, life).unwrap());
        let sans = ["127.0.0.1".to_owned()];
        let (ours, theirs) = (issue_serving(&ca, &sans, now, life).unwrap(), issue_serving(&other, &sans, now, life).unwrap());
        let tls = Tls::of(&kubeconfig_with(Some(&ca.cert_pem), "    token: abc\n")).unwrap();
        assert!(matches!(tls, Tls::Pinned(_)), "a token and a CA keep the CA's verifier alone");
        handshake(tls.config(), &ours).expect("a server of the pinned CA is verified");
        let refused = handshake(tls.config(), &theirs).expect_err("a server of another CA is refused");
        assert!(matches!(refused, rustls::Error::InvalidCertificate(_)), "{refused:?}");
        // Anything besides a token and a CA: kube's configuration, whole.
        let certs = "    client-certificate-data: Y2VydA==\n    client-key-data: a2V5\n";
        assert!(Tls::of(&kubeconfig_with(Some(&ca.cert_pem), certs)).is_err_and(|e| !e.is_empty()), "a bad client key is an error");
        assert!(matches!(Tls::of(&kubeconfig_with(None, "    token: abc\n")), Ok(Tls::Whole(_))), "no CA: the system's roots");
        let mut insecure = kubeconfig_with(Some(&ca.cert_pem), "    token: abc\n");
        insecure.accept_invalid_certs = true;
        let whole = Tls::of(&insecure).unwrap();
        assert!(matches!(whole, Tls::Whole(_)));
        handshake(whole.config(), &theirs).expect("certificates not checked, as the kubeconfig says");
    }

    #[test]
    fn accesses_start_counting_at_places_spread_over_the_interval() {
        let starts: std::collections::BTreeSet<u32> = (0..=255u8).map(|b| first_count(&[b; 32])).collect();
        assert_eq!(starts, (0..FULL_HANDSHAKE_EVERY).collect(), "every place taken");
        assert!((0..=255u8).all(|b| first_count(&[b; 32]) < FULL_HANDSHAKE_EVERY));
    }
}
