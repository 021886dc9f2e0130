//! What the buttons and forms do, with the user's own credentials (RBAC and our webhook
//! decide): Connect / Disconnect (`spec.join`), Forget (the ForeignCluster deleted), the switches of `liqo-configuration`, Add
//! domain (a SearchDomain), Add remote peer (a ForeignCluster in either of Liqo's forms: protocol §6).

use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use liqo_api::{ClusterConfig, ForeignCluster, SearchDomain, SearchDomainSpec};
use serde::Deserialize;

use crate::html::FormError;

/// A refusal, in the API server's words, placed on the form (and field) it concerns.
pub type Refused = FormError;

fn refused(form: &'static str, field: Option<&'static str>, e: kube::Error) -> Refused {
    let message = match e {
        kube::Error::Api(s) => s.message,
        other => other.to_string(),
    };
    FormError { form, field, message }
}

/// The field of the add-peer form an API server message names, if any (pure).
pub fn field_named(message: &str) -> Option<&'static str> {
    let m = message.to_lowercase();
    if m.contains("clusterid") || m.contains("cluster id") {
        Some("cluster_id")
    } else if m.contains("authurl") {
        Some("auth_url")
    } else if m.contains("apiurl") {
        Some("api_url")
    } else if m.contains("metadata.name") || m.contains("name:") {
        Some("name")
    } else {
        None
    }
}

pub async fn set_join(client: &Client, name: &str, join: bool) -> Result<(), Refused> {
    let patch = serde_json::json!({"spec": {"join": join}});
    Api::<ForeignCluster>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(drop)
        .map_err(|e| refused("peers", None, e))
}

/// Forget: the ForeignCluster deleted (its finalizer undoes a peering first).
pub async fn forget(client: &Client, name: &str) -> Result<(), Refused> {
    Api::<ForeignCluster>::all(client.clone())
        .delete(name, &kube::api::DeleteParams::default())
        .await
        .map(drop)
        .map_err(|e| refused("peers", None, e))
}

/// The switches the page offers.
pub fn toggle_field(field: &str) -> Option<&'static str> {
    ["enableDiscovery", "enableAdvertisement", "autojoin"].into_iter().find(|f| *f == field)
}

pub async fn toggle(client: &Client, field: &'static str, on: bool) -> Result<(), Refused> {
    let patch = serde_json::json!({"spec": {"discoveryConfig": {field: on}}});
    Api::<ClusterConfig>::all(client.clone())
        .patch("liqo-configuration", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(drop)
        .map_err(|e| refused("toggle", None, e))
}

/// The Add domain form.
#[derive(Debug, Deserialize)]
pub struct NewDomain {
    /// The form's CSRF token (checked by the server).
    #[serde(default)]
    pub csrf: String,
    pub domain: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub autojoin: Option<String>,
}

pub async fn add_domain(client: &Client, form: &NewDomain) -> Result<(), Refused> {
    if form.domain.trim().is_empty() {
        return Err(FormError { form: "domain", field: Some("domain"), message: "a domain, e.g. example.com".into() });
    }
    let name =
        if form.name.trim().is_empty() { form.domain.trim().trim_end_matches('.').to_lowercase() } else { form.name.trim().to_owned() };
    let spec = SearchDomainSpec { domain: form.domain.trim().to_owned(), autojoin: Some(form.autojoin.is_some()) };
    Api::<SearchDomain>::all(client.clone())
        .create(&PostParams::default(), &SearchDomain::new(&name, spec))
        .await
        .map(drop)
        .map_err(|e| refused("domain", Some("domain"), e))
}

/// The Add remote peer form.
#[derive(Debug, Deserialize)]
pub struct NewPeer {
    /// The form's CSRF token (checked by the server).
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub auth_url: String,
    #[serde(default)]
    pub api_url: String,
    #[serde(default)]
    pub cluster_id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub allow_untrusted_ca: Option<String>,
    #[serde(default)]
    pub join: Option<String>,
}

/// The ForeignCluster the form asks for (pure), or what is missing.
pub fn foreign_cluster(form: &NewPeer) -> Result<ForeignCluster, Refused> {
    let (auth, api, id) = (form.auth_url.trim(), form.api_url.trim(), form.cluster_id.trim());
    let mut spec = match (auth.is_empty(), api.is_empty(), id.is_empty()) {
        (false, _, _) => serde_json::json!({"authUrl": auth}),
        (true, false, false) => serde_json::json!({"apiUrl": api, "clusterIdentity": {"clusterID": id}}),
        (true, false, true) => {
            return Err(FormError {
                form: "peer",
                field: Some("cluster_id"),
                message: "the cluster ID goes with the API server URL".into(),
            });
        }
        _ => {
            return Err(FormError {
                form: "peer",
                field: Some("auth_url"),
                message: "the remote's auth service URL, or its API server URL and cluster ID".into(),
            });
        }
    };
    spec["join"] = form.join.is_some().into();
    spec["discoveryType"] = "Manual".into();
    if form.allow_untrusted_ca.is_some() {
        spec["allowUntrustedCA"] = true.into();
    }
    let name = match form.name.trim() {
        "" if !id.is_empty() => id.to_lowercase(),
        "" => {
            let url = if auth.is_empty() { api } else { auth };
            let host: String = url
                .trim_start_matches("https://")
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
                .collect();
            host.trim_matches('-').chars().take(63).collect()
        }
        n => n.to_owned(),
    };
    serde_json::from_value(
        serde_json::json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": name}, "spec": spec}),
    )
    .map_err(|e| FormError { form: "peer", field: None, message: e.to_string() })
}

pub async fn add_peer(client: &Client, form: &NewPeer) -> Result<(), Refused> {
    let fc = foreign_cluster(form)?;
    Api::<ForeignCluster>::all(client.clone()).create(&PostParams::default(), &fc).await.map(drop).map_err(|e| {
        let mut r = refused("peer", None, e);
        r.field = field_named(&r.message);
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(auth: &str, api: &str, id: &str) -> NewPeer {
        NewPeer {
            csrf: String::new(),
            auth_url: auth.into(),
            api_url: api.into(),
            cluster_id: id.into(),
            name: String::new(),
            allow_untrusted_ca: None,
            join: Some("true".into()),
        }
    }

    #[test]
    fn the_add_peer_form_makes_either_seed_form() {
        let fc = foreign_cluster(&form("https://10.0.0.2:30443", "", "")).unwrap();
        assert_eq!(fc.metadata.name.as_deref(), Some("10-0-0-2-30443"));
        assert_eq!(fc.spec.auth_url.as_deref(), Some("https://10.0.0.2:30443"));
        assert!(fc.spec.join());
        let fc = foreign_cluster(&form("", "https://10.0.0.2:6443", "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9")).unwrap();
        assert_eq!(fc.spec.remote_cluster_id(), Some("9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"));
        assert_eq!(foreign_cluster(&form("", "https://x", "")).unwrap_err().field, Some("cluster_id"));
        assert_eq!(foreign_cluster(&form("", "", "")).unwrap_err().field, Some("auth_url"));
    }

    #[test]
    fn refusals_land_on_the_field_they_name() {
        assert_eq!(
            field_named("admission webhook denied the request: spec.clusterIdentity.clusterID: \"X\" is not a DNS-1123 label"),
            Some("cluster_id")
        );
        assert_eq!(field_named("spec.authUrl: must be https"), Some("auth_url"));
        assert_eq!(field_named("peeringPolicy RejectAll"), None);
        assert_eq!(toggle_field("enableDiscovery"), Some("enableDiscovery"));
        assert_eq!(toggle_field("deleteEverything"), None);
    }
}
