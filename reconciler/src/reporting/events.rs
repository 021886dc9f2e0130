//! Kubernetes Events: one way to publish them for every controller. Publishing is best
//! effort: a failure is logged at debug level and never fails a reconcile.
//!
//! Our own [`Recorder`] rather than kube's: kube's keeps the whole last Event of each series
//! (about 1.5 KiB in memory) in a map it never shrinks, which held 12 MiB at 1,000 joined
//! peers and, by the same measure, would hold about 90 MiB at 10,000 (docs/scaling.md). Ours
//! keeps what a series needs (the Event's name and namespace, its count, when it was last
//! seen: about 100 bytes) under a 64-bit key, drops a series six minutes after its last Event
//! as kube's does, and gives the memory back.
//!
//! Each kind of Event has a budget ([`crate::reporting::event_budget`]): a mass transition's Events
//! over it are counted and told in one Event about the reconciler's Lease
//! ([`Recorder::tell_left_out`]).

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};

use crate::reporting::event_budget::{Budget, Kind};

pub use kube::runtime::events::{Event, EventType, Reporter};

/// How long a series stays open after its last Event (kube's and client-go's figure).
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);
/// Closed series are dropped at most this often (each drop walks every open series).
const PRUNE_EVERY: Duration = Duration::from_secs(30);

/// Publishes Events, the repeats of one (same object, type, action and reason within
/// [`SERIES_TTL`]) as a series: one Event whose `series.count` grows.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    controller: String,
    instance: String,
    series: Arc<Mutex<Series>>,
    budget: Arc<Mutex<Budget>>,
}

