//! Editing a Liqo object's spec with the user's own credentials: the object as it is now, and
//! what the person wrote sent as a merge patch of what changed, at the version they saw. First as
//! a server-side dry run (RBAC, our webhook, the CRD's schema and defaults all answer, nothing
//! is stored), then for real. A refusal comes back in the API server's words.

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

use crate::html::FormError;
use crate::objects::{self, Kind};

/// The edit form's field.
pub const FIELD: &str = "spec";

/// What the person sent: the spec, and the version of the object they edited.
#[derive(Debug, serde::Deserialize)]
pub struct Edit {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub spec: String,
    #[serde(default)]
    pub version: String,
}

/// A dry run's answer: the spec as it is, and as it would be stored.
#[derive(Debug, PartialEq, Eq)]
pub struct Checked {
    pub before: String,
    pub after: String,
}

fn refused(e: kube::Error) -> FormError {
    let message = match e {
        kube::Error::Api(s) if s.code == 409 => {
            format!("it changed since you opened it ({}): open it again to edit what it is now", s.message)
        }
        kube::Error::Api(s) => s.message,
        other => other.to_string(),
    };
    FormError { form: "edit", field: Some(FIELD), message }
}

fn api(client: &Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let r = kind.api_resource();
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    }
}

/// Sends `edit` to object `name` of `kind`: as a dry run, or for real.
async fn send(client: &Client, kind: Kind, namespace: Option<&str>, name: &str, edit: &Edit, dry_run: bool) -> Result<Checked, FormError> {
    if !kind.editable() {
        return Err(FormError {
            form: "edit",
            field: Some(FIELD),
            message: format!("{} are written by the peers, not here", kind.title()),
        });
    }
    let spec = objects::parse_spec(&edit.spec).map_err(|message| FormError { form: "edit", field: Some(FIELD), message })?;
    let api = api(client, kind, namespace);
    let now = api.get(name).await.map_err(refused)?;
    // A merge patch of what changed (the verb `patch`, as the dashboard's other actions), at
    // the version the person read: the API server refuses it (409) if the object changed since.
    let version = Some(edit.version.clone()).filter(|v| !v.is_empty()).or(now.metadata.resource_version.clone());
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": version},
        "spec": objects::merge_patch(&now.data["spec"], &spec),
    });
    let mut params = PatchParams { field_manager: Some("liqo-dashboard".into()), ..Default::default() };
    params.dry_run = dry_run;
    let stored = api.patch(name, &params, &Patch::Merge(patch)).await.map_err(refused)?;
    Ok(Checked { before: objects::spec_yaml(&now), after: objects::spec_yaml(&stored) })
}

/// The dry run: what would be stored, nothing stored.
pub async fn check(client: &Client, kind: Kind, namespace: Option<&str>, name: &str, edit: &Edit) -> Result<Checked, FormError> {
    send(client, kind, namespace, name, edit, true).await
}

/// The edit, for real.
pub async fn apply(client: &Client, kind: Kind, namespace: Option<&str>, name: &str, edit: &Edit) -> Result<(), FormError> {
    send(client, kind, namespace, name, edit, false).await.map(drop)
}
