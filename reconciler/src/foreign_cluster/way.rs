//! The two ways of reaching a remote, which differ only in how trust, the CA and the identity
//! are obtained and in what we may do with our PeeringRequest there:
//!
//! - **auth service** (`spec.authUrl`, the auth-service form, recommended): trust from the auth service's
//!   certificate, the CA from its `/ca`, an identity from its `/identity`; our Secret and
//!   PeeringRequest are applied with that identity, in the tenant namespace its kubeconfig
//!   names (protocol §9), read back every health round, and deleted on unjoin;
//! - **anonymous** (`spec.apiUrl` + cluster ID, no `authUrl`: the manual form and the
//!   API-server DNS zone; the anonymous way): trust from the API server's certificate, the
//!   CA from its anonymously readable `kube-public/cluster-info` (kubeadm and kind publish it),
//!   no identity. The remote must opt in (`manifests/anonymous-peering/` there) and its webhook
//!   judges the request by policy alone. Both go to the remote's Liqo namespace. An anonymous requester can create, never read, change
//!   or delete: "already exists" is fine, health is `/version`, and on unjoin our
//!   PeeringRequest stays there (its admin removes it).

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use liqo_api::{ForeignCluster, PeeringRequest};

use super::names::FIELD_MANAGER;
use crate::machinery::error::{Error, Result, Step, is_conflict};
use crate::machinery::writes;
use crate::remote::http1::{Answer, status_of};
use crate::remote::peer::{Peers, Trust};

/// Our PeeringRequest as a health check reads it: its `metadata.managedFields` skipped unread
/// (a real API server answers with an entry for each field manager, about as long as the rest of
/// the object; nothing here reads them), every other field as the object has it.
#[derive(serde::Deserialize)]
struct Read {
    #[serde(default)]
    metadata: ReadMeta,
    spec: liqo_api::peering_request::PeeringRequestSpec,
    #[serde(default)]
    status: Option<liqo_api::peering_request::PeeringRequestStatus>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ReadMeta {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    deletion_grace_period_seconds: Option<i64>,
    labels: Option<std::collections::BTreeMap<String, String>>,
    annotations: Option<std::collections::BTreeMap<String, String>>,
    finalizers: Option<Vec<String>>,
    owner_references: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
}

impl From<Read> for PeeringRequest {
    fn from(read: Read) -> Self {
        let m = read.metadata;
        let metadata = kube::api::ObjectMeta {
            name: m.name,
            generate_name: m.generate_name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            generation: m.generation,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            labels: m.labels,
            annotations: m.annotations,
            finalizers: m.finalizers,
            owner_references: m.owner_references,
            managed_fields: None,
            self_link: None,
        };
        PeeringRequest { metadata, spec: read.spec, status: read.status }
    }
}

/// How a ForeignCluster reaches its remote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way<'a> {
    AuthService { auth_url: &'a str },
    Anonymous { api_url: &'a str },
}

impl<'a> Way<'a> {
    /// The way `fc` peers, `None` when it has neither an auth URL nor an API URL with a cluster ID.
    pub fn of(fc: &'a ForeignCluster) -> Option<Self> {
        let nonempty = |u: &'a Option<String>| u.as_deref().filter(|u| !u.is_empty());
        match (nonempty(&fc.spec.auth_url), nonempty(&fc.spec.api_url)) {
            (Some(auth_url), _) => Some(Way::AuthService { auth_url }),
            (None, Some(api_url)) if fc.spec.remote_cluster_id().is_some() => Some(Way::Anonymous { api_url }),
            _ => None,
        }
    }

    /// The URL whose certificate decides trust.
    pub fn url(self) -> &'a str {
        match self {
            Way::AuthService { auth_url } => auth_url,
            Way::Anonymous { api_url } => api_url,
        }
    }

    /// What presents that certificate.
    pub fn what(self) -> &'static str {
        match self {
            Way::AuthService { .. } => "auth service",
            Way::Anonymous { .. } => "API server",
        }
    }

