//! Log lines rate-limited per cause, so an outage that lasts minutes does not flood the log.
//!
//! A cause is a call site (one `warn!` in the code) and, where the event carries one, its
//! `cause` field (an error's stable label). The first line of a cause is written; the same
//! cause again within the interval is only counted. When the interval ends with lines
//! counted, one summary says how many and what the first one was, and the next interval
//! counts without writing (the outage goes on: one summary per interval); an interval that
//! counts nothing ends the episode, and the next line of that cause is written again.
//! Only INFO, WARN and ERROR are limited (DEBUG and TRACE are off unless asked for).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::callsite::Identifier;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata};
use tracing_subscriber::layer::{Context, Filter};

/// Target of the summaries (never limited themselves).
pub const SUMMARY_TARGET: &str = "liqo::quiet";

/// What one cause did in the current interval.
#[derive(Debug)]
struct Episode {
    level: Level,
    started: Instant,
    /// The first line of the episode (target and message), for the summary.
    first: String,
    /// Lines counted, not written, in this interval.
    counted: u64,
    /// Whether this interval writes its first line (false once a summary was written: the
    /// episode goes on).
    writes_first: bool,
}

/// A summary due: level, lines counted, the first line, the interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub level: Level,
    pub counted: u64,
    pub first: String,
}

/// The per-cause limiter (pure but for the clock it is given).
#[derive(Debug)]
pub struct Limiter {
    interval: Duration,
    episodes: HashMap<(Identifier, String), Episode>,
}

impl Limiter {
    pub fn new(interval: Duration) -> Self {
        Self { interval, episodes: HashMap::new() }
    }

    /// Whether a line of `cause` at `now` is written (else it is counted).
    pub fn admit(&mut self, site: Identifier, cause: String, level: Level, describe: impl FnOnce() -> String, now: Instant) -> bool {
        let episode = self.episodes.entry((site, cause)).or_insert_with(|| Episode {
            level,
            started: now,
            first: describe(),
            counted: 0,
            writes_first: true,
        });
        if episode.writes_first {
            episode.writes_first = false;
            return true;
        }
        episode.counted += 1;
        false
    }

    /// The summaries of the intervals ended by `now`; ends the episodes that counted nothing.
    pub fn due(&mut self, now: Instant) -> Vec<Summary> {
        let interval = self.interval;
        let mut out = Vec::new();
        self.episodes.retain(|_, e| {
            if now.duration_since(e.started) < interval {
                return true;
            }
            if e.counted == 0 {
                return false;
            }
            out.push(Summary { level: e.level, counted: e.counted, first: e.first.clone() });
            e.counted = 0;
            e.started = now;
            true
        });
        out
    }

    /// Causes followed now (bounded by the call sites and their `cause` labels).
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }
}

/// A per-layer filter over [`Limiter`]; [`Quiet::spawn_summaries`] writes the summaries.
#[derive(Clone, Debug)]
pub struct Quiet {
    limiter: Arc<Mutex<Limiter>>,
}

impl Quiet {
    pub fn new(interval: Duration) -> Self {
        Self { limiter: Arc::new(Mutex::new(Limiter::new(interval))) }
    }

    /// Writes the summaries as they fall due, from a thread of its own, for the process's life.
    pub fn spawn_summaries(&self) {
        let interval = self.limiter.lock().map(|l| l.interval).unwrap_or(Duration::from_secs(10));
        let (limiter, tick) = (self.limiter.clone(), (interval / 4).max(Duration::from_millis(100)));
        let spawned = std::thread::Builder::new().name("log-summaries".into()).spawn(move || {
            loop {
                std::thread::sleep(tick);
                let due = limiter.lock().map(|mut l| l.due(Instant::now())).unwrap_or_default();
                for s in due {
                    write_summary(&s);
                }
            }
        });
        if let Err(e) = spawned {
            eprintln!("log summaries disabled: {e}");
        }
    }
}

fn write_summary(s: &Summary) {
    let (n, first) = (s.counted, s.first.as_str());
    match s.level {
        Level::ERROR => tracing::error!(target: SUMMARY_TARGET, suppressed = n, "{n} more like this since the last line: {first}"),
        Level::WARN => tracing::warn!(target: SUMMARY_TARGET, suppressed = n, "{n} more like this since the last line: {first}"),
        _ => tracing::info!(target: SUMMARY_TARGET, suppressed = n, "{n} more like this since the last line: {first}"),
    }
}

