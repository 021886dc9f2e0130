//! What a simulated peer answers to one request, as a real peer's auth service and API server
//! (with our webhook and the RBAC of a peer identity) answer it. Pure over the peer's state:
//! no socket, no clock but the creation timestamp.

use http::Method;
use liqo_api::names::{DISCOVERY_GROUP, LABEL_CLUSTER_ID, VERSION, peering_kubeconfig_secret, tenant_namespace};
use liqo_reconciler::remote::auth::service::{ApiServer, kubeconfig, random_token};
use liqo_reconciler::remote::auth::wire::{ErrorBody, IdentityRequest, IdentityResponse, Ids};
use serde_json::{Value, json};

use crate::peer::{Mode, NAMESPACE, Objects, Peer};

/// One request as the peer received it.
pub struct Asked<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub query: &'a str,
    pub content_type: &'a str,
    /// The bearer token presented, if any.
    pub bearer: Option<&'a str>,
    pub body: &'a [u8],
}

/// What kind of request it was, for the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The auth service's `/ids` and `/ca`.
    Auth,
    /// The auth service's `/identity` (issued or refused).
    Identity,
    Read,
    Write,
    /// A watch: answered (empty) after this many seconds, as an API server closes a quiet one.
    Watch(u64),
}

/// What the peer answers.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub kind: Kind,
    /// What the request changed that the peer then acts on.
    pub then: Then,
}

/// What the peer does after answering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Then {
    Nothing,
    /// A PeeringRequest of this requester was accepted (new or changed): advertise to it.
    Offered(String),
    /// The requester's PeeringRequest was deleted: withdraw the Advertisement.
    Withdrawn(String),
    /// The Secret of the requester's kubeconfig was deleted: its broadcaster has none now.
    SecretDeleted(String),
}

const REQUESTS: &str = "/apis/discovery.liqo.io/v1alpha1/namespaces/";
const SECRETS: &str = "/api/v1/namespaces/";
const APPLY: &str = "application/apply-patch+yaml";
/// The field manager of a peer's reconciler's updates (its User-Agent's product).
const PEER_RECONCILER: &str = "liqo-reconciler";

/// The answer of `peer` to `asked`.
pub fn answer(peer: &Peer, asked: &Asked<'_>) -> Answer {
    let auth = |status, content_type, body| Answer { status, content_type, body, kind: Kind::Auth, then: Then::Nothing };
    match (asked.method, asked.path) {
        (&Method::GET, "/ids") => {
            let ids = Ids {
                cluster_id: peer.id.clone(),
                cluster_name: peer.name.clone(),
                guest_namespace: NAMESPACE.into(),
                protocol_version: Some(liqo_api::names::PROTOCOL_VERSION),
                token_lifetime_seconds: Some(peer.token_lifetime().as_secs()),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            };
            auth(200, "application/json", to_vec(&ids))
        }
        (&Method::GET, "/ca") => auth(200, "application/x-pem-file", peer.certs().ca.cert_pem.clone().into_bytes()),
        (&Method::POST, "/identity") => {
            let (status, body) = identity(peer, asked.body);
            Answer { kind: Kind::Identity, ..auth(status, "application/json", body) }
        }
        (&Method::GET, "/version") => read(200, json!({"major": "1", "minor": "36", "gitVersion": "v1.36.0-fleet"})),
        _ => api(peer, asked),
    }
}