    /// Where the remote API server's CA comes from.
    pub fn ca_source(self) -> &'static str {
        match self {
            Way::AuthService { .. } => "its auth service",
            Way::Anonymous { .. } => "kube-public/cluster-info",
        }
    }

    /// Whether our PeeringRequest on the remote can be read (and deleted) by us.
    pub fn reads_requests(self) -> bool {
        matches!(self, Way::AuthService { .. })
    }

    /// The remote API server's CA, verified as `trust` says.
    pub async fn fetch_ca<P: Peers>(self, peers: &P, trust: Trust) -> Result<String> {
        match self {
            Way::AuthService { auth_url } => peers.ca(auth_url, trust).await,
            Way::Anonymous { api_url } => peers.cluster_info_ca(api_url, trust).await,
        }
    }

    /// The CA the remote presents now, only to compare it with the pinned one (never accepted).
    pub async fn presented_ca<P: Peers>(self, peers: &P, trust: Trust) -> Option<String> {
        match self {
            Way::AuthService { auth_url } => peers.ca(auth_url, trust).await.ok(),
            Way::Anonymous { api_url } => peers.cluster_info_ca(api_url, Trust::Anything).await.ok(),
        }
    }

    /// What the health check asks the remote API server: with an identity, our PeeringRequest
    /// in `namespace`; anonymously, `/version`.
    pub fn check_path(self, namespace: &str, own_id: &str) -> String {
        match self {
            Way::AuthService { .. } => format!("{}/{own_id}", PeeringRequest::url_path(&(), Some(namespace))),
            Way::Anonymous { .. } => "/version".to_owned(),
        }
    }

    /// What the health check's answer says: the remote API server answers; with an identity,
    /// our PeeringRequest there (`Some(None)`: it is not there). `None`: answers, but we cannot
    /// read it. Any other answer is the remote's failure, read as kube reads one.
    pub fn read_answer(self, answer: Answer) -> Result<Option<Option<PeeringRequest>>> {
        if (200..300).contains(&answer.status) {
            return match self {
                Way::AuthService { .. } => serde_json::from_slice::<Read>(&answer.body)
                    .map(|read| Some(Some(read.into())))
                    .map_err(|e| Error::RemoteInvalid { step: Step::ApiServer, message: format!("our PeeringRequest: {e}") }),
                Way::Anonymous { .. } => Ok(None),
            };
        }
        let status = status_of(&answer);
        if self.reads_requests() && status.is_not_found() {
            return Ok(Some(None));
        }
        Err(Error::remote_api(Step::ApiServer, kube::Error::Api(Box::new(status))))
    }

    /// Puts our Secret and PeeringRequest on the remote, in the namespace they name: applied
    /// with an identity, created anonymously ("already exists" is fine: an anonymous requester
    /// cannot look).
    pub async fn put_offer(self, remote: &Client, secret: &Secret, request: &PeeringRequest) -> Result<()> {
        let namespace = secret.namespace().unwrap_or_default();
        let secrets = Api::<Secret>::namespaced(remote.clone(), &namespace);
        let requests = Api::<PeeringRequest>::namespaced(remote.clone(), &request.namespace().unwrap_or_default());
        let remote_err = |e| Error::remote_api(Step::ApiServer, e);
        match self {
            Way::AuthService { .. } => {
                writes::apply_raw(&secrets, FIELD_MANAGER, secret).await.map_err(remote_err)?;
                writes::apply_raw(&requests, FIELD_MANAGER, request).await.map_err(remote_err)?;
            }
            Way::Anonymous { .. } => {
                let pp = PostParams::default();
                let exists_is_fine = |r: kube::Result<()>| match r {
                    Err(e) if is_conflict(&e) => Ok(()),
                    other => other,
                };
                exists_is_fine(secrets.create(&pp, secret).await.map(drop)).map_err(remote_err)?;
                exists_is_fine(requests.create(&pp, request).await.map(drop)).map_err(remote_err)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(spec: serde_json::Value) -> ForeignCluster {
        serde_json::from_value(serde_json::json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": "x"}, "spec": spec}))
        .unwrap()
    }

    #[test]
    fn the_auth_url_wins_and_the_api_url_needs_a_cluster_id() {
        let both = fc(serde_json::json!({"authUrl": "https://a:1", "apiUrl": "https://b:2", "clusterID": "x"}));
        assert_eq!(Way::of(&both), Some(Way::AuthService { auth_url: "https://a:1" }));
        let api = fc(serde_json::json!({"apiUrl": "https://b:2", "clusterID": "x"}));
        assert_eq!(Way::of(&api), Some(Way::Anonymous { api_url: "https://b:2" }));
        assert!(!Way::of(&api).unwrap().reads_requests());
        assert_eq!(Way::of(&fc(serde_json::json!({"apiUrl": "https://b:2"}))), None);
        assert_eq!(Way::of(&fc(serde_json::json!({"authUrl": "", "clusterID": "x"}))), None);
    }

    #[test]
    fn a_checks_answer_reads_as_the_object_its_absence_or_the_remotes_failure() {
        let auth = Way::AuthService { auth_url: "https://a:1" };
        assert_eq!(
            auth.check_path("liqo-tenant-x", "home-id"),
            "/apis/discovery.liqo.io/v1alpha1/namespaces/liqo-tenant-x/peeringrequests/home-id"
        );
        let anonymous = Way::Anonymous { api_url: "https://b:2" };
        assert_eq!(anonymous.check_path("liqo", "home-id"), "/version");
        let request = serde_json::json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest",
            "metadata": {"name": "home-id", "namespace": "liqo-tenant-x"},
            "spec": {"clusterIdentity": {"clusterID": "home-id"}, "namespace": "liqo",
                     "kubeConfigRef": {"name": "k", "namespace": "liqo"}}});
        let ok = |body: serde_json::Value| Answer { status: 200, body: serde_json::to_vec(&body).unwrap() };
        let read = auth.read_answer(ok(request.clone())).unwrap().unwrap().unwrap();
        assert_eq!(read.name_any(), "home-id");
        // As a real API server answers: every field read but the field managers'.
        let mut full = request;
        full["metadata"] = serde_json::json!({"name": "home-id", "namespace": "liqo-tenant-x", "uid": "u-1",
            "resourceVersion": "42", "generation": 3, "creationTimestamp": "2026-12-06T08:00:00Z",
            "deletionTimestamp": "2026-12-06T09:00:00Z", "deletionGracePeriodSeconds": 0,
            "labels": {"a": "b"}, "annotations": {"c": "d"}, "finalizers": ["f"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "n", "uid": "u-0"}],
            "managedFields": [{"manager": "liqo-reconciler", "operation": "Apply", "apiVersion": "discovery.liqo.io/v1alpha1",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:namespace": {}}}}]});
        full["status"] = serde_json::json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "ok", "lastTransitionTime": "2026-12-06T08:00:01Z"}]});
        let read = auth.read_answer(ok(full.clone())).unwrap().unwrap().unwrap();
        let mut expected: PeeringRequest = serde_json::from_value(full).unwrap();
        expected.metadata.managed_fields = None;
        assert_eq!(serde_json::to_value(&read).unwrap(), serde_json::to_value(&expected).unwrap());
        let not_found =
            serde_json::json!({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"});
        let answer = |status: u16, body: &serde_json::Value| Answer { status, body: serde_json::to_vec(body).unwrap() };
        assert!(matches!(auth.read_answer(answer(404, &not_found)), Ok(Some(None))), "not there");
        assert!(anonymous.read_answer(answer(404, &not_found)).is_err(), "no /version: a failure");
        assert!(matches!(anonymous.read_answer(ok(serde_json::json!({"major": "1"}))), Ok(None)));
        let unauthorized =
            serde_json::json!({"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401, "message": "Unauthorized"});
        assert!(auth.read_answer(answer(401, &unauthorized)).unwrap_err().is_revocation());
        let page = Answer { status: 404, body: b"404 page not found".to_vec() };
        assert_eq!(auth.read_answer(page).unwrap_err().answered(), Some(404), "a page, not an absent object");
        let garbage = Answer { status: 200, body: b"not json".to_vec() };
        assert!(matches!(auth.read_answer(garbage), Err(Error::RemoteInvalid { .. })));
    }
}