impl Recorder {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let instance = reporter.instance.unwrap_or_else(|| reporter.controller.clone());
        let budget = Budget::new(crate::reporting::event_budget::DEFAULT_PER_SECOND, crate::reporting::event_budget::DEFAULT_BURST);
        Self { client, controller: reporter.controller, instance, series: Arc::default(), budget: Arc::new(Mutex::new(budget)) }
    }

    /// Events of one kind a second after a burst (`per_second` ≤ 0: no budget).
    pub fn with_budget(mut self, per_second: f64, burst: u32) -> Self {
        self.budget = Arc::new(Mutex::new(Budget::new(per_second, burst)));
        self
    }

    /// Creates the Event, or adds one to its open series; an Event over its kind's budget is
    /// only counted.
    pub async fn publish(&self, ev: &Event, regarding: &ObjectReference) -> kube::Result<()> {
        if !self.budget.lock().expect("not poisoned").take(&kind(ev, regarding), Instant::now()) {
            return Ok(());
        }
        let key = key(ev, regarding);
        let now = Instant::now();
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".into());
        let api = Api::<K8sEvent>::namespaced(self.client.clone(), &namespace);
        let step = self.series.lock().expect("not poisoned").next(key, now);
        if let Step::Repeat { name, count } = step {
            let series =
                serde_json::json!({"series": {"count": count, "lastObservedTime": MicroTime(k8s_openapi::jiff::Timestamp::now())}});
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&series)).await {
                Ok(_) => {
                    self.series.lock().expect("not poisoned").record(key, name, count, now);
                    return Ok(());
                }
                // Gone (its TTL in the API server, or deleted): a new series.
                Err(e) if crate::machinery::error::is_not_found(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let created = api.create(&PostParams::default(), &self.event(ev, regarding, &namespace)).await?;
        self.series.lock().expect("not poisoned").record(key, created.metadata.name.unwrap_or_default(), 1, now);
        Ok(())
    }

    /// Every [`crate::reporting::event_budget::SUMMARY_EVERY`], tells each kind's Events left out
    /// since the last time in one new Event of the same type, action and reason about `about` (the
    /// reconciler's Lease), and adds them to `counted`. Runs until dropped.
    pub async fn tell_left_out(self, about: ObjectReference, counted: crate::reporting::metrics::EventsLeftOut) {
        let mut tick = tokio::time::interval(crate::reporting::event_budget::SUMMARY_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let namespace = about.namespace.clone().unwrap_or_else(|| "default".into());
        let api = Api::<K8sEvent>::namespaced(self.client.clone(), &namespace);
        loop {
            tick.tick().await;
            let told: Vec<_> = {
                let mut budget = self.budget.lock().expect("not poisoned");
                budget.left_out(Instant::now()).into_iter().map(|(kind, count)| (budget.note(&kind, count), kind, count)).collect()
            };
            for (note, kind, count) in told {
                counted.get_or_create(&crate::reporting::metrics::ReasonLabels { reason: kind.reason.clone() }).inc_by(count);
                tracing::info!(reason = kind.reason, count, "Events over their budget left out");
                let ev = Event {
                    type_: if kind.warning { EventType::Warning } else { EventType::Normal },
                    reason: kind.reason,
                    note: Some(note),
                    action: kind.action,
                    secondary: None,
                };
                if let Err(e) = api.create(&PostParams::default(), &self.event(&ev, &about, &namespace)).await {
                    tracing::debug!(error = %e, "publishing the Events left out failed");
                }
            }
        }
    }

    fn event(&self, ev: &Event, regarding: &ObjectReference, namespace: &str) -> K8sEvent {
        let now = k8s_openapi::jiff::Timestamp::now();
        let object = regarding.name.as_deref().unwrap_or(&self.controller);
        K8sEvent {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            note: ev.note.clone(),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: ev.secondary.clone(),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(match ev.type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            ..Default::default()
        }
    }
}

/// What identifies a series: the object (its UID, kind and name) and the Event's type, action
/// and reason (not its note: a series' note is its first Event's, as with kube's recorder).
fn key(ev: &Event, regarding: &ObjectReference) -> u64 {
    let mut h = DefaultHasher::new();
    (&regarding.api_version, &regarding.kind, &regarding.namespace, &regarding.name, &regarding.uid).hash(&mut h);
    (matches!(ev.type_, EventType::Warning), &ev.action, &ev.reason).hash(&mut h);
    ev.secondary.as_ref().map(|s| (&s.kind, &s.namespace, &s.name, &s.uid)).hash(&mut h);
    h.finish()
}

/// The kind of an Event, as its budget is kept.
fn kind(ev: &Event, regarding: &ObjectReference) -> Kind {
    Kind {
        warning: matches!(ev.type_, EventType::Warning),
        action: ev.action.clone(),
        reason: ev.reason.clone(),
        about: regarding.kind.clone().unwrap_or_default(),
    }
}

/// The open series (pure: no I/O, time given).
#[derive(Default)]
struct Series {
    open: HashMap<u64, Open>,
    pruned: Option<Instant>,
}

struct Open {
    name: String,
    count: i32,
    last: Instant,
}

#[derive(Debug, PartialEq)]
enum Step {
    /// A new Event.
    Create,
    /// The Event `name` seen `count` times now.
    Repeat { name: String, count: i32 },
}

impl Series {
    fn next(&mut self, key: u64, now: Instant) -> Step {
        self.prune(now);
        match self.open.get(&key) {
            Some(o) if now.duration_since(o.last) < SERIES_TTL => Step::Repeat { name: o.name.clone(), count: o.count + 1 },
            _ => Step::Create,
        }
    }

    fn record(&mut self, key: u64, name: String, count: i32, now: Instant) {
        self.open.insert(key, Open { name, count, last: now });
    }

    /// Drops series closed for [`SERIES_TTL`] (at most every [`PRUNE_EVERY`]) and gives their
    /// room back once the map is mostly empty.
    fn prune(&mut self, now: Instant) {
        if self.pruned.is_some_and(|at| now.duration_since(at) < PRUNE_EVERY) {
            return;
        }
        self.pruned = Some(now);
        self.open.retain(|_, o| now.duration_since(o.last) < SERIES_TTL);
        if self.open.capacity() > 4 * self.open.len() + 64 {
            self.open.shrink_to_fit();
        }
    }
}

/// Publishes an Event about `object` (nothing without a recorder, as in unit tests).
pub async fn publish<K: Resource<DynamicType = ()>>(
    recorder: Option<&Recorder>,
    object: &K,
    warning: bool,
    action: &str,
    reason: &str,
    note: String,
) {
    let Some(recorder) = recorder else { return };
    let ev = Event {
        type_: if warning { EventType::Warning } else { EventType::Normal },
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    let reference: ObjectReference = object.object_ref(&());
    if let Err(e) = recorder.publish(&ev, &reference).await {
        tracing::debug!(error = %e, reason, "publishing an Event failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str) -> Event {
        Event { type_: EventType::Warning, reason: reason.into(), note: Some("n".into()), action: "Check".into(), secondary: None }
    }

    fn object(name: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("ForeignCluster".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        }
    }

    #[test]
    fn a_repeat_within_the_ttl_adds_to_its_series_and_after_it_starts_a_new_one() {
        let mut s = Series::default();
        let t0 = Instant::now();
        let k = key(&event("RemoteUnreachable"), &object("a"));
        assert_eq!(s.next(k, t0), Step::Create);
        s.record(k, "a.1".into(), 1, t0);
        assert_eq!(s.next(k, t0 + Duration::from_secs(60)), Step::Repeat { name: "a.1".into(), count: 2 });
        s.record(k, "a.1".into(), 2, t0 + Duration::from_secs(60));
        // The TTL counts from the last Event of the series, not its first.
        assert_eq!(
            s.next(k, t0 + Duration::from_secs(60) + SERIES_TTL - Duration::from_secs(1)),
            Step::Repeat { name: "a.1".into(), count: 3 }
        );
        assert_eq!(s.next(k, t0 + Duration::from_secs(60) + SERIES_TTL), Step::Create);
    }

    #[test]
    fn series_are_told_apart_by_object_and_reason_not_by_note() {
        let a = key(&event("RemoteUnreachable"), &object("a"));
        assert_ne!(a, key(&event("RemoteUnreachable"), &object("b")));
        assert_ne!(a, key(&event("Joined"), &object("a")));
        let mut other_note = event("RemoteUnreachable");
        other_note.note = Some("other".into());
        assert_eq!(a, key(&other_note, &object("a")));
        let mut normal = event("RemoteUnreachable");
        normal.type_ = EventType::Normal;
        assert_ne!(a, key(&normal, &object("a")));
    }

    /// 10,000 peers' series after a mass outage are dropped once closed, and the map's room is
    /// given back (kube's recorder kept it: 12 MiB at 1,000 peers).
    #[test]
    fn closed_series_are_dropped_and_their_room_given_back() {
        let mut s = Series::default();
        let t0 = Instant::now();
        for i in 0..10_000u64 {
            s.record(i, format!("peer-{i}.1"), 1, t0);
        }
        let full = s.open.capacity();
        assert!(full >= 10_000);
        // Within the TTL nothing is dropped; pruning is at most every PRUNE_EVERY.
        s.next(u64::MAX, t0 + Duration::from_secs(1));
        assert_eq!(s.open.len(), 10_000);
        s.record(7, "peer-7.1".into(), 2, t0 + SERIES_TTL);
        s.next(u64::MAX, t0 + SERIES_TTL + Duration::from_secs(1));
        assert_eq!(s.open.len(), 1, "only the series with a recent Event stays");
        assert!(s.open.capacity() < full / 100, "capacity {} after pruning (was {full})", s.open.capacity());
    }
}