fn identity(peer: &Peer, body: &[u8]) -> (u16, Vec<u8>) {
    let refuse = |status, message: String| (status, to_vec(&ErrorBody { message }));
    let request: IdentityRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return refuse(400, format!("body: {e}")),
    };
    if let Err(e) = liqo_api::cluster_id::validate_cluster_id(&request.cluster_id) {
        return refuse(400, format!("clusterID: {e}"));
    }
    if request.cluster_id == peer.id {
        return refuse(400, "clusterID: that is this cluster's own ID".into());
    }
    let mut objects = peer.objects.lock().expect("not poisoned");
    // A renewal proves itself with the current token, as a real peer's TokenReview has it.
    if let Some(current) = &request.current_token {
        if objects.tokens.get(current) != Some(&request.cluster_id) {
            return refuse(401, "currentToken: not an identity of that cluster ID".into());
        }
        peer.renewals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *peer.renewed_at.lock().expect("not poisoned") = Some(std::time::Instant::now());
    }
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let token = service_account_token(&request.cluster_id, now, now + peer.token_lifetime().as_secs() as i64);
    let Some(config) = identity_kubeconfig(peer, &request.cluster_id, &token) else {
        return refuse(500, "issuing the identity failed".into());
    };
    let tenant = tenant_namespace(&request.cluster_id);
    objects.tokens.insert(token, request.cluster_id);
    (
        201,
        to_vec(&IdentityResponse {
            kubeconfig: config,
            namespace: tenant,
            cluster_id: peer.id.clone(),
            holder_key_recorded: None,
            proven_by: None,
        }),
    )
}

/// The kubeconfig of an identity `peer` issues to `cluster_id` with `token`: its peer
/// ServiceAccount in the requester's tenant namespace, as ours issues it (protocol §9).
pub fn identity_kubeconfig(peer: &Peer, cluster_id: &str, token: &str) -> Option<String> {
    let api = ApiServer { url: peer.url().into(), ca_pem: peer.certs().ca.cert_pem.clone() };
    let user = liqo_api::names::peer_service_account(cluster_id);
    kubeconfig(&api, &peer.name, &user, &tenant_namespace(cluster_id), token.to_owned()).ok()
}

/// A token shaped and sized as the ServiceAccount token a peer's kube-apiserver issues to
/// `cluster_id`'s identity, issued at `iat` and expiring at `exp` (Unix seconds): the hub reads
/// those times to renew it, and keeps the token (in the kubeconfig, and the access its checks
/// use) at its real size: the claims a TokenRequest's token has, and the signature of kubeadm's
/// default key (RSA 2048: 256 bytes). Unsigned in truth: random bytes in the signature's place.
pub fn service_account_token(cluster_id: &str, iat: i64, exp: i64) -> String {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let (namespace, account) = (tenant_namespace(cluster_id), liqo_api::names::peer_service_account(cluster_id));
    let issuer = "https://kubernetes.default.svc.cluster.local";
    let key_id = b64(&random_token().as_bytes()[..32]);
    let header = b64(json!({"alg": "RS256", "kid": key_id}).to_string().as_bytes());
    let claims = json!({
        "aud": [issuer], "exp": exp, "iat": iat, "iss": issuer, "jti": uuid_like(),
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": account, "uid": uuid_like()}},
        "nbf": iat, "sub": format!("system:serviceaccount:{namespace}:{account}"),
    });
    let claims = b64(claims.to_string().as_bytes());
    let signature: String = (0..4).map(|_| random_token()).collect();
    format!("{header}.{claims}.{}", b64(&signature.as_bytes()[..256]))
}

/// A random UUID's text (36 characters).
fn uuid_like() -> String {
    let t = random_token();
    format!("{}-{}-{}-{}-{}", &t[..8], &t[8..12], &t[12..16], &t[16..20], &t[20..32])
}

/// The Kubernetes API: a peer identity's requests on its own PeeringRequest and Secret.
fn api(peer: &Peer, asked: &Asked<'_>) -> Answer {
    let mut objects = peer.objects.lock().expect("not poisoned");
    let Some(requester) = asked.bearer.and_then(|t| objects.tokens.get(t)).cloned() else {
        return status(401, "Unauthorized", "Unauthorized".into());
    };
    if let Some((ns, rest)) = asked.path.strip_prefix(REQUESTS).and_then(|r| r.split_once("/peeringrequests")) {
        if ns != tenant_namespace(&requester) {
            return forbidden(&requester, "peeringrequests", rest.trim_start_matches('/'));
        }
        return match rest.strip_prefix('/') {
            Some(name) => request(peer.mode(), &mut objects, asked, &requester, name),
            None => list_requests(&objects, asked, &requester),
        };
    }
    let secret = asked.path.strip_prefix(SECRETS).and_then(|r| r.split_once("/secrets/"));
    match secret {
        Some((ns, name)) => secret_call(&mut objects, asked, &requester, ns, name),
        None => status(404, "NotFound", format!("the server could not find the requested resource ({})", asked.path)),
    }
}

