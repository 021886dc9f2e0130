//! Status conditions by the Kubernetes conventions: one per type, `lastTransitionTime` kept
//! unless the status flips, `observedGeneration` recorded (pure).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition to record: type, status, reason (CamelCase), message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted<'a> {
    pub type_: &'a str,
    pub status: bool,
    pub reason: &'a str,
    pub message: String,
}

fn status_str(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Sets `wanted` in `conditions`. Returns true when anything changed. `lastTransitionTime`
/// moves only when the status flips (or the condition is new).
pub fn set(conditions: &mut Vec<Condition>, wanted: Wanted<'_>, generation: Option<i64>, now: Time) -> bool {
    let status = status_str(wanted.status);
    match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        Some(c) => {
            let changed =
                c.status != status || c.reason != wanted.reason || c.message != wanted.message || c.observed_generation != generation;
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status.to_owned();
            c.reason = wanted.reason.to_owned();
            c.message = wanted.message;
            c.observed_generation = generation;
            changed
        }
        None => {
            conditions.push(Condition {
                type_: wanted.type_.to_owned(),
                status: status.to_owned(),
                reason: wanted.reason.to_owned(),
                message: wanted.message,
                observed_generation: generation,
                last_transition_time: now,
            });
            true
        }
    }
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

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut cs = vec![];
        let w = |status, reason: &'static str| Wanted { type_: "Joined", status, reason, message: "m".into() };
        assert!(set(&mut cs, w(false, "Pending"), Some(1), t(10)));
        assert_eq!(cs[0].last_transition_time, t(10));
        // Same everything: no change at all.
        assert!(!set(&mut cs, w(false, "Pending"), Some(1), t(20)));
        // New reason, same status: recorded, transition time kept.
        assert!(set(&mut cs, w(false, "RemoteUnreachable"), Some(1), t(30)));
        assert_eq!((cs[0].reason.as_str(), &cs[0].last_transition_time), ("RemoteUnreachable", &t(10)));
        // New generation only: recorded.
        assert!(set(&mut cs, w(false, "RemoteUnreachable"), Some(2), t(35)));
        assert_eq!(cs[0].observed_generation, Some(2));
        // Status flips: transition time moves.
        assert!(set(&mut cs, w(true, "Joined"), Some(2), t(40)));
        assert_eq!((cs[0].status.as_str(), &cs[0].last_transition_time), ("True", &t(40)));
        assert!(is_true(&cs, "Joined"));
        assert!(!is_true(&cs, "Other"));
        assert_eq!(cs.len(), 1);
    }
}
