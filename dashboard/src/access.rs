//! What the user may see and do, asked of the API server with SelfSubjectAccessReviews — once
//! at login and again every minute, never per page view. The page shows only the kinds the
//! user may read (in the cluster the watches behind it are the dashboard's own, shared by
//! every user) and disables the buttons RBAC would refuse, saying why. The API server still
//! decides every action.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};

/// Why an action is not allowed (`None`: allowed, or not known to be refused).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    /// Connect / Disconnect: patch ForeignClusters.
    pub join: Option<String>,
    /// The switches: patch the ClusterConfig.
    pub toggles: Option<String>,
    /// Add domain: create SearchDomains.
    pub add_domain: Option<String>,
    /// Add remote peer: create ForeignClusters.
    pub add_peer: Option<String>,
    /// Forget: delete ForeignClusters.
    pub forget: Option<String>,
    /// What the pages may show.
    pub visible: Visible,
}

/// The kinds a user may read, each shown only if so. All by default: the loopback form's
/// watches are the user's own, so the API server has decided already.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Visible {
    pub foreign: bool,
    pub domains: bool,
    pub requests: bool,
    pub advertisements: bool,
    pub config: bool,
    pub cluster_id: bool,
    pub events: bool,
    /// The record of the last checks (ConfigMap liqo-last-checks): "checked 12 s ago".
    pub last_checks: bool,
}

impl Default for Visible {
    fn default() -> Self {
        Self {
            foreign: true,
            domains: true,
            requests: true,
            advertisements: true,
            config: true,
            cluster_id: true,
            events: true,
            last_checks: true,
        }
    }
}

/// The latest answers, shared by the handlers.
#[derive(Clone, Default)]
pub struct Permissions(Arc<RwLock<Allowed>>);

impl Permissions {
    pub fn now(&self) -> Allowed {
        self.0.read().expect("not poisoned").clone()
    }

    pub fn set(&self, allowed: Allowed) {
        *self.0.write().expect("not poisoned") = allowed;
    }

    /// Asks now and every `period` (what the user may see too when `namespace` is given: the
    /// in-cluster form), until the returned task is aborted.
    pub fn follow(&self, client: Client, namespace: Option<String>, period: Duration) -> tokio::task::AbortHandle {
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let allowed = match &namespace {
                    Some(ns) => ask_user(&client, ns).await,
                    None => ask(&client).await,
                };
                this.set(allowed);
                tokio::time::sleep(period).await;
            }
        })
        .abort_handle()
    }
}

/// What the API server answers about `verb` on `resource` of `group` (in `namespace`, of object
/// `name` when given): whether allowed and why not; `None` when the review itself failed.
async fn answer(
    client: &Client,
    (group, resource, verb): (&str, &str, &str),
    namespace: Option<&str>,
    name: Option<&str>,
) -> Option<(bool, String)> {
    let ssar = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                namespace: namespace.map(Into::into),
                name: name.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &ssar).await.ok()?;
    let status = answer.status?;
    Some((status.allowed, status.reason.filter(|r| !r.is_empty()).unwrap_or_else(|| "RBAC does not allow it".into())))
}

/// Why `verb` on `resource` of `group` is refused, `None` when allowed (or the review failed:
/// the API server will say it on the action itself).
async fn review(client: &Client, group: &str, resource: &str, verb: &str) -> Option<String> {
    let (allowed, why) = answer(client, (group, resource, verb), None, None).await?;
    (!allowed).then(|| format!("you may not {verb} {resource}.{group}: {why}"))
}

/// Whether the user may read what the page shows of a kind: allowed, never when the review
/// failed (nothing is shown that the API server did not allow).
async fn may(client: &Client, what: (&str, &str, &str), namespace: Option<&str>, name: Option<&str>) -> bool {
    answer(client, what, namespace, name).await.is_some_and(|(allowed, _)| allowed)
}

/// Asks about every kind the pages show (the Liqo namespace is `namespace`).
pub async fn visible(client: &Client, namespace: &str) -> Visible {
    Visible {
        foreign: may(client, ("discovery.liqo.io", "foreignclusters", "list"), None, None).await,
        domains: may(client, ("discovery.liqo.io", "searchdomains", "list"), None, None).await,
        requests: may(client, ("discovery.liqo.io", "peeringrequests", "list"), None, None).await,
        advertisements: may(client, ("sharing.liqo.io", "advertisements", "list"), None, None).await,
        config: may(client, ("config.liqo.io", "clusterconfigs", "list"), None, None).await,
        cluster_id: may(client, ("", "configmaps", "get"), Some(namespace), Some("cluster-id")).await,
        // Events about cluster-scoped objects are kept in `default`.
        events: may(client, ("events.k8s.io", "events", "list"), Some("default"), None).await,
        last_checks: may(client, ("", "configmaps", "get"), Some(namespace), Some(liqo_api::last_checks::CONFIGMAP)).await,
    }
}

/// Asks about every action the page offers; what it shows is left as it is.
pub async fn ask(client: &Client) -> Allowed {
    Allowed {
        join: review(client, "discovery.liqo.io", "foreignclusters", "patch").await,
        toggles: review(client, "config.liqo.io", "clusterconfigs", "patch").await,
        add_domain: review(client, "discovery.liqo.io", "searchdomains", "create").await,
        add_peer: review(client, "discovery.liqo.io", "foreignclusters", "create").await,
        forget: review(client, "discovery.liqo.io", "foreignclusters", "delete").await,
        visible: Visible::default(),
    }
}

/// Asks about every action and, for a user of the in-cluster form, every kind shown.
pub async fn ask_user(client: &Client, namespace: &str) -> Allowed {
    let (visible, actions) = tokio::join!(visible(client, namespace), ask(client));
    Allowed { visible, ..actions }
}
