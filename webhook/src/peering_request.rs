//! The rules for PeeringRequest and FederationRequest CREATE/UPDATE (protocol §6), pure.

use k8s_openapi::jiff::Timestamp;
use liqo_api::holder::{Holder, bound_message};
use liqo_api::names::{PEER_SERVICE_ACCOUNT_PREFIX, kept_secret, peering_kubeconfig_secret, tenant_namespace};
use liqo_api::{PeeringRequestSpec, validate_cluster_id};

use crate::denial::{Denial, Reason};
use crate::policy::{PolicyConfig, evaluate};
use crate::review::{Operation, UserInfo};

/// What the rules know about this cluster.
pub struct Local<'a> {
    /// Our cluster ID; `None` until the `cluster-id` ConfigMap is known.
    pub cluster_id: Option<&'a str>,
    /// The Liqo namespace here (where anonymous requests and their Secrets go).
    pub namespace: &'a str,
    pub policy: &'a PolicyConfig,
    /// Whether a ForeignCluster for this cluster ID exists here.
    pub is_known: &'a dyn Fn(&str) -> bool,
    /// Who holds a cluster ID here: the identity the auth service issued for it, if any.
    pub holder: &'a dyn Fn(&str) -> Option<Holder>,
    /// The clock, to tell a holder whose identities have all expired (read only for a request
    /// that claims a held ID, never on a peer's own).
    pub now: fn() -> Timestamp,
}

/// One PeeringRequest/FederationRequest under review.
pub struct Candidate<'a> {
    pub kind: &'a str,
    pub operation: Operation,
    pub name: &'a str,
    /// The namespace the request is in.
    pub namespace: &'a str,
    pub spec: &'a PeeringRequestSpec,
    pub old_spec: Option<&'a PeeringRequestSpec>,
    pub user: &'a UserInfo,
}

/// The cluster ID a peer identity stands for: `system:serviceaccount:<ns>:remote-<id>`
/// gives `Some((ns, id))`; any other user is not a peer identity.
pub fn peer_identity(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (ns, sa) = rest.split_once(':')?;
    Some((ns, sa.strip_prefix(PEER_SERVICE_ACCOUNT_PREFIX)?))
}

/// The requester's cluster ID, refusing a spec whose two cluster-ID fields disagree.
fn requester_id<'s>(kind: &str, spec: &'s PeeringRequestSpec) -> Result<&'s str, Denial> {
    let nested = spec.cluster_identity.as_ref().map(|i| i.cluster_id.as_str()).filter(|s| !s.is_empty());
    let short = spec.cluster_id.as_deref().filter(|s| !s.is_empty());
    match (nested, short) {
        (Some(a), Some(b)) if a != b => Err(Denial::new(
            Reason::ConflictingClusterIds,
            format!("spec.clusterIdentity.clusterID ({a}) and spec.clusterID ({b}) disagree"),
        )),
        (Some(id), _) | (None, Some(id)) => Ok(id),
        (None, None) => Err(Denial::new(
            Reason::MissingClusterId,
            format!("spec.clusterIdentity.clusterID: required: a {kind} must name the requesting cluster"),
        )),
    }
}

/// DNS-1123 subdomain (Secret names).
fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(|label| validate_cluster_id(label).is_ok())
}