fn request(mode: Mode, objects: &mut Objects, asked: &Asked<'_>, requester: &str, name: &str) -> Answer {
    if name != requester {
        return forbidden(requester, "peeringrequests", name);
    }
    match *asked.method {
        Method::GET => match objects.requests.get(name) {
            Some(pr) => read(200, pr.clone()),
            None => not_found("peeringrequests", name),
        },
        Method::PATCH => {
            if mode == Mode::Refusing {
                let message = format!(
                    "admission webhook \"peeringrequests.discovery.liqo.io\" denied the request: peeringPolicy is RejectAll: PeeringRequest {name} refused"
                );
                return status(403, "Forbidden", message);
            }
            let Some(body) = apply_body(asked) else { return status(415, "UnsupportedMediaType", "server-side apply only".into()) };
            let before = objects.requests.get(name).map(|pr| pr["spec"].clone());
            let version = objects.version();
            let existing = objects.requests.get(name);
            let namespace = tenant_namespace(requester);
            let mut pr = applied("discovery.liqo.io/v1alpha1", "PeeringRequest", name, &namespace, &body, existing, version);
            track(&mut pr, existing, asked, &body);
            if existing.is_none() {
                // The peer's reconciler takes the request up: its finalizer, by an update.
                let finalizer = liqo_api::names::FINALIZER_PEERED;
                pr["metadata"]["finalizers"] = json!([finalizer]);
                let fields = crate::managed::finalizer_fields(&[finalizer]);
                crate::managed::record(&mut pr, PEER_RECONCILER, "Update", None, fields, &crate::managed::now());
            }
            objects.requests.insert(name.to_owned(), pr.clone());
            let then = if before.as_ref() != Some(&pr["spec"]) { Then::Offered(requester.to_owned()) } else { Then::Nothing };
            Answer { then, ..write(200, pr) }
        }
        Method::DELETE => match objects.requests.remove(name) {
            Some(_) => Answer {
                then: Then::Withdrawn(requester.to_owned()),
                ..write(200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}))
            },
            None => Answer { kind: Kind::Write, ..not_found("peeringrequests", name) },
        },
        _ => status(405, "MethodNotAllowed", format!("{} on a PeeringRequest", asked.method)),
    }
}

/// A list or watch of PeeringRequests, allowed by name only (`fieldSelector=metadata.name=`).
fn list_requests(objects: &Objects, asked: &Asked<'_>, requester: &str) -> Answer {
    let selected = query_value(asked.query, "fieldSelector").and_then(|s| s.strip_prefix("metadata.name=").map(str::to_owned));
    if selected.as_deref() != Some(requester) {
        return forbidden(requester, "peeringrequests", "");
    }
    if query_value(asked.query, "watch").is_some_and(|w| w == "true" || w == "1") {
        let seconds = query_value(asked.query, "timeoutSeconds").and_then(|s| s.parse().ok()).unwrap_or(5u64).min(5);
        return Answer { status: 200, content_type: "application/json", body: Vec::new(), kind: Kind::Watch(seconds), then: Then::Nothing };
    }
    let items: Vec<Value> = objects.requests.get(requester).cloned().into_iter().collect();
    read(
        200,
        json!({"kind": "PeeringRequestList", "apiVersion": "discovery.liqo.io/v1alpha1",
        "metadata": {"resourceVersion": objects_version(objects)}, "items": items}),
    )
}

