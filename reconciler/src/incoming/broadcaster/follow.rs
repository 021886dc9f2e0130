//! How a broadcaster learns that its Advertisement in the peer's cluster changed, between
//! rounds, without asking every period: one watch by name (`fieldSelector=metadata.name=`) in
//! our tenant namespace there.
//!
//! - Each watch starts with a LIST by the same name: what the API server has now (our
//!   Advertisement, or none: a round at once), and the version to watch from, so that nothing
//!   done between the two is missed. A watch opened right after a round starts from the
//!   version that round read ours at: the round read it by that LIST (or wrote it), so a
//!   broadcaster coming back sends two requests, not a GET, a LIST and a watch. One coming back
//!   after a break sends one: its round resumes the watch from the last version it was told
//!   ([`Following::resume`]). (A watch from the version our last round read fails with
//!   410 once that version is old, as after an API server's restart; one from
//!   `resourceVersion=0` shows nothing for an Advertisement deleted just before it: the chaos
//!   soak, seed 4, found one never made again.)
//! - A watch lasts [`watch_seconds`] (20 to 30 periods, each broadcaster at its own place): in
//!   steady state its LIST and itself are its only requests, at most one per peer per 10
//!   periods.
//! - An event showing our Advertisement deleted, or edited away from what we publish, runs a
//!   round at once (repaired within the period, as when every period asked).
//! - A watch that breaks (an error, or an end well before its time: a restarted API server) is
//!   opened again after a wait that spreads the peer's broadcasters over one period
//!   ([`reopen_after`]), then with the rounds' backoff: a restarted hub is not met by all of them
//!   at once.
//! - A peer that does not let us list and watch (403/404/405: an earlier release granted `get`
//!   only) is asked every period instead, as before, and watching is tried again
//!   [`UNWATCHABLE_PERIODS`] later. Only once it refused twice in a row: the first refusal is
//!   tried again as a break is, since a peer's API server may not have read the binding made for
//!   us yet (one broadcaster of 100, set up together, was refused so and then polled for ten
//!   periods).
//!
//! The judging is pure ([`judge`]); [`Following`] holds a broadcaster's watch and when to
//! open it again.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{Api, ListParams, WatchParams};
use kube::core::WatchEvent;
use liqo_api::names::advertisement_name;
use liqo_api::{Advertisement, ResourceSummary};
use tokio::time::Instant;

/// Why a watch failed: the status code the peer answered, if it answered, and what it said.
pub type Failure = (Option<u16>, String);

/// What a watch tells: an event, or why it failed.
pub type Told = Result<WatchEvent<Advertisement>, Failure>;

/// Periods after which a peer that refused our watch is asked to let us watch again.
pub const UNWATCHABLE_PERIODS: u32 = 10;

/// What a broadcaster does after its watch told something (pure decision, see [`judge`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing to do: our Advertisement is as we publish it.
    Keep,
    /// Run a round now; `rewatch`: the watch cannot go on (410) and is opened again.
    Round { rewatch: bool },
    /// The watch ended at its time: open it again now.
    Reopen,
    /// The watch broke: open it again after [`reopen_after`] (the round's backoff after that).
    Broken(String),
    /// The peer does not let us watch: ask every period.
    Unwatchable(String),
}

/// How long a broadcaster's watch lasts, in seconds (pure): 20 to 30 periods, `spread` (0..1)
/// of the way in, so that watches opened together do not all end together.
pub fn watch_seconds(period: Duration, spread: f64) -> u32 {
    let lasts = period.mul_f64(20.0 + 10.0 * spread.clamp(0.0, 1.0));
    lasts.as_secs().clamp(1, 3600) as u32
}

/// The longest a watch lasts for `period`: what the client holding it must wait quietly.
pub fn longest_watch(period: Duration) -> Duration {
    Duration::from_secs(u64::from(watch_seconds(period, 1.0)))
}

