//! The least-privilege access one cluster grants another, as Kubernetes objects (pure). Both
//! live in the peer's tenant namespace (protocol §9) and bind one of the fixed ClusterRoles
//! shipped in `manifests/` there, by a RoleBinding: nothing per peer is cluster-wide.
//!
//! - [`peer_identity`]: what the auth service creates for a peer that asks for an identity
//!   (`remote-<id>`, bound to `liqo-peer-requester`): its PeeringRequest or FederationRequest
//!   and its kubeconfig Secret, in its tenant namespace. The admission webhook makes sure the
//!   request it creates there carries its own cluster ID; the peer-Secret policy, that the
//!   Secret is `pr-kubeconfig-<its id>`.
//! - [`advertisement_access`]: what a home cluster creates for the peer it joins (`<id>`,
//!   bound to `liqo-peer-broadcaster`): the peer's broadcaster keeps its Advertisement there.
//!
//! Every object carries the label `discovery.liqo.io/cluster-id: <peer id>`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::ObjectMeta;
use liqo_api::names::{BROADCASTER_CLUSTER_ROLE, LABEL_CLUSTER_ID, REQUESTER_CLUSTER_ROLE, peer_service_account, tenant_namespace};

/// A ServiceAccount in a peer's tenant namespace and the RoleBinding that grants it a fixed
/// ClusterRole there.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub service_account: ServiceAccount,
    pub binding: RoleBinding,
}

impl Access {
    /// The tenant namespace both objects live in.
    pub fn namespace(&self) -> &str {
        self.service_account.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// The ServiceAccount's name.
    pub fn service_account_name(&self) -> &str {
        self.service_account.metadata.name.as_deref().unwrap_or_default()
    }
}

fn meta(name: &str, namespace: &str, peer: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(BTreeMap::from([(LABEL_CLUSTER_ID.to_owned(), peer.to_owned())])),
        ..Default::default()
    }
}

fn build(sa_name: &str, cluster_role: &str, peer: &str) -> Access {
    let namespace = tenant_namespace(peer);
    Access {
        service_account: ServiceAccount { metadata: meta(sa_name, &namespace, peer), ..Default::default() },
        binding: RoleBinding {
            // Named after the role: one of each per tenant namespace.
            metadata: meta(cluster_role, &namespace, peer),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: cluster_role.to_owned(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: sa_name.to_owned(),
                namespace: Some(namespace.clone()),
                ..Default::default()
            }]),
        },
    }
}

/// The identity the auth service issues to peer `peer` (ServiceAccount `remote-<peer>`).
pub fn peer_identity(peer: &str) -> Access {
    build(&peer_service_account(peer), REQUESTER_CLUSTER_ROLE, peer)
}

/// What a home cluster grants the peer it joins: ServiceAccount `<peer>`, allowed its
/// Advertisement in its tenant namespace.
pub fn advertisement_access(peer: &str) -> Access {
    build(peer, BROADCASTER_CLUSTER_ROLE, peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

    #[test]
    fn a_peer_identity_is_bound_to_the_requester_role_in_its_tenant_namespace_only() {
        let a = peer_identity(PEER);
        let tenant = format!("liqo-tenant-{PEER}");
        assert_eq!(a.service_account_name(), format!("remote-{PEER}"));
        assert_eq!(a.namespace(), tenant);
        assert_eq!(a.binding.metadata.namespace.as_deref(), Some(&*tenant));
        assert_eq!((a.binding.role_ref.kind.as_str(), a.binding.role_ref.name.as_str()), ("ClusterRole", "liqo-peer-requester"));
        let subject = &a.binding.subjects.as_ref().unwrap()[0];
        assert_eq!((subject.kind.as_str(), subject.name.as_str()), ("ServiceAccount", &*format!("remote-{PEER}")));
        assert_eq!(subject.namespace.as_deref(), Some(&*tenant));
        assert_eq!(a.service_account.metadata.labels.unwrap()[LABEL_CLUSTER_ID], PEER);
    }

    #[test]
    fn advertisement_access_is_bound_to_the_broadcaster_role_in_the_same_namespace() {
        let a = advertisement_access(PEER);
        assert_eq!(a.service_account_name(), PEER);
        assert_eq!(a.namespace(), peer_identity(PEER).namespace());
        assert_eq!(a.binding.role_ref.name, "liqo-peer-broadcaster");
        assert_ne!(a.binding.metadata.name, peer_identity(PEER).binding.metadata.name, "two bindings side by side");
    }
}