fn secret_call(objects: &mut Objects, asked: &Asked<'_>, requester: &str, ns: &str, name: &str) -> Answer {
    if ns != tenant_namespace(requester) || name != peering_kubeconfig_secret(requester) {
        return forbidden(requester, "secrets", name);
    }
    let key = format!("{ns}/{name}");
    match *asked.method {
        Method::GET => match objects.secrets.get(&key) {
            Some(s) => read(200, s.clone()),
            None => not_found("secrets", name),
        },
        Method::PATCH => {
            let Some(body) = apply_body(asked) else { return status(415, "UnsupportedMediaType", "server-side apply only".into()) };
            let version = objects.version();
            let before = objects.secrets.get(&key).map(|s| s["data"].clone());
            let existing = objects.secrets.get(&key);
            let mut secret = applied("v1", "Secret", name, ns, &body, existing, version);
            track(&mut secret, existing, asked, &body);
            secret.as_object_mut().expect("an object").entry("type").or_insert(json!("Opaque"));
            let changed = before.as_ref() != Some(&secret["data"]);
            objects.secrets.insert(key, secret.clone());
            // A new kubeconfig for a request standing: its broadcaster uses it at once (ours
            // follows the Secret by a watch).
            let then =
                if changed && objects.requests.contains_key(requester) { Then::Offered(requester.to_owned()) } else { Then::Nothing };
            Answer { then, ..write(200, secret) }
        }
        Method::DELETE => match objects.secrets.remove(&key) {
            Some(_) => Answer {
                then: Then::SecretDeleted(requester.to_owned()),
                ..write(200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}))
            },
            None => Answer { kind: Kind::Write, ..not_found("secrets", name) },
        },
        _ => status(405, "MethodNotAllowed", format!("{} on a Secret", asked.method)),
    }
}

fn apply_body(asked: &Asked<'_>) -> Option<Value> {
    (asked.content_type.starts_with(APPLY)).then(|| serde_json::from_slice(asked.body).ok()).flatten()
}

/// `body` as stored by an apply: its labels, spec and data; the server's metadata kept from
/// `existing` (uid, creation time, finalizers, managed fields) or made; the status kept.
fn applied(api_version: &str, kind: &str, name: &str, namespace: &str, body: &Value, existing: Option<&Value>, version: String) -> Value {
    let old = |field: &str| existing.map(|e| e["metadata"][field].clone()).filter(|v| !v.is_null());
    let mut object = body.clone();
    let metadata = json!({
        "name": name,
        "namespace": namespace,
        "uid": old("uid").unwrap_or_else(|| json!(format!("{name}-{version}"))),
        "resourceVersion": version,
        "creationTimestamp": old("creationTimestamp").unwrap_or_else(|| json!(crate::managed::now())),
        "labels": body["metadata"]["labels"],
    });
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    object["metadata"] = metadata;
    for field in ["finalizers", "managedFields"] {
        if let Some(kept) = old(field) {
            object["metadata"][field] = kept;
        }
    }
    if let Some(status) = existing.map(|e| e["status"].clone()).filter(|s| !s.is_null()) {
        object["status"] = status;
    }
    object
}

/// What a real API server adds to `object`, stored by `asked`'s apply of `body` over `existing`:
/// the apply's manager's entry in its managed fields, now what `body` applied; and, for an
/// object with a spec, its generation (1, then one more each time the spec changes).
fn track(object: &mut Value, existing: Option<&Value>, asked: &Asked<'_>, body: &Value) {
    let manager = query_value(asked.query, "fieldManager").unwrap_or_default();
    crate::managed::record(object, &manager, "Apply", None, crate::managed::applied_fields(body), &crate::managed::now());
    if !object["spec"].is_null() {
        let before = existing.map(|e| (&e["spec"], e["metadata"]["generation"].as_u64().unwrap_or(1)));
        object["metadata"]["generation"] = json!(match before {
            Some((spec, generation)) if *spec == object["spec"] => generation,
            Some((_, generation)) => generation + 1,
            None => 1,
        });
    }
}

fn objects_version(objects: &Objects) -> String {
    objects.requests.values().filter_map(|pr| pr["metadata"]["resourceVersion"].as_str()).max().unwrap_or("1").to_owned()
}

fn query_value<'a>(query: &'a str, key: &str) -> Option<std::borrow::Cow<'a, str>> {
    query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| percent_decode(v))
}

