//! A client-side limit on our requests to our own API server (`--kube-api-qps`,
//! `--kube-api-burst`), as client-go's token bucket: up to `burst` requests at once, then `qps`
//! a second. A thousand peers changing state at once (a mass outage, a cold start) reach the API
//! server as a steady stream its API Priority and Fairness queues can absorb, not as one burst
//! it would answer with 429s. Each request waits its turn in order of arrival; a watch counts
//! when it starts.
//!
//! Events go behind everything else ([`ThrottleLayer::low_priority`]): they take a token only
//! when one is free, never one promised to a request waiting, so that 10,000 peers going down
//! at once have their status written first (10,000 at 200 a second: 50 s) and their Events
//! after, not the two interleaved (100 s, past the three health periods a status has to say
//! so). The recorder writes them from a queue while the bucket is in debt
//! ([`ThrottleLayer::congested`], `events::Recorder`), so no reconcile waits on one.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};

/// Default `--kube-api-qps`: enough for a status write per peer of 10,000 within 50 s.
pub const DEFAULT_QPS: f64 = 200.0;
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
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-self.tokens / self.qps) }
    }

    /// Takes a token for a low-priority request at `now` only if one is free (none promised to
    /// a request waiting): `None` when taken, else how long until one would be.
    pub fn take_if_free(&mut self, now: Instant) -> Option<Duration> {
        if self.qps <= 0.0 {
            return None;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }

    /// Whether a request at `now` would wait for its token.
    pub fn congested(&mut self, now: Instant) -> bool {
        self.qps > 0.0 && {
            self.refill(now);
            self.tokens < 1.0
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
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
    low: bool,
}

impl ThrottleLayer {
    pub fn new(qps: f64, burst: u32, waited: Arc<Waited>) -> Self {
        Self { bucket: Arc::new(Mutex::new(Bucket::new(qps, burst, Instant::now()))), waited, low: false }
    }

    /// The same bucket for requests that go behind every other: each takes a token only when
    /// one is free (for a client of its own: requests wait in order behind a client's buffer).
    pub fn low_priority(&self) -> Self {
        Self { low: true, ..self.clone() }
    }

    /// Whether a request now would wait for its token (requests are waiting, or will).
    pub fn congested(&self) -> bool {
        self.bucket.lock().unwrap_or_else(|e| e.into_inner()).congested(Instant::now())
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Throttle { inner, bucket: self.bucket.clone(), waited: self.waited.clone(), low: self.low, sleep: None, holding: false }
    }
}

/// The service: [`Service::poll_ready`] is pending until the request's token is due (behind
/// the client's buffer, requests wait there in order).
pub struct Throttle<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    waited: Arc<Waited>,
    /// Whether its requests go behind every other.
    low: bool,
    /// The wait for the token taken for the next call, if it is not due yet.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether the next call's token is taken.
    holding: bool,
}

impl<S: Clone> Clone for Throttle<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            bucket: self.bucket.clone(),
            waited: self.waited.clone(),
            low: self.low,
            sleep: None,
            holding: false,
        }
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
        if self.low {
            return self.poll_ready_low(cx);
        }
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

impl<S> Throttle<S> {
    /// A low-priority request's turn: a free token, looked for again when one would be.
    fn poll_ready_low<R>(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>>
    where
        S: Service<R>,
    {
        while !self.holding {
            if let Some(sleep) = self.sleep.as_mut() {
                std::task::ready!(sleep.as_mut().poll(cx));
                self.sleep = None;
            }
            match self.bucket.lock().unwrap_or_else(|e| e.into_inner()).take_if_free(Instant::now()) {
                None => self.holding = true,
                Some(wait) => {
                    self.waited.requests.inc();
                    self.waited.seconds.inc_by(wait.as_secs_f64());
                    self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
        }
        self.inner.poll_ready(cx)
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

    #[test]
    fn a_low_priority_request_takes_only_a_free_token_and_never_one_promised() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 2, t0);
        assert!(!b.congested(t0));
        assert_eq!(b.take_if_free(t0), None, "a free token");
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert_eq!(b.reserve(t0), Duration::from_millis(100), "the next is promised 100 ms from now");
        assert!(b.congested(t0));
        // Two tokens owed before one is free: 200 ms, and as long as more are promised meanwhile.
        assert_eq!(b.take_if_free(t0), Some(Duration::from_millis(200)));
        assert_eq!(b.reserve(t0 + Duration::from_millis(150)), Duration::from_millis(50));
        assert_eq!(b.take_if_free(t0 + Duration::from_millis(200)), Some(Duration::from_millis(100)));
        assert_eq!(b.take_if_free(t0 + Duration::from_millis(300)), None, "free at last");
        assert!(b.congested(t0 + Duration::from_millis(300)), "and taken");
    }

    #[tokio::test(start_paused = true)]
    async fn low_priority_requests_go_after_the_others_waiting() {
        use tower::ServiceExt;
        let layer = ThrottleLayer::new(10.0, 1, Arc::new(Waited::default()));
        let order = Arc::new(Mutex::new(Vec::new()));
        let service = |layer: &ThrottleLayer, order: &Arc<Mutex<Vec<&'static str>>>| {
            let order = order.clone();
            layer.layer(tower::service_fn(move |what: &'static str| {
                order.lock().unwrap().push(what);
                async { Ok::<_, std::convert::Infallible>(()) }
            }))
        };
        let (normal, low) = (service(&layer, &order), service(&layer.low_priority(), &order));
        let mut tasks = tokio::task::JoinSet::new();
        for what in ["status 1", "status 2", "status 3"] {
            tasks.spawn(normal.clone().oneshot(what));
            tokio::task::yield_now().await;
        }
        tasks.spawn(low.clone().oneshot("event"));
        tokio::task::yield_now().await;
        tasks.spawn(normal.clone().oneshot("status 4"));
        while tasks.join_next().await.is_some() {}
        assert_eq!(*order.lock().unwrap(), ["status 1", "status 2", "status 3", "status 4", "event"]);
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
