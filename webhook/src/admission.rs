//! One admission review: decode the body, dispatch by kind, apply the rule, build the answer.

use liqo_api::PeeringRequestSpec;
use liqo_api::names::DISCOVERY_GROUP;

use crate::denial::{Denial, Reason};
use crate::review::{API_VERSION, KIND, Operation, Request, RequestSeed, Response, ReviewFull, ReviewIn, ReviewOut};
use crate::state::ClusterView;
use crate::{foreign_cluster, peering_request};
use serde::de::DeserializeSeed;

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
    /// The cluster our policy refused, to be shown to this cluster's operator.
    pub refused: Option<crate::denial::Requester>,
}

/// Bodies up to this size are decoded in buffers kept by each thread; larger ones in buffers
/// of their own, so a rare huge review does not leave its memory behind.
const KEPT_SCRATCH: usize = 64 * 1024;

/// What the one-pass decoding works in: a copy of the body (simd-json decodes in place) and
/// simd-json's buffers.
struct Scratch {
    copy: Vec<u8>,
    buffers: simd_json::Buffers,
}

impl Scratch {
    fn new(len: usize) -> Self {
        Self { copy: Vec::with_capacity(len), buffers: simd_json::Buffers::new(len) }
    }

    /// The decision on `body` decoded in one pass, if that works.
    fn decide(&mut self, endpoint: Endpoint, body: &[u8], view: &dyn ClusterView) -> Option<Decision> {
        if one_pass_may_misread(body) {
            return None;
        }
        self.copy.clear();
        self.copy.extend_from_slice(body);
        let mut req = one_pass(&mut self.copy, &mut self.buffers)?;
        Some(answer(endpoint, &mut req, view))
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::new(4096));
}

/// Decides one review.
pub fn admit(endpoint: Endpoint, body: &[u8], view: &dyn ClusterView) -> Result<Decision, BadReview> {
    // One pass over the body in the usual case, with simd-json: it checks the whole body as
    // strictly as serde_json (UTF-8, grammar) but with SIMD. When it fails (malformed input,
    // or a review whose object comes before its kind, which only serde_json can keep raw),
    // the step-by-step decoding below says exactly what is wrong, or decodes the review in
    // any order.
    let fast = if body.len() <= KEPT_SCRATCH {
        SCRATCH.with(|s| match s.try_borrow_mut() {
            Ok(mut kept) => kept.decide(endpoint, body, view),
            Err(_) => Scratch::new(body.len()).decide(endpoint, body, view),
        })
    } else {
        Scratch::new(body.len()).decide(endpoint, body, view)
    };
    match fast {
        Some(decision) => Ok(decision),
        None => Ok(answer(endpoint, &mut diagnose(body)?, view)),
    }
}

