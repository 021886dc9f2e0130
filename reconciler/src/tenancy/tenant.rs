//! A peer's tenant namespace (protocol §9): `liqo-tenant-<its ID>`, holding what that peer writes
//! here (its request, its kubeconfig Secret, its Advertisement) and the identities we issued
//! it, capped by a ResourceQuota.
//!
//! [`namespace`] and [`quota`] are the objects (pure); [`ensure`] makes them the first time
//! something of the peer must be stored; [`retire`] revokes the identities we issued the peer
//! and removes the namespace once no direction of the peering remains ([`unused`], pure);
//! [`super::retirement`] decides when to call it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, ResourceQuotaSpec, ResourceQuotaStatus, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use liqo_api::names::{ANNOTATION_ISSUED_AT, LABEL_CLUSTER_ID, LABEL_TENANT_NAMESPACE, TENANT_QUOTA, tenant_namespace};
use liqo_api::{Advertisement, FederationRequest, PeeringRequest};

use super::access::Access;
use crate::machinery::error::{Error, Result, is_conflict, is_not_found};

/// The most objects of each kind a peer may have in its tenant namespace. One request and one
/// Advertisement are all a peer needs (they are named after its ID), and its kubeconfig Secret.
/// The rest is room for churn: an object deleted still counts until the quota controller
/// recounts, which may take minutes (with 2, an admin's deletes and the peer's writes again
/// filled the quota in the chaos soak, seed 7, and a re-join was refused for 29 s).
pub const QUOTA: [(&str, &str); 4] = [
    ("count/peeringrequests.discovery.liqo.io", "5"),
    ("count/federationrequests.discovery.liqo.io", "5"),
    ("count/advertisements.sharing.liqo.io", "5"),
    ("count/secrets", "10"),
];

/// The cap on `resource` in a tenant namespace ([`QUOTA`]; 0 for one not capped).
pub fn quota_of(resource: &str) -> usize {
    QUOTA.iter().find(|(r, _)| *r == resource).and_then(|(_, n)| n.parse().ok()).unwrap_or(0)
}

fn labels(peer: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL_TENANT_NAMESPACE.to_owned(), "true".to_owned()), (LABEL_CLUSTER_ID.to_owned(), peer.to_owned())])
}

/// Peer `peer`'s tenant namespace.
pub fn namespace(peer: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta { name: Some(tenant_namespace(peer)), labels: Some(labels(peer)), ..Default::default() },
        ..Default::default()
    }
}

/// The ResourceQuota of peer `peer`'s tenant namespace, with the status an empty namespace has:
/// the API server admits nothing a quota covers until its status is known, which the quota
/// controller fills only after a moment (and a bare API server never).
pub fn quota(peer: &str) -> ResourceQuota {
    let hard: BTreeMap<String, Quantity> = QUOTA.iter().map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned()))).collect();
    let used = hard.keys().map(|k| (k.clone(), Quantity("0".into()))).collect();
    ResourceQuota {
        metadata: ObjectMeta {
            name: Some(TENANT_QUOTA.to_owned()),
            namespace: Some(tenant_namespace(peer)),
            labels: Some(labels(peer)),
            ..Default::default()
        },
        spec: Some(ResourceQuotaSpec { hard: Some(hard.clone()), ..Default::default() }),
        status: Some(ResourceQuotaStatus { hard: Some(hard), used: Some(used) }),
    }
}

/// Makes peer `peer`'s tenant namespace and its quota when missing; its name. A namespace
/// still being deleted cannot hold anything: it is waited for ([`TERMINATING_WAIT`]), then made
/// anew, or [`Error::TenantTerminating`] when it does not go. Looks first, then makes: for a
/// peer whose namespace is most likely there already (see [`make`] for one most likely new).
pub async fn ensure(client: &Client, peer: &str, manager: &str) -> Result<String> {
    ready(client, peer, manager, Try::ReadFirst).await
}

/// [`ensure`] for a peer whose namespace is most likely not there yet (our first join of it):
/// made first, read only when it was there (a conflict). A fresh join so costs the hub two
/// reads fewer: the namespace's and its quota's.
pub async fn make(client: &Client, peer: &str, manager: &str) -> Result<String> {
    ready(client, peer, manager, Try::MakeFirst).await
}