/// `namespace`: the request's own, where its Secret must be. `requester`: whose Secret the
/// reference must not leave for one this cluster keeps (`None`: not judged, for an UPDATE that
/// keeps the reference — a request stored before the rule can still lose its finalizer and go).
fn check_kubeconfig_ref(spec: &PeeringRequestSpec, namespace: &str, requester: Option<&str>) -> Result<(), Denial> {
    let bad = |m: String| Err(Denial::new(Reason::KubeConfigRef, m));
    let Some(r) = &spec.kube_config_ref else {
        return bad("spec.kubeConfigRef: required: the Secret with the kubeconfig for Advertisements".into());
    };
    match r.name.as_deref() {
        None | Some("") => return bad("spec.kubeConfigRef.name: required".into()),
        Some(n) if !is_dns1123_subdomain(n) => {
            return bad(format!("spec.kubeConfigRef.name: {n:?} is not a valid Secret name"));
        }
        Some(n) => {
            if let Some(requester) = requester
                && let Some(what) = kept_secret(n, requester)
            {
                let yours = peering_kubeconfig_secret(requester);
                return bad(format!("spec.kubeConfigRef.name: {n} is {what}, not yours to name; name the Secret you created ({yours})"));
            }
        }
    }
    match r.namespace.as_deref() {
        None | Some("") => bad(format!("spec.kubeConfigRef.namespace: required (the request's own namespace, {namespace})")),
        Some(ns) if ns != namespace => {
            bad(format!("spec.kubeConfigRef.namespace: must be {namespace} (the request's own namespace), not {ns}"))
        }
        _ => Ok(()),
    }
}

/// A cluster ID bound to the cluster that first took an identity for it here is claimed by no
/// request but that identity's (`from_holder`: the requester is `remote-<id>` of the tenant
/// namespace, already checked against the ID): not an anonymous one (the opt-in overlay), and
/// none in the Liqo namespace, whoever writes it. Refused in `/identity`'s words. An
/// authenticated user writing in the ID's tenant namespace (an admin, whom RBAC already lets act
/// there as the peer: mint its token, restore a backup) is not refused. An UPDATE that leaves
/// the spec as it was (a finalizer, a label) claims nothing; a holder whose identities have all
/// expired holds nothing here.
fn check_holder(c: &Candidate<'_>, local: &Local<'_>, id: &str, from_holder: bool) -> Result<(), Denial> {
    let claims = match c.operation {
        Operation::Create => true,
        Operation::Update => c.old_spec.is_none_or(|old| old != c.spec),
        _ => false,
    };
    let anonymous = c.user.username == ANONYMOUS;
    if from_holder || !claims || (!anonymous && c.namespace == tenant_namespace(id)) {
        return Ok(());
    }
    let Some(holder) = (local.holder)(id).filter(|h| !h.expired((local.now)())) else { return Ok(()) };
    let name = c.spec.cluster_identity.as_ref().and_then(|i| i.cluster_name.as_deref());
    let message = format!(
        "{}; this {} was written by {}, not by that cluster's identity",
        bound_message(id, holder.expires()),
        c.kind,
        c.user.username
    );
    Err(Denial::new(Reason::IdentityBound, message).claiming(id, name))
}

/// The user the API server names an unauthenticated caller.
const ANONYMOUS: &str = "system:anonymous";

