//! What the user may do, asked of the API server with SelfSubjectAccessReviews — once at start
//! and again every minute, never per page view — so the page disables the buttons RBAC would
//! refuse and says why. The API server still decides every action.

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

    /// Asks now and every `period`, until the returned task is aborted.
    pub fn follow(&self, client: Client, period: Duration) -> tokio::task::AbortHandle {
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                this.set(ask(&client).await);
                tokio::time::sleep(period).await;
            }
        })
        .abort_handle()
    }
}

/// Why `verb` on `resource` of `group` is refused, `None` when allowed (or the review failed:
/// the API server will say it on the action itself).
async fn review(client: &Client, group: &str, resource: &str, verb: &str) -> Option<String> {
    let ssar = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &ssar).await.ok()?;
    let status = answer.status?;
    (!status.allowed).then(|| {
        let why = status.reason.filter(|r| !r.is_empty()).unwrap_or_else(|| "RBAC does not allow it".into());
        format!("you may not {verb} {resource}.{group}: {why}")
    })
}

/// Asks about every action the page offers.
pub async fn ask(client: &Client) -> Allowed {
    Allowed {
        join: review(client, "discovery.liqo.io", "foreignclusters", "patch").await,
        toggles: review(client, "config.liqo.io", "clusterconfigs", "patch").await,
        add_domain: review(client, "discovery.liqo.io", "searchdomains", "create").await,
        add_peer: review(client, "discovery.liqo.io", "foreignclusters", "create").await,
    }
}
