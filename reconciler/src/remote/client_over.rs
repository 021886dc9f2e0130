//! A Kubernetes client for a peer's API server, whose first connection may be one already made
//! ([`crate::machinery::connect_first`]): the health check goes over the connection that showed the
//! peer answers, instead of making a second one. Any further connection is made as kube's
//! own client makes it. The stack is kube's ([`kube::client::ClientBuilder`] from a
//! [`kube::Config`]), over a TLS configuration kept per peer with its session ticket
//! ([`crate::remote::sessions`]): the connect, read and write timeouts, the base URI, the
//! credentials and kube's retry of 429/503/504; answers capped at [`MAX_API_ANSWER`] as every
//! client to a peer ([`capped`], which `crate::remote::peer`'s clients use too).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::client::{Body, ConfigExt};
use tokio::net::TcpStream;
use tower::ServiceBuilder;

use crate::machinery::error::{Error, Result};
use crate::remote::sessions::{Counted, Tally};

/// Gives `first` to the first connection asked for, then connects as kube does.
#[derive(Clone)]
struct FirstConnection {
    first: Arc<Mutex<Option<TcpStream>>>,
    then: HttpConnector,
}

impl tower::Service<http::Uri> for FirstConnection {
    type Response = TokioIo<TcpStream>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.then.poll_ready(cx).map_err(std::io::Error::other)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        if let Some(stream) = self.first.lock().expect("not poisoned").take() {
            return Box::pin(std::future::ready(Ok(TokioIo::new(stream))));
        }
        let connecting = self.then.call(uri);
        Box::pin(async move { connecting.await.map_err(std::io::Error::other) })
    }
}

pub use crate::remote::http1::MAX_API_ANSWER;

/// `response` with its body read up to [`MAX_API_ANSWER`] at most.
pub fn capped<B>(response: http::Response<B>) -> http::Response<http_body_util::Limited<B>> {
    response.map(|body| http_body_util::Limited::new(body, MAX_API_ANSWER))
}

/// A client for the API server `config` names, over `tls` (its session store included), its
/// first connection `first` when one was made ([`crate::machinery::connect_first`]), its
/// handshakes counted by `tally`.
pub fn client_over(config: kube::Config, tls: rustls::ClientConfig, first: Option<TcpStream>, tally: Tally) -> Result<kube::Client> {
    let tls_error = |e: kube::Error| Error::Tls(format!("a client for the remote API server: {e}"));
    let mut then = HttpConnector::new();
    then.enforce_http(false);
    let connector = FirstConnection { first: Arc::new(Mutex::new(first)), then };
    let mut builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name =
            rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| Error::Tls(format!("tls-server-name {name:?}: {e}")))?;
        builder = builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = Counted { inner: builder.enable_http1().wrap_connector(connector), tally };
    let mut timed = hyper_timeout::TimeoutConnector::new(https);
    timed.set_connect_timeout(config.connect_timeout);
    timed.set_read_timeout(config.read_timeout);
    timed.set_write_timeout(config.write_timeout);
    let http: hyper_util::client::legacy::Client<_, Body> = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(timed);
    let retry = config.default_retry.then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(tower::util::MapResponseLayer::new(capped))
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer().map_err(tls_error)?)
        .layer(config.extra_headers_layer().map_err(tls_error)?)
        .map_err(tower::BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}
