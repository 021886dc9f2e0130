//! Waiting for RBAC objects to be in force. The API server's authorizer learns Roles and
//! bindings from its own watch, a moment after they are created; a test that uses a grant
//! right after creating it would otherwise race that watch.

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};

/// Waits until the authorizer allows what `binding` (a RoleBinding or ClusterRoleBinding,
/// typed or dynamic) grants: its first subject, the first resource rule of its role. A binding
/// whose role or subjects cannot be read is not waited for.
pub async fn in_force(client: &Client, binding: &impl serde::Serialize) {
    let Some(review) = question(client, binding).await else { return };
    let reviews = Api::<SubjectAccessReview>::all(client.clone());
    let subject = review.spec.user.clone().unwrap_or_default();
    let what = format!("a binding of {subject} in force");
    crate::eventually(&what, || async {
        let answer = reviews.create(&PostParams::default(), &review).await.ok()?;
        answer.status.filter(|s| s.allowed).map(|_| ())
    })
    .await;
}

/// The SubjectAccessReview that asks for the first thing `binding` grants (`None` when its role
/// or subjects cannot be read).
pub async fn question(client: &Client, binding: &impl serde::Serialize) -> Option<SubjectAccessReview> {
    let binding: DynamicObject = serde_json::from_value(serde_json::to_value(binding).ok()?).ok()?;
    let namespace = binding.metadata.namespace.clone();
    let role_ref: RoleRef = serde_json::from_value(binding.data.get("roleRef")?.clone()).ok()?;
    let subjects: Vec<Subject> = serde_json::from_value(binding.data.get("subjects")?.clone()).ok()?;
    let rules = match (role_ref.kind.as_str(), &namespace) {
        ("Role", Some(ns)) => Api::<Role>::namespaced(client.clone(), ns).get(&role_ref.name).await.ok()?.rules,
        ("ClusterRole", _) => Api::<ClusterRole>::all(client.clone()).get(&role_ref.name).await.ok()?.rules,
        _ => None,
    }?;
    let rule = rules.into_iter().find(|r| r.resources.as_ref().is_some_and(|x| !x.is_empty()))?;
    let (user, groups) = who(subjects.first()?);
    Some(SubjectAccessReview {
        spec: SubjectAccessReviewSpec { user, groups, resource_attributes: Some(attributes(&rule, namespace)), ..Default::default() },
        ..Default::default()
    })
}

/// The user name and groups the API server gives `subject`.
fn who(subject: &Subject) -> (Option<String>, Option<Vec<String>>) {
    match subject.kind.as_str() {
        "ServiceAccount" => {
            let ns = subject.namespace.clone().unwrap_or_default();
            (Some(format!("system:serviceaccount:{ns}:{}", subject.name)), Some(vec!["system:serviceaccounts".into()]))
        }
        "Group" => (Some("someone".into()), Some(vec![subject.name.clone()])),
        _ => (Some(subject.name.clone()), None),
    }
}

/// The first group, resource, verb and name of `rule`, in `namespace`.
fn attributes(rule: &PolicyRule, namespace: Option<String>) -> ResourceAttributes {
    let first = |v: &Option<Vec<String>>| v.as_ref().and_then(|v| v.first().cloned());
    let resource = first(&rule.resources).unwrap_or_default();
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
        None => (resource, None),
    };
    ResourceAttributes {
        group: first(&rule.api_groups),
        resource: Some(resource),
        subresource,
        verb: rule.verbs.first().cloned(),
        name: first(&rule.resource_names),
        namespace,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_is_asked_for_by_its_user_name() {
        let sa = Subject { kind: "ServiceAccount".into(), name: "viewer".into(), namespace: Some("liqo".into()), api_group: None };
        assert_eq!(who(&sa).0.as_deref(), Some("system:serviceaccount:liqo:viewer"));
        let group = Subject { kind: "Group".into(), name: "system:unauthenticated".into(), namespace: None, api_group: None };
        assert_eq!(who(&group).1, Some(vec!["system:unauthenticated".to_owned()]));
    }

    #[test]
    fn the_first_rule_names_a_subresource_and_a_name_apart() {
        let rule = PolicyRule {
            api_groups: Some(vec!["sharing.liqo.io".into()]),
            resources: Some(vec!["advertisements/status".into()]),
            resource_names: Some(vec!["a".into()]),
            verbs: vec!["patch".into()],
            ..Default::default()
        };
        let a = attributes(&rule, Some("ns".into()));
        assert_eq!(
            (a.resource.as_deref(), a.subresource.as_deref(), a.name.as_deref()),
            (Some("advertisements"), Some("status"), Some("a"))
        );
        assert_eq!((a.verb.as_deref(), a.namespace.as_deref()), (Some("patch"), Some("ns")));
    }
}
