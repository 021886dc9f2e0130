//! The identities we hand out are least-privilege, proved on a real API server
//! (KUBEBUILDER_ASSETS; skips loudly without it): the API server's own list of what each may
//! do (SelfSubjectRulesReview) is exactly the documented set, and what it must not do is
//! refused — by RBAC, or by our webhook where RBAC cannot say it. The same for the
//! anonymous-peering overlay and `system:unauthenticated`.

mod common;

use std::collections::BTreeSet;

use k8s_openapi::api::authorization::v1::{SelfSubjectRulesReview, SelfSubjectRulesReviewSpec};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use liqo_api::names::tenant_namespace;
use liqo_api::{Advertisement, ClusterConfig, ClusterIdentity, ForeignCluster, PeeringRequest, PeeringRequestSpec};
use liqo_reconciler::tenancy::access::{Access, advertisement_access, peer_identity};
use liqo_testenv::{ControlPlane, create_manifest, install_liqo, service_account_token};

const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
const OTHER: &str = "c1f0e2d3-4b5a-4c6d-8e7f-0a1b2c3d4e5f";
const THIRD: &str = "0c0c0c0c-1d1d-4e4e-8f8f-2a2a2a2a2a2a";

/// (API group, resource, name or `*`, verb), one per verb.
type Rule = (String, String, String, String);

/// What `client` may do in `namespace`, by the API server's own answer, without the rules
/// every authenticated user has (asking about itself: `selfsubject*reviews`).
async fn rules(client: &Client, namespace: &str) -> BTreeSet<Rule> {
    let review = SelfSubjectRulesReview { spec: SelfSubjectRulesReviewSpec { namespace: Some(namespace.into()) }, ..Default::default() };
    let answer = Api::<SelfSubjectRulesReview>::all(client.clone()).create(&PostParams::default(), &review).await.unwrap();
    let status = answer.status.unwrap();
    assert!(!status.incomplete, "the API server's list is complete");
    let mut set = BTreeSet::new();
    for r in status.resource_rules {
        let names = r.resource_names.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| vec!["*".into()]);
        for (group, resource, name, verb) in
            itertools(&r.api_groups.unwrap_or_default(), &r.resources.unwrap_or_default(), &names, &r.verbs)
        {
            if !resource.starts_with("selfsubject") {
                set.insert((group, resource, name, verb));
            }
        }
    }
    set
}

/// [`rules`] once there are any: the RBAC authorizer learns new bindings from its watch, a
/// moment after they are created, and one binding grants each identity all it has.
async fn granted_rules(client: &Client, namespace: &str) -> BTreeSet<Rule> {
    liqo_testenv::eventually("the grant in force", || async { Some(rules(client, namespace).await).filter(|r| !r.is_empty()) }).await
}

fn itertools(groups: &[String], resources: &[String], names: &[String], verbs: &[String]) -> Vec<Rule> {
    let mut out = Vec::new();
    for g in groups {
        for r in resources {
            for n in names {
                for v in verbs {
                    out.push((g.clone(), r.clone(), n.clone(), v.clone()));
                }
            }
        }
    }
    out
}

fn rule_set(rows: &[(&str, &str, &str, &[&str])]) -> BTreeSet<Rule> {
    rows.iter()
        .flat_map(|(g, r, n, verbs)| verbs.iter().map(move |v| ((*g).to_owned(), (*r).to_owned(), (*n).to_owned(), (*v).to_owned())))
        .collect()
}

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(s)) if s.code == 403 => s.message,
        other => panic!("{what}: expected 403, got {other:?}"),
    }
}