fn percent_decode(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('%') && !s.contains('+') {
        return s.into();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned().into()
}

fn to_vec(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("serializable")
}

fn read(status: u16, body: Value) -> Answer {
    Answer { status, content_type: "application/json", body: to_vec(&body), kind: Kind::Read, then: Then::Nothing }
}

fn write(status: u16, body: Value) -> Answer {
    Answer { kind: Kind::Write, ..read(status, body) }
}

fn status(code: u16, reason: &str, message: String) -> Answer {
    read(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

fn not_found(resource: &str, name: &str) -> Answer {
    let group = if resource == "secrets" { String::new() } else { format!(".{DISCOVERY_GROUP}") };
    status(404, "NotFound", format!("{resource}{group} \"{name}\" not found"))
}

fn forbidden(requester: &str, resource: &str, name: &str) -> Answer {
    let user = format!("system:serviceaccount:{}:{}", tenant_namespace(requester), liqo_api::names::peer_service_account(requester));
    status(
        403,
        "Forbidden",
        format!("{resource} \"{name}\" is forbidden: User \"{user}\" cannot act on it ({DISCOVERY_GROUP}/{VERSION}, {LABEL_CLUSTER_ID})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::{Peer, address};

    fn ask<'a>(method: &'a Method, path: &'a str, query: &'a str, bearer: Option<&'a str>, body: &'a [u8]) -> Asked<'a> {
        Asked { method, path, query, content_type: APPLY, bearer, body }
    }

    fn token_for(peer: &Peer, requester: &str) -> String {
        let body = serde_json::to_vec(&json!({"clusterID": requester, "token": ""})).unwrap();
        let a = answer(peer, &ask(&Method::POST, "/identity", "", None, &body));
        assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
        let issued: IdentityResponse = serde_json::from_slice(&a.body).unwrap();
        assert_eq!(issued.cluster_id, peer.id);
        let config = kube::config::Kubeconfig::from_yaml(&issued.kubeconfig).unwrap();
        config.auth_infos[0].auth_info.as_ref().unwrap().token.as_ref().map(|t| secrecy::ExposeSecret::expose_secret(t).to_owned()).unwrap()
    }

    const HUB: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

    /// The PeeringRequests of `requester`'s tenant namespace on a peer.
    fn requests_of(requester: &str) -> String {
        format!("{REQUESTS}{}/peeringrequests", tenant_namespace(requester))
    }

    #[test]
    fn ids_ca_and_an_identity_that_opens_the_api() {
        let peer = Peer::new(3, address(3, 1, false)).unwrap();
        let ids: Ids = serde_json::from_slice(&answer(&peer, &ask(&Method::GET, "/ids", "", None, b"")).body).unwrap();
        assert_eq!(ids.cluster_id, peer.id);
        let ca = answer(&peer, &ask(&Method::GET, "/ca", "", None, b""));
        assert!(String::from_utf8(ca.body).unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
        let path = format!("{}/{HUB}", requests_of(HUB));
        assert_eq!(answer(&peer, &ask(&Method::GET, &path, "", Some("nope"), b"")).status, 401);
        let token = token_for(&peer, HUB);
        assert_eq!(answer(&peer, &ask(&Method::GET, &path, "", Some(&token), b"")).status, 404);
        // Another requester's request is not ours to read, in its tenant namespace or ours.
        let other = crate::peer::cluster_id(99);
        assert_eq!(answer(&peer, &ask(&Method::GET, &format!("{}/{other}", requests_of(&other)), "", Some(&token), b"")).status, 403);
        assert_eq!(answer(&peer, &ask(&Method::GET, &format!("{}/{other}", requests_of(HUB)), "", Some(&token), b"")).status, 403);
    }

    #[test]
    fn an_identity_is_a_jwt_of_the_told_lifetime_renewed_with_itself() {
        let peer = Peer::new(5, address(5, 1, false)).unwrap();
        let ids: Ids = serde_json::from_slice(&answer(&peer, &ask(&Method::GET, "/ids", "", None, b"")).body).unwrap();
        assert_eq!(ids.token_lifetime_seconds, Some(168 * 3600));
        let token = token_for(&peer, HUB);
        let (issued, expires) = liqo_reconciler::tenancy::binding::token_times(&token).unwrap();
        assert_eq!(expires.duration_since(issued).as_secs(), 168 * 3600);
        let renew = |current: &str, id: &str| {
            let body = serde_json::to_vec(&json!({"clusterID": id, "token": "", "currentToken": current})).unwrap();
            answer(&peer, &ask(&Method::POST, "/identity", "", None, &body)).status
        };
        assert_eq!(renew("forged", HUB), 401);
        assert_eq!(renew(&token, &crate::peer::cluster_id(99)), 401, "another ID's token proves nothing");
        assert_eq!(peer.renewals.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(renew(&token, HUB), 201);
        assert_eq!(peer.renewals.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn an_applied_request_is_stored_offered_once_and_withdrawn_on_delete() {
        let peer = Peer::new(4, address(4, 1, false)).unwrap();
        let token = token_for(&peer, HUB);
        let path = format!("{}/{HUB}", requests_of(HUB));
        let body = serde_json::to_vec(&json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest",
            "metadata": {"name": HUB, "labels": {LABEL_CLUSTER_ID: HUB}}, "spec": {"namespace": "liqo"}}))
        .unwrap();
        let first = answer(&peer, &ask(&Method::PATCH, &path, "fieldManager=x&force=true", Some(&token), &body));
        assert_eq!((first.status, first.then.clone()), (200, Then::Offered(HUB.into())));
        let again = answer(&peer, &ask(&Method::PATCH, &path, "fieldManager=x&force=true", Some(&token), &body));
        assert_eq!(again.then, Then::Nothing, "the same spec again changes nothing");
        let got: Value = serde_json::from_slice(&answer(&peer, &ask(&Method::GET, &path, "", Some(&token), b"")).body).unwrap();
        assert_eq!(got["metadata"]["uid"], serde_json::from_slice::<Value>(&first.body).unwrap()["metadata"]["uid"]);
        assert_eq!(got["metadata"]["labels"][LABEL_CLUSTER_ID], HUB);
        let listed =
            answer(&peer, &ask(&Method::GET, &requests_of(HUB), &format!("fieldSelector=metadata.name%3D{HUB}"), Some(&token), b""));
        assert_eq!(serde_json::from_slice::<Value>(&listed.body).unwrap()["items"].as_array().unwrap().len(), 1);
        let gone = answer(&peer, &ask(&Method::DELETE, &path, "", Some(&token), b""));
        assert_eq!(gone.then, Then::Withdrawn(HUB.into()));
        assert_eq!(answer(&peer, &ask(&Method::GET, &path, "", Some(&token), b"")).status, 404);
    }

    #[test]
    fn a_refusing_peer_denies_the_request_and_secrets_are_the_requesters_own() {
        let peer = Peer::new(5, address(5, 1, false)).unwrap();
        let token = token_for(&peer, HUB);
        peer.set_mode(Mode::Refusing);
        let body = serde_json::to_vec(&json!({"metadata": {"name": HUB}, "spec": {}})).unwrap();
        let denied = answer(&peer, &ask(&Method::PATCH, &format!("{}/{HUB}", requests_of(HUB)), "", Some(&token), &body));
        assert_eq!(denied.status, 403);
        assert!(String::from_utf8_lossy(&denied.body).contains("denied the request"));
        let own = format!("/api/v1/namespaces/{}/secrets/{}", tenant_namespace(HUB), peering_kubeconfig_secret(HUB));
        let body = serde_json::to_vec(&json!({"metadata": {"name": "x"}, "data": {"kubeconfig": "eA=="}})).unwrap();
        let stored = answer(&peer, &ask(&Method::PATCH, &own, "", Some(&token), &body));
        assert_eq!(stored.status, 200);
        assert_eq!(serde_json::from_slice::<Value>(&stored.body).unwrap()["type"], "Opaque");
        assert_eq!(answer(&peer, &ask(&Method::PATCH, "/api/v1/namespaces/liqo/secrets/auth-token", "", Some(&token), &body)).status, 403);
    }

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(query_value("a=1&fieldSelector=metadata.name%3Dx", "fieldSelector").unwrap(), "metadata.name=x");
        assert_eq!(query_value("watch=true", "watch").unwrap(), "true");
        assert!(query_value("watch=true", "nope").is_none());
    }
}
