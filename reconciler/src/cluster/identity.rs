//! Cluster identity (protocol §2): the `cluster-id` ConfigMap in the Liqo namespace, created once,
//! never rewritten, re-created when deleted, and recorded outside the Liqo namespace so that a
//! reinstall finds the same ID.
//!
//! A missing ConfigMap is made with, in this order: the ID recorded on the `kube-system`
//! namespace (annotation [`RECORD_ANNOTATION`], written by every install since 0.4, so deleting
//! the Liqo namespace and installing again keeps the ID peers know), the About API's
//! ClusterProperty [`ABOUT_PROPERTY`] (KEP-2149), the UID of the `kube-system` namespace (there
//! on every cluster, managed ones included, and stable for the cluster's life). Once the
//! ConfigMap holds an ID, [`record`] writes it on `kube-system`, and in a ClusterProperty where
//! that CRD is installed and nobody set one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use liqo_api::names::{CLUSTER_ID_CONFIGMAP, CLUSTER_ID_KEY};
use serde_json::json;
use tokio::sync::watch;

use crate::machinery::error::{Result, is_conflict};
use crate::machinery::singleton::Singleton;

/// The namespace whose UID is a new cluster's ID, and which records the ID in use.
pub const KUBE_SYSTEM: &str = "kube-system";
/// The annotation on [`KUBE_SYSTEM`] that records this cluster's ID.
pub const RECORD_ANNOTATION: &str = "discovery.liqo.io/cluster-id";
/// The About API's ClusterProperty naming the cluster in a ClusterSet (KEP-2149).
pub const ABOUT_PROPERTY: &str = "cluster.clusterset.k8s.io";

/// The cluster ID held by the ConfigMap, when it holds a non-empty one.
pub fn cluster_id_of(cm: &ConfigMap) -> Option<String> {
    cm.data.as_ref()?.get(CLUSTER_ID_KEY).map(|s| s.trim()).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// What a new `cluster-id` ConfigMap may take its ID from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sources {
    /// The ID recorded on `kube-system` by an earlier install.
    pub recorded: Option<String>,
    /// The About API's `cluster.clusterset.k8s.io`.
    pub about: Option<String>,
    /// The `kube-system` namespace's UID.
    pub kube_system_uid: String,
}

/// Where a chosen ID came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Recorded,
    AboutApi,
    KubeSystemUid,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::Recorded => "recorded on kube-system",
            Source::AboutApi => "the About API's cluster.clusterset.k8s.io",
            Source::KubeSystemUid => "the kube-system namespace's UID",
        }
    }
}

/// The ID a new ConfigMap takes: the first well-formed of the recorded ID, the About API's and
/// the `kube-system` UID (lowercased, as a UID may not be). None when none is well-formed.
pub fn choose_cluster_id(sources: &Sources) -> Option<(String, Source)> {
    let candidates = [
        (sources.recorded.as_deref(), Source::Recorded),
        (sources.about.as_deref(), Source::AboutApi),
        (Some(sources.kube_system_uid.as_str()), Source::KubeSystemUid),
    ];
    candidates.into_iter().find_map(|(value, source)| {
        let id = value?.trim().to_lowercase();
        match liqo_api::validate_cluster_id(&id) {
            Ok(()) => Some((id, source)),
            Err(e) => {
                if !id.is_empty() {
                    tracing::warn!(value = %id, source = source.label(), error = %e, "not a well-formed cluster ID; not taken");
                }
                None
            }
        }
    })
}

/// The About API's ClusterProperty kind (`about.k8s.io/v1alpha1`), read and written untyped.
pub fn cluster_properties(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "about.k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "about.k8s.io/v1alpha1".into(),
        kind: "ClusterProperty".into(),
        plural: "clusterproperties".into(),
    };
    Api::all_with(client.clone(), &resource)
}

fn property_value(object: &DynamicObject) -> Option<String> {
    object.data.get("spec")?.get("value")?.as_str().map(str::to_owned)
}

/// The `cluster-id` ConfigMap as a [`Singleton`].
pub struct ClusterIdentity {
    pub client: Client,
}

impl ClusterIdentity {
    /// The sources of a new ID, read now. An unreadable `kube-system` is an error (retried): a
    /// new ID where the recorded one is only out of reach would be a new cluster to every peer.
    async fn sources(&self) -> Result<Sources> {
        let kube_system = Api::<Namespace>::all(self.client.clone()).get(KUBE_SYSTEM).await?;
        let recorded = kube_system.metadata.annotations.as_ref().and_then(|a| a.get(RECORD_ANNOTATION)).cloned();
        // No CRD and no object read alike (404); anything else is said and not taken.
        let about = match cluster_properties(&self.client).get_opt(ABOUT_PROPERTY).await {
            Ok(found) => found.as_ref().and_then(property_value),
            // The About API not served here.
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => {
                tracing::info!(error = %e, "cannot read the About API's {ABOUT_PROPERTY}; not taken");
                None
            }
        };
        Ok(Sources { recorded, about, kube_system_uid: kube_system.metadata.uid.unwrap_or_default() })
    }
}

impl Singleton for ClusterIdentity {
    type Object = ConfigMap;
    type Value = String;

    fn name(&self) -> &str {
        CLUSTER_ID_CONFIGMAP
    }

    fn read(&self, cm: &ConfigMap) -> Option<String> {
        cluster_id_of(cm)
    }

