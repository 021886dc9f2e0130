//! What peers' identities stand on, installed beside the reconciler (SPEC §10): the two fixed
//! ClusterRoles their RoleBindings name, and the admission policy on the Secrets they write.
//! Without a ClusterRole an identity is issued and every call of the peer is refused (403); so
//! `/identity` answers 503 naming what is missing, and the ClusterConfig's condition
//! `PeerAccessInstalled` says how to apply it. A part the reconciler may not read (an older
//! install's RBAC) is not counted missing: nothing is refused for it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::{Api, Client};
use liqo_api::names::{BROADCASTER_CLUSTER_ROLE, REQUESTER_CLUSTER_ROLE};
use serde::de::DeserializeOwned;

use crate::machinery::error::is_not_found;

/// One object of the install.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub kind: &'static str,
    pub name: &'static str,
    /// The file of `manifests/` that holds it.
    pub manifest: &'static str,
}

const ROLES: &str = "manifests/reconciler/peer-roles.yaml";
const SECRETS: &str = "manifests/reconciler/peer-secrets.yaml";

/// Everything peers' identities stand on.
pub const PARTS: [Part; 5] = [
    Part { kind: "ClusterRole", name: REQUESTER_CLUSTER_ROLE, manifest: ROLES },
    Part { kind: "ClusterRole", name: BROADCASTER_CLUSTER_ROLE, manifest: ROLES },
    Part { kind: "ValidatingAdmissionPolicy", name: "liqo-peer-secrets", manifest: SECRETS },
    Part { kind: "ValidatingAdmissionPolicyBinding", name: "liqo-peer-secrets", manifest: SECRETS },
    Part { kind: "ValidatingAdmissionPolicyBinding", name: "liqo-peer-secrets-tenants", manifest: SECRETS },
];

/// What to tell about `missing` parts (pure): each named, and the command that applies them.
pub fn message(missing: &[Part]) -> String {
    let names: Vec<String> = missing.iter().map(|p| format!("{} {}", p.kind, p.name)).collect();
    let mut files: Vec<&str> = missing.iter().map(|p| p.manifest).collect();
    files.dedup();
    let apply: Vec<String> = files.iter().map(|f| format!("-f {f}")).collect();
    format!("{} missing: peers' identities stand on it; kubectl apply {} (or kubectl liqo install)", names.join(", "), apply.join(" "))
}

/// Whether the object `name` exists: `None` when the reconciler may not tell.
async fn exists<K>(client: &Client, name: &str) -> Option<bool>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
{
    match Api::<K>::all(client.clone()).get_metadata(name).await {
        Ok(_) => Some(true),
        Err(e) if is_not_found(&e) => Some(false),
        Err(e) => {
            tracing::debug!(name, error = %e, "cannot tell whether a part of the install is there");
            None
        }
    }
}

/// The parts of [`PARTS`] known to be missing.
pub async fn missing(client: &Client) -> Vec<Part> {
    let mut out = Vec::new();
    for part in PARTS {
        let there = match part.kind {
            "ClusterRole" => exists::<ClusterRole>(client, part.name).await,
            "ValidatingAdmissionPolicy" => exists::<ValidatingAdmissionPolicy>(client, part.name).await,
            _ => exists::<ValidatingAdmissionPolicyBinding>(client, part.name).await,
        };
        if there == Some(false) {
            out.push(part);
        }
    }
    out
}

/// [`missing`], looked at again at most every [`InstallCheck::FRESH`] while complete and every
/// [`InstallCheck::FRESH_MISSING`] while not (so a fix is seen at once, and a fleet joining
/// costs a few requests a minute).
pub struct InstallCheck {
    client: Client,
    last: Mutex<Option<(Instant, Vec<Part>)>>,
}

impl InstallCheck {
    pub const FRESH: Duration = Duration::from_secs(30);
    pub const FRESH_MISSING: Duration = Duration::from_secs(2);

    pub fn new(client: Client) -> Self {
        Self { client, last: Mutex::new(None) }
    }

    /// The parts missing, as last looked at if that is fresh, else looked at now.
    pub async fn missing(&self) -> Vec<Part> {
        if let Ok(last) = self.last.lock()
            && let Some((at, parts)) = last.as_ref()
            && at.elapsed() < if parts.is_empty() { Self::FRESH } else { Self::FRESH_MISSING }
        {
            return parts.clone();
        }
        self.look().await
    }

    /// [`missing`], looked at now (and remembered).
    pub async fn look(&self) -> Vec<Part> {
        let parts = missing(&self.client).await;
        if let Ok(mut last) = self.last.lock() {
            *last = Some((Instant::now(), parts.clone()));
        }
        parts
    }

    /// Tells `say` what is missing ([`message`]; `None`: nothing), looking every `period` (and
    /// so refreshing what the auth service reads), until `shutdown`.
    pub async fn follow(
        self: std::sync::Arc<Self>,
        say: impl Fn(Option<String>),
        period: Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let looks = async {
            let mut tick = tokio::time::interval(period);
            loop {
                tick.tick().await;
                let missing = self.look().await;
                say((!missing.is_empty()).then(|| message(&missing)));
            }
        };
        tokio::select! {
            _ = looks => {}
            _ = shutdown => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_part_and_each_file_once() {
        let m = message(&PARTS[..2]);
        assert_eq!(
            m,
            "ClusterRole liqo-peer-requester, ClusterRole liqo-peer-broadcaster missing: peers' identities stand on it; kubectl apply -f manifests/reconciler/peer-roles.yaml (or kubectl liqo install)"
        );
        let all = message(&PARTS);
        assert!(all.contains("-f manifests/reconciler/peer-roles.yaml -f manifests/reconciler/peer-secrets.yaml"), "{all}");
    }

    #[test]
    fn the_parts_are_those_the_manifests_ship() {
        for part in PARTS {
            let text = std::fs::read_to_string(format!("{}/../{}", env!("CARGO_MANIFEST_DIR"), part.manifest)).unwrap();
            let shipped = text
                .split("\n---")
                .any(|doc| doc.contains(&format!("kind: {}\n", part.kind)) && doc.contains(&format!("name: {}\n", part.name)));
            assert!(shipped, "{} {} is not in {}", part.kind, part.name, part.manifest);
        }
    }
}
