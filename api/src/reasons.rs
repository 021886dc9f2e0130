//! The one list of condition types, reasons, what each means and what to do about it (pure).
//!
//! The reconciler sets only these reasons; docs/troubleshooting.md's table is
//! [`troubleshooting_table`] verbatim (a test compares them); Events, metrics, the command line
//! and the dashboard read the same names and hints from here.

use std::fmt;

/// Condition types, by the object that carries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConditionType {
    /// ForeignCluster: whether the remote's certificate is trusted (or its CA allowed).
    Trusted,
    /// ForeignCluster: whether the remote issued us an identity.
    Authenticated,
    /// ForeignCluster: whether the remote answers.
    RemoteReachable,
    /// ForeignCluster: whether the remote API server presents the pinned CA.
    CaVerified,
    /// ForeignCluster: whether the remote accepted our PeeringRequest and advertises to us.
    Joined,
    /// SearchDomain: the result of the last lookup.
    Ready,
    /// PeeringRequest / FederationRequest: how our Advertisement to its sender fares.
    Advertised,
    /// ClusterConfig: whether peers can reach the API server and auth URLs this cluster tells
    /// them.
    AddressesReachable,
    /// ClusterConfig: whether what peers' identities stand on is installed (the fixed peer
    /// ClusterRoles and the peer-Secret admission policy).
    PeerAccessInstalled,
}

impl ConditionType {
    /// The peering phases of a ForeignCluster, in the order its status lists them.
    pub const PEERING: [ConditionType; 5] = [Self::Trusted, Self::Authenticated, Self::RemoteReachable, Self::CaVerified, Self::Joined];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trusted => "Trusted",
            Self::Authenticated => "Authenticated",
            Self::RemoteReachable => "RemoteReachable",
            Self::CaVerified => "CaVerified",
            Self::Joined => "Joined",
            Self::Ready => "Ready",
            Self::Advertised => "Advertised",
            Self::AddressesReachable => "AddressesReachable",
            Self::PeerAccessInstalled => "PeerAccessInstalled",
        }
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    pub fn of(ok: bool) -> Self {
        if ok { Self::True } else { Self::False }
    }
}

