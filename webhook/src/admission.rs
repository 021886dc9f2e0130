//! One admission review: decode the body, dispatch by kind, apply the rule, build the answer.

use liqo_api::names::DISCOVERY_GROUP;
use liqo_api::PeeringRequestSpec;

use crate::denial::{Denial, Reason};
use crate::review::{API_VERSION, KIND, Operation, Request, RequestSeed, Response, ReviewFull, ReviewIn, ReviewOut};
use serde::de::DeserializeSeed;
use crate::state::ClusterView;
use crate::{foreign_cluster, peering_request};

/// The two webhook paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/validate`: PeeringRequest, FederationRequest, ForeignCluster.
    Validate,
    /// `/mutate`: ForeignCluster.
    Mutate,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Validate => "validate",
            Self::Mutate => "mutate",
        }
    }
}

/// A body that is not an AdmissionReview v1 request: answered with HTTP 400, since there is
/// no request uid to answer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadReview {
    pub label: &'static str,
    pub message: String,
}

/// The answer and what metrics record of it.
#[derive(Debug)]
pub struct Decision {
    pub review: ReviewOut,
    pub kind: &'static str,
    pub operation: &'static str,
    /// `None` when allowed.
    pub denied: Option<Reason>,
}

/// Decides one review.
pub fn admit(endpoint: Endpoint, body: &[u8], view: &dyn ClusterView) -> Result<Decision, BadReview> {
    // One pass over the body in the usual case; the step-by-step decoding below runs only
    // when this fails, to say exactly what is wrong.
    // Strings are checked as UTF-8 once for the whole body, not one by one.
    let decoded = std::str::from_utf8(body).ok().and_then(|text| serde_json::from_str::<ReviewFull<'_>>(text).ok());
    let mut req = match decoded {
        Some(ReviewFull { api_version: Some(API_VERSION), kind: Some(KIND), request: Some(req) }) => req,
        _ => diagnose(body)?,
    };
    let kind = kind_label(&req);
    let result = decide(endpoint, &mut req, view);
    let (response, denied) = match result {
        Ok(patch) => {
            let response = Response::allow(&req.uid);
            (match patch {
                Some(p) => response.with_patch(&p),
                None => response,
            }, None)
        }
        Err(d) => {
            let (code, reason) = d.reason.status();
            (Response::deny(&req.uid, code, reason, d.message), Some(d.reason))
        }
    };
    Ok(Decision { review: response.into(), kind, operation: req.operation.as_str(), denied })
}

/// The step-by-step decoding of a review that did not decode in one pass: envelope, version,
/// then the request, each failure with its own message.
fn diagnose(body: &[u8]) -> Result<Request<'_>, BadReview> {
    let text = std::str::from_utf8(body).map_err(|e| BadReview {
        label: "malformed_json",
        message: format!("the body is not an AdmissionReview: JSON must be UTF-8: {e}"),
    })?;
    let review: ReviewIn<'_> = serde_json::from_str(text).map_err(|e| BadReview {
        label: "malformed_json",
        message: format!("the body is not an AdmissionReview: {e}"),
    })?;
    if review.api_version.as_deref() != Some(API_VERSION) || review.kind.as_deref() != Some(KIND) {
        return Err(BadReview {
            label: "wrong_version",
            message: format!(
                "expected apiVersion {API_VERSION} kind {KIND}, got apiVersion {:?} kind {:?} (only AdmissionReview v1 is served)",
                review.api_version.as_deref().unwrap_or(""),
                review.kind.as_deref().unwrap_or("")
            ),
        });
    }
    let Some(raw) = review.request.filter(|r| r.get() != "null") else {
        return Err(BadReview { label: "missing_request", message: "the AdmissionReview has no request".into() });
    };
    // Objects stay raw here, so a malformed one is reported by the rules with its field path.
    let mut de = serde_json::Deserializer::from_str(raw.get());
    RequestSeed { typed: false }
        .deserialize(&mut de)
        .and_then(|r| de.end().map(|()| r))
        .map_err(|e| BadReview { label: "malformed_request", message: format!("request: {e}") })
}

fn kind_label(req: &Request<'_>) -> &'static str {
    if req.kind.group != DISCOVERY_GROUP {
        return "other";
    }
    match req.kind.kind.as_str() {
        "PeeringRequest" => "PeeringRequest",
        "FederationRequest" => "FederationRequest",
        "ForeignCluster" => "ForeignCluster",
        _ => "other",
    }
}

fn invalid(message: String) -> Denial {
    Denial::new(Reason::InvalidObject, message)
}

/// The rule for this kind and endpoint; `Ok(Some(patch))` only from the mutating endpoint.
fn decide(endpoint: Endpoint, req: &mut Request<'_>, view: &dyn ClusterView) -> Result<Option<json_patch::Patch>, Denial> {
    // Subresources (status, scale) carry no spec change to judge.
    if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
        return Ok(None);
    }
    let writes = matches!(req.operation, Operation::Create | Operation::Update);
    match (endpoint, kind_label(req)) {
        (Endpoint::Validate, kind @ ("PeeringRequest" | "FederationRequest")) => {
            if !writes {
                return Ok(None);
            }
            let obj = req
                .object
                .take_peering("object")
                .map_err(invalid)?
                .ok_or_else(|| invalid(format!("request.object: required for {}", req.operation.as_str())))?;
            let old = req.old_object.take_peering("oldObject").map_err(invalid)?;
            let empty = PeeringRequestSpec::default();
            let name = if obj.metadata.name.is_empty() { req.name.as_str() } else { obj.metadata.name.as_str() };
            let own = view.own_cluster_id();
            let policy = view.policy();
            let is_known = |id: &str| view.is_known(id);
            let local = peering_request::Local {
                cluster_id: own.as_deref(),
                namespace: view.namespace(),
                policy: &policy,
                is_known: &is_known,
            };
            let candidate = peering_request::Candidate {
                kind,
                operation: req.operation,
                name,
                spec: obj.spec.as_ref().unwrap_or(&empty),
                old_spec: old.as_ref().map(|o| o.spec.as_ref().unwrap_or(&empty)),
                user: &req.user_info,
            };
            peering_request::review(&candidate, &local).map(|()| None)
        }
        (_, "ForeignCluster") => {
            if !writes {
                return Ok(None);
            }
            let obj = req
                .object
                .take_foreign_cluster("object")
                .map_err(invalid)?
                .ok_or_else(|| invalid(format!("request.object: required for {}", req.operation.as_str())))?;
            match endpoint {
                Endpoint::Mutate => {
                    foreign_cluster::defaults_patch(obj.metadata.labels.as_ref(), obj.spec.as_ref()).map(Some)
                }
                Endpoint::Validate => {
                    let old = req.old_object.take_foreign_cluster("oldObject").map_err(invalid)?;
                    foreign_cluster::check(obj.spec.as_ref(), old.as_ref().and_then(|o| o.spec.as_ref())).map(|()| None)
                }
            }
        }
        (endpoint, _) => Err(Denial::new(
            Reason::Unsupported,
            format!(
                "the {} endpoint does not handle {}/{} {}; it serves {}",
                endpoint.as_str(),
                if req.kind.group.is_empty() { "core" } else { &req.kind.group },
                req.kind.version,
                req.kind.kind,
                match endpoint {
                    Endpoint::Validate => "discovery.liqo.io PeeringRequest, FederationRequest and ForeignCluster",
                    Endpoint::Mutate => "discovery.liqo.io ForeignCluster",
                }
            ),
        )),
    }
}