/// How long after its watch broke a broadcaster opens it again (pure): `spread` (0..1) of one
/// period, so that the broadcasters of a restarted API server come back spread over a period.
pub fn reopen_after(period: Duration, spread: f64) -> Duration {
    period.mul_f64(spread.clamp(0.0, 1.0))
}

/// What to do after the watch of `own`'s Advertisement, publishing `resources`, told `event`
/// (`None`: it ended) `lasted` into a watch meant to last `lasts` (pure).
pub fn judge(event: Option<Told>, own: &str, resources: &ResourceSummary, lasted: Duration, lasts: Duration) -> Next {
    match event {
        Some(Ok(WatchEvent::Added(adv) | WatchEvent::Modified(adv))) => {
            if adv.spec.cluster_id == own && &adv.spec.resources == resources && adv.metadata.deletion_timestamp.is_none() {
                Next::Keep
            } else {
                Next::Round { rewatch: false }
            }
        }
        Some(Ok(WatchEvent::Deleted(_))) => Next::Round { rewatch: false },
        Some(Ok(WatchEvent::Bookmark(_))) => Next::Keep,
        Some(Ok(WatchEvent::Error(status))) if status.code == 410 => Next::Round { rewatch: true },
        Some(Ok(WatchEvent::Error(status))) => Next::Broken(format!("HTTP {}: {}", status.code, status.message)),
        Some(Err((Some(code), why))) if refused_watch(code) => Next::Unwatchable(why),
        Some(Err((_, why))) => Next::Broken(why),
        // Ended at its time (the server rounds it; a second early is on time).
        None if lasted + Duration::from_secs(1) >= lasts => Next::Reopen,
        None => Next::Broken(format!("the watch ended after {:.1} s of {} s", lasted.as_secs_f64(), lasts.as_secs())),
    }
}

/// Whether a watch the peer answered `code` to cannot be had there (pure): it does not grant
/// `watch` (403; a peer of an earlier release) or does not serve it (404, 405).
pub fn refused_watch(code: u16) -> bool {
    (403..=405).contains(&code)
}

/// Where a broadcaster watches our Advertisement: the peer's API server through `client` (the
/// `generation`-th it made, from `access`, see [`Watch::access`]), ours named after `own`, its
/// watches lasting as [`watch_seconds`] of `period` and `spread` say.
pub struct Target<'a> {
    pub client: &'a kube::Client,
    pub generation: u64,
    pub access: u64,
    pub own: &'a str,
    pub period: Duration,
    pub spread: f64,
}

impl Target<'_> {
    fn api(&self) -> Api<Advertisement> {
        Api::default_namespaced(self.client.clone())
    }
}

/// A broadcaster's watch of its Advertisement, and when to open one.
#[derive(Default)]
pub struct Following {
    watch: Option<Watch>,
    /// Whether a round published our Advertisement: there is something to watch.
    pub published: bool,
    /// Not before then: after a break, or a peer that refused our watch.
    not_before: Option<Instant>,
    /// Breaks in a row, 410s included (reset by a watch that ends at its time).
    breaks: u32,
    /// Refusals in a row (reset by anything a watch tells).
    refusals: u32,
    /// The last version a watch told of ours (an event's or a bookmark's), with the access it
    /// was told to (see [`Watch::access`]): a round after a break resumes from it
    /// ([`Following::resume`]).
    seen: Option<(u64, String)>,
}

struct Watch {
    events: BoxStream<'static, Told>,
    opened: Instant,
    lasts: Duration,
    /// The client generation it was opened with.
    generation: u64,
    /// What the client was made from (a hash of the kubeconfig and the CA): a client made
    /// again from the same reaches the same API server, where a version seen stays valid.
    access: u64,
}

impl Following {
    /// Whether a watch is open (made with client `generation`).
    pub fn watching(&self, generation: u64) -> bool {
        self.watch.as_ref().is_some_and(|w| w.generation == generation)
    }