    async fn repair(&self, api: &Api<ConfigMap>, existing: Option<&ConfigMap>) -> Result<()> {
        let sources = self.sources().await?;
        let Some((id, source)) = choose_cluster_id(&sources) else {
            return Err(crate::machinery::error::Error::NotReady("a well-formed cluster ID (kube-system has no UID?)"));
        };
        let data = BTreeMap::from([(CLUSTER_ID_KEY.to_owned(), id.clone())]);
        let result = match existing {
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta { name: Some(CLUSTER_ID_CONFIGMAP.into()), ..Default::default() },
                    data: Some(data),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
            Some(cm) => {
                // Present but empty: fill it in, guarded by its resourceVersion.
                let mut cm = cm.clone();
                cm.metadata.managed_fields = None;
                cm.data.get_or_insert_with(Default::default).extend(data);
                api.replace(CLUSTER_ID_CONFIGMAP, &PostParams::default(), &cm).await.map(|_| ())
            }
        };
        match result {
            Ok(()) => {
                tracing::info!(cluster_id = %id, source = source.label(), "cluster ID set");
                Ok(())
            }
            // Somebody else (another replica) got there first: the watch brings their value.
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Records the cluster ID outside the Liqo namespace: the annotation on `kube-system`, and the
/// About API's ClusterProperty where its CRD is installed and nobody set one (one set to another
/// value is left alone, and said).
pub async fn record_once(client: &Client, id: &str) -> Result<()> {
    let patch = json!({"metadata": {"annotations": {RECORD_ANNOTATION: id}}});
    Api::<Namespace>::all(client.clone()).patch(KUBE_SYSTEM, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let properties = cluster_properties(client);
    match properties.get_opt(ABOUT_PROPERTY).await {
        Ok(Some(found)) => {
            if let Some(value) = property_value(&found).filter(|v| v.trim() != id) {
                tracing::warn!(cluster_id = %id, about = %value, "the About API names this cluster otherwise; this cluster keeps the ID its peers know");
            }
        }
        Ok(None) => {
            let property: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "about.k8s.io/v1alpha1",
                "kind": "ClusterProperty",
                "metadata": {"name": ABOUT_PROPERTY},
                "spec": {"value": id},
            }))
            .expect("a ClusterProperty");
            match properties.create(&PostParams::default(), &property).await {
                Ok(_) => tracing::info!(cluster_id = %id, "the About API's {ABOUT_PROPERTY} set"),
                // No such CRD (404), or no grant to write it (403): nothing to record there.
                Err(kube::Error::Api(s)) if [403, 404, 409].contains(&s.code) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // No CRD, or no grant to read it: the About API is not in use here.
        Err(kube::Error::Api(s)) if [403, 404].contains(&s.code) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// Records each cluster ID the channel publishes ([`record_once`]), retrying a failed record
/// every 10 s until it lands. Runs until the channel closes.
pub async fn record(client: Client, mut ids: watch::Receiver<Option<String>>) {
    loop {
        let id = ids.borrow_and_update().clone();
        if let Some(id) = id {
            while let Err(e) = record_once(&client, &id).await {
                tracing::warn!(error = %e, "cannot record the cluster ID on {KUBE_SYSTEM}; retrying in 10 s");
                tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            }
        }
        // An ID published meanwhile is unseen: this returns at once for it.
        if ids.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "6e3f0c59-2a4c-4d3b-9c9e-0c8b4cdb0a11";
    const OLD: &str = "5dc5b312-0f0a-4f43-bb5e-8f2b1c7a9d01";
    const ABOUT: &str = "west-1";

    #[test]
    fn a_new_install_takes_the_kube_system_uid() {
        let sources = Sources { kube_system_uid: UID.to_uppercase(), ..Default::default() };
        assert_eq!(choose_cluster_id(&sources), Some((UID.to_owned(), Source::KubeSystemUid)));
    }

    #[test]
    fn the_about_api_comes_before_the_uid_and_the_record_before_both() {
        let mut sources = Sources { about: Some(ABOUT.into()), kube_system_uid: UID.into(), ..Default::default() };
        assert_eq!(choose_cluster_id(&sources), Some((ABOUT.to_owned(), Source::AboutApi)));
        sources.recorded = Some(OLD.into());
        assert_eq!(choose_cluster_id(&sources), Some((OLD.to_owned(), Source::Recorded)));
    }

    #[test]
    fn malformed_values_are_passed_over() {
        let sources = Sources { recorded: Some("Not An ID!".into()), about: Some("x".repeat(64)), kube_system_uid: UID.into() };
        assert_eq!(choose_cluster_id(&sources), Some((UID.to_owned(), Source::KubeSystemUid)));
        assert_eq!(choose_cluster_id(&Sources::default()), None);
    }

    #[test]
    fn empty_or_missing_key_needs_a_repair() {
        let mut cm = ConfigMap::default();
        assert_eq!(cluster_id_of(&cm), None);
        cm.data = Some(BTreeMap::from([(CLUSTER_ID_KEY.to_owned(), "  ".to_owned())]));
        assert_eq!(cluster_id_of(&cm), None);
        cm.data = Some(BTreeMap::from([(CLUSTER_ID_KEY.to_owned(), "abc".to_owned())]));
        assert_eq!(cluster_id_of(&cm).as_deref(), Some("abc"));
    }
}
