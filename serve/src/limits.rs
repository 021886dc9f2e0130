//! What keeps a server reachable when a client misbehaves: a cap on open connections (a
//! connection over the cap is closed at once and counted), a deadline for request headers
//! (a slowloris client is cut off), a deadline for a connection's silence (one that sends
//! nothing after its TLS handshake, or stays idle between requests, is closed), and a
//! middleware that caps a request body's size and the time it may take to arrive.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_server::accept::Accept;
use http_body_util::{BodyExt, Limited};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How much a server lets one client hold.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Open connections at once; more are closed as they arrive.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (also the TLS handshake's, and the time
    /// from the handshake to its first bytes).
    pub header_timeout: Duration,
    /// Time a connection may go without reading or writing a byte once it has spoken (idle
    /// between keep-alive requests, or an HTTP/2 client that stopped talking). Longer than the
    /// 90 s after which Go's HTTP client (the API server calling a webhook) drops an idle
    /// connection itself, so that the client, not the server, closes it.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_connections: 1024, header_timeout: Duration::from_secs(10), idle_timeout: Duration::from_secs(120) }
    }
}

/// Counts the connections closed because the server was full (a Prometheus counter: register
/// a clone to export it).
pub type Refused = prometheus_client::metrics::counter::Counter;

/// An acceptor that holds a permit per open connection and turns away the connection that
/// finds none (`TCP_NODELAY` on the others).
#[derive(Clone, Debug)]
pub struct ConnectionCap {
    permits: Arc<Semaphore>,
    refused: Refused,
}

impl ConnectionCap {
    pub fn new(max_connections: usize, refused: Refused) -> Self {
        Self { permits: Arc::new(Semaphore::new(max_connections)), refused }
    }
}

impl<S> Accept<TcpStream, S> for ConnectionCap {
    type Stream = Permitted;
    type Service = S;
    type Future = std::future::Ready<io::Result<(Permitted, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            self.refused.inc();
            tracing::debug!("connection refused: the server is at its connection cap");
            return std::future::ready(Err(io::Error::other("connection cap reached")));
        };
        std::future::ready(stream.set_nodelay(true).map(|()| (Permitted { stream, _permit: permit }, service)))
    }
}

/// A connection and the permit it holds until it closes.
#[derive(Debug)]
pub struct Permitted {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Permitted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Permitted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// An acceptor that closes a connection which stays silent: no byte within `first` of its
/// TLS handshake, or no byte read or written for `idle` after that. Wraps the TLS acceptor,
/// so the time counts from the end of the handshake.
#[derive(Clone, Debug)]
pub struct SilenceCutoff<A> {
    inner: A,
    first: Duration,
    idle: Duration,
}

impl<A> SilenceCutoff<A> {
    pub fn new(inner: A, first: Duration, idle: Duration) -> Self {
        Self { inner, first, idle }
    }
}

impl<A, I, S> Accept<I, S> for SilenceCutoff<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Watched<A::Stream>;
    type Service = A::Service;
    type Future = Pin<Box<dyn std::future::Future<Output = io::Result<(Watched<A::Stream>, A::Service)>> + Send>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let (accepted, first, idle) = (self.inner.accept(stream, service), self.first, self.idle);
        Box::pin(async move {
            let (stream, service) = accepted.await?;
            let deadline = Box::pin(tokio::time::sleep(first));
            Ok((Watched { stream, deadline, idle, heard: None }, service))
        })
    }
}

/// A connection that fails its next read once its deadline passes. A byte read or written
/// only notes the time (the timer is touched when it fires: then it is moved to `idle` after
/// the last byte, or the read fails).
#[derive(Debug)]
pub struct Watched<S> {
    stream: S,
    deadline: Pin<Box<tokio::time::Sleep>>,
    idle: Duration,
    heard: Option<tokio::time::Instant>,
}

impl<S> Watched<S> {
    fn heard(&mut self) {
        self.heard = Some(tokio::time::Instant::now());
    }

    /// Ready once the connection has been silent past its deadline.
    fn silent_too_long(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return false;
            }
            match self.heard.map(|at| at + self.idle) {
                Some(due) if due > tokio::time::Instant::now() => self.deadline.as_mut().reset(due),
                _ => return true,
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                self.heard();
                Poll::Ready(Ok(()))
            }
            Poll::Pending if self.silent_too_long(cx) => {
                tracing::debug!("connection closed: silent past its deadline");
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the connection stayed silent past its deadline")))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.heard();
        }
        written
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The bounds [`bounded_body`] applies.
#[derive(Clone, Copy, Debug)]
pub struct BodyBounds {
    pub max_bytes: usize,
    pub timeout: Duration,
}

/// Middleware (`axum::middleware::from_fn_with_state`): reads the whole body first, refusing
/// one larger than `max_bytes` (413) or slower than `timeout` (408), so a handler never waits
/// on a client.
pub async fn bounded_body(axum::extract::State(bounds): axum::extract::State<BodyBounds>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let read = tokio::time::timeout(bounds.timeout, Limited::new(body, bounds.max_bytes).collect()).await;
    let bytes = match read {
        Err(_) => return (StatusCode::REQUEST_TIMEOUT, "the request body did not arrive in time\n").into_response(),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            return (StatusCode::PAYLOAD_TOO_LARGE, format!("the request body exceeds {} bytes\n", bounds.max_bytes)).into_response();
        }
        Ok(Err(e)) => return (StatusCode::BAD_REQUEST, format!("reading the request body failed: {e}\n")).into_response(),
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}