    /// Whether a watch may be opened now.
    pub fn may_open(&self) -> bool {
        self.watch.is_none() && self.published && self.not_before.is_none_or(|t| Instant::now() >= t)
    }

    /// How long until a watch may be opened (`None`: not waiting for one).
    pub fn until_open(&self) -> Option<Duration> {
        let at = self.not_before?;
        (self.watch.is_none() && self.published).then(|| at.saturating_duration_since(Instant::now()))
    }

    /// Whether a watch is to be opened after a round that succeeds (none open with client
    /// `generation`, none refused: now, or at its place after a break): that round reads by a
    /// LIST the watch starts from.
    pub fn will_open_after_a_round(&self, generation: u64) -> bool {
        !self.watching(generation) && self.refusals == 0
    }

    /// Opens a watch of our Advertisement at `to`, lasting [`watch_seconds`], after a LIST of
    /// it (see the module), or from `version` when the round just before read ours at it. Lazy:
    /// nothing is sent until it is read.
    pub fn open(&mut self, to: &Target<'_>, version: Option<String>) {
        let (api, seconds) = (to.api(), watch_seconds(to.period, to.spread));
        let name = advertisement_name(to.own);
        let fields = format!("metadata.name={name}");
        let (list, params) = (ListParams::default().fields(&fields), WatchParams::default().fields(&fields).timeout(seconds));
        if let Some(version) = version {
            self.seen = Some((to.access, version.clone()));
            let events = futures::stream::once(async move { api.watch(&params, &version).await })
                .flat_map(|opened| match opened {
                    Ok(events) => events.map(|e| e.map_err(failure)).left_stream(),
                    Err(e) => futures::stream::iter([Err(failure(e))]).right_stream(),
                })
                .boxed();
            return self.hold(events, seconds, to);
        }
        let events = futures::stream::once(async move {
            let listed = match api.list(&list).await {
                Ok(listed) => listed,
                Err(e) => return futures::stream::iter([Err(failure(e))]).boxed(),
            };
            let (now, version) = listed_now(listed, &name);
            let watched = futures::stream::once(async move { api.watch(&params, &version).await }).flat_map(|opened| match opened {
                Ok(events) => events.map(|e| e.map_err(failure)).left_stream(),
                Err(e) => futures::stream::iter([Err(failure(e))]).right_stream(),
            });
            futures::stream::iter([Ok(now)]).chain(watched).boxed()
        })
        .flatten()
        .boxed();
        self.hold(events, seconds, to);
    }

    fn hold(&mut self, events: BoxStream<'static, Told>, seconds: u32, to: &Target<'_>) {
        let lasts = Duration::from_secs(seconds.into());
        self.watch = Some(Watch { events, opened: Instant::now(), lasts, generation: to.generation, access: to.access });
    }

    /// The next thing the watch tells, with how long it had lasted and was meant to; pending
    /// for ever while none is open. The version it tells is kept ([`Following::seen`]).
    pub async fn next(&mut self) -> (Option<Told>, Duration, Duration) {
        let Some(w) = &mut self.watch else { return std::future::pending().await };
        let told = w.events.next().await;
        if matches!(told, Some(Ok(_))) {
            self.refusals = 0;
        }
        self.seen = seen_after(self.seen.take(), w.access, told.as_ref());
        (told, w.opened.elapsed(), w.lasts)
    }

    /// The version to resume from with a client made from `access`: the last one a watch
    /// made from the same told.
    pub fn seen(&self, access: u64) -> Option<String> {
        self.seen.as_ref().filter(|(a, _)| *a == access).map(|(_, v)| v.clone())
    }

