//! Writing and removing the [`Access`] objects of [`super::access`], and issuing tokens for
//! their ServiceAccounts (I/O). Writes are server-side apply, so granting twice changes nothing.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

use super::access::Access;
use crate::machinery::error::{Error, Result};
use crate::machinery::writes::{apply, delete};

/// Creates (or leaves as they are) the objects of `access`, in a tenant namespace the caller
/// has made sure of ([`super::tenant::grant`] makes sure of it first).
pub async fn grant_in(client: &Client, manager: &str, access: &Access) -> Result<()> {
    let namespace = access.namespace();
    apply(&Api::<ServiceAccount>::namespaced(client.clone(), namespace), manager, &access.service_account).await?;
    apply(&Api::<RoleBinding>::namespaced(client.clone(), namespace), manager, &access.binding).await?;
    Ok(())
}

/// Removes the objects of `access`. A removal cut short leaves a binding to a ServiceAccount
/// that no longer exists, which grants nothing; the next round removes it.
pub async fn revoke(client: &Client, access: &Access) -> Result<()> {
    let namespace = access.namespace();
    // The ServiceAccount first: its tokens are refused (401) at once, which the peer takes
    // for the end; with the binding first it would see 403s meanwhile, which it retries
    // (a 403 may be a restarted API server that has not read its RBAC yet).
    delete(&Api::<ServiceAccount>::namespaced(client.clone(), namespace), access.service_account_name()).await?;
    delete(&Api::<RoleBinding>::namespaced(client.clone(), namespace), access.binding.metadata.name.as_deref().unwrap_or_default()).await?;
    Ok(())
}

/// A token for ServiceAccount `sa` (TokenRequest), valid for `lifetime` or what the API server allows.
pub async fn token(client: &Client, namespace: &str, sa: &str, lifetime: Duration) -> Result<String> {
    Ok(token_until(client, namespace, sa, lifetime).await?.0)
}

/// [`token`], with when it expires as the API server granted it (which may be sooner than
/// asked: `--service-account-max-token-expiration`).
pub async fn token_until(client: &Client, namespace: &str, sa: &str, lifetime: Duration) -> Result<(String, Option<Timestamp>)> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(lifetime.as_secs() as i64), ..Default::default() }),
        ..Default::default()
    };
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let issued = sas.create_token_request(sa, &PostParams::default(), &request).await?;
    let status = issued.status.ok_or(Error::NotReady("token"))?;
    let token = status.token.filter(|t| !t.is_empty()).ok_or(Error::NotReady("token"))?;
    Ok((token, status.expiration_timestamp.map(|t| t.0)))
}