macro_rules! reasons {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Every reason a condition written by this project can carry.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason { $($(#[$doc])* $name),* }

        impl Reason {
            pub const ALL: &'static [Reason] = &[$(Reason::$name),*];

            /// The stable CamelCase name (condition reason, Event reason, metric label).
            pub fn as_str(self) -> &'static str {
                match self { $(Reason::$name => stringify!($name)),* }
            }
        }
    };
}

reasons! {
    // Trusted
    /// The remote's certificate verified against our roots.
    Trusted,
    /// Unknown certificate authority, allowed (spec or autojoinUntrusted).
    UntrustedAllowed,
    /// Unknown certificate authority, nothing allows it: waits for the user to approve its
    /// fingerprint.
    AwaitingApproval,
    /// Paired by fingerprint: the remote's leaf, or the CA that signed it, has
    /// `spec.trustedCAFingerprint`.
    FingerprintApproved,
    /// `spec.trustedCAFingerprint` is set and neither the remote's leaf nor a CA that signed it
    /// has it.
    FingerprintMismatch,
    /// The remote's certificate is invalid for another reason than its issuer.
    TlsError,
    // Authenticated
    /// The remote issued our identity.
    IdentityIssued,
    /// The remote refused our token.
    TokenRefused,
    /// The remote requires a token and we had none.
    EmptyTokenRefused,
    /// The remote no longer accepts the identity it issued us.
    IdentityRevoked,
    /// The remote binds our cluster ID to an identity we no longer hold: it gives
    /// another only to that identity's holder, once it expires, or once its operator frees it.
    IdentityBound,
    /// No identity: the `apiUrl` way sends PeeringRequests anonymously.
    Anonymous,
    // RemoteReachable
    /// The remote API server answered.
    Reachable,
    /// The remote does not answer.
    RemoteUnreachable,
    /// The remote answered something malformed.
    RemoteInvalid,
    // CaVerified
    /// The remote API server's certificate verified against the pinned CA.
    Pinned,
    /// The remote API server presents another CA than the pinned one.
    RemoteCaChanged,
    /// `apiUrl` way: no CA to pin (no readable `kube-public/cluster-info`).
    NoCaAvailable,
    // Joined
    /// The remote accepted our PeeringRequest and advertises to us.
    Joined,
    /// Our PeeringRequest is on the remote; its Advertisement is not here yet.
    WaitingForAdvertisement,
    /// The remote's Advertisement, here before, is gone.
    AdvertisementDeleted,
    /// The remote refused our PeeringRequest (its webhook or RBAC), or the kubeconfig it gave us.
    PeerRefused,
    /// `apiUrl` way: the remote does not admit anonymous PeeringRequests.
    AnonymousPeeringRefused,
    /// Neither an auth URL nor an API URL with a cluster ID.
    NoAuthUrl,
    /// The remote is this cluster.
    SelfPeering,
    /// The remote's `/ids` claims a cluster ID another ForeignCluster already stands for.
    ClusterIdTaken,
    /// The remote speaks the cluster-scoped protocol of 0.1 (its `/ids` has no
    /// `protocolVersion`): it cannot hold our request in a tenant namespace until upgraded.
    PeerOnOlderProtocol,
    /// The tenant namespace of this peer is still being deleted (a full unjoin just ended):
    /// the join goes on once it is gone.
    TenantNamespaceTerminating,
    /// A spec field is malformed.
    InvalidSpec,
    /// Unjoin waits for the remote to remove our PeeringRequest.
    UnjoinPending,
    /// `spec.join` is false and the peering is undone.
    Unjoined,
    // Any peering phase
    /// `spec.join` is false: the phase is not checked.
    NotJoined,
    /// An earlier phase has not completed: this one has not run.
    Waiting,
    // SearchDomain Ready
    /// Every target of the domain was resolved.
    LookupSucceeded,
    /// Some targets were skipped; the message names each.
    LookupPartial,
    /// The domain did not resolve.
    DnsLookupFailed,
    // PeeringRequest Advertised
    /// Our Advertisement is in the peer's cluster.
    Published,
    /// `enableAdvertisement` is false: none is published.
    AdvertisementDisabled,
    /// The kubeconfig Secret the request names is missing: its sender puts it back.
    KubeconfigMissing,
    // ClusterConfig AddressesReachable
    /// Both URLs peers are told were found (or set) and none is plainly unreachable.
    AddressesFound,
    /// A URL peers are told is one no peer can reach (loopback, a ClusterIP, a pod address).
    AddressUnreachable,
    /// No address of the auth service was found.
    NoAuthAddress,
    // ClusterConfig PeerAccessInstalled
    /// The fixed peer ClusterRoles and the peer-Secret policy are there.
    PeerAccessReady,
    /// A part of the install that peers' identities stand on is missing: identities are not
    /// issued until it is applied.
    PeerAccessMissing,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the troubleshooting table: on which object and condition the reasons appear,
/// with which status, what they mean and what to do.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The kind carrying the condition (`ForeignCluster`, `SearchDomain`, `PeeringRequest`).
    pub kind: &'static str,
    /// The condition; `None`: any peering phase of a ForeignCluster.
    pub condition: Option<ConditionType>,
    pub status: Status,
    pub reasons: &'static [Reason],
    pub meaning: &'static str,
    /// What to do; empty when nothing needs doing.
    pub hint: &'static str,
}

const FC: &str = "ForeignCluster";

const fn fc(condition: ConditionType, status: Status, reasons: &'static [Reason], meaning: &'static str, hint: &'static str) -> Entry {
    Entry { kind: FC, condition: Some(condition), status, reasons, meaning, hint }
}

use ConditionType as C;
use Reason as R;
use Status as S;

/// Every condition reason this project sets, with its meaning and hint.
pub const TROUBLESHOOTING: &[Entry] = &[
    fc(
        C::Trusted,
        S::False,
        &[R::AwaitingApproval],
        "the remote's certificate is not signed by a CA we trust; `status.outgoing.presentedFingerprint` (`kubectl get fc -o wide`, `kubectl liqo status NAME`, the dashboard's peer view) and the message show the SHA-256 fingerprint of its CA (of its certificate when it sends no CA)",
        "compare it with the remote operator's (`AUTH-CA-FINGERPRINT` in their `kubectl liqo status`), then `kubectl liqo trust NAME --fingerprint …` (sets `spec.trustedCAFingerprint`); or `--trusted-ca-file` with the remote's CA",
    ),
    fc(
        C::Trusted,
        S::True,
        &[R::FingerprintApproved],
        "paired by fingerprint: the remote's certificate is the one `spec.trustedCAFingerprint` names or is signed by it (checked on every connection; a renewed leaf of the same CA stays approved)",
        "",
    ),
    fc(
        C::Trusted,
        S::False,
        &[R::FingerprintMismatch],
        "the remote's certificate is neither the approved one nor signed by it (a new CA, or someone else)",
        "ask the remote's operator for the new fingerprint; approve it again only if it matches",
    ),
    fc(
        C::Trusted,
        S::False,
        &[R::UntrustedAllowed],
        "the remote's certificate is not signed by a CA we trust; peering is allowed anyway",
        "to trust it for real: `--trusted-ca-file` with the remote's CA",
    ),
    fc(C::Trusted, S::True, &[R::Trusted], "the remote's certificate verified against our roots", ""),
    fc(
        C::Trusted,
        S::False,
        &[R::TlsError],
        "the remote's certificate is invalid for another reason than its issuer (name, dates)",
        "check the remote's serving certificate (`LIQO_AUTH_HOSTS` of its `liqo-certs` Job)",
    ),
    fc(C::Authenticated, S::True, &[R::IdentityIssued], "the remote issued our identity (Secret `<fc>-identity`)", ""),
    fc(
        C::Authenticated,
        S::False,
        &[R::TokenRefused, R::EmptyTokenRefused],
        "the remote requires a token",
        "`kubectl create secret generic -n liqo remote-token-<remote ID> --from-literal=token=<its auth-token>`",
    ),
    fc(
        C::Authenticated,
        S::False,
        &[R::IdentityRevoked],
        "the remote no longer accepts the identity it gave us",
        "it is requested again automatically; check the remote's `auth-token`",
    ),
    fc(
        C::Authenticated,
        S::False,
        &[R::IdentityBound],
        "the remote binds our cluster ID to an identity we no longer hold (lost, or another cluster claims our ID), and our holder key did not prove us (the message says why: `NoKeyRecorded` for an identity issued before 0.4 and not renewed since, `BadSignature` for a key that is not ours: our `kube-system/liqo-holder-key` lost or another cluster holds our ID)",
        "on the remote: `kubectl liqo free <our cluster ID>`; or wait until the identity expires (the condition says when)",
    ),
    fc(C::Authenticated, S::False, &[R::Anonymous], "`apiUrl` form: no identity was issued (informational)", ""),
    fc(C::RemoteReachable, S::True, &[R::Reachable], "the remote API server answered", ""),
    fc(
        C::RemoteReachable,
        S::False,
        &[R::RemoteUnreachable],
        "the remote API server or auth service does not answer",
        "check `spec.apiUrl`/`authUrl`, firewalls, `LIQO_API_URL` on the remote",
    ),
    fc(
        C::RemoteReachable,
        S::False,
        &[R::RemoteInvalid],
        "the remote answered something malformed (its `/ids`, `/ca` or `/identity`)",
        "check that `spec.authUrl` is a Liqo auth service, and the remote's reconciler logs",
    ),
    fc(C::CaVerified, S::True, &[R::Pinned], "the remote API server's certificate verified against the pinned CA", ""),
    fc(
        C::CaVerified,
        S::False,
        &[R::RemoteCaChanged],
        "the remote API server presents another CA than the one pinned",
        "if the rotation is expected: `kubectl -n liqo delete secret <fc>-ca-data` to trust the new CA",
    ),
    fc(
        C::CaVerified,
        S::False,
        &[R::NoCaAvailable],
        "`apiUrl` form: the remote's `kube-public/cluster-info` is missing or not readable anonymously",
        "publish it (kubeadm does), or use `spec.authUrl`",
    ),
    fc(C::Joined, S::True, &[R::Joined], "the remote accepted our PeeringRequest and advertises to us", ""),
    fc(
        C::Joined,
        S::False,
        &[R::WaitingForAdvertisement, R::AdvertisementDeleted],
        "our PeeringRequest is there but the remote's Advertisement is not (yet, or was deleted)",
        "the remote's broadcaster re-creates it; check the remote's reconciler logs",
    ),
    fc(
        C::Joined,
        S::False,
        &[R::PeerRefused],
        "the remote refuses our PeeringRequest (its webhook or its RBAC; the message quotes it)",
        "the remote's `peeringPolicy` decides: ask its admin to allow this cluster",
    ),
    fc(
        C::Joined,
        S::False,
        &[R::AnonymousPeeringRefused],
        "`apiUrl` form: the remote does not admit anonymous PeeringRequests",
        "`kubectl apply -k manifests/anonymous-peering/` on the remote, or use `spec.authUrl`",
    ),
    fc(C::Joined, S::False, &[R::NoAuthUrl], "neither `spec.authUrl` nor `spec.apiUrl` + cluster ID", "add the remote's auth address"),
    fc(C::Joined, S::False, &[R::SelfPeering], "the remote cluster ID is ours", "the URL points at this cluster"),
    fc(
        C::Joined,
        S::False,
        &[R::ClusterIdTaken],
        "the remote's `/ids` claims the cluster ID of another ForeignCluster here (the message names it); nothing was written",
        "check the URL: two addresses for one cluster, or a peer impersonating another; delete one of the two",
    ),
    fc(
        C::Joined,
        S::False,
        &[R::PeerOnOlderProtocol],
        "the remote runs the cluster-scoped protocol of 0.1 (no `protocolVersion` in its `/ids`); asked again once per health period",
        "upgrade the remote (docs/upgrades.md); the peering forms by itself once it is",
    ),
    fc(
        C::Joined,
        S::False,
        &[R::TenantNamespaceTerminating],
        "the peer's tenant namespace here is still being deleted after a full unjoin",
        "wait: the join goes on once it is gone (`kubectl get ns liqo-tenant-<id>`)",
    ),
    fc(C::Joined, S::False, &[R::InvalidSpec], "a field of the spec is malformed (the message names it)", "fix the field named"),
    fc(
        C::Joined,
        S::True,
        &[R::UnjoinPending],
        "unjoin waits for the remote to delete our PeeringRequest: the remote is unreachable, or holds the request Terminating until its reconciler releases it (the message says which; the peer's access here is already revoked)",
        "after `--unjoin-grace-seconds` (120), a deleted ForeignCluster completes locally (Event `RemoteGone`; `unpeer --delete --wait` then exits 1)",
    ),
    fc(C::Joined, S::False, &[R::Unjoined], "`spec.join` is false; the peering is undone", ""),
    Entry {
        kind: FC,
        condition: None,
        status: S::Unknown,
        reasons: &[R::NotJoined, R::Waiting],
        meaning: "`spec.join` is false, or an earlier phase has not completed (the message names it)",
        hint: "see the first phase that is not `True`",
    },
    Entry {
        kind: "SearchDomain",
        condition: Some(C::Ready),
        status: S::True,
        reasons: &[R::LookupSucceeded],
        meaning: "every target of the domain resolved",
        hint: "",
    },
    Entry {
        kind: "SearchDomain",
        condition: Some(C::Ready),
        status: S::True,
        reasons: &[R::LookupPartial],
        meaning: "some targets were skipped; the message names each and why",
        hint: "fix the records named",
    },
    Entry {
        kind: "SearchDomain",
        condition: Some(C::Ready),
        status: S::False,
        reasons: &[R::DnsLookupFailed],
        meaning: "the domain did not resolve (server down, `NXDOMAIN`)",
        hint: "nothing is deleted meanwhile; check the zone with `kubectl liqo discover --domain <domain>`",
    },
    Entry {
        kind: "PeeringRequest",
        condition: Some(C::Advertised),
        status: S::True,
        reasons: &[R::Published],
        meaning: "our Advertisement is in the sender's cluster",
        hint: "",
    },
    Entry {
        kind: "PeeringRequest",
        condition: Some(C::Advertised),
        status: S::False,
        reasons: &[R::PeerRefused],
        meaning: "the sender no longer accepts the kubeconfig it gave us (e.g. after an anonymous peer unjoined)",
        hint: "nothing: it ends when the sender deletes its PeeringRequest",
    },
    Entry {
        kind: "PeeringRequest",
        condition: Some(C::Advertised),
        status: S::False,
        reasons: &[R::AdvertisementDisabled],
        meaning: "`enableAdvertisement` is false in the ClusterConfig",
        hint: "`kubectl patch clusterconfigs liqo-configuration --type merge -p '{\"spec\":{\"discoveryConfig\":{\"enableAdvertisement\":true}}}'`",
    },
    Entry {
        kind: "PeeringRequest",
        condition: Some(C::Advertised),
        status: S::False,
        reasons: &[R::RemoteUnreachable],
        meaning: "the sender's API server has not answered for 3 health periods (a shorter outage leaves `Published`: our Advertisement stays in its cluster meanwhile, and the sender's ForeignCluster says `RemoteReachable` False within a period)",
        hint: "retried every 10 s, backing off to a period; check the address in the sender's kubeconfig Secret",
    },
    Entry {
        kind: "PeeringRequest",
        condition: Some(C::Advertised),
        status: S::False,
        reasons: &[R::KubeconfigMissing],
        meaning: "the kubeconfig Secret the request names is gone (deleted here)",
        hint: "nothing: the sender sees this in the request's status and puts the Secret back within a health period",
    },
    Entry {
        kind: "ClusterConfig",
        condition: Some(C::AddressesReachable),
        status: S::True,
        reasons: &[R::AddressesFound],
        meaning: "peers are told an API server URL and an auth URL that they can reach; `status.apiUrlFrom`/`authUrlFrom` say where each came from",
        hint: "",
    },
    Entry {
        kind: "ClusterConfig",
        condition: Some(C::AddressesReachable),
        status: S::False,
        reasons: &[R::AddressUnreachable],
        meaning: "a URL peers are told is a loopback address, a Service ClusterIP, a pod address or a name only this cluster resolves (the message names it)",
        hint: "set the value the message names (`LIQO_API_URL` or `LIQO_AUTH_URL`) in ConfigMap `liqo/liqo-reconciler-env`; it applies within 30 s",
    },
    Entry {
        kind: "ClusterConfig",
        condition: Some(C::AddressesReachable),
        status: S::False,
        reasons: &[R::NoAuthAddress],
        meaning: "no address of the auth service was found (Service `liqo-auth` is not a NodePort or LoadBalancer, no Ingress `liqo-auth`, no node address); mDNS tells each interface's address",
        hint: "set `LIQO_AUTH_URL` in ConfigMap `liqo/liqo-reconciler-env`",
    },
    Entry {
        kind: "ClusterConfig",
        condition: Some(C::PeerAccessInstalled),
        status: S::True,
        reasons: &[R::PeerAccessReady],
        meaning: "the fixed peer ClusterRoles and the peer-Secret admission policy that peers' identities stand on are installed",
        hint: "",
    },
    Entry {
        kind: "ClusterConfig",
        condition: Some(C::PeerAccessInstalled),
        status: S::False,
        reasons: &[R::PeerAccessMissing],
        meaning: "a part of the install that peers' identities stand on is missing (the message names it); `/identity` answers 503 naming it meanwhile",
        hint: "`kubectl apply -f manifests/reconciler/peer-roles.yaml -f manifests/reconciler/peer-secrets.yaml` (or `kubectl liqo install`)",
    },
];

impl Reason {
    /// The first row naming this reason (every reason has one; a test says so).
    pub fn entry(self) -> &'static Entry {
        TROUBLESHOOTING.iter().find(|e| e.reasons.contains(&self)).expect("every reason is in TROUBLESHOOTING")
    }

    /// The row for this reason on condition `condition`, else the first naming it.
    pub fn entry_for(self, condition: ConditionType) -> &'static Entry {
        TROUBLESHOOTING.iter().find(|e| e.condition == Some(condition) && e.reasons.contains(&self)).unwrap_or_else(|| self.entry())
    }

    /// What to do about it (empty when nothing needs doing).
    pub fn hint(self) -> &'static str {
        self.entry().hint
    }

    /// The reason named `s`, if it is one of ours.
    pub fn parse(s: &str) -> Option<Reason> {
        Self::ALL.iter().copied().find(|r| r.as_str() == s)
    }
}