/// Judges one request. DELETE and CONNECT are always allowed; the policy applies to CREATE
/// only, so a request already accepted can still be updated (finalizers) or removed.
pub fn review(c: &Candidate<'_>, local: &Local<'_>) -> Result<(), Denial> {
    if !matches!(c.operation, Operation::Create | Operation::Update) {
        return Ok(());
    }
    let id = requester_id(c.kind, c.spec)?;
    validate_cluster_id(id).map_err(|e| Denial::new(Reason::MalformedClusterId, format!("spec.clusterIdentity.clusterID {id:?}: {e}")))?;
    if c.name != id {
        return Err(Denial::new(Reason::NameMismatch, format!("metadata.name ({}) must equal the requester cluster ID ({id})", c.name)));
    }
    let tenant = tenant_namespace(id);
    let peer = peer_identity(&c.user.username);
    if let Some((ns, claimed)) = peer
        && (ns != tenant || claimed != id)
    {
        return Err(Denial::new(
            Reason::IdentityMismatch,
            format!("clusterID {id} is not allowed for this requester ({})", c.user.username),
        ));
    }
    // A peer's identity writes only in its tenant namespace; anyone else (an anonymous
    // requester of the opt-in overlay, an admin) there or in the Liqo namespace.
    let allowed = c.namespace == tenant || (peer.is_none() && c.namespace == local.namespace);
    if !allowed {
        let also = if peer.is_none() { format!(" (or the Liqo namespace, {})", local.namespace) } else { String::new() };
        return Err(Denial::new(
            Reason::WrongNamespace,
            format!("a {} of cluster {id} belongs in its tenant namespace {tenant}{also}, not {:?}", c.kind, c.namespace),
        ));
    }
    if let Some(old) = c.old_spec.filter(|_| c.operation == Operation::Update) {
        let old_id = requester_id(c.kind, old).ok();
        if old_id.is_some_and(|o| o != id) {
            return Err(Denial::new(
                Reason::ImmutableField,
                format!("spec.clusterIdentity.clusterID is immutable (was {}, now {id})", old_id.unwrap_or_default()),
            ));
        }
        if old.namespace != c.spec.namespace {
            return Err(Denial::new(
                Reason::ImmutableField,
                format!(
                    "spec.namespace is immutable (was {:?}, now {:?})",
                    old.namespace.as_deref().unwrap_or(""),
                    c.spec.namespace.as_deref().unwrap_or("")
                ),
            ));
        }
    }
    check_holder(c, local, id, peer.is_some())?;
    let same_ref = c.operation == Operation::Update && c.old_spec.is_some_and(|o| o.kube_config_ref == c.spec.kube_config_ref);
    check_kubeconfig_ref(c.spec, c.namespace, (!same_ref).then_some(id))?;
    if c.operation == Operation::Create {
        let Some(own) = local.cluster_id else {
            return Err(Denial::new(
                Reason::NotReady,
                format!("this cluster's ID is not known yet (ConfigMap {}/cluster-id); retry shortly", local.namespace),
            ));
        };
        if id == own {
            return Err(Denial::new(Reason::OwnClusterId, format!("clusterID {id} is this cluster's own ID")));
        }
        let name = c.spec.cluster_identity.as_ref().and_then(|i| i.cluster_name.as_deref());
        evaluate(local.policy, id, |i| (local.is_known)(i)).map_err(|m| Denial::new(Reason::Policy, m).asked_by(id, name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::SecretReference;
    use liqo_api::{ClusterIdentity, PeeringPolicy};

    const PEER: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
    const OWN: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

    fn spec(id: &str) -> PeeringRequestSpec {
        PeeringRequestSpec {
            cluster_identity: Some(ClusterIdentity { cluster_id: id.into(), cluster_name: Some("home".into()) }),
            cluster_id: None,
            namespace: Some("liqo".into()),
            kube_config_ref: Some(SecretReference { name: Some("pr-kubeconfig".into()), namespace: Some(tenant_namespace(id)) }),
            auth_url: Some("https://10.0.0.5:30740".into()),
        }
    }

    /// A cluster ID bound here: its holder's identity expires at [`EXPIRES`]; [`EXPIRED`] held
    /// one whose identities have all expired.
    const BOUND: &str = "b0b0b0b0-591c-4ac6-8fd6-80258b4b3bf9";
    const EXPIRED: &str = "e0e0e0e0-591c-4ac6-8fd6-80258b4b3bf9";
    const NOW: &str = "2026-12-01T00:00:00Z";
    const EXPIRES: &str = "2026-12-08T00:00:00Z";

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn held(id: &str) -> Option<Holder> {
        match id {
            BOUND => Some(Holder { issued_at: Some(at("2026-11-30T00:00:00Z")), expires_at: Some(at(EXPIRES)) }),
            EXPIRED => Some(Holder { issued_at: Some(at("2026-11-20T00:00:00Z")), expires_at: Some(at("2026-11-27T00:00:00Z")) }),
            _ => None,
        }
    }

    fn anonymous() -> UserInfo {
        UserInfo { username: "system:anonymous".into() }
    }

    fn in_liqo(id: &str) -> PeeringRequestSpec {
        let mut s = spec(id);
        s.kube_config_ref = Some(SecretReference { name: Some(peering_kubeconfig_secret(id)), namespace: Some("liqo".into()) });
        s
    }

    fn peer_user(id: &str) -> UserInfo {
        UserInfo { username: format!("system:serviceaccount:{}:remote-{id}", tenant_namespace(id)) }
    }

    fn admin() -> UserInfo {
        UserInfo { username: "admin".into() }
    }

    fn judge(
        op: Operation,
        name: &str,
        spec: &PeeringRequestSpec,
        old: Option<&PeeringRequestSpec>,
        user: &UserInfo,
        policy: &PolicyConfig,
    ) -> Result<(), Denial> {
        let namespace = tenant_namespace(spec.requester_cluster_id().unwrap_or(name));
        judge_in(&namespace, op, name, spec, old, user, policy)
    }

    fn judge_in(
        namespace: &str,
        op: Operation,
        name: &str,
        spec: &PeeringRequestSpec,
        old: Option<&PeeringRequestSpec>,
        user: &UserInfo,
        policy: &PolicyConfig,
    ) -> Result<(), Denial> {
        let known = |id: &str| id == PEER || id == BOUND;
        let local = Local { cluster_id: Some(OWN), namespace: "liqo", policy, is_known: &known, holder: &held, now: || at(NOW) };
        review(&Candidate { kind: "PeeringRequest", operation: op, name, namespace, spec, old_spec: old, user }, &local)
    }

    fn create(spec: &PeeringRequestSpec, user: &UserInfo) -> Result<(), Denial> {
        let name = spec.requester_cluster_id().unwrap_or("x").to_owned();
        judge(Operation::Create, &name, spec, None, user, &PolicyConfig::default())
    }

    fn reason(r: Result<(), Denial>) -> Reason {
        r.expect_err("expected a denial").reason
    }

    #[test]
    fn a_peer_creating_its_own_request_is_accepted() {
        assert_eq!(create(&spec(PEER), &peer_user(PEER)), Ok(()));
        assert_eq!(create(&spec(PEER), &admin()), Ok(()));
        let anonymous = UserInfo { username: "system:anonymous".into() };
        assert_eq!(create(&spec(PEER), &anonymous), Ok(()));
    }

    /// The tenant-namespace contract's trust on first use, on every path: an ID bound to the
    /// cluster that first took an identity for it is claimed by no request but that identity's.
    #[test]
    fn a_bound_cluster_id_is_claimed_by_its_holders_identity_only() {
        let create_in = |ns: &str, s: &PeeringRequestSpec, user: &UserInfo| {
            judge_in(ns, Operation::Create, BOUND, s, None, user, &PolicyConfig::default())
        };
        // The anonymous overlay's request, in the Liqo namespace (Liqo's manual peering form).
        let err = create_in("liqo", &in_liqo(BOUND), &anonymous()).unwrap_err();
        assert_eq!(err.reason, Reason::IdentityBound);
        assert_eq!(err.reason.status(), (409, "Conflict"));
        assert!(err.message.starts_with(&bound_message(BOUND, Some(at(EXPIRES)))), "the words of /identity's 409: {}", err.message);
        assert!(err.message.contains(&format!("kubectl liqo free {BOUND}")) && err.message.contains("system:anonymous"), "{}", err.message);
        let who = err.requester.expect("recorded as a refused claim");
        assert_eq!((who.cluster_id.as_str(), who.claim), (BOUND, true));
        // In the tenant namespace: an anonymous caller is refused; an admin, whom RBAC lets act
        // there as the peer anyway, is not. In the Liqo namespace an admin is refused too.
        assert_eq!(reason(create_in(&tenant_namespace(BOUND), &spec(BOUND), &anonymous())), Reason::IdentityBound);
        assert_eq!(create_in(&tenant_namespace(BOUND), &spec(BOUND), &admin()), Ok(()));
        assert_eq!(reason(create_in("liqo", &in_liqo(BOUND), &admin())), Reason::IdentityBound);
        // The holder's own identity, in its tenant namespace.
        assert_eq!(create_in(&tenant_namespace(BOUND), &spec(BOUND), &peer_user(BOUND)), Ok(()));
        // An ID nobody holds still peers anonymously; one whose identities all expired too.
        assert_eq!(judge_in("liqo", Operation::Create, PEER, &in_liqo(PEER), None, &anonymous(), &PolicyConfig::default()), Ok(()));
        assert_eq!(judge_in("liqo", Operation::Create, EXPIRED, &in_liqo(EXPIRED), None, &anonymous(), &PolicyConfig::default()), Ok(()));
    }

    /// An UPDATE that keeps the spec (our reconciler's finalizer, a label) claims nothing, so a
    /// request stored before the ID was bound can still be served and removed; one that changes
    /// it (another kubeconfig, another auth URL) is a claim.
    #[test]
    fn an_update_claims_a_bound_id_only_when_it_changes_the_spec() {
        let old = in_liqo(BOUND);
        let update =
            |new: &PeeringRequestSpec| judge_in("liqo", Operation::Update, BOUND, new, Some(&old), &admin(), &PolicyConfig::default());
        assert_eq!(update(&old), Ok(()));
        let mut moved = old.clone();
        moved.auth_url = Some("https://203.0.113.9:30740".into());
        assert_eq!(reason(update(&moved)), Reason::IdentityBound);
    }

    #[test]
    fn a_peer_claiming_another_cluster_id_is_refused_with_the_documented_message() {
        let other = "11111111-2222-3333-4444-555555555555";
        let err = create(&spec(other), &peer_user(PEER)).unwrap_err();
        assert_eq!(err.reason, Reason::IdentityMismatch);
        assert!(err.message.starts_with(&format!("clusterID {other} is not allowed for this requester")), "{}", err.message);
        // A peer ServiceAccount of another namespace is not ours.
        let foreign_ns = UserInfo { username: format!("system:serviceaccount:default:remote-{PEER}") };
        assert_eq!(reason(create(&spec(PEER), &foreign_ns)), Reason::IdentityMismatch);
    }

    #[test]
    fn cluster_id_must_be_present_well_formed_consistent_and_equal_to_the_name() {
        let mut s = spec(PEER);
        s.cluster_identity = None;
        assert_eq!(reason(create(&s, &admin())), Reason::MissingClusterId);
        assert_eq!(reason(create(&spec("Not_A_Label"), &admin())), Reason::MalformedClusterId);
        let mut s = spec(PEER);
        s.cluster_id = Some(OWN.into());
        assert_eq!(reason(create(&s, &admin())), Reason::ConflictingClusterIds);
        let err = judge(Operation::Create, "other-name", &spec(PEER), None, &admin(), &PolicyConfig::default()).unwrap_err();
        assert_eq!(err.reason, Reason::NameMismatch);
        assert!(err.message.contains("metadata.name (other-name)"), "{}", err.message);
    }

    #[test]
    fn the_short_cluster_id_form_of_federation_requests_is_understood() {
        let mut s = spec(PEER);
        s.cluster_identity = None;
        s.cluster_id = Some(PEER.into());
        assert_eq!(create(&s, &admin()), Ok(()));
    }

    #[test]
    fn our_own_cluster_id_is_refused() {
        assert_eq!(reason(create(&spec(OWN), &admin())), Reason::OwnClusterId);
    }

    #[test]
    fn without_our_own_cluster_id_nothing_is_created() {
        let policy = PolicyConfig::default();
        let local = Local { cluster_id: None, namespace: "liqo", policy: &policy, is_known: &|_| true, holder: &|_| None, now: || at(NOW) };
        let s = spec(PEER);
        let namespace = tenant_namespace(PEER);
        let c = Candidate {
            kind: "PeeringRequest",
            operation: Operation::Create,
            name: PEER,
            namespace: &namespace,
            spec: &s,
            old_spec: None,
            user: &admin(),
        };
        assert_eq!(reason(review(&c, &local)), Reason::NotReady);
    }

    #[test]
    fn kubeconfig_ref_must_point_at_a_secret_in_the_requests_namespace() {
        let tenant = Some(tenant_namespace(PEER));
        let cases: [(Option<SecretReference>, &str); 6] = [
            (None, "spec.kubeConfigRef: required"),
            (Some(SecretReference { name: None, namespace: tenant.clone() }), "spec.kubeConfigRef.name: required"),
            (Some(SecretReference { name: Some("Bad Name".into()), namespace: tenant.clone() }), "not a valid Secret name"),
            (Some(SecretReference { name: Some("s".into()), namespace: None }), "spec.kubeConfigRef.namespace: required"),
            (Some(SecretReference { name: Some("s".into()), namespace: Some("default".into()) }), "must be liqo-tenant-"),
            (Some(SecretReference { name: Some("s".into()), namespace: Some("liqo".into()) }), "the request's own namespace"),
        ];
        for (r, expected) in cases {
            let mut s = spec(PEER);
            s.kube_config_ref = r;
            let err = create(&s, &admin()).unwrap_err();
            assert_eq!(err.reason, Reason::KubeConfigRef);
            assert!(err.message.contains(expected), "{} lacks {expected}", err.message);
        }
    }

    /// A requester may create Secrets of any name here, but not name one this cluster keeps:
    /// the broadcaster would use it with the reconciler's rights.
    #[test]
    fn kubeconfig_ref_may_not_name_a_secret_this_cluster_keeps() {
        let other = "11111111-2222-3333-4444-555555555555";
        for (name, what) in [
            (format!("pr-kubeconfig-{other}"), "the kubeconfig another cluster handed over"),
            ("beta-identity".to_owned(), "an identity a peer issued this cluster"),
            ("auth-token".to_owned(), "this cluster's auth tokens"),
            ("liqo-auth-tls".to_owned(), "a serving certificate"),
        ] {
            let mut s = spec(PEER);
            s.kube_config_ref = Some(SecretReference { name: Some(name.clone()), namespace: Some(tenant_namespace(PEER)) });
            for user in [peer_user(PEER), admin()] {
                let err = create(&s, &user).unwrap_err();
                assert_eq!(err.reason, Reason::KubeConfigRef);
                assert!(err.message.contains(what) && err.message.contains(&format!("pr-kubeconfig-{PEER}")), "{}", err.message);
            }
        }
        let mut own = spec(PEER);
        own.kube_config_ref =
            Some(SecretReference { name: Some(format!("pr-kubeconfig-{PEER}")), namespace: Some(tenant_namespace(PEER)) });
        assert_eq!(create(&own, &peer_user(PEER)), Ok(()));

        // A request stored before the rule may still be updated (its finalizer removed) as it
        // is, but not be made to name such a Secret.
        let mut stored = spec(PEER);
        stored.kube_config_ref = Some(SecretReference { name: Some("beta-identity".into()), namespace: Some(tenant_namespace(PEER)) });
        let p = PolicyConfig::default();
        assert_eq!(judge(Operation::Update, PEER, &stored, Some(&stored), &peer_user(PEER), &p), Ok(()));
        assert_eq!(reason(judge(Operation::Update, PEER, &stored, Some(&own), &peer_user(PEER), &p)), Reason::KubeConfigRef);
    }

    #[test]
    fn updates_keep_the_cluster_id_and_namespace_but_may_change_the_rest() {
        let old = spec(PEER);
        let mut renamed = spec(PEER);
        renamed.cluster_identity.as_mut().unwrap().cluster_name = Some("home-renamed".into());
        renamed.auth_url = Some("https://10.0.0.9:30740".into());
        let p = PolicyConfig::default();
        assert_eq!(judge(Operation::Update, PEER, &renamed, Some(&old), &peer_user(PEER), &p), Ok(()));

        let mut moved = spec(PEER);
        moved.namespace = Some("other".into());
        let err = judge(Operation::Update, PEER, &moved, Some(&old), &admin(), &p).unwrap_err();
        assert_eq!(err.reason, Reason::ImmutableField);
        assert!(err.message.contains("spec.namespace is immutable"), "{}", err.message);

        let mut new_id_old = spec(PEER);
        new_id_old.cluster_identity.as_mut().unwrap().cluster_id = "aaaa".into();
        let err = judge(Operation::Update, PEER, &spec(PEER), Some(&new_id_old), &admin(), &p).unwrap_err();
        assert_eq!(err.reason, Reason::ImmutableField);
    }

    #[test]
    fn policy_applies_on_create_only() {
        let reject = PolicyConfig { policy: PeeringPolicy::RejectAll, ..Default::default() };
        assert_eq!(reason(judge(Operation::Create, PEER, &spec(PEER), None, &admin(), &reject)), Reason::Policy);
        assert_eq!(judge(Operation::Update, PEER, &spec(PEER), Some(&spec(PEER)), &admin(), &reject), Ok(()));
        assert_eq!(judge(Operation::Delete, PEER, &spec("BAD"), None, &admin(), &reject), Ok(()));
        let known = PolicyConfig { policy: PeeringPolicy::AcceptKnown, ..Default::default() };
        assert_eq!(judge(Operation::Create, PEER, &spec(PEER), None, &admin(), &known), Ok(()));
        let stranger = "22222222-2222-3333-4444-555555555555";
        assert_eq!(reason(judge(Operation::Create, stranger, &spec(stranger), None, &admin(), &known)), Reason::Policy);
    }

    /// protocol §9: a peer's identity writes only in its own tenant namespace; an anonymous
    /// requester or an admin there or in the Liqo namespace.
    #[test]
    fn a_request_outside_the_tenant_namespace_of_the_cluster_it_claims_is_refused() {
        let p = PolicyConfig::default();
        let other = "11111111-2222-3333-4444-555555555555";
        let in_ns = |ns: &str, user: &UserInfo| {
            let mut s = spec(PEER);
            s.kube_config_ref.as_mut().unwrap().namespace = Some(ns.to_owned());
            judge_in(ns, Operation::Create, PEER, &s, None, user, &p)
        };
        let err = in_ns(&tenant_namespace(other), &peer_user(PEER)).unwrap_err();
        assert_eq!(err.reason, Reason::WrongNamespace);
        assert_eq!(
            err.message,
            format!("a PeeringRequest of cluster {PEER} belongs in its tenant namespace liqo-tenant-{PEER}, not \"liqo-tenant-{other}\"")
        );
        assert_eq!(reason(in_ns("liqo", &peer_user(PEER))), Reason::WrongNamespace, "a peer's identity never writes in the Liqo namespace");
        assert_eq!(reason(in_ns("default", &admin())), Reason::WrongNamespace);
        let anonymous = UserInfo { username: "system:anonymous".into() };
        assert_eq!(in_ns("liqo", &anonymous), Ok(()), "the anonymous overlay writes in the Liqo namespace");
        assert_eq!(in_ns("liqo", &admin()), Ok(()));
        let err = in_ns(&tenant_namespace(other), &anonymous).unwrap_err();
        assert!(err.message.contains("(or the Liqo namespace, liqo)"), "{}", err.message);
        // The identity of a peer of the cluster-scoped protocol (a ServiceAccount in the Liqo
        // namespace) is no identity for a tenant namespace.
        let legacy = UserInfo { username: format!("system:serviceaccount:liqo:remote-{PEER}") };
        assert_eq!(reason(in_ns(&tenant_namespace(PEER), &legacy)), Reason::IdentityMismatch);
    }

    #[test]
    fn peer_identity_parses_only_remote_service_accounts() {
        assert_eq!(peer_identity(&format!("system:serviceaccount:liqo:remote-{PEER}")), Some(("liqo", PEER)));
        assert_eq!(peer_identity("system:serviceaccount:liqo:liqo-reconciler"), None);
        assert_eq!(peer_identity("admin"), None);
        assert_eq!(peer_identity("system:serviceaccount:broken"), None);
    }
}
