//! A client-side limit on our requests to our own API server (`--kube-api-qps`,
//! `--kube-api-burst`), as client-go's token bucket: up to `burst` requests at once, then `qps`
//! a second. A thousand peers changing state at once (a mass outage, a cold start) reach the API
//! server as a steady stream its API Priority and Fairness queues can absorb, not as one burst
//! it would answer with 429s. Each request waits its turn in order of arrival; a watch counts
//! when it starts.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};

/// Default `--kube-api-qps`: a status write per peer of 10,000 within 25 s, and 10,000 peers
/// joined at once within 600 s (18.4 requests each: 428 s measured). 200 until tenant
/// namespaces, when a request cost the hub's API server about 6 ms of CPU at 10,000 peers; it
/// costs 1.5–1.7 ms now, so 400 a second take less of it than 200 did (BENCHMARKS.md, "Tenant
/// namespaces at 10,000").
pub const DEFAULT_QPS: f64 = 400.0;
/// Default `--kube-api-burst`.
pub const DEFAULT_BURST: u32 = 400;

/// The token bucket (pure but for the clock it is given).
#[derive(Debug)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    /// Tokens left; below zero: requests already promised the tokens to come.
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket; `qps` ≤ 0 never waits.
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self { qps, burst, tokens: burst, last: now }
    }

    /// Takes a token for a request arriving at `now`: how long it waits for it.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst) - 1.0;
        if self.tokens >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-self.tokens / self.qps) }
    }
}

/// What the limit made requests wait, for the metrics.
#[derive(Debug, Default)]
pub struct Waited {
    /// Requests that waited.
    pub requests: prometheus_client::metrics::counter::Counter,
    /// Seconds they waited, summed.
    pub seconds: prometheus_client::metrics::counter::Counter<f64, std::sync::atomic::AtomicU64>,
}

/// The layer: every request through it takes a token of one shared bucket.
#[derive(Clone)]
pub struct ThrottleLayer {
    bucket: Arc<Mutex<Bucket>>,
    waited: Arc<Waited>,
}

impl ThrottleLayer {
    pub fn new(qps: f64, burst: u32, waited: Arc<Waited>) -> Self {
        Self { bucket: Arc::new(Mutex::new(Bucket::new(qps, burst, Instant::now()))), waited }
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Throttle { inner, bucket: self.bucket.clone(), waited: self.waited.clone(), sleep: None, holding: false }
    }
}

/// The service: [`Service::poll_ready`] is pending until the request's token is due (behind
/// the client's buffer, requests wait there in order).
pub struct Throttle<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    waited: Arc<Waited>,
    /// The wait for the token taken for the next call, if it is not due yet.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether the next call's token is taken.
    holding: bool,
}

impl<S: Clone> Clone for Throttle<S> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), bucket: self.bucket.clone(), waited: self.waited.clone(), sleep: None, holding: false }
    }
}

impl<S, R> Service<R> for Throttle<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.holding {
            self.holding = true;
            let wait = self.bucket.lock().unwrap_or_else(|e| e.into_inner()).reserve(Instant::now());
            if !wait.is_zero() {
                self.waited.requests.inc();
                self.waited.seconds.inc_by(wait.as_secs_f64());
                self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
        if let Some(sleep) = self.sleep.as_mut() {
            std::task::ready!(sleep.as_mut().poll(cx));
            self.sleep = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.holding = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_requests_come_at_the_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 3, t0);
        let waits: Vec<Duration> = (0..6).map(|_| b.reserve(t0)).collect();
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [0, 0, 0, 100, 200, 300], "three at once, then one per 100 ms, in order");
        // A second later the promised tokens are paid and seven more came: a burst again.
        let later = t0 + Duration::from_millis(1300);
        assert_eq!(b.reserve(later), Duration::ZERO);
        let refilled = (0..2).map(|_| b.reserve(later)).filter(|w| w.is_zero()).count();
        assert_eq!(refilled, 2, "the bucket holds at most its burst");
        assert!(!b.reserve(later).is_zero());
    }

    #[test]
    fn no_rate_never_waits() {
        let t0 = Instant::now();
        let mut b = Bucket::new(0.0, 1, t0);
        assert!((0..1000).all(|_| b.reserve(t0).is_zero()));
    }

    #[tokio::test(start_paused = true)]
    async fn requests_through_the_layer_wait_their_turn() {
        use tower::ServiceExt;
        let waited = Arc::new(Waited::default());
        let layer = ThrottleLayer::new(5.0, 2, waited.clone());
        let svc = layer.layer(tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n) }));
        let started = tokio::time::Instant::now();
        for n in 0..4 {
            assert_eq!(svc.clone().oneshot(n).await.unwrap(), n);
        }
        // Two at once, then 200 ms each.
        assert_eq!(started.elapsed(), Duration::from_millis(400));
        assert_eq!(waited.requests.get(), 2);
        assert!((waited.seconds.get() - 0.4).abs() < 1e-6, "{}", waited.seconds.get());
    }
}