/// The `message` and `cause` fields of an event.
#[derive(Default)]
struct Fields {
    message: String,
    cause: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "cause" => self.cause = value.to_owned(),
            "message" => self.message = value.to_owned(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "cause" => {
                let _ = write!(self.cause, "{value:?}");
            }
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            _ => {}
        }
    }
}

impl<S> Filter<S> for Quiet {
    fn enabled(&self, _meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _cx: &Context<'_, S>) -> bool {
        let meta = event.metadata();
        if *meta.level() > Level::INFO || meta.target() == SUMMARY_TARGET {
            return true;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let describe = || format!("{}: {}", meta.target(), fields.message);
        let Ok(mut limiter) = self.limiter.lock() else { return true };
        limiter.admit(meta.callsite(), fields.cause.clone(), *meta.level(), describe, Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> Identifier {
        struct Site;
        static SITE: Site = Site;
        impl tracing::callsite::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unimplemented!("not called")
            }
        }
        Identifier(&SITE)
    }

    #[test]
    fn an_outage_writes_its_first_line_then_one_summary_per_interval() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut l = Limiter::new(Duration::from_secs(10));
        let line = || "reconciler: peer unreachable".to_owned();
        // 100 s of an outage, a line every second: the first written, the rest counted.
        let mut written = 0;
        let mut summaries = Vec::new();
        for i in 0..100u32 {
            let now = t0 + s * i;
            summaries.extend(l.due(now));
            if l.admit(site(), "RemoteUnreachable".into(), Level::WARN, line, now) {
                written += 1;
            }
        }
        assert_eq!(written, 1, "one line written");
        assert_eq!(summaries.len(), 9, "then one summary per 10 s");
        assert_eq!(summaries[0], Summary { level: Level::WARN, counted: 9, first: line() });
        assert!(summaries[1..].iter().all(|s| s.counted == 10), "{summaries:?}");
        // The outage ends: the last count is told, then the episode ends.
        assert_eq!(l.due(t0 + s * 105).len(), 1);
        assert!(l.due(t0 + s * 120).is_empty());
        assert!(l.is_empty(), "an interval that counts nothing ends the episode");
        // The next line of that cause is written again.
        assert!(l.admit(site(), "RemoteUnreachable".into(), Level::WARN, line, t0 + s * 130));
    }

    #[test]
    fn causes_are_limited_apart() {
        let t0 = Instant::now();
        let mut l = Limiter::new(Duration::from_secs(10));
        let line = || "x".to_owned();
        assert!(l.admit(site(), "RemoteUnreachable".into(), Level::WARN, line, t0));
        assert!(l.admit(site(), "PeerRefused".into(), Level::WARN, line, t0), "another cause at the same site");
        assert!(!l.admit(site(), "RemoteUnreachable".into(), Level::WARN, line, t0));
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn under_a_level_filter_repeats_are_counted_and_spans_and_other_causes_pass() {
        use tracing_subscriber::Layer;
        use tracing_subscriber::filter::FilterExt;
        use tracing_subscriber::layer::SubscriberExt;
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let layer = tracing_subscriber::fmt::layer().with_ansi(false).with_writer(move || writer.clone());
        let filter = tracing_subscriber::EnvFilter::new("info").and(Quiet::new(Duration::from_secs(3600)));
        let subscriber = tracing_subscriber::registry().with(layer.with_filter(filter));
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..50 {
                let span = tracing::info_span!("reconciling object", object.ref = %format!("fc-{i}"));
                let _in = span.enter();
                tracing::warn!(cause = "RemoteUnreachable", "peer unreachable");
                tracing::debug!("below the level");
            }
            tracing::warn!(cause = "PeerRefused", "peer refused");
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches("peer unreachable").count(), 1, "{text}");
        assert!(text.contains("reconciling object{object.ref=fc-0}"), "the span's fields are on the line: {text}");
        assert_eq!(text.matches("peer refused").count(), 1, "{text}");
        assert!(!text.contains("below the level"), "{text}");
    }
}