/// Which of a read and a create is tried first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Try {
    ReadFirst,
    MakeFirst,
}

async fn ready(client: &Client, peer: &str, manager: &str, first: Try) -> Result<String> {
    let name = tenant_namespace(peer);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let made = PostParams { field_manager: Some(manager.into()), ..Default::default() };
    let existing = match first {
        Try::ReadFirst => namespaces.get_opt(&name).await?,
        Try::MakeFirst => None,
    };
    let (existing, created) = match existing {
        Some(ns) => (ns, false),
        None => match namespaces.create(&made, &namespace(peer)).await {
            Ok(ns) => (ns, true),
            Err(e) if is_conflict(&e) => (namespaces.get(&name).await?, false),
            Err(e) => return Err(e.into()),
        },
    };
    if existing.metadata.deletion_timestamp.is_some() {
        // A full unjoin just retired it and the peer is back: the namespace controller
        // empties a tenant namespace in seconds; made anew once it is gone.
        wait_gone(&namespaces, &name).await?;
        return Box::pin(ready(client, peer, manager, Try::MakeFirst)).await;
    }
    // A namespace made just now holds no quota: it is made without looking.
    quota_ready(&Api::namespaced(client.clone(), &name), peer, &made, created).await?;
    Ok(name)
}

/// Makes the quota of peer `peer`'s tenant namespace (`quotas`) when missing (`fresh`: the
/// namespace was made just now, so it is), and sets an earlier release's caps to ours.
async fn quota_ready(quotas: &Api<ResourceQuota>, peer: &str, made: &PostParams, fresh: bool) -> Result<()> {
    let mut wanted = quota(peer);
    let status = wanted.status.take();
    let existing = if fresh { None } else { quotas.get_opt(TENANT_QUOTA).await? };
    match existing {
        None => match quotas.create(made, &wanted).await {
            Ok(_) => {
                let body = serde_json::json!({"status": status});
                quotas.patch_status(TENANT_QUOTA, &PatchParams::default(), &Patch::Merge(body)).await?;
            }
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e.into()),
        },
        Some(existing) if outdated(&existing) => {
            // Made by an earlier release with other caps: the new ones, in spec and status (the
            // API server admits by the status; the quota controller recounts `used` later).
            let hard = wanted.spec.and_then(|s| s.hard);
            quotas.patch(TENANT_QUOTA, &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"hard": hard}}))).await?;
            quotas
                .patch_status(TENANT_QUOTA, &PatchParams::default(), &Patch::Merge(serde_json::json!({"status": {"hard": hard}})))
                .await?;
            let namespace = tenant_namespace(peer);
            tracing::info!(%namespace, "the tenant namespace's quota had an earlier release's caps: set to this release's");
        }
        Some(_) => {}
    }
    Ok(())
}

/// Creates (or leaves as they are) the objects of `access`, in the peer's tenant namespace,
/// made first when missing.
pub async fn grant(client: &Client, manager: &str, peer: &str, access: &Access) -> Result<()> {
    ensure(client, peer, manager).await?;
    super::grant::grant_in(client, manager, access).await
}

/// Whether a tenant namespace's quota caps other than [`QUOTA`] (pure): made by an earlier
/// release.
pub fn outdated(existing: &ResourceQuota) -> bool {
    let wanted = quota("").spec.and_then(|s| s.hard);
    existing.spec.as_ref().and_then(|s| s.hard.clone()) != wanted
}

/// How long [`ensure`] waits for a tenant namespace being deleted to go before it says so.
pub const TERMINATING_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits up to [`TERMINATING_WAIT`] for namespace `name` to be gone; [`Error::TenantTerminating`]
/// when it is still there.
async fn wait_gone(namespaces: &Api<Namespace>, name: &str) -> Result<()> {
    let deadline = tokio::time::Instant::now() + TERMINATING_WAIT;
    while tokio::time::Instant::now() < deadline {
        if namespaces.get_opt(name).await?.is_none() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    Err(Error::TenantTerminating(name.to_owned()))
}

/// When an identity was issued, from its [`ANNOTATION_ISSUED_AT`] (RFC 3339; pure). An
/// unreadable or absent time is none.
pub fn issued_at(issued: Option<&str>) -> Option<k8s_openapi::jiff::Timestamp> {
    issued.and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
}

/// What of a peer is still in its tenant namespace: the incoming direction (its requests, and
/// the kubeconfig Secret it hands over with them) and the outgoing one (its Advertisement to
/// us).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    pub requests: usize,
    pub secrets: usize,
    pub advertisements: usize,
}

