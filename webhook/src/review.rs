//! AdmissionReview v1 on the wire: the request as the API server sends it, and the response.
//!
//! The object is decoded into the typed spec of its kind in the same pass as the envelope when
//! the kind comes first (as the API server sends it); otherwise, and whenever that fails, it is
//! kept as raw JSON and decoded on its own, so a malformed field is reported with its path
//! (`spec.clusterIdentity.clusterID`).

use base64::Engine;
use liqo_api::{ForeignClusterSpec, PeeringRequestSpec};
use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};
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

/// Who sent the API request under review (the rules read the username only; groups, uid and
/// extra are skipped).
#[derive(Deserialize, Debug, Default, Clone, PartialEq, Eq)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
}

/// One AdmissionReview request. Decoded by hand (see [`RequestSeed`]) so the object can be
/// decoded into its kind's type in the same pass.
#[derive(Debug)]
pub struct Request<'a> {
    pub uid: String,
    pub kind: Gvk,
    pub name: String,
    /// The object's namespace (empty for a cluster-scoped kind).
    pub namespace: String,
    pub sub_resource: Option<String>,
    pub operation: Operation,
    pub user_info: UserInfo,
    pub object: Carried<'a>,
    pub old_object: Carried<'a>,
    pub dry_run: bool,
}

/// The kinds whose objects the rules read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Typed {
    /// PeeringRequest and FederationRequest (same spec).
    Peering,
    ForeignCluster,
}

impl Typed {
    pub fn of(gvk: &Gvk) -> Option<Self> {
        if gvk.group != liqo_api::names::DISCOVERY_GROUP {
            return None;
        }
        match gvk.kind.as_str() {
            "PeeringRequest" | "FederationRequest" => Some(Self::Peering),
            "ForeignCluster" => Some(Self::ForeignCluster),
            _ => None,
        }
    }
}

/// An object (or old object) of a review: already decoded into its kind's type when the kind
/// came before it (the API server's order), else kept as raw JSON to decode on demand.
#[derive(Debug, Default)]
pub enum Carried<'a> {
    #[default]
    Absent,
    Raw(&'a RawValue),
    Peering(Box<Object<PeeringRequestSpec>>),
    ForeignCluster(Box<Object<ForeignClusterSpec>>),
}

impl Carried<'_> {
    /// The object as a PeeringRequest/FederationRequest; decoding errors name the field.
    pub fn take_peering(&mut self, what: &str) -> Result<Option<Object<PeeringRequestSpec>>, String> {
        match std::mem::take(self) {
            Carried::Peering(o) => Ok(Some(*o)),
            Carried::Raw(raw) => decode_object(Some(raw), what),
            Carried::Absent => Ok(None),
            Carried::ForeignCluster(_) => Err(format!("{what}: not a PeeringRequest")),
        }
    }

    /// The object as a ForeignCluster; decoding errors name the field.
    pub fn take_foreign_cluster(&mut self, what: &str) -> Result<Option<Object<ForeignClusterSpec>>, String> {
        match std::mem::take(self) {
            Carried::ForeignCluster(o) => Ok(Some(*o)),
            Carried::Raw(raw) => decode_object(Some(raw), what),
            Carried::Absent => Ok(None),
            Carried::Peering(_) => Err(format!("{what}: not a ForeignCluster")),
        }
    }
}

/// Decodes a [`Request`]. `typed: true` decodes the objects of known kinds in the same pass
/// (a malformed one fails the whole decoding); `typed: false` keeps them raw, so the caller can
/// report exactly which field is wrong.
pub struct RequestSeed {
    pub typed: bool,
}

impl<'de: 'a, 'a> Deserialize<'de> for Request<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RequestSeed { typed: true }.deserialize(d)
    }
}

impl<'de> DeserializeSeed<'de> for RequestSeed {
    type Value = Request<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Request<'de>, D::Error> {
        d.deserialize_map(RequestVisitor { typed: self.typed })
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum Field {
    Uid,
    Kind,
    Name,
    Namespace,
    SubResource,
    Operation,
    UserInfo,
    Object,
    OldObject,
    DryRun,
    #[serde(other)]
    Other,
}

struct RequestVisitor {
    typed: bool,
}

impl RequestVisitor {
    fn carried<'de, A: MapAccess<'de>>(&self, map: &mut A, kind: Option<&Gvk>) -> Result<Carried<'de>, A::Error> {
        let typed = if self.typed { kind.and_then(Typed::of) } else { None };
        Ok(match typed {
            Some(Typed::Peering) => {
                map.next_value::<Option<Object<PeeringRequestSpec>>>()?.map_or(Carried::Absent, |o| Carried::Peering(Box::new(o)))
            }
            Some(Typed::ForeignCluster) => {
                map.next_value::<Option<Object<ForeignClusterSpec>>>()?.map_or(Carried::Absent, |o| Carried::ForeignCluster(Box::new(o)))
            }
            None => map.next_value::<Option<&'de RawValue>>()?.map_or(Carried::Absent, Carried::Raw),
        })
    }
}

