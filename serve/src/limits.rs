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

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_server::accept::Accept;
use http_body_util::BodyExt;
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
    /// between keep-alive requests, or a TLS client that never sends a request). Longer than the
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

/// The bounds [`bounded_body`] and [`read_bounded`] apply.
#[derive(Clone, Copy, Debug)]
pub struct BodyBounds {
    pub max_bytes: usize,
    pub timeout: Duration,
}

/// How much of an oversized body is still read (and dropped) before the 413 goes out. A client
/// that is still sending when the server closes would otherwise meet a reset (the kernel resets
/// a socket closed with unread data), which can destroy the answer before the client reads it.
pub const DRAIN_BEYOND: usize = 1024 * 1024;

/// Why a body was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyRefusal {
    /// Over `max_bytes` (413).
    TooLarge { max_bytes: usize },
    /// Not whole within the deadline (408).
    TooSlow,
    /// The connection failed while the body was read (400).
    Broken(String),
}

impl BodyRefusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::TooSlow => StatusCode::REQUEST_TIMEOUT,
            Self::Broken(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// Stable label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::TooSlow => "body_timeout",
            Self::Broken(_) => "body_error",
        }
    }

    /// The answer: status, a line saying why, and `Connection: close` (the connection's
    /// framing can no longer be trusted, or the client is one to be rid of).
    pub fn response(&self) -> Response {
        let headers = [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::CONNECTION, "close")];
        (self.status(), headers, format!("{self}\n")).into_response()
    }
}

impl std::fmt::Display for BodyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge { max_bytes } => write!(f, "the request body exceeds {max_bytes} bytes"),
            Self::TooSlow => write!(f, "the request body did not arrive in time"),
            Self::Broken(e) => write!(f, "reading the request body failed: {e}"),
        }
    }
}

/// Reads `body` whole, at most `bounds.max_bytes` of it within `bounds.timeout`. A larger one
/// is read on and dropped, up to [`DRAIN_BEYOND`] more within the same deadline, so that the
/// client reads the 413 instead of a reset. The usual small body has arrived with the headers:
/// it is read without arming a timer.
pub async fn read_bounded<B>(body: B, bounds: BodyBounds) -> Result<Bytes, BodyRefusal>
where
    B: axum::body::HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut seen = 0usize;
    let outcome = {
        let read = read_all(body, bounds.max_bytes, &mut seen);
        let mut read = std::pin::pin!(read);
        match std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
            Poll::Ready(done) => Some(done),
            Poll::Pending => tokio::time::timeout(bounds.timeout, read).await.ok(),
        }
    };
    match outcome {
        Some(done) => done,
        None if seen > bounds.max_bytes => Err(BodyRefusal::TooLarge { max_bytes: bounds.max_bytes }),
        None => Err(BodyRefusal::TooSlow),
    }
}

async fn read_all<B>(mut body: B, max_bytes: usize, seen: &mut usize) -> Result<Bytes, BodyRefusal>
where
    B: axum::body::HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut kept = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyRefusal::Broken(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        *seen = seen.saturating_add(data.len());
        if *seen <= max_bytes {
            kept.extend_from_slice(&data);
        } else if *seen > max_bytes.saturating_add(DRAIN_BEYOND) {
            break;
        }
    }
    if *seen > max_bytes { Err(BodyRefusal::TooLarge { max_bytes }) } else { Ok(Bytes::from(kept)) }
}

/// Middleware (`axum::middleware::from_fn_with_state`): reads the whole body first (see
/// [`read_bounded`]), refusing one larger than `max_bytes` (413) or slower than `timeout`
/// (408), so a handler never waits on a client.
pub async fn bounded_body(axum::extract::State(bounds): axum::extract::State<BodyBounds>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    match read_bounded(body, bounds).await {
        Ok(bytes) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(refusal) => refusal.response(),
    }
}