/// Whether no direction of the peering holds the namespace any more (pure). A peer that
/// unjoins removes its kubeconfig Secret first, then its request; a request deleted by someone
/// else leaves the Secret, and the peer, which still wants us, keeps its identity to offer
/// again with.
pub fn unused(held: Held) -> bool {
    held == Held::default()
}

/// What [`retire`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retirement {
    /// The identities revoked and the namespace deleted, or nothing was there to retire.
    Retired,
    /// Something of the peer is still there: its next departure retires it.
    InUse,
    /// Nothing of the peer is there, but an identity was issued to it at this time, after
    /// `since`: the peer may be about to write its request with it. To be looked at again
    /// once it had time to (see [`super::retirement`]).
    IssuedAt(k8s_openapi::jiff::Timestamp),
}

/// Whether the ServiceAccount of `identity` in namespace `name` exists, and when it was issued
/// if that was after `since` (the peer is joining again with it).
async fn issued_since(
    client: &Client,
    name: &str,
    identity: &Access,
    since: k8s_openapi::jiff::Timestamp,
) -> Result<(bool, Option<k8s_openapi::jiff::Timestamp>)> {
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), name).get_opt(identity.service_account_name()).await?;
    let issued = sa.as_ref().and_then(|sa| sa.metadata.annotations.as_ref()?.get(ANNOTATION_ISSUED_AT).cloned());
    Ok((sa.is_some(), issued_at(issued.as_deref()).filter(|at| *at > since)))
}

/// Once no request or kubeconfig Secret of peer `peer` remains in its tenant namespace, revokes
/// the identity it requested with (`remote-<peer>`), unless one was issued after `since`; the
/// namespace stays (our own join of the peer needs it). So a peer that unjoined and comes back
/// gets an identity again (protocol §10).
pub async fn retire_requester(client: &Client, peer: &str, since: k8s_openapi::jiff::Timestamp) -> Result<Retirement> {
    let name = tenant_namespace(peer);
    let held = held(client, &name).await?;
    if held.requests > 0 || held.secrets > 0 {
        return Ok(Retirement::InUse);
    }
    let identity = super::access::peer_identity(peer);
    let (exists, fresh) = issued_since(client, &name, &identity, since).await?;
    if let Some(at) = fresh {
        return Ok(Retirement::IssuedAt(at));
    }
    if exists {
        super::grant::revoke(client, &identity).await?;
        tracing::info!(namespace = %name, "the peer's request is gone: revoked the identity it requested with (the namespace stays for our own join)");
    }
    Ok(Retirement::Retired)
}

/// Once no direction of peer `peer` remains here ([`unused`]), revokes the identities we
/// issued it and deletes its tenant namespace (protocol §9), unless an identity was issued to it
/// after `since` (the peer is joining again with it and has not written its request yet).
/// Callers have made sure we are not joining it. Nothing to do for a namespace absent or
/// already being deleted.
pub async fn retire(client: &Client, peer: &str, since: k8s_openapi::jiff::Timestamp) -> Result<Retirement> {
    let name = tenant_namespace(peer);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.get_opt(&name).await? {
        Some(ns) if ns.metadata.deletion_timestamp.is_none() => {}
        _ => return Ok(Retirement::Retired),
    }
    let held = held(client, &name).await?;
    if !unused(held) {
        tracing::debug!(namespace = %name, ?held, "tenant namespace still in use");
        return Ok(Retirement::InUse);
    }
    // An identity issued since: the peer is about to write its request with it (found by the
    // node tier: a namespace retired between a peer's new identity and its request).
    let identity = super::access::peer_identity(peer);
    if let (_, Some(at)) = issued_since(client, &name, &identity, since).await? {
        tracing::debug!(namespace = %name, issued = %at, "tenant namespace kept for now: an identity was issued in it just now");
        return Ok(Retirement::IssuedAt(at));
    }
    // The identities first: their tokens are refused (401) at once, which the peer takes for
    // the end of what it did here.
    super::grant::revoke(client, &super::access::peer_identity(peer)).await?;
    super::grant::revoke(client, &super::access::advertisement_access(peer)).await?;
    match namespaces.delete(&name, &Default::default()).await {
        Ok(_) => tracing::info!(namespace = %name, "no direction of the peering is left: deleted the peer's tenant namespace"),
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Retirement::Retired)
}

