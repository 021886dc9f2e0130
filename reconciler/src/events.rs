//! Kubernetes Events: one way to publish them for every controller. Publishing is best
//! effort: a failure is logged at debug level and never fails a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder};

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