/// A request of cluster `name`, in `namespace`, naming its Secret there.
fn request_in(name: &str, namespace: &str) -> PeeringRequest {
    let mut pr = PeeringRequest::new(
        name,
        PeeringRequestSpec {
            cluster_identity: Some(ClusterIdentity { cluster_id: name.into(), cluster_name: Some("x".into()) }),
            namespace: Some("liqo".into()),
            kube_config_ref: Some(k8s_openapi::api::core::v1::SecretReference {
                name: Some(format!("pr-kubeconfig-{name}")),
                namespace: Some(namespace.into()),
            }),
            ..Default::default()
        },
    );
    pr.metadata.namespace = Some(namespace.into());
    pr
}

/// A request of cluster `name` in its tenant namespace.
fn request(name: &str) -> PeeringRequest {
    request_in(name, &tenant_namespace(name))
}

/// How many ClusterRoles and ClusterRoleBindings the cluster has.
async fn cluster_wide(admin: &Client) -> (usize, usize) {
    let roles = Api::<ClusterRole>::all(admin.clone()).list_metadata(&ListParams::default()).await.unwrap().items.len();
    let bindings = Api::<ClusterRoleBinding>::all(admin.clone()).list_metadata(&ListParams::default()).await.unwrap().items.len();
    (roles, bindings)
}

