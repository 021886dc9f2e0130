//! AdmissionReview v1 on the wire: the request as the API server sends it, and the response.
//!
//! The object is kept as raw JSON and decoded into the typed spec of its kind only once the
//! kind is known, so a malformed field is reported with its path (`spec.clusterIdentity.clusterID`).

use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";

/// The body the API server POSTs.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ReviewIn<'a> {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    /// Decoded only once the envelope is known to be v1.
    #[serde(default, borrow)]
    pub request: Option<&'a RawValue>,
}

/// The body decoded in one pass (the usual case).
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ReviewFull<'a> {
    #[serde(default, borrow)]
    pub api_version: Option<&'a str>,
    #[serde(default, borrow)]
    pub kind: Option<&'a str>,
    #[serde(default, borrow)]
    pub request: Option<Request<'a>>,
}

/// Group/version/kind of the object under review.
#[derive(Deserialize, Debug, Default, Clone, PartialEq, Eq)]
pub struct Gvk {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }
}

/// Who sent the API request under review.
#[derive(Deserialize, Debug, Default, Clone, PartialEq, Eq)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    pub uid: String,
    pub kind: Gvk,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub sub_resource: Option<String>,
    pub operation: Operation,
    #[serde(default)]
    pub user_info: UserInfo,
    #[serde(default, borrow)]
    pub object: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub old_object: Option<&'a RawValue>,
    #[serde(default)]
    pub dry_run: bool,
}

/// The part of an object's metadata the rules look at.
#[derive(Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
}

/// An object with typed metadata and spec; other fields (status, managedFields, ...) are skipped.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(bound = "S: DeserializeOwned")]
pub struct Object<S> {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: Option<S>,
}

/// Decodes `raw` (an explicit JSON `null` counts as absent); errors name the failing field,
/// prefixed with `what` (`object` or `oldObject`).
pub fn decode_object<S: DeserializeOwned>(raw: Option<&RawValue>, what: &str) -> Result<Option<Object<S>>, String> {
    let Some(raw) = raw.filter(|r| r.get() != "null") else { return Ok(None) };
    // Fast path; on failure decode again, tracking the path, to say which field is wrong.
    if let Ok(object) = serde_json::from_str(raw.get()) {
        return Ok(Some(object));
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    serde_path_to_error::deserialize(&mut de).map(Some).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let inner = inner.to_string();
        // serde_json appends " at line L column C"; the path says more.
        let msg = inner.split(" at line ").next().unwrap_or(&inner);
        if path == "." { format!("{what}: {msg}") } else { format!("{path}: {msg}") }
    })
}

/// Status of a denied request, as kubectl shows it.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Base64 of the RFC 6902 patch (the documented wire form).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Response {
    pub fn allow(uid: &str) -> Self {
        Self { uid: uid.to_owned(), allowed: true, status: None, patch_type: None, patch: None, warnings: vec![] }
    }

    pub fn deny(uid: &str, code: u16, reason: &'static str, message: String) -> Self {
        Self { allowed: false, status: Some(Status { code, reason, message }), ..Self::allow(uid) }
    }

    /// Adds `patch` unless it is empty (an empty patch is no patch).
    pub fn with_patch(mut self, patch: &json_patch::Patch) -> Self {
        if !patch.0.is_empty() {
            let bytes = serde_json::to_vec(patch).expect("a JSON patch always serializes");
            self.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            self.patch_type = Some("JSONPatch");
        }
        self
    }
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOut {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: Response,
}

impl From<Response> for ReviewOut {
    fn from(response: Response) -> Self {
        Self { api_version: API_VERSION, kind: KIND, response }
    }
}
