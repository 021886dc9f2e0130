//! The leader's record of when it last checked each joined peer (ConfigMap
//! `liqo-last-checks`, see [`liqo_api::last_checks`]: one line while all are checked on time, a
//! line more for each late peer): written every half health period while it leads, first one
//! health period after it began (by then it has checked every joined peer; an earlier record
//! would drop the peers it has not reached yet), and only when it changed. Best effort: a
//! failed write is tried again at the next turn, and nothing else waits on it.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::last_checks::{CONFIGMAP, KEY, MAX_BYTES, OMITTED_ANNOTATION, render};

/// The field manager of the record's writes.
pub const FIELD_MANAGER: &str = "liqo-reconciler-checks";

/// The ConfigMap's body for `text`, with `omitted` peers left out (pure).
pub fn body(text: String, omitted: usize) -> serde_json::Value {
    let omitted = if omitted > 0 { serde_json::Value::String(omitted.to_string()) } else { serde_json::Value::Null };
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP,
            "labels": {"app.kubernetes.io/part-of": "liqo", "app.kubernetes.io/component": "reconciler"},
            "annotations": {OMITTED_ANNOTATION: omitted},
        },
        "data": {KEY: text},
    })
}

/// Writes the record of `metrics.checks` to `namespace` every `period / 2` until `shutdown`, the first
/// one `period` from now.
pub async fn keep(
    client: Client,
    namespace: String,
    metrics: Arc<crate::reporting::metrics::Metrics>,
    period: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let every = (period / 2).max(Duration::from_secs(1));
    let writing = async {
        tokio::time::sleep(period).await;
        let mut written: Option<String> = None;
        loop {
            let now = SystemTime::now();
            let mut checks = metrics.checks.at_times((Instant::now(), now));
            let now = k8s_openapi::jiff::Timestamp::try_from(now).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
            let (text, omitted) = render(&mut checks, now, period, MAX_BYTES);
            if written.as_deref() != Some(text.as_str()) {
                match write(&api, text.clone(), omitted).await {
                    Ok(()) => written = Some(text),
                    Err(e) => {
                        tracing::debug!(error = %e, configmap = CONFIGMAP, "writing the record of the last checks failed; tried again later")
                    }
                }
                if omitted > 0 {
                    tracing::warn!(omitted, configmap = CONFIGMAP, "the record of the last checks is full: some peers are left out of it");
                }
            }
            tokio::time::sleep(every).await;
        }
    };
    tokio::select! {
        _ = writing => {}
        _ = shutdown => {}
    }
}

/// One write: a JSON merge patch of the whole record (small: a line, and one a late peer), or
/// a create if it is not there.
async fn write(api: &Api<ConfigMap>, text: String, omitted: usize) -> kube::Result<()> {
    let body = body(text, omitted);
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    match api.patch(CONFIGMAP, &params, &Patch::Merge(&body)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let mut body = body;
            if body["metadata"]["annotations"][OMITTED_ANNOTATION].is_null() {
                body["metadata"].as_object_mut().map(|m| m.remove("annotations"));
            }
            let cm: ConfigMap = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
            let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            api.create(&params, &cm).await.map(|_| ())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_says_what_was_left_out_and_clears_it_once_all_fit() {
        let full = body("a 2026-12-04T15:00:00Z\n".into(), 3);
        assert_eq!(full["metadata"]["annotations"][OMITTED_ANNOTATION], "3");
        assert_eq!(full["data"][KEY], "a 2026-12-04T15:00:00Z\n");
        // A merge patch's null removes an annotation left by an earlier, fuller record.
        assert!(body(String::new(), 0)["metadata"]["annotations"][OMITTED_ANNOTATION].is_null());
    }
}