/// A token of the ServiceAccount of `access`.
async fn token_of(admin: &Client, access: &Access) -> String {
    service_account_token(admin, access.namespace(), access.service_account_name()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_identity_can_do_exactly_what_the_readme_says_in_its_tenant_namespace_only() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    // Our webhook, knowing this cluster's ID, as the reconciler would have written it.
    let id = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-id", "namespace": "liqo"},
                                "data": {"cluster-id": "0558de48-097b-4b7d-ba04-6bd2a0f9d24f"}});
    create_manifest(&admin, &serde_json::to_string(&id).unwrap(), "liqo").await;
    let _webhook = common::start_webhook(&admin).await;
    // Nothing per peer is cluster-wide: as many ClusterRoles and bindings with 3 peers as with 0.
    let before = cluster_wide(&admin).await;
    for peer in [PEER, OTHER, THIRD] {
        liqo_reconciler::tenancy::tenant::grant(&admin, "test", peer, &peer_identity(peer)).await.unwrap();
        liqo_reconciler::tenancy::tenant::grant(&admin, "test", peer, &advertisement_access(peer)).await.unwrap();
    }
    assert_eq!(cluster_wide(&admin).await, before, "ClusterRoles and ClusterRoleBindings with 0 peers and with 3");
    let tenant = tenant_namespace(PEER);
    let ns = Api::<Namespace>::all(admin.clone()).get(&tenant).await.unwrap();
    let labels = ns.metadata.labels.unwrap();
    assert_eq!((labels["discovery.liqo.io/tenant-namespace"].as_str(), labels["discovery.liqo.io/cluster-id"].as_str()), ("true", PEER));
    let peer = cp.client(&token_of(&admin, &peer_identity(PEER)).await).unwrap();

    let expected = rule_set(&[
        ("discovery.liqo.io", "peeringrequests", "*", &["get", "list", "watch", "create", "update", "patch", "delete"]),
        ("discovery.liqo.io", "federationrequests", "*", &["get", "list", "watch", "create", "update", "patch", "delete"]),
        ("", "secrets", "*", &["create", "get", "update", "patch", "delete"]),
    ]);
    assert_eq!(granted_rules(&peer, &tenant).await, expected);
    // Anywhere else: nothing at all (the Liqo namespace, another peer's, an unrelated one).
    for elsewhere in ["liqo", "default", &tenant_namespace(OTHER)] {
        assert_eq!(rules(&peer, elsewhere).await, BTreeSet::new(), "in {elsewhere}");
    }

    // Its own request, in its tenant namespace: yes. Claiming another cluster there: our
    // webhook says no; in that cluster's tenant namespace: RBAC says no.
    let prs = Api::<PeeringRequest>::namespaced(peer.clone(), &tenant);
    liqo_testenv::eventually("our own request admitted", || async { prs.create(&PostParams::default(), &request(PEER)).await.ok() }).await;
    let refused = prs.create(&PostParams::default(), &request_in(OTHER, &tenant)).await.unwrap_err();
    assert!(refused.to_string().contains("is not allowed for this requester"), "{refused}");
    let theirs = Api::<PeeringRequest>::namespaced(peer.clone(), &tenant_namespace(OTHER));
    forbidden(theirs.create(&PostParams::default(), &request(OTHER)).await, "writing in another peer's tenant namespace");
    // Another peer's request, made by an admin: not readable, not deletable, not listed.
    Api::<PeeringRequest>::namespaced(admin.clone(), &tenant_namespace(OTHER))
        .create(&PostParams::default(), &request(OTHER))
        .await
        .unwrap();
    forbidden(theirs.get(OTHER).await, "reading another peer's request");
    forbidden(theirs.delete(OTHER, &DeleteParams::default()).await, "deleting another peer's request");
    forbidden(Api::<PeeringRequest>::all(peer.clone()).list(&ListParams::default()).await, "listing requests cluster-wide");
    // Its own, listed and watched there, to follow its deletion.
    assert_eq!(prs.list(&ListParams::default()).await.expect("its own namespace's requests").items.len(), 1);
    // Secrets: not the auth token, not ours; ForeignClusters, the ClusterConfig, Advertisements: nothing.
    forbidden(Api::<Secret>::namespaced(peer.clone(), "liqo").get("auth-token").await, "reading the auth token");
    forbidden(Api::<Secret>::namespaced(peer.clone(), &tenant).list(&ListParams::default()).await, "listing Secrets");
    forbidden(Api::<ForeignCluster>::all(peer.clone()).list(&ListParams::default()).await, "listing ForeignClusters");
    forbidden(Api::<ClusterConfig>::all(peer.clone()).get("liqo-configuration").await, "reading the ClusterConfig");
    forbidden(Api::<Advertisement>::namespaced(peer.clone(), &tenant).list(&ListParams::default()).await, "listing Advertisements");
    forbidden(Api::<Namespace>::all(peer.clone()).list(&ListParams::default()).await, "listing namespaces");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_advertisement_access_we_grant_is_advertisements_in_its_tenant_namespace_capped_by_its_quota() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    liqo_reconciler::tenancy::tenant::grant(&admin, "test", PEER, &advertisement_access(PEER)).await.unwrap();
    liqo_reconciler::tenancy::tenant::grant(&admin, "test", OTHER, &advertisement_access(OTHER)).await.unwrap();
    let peer = cp.client(&token_of(&admin, &advertisement_access(PEER)).await).unwrap();
    let tenant = tenant_namespace(PEER);
    let expected = rule_set(&[
        ("sharing.liqo.io", "advertisements", "*", &["get", "list", "watch", "create", "update", "patch", "delete"]),
        ("sharing.liqo.io", "advertisements/status", "*", &["get", "create", "update", "patch", "delete"]),
    ]);
    assert_eq!(granted_rules(&peer, &tenant).await, expected);
    for elsewhere in ["liqo", "default", &tenant_namespace(OTHER)] {
        assert_eq!(rules(&peer, elsewhere).await, BTreeSet::new(), "in {elsewhere}");
    }
    forbidden(Api::<Advertisement>::all(peer.clone()).list(&ListParams::default()).await, "listing Advertisements cluster-wide");
    forbidden(Api::<Advertisement>::namespaced(peer.clone(), &tenant_namespace(OTHER)).list(&ListParams::default()).await, "another's");
    forbidden(Api::<PeeringRequest>::namespaced(peer.clone(), &tenant).list(&ListParams::default()).await, "listing requests");
    forbidden(Api::<Secret>::namespaced(peer.clone(), &tenant).list(&ListParams::default()).await, "listing Secrets");

    // The tenant namespace's ResourceQuota caps what it writes there (no quota controller
    // needed: the status the reconciler wrote with it lets the API server count).
    let ads = Api::<Advertisement>::namespaced(peer.clone(), &tenant);
    let advertisement = |name: &str| -> Advertisement {
        serde_json::from_value(serde_json::json!({"apiVersion": "sharing.liqo.io/v1alpha1", "kind": "Advertisement",
            "metadata": {"name": name}, "spec": {"clusterId": PEER}}))
        .unwrap()
    };
    ads.create(&PostParams::default(), &advertisement(&format!("advertisement-{PEER}"))).await.unwrap();
    let cap = liqo_reconciler::tenancy::tenant::quota_of("count/advertisements.sharing.liqo.io");
    for n in 1..cap {
        ads.create(&PostParams::default(), &advertisement(&format!("advertisement-{n}"))).await.unwrap();
    }
    let over = forbidden(ads.create(&PostParams::default(), &advertisement("advertisement-over")).await, "one over the cap");
    assert!(over.contains("exceeded quota: liqo-tenant"), "{over}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anonymous_overlay_lets_strangers_create_requests_and_read_nothing() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let overlay = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/anonymous-peering/anonymous-peering.yaml");
    create_manifest(&admin, &std::fs::read_to_string(overlay).unwrap(), "liqo").await;
    // No credentials at all: the API server calls it system:anonymous, in system:unauthenticated.
    let anonymous = Client::try_from(cp.config().unwrap()).unwrap();

    // What RBAC binds to system:unauthenticated, by the bindings themselves (an anonymous caller
    // may not ask for its own rules): the overlay's create-only rules, nothing else of ours.
    let review = k8s_openapi::api::authorization::v1::SubjectAccessReview {
        spec: k8s_openapi::api::authorization::v1::SubjectAccessReviewSpec {
            user: Some("system:anonymous".into()),
            groups: Some(vec!["system:unauthenticated".into()]),
            resource_attributes: None,
            ..Default::default()
        },
        ..Default::default()
    };
    let may = |group: &str, resource: &str, verb: &str, namespace: Option<&str>| {
        let mut r = review.clone();
        r.spec.resource_attributes = Some(k8s_openapi::api::authorization::v1::ResourceAttributes {
            group: Some(group.into()),
            resource: Some(resource.into()),
            verb: Some(verb.into()),
            namespace: namespace.map(str::to_owned),
            ..Default::default()
        });
        let admin = admin.clone();
        async move {
            let api = Api::<k8s_openapi::api::authorization::v1::SubjectAccessReview>::all(admin);
            api.create(&PostParams::default(), &r).await.unwrap().status.unwrap().allowed
        }
    };
    for (group, resource, namespace) in [
        ("discovery.liqo.io", "peeringrequests", Some("liqo")),
        ("discovery.liqo.io", "federationrequests", Some("liqo")),
        ("", "secrets", Some("liqo")),
    ] {
        // The RBAC authorizer learns the overlay's bindings from its watch, a moment after they
        // are created: wait for each grant to be in force, then hold it to exactly that.
        let what = format!("the overlay's create {resource} in force");
        liqo_testenv::eventually(&what, || async { may(group, resource, "create", namespace).await.then_some(()) }).await;
        for verb in ["get", "list", "watch", "update", "patch", "delete"] {
            assert!(!may(group, resource, verb, namespace).await, "{verb} {resource}");
        }
    }
    for (group, resource) in [
        ("discovery.liqo.io", "foreignclusters"),
        ("discovery.liqo.io", "searchdomains"),
        ("config.liqo.io", "clusterconfigs"),
        ("sharing.liqo.io", "advertisements"),
    ] {
        for verb in ["create", "get", "list", "update", "delete"] {
            assert!(!may(group, resource, verb, None).await, "{verb} {resource}");
        }
    }
    assert!(!may("", "secrets", "create", Some("default")).await, "Secrets only in the Liqo namespace");
    for elsewhere in [None, Some("default".to_owned()), Some(tenant_namespace(PEER))] {
        let ns = elsewhere.as_deref();
        assert!(!may("discovery.liqo.io", "peeringrequests", "create", ns).await, "requests only in the Liqo namespace, not {ns:?}");
    }

    // And in practice: a request can be made, then not read back.
    let prs = Api::<PeeringRequest>::namespaced(anonymous.clone(), "liqo");
    prs.create(&PostParams::default(), &request_in(PEER, "liqo")).await.unwrap();
    forbidden(prs.get(PEER).await, "reading the request back");
    forbidden(Api::<Secret>::namespaced(anonymous.clone(), "liqo").get("auth-token").await, "reading the auth token");
    forbidden(Api::<ForeignCluster>::all(anonymous).list(&ListParams::default()).await, "listing ForeignClusters");
}