/// What simd-json accepts although serde_json refuses it, and then reads differently: a NUL
/// byte (after a literal), a surrogate escape (`\uD800`–`\uDFFF`; simd-json decodes a lone
/// one as U+0000), and a number of 19 or more digits with anything after it up to the next
/// structural character (see [`long_digit_run`]). Such bodies — valid surrogate pairs included, which are rare in reviews — go
/// to the step-by-step decoding, which refuses the invalid ones and reads the rest right.
fn one_pass_may_misread(body: &[u8]) -> bool {
    // One SIMD scan for both bytes; an escaped backslash before `ud8..` only costs a detour.
    memchr::memchr2_iter(0, b'\\', body).any(|i| {
        body[i] == 0
            || (body.get(i + 1) == Some(&b'u')
                && matches!(body.get(i + 2), Some(b'd' | b'D'))
                && matches!(body.get(i + 3), Some(b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')))
    }) || long_digit_run(body)
}

/// The shortest run of digits and dots that may be a number simd-json reads on its slow path,
/// where it takes the bytes after it (`1234567890123456789x`, `12345678901.23456789x`), which
/// serde_json refuses: 19 significant digits.
const LONG_DIGIT_RUN: usize = 19;

/// A run of at least [`LONG_DIGIT_RUN`] bytes of `0-9` and `.` (pure). Such a run always holds
/// a whole 8-byte block of the body, so blocks are tested eight bytes at a time first.
fn long_digit_run(body: &[u8]) -> bool {
    let numeric = |b: u8| b.is_ascii_digit() || b == b'.';
    body.chunks_exact(8).enumerate().any(|(n, block)| {
        if !all_numeric(u64::from_le_bytes(block.try_into().expect("8 bytes"))) {
            return false;
        }
        let (start, end) = (n * 8, n * 8 + 8);
        let before = body[..start].iter().rev().take_while(|b| numeric(**b)).count();
        let after = body[end..].iter().take_while(|b| numeric(**b)).count();
        before + 8 + after >= LONG_DIGIT_RUN
    })
}

/// Every byte of `w` is `0-9` or `.` (SWAR: each byte ASCII and within `.`..=`9`, then no `/`;
/// most blocks fail the first test).
fn all_numeric(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte b < 0x80: the high bit of b + 0x52 is set iff b >= 0x2E; of b + 0x46 iff b > 0x39.
    let in_range = w.wrapping_add(ONES * (0x80 - 0x2E)) & !w.wrapping_add(ONES * (0x7F - 0x39)) & !w & HIGH;
    if in_range != HIGH {
        return false;
    }
    let v = w ^ (ONES * 0x2F);
    v.wrapping_sub(ONES) & !v & HIGH == 0
}

/// Both decodings of `body`, for the differential fuzz target (`fuzz/`): the one-pass answer
/// when that path takes the body, and the step-by-step one (the answer, or why the body is not
/// a review). They must agree wherever the one-pass path answers.
#[doc(hidden)]
pub fn both_ways(
    endpoint: Endpoint,
    body: &[u8],
    view: &dyn ClusterView,
) -> (Option<serde_json::Value>, Result<serde_json::Value, String>) {
    let json = |d: Decision| serde_json::to_value(&d.review).expect("a review serializes");
    let fast = Scratch::new(body.len()).decide(endpoint, body, view).map(json);
    let careful = diagnose(body).map(|mut req| json(answer(endpoint, &mut req, view))).map_err(|e| e.message);
    (fast, careful)
}

/// The review decoded in one pass (simd-json, in place), if that works.
fn one_pass<'a>(body: &'a mut [u8], buffers: &mut simd_json::Buffers) -> Option<Request<'a>> {
    match simd_json::serde::from_slice_with_buffers::<ReviewFull<'_>>(body, buffers) {
        Ok(ReviewFull { api_version: Some(API_VERSION), kind: Some(KIND), request: Some(req) }) => Some(req),
        _ => None,
    }
}

/// The decision on a decoded review.
fn answer(endpoint: Endpoint, req: &mut Request<'_>, view: &dyn ClusterView) -> Decision {
    let kind = kind_label(req);
    let result = decide(endpoint, req, view);
    let mut refused = None;
    let (response, denied) = match result {
        Ok(patch) => {
            let response = Response::allow(&req.uid);
            (
                match patch {
                    Some(p) => response.with_patch(&p),
                    None => response,
                },
                None,
            )
        }
        Err(d) => {
            let (code, reason) = d.reason.status();
            refused = d.requester;
            (Response::deny(&req.uid, code, reason, d.message), Some(d.reason))
        }
    };
    Decision { review: response.into(), kind, operation: req.operation.as_str(), denied, refused }
}