fn live<K: Clone>(list: kube::api::ObjectList<kube::core::PartialObjectMeta<K>>) -> usize {
    list.items.iter().filter(|o| o.metadata.deletion_timestamp.is_none()).count()
}

pub(crate) async fn held(client: &Client, namespace: &str) -> Result<Held> {
    let one = ListParams::default().limit(1);
    let pr = live(Api::<PeeringRequest>::namespaced(client.clone(), namespace).list_metadata(&one).await?);
    let fr = live(Api::<FederationRequest>::namespaced(client.clone(), namespace).list_metadata(&one).await?);
    let adv = live(Api::<Advertisement>::namespaced(client.clone(), namespace).list_metadata(&one).await?);
    let secrets = live(Api::<Secret>::namespaced(client.clone(), namespace).list_metadata(&one).await?);
    Ok(Held { requests: pr + fr, secrets, advertisements: adv })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

    #[test]
    fn the_namespace_is_labelled_and_its_quota_caps_what_a_peer_writes() {
        let ns = namespace(PEER);
        assert_eq!(kube::ResourceExt::name_any(&ns), format!("liqo-tenant-{PEER}"));
        let labels = ns.metadata.labels.unwrap();
        assert_eq!(labels["discovery.liqo.io/tenant-namespace"], "true");
        assert_eq!(labels["discovery.liqo.io/cluster-id"], PEER);
        let q = quota(PEER);
        assert_eq!(kube::ResourceExt::namespace(&q).as_deref(), Some(&*format!("liqo-tenant-{PEER}")));
        let hard = q.spec.unwrap().hard.unwrap();
        assert_eq!(hard["count/peeringrequests.discovery.liqo.io"].0, "5");
        assert_eq!(hard["count/secrets"].0, "10");
        assert_eq!(quota_of("count/advertisements.sharing.liqo.io"), 5);
        assert_eq!(quota_of("count/pods"), 0);
        let status = q.status.unwrap();
        assert_eq!(status.hard.unwrap(), hard);
        assert!(status.used.unwrap().values().all(|q| q.0 == "0"));
    }

    #[test]
    fn a_quota_with_an_earlier_releases_caps_is_outdated() {
        let current = quota(PEER);
        assert!(!outdated(&current));
        let mut earlier = quota(PEER);
        earlier.spec.as_mut().unwrap().hard.as_mut().unwrap().insert("count/secrets".into(), Quantity("4".into()));
        assert!(outdated(&earlier));
        let mut bare = quota(PEER);
        bare.spec = None;
        assert!(outdated(&bare));
    }

    #[test]
    fn an_identity_issued_since_the_last_direction_ended_keeps_the_namespace() {
        let ended: k8s_openapi::jiff::Timestamp = "2026-11-27T12:00:30Z".parse().unwrap();
        let since = |t| issued_at(t).is_some_and(|at| at > ended);
        assert!(since(Some("2026-11-27T12:00:31.5Z")), "a new identity: the peer joins again");
        assert!(!since(Some("2026-11-27T12:00:10Z")), "the identity of the request that went");
        assert_eq!(issued_at(Some("2026-11-27T12:00:31.5Z")), Some("2026-11-27T12:00:31.5Z".parse().unwrap()));
        assert_eq!(issued_at(None), None);
        assert_eq!(issued_at(Some("yesterday")), None);
    }

    #[test]
    fn only_a_namespace_holding_nothing_of_the_peer_is_unused() {
        assert!(unused(Held::default()));
        assert!(!unused(Held { requests: 1, ..Held::default() }));
        assert!(!unused(Held { advertisements: 1, ..Held::default() }));
        assert!(!unused(Held { secrets: 1, ..Held::default() }), "a request deleted by an admin: the peer's Secret stays");
    }
}