/// The troubleshooting table as Markdown (what docs/troubleshooting.md shows).
pub fn troubleshooting_table() -> String {
    let mut out = String::from("| condition / reason | meaning | what to do |\n|---|---|---|\n");
    for e in TROUBLESHOOTING {
        let reasons: Vec<String> = e.reasons.iter().map(|r| format!("`{r}`")).collect();
        let kind = if e.kind == FC { String::new() } else { format!("{} ", e.kind) };
        let condition = e.condition.map_or("any phase".to_owned(), |c| format!("`{c}`"));
        let hint = if e.hint.is_empty() { "—" } else { e.hint };
        out.push_str(&format!("| {kind}{condition} {} {} | {} | {hint} |\n", e.status.as_str(), reasons.join(" / "), e.meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_a_row_and_every_row_a_reason() {
        for r in Reason::ALL {
            assert!(TROUBLESHOOTING.iter().any(|e| e.reasons.contains(r)), "{r} has no troubleshooting row");
            assert_eq!(Reason::parse(r.as_str()), Some(*r));
        }
        assert!(TROUBLESHOOTING.iter().all(|e| !e.reasons.is_empty()));
        assert_eq!(Reason::parse("NoSuchReason"), None);
    }

    #[test]
    fn hints_come_from_the_rows() {
        assert!(Reason::AwaitingApproval.hint().contains("kubectl liqo trust"));
        assert_eq!(Reason::PeerRefused.entry_for(ConditionType::Advertised).kind, "PeeringRequest");
        assert_eq!(Reason::PeerRefused.entry_for(ConditionType::Joined).kind, "ForeignCluster");
        assert_eq!(Reason::Joined.hint(), "");
    }
}
