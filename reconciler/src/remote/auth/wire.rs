//! What the auth service and its clients exchange (exact key names of Liqo's documentation; protocol §3).

use serde::{Deserialize, Serialize};

/// `GET /ids`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Ids {
    #[serde(rename = "clusterId")]
    pub cluster_id: String,
    #[serde(rename = "clusterName")]
    pub cluster_name: String,
    #[serde(rename = "guestNamespace")]
    pub guest_namespace: String,
    /// The peering protocol spoken (`liqo_api::names::PROTOCOL_VERSION`); absent from a
    /// cluster of the cluster-scoped protocol (0.1).
    #[serde(rename = "protocolVersion", default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<u32>,
    /// How long the identities this cluster issues now last, in seconds (protocol §10); absent
    /// from a cluster of before 0.3. A holder whose identity lasts longer (issued by an earlier
    /// release) renews it to this lifetime.
    #[serde(rename = "tokenLifetimeSeconds", default, skip_serializing_if = "Option::is_none")]
    pub token_lifetime_seconds: Option<u64>,
    /// The release the cluster runs (its `--version`, as CHANGELOG.md names it); absent from a
    /// cluster of before 0.3.0. Told, never acted on: the protocol is `protocolVersion`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl Ids {
    /// Whether the cluster answering keeps peers' requests in tenant namespaces (protocol §9).
    pub fn tenant_namespaces(&self) -> bool {
        self.protocol_version.is_some_and(|v| v >= 2)
    }
}

/// `POST /identity` request body: a JSON object (an array of the same values is refused).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(try_from = "serde_json::Map<String, serde_json::Value>")]
pub struct IdentityRequest {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(default)]
    pub token: String,
    /// The caller's current token here, when it renews the identity it holds (protocol §10): the
    /// proof that gets a cluster ID already bound a new identity.
    #[serde(rename = "currentToken", default, skip_serializing_if = "Option::is_none")]
    pub current_token: Option<String>,
    /// The public half of the caller's holder key (`ed25519:` and base64; since 0.4): recorded
    /// with the identity issued to a first claim or a renewal proven by its token.
    #[serde(rename = "holderKey", default, skip_serializing_if = "Option::is_none")]
    pub holder_key: Option<String>,
    /// A challenge of this issuer signed with the holder key (since 0.4): the proof that renews
    /// an identity when its token proves nothing any more (protocol §10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
}

/// A signed challenge ([`crate::tenancy::proof`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    pub challenge: String,
    /// The signature (base64) of [`crate::tenancy::proof::message`].
    pub signature: String,
}

/// `POST /identity/challenge` request body.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ChallengeRequest {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
}

/// `POST /identity/challenge` answer (200).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ChallengeResponse {
    pub challenge: String,
    #[serde(rename = "expiresInSeconds")]
    pub expires_in_seconds: u64,
}

impl IdentityRequest {
    /// A first claim with the cluster's token, nothing more.
    pub fn first(cluster_id: &str, token: String) -> Self {
        Self { cluster_id: cluster_id.to_owned(), token, current_token: None, holder_key: None, proof: None }
    }
}

/// [`IdentityRequest`]'s fields, read from an object only.
#[derive(Deserialize)]
struct IdentityFields {
    #[serde(rename = "clusterID")]
    cluster_id: String,
    #[serde(default)]
    token: String,
    #[serde(rename = "currentToken", default)]
    current_token: Option<String>,
    #[serde(rename = "holderKey", default)]
    holder_key: Option<String>,
    #[serde(default)]
    proof: Option<Proof>,
}

impl TryFrom<serde_json::Map<String, serde_json::Value>> for IdentityRequest {
    type Error = serde_json::Error;
    fn try_from(object: serde_json::Map<String, serde_json::Value>) -> Result<Self, Self::Error> {
        let f: IdentityFields = serde_json::from_value(serde_json::Value::Object(object))?;
        Ok(Self { cluster_id: f.cluster_id, token: f.token, current_token: f.current_token, holder_key: f.holder_key, proof: f.proof })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_request_is_an_object() {
        let r: IdentityRequest = serde_json::from_str(r#"{"clusterID": "a", "currentToken": "t"}"#).unwrap();
        assert_eq!((r.cluster_id.as_str(), r.token.as_str(), r.current_token.as_deref()), ("a", "", Some("t")));
        assert!(serde_json::from_str::<IdentityRequest>(r#"["a", "b", "c"]"#).is_err());
        assert!(serde_json::from_str::<IdentityRequest>(r#"{"token": "x"}"#).unwrap_err().to_string().contains("clusterID"));
        let sent = serde_json::to_string(&IdentityRequest::first("a", String::new())).unwrap();
        assert_eq!(sent, r#"{"clusterID":"a","token":""}"#, "an older auth service reads what we send");
    }
}

/// `POST /identity` answer (201).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct IdentityResponse {
    /// kubeconfig (YAML) for ServiceAccount `remote-<clusterID>` on the issuing cluster.
    pub kubeconfig: String,
    /// Where the PeeringRequest and its Secret go on the issuing cluster: the requester's tenant
    /// namespace there (its Liqo namespace on a cluster of the cluster-scoped protocol).
    pub namespace: String,
    /// The issuing cluster's ID.
    #[serde(rename = "clusterId")]
    pub cluster_id: String,
    /// Whether the identity issued carries the caller's holder key (since 0.4; absent from an
    /// older issuer, which keeps none).
    #[serde(rename = "holderKeyRecorded", default, skip_serializing_if = "Option::is_none")]
    pub holder_key_recorded: Option<bool>,
    /// What proved the caller the holder of a bound ID (`token` or `key`); absent for a first
    /// claim, and from an issuer of before 0.4.
    #[serde(rename = "provenBy", default, skip_serializing_if = "Option::is_none")]
    pub proven_by: Option<ProvenBy>,
}

/// What proved a caller the holder of the ID it renews.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProvenBy {
    /// Its current token (`currentToken`).
    Token,
    /// A challenge signed with its holder key (`proof`).
    Key,
}

/// Error bodies: `{"message": ...}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ErrorBody {
    pub message: String,
}
