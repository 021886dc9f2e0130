//! Status conditions by the Kubernetes conventions: one per type, `lastTransitionTime` kept
//! unless the status flips, `observedGeneration` recorded (pure). Types and reasons are the
//! typed ones of [`liqo_api::reasons`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use liqo_api::reasons::{ConditionType, Reason, Status};

/// The condition to record: type, status, reason, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub type_: ConditionType,
    pub status: Status,
    pub reason: Reason,
    pub message: String,
}

impl Wanted {
    pub fn new(type_: ConditionType, status: Status, reason: Reason, message: impl Into<String>) -> Self {
        Self { type_, status, reason, message: message.into() }
    }
}

/// `wanted` as a condition, keeping `previous`'s `lastTransitionTime` unless the status flips.
fn condition(previous: Option<&Condition>, wanted: Wanted, generation: Option<i64>, now: &Time) -> Condition {
    let status = wanted.status.as_str();
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => now.clone(),
    };
    Condition {
        type_: wanted.type_.as_str().to_owned(),
        status: status.to_owned(),
        reason: wanted.reason.as_str().to_owned(),
        message: wanted.message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Sets `wanted` in `conditions`, leaving the others. Returns true when anything changed.
pub fn set(conditions: &mut Vec<Condition>, wanted: Wanted, generation: Option<i64>, now: Time) -> bool {
    let type_ = wanted.type_.as_str();
    let position = conditions.iter().position(|c| c.type_ == type_);
    let new = condition(position.map(|i| &conditions[i]), wanted, generation, &now);
    match position {
        Some(i) if conditions[i] == new => false,
        Some(i) => {
            conditions[i] = new;
            true
        }
        None => {
            conditions.push(new);
            true
        }
    }
}

/// The whole set: exactly the `wanted` conditions, in that order, each keeping its
/// `lastTransitionTime` from `previous` unless its status flips.
pub fn set_all(previous: &[Condition], wanted: Vec<Wanted>, generation: Option<i64>, now: &Time) -> Vec<Condition> {
    wanted.into_iter().map(|w| condition(get(previous, w.type_.as_str()), w, generation, now)).collect()
}

/// The condition of `type_`, if any.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when the condition of `type_` is `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn w(status: Status, reason: Reason) -> Wanted {
        Wanted::new(ConditionType::Joined, status, reason, "m")
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut cs = vec![];
        assert!(set(&mut cs, w(Status::False, Reason::Waiting), Some(1), t(10)));
        assert_eq!(cs[0].last_transition_time, t(10));
        // Same everything: no change at all.
        assert!(!set(&mut cs, w(Status::False, Reason::Waiting), Some(1), t(20)));
        // New reason, same status: recorded, transition time kept.
        assert!(set(&mut cs, w(Status::False, Reason::RemoteUnreachable), Some(1), t(30)));
        assert_eq!((cs[0].reason.as_str(), &cs[0].last_transition_time), ("RemoteUnreachable", &t(10)));
        // New generation only: recorded.
        assert!(set(&mut cs, w(Status::False, Reason::RemoteUnreachable), Some(2), t(35)));
        assert_eq!(cs[0].observed_generation, Some(2));
        // Status flips: transition time moves.
        assert!(set(&mut cs, w(Status::True, Reason::Joined), Some(2), t(40)));
        assert_eq!((cs[0].status.as_str(), &cs[0].last_transition_time), ("True", &t(40)));
        assert!(is_true(&cs, "Joined"));
        assert!(!is_true(&cs, "Other"));
        assert_eq!(cs.len(), 1);
    }

    #[test]
    fn the_whole_set_replaces_the_previous_one() {
        let previous = vec![
            condition(None, Wanted::new(ConditionType::Trusted, Status::True, Reason::Trusted, "ok"), Some(1), &t(10)),
            condition(None, w(Status::True, Reason::Joined), Some(1), &t(10)),
        ];
        let set = set_all(
            &previous,
            vec![Wanted::new(ConditionType::Trusted, Status::Unknown, Reason::NotJoined, "join is false"), w(Status::True, Reason::Joined)],
            Some(2),
            &t(50),
        );
        assert_eq!(set.len(), 2);
        assert_eq!((set[0].status.as_str(), set[0].reason.as_str(), &set[0].last_transition_time), ("Unknown", "NotJoined", &t(50)));
        assert_eq!((set[1].observed_generation, &set[1].last_transition_time), (Some(2), &t(10)));
        // Conditions not wanted any more are gone.
        assert!(set_all(&previous, vec![], Some(2), &t(50)).is_empty());
    }
}