    /// A round by watch: a watch of our Advertisement at `to` opened from `version` (see
    /// [`Following::seen`]), answered before it returns (the peer reachable, our access
    /// granted), then held as [`Following::open`]'s. A broadcaster back from an outage so
    /// sends one request, not a LIST and a watch: what changed meanwhile, a deletion included,
    /// comes as events; a version too old comes as 410, a round by LIST.
    pub async fn resume(&mut self, to: &Target<'_>, version: &str) -> kube::Result<()> {
        let seconds = watch_seconds(to.period, to.spread);
        let params = WatchParams::default().fields(&format!("metadata.name={}", advertisement_name(to.own))).timeout(seconds);
        let events = to.api().watch(&params, version).await?.map(|e| e.map_err(failure)).boxed();
        (self.not_before, self.breaks) = (None, 0);
        self.hold(events, seconds, to);
        Ok(())
    }

    /// Drops the watch (a round follows, and opens one again).
    pub fn close(&mut self) {
        self.watch = None;
    }

    /// The watch cannot go on (410): a round follows, and the next watch is opened after it,
    /// at once the first time, then as after a break (an API server answering 410 to every
    /// watch is not asked in a loop).
    pub fn expired(&mut self, period: Duration, spread: f64) {
        let breaks = self.breaks;
        self.broke(period, spread);
        if breaks == 0 {
            self.not_before = None;
        }
    }

    /// The watch ended at its time: the next is opened at once.
    pub fn ended(&mut self) {
        (self.watch, self.not_before, self.breaks) = (None, None, 0);
    }

    /// The watch broke: the next is opened after [`reopen_after`], then the rounds' backoff.
    pub fn broke(&mut self, period: Duration, spread: f64) {
        self.breaks = self.breaks.saturating_add(1);
        let wait = if self.breaks == 1 { reopen_after(period, spread) } else { super::backoff(period, self.breaks - 1, spread) };
        (self.watch, self.not_before) = (None, Some(Instant::now() + wait));
    }

    /// The peer does not let us watch: asked again [`UNWATCHABLE_PERIODS`] later, once it
    /// refused twice in a row; the first time as after a break (see the module).
    pub fn refused(&mut self, period: Duration, spread: f64) {
        self.refusals = self.refusals.saturating_add(1);
        if self.refusals == 1 {
            return self.broke(period, spread);
        }
        (self.watch, self.not_before) = (None, Some(Instant::now() + period * UNWATCHABLE_PERIODS));
    }
}

/// The version to resume from after a watch of a client made from `access` told `told` (pure): an
/// event's object's or a bookmark's; none after a 410 (too old: the next round lists); else
/// what was seen before.
pub fn seen_after(before: Option<(u64, String)>, access: u64, told: Option<&Told>) -> Option<(u64, String)> {
    let version = match told {
        Some(Ok(WatchEvent::Added(a) | WatchEvent::Modified(a) | WatchEvent::Deleted(a))) => a.metadata.resource_version.clone(),
        Some(Ok(WatchEvent::Bookmark(b))) => Some(b.metadata.resource_version.clone()),
        Some(Ok(WatchEvent::Error(status))) if status.code == 410 => return None,
        _ => None,
    };
    match version.filter(|v| !v.is_empty()) {
        Some(v) => Some((access, v)),
        None => before,
    }
}

/// What a LIST by `name` before a watch tells (pure): our Advertisement as the API server has
/// it now, or none (told as a deletion), and the version to watch from.
pub fn listed_now(listed: kube::core::ObjectList<Advertisement>, name: &str) -> (WatchEvent<Advertisement>, String) {
    let now = match listed.items.into_iter().next() {
        Some(adv) => WatchEvent::Added(adv),
        None => WatchEvent::Deleted(Advertisement::new(name, Default::default())),
    };
    (now, listed.metadata.resource_version.unwrap_or_default())
}

