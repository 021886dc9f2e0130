//! The least-privilege access one cluster grants another, as Kubernetes objects (pure).
//!
//! - [`peer_identity`]: what the auth service creates for a peer that asks for an identity
//!   (`remote-<id>`): it may create PeeringRequests/FederationRequests and Secrets, and
//!   read/update/delete only the PeeringRequest named after its own cluster ID and its Secret.
//!   Kubernetes RBAC cannot restrict `create` by name; the admission webhook makes sure the
//!   PeeringRequest it creates carries its own cluster ID.
//! - [`advertisement_access`]: what a home cluster creates for the peer it joins (`<id>`): the
//!   peer's broadcaster may create, and manage only, `advertisement-<its own id>`.
//!
//! Every object carries the label `discovery.liqo.io/cluster-id: <peer id>`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::ObjectMeta;
use liqo_api::names::{
    DISCOVERY_GROUP, LABEL_CLUSTER_ID, SHARING_GROUP, advertisement_name, peer_role, peer_service_account, peering_kubeconfig_secret,
};

/// A ServiceAccount and what it is allowed to do, cluster-wide and in its namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub service_account: ServiceAccount,
    pub cluster_role: ClusterRole,
    pub cluster_role_binding: ClusterRoleBinding,
    pub role: Option<(Role, RoleBinding)>,
}

fn meta(name: &str, namespace: Option<&str>, peer: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(BTreeMap::from([(LABEL_CLUSTER_ID.to_owned(), peer.to_owned())])),
        ..Default::default()
    }
}

fn rule(group: &str, resources: &[&str], names: &[String], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        resource_names: (!names.is_empty()).then(|| names.to_vec()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..Default::default()
    }
}

fn subject(sa: &str, namespace: &str) -> Subject {
    Subject { kind: "ServiceAccount".into(), name: sa.to_owned(), namespace: Some(namespace.to_owned()), ..Default::default() }
}

fn build(sa_name: &str, role_name: &str, namespace: &str, peer: &str, cluster_rules: Vec<PolicyRule>, ns_rules: Vec<PolicyRule>) -> Access {
    let subjects = Some(vec![subject(sa_name, namespace)]);
    let role = (!ns_rules.is_empty()).then(|| {
        (
            Role { metadata: meta(role_name, Some(namespace), peer), rules: Some(ns_rules) },
            RoleBinding {
                metadata: meta(role_name, Some(namespace), peer),
                role_ref: RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: "Role".into(), name: role_name.into() },
                subjects: subjects.clone(),
            },
        )
    });
    Access {
        service_account: ServiceAccount { metadata: meta(sa_name, Some(namespace), peer), ..Default::default() },
        cluster_role: ClusterRole { metadata: meta(role_name, None, peer), rules: Some(cluster_rules), ..Default::default() },
        cluster_role_binding: ClusterRoleBinding {
            metadata: meta(role_name, None, peer),
            role_ref: RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: "ClusterRole".into(), name: role_name.into() },
            subjects,
        },
        role,
    }
}

/// The identity the auth service issues to peer `peer` (ServiceAccount `remote-<peer>`).
pub fn peer_identity(peer: &str, namespace: &str) -> Access {
    let own = vec![peer.to_owned()];
    let secret = vec![peering_kubeconfig_secret(peer)];
    let requests = ["peeringrequests", "federationrequests"];
    build(
        &peer_service_account(peer),
        &peer_role(peer),
        namespace,
        peer,
        vec![
            rule(DISCOVERY_GROUP, &requests, &[], &["create"]),
            // list and watch by name (a field selector on it): the requester follows its own
            // request being deleted by a watch.
            rule(DISCOVERY_GROUP, &requests, &own, &["get", "list", "watch", "update", "patch", "delete"]),
        ],
        vec![rule("", &["secrets"], &[], &["create"]), rule("", &["secrets"], &secret, &["get", "update", "patch", "delete"])],
    )
}

/// What a home cluster grants the peer it joins: ServiceAccount and ClusterRole `<peer>`,
/// limited to the Advertisement `advertisement-<peer>`.
pub fn advertisement_access(peer: &str, namespace: &str) -> Access {
    let own = vec![advertisement_name(peer)];
    build(
        peer,
        peer,
        namespace,
        peer,
        vec![
            rule(SHARING_GROUP, &["advertisements"], &[], &["create"]),
            rule(SHARING_GROUP, &["advertisements", "advertisements/status"], &own, &["get", "update", "patch", "delete"]),
        ],
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

    fn verbs_on<'a>(rules: &'a [PolicyRule], resource: &str, name: Option<&str>) -> Vec<&'a str> {
        rules
            .iter()
            .filter(|r| r.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == resource)))
            .filter(|r| match (name, &r.resource_names) {
                (_, None) => true,
                (Some(n), Some(names)) => names.iter().any(|x| x == n),
                (None, Some(_)) => false,
            })
            .flat_map(|r| r.verbs.iter().map(String::as_str))
            .collect()
    }

    #[test]
    fn a_peer_identity_manages_only_its_own_request_and_secret() {
        let a = peer_identity(PEER, "liqo");
        assert_eq!(a.service_account.metadata.name.as_deref(), Some(&*format!("remote-{PEER}")));
        assert_eq!(a.service_account.metadata.namespace.as_deref(), Some("liqo"));
        let rules = a.cluster_role.rules.as_deref().unwrap();
        // Its own PeeringRequest: full management.
        let mut own = verbs_on(rules, "peeringrequests", Some(PEER));
        own.sort();
        assert_eq!(own, ["create", "delete", "get", "list", "patch", "update", "watch"]);
        // Somebody else's: create only (the webhook checks the name), never read or delete.
        assert_eq!(verbs_on(rules, "peeringrequests", Some("other")), ["create"]);
        assert_eq!(verbs_on(rules, "federationrequests", Some("other")), ["create"]);
        // Nothing else cluster-wide.
        assert!(rules.iter().all(|r| r.api_groups.as_deref() == Some(&["discovery.liqo.io".to_owned()][..])));
        assert!(verbs_on(rules, "foreignclusters", None).is_empty());

        let (role, binding) = a.role.unwrap();
        let ns_rules = role.rules.as_deref().unwrap();
        let secret = format!("pr-kubeconfig-{PEER}");
        assert_eq!(verbs_on(ns_rules, "secrets", Some("auth-token")), ["create"]);
        assert!(verbs_on(ns_rules, "secrets", Some(&secret)).contains(&"delete"));
        assert_eq!(role.metadata.namespace.as_deref(), Some("liqo"));
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!((subject.kind.as_str(), subject.name.as_str()), ("ServiceAccount", &*format!("remote-{PEER}")));
        assert_eq!(a.cluster_role_binding.role_ref.name, a.cluster_role.metadata.name.unwrap());
    }

    #[test]
    fn advertisement_access_is_limited_to_the_peers_advertisement() {
        let a = advertisement_access(PEER, "liqo");
        assert_eq!(a.service_account.metadata.name.as_deref(), Some(PEER));
        assert!(a.role.is_none());
        let rules = a.cluster_role.rules.as_deref().unwrap();
        let own = format!("advertisement-{PEER}");
        assert!(verbs_on(rules, "advertisements/status", Some(&own)).contains(&"update"));
        assert_eq!(verbs_on(rules, "advertisements", Some("advertisement-other")), ["create"]);
        assert_eq!(a.cluster_role.metadata.labels.unwrap()[LABEL_CLUSTER_ID], PEER);
    }
}