/// The step-by-step decoding of a review that did not decode in one pass: envelope, version,
/// then the request, each failure with its own message.
fn diagnose(body: &[u8]) -> Result<Request<'_>, BadReview> {
    let text = std::str::from_utf8(body).map_err(|e| BadReview {
        label: "malformed_json",
        message: format!("the body is not an AdmissionReview: JSON must be UTF-8: {e}"),
    })?;
    let review: ReviewIn<'_> = serde_json::from_str(text)
        .map_err(|e| BadReview { label: "malformed_json", message: format!("the body is not an AdmissionReview: {e}") })?;
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
            let settings = view.settings();
            let is_known = |id: &str| view.is_known(id);
            let holder = |id: &str| view.holder(id);
            let local = peering_request::Local {
                cluster_id: settings.cluster_id.as_deref(),
                namespace: view.namespace(),
                policy: &settings.policy,
                is_known: &is_known,
                holder: &holder,
                now: k8s_openapi::jiff::Timestamp::now,
            };
            let candidate = peering_request::Candidate {
                kind,
                operation: req.operation,
                name,
                namespace: &req.namespace,
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
                Endpoint::Mutate => foreign_cluster::defaults_patch(obj.metadata.labels.as_ref(), obj.spec.as_ref()).map(Some),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StaticView;

    fn view() -> StaticView {
        StaticView::new("liqo", "0558de48-097b-4b7d-ba04-6bd2a0f9d24f")
    }

    /// The review the benchmark sends: a peer's ServiceAccount creating its PeeringRequest.
    const PEER_SA_CREATE: &str = include_str!("../tests/fixtures/admission/peeringrequest-create-by-peer-sa.json");

    fn fixtures() -> Vec<(String, Vec<u8>)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission");
        let mut all: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect();
        all.sort();
        assert!(all.len() >= 10, "the captured fixtures are there");
        all
    }

    fn json(d: &Decision) -> serde_json::Value {
        serde_json::to_value(&d.review).unwrap()
    }

    /// The step-by-step decoding (serde_json, objects kept raw) of the same body.
    fn slow_answer(endpoint: Endpoint, body: &[u8]) -> Decision {
        answer(endpoint, &mut diagnose(body).unwrap(), &view())
    }

    #[test]
    fn the_one_pass_decoding_decides_every_fixture_as_the_step_by_step_one() {
        for (name, body) in fixtures() {
            assert!(one_pass(&mut body.clone(), &mut simd_json::Buffers::default()).is_some(), "{name} is decoded in one pass");
            for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
                let fast = admit(endpoint, &body, &view()).unwrap();
                let slow = slow_answer(endpoint, &body);
                assert_eq!(json(&fast), json(&slow), "{name} on {}", endpoint.as_str());
                assert_eq!((fast.kind, fast.operation, fast.denied), (slow.kind, slow.operation, slow.denied), "{name}");
            }
        }
    }

    #[test]
    fn a_review_whose_object_comes_before_its_kind_gets_the_same_answer() {
        for (name, body) in fixtures() {
            let mut value: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let request = value["request"].as_object_mut().unwrap();
            let kind = request.remove("kind").unwrap();
            let rest = serde_json::to_string(request).unwrap();
            let reordered = format!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{},"kind":{kind}}}}}"#,
                &rest[..rest.len() - 1]
            );
            assert!(
                one_pass(&mut reordered.clone().into_bytes(), &mut simd_json::Buffers::default()).is_none(),
                "{name}: only serde_json keeps an object raw"
            );
            for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
                let usual = admit(endpoint, &body, &view()).unwrap();
                let late = admit(endpoint, reordered.as_bytes(), &view()).unwrap();
                assert_eq!(json(&late), json(&usual), "{name} on {}", endpoint.as_str());
            }
        }
    }

    #[test]
    fn the_one_pass_decoding_accepts_nothing_serde_json_refuses() {
        let text = PEER_SA_CREATE;
        // Each breaks the JSON grammar or UTF-8 in a part no rule reads.
        let broken: Vec<Vec<u8>> = vec![
            text.replacen("\"generation\": 1", "\"generation\": 01", 1).into_bytes(),
            text.replacen("\"generation\": 1", "\"generation\": 1.", 1).into_bytes(),
            text.replacen("\"generation\": 1", "\"generation\": NaN", 1).into_bytes(),
            text.replacen("\"dryRun\": false", "\"dryRun\": fals", 1).into_bytes(),
            text.replacen("\"time\": \"2026-11-21T23:25:07Z\"\n", "\"time\": \"2026-11-21T23:25:07Z\",\n", 1).into_bytes(),
            text.replacen("\"system:authenticated\"\n", "\"system:authenticated\",\n", 1).into_bytes(),
            text.replacen("kubectl-create", "kubectl\\xcreate", 1).into_bytes(),
            text.replacen("kubectl-create", "kubectl\\u12create", 1).into_bytes(),
            text.replacen("kubectl-create", "kubectl\u{1}create", 1).into_bytes(),
            text.replacen("kubectl-create", "kubectl-cr\u{1}ate", 1)
                .into_bytes()
                .into_iter()
                .map(|b| if b == 1 { 0xff } else { b })
                .collect(),
            text.replacen("\"manager\": ", "\"manager\" ", 1).into_bytes(),
            text.replacen("\"manager\"", "'manager'", 1).into_bytes(),
            format!("{text}{{}}").into_bytes(),
            format!("\u{feff}{text}").into_bytes(),
            // Found by fuzzing the two decodings against each other: a NUL byte after a literal.
            text.replacen("\"dryRun\": false", "\"dryRun\": false\u{0}", 1).into_bytes(),
        ];
        for body in broken {
            assert_ne!(body, text.as_bytes(), "each case changes the fixture");
            let shown = String::from_utf8_lossy(&body).into_owned();
            assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err() || std::str::from_utf8(&body).is_err(), "{shown}");
            assert!(
                one_pass_may_misread(&body) || one_pass(&mut body.clone(), &mut simd_json::Buffers::default()).is_none(),
                "simd-json accepted: {shown}"
            );
            assert!(admit(Endpoint::Validate, &body, &view()).is_err(), "{shown}");
        }
    }

    #[test]
    fn surrogates_and_nul_bytes_take_the_careful_path_and_read_alike() {
        // A valid surrogate pair (an emoji) is read right by the careful path.
        let pair = PEER_SA_CREATE.replacen("kubectl-create", "kubectl-\\ud83d\\ude00", 1);
        assert!(one_pass_may_misread(pair.as_bytes()));
        assert!(admit(Endpoint::Validate, pair.as_bytes(), &view()).is_ok());
        // A lone one inside the object, where it changed the decision before: refused as
        // malformed, as serde_json refuses it.
        let lone = PEER_SA_CREATE.replacen("\"clusterIdentity\": {", "\"clusterIdentity\": {\"x\\ud800\": 1, ", 1);
        assert_ne!(lone, PEER_SA_CREATE);
        let answer = match admit(Endpoint::Validate, lone.as_bytes(), &view()) {
            Ok(d) => json(&d).to_string(),
            Err(e) => format!("{e:?}"),
        };
        assert!(answer.contains("spec.clusterIdentity") && answer.contains("hex escape"), "the bad escape is named: {answer}");
        // Why it is routed: simd-json alone takes it (and read the key as U+0000).
        assert!(one_pass(&mut lone.clone().into_bytes(), &mut simd_json::Buffers::default()).is_some());
        assert!(!one_pass_may_misread(PEER_SA_CREATE.as_bytes()), "the usual review keeps the fast path");
    }

    /// Found by the differential fuzz target: simd-json takes a number of 19 or more digits
    /// followed by anything up to the next structural character, which serde_json refuses.
    #[test]
    fn a_long_number_takes_the_careful_path_and_is_refused() {
        for number in
            ["1234567890123456789x", "12345678901.23456789x", "1.234567890123456789e5apiVersion", "88888888888884444444.44444999999999"]
        {
            let body = PEER_SA_CREATE.replacen("\"dryRun\": false", &format!("\"dryRun\": false, \"n\": {number}"), 1);
            assert_ne!(body, PEER_SA_CREATE);
            assert!(one_pass_may_misread(body.as_bytes()), "{number}");
            let valid = serde_json::from_str::<serde_json::Value>(&body).is_ok();
            assert_eq!(admit(Endpoint::Validate, body.as_bytes(), &view()).is_ok(), valid, "{number}: answered as serde_json reads it");
        }
        // Why they are routed: simd-json alone takes the malformed one.
        let bad = PEER_SA_CREATE.replacen("\"dryRun\": false", "\"dryRun\": false, \"n\": 1234567890123456789x", 1);
        assert!(one_pass(&mut bad.into_bytes(), &mut simd_json::Buffers::default()).is_some());
        // Short numbers, IPs and dotted names keep the fast path.
        assert!(!long_digit_run(b"{\"a\": 123456789012345678, \"ip\": \"192.168.100.200\", \"v\": \"1.2.3.4.5.6.7.8\"}"));
        assert!(long_digit_run(b"[1234567890123456789]") && long_digit_run(b"0.123456789012345678"));
        assert!(!long_digit_run(b"12345678/12345678") && !all_numeric(u64::from_le_bytes(*b"1234567/")));
    }

    #[test]
    fn a_large_review_is_decided_in_buffers_of_its_own() {
        let body = PEER_SA_CREATE.as_bytes();
        let mut value: serde_json::Value = serde_json::from_slice(body).unwrap();
        value["request"]["object"]["metadata"]["annotations"] = serde_json::json!({ "big": "x".repeat(2 * KEPT_SCRATCH) });
        let big = serde_json::to_vec(&value).unwrap();
        assert!(big.len() > KEPT_SCRATCH);
        let decision = admit(Endpoint::Validate, &big, &view()).unwrap();
        assert_eq!(json(&decision), json(&admit(Endpoint::Validate, body, &view()).unwrap()));
        assert!(SCRATCH.with(|s| s.borrow().copy.capacity()) <= KEPT_SCRATCH, "the kept buffers did not grow");
    }

    #[test]
    fn a_malformed_body_is_refused_with_what_is_wrong() {
        let text = PEER_SA_CREATE;
        let cases: Vec<(Vec<u8>, &str, &str)> = vec![
            (text.replacen("\"dryRun\": false", "\"dryRun\": fals", 1).into_bytes(), "malformed_json", "expected"),
            (text.replacen("kubectl-create", "kubectl\u{1}create", 1).into_bytes(), "malformed_json", "control character"),
            (format!("{text} {{}}").into_bytes(), "malformed_json", "trailing characters"),
            (text.replacen("\"uid\": \"5c37", "\"x\": \"5c37", 1).into_bytes(), "malformed_request", "missing field `uid`"),
        ];
        for (body, label, needle) in cases {
            let bad = admit(Endpoint::Validate, &body, &view()).unwrap_err();
            assert_eq!(bad.label, label, "{}", bad.message);
            assert!(bad.message.contains(needle), "{:?} lacks {needle:?}", bad.message);
        }
    }
}