/// Why a watch failed, from kube's error: the status code when the API server answered one.
pub fn failure(e: kube::Error) -> Failure {
    match &e {
        kube::Error::Api(status) => (Some(status.code), e.to_string()),
        _ => (None, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn adv(id: &str, cpu: &str, version: &str) -> Advertisement {
        let mut a = Advertisement::new(
            "advertisement-x",
            liqo_api::AdvertisementSpec { cluster_id: id.into(), kube_config_ref: None, resources: summary(cpu), timestamp: None },
        );
        a.metadata.resource_version = Some(version.into());
        a
    }

    fn summary(cpu: &str) -> ResourceSummary {
        ResourceSummary { cpu: Some(Quantity(cpu.into())), ..Default::default() }
    }

    #[test]
    fn our_advertisement_as_we_publish_it_is_left_alone_anything_else_runs_a_round() {
        let (lasts, at) = (Duration::from_secs(300), Duration::from_secs(10));
        let ours = summary("2");
        let judge = |e| judge(Some(Ok(e)), "me", &ours, at, lasts);
        assert_eq!(judge(WatchEvent::Added(adv("me", "2", "7"))), Next::Keep);
        assert_eq!(judge(WatchEvent::Modified(adv("me", "2", "8"))), Next::Keep);
        assert_eq!(judge(WatchEvent::Modified(adv("me", "4", "9"))), Next::Round { rewatch: false }, "resources edited");
        assert_eq!(judge(WatchEvent::Modified(adv("other", "2", "9"))), Next::Round { rewatch: false }, "cluster ID edited");
        assert_eq!(judge(WatchEvent::Deleted(adv("me", "2", "10"))), Next::Round { rewatch: false });
        let mut going = adv("me", "2", "11");
        going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()));
        assert_eq!(judge(WatchEvent::Modified(going)), Next::Round { rewatch: false }, "being deleted");
    }

    #[test]
    fn the_version_resumed_from_is_the_last_told_and_none_after_a_410() {
        let bookmark = |v: &str| {
            let mut b: WatchEvent<Advertisement> = serde_json::from_value(serde_json::json!(
                {"type": "BOOKMARK", "object": {"apiVersion": "sharing.liqo.io/v1alpha1", "kind": "Advertisement", "metadata": {"resourceVersion": "0"}}}
            ))
            .unwrap();
            if let WatchEvent::Bookmark(m) = &mut b {
                m.metadata.resource_version = v.to_owned();
            }
            b
        };
        let told = |e: WatchEvent<Advertisement>| Some(Ok(e));
        assert_eq!(seen_after(None, 7, told(WatchEvent::Added(adv("a", "1", "5"))).as_ref()), Some((7, "5".into())));
        assert_eq!(seen_after(Some((7, "5".into())), 7, told(bookmark("9")).as_ref()), Some((7, "9".into())));
        let gone = kube::core::Status::failure("too old resource version", "Expired").with_code(410);
        assert_eq!(seen_after(Some((7, "9".into())), 7, told(WatchEvent::Error(gone.into())).as_ref()), None, "too old: list");
        // A break, or an event without a version, keeps what was seen.
        assert_eq!(seen_after(Some((7, "9".into())), 7, Some(&Err((None, "reset".into())))), Some((7, "9".into())));
        assert_eq!(seen_after(Some((7, "9".into())), 7, None), Some((7, "9".into())));
        let none = WatchEvent::Deleted(Advertisement::new("a", Default::default()));
        assert_eq!(seen_after(Some((7, "9".into())), 7, told(none).as_ref()), Some((7, "9".into())));
    }

    #[test]
    fn a_watch_too_old_runs_a_round_and_watches_again_one_that_breaks_waits_its_turn() {
        let (lasts, ours) = (Duration::from_secs(300), summary("2"));
        let gone = kube::core::Status::failure("too old resource version", "Expired").with_code(410);
        assert_eq!(
            judge(Some(Ok(WatchEvent::Error(Box::new(gone)))), "me", &ours, Duration::from_secs(3), lasts),
            Next::Round { rewatch: true }
        );
        let other = kube::core::Status::failure("internal", "InternalError").with_code(500);
        assert!(matches!(judge(Some(Ok(WatchEvent::Error(Box::new(other)))), "me", &ours, Duration::ZERO, lasts), Next::Broken(_)));
        assert!(matches!(judge(Some(Err((None, "reset".into()))), "me", &ours, Duration::ZERO, lasts), Next::Broken(_)));
        assert!(matches!(judge(Some(Err((Some(503), "busy".into()))), "me", &ours, Duration::ZERO, lasts), Next::Broken(_)));
        assert!(
            matches!(judge(Some(Err((Some(403), "no watch verb".into()))), "me", &ours, Duration::ZERO, lasts), Next::Unwatchable(_)),
            "an earlier release's peer: polled"
        );
        assert_eq!(judge(None, "me", &ours, Duration::from_millis(299_500), lasts), Next::Reopen, "ended at its time");
        assert!(matches!(judge(None, "me", &ours, Duration::from_secs(40), lasts), Next::Broken(_)), "ended early: a restart");
    }

    #[test]
    fn watches_last_20_to_30_periods_and_reopen_spread_over_one() {
        let period = Duration::from_secs(30);
        assert_eq!(watch_seconds(period, 0.0), 600);
        assert_eq!(watch_seconds(period, 1.0), 900);
        assert_eq!(watch_seconds(period, 0.5), 750);
        assert_eq!(watch_seconds(Duration::from_millis(40), 0.0), 1, "never zero: 0 means no timeout");
        assert_eq!(watch_seconds(Duration::from_secs(3600), 1.0), 3600, "capped");
        assert_eq!(longest_watch(period), Duration::from_secs(900));
        assert_eq!(reopen_after(period, 0.0), Duration::ZERO);
        assert_eq!(reopen_after(period, 0.5), Duration::from_secs(15));
        assert_eq!(reopen_after(period, 7.0), period, "within the period");
        // A LIST and a watch per watch: at most one request per peer per 10 periods.
        assert!(2.0 * period.as_secs_f64() / f64::from(watch_seconds(period, 0.0)) <= 0.1);
    }

    #[test]
    fn a_watch_answered_410_again_and_again_is_not_opened_in_a_loop() {
        let period = Duration::from_secs(30);
        let mut f = Following { published: true, ..Following::default() };
        f.expired(period, 0.5);
        assert!(f.may_open(), "the first 410: opened again after the round, at once");
        f.expired(period, 0.5);
        assert!(!f.may_open(), "the second in a row waits");
        assert!(f.until_open().is_some_and(|d| d > Duration::ZERO && d <= period));
        f.ended();
        assert!(f.may_open(), "a watch that lasted its time starts over");
        f.broke(period, 0.0);
        assert!(f.may_open(), "a break at the window's start: at once");
        f.broke(period, 0.0);
        assert!(!f.may_open(), "the second break in a row backs off");
        let mut unpublished = Following::default();
        unpublished.ended();
        assert!(!unpublished.may_open(), "nothing published: nothing to watch");
    }

    #[test]
    fn a_first_refusal_is_tried_again_within_the_period_a_second_waits_ten() {
        let period = Duration::from_secs(30);
        let mut f = Following { published: true, ..Following::default() };
        f.refused(period, 0.5);
        assert!(f.until_open().is_some_and(|d| d > Duration::ZERO && d <= period / 2), "as a break: {:?}", f.until_open());
        f.refused(period, 0.5);
        let wait = f.until_open().unwrap();
        assert!(wait > period * (UNWATCHABLE_PERIODS - 1) && wait <= period * UNWATCHABLE_PERIODS, "{wait:?}");
        f.refusals = 0; // (what a watch that told anything does)
        f.refused(period, 0.0);
        assert!(f.until_open().is_some_and(|d| d <= period), "refused once again: a first refusal, {:?}", f.until_open());
    }

    #[test]
    fn a_peer_that_does_not_grant_or_serve_watch_is_polled() {
        assert!(refused_watch(403) && refused_watch(404) && refused_watch(405));
        assert!(!refused_watch(401), "a revocation is not a missing verb");
        assert!(!refused_watch(500) && !refused_watch(429));
    }
}