/// A Secret named `name` in the Liqo namespace with `bytes` bytes of data.
fn secret(name: &str, bytes: usize) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some([("kubeconfig".to_owned(), k8s_openapi::ByteString(vec![b'x'; bytes]))].into()),
        ..Default::default()
    }
}

/// Creates `s` with `secrets` for real once the policy is in force (its creation by dry runs
/// until the API server has loaded it: a refusal of `probe` says it is).
async fn policy_in_force(secrets: &Api<Secret>, probe: &Secret) {
    let dry = PostParams { dry_run: true, ..Default::default() };
    liqo_testenv::eventually("the ValidatingAdmissionPolicy in force", || async {
        let refused = secrets.create(&dry, probe).await;
        matches!(refused, Err(kube::Error::Api(s)) if s.message.contains("may write only")).then_some(())
    })
    .await;
}

/// Our ValidatingAdmissionPolicy (manifests/reconciler/peer-secrets.yaml), in the real API
/// server: a peer's identity creates its own kubeconfig Secret in its tenant namespace, up to
/// 16 KiB, and nothing else; an anonymous caller (the overlay) only Secrets named `pr-kubeconfig-<a cluster ID>`;
/// nobody else is touched (an admin, an unrelated `remote-*` ServiceAccount elsewhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_identity_creates_only_its_own_kubeconfig_secret() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/reconciler/peer-secrets.yaml");
    create_manifest(&admin, &std::fs::read_to_string(policy).unwrap(), "liqo").await;
    liqo_reconciler::tenancy::tenant::grant(&admin, "test", PEER, &peer_identity(PEER)).await.unwrap();
    let peer = cp.client(&token_of(&admin, &peer_identity(PEER)).await).unwrap();
    let tenant = tenant_namespace(PEER);
    let secrets = Api::<Secret>::namespaced(peer.clone(), &tenant);
    policy_in_force(&secrets, &secret("filler-0", 10)).await;

    let refused = |r: Result<Secret, kube::Error>| match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let (code, message) = refused(secrets.create(&PostParams::default(), &secret("filler-1", 10)).await);
    assert_eq!(code, 403);
    assert!(message.contains(&format!("a peer may write only its own kubeconfig Secret, pr-kubeconfig-{PEER}, not filler-1")), "{message}");
    let (_, message) = refused(secrets.create(&PostParams::default(), &secret(&format!("pr-kubeconfig-{OTHER}"), 10)).await);
    assert!(message.contains("only its own kubeconfig Secret"), "another peer's name: {message}");
    let (code, message) = refused(secrets.create(&PostParams::default(), &secret(&format!("pr-kubeconfig-{PEER}"), 20 * 1024)).await);
    assert_eq!(code, 413, "{message}");
    assert!(message.contains("at most 16384 bytes of data, not about 20481"), "{message}");
    // Its own, of a kubeconfig's size: yes, and updated too.
    let own = secrets.create(&PostParams::default(), &secret(&format!("pr-kubeconfig-{PEER}"), 4096)).await.unwrap();
    let bigger = Secret { data: secret("x", 17 * 1024).data, ..own.clone() };
    refused(secrets.replace(&own.metadata.name.clone().unwrap(), &PostParams::default(), &bigger).await);
    // Nothing else was written: only the admin's view shows what exists.
    let all = Api::<Secret>::namespaced(admin.clone(), &tenant).list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = all.items.iter().filter_map(|s| s.metadata.name.clone()).collect();
    assert_eq!(names, [format!("pr-kubeconfig-{PEER}")]);

    // Not matched: an admin, and a ServiceAccount named remote-* in another namespace.
    Api::<Secret>::namespaced(admin.clone(), "liqo").create(&PostParams::default(), &secret("admin-made", 32 * 1024)).await.unwrap();
    let app = serde_json::json!([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "remote-app", "namespace": "default"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "app", "namespace": "default"},
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "app", "namespace": "default"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "app"},
         "subjects": [{"kind": "ServiceAccount", "name": "remote-app", "namespace": "default"}]}
    ]);
    for doc in app.as_array().unwrap() {
        create_manifest(&admin, &serde_json::to_string(doc).unwrap(), "default").await;
    }
    let app = Api::<Secret>::namespaced(cp.client(&service_account_token(&admin, "default", "remote-app").await).unwrap(), "default");
    liqo_testenv::eventually("the app's own Role in force", || async {
        app.create(&PostParams::default(), &secret("anything", 10)).await.ok()
    })
    .await;

    // The anonymous overlay: a kubeconfig Secret named after a cluster ID, nothing else.
    let overlay = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/anonymous-peering/anonymous-peering.yaml");
    create_manifest(&admin, &std::fs::read_to_string(overlay).unwrap(), "liqo").await;
    let anonymous = Api::<Secret>::namespaced(Client::try_from(cp.config().unwrap()).unwrap(), "liqo");
    let dry = PostParams { dry_run: true, ..Default::default() };
    liqo_testenv::eventually("the overlay's grant in force", || async {
        anonymous.create(&dry, &secret(&format!("pr-kubeconfig-{THIRD}"), 10)).await.ok()
    })
    .await;
    let (_, message) = refused(anonymous.create(&PostParams::default(), &secret("filler-2", 10)).await);
    assert!(message.contains("an anonymous peer may write only a kubeconfig Secret named pr-kubeconfig-<its cluster ID>"), "{message}");
    refused(anonymous.create(&PostParams::default(), &secret(&format!("pr-kubeconfig-{OTHER}"), 20 * 1024)).await);
    anonymous.create(&PostParams::default(), &secret(&format!("pr-kubeconfig-{OTHER}"), 4096)).await.unwrap();
}

/// A tenant namespace whose quota an earlier release made with other caps gets this release's
/// the next time something of the peer is stored there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_releases_quota_is_given_this_releases_caps() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    liqo_reconciler::tenancy::tenant::ensure(&admin, PEER, "test").await.unwrap();
    let quotas = Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(admin.clone(), &tenant_namespace(PEER));
    let earlier = serde_json::json!({"spec": {"hard": {"count/secrets": "4"}}, "status": {"hard": {"count/secrets": "4"}}});
    quotas.patch("liqo-tenant", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&earlier)).await.unwrap();
    quotas.patch_status("liqo-tenant", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&earlier)).await.unwrap();
    assert!(liqo_reconciler::tenancy::tenant::outdated(&quotas.get("liqo-tenant").await.unwrap()));

    liqo_reconciler::tenancy::tenant::ensure(&admin, PEER, "test").await.unwrap();
    let now = quotas.get("liqo-tenant").await.unwrap();
    assert!(!liqo_reconciler::tenancy::tenant::outdated(&now), "{:?}", now.spec);
    let cap = liqo_reconciler::tenancy::tenant::quota_of("count/secrets").to_string();
    assert_eq!(now.status.unwrap().hard.unwrap()["count/secrets"].0, cap, "the status the API server admits by");
}