impl<'de> Visitor<'de> for RequestVisitor {
    type Value = Request<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an AdmissionReview request object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Request<'de>, A::Error> {
        let (mut uid, mut kind, mut operation) = (None, None, None);
        let (mut name, mut namespace) = (None, None);
        let mut sub_resource = None;
        let mut user_info = None;
        let (mut object, mut old_object) = (Carried::Absent, Carried::Absent);
        let mut dry_run = None;
        while let Some(key) = map.next_key::<Field>()? {
            match key {
                Field::Uid => uid = Some(map.next_value::<String>()?),
                Field::Kind => kind = Some(map.next_value::<Gvk>()?),
                Field::Name => name = map.next_value::<Option<String>>()?,
                Field::Namespace => namespace = map.next_value::<Option<String>>()?,
                Field::SubResource => sub_resource = map.next_value::<Option<String>>()?,
                Field::Operation => operation = Some(map.next_value::<Operation>()?),
                Field::UserInfo => user_info = map.next_value::<Option<UserInfo>>()?,
                Field::Object => object = self.carried(&mut map, kind.as_ref())?,
                Field::OldObject => old_object = self.carried(&mut map, kind.as_ref())?,
                Field::DryRun => dry_run = map.next_value::<Option<bool>>()?,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Request {
            uid: uid.ok_or_else(|| A::Error::missing_field("uid"))?,
            kind: kind.ok_or_else(|| A::Error::missing_field("kind"))?,
            name: name.unwrap_or_default(),
            namespace: namespace.unwrap_or_default(),
            sub_resource,
            operation: operation.ok_or_else(|| A::Error::missing_field("operation"))?,
            user_info: user_info.unwrap_or_default(),
            object,
            old_object,
            dry_run: dry_run.unwrap_or_default(),
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../tests/fixtures/admission/peeringrequest-create-by-peer-sa.json");

    fn request_of(body: &str) -> Request<'_> {
        let full: ReviewFull<'_> = serde_json::from_str(body).unwrap();
        full.request.unwrap()
    }

    #[test]
    fn the_object_is_decoded_in_the_first_pass_when_the_kind_comes_first() {
        let mut req = request_of(FIXTURE);
        assert!(matches!(req.object, Carried::Peering(_)), "{:?}", req.object);
        assert!(matches!(req.old_object, Carried::Absent));
        let obj = req.object.take_peering("object").unwrap().unwrap();
        assert_eq!(obj.metadata.name, "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9");
        assert!(obj.spec.is_some());
        assert_eq!(req.user_info.username, "system:serviceaccount:liqo:remote-9a596a4b-591c-4ac6-8fd6-80258b4b3bf9");
    }

    #[test]
    fn any_field_order_gives_the_same_object() {
        // The object before the kind: kept raw, decoded on demand to the same value.
        let mut value: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
        let request = value["request"].as_object_mut().unwrap();
        let object = request.remove("object").unwrap();
        let rest = serde_json::to_string(request).unwrap();
        let body = format!(
            r#"{{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {{"object": {object}, {}}}"#,
            &rest[1..]
        );
        let mut late = request_of(&body);
        assert!(matches!(late.object, Carried::Raw(_)));
        let mut early = request_of(FIXTURE);
        assert_eq!(late.object.take_peering("object").unwrap(), early.object.take_peering("object").unwrap());
    }

    #[test]
    fn raw_decoding_keeps_a_malformed_object_for_the_rules_to_report() {
        let body = FIXTURE.replacen("\"clusterID\": \"9a596a4b", "\"clusterID\": 42, \"x\": \"", 1);
        assert!(serde_json::from_str::<ReviewFull<'_>>(&body).is_err(), "typed: the whole review fails");
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        let raw = serde_json::to_string(&value["request"]).unwrap();
        let mut de = serde_json::Deserializer::from_str(&raw);
        let mut req = RequestSeed { typed: false }.deserialize(&mut de).unwrap();
        let err = req.object.take_peering("object").unwrap_err();
        assert!(err.starts_with("spec.clusterIdentity.clusterID: invalid type: integer `42`"), "{err}");
    }

    #[test]
    fn required_request_fields_are_named_when_missing() {
        let err = serde_json::from_str::<Request<'_>>(r#"{"kind": {"kind": "X"}, "operation": "CREATE"}"#).unwrap_err();
        assert!(err.to_string().contains("missing field `uid`"), "{err}");
    }
}
