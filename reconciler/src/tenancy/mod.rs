//! Tenancy: what each peer holds here and who may hold it (protocol §9, §10).
//!
//! - [`tenant`]: a peer's tenant namespace and its quota, made when first needed and retired
//!   once nothing of the peer is left; [`retirement`] decides when a direction's end retires it;
//! - [`access`] (pure) and [`grant`]: the identities granted in it, by RoleBindings to the
//!   fixed ClusterRoles, and their tokens;
//! - [`binding`] (pure): who gets an identity for a cluster ID (trust on first use, renewal);
//! - [`waiting`], [`sweep`]: identities issued and not used, capped, and retired by the
//!   leader's sweep; [`claims`]: refused claims, shown where refused requests are;
//! - [`install`]: whether what identities stand on is installed.
//!
//! It may use [`cluster`](crate::cluster), [`reporting`](crate::reporting) (Events,
//! metrics), the [`machinery`](crate::machinery) (errors, writes) and the API types; nothing
//! in it imports a controller, the auth service or the context they share. Within it,
//! `tenant` uses `grant`, which uses `access`; never back.

pub mod access;
pub mod binding;
pub mod claims;
pub mod grant;
pub mod install;
pub mod proof;
pub mod retirement;
pub mod sweep;
pub mod tenant;
pub mod waiting;

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use liqo_api::ForeignCluster;
use liqo_api::names::LABEL_CLUSTER_ID;

/// Whether `fc`, standing for `peer`, shows the identity we issued it in use: its request was
/// accepted (`status.incoming.joined`), and the ForeignCluster is not being deleted. Our own
/// join of the peer is another direction, which needs the tenant namespace
/// ([`joining`]) but not the identity the peer requests with.
fn uses(fc: &ForeignCluster, peer: &str) -> bool {
    stands_for(fc, peer) && joined_us(fc)
}

/// Whether `fc`'s peer joined us (its request accepted), `fc` not being deleted.
pub(crate) fn joined_us(fc: &ForeignCluster) -> bool {
    let joined = fc.status.as_ref().and_then(|s| s.incoming.as_ref()).is_some_and(|i| i.joined);
    fc.metadata.deletion_timestamp.is_none() && joined
}

/// Whether `fc` stands for cluster `peer` (its spec or its cluster-ID label says so).
pub fn stands_for(fc: &ForeignCluster, peer: &str) -> bool {
    fc.spec.remote_cluster_id() == Some(peer) || fc.labels().get(LABEL_CLUSTER_ID).map(String::as_str) == Some(peer)
}

/// Whether peer `peer` uses the identity we issued it, by the ForeignCluster named after its ID
/// (the one an accepted request makes): one lookup, for the auth service's cap.
pub fn in_use_by_name(foreign: &Store<ForeignCluster>, peer: &str) -> bool {
    foreign.get(&ObjectRef::new(peer)).is_some_and(|fc| uses(&fc, peer))
}

/// Whether any ForeignCluster here shows `peer` using the identity we issued it (whatever its
/// name): for the sweep.
pub fn in_use(foreign: &Store<ForeignCluster>, peer: &str) -> bool {
    in_use_by_name(foreign, peer) || foreign.find(|fc| uses(fc, peer)).is_some()
}

/// Whether we join peer `id` ourselves (a ForeignCluster for it says `join: true` and is not
/// being deleted): its tenant namespace then stays for that direction.
pub fn joining(foreign: &Store<ForeignCluster>, id: &str) -> bool {
    foreign.find(|fc| stands_for(fc, id) && fc.spec.join() && fc.metadata.deletion_timestamp.is_none()).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store;
    use kube::runtime::watcher::Event;

    const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

    fn fc(name: &str, join: bool, incoming: bool) -> ForeignCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name, "uid": name},
            "spec": {"clusterIdentity": {"clusterID": PEER}, "join": join},
            "status": {"incoming": {"joined": incoming}}
        }))
        .unwrap()
    }

    #[test]
    fn an_identity_is_in_use_while_its_peer_is_joined_to_us() {
        for (name, join, incoming, by_name, anywhere) in [
            (PEER, false, true, true, true),
            (PEER, true, false, false, false),
            (PEER, false, false, false, false),
            ("to-b", false, true, false, true),
        ] {
            let (reader, mut writer) = store::<ForeignCluster>();
            writer.apply_watcher_event(&Event::Apply(fc(name, join, incoming)));
            assert_eq!(in_use_by_name(&reader, PEER), by_name, "{name} join {join} incoming {incoming}");
            assert_eq!(in_use(&reader, PEER), anywhere, "{name} join {join} incoming {incoming}");
            assert!(!in_use(&reader, "another"));
            assert_eq!(joining(&reader, PEER), join, "our own join keeps the namespace, not the peer's identity");
        }
    }
}
