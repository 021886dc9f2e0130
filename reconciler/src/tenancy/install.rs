//! What peers' identities stand on, installed beside the reconciler (protocol §10): the two fixed
//! ClusterRoles their RoleBindings name, and the admission policy on the Secrets they write.
//! Without a ClusterRole an identity is issued and every call of the peer is refused (403); so
//! `/identity` answers 503 naming what is missing, and the ClusterConfig's condition
//! `PeerAccessInstalled` says how to apply it. A part the reconciler may not read (an older
//! install's RBAC) is not counted missing: nothing is refused for it.
//!
//! The parts are followed by a watch each (by name), so that no identity is issued once one is
//! gone: `/identity` reads what the watches say, with no request of its own. Where a watch is
//! not in force (not yet listed, or refused by an older install's RBAC, which granted `get`
//! only), the part is looked at, at most every [`InstallCheck::FRESH`] while complete (a part
//! deleted then was seen up to 30 s late, two identities issued against it).

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
    /// Whether each part of [`PARTS`] is there, as its watch says (`None`: its watch is not in
    /// force).
    watched: Mutex<[Option<bool>; PARTS.len()]>,
    /// Set to the number of parts whose watch is in force.
    in_force: Option<prometheus_client::metrics::gauge::Gauge>,
}

/// The parts missing, from what the watches say (pure): `None` unless every part is watched.
pub fn missing_as_watched(watched: &[Option<bool>; PARTS.len()]) -> Option<Vec<Part>> {
    let mut missing = Vec::new();
    for (part, there) in PARTS.iter().zip(watched) {
        match there {
            Some(false) => missing.push(*part),
            Some(true) => {}
            None => return None,
        }
    }
    Some(missing)
}

impl InstallCheck {
    pub const FRESH: Duration = Duration::from_secs(30);
    pub const FRESH_MISSING: Duration = Duration::from_secs(2);

    pub fn new(client: Client) -> Self {
        Self { client, last: Mutex::new(None), watched: Mutex::new([None; PARTS.len()]), in_force: None }
    }

    /// Counts the parts whose watch is in force in `gauge`.
    pub fn with_gauge(mut self, gauge: prometheus_client::metrics::gauge::Gauge) -> Self {
        self.in_force = Some(gauge);
        self
    }

    /// The parts missing: as their watches say when every part is watched, else as last looked
    /// at if that is fresh, else looked at now.
    pub async fn missing(&self) -> Vec<Part> {
        if let Some(missing) = self.watched.lock().ok().and_then(|w| missing_as_watched(&w)) {
            return missing;
        }
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

    /// Follows every part by a watch of it by name until `shutdown` (see the module).
    pub async fn watch(self: std::sync::Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        let watches = futures::future::join_all(PARTS.iter().enumerate().map(|(i, part)| {
            let this = self.clone();
            async move {
                match part.kind {
                    "ClusterRole" => this.follow_part::<ClusterRole>(i, part.name).await,
                    "ValidatingAdmissionPolicy" => this.follow_part::<ValidatingAdmissionPolicy>(i, part.name).await,
                    _ => this.follow_part::<ValidatingAdmissionPolicyBinding>(i, part.name).await,
                }
            }
        }));
        tokio::select! {
            _ = watches => {}
            _ = shutdown => {}
        }
    }

    /// Keeps `watched[i]` as the watch of the object `name` says; `None` while it is not in force.
    async fn follow_part<K>(&self, i: usize, name: &str)
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + 'static,
    {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let api = Api::<kube::core::PartialObjectMeta<K>>::all(self.client.clone());
        let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
        let set = |there: Option<bool>| {
            if let Ok(mut w) = self.watched.lock() {
                w[i] = there;
                if let Some(g) = &self.in_force {
                    g.set(w.iter().filter(|p| p.is_some()).count() as i64);
                }
            }
        };
        let mut listed = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listed = false,
                Ok(watcher::Event::InitApply(_)) => listed = true,
                Ok(watcher::Event::InitDone) => set(Some(listed)),
                Ok(watcher::Event::Apply(_)) => set(Some(true)),
                Ok(watcher::Event::Delete(_)) => set(Some(false)),
                Err(e) => {
                    tracing::debug!(name, error = %e, "watching a part of the install failed; looking at it instead");
                    set(None);
                }
            }
        }
    }

    /// Tells `say` what is missing ([`message`]; `None`: nothing) every `period`, until
    /// `shutdown`: as the watches say when every part is watched (no request), else looked at
    /// (and so refreshing what the auth service reads).
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
                let watched = self.watched.lock().ok().and_then(|w| missing_as_watched(&w));
                let missing = match watched {
                    Some(missing) => missing,
                    None => self.look().await,
                };
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
    fn what_the_watches_say_counts_only_once_every_part_is_watched() {
        assert_eq!(missing_as_watched(&[Some(true); PARTS.len()]), Some(vec![]));
        let mut w = [Some(true); PARTS.len()];
        w[0] = Some(false);
        assert_eq!(missing_as_watched(&w), Some(vec![PARTS[0]]));
        w[3] = None;
        assert_eq!(missing_as_watched(&w), None, "a part not watched: looked at instead");
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
