//! Names every component agrees on: API groups, labels, the finalizer and well-known objects.

/// API group of ForeignCluster, SearchDomain, PeeringRequest and FederationRequest.
pub const DISCOVERY_GROUP: &str = "discovery.liqo.io";
/// API group of ClusterConfig.
pub const CONFIG_GROUP: &str = "config.liqo.io";
/// API group of Advertisement.
pub const SHARING_GROUP: &str = "sharing.liqo.io";
/// The only version served by every group.
pub const VERSION: &str = "v1alpha1";

/// Label carrying the remote cluster ID of a ForeignCluster (how ForeignClusters are merged).
pub const LABEL_CLUSTER_ID: &str = "discovery.liqo.io/cluster-id";
/// Label carrying how a ForeignCluster was found (`LAN`, `WAN`, `Manual`, `IncomingPeering`).
pub const LABEL_DISCOVERY_TYPE: &str = "discovery.liqo.io/discovery-type";
/// Label carrying the name a user gave a peer (`kubectl liqo peer URL --name N`), when the
/// ForeignCluster standing for it has another (made first by discovery): every command finds
/// the peer by it as by the object's name or its cluster ID.
pub const LABEL_PEER_NAME: &str = "discovery.liqo.io/peer-name";
/// Label carrying the SearchDomain that found a ForeignCluster.
pub const LABEL_SEARCHDOMAIN: &str = "discovery.liqo.io/searchdomain";

/// Finalizer that keeps a ForeignCluster until its remote PeeringRequest is gone.
pub const FINALIZER_PEERED: &str = "discovery.liqo.io/peered";

/// Default namespace of the Liqo components (overridden by `POD_NAMESPACE`).
pub const DEFAULT_NAMESPACE: &str = "liqo";
/// ConfigMap holding this cluster's ID, in the Liqo namespace.
pub const CLUSTER_ID_CONFIGMAP: &str = "cluster-id";
/// Key of the cluster ID inside [`CLUSTER_ID_CONFIGMAP`].
pub const CLUSTER_ID_KEY: &str = "cluster-id";
/// Name of the ClusterConfig singleton.
pub const CLUSTER_CONFIG_NAME: &str = "liqo-configuration";
/// Secret holding the tokens accepted by the auth service.
pub const AUTH_TOKEN_SECRET: &str = "auth-token";
/// Prefix of the ServiceAccount a peer gets on this cluster: `remote-<clusterID>`.
pub const PEER_SERVICE_ACCOUNT_PREFIX: &str = "remote-";

/// Name of the ServiceAccount that identifies peer `cluster_id` on this cluster.
pub fn peer_service_account(cluster_id: &str) -> String {
    format!("{PEER_SERVICE_ACCOUNT_PREFIX}{cluster_id}")
}

/// Name of the Advertisement that `sender_cluster_id` creates in the cluster it peers with.
pub fn advertisement_name(sender_cluster_id: &str) -> String {
    format!("advertisement-{sender_cluster_id}")
}

/// Suffix of the Secret holding the CA of a ForeignCluster's remote: `<fc>-ca-data`.
pub const CA_DATA_SECRET_SUFFIX: &str = "-ca-data";
/// Suffix of the Secret holding the identity a remote issued us: `<fc>-identity`.
pub const IDENTITY_SECRET_SUFFIX: &str = "-identity";
/// Key of the remote API server CA in `<fc>-ca-data` (the outgoing side stores it, the
/// broadcaster reads it).
pub const CA_DATA_KEY: &str = "ca.crt";
/// Field manager of the incoming side's part of a ForeignCluster's status (`status.incoming`).
pub const INCOMING_STATUS_MANAGER: &str = "liqo-incoming";
/// Prefix of the Secret holding the token we present to a remote: `remote-token-<clusterID>`.
pub const TOKEN_SECRET_PREFIX: &str = "remote-token-";
/// Prefix of the Secret a requester hands over with its PeeringRequest.
pub const PEERING_KUBECONFIG_PREFIX: &str = "pr-kubeconfig-";

/// Name of the Secret holding the CA of the remote cluster of ForeignCluster `fc_name`.
pub fn ca_data_secret(fc_name: &str) -> String {
    format!("{fc_name}{CA_DATA_SECRET_SUFFIX}")
}

/// The Secret of our namespace that keeps our identity on peer `remote_id` after a
/// ForeignCluster was deleted without the remote (unreachable): the remote still binds our
/// cluster ID to it, and the next ForeignCluster for that peer takes it up.
pub fn kept_identity_secret(remote_id: &str) -> String {
    format!("liqo-kept-identity-{remote_id}")
}

/// Name of the Secret holding the identity (kubeconfig) the remote of ForeignCluster
/// `fc_name` issued us.
pub fn identity_secret(fc_name: &str) -> String {
    format!("{fc_name}{IDENTITY_SECRET_SUFFIX}")
}

/// Name of the Secret holding the token we present to peer `cluster_id`'s auth service.
pub fn token_secret(cluster_id: &str) -> String {
    format!("{TOKEN_SECRET_PREFIX}{cluster_id}")
}

/// Name of the Secret, in the remote Liqo namespace, holding the kubeconfig that cluster
/// `requester_cluster_id` hands the remote with its PeeringRequest.
pub fn peering_kubeconfig_secret(requester_cluster_id: &str) -> String {
    format!("{PEERING_KUBECONFIG_PREFIX}{requester_cluster_id}")
}

/// Why cluster `requester_cluster_id` may not name Secret `name` as the kubeconfig of its
/// PeeringRequest (`None`: it may). A requester can create Secrets of any name here but not
/// read ours; naming one of them would have our broadcaster use it with our rights: our
/// identity with another peer, a peer's CA, our tokens or certificates, or the kubeconfig
/// another requester handed over (whose Advertisement we would then write, and withdraw).
pub fn kept_secret(name: &str, requester_cluster_id: &str) -> Option<&'static str> {
    match name {
        AUTH_TOKEN_SECRET => Some("this cluster's auth tokens"),
        "liqo-ca" => Some("this cluster's CA"),
        n if n.starts_with("liqo-") && n.ends_with("-tls") => Some("a serving certificate of this cluster"),
        n if n.starts_with(TOKEN_SECRET_PREFIX) => Some("a token this cluster presents to a peer"),
        n if n.ends_with(IDENTITY_SECRET_SUFFIX) => Some("an identity a peer issued this cluster"),
        n if n.ends_with(CA_DATA_SECRET_SUFFIX) => Some("a peer's CA kept by this cluster"),
        n if n.strip_prefix(PEERING_KUBECONFIG_PREFIX).is_some_and(|id| id != requester_cluster_id) => {
            Some("the kubeconfig another cluster handed over with its request")
        }
        _ => None,
    }
}

/// Name of the ClusterRole (and its binding) a peer's identity got on a cluster of the
/// cluster-scoped protocol (0.1); removed on upgrade.
pub fn legacy_peer_role(cluster_id: &str) -> String {
    format!("liqo-remote-{cluster_id}")
}

/// Label marking a peer's tenant namespace.
pub const LABEL_TENANT_NAMESPACE: &str = "discovery.liqo.io/tenant-namespace";
/// Prefix of a peer's tenant namespace: `liqo-tenant-<its cluster ID>`.
pub const TENANT_NAMESPACE_PREFIX: &str = "liqo-tenant-";
/// The fixed ClusterRole a requester's identity (`remote-<id>`) is bound to, in its tenant
/// namespace only: its PeeringRequest or FederationRequest and its kubeconfig Secret.
pub const REQUESTER_CLUSTER_ROLE: &str = "liqo-peer-requester";
/// The fixed ClusterRole a peer's broadcaster identity (`<id>`) is bound to, in its tenant
/// namespace only: its Advertisement.
pub const BROADCASTER_CLUSTER_ROLE: &str = "liqo-peer-broadcaster";
/// Annotation on the ServiceAccount of a peer's identity: when the auth service last issued a
/// token for it (RFC 3339). A tenant namespace is not retired right after: the peer is about to
/// write its request with it.
pub const ANNOTATION_ISSUED_AT: &str = "discovery.liqo.io/issued-at";
/// Annotation on the ServiceAccount of a peer's identity: when the newest token issued for it
/// expires (RFC 3339, as the API server granted it). Once it has passed, the cluster ID is free
/// again unless a request of the peer stands in its tenant namespace. An identity
/// issued before this annotation existed expires [`LEGACY_IDENTITY_LIFETIME_DAYS`] after
/// [`ANNOTATION_ISSUED_AT`].
pub const ANNOTATION_EXPIRES_AT: &str = "discovery.liqo.io/expires-at";
/// Annotation on the ServiceAccount of a peer's identity: the public half of the key the
/// holder keeps (`ed25519:` and base64), recorded at its first claim or a renewal proven by its
/// token. A holder whose token proves nothing any more proves itself by signing a challenge
/// with that key (protocol §10).
pub const ANNOTATION_HOLDER_KEY: &str = "discovery.liqo.io/holder-key";
/// How a holder key's public half is written: the algorithm, then the key in standard base64.
pub const HOLDER_KEY_PREFIX: &str = "ed25519:";
/// The Secret holding this cluster's own holder key (key [`HOLDER_KEY_KEY`], PKCS#8), in
/// [`HOLDER_KEY_NAMESPACE`]: outside the Liqo namespace, so that deleting that namespace does
/// not lose the proof of the IDs this cluster holds on its peers. The manifests ship it empty.
pub const HOLDER_KEY_SECRET: &str = "liqo-holder-key";
/// Where [`HOLDER_KEY_SECRET`] lives.
pub const HOLDER_KEY_NAMESPACE: &str = "kube-system";
/// The data key of [`HOLDER_KEY_SECRET`].
pub const HOLDER_KEY_KEY: &str = "ed25519.pk8";
/// How long the identities of releases before 0.3 were issued for (a year).
pub const LEGACY_IDENTITY_LIFETIME_DAYS: i64 = 365;
/// Label on the ServiceAccount of a peer's identity: [`IDENTITY_WAITING`] from its issue until
/// the peer is seen using it, then [`IDENTITY_IN_USE`]. A waiting identity not used within
/// three health periods is retired with its tenant namespace.
pub const LABEL_IDENTITY: &str = "discovery.liqo.io/identity";
/// [`LABEL_IDENTITY`] of an identity issued and not yet used.
pub const IDENTITY_WAITING: &str = "waiting";
/// [`LABEL_IDENTITY`] of an identity its peer used.
pub const IDENTITY_IN_USE: &str = "in-use";
/// The ResourceQuota of every tenant namespace.
pub const TENANT_QUOTA: &str = "liqo-tenant";

/// The peering protocol this build speaks, told in `/ids` (`protocolVersion`): 2 is tenant
/// namespaces; a peer whose `/ids` has none speaks 1 (cluster-scoped requests).
pub const PROTOCOL_VERSION: u32 = 2;

/// The namespace that holds everything of peer `cluster_id` on this cluster (pure):
/// `liqo-tenant-<id>`, or, for an ID too long for a namespace name (a well-formed one may have
/// 63 characters), its first 42 characters and 8 hex digits of its SHA-256, so that two long
/// IDs with the same beginning still get two namespaces.
pub fn tenant_namespace(cluster_id: &str) -> String {
    let full = format!("{TENANT_NAMESPACE_PREFIX}{cluster_id}");
    if full.len() <= 63 {
        return full;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(cluster_id.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let head = cluster_id[..42].trim_end_matches('-');
    format!("{TENANT_NAMESPACE_PREFIX}{head}-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_namespace_is_a_namespace_name_for_every_well_formed_id() {
        const ID: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
        assert_eq!(tenant_namespace(ID), format!("liqo-tenant-{ID}"));
        let long_a = "a".repeat(63);
        let long_b = format!("{}b", "a".repeat(62));
        for id in [&long_a, &long_b] {
            let ns = tenant_namespace(id);
            assert!(ns.len() <= 63, "{ns}");
            assert!(crate::validate_cluster_id(&ns).is_ok(), "{ns}");
        }
        assert_ne!(tenant_namespace(&long_a), tenant_namespace(&long_b));
        // A dash where the ID is cut does not end up doubled.
        let dashed = format!("{}-{}", "a".repeat(41), "c".repeat(21));
        assert!(!tenant_namespace(&dashed).contains("--"), "{}", tenant_namespace(&dashed));
    }

    #[test]
    fn a_request_may_name_its_own_secret_and_none_this_cluster_keeps() {
        const ID: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
        for mine in [peering_kubeconfig_secret(ID), "pr-kubeconfig".into(), "fr-kubeconfig".into(), "my-kubeconfig".into()] {
            assert_eq!(kept_secret(&mine, ID), None, "{mine}");
        }
        let kept = [
            AUTH_TOKEN_SECRET.to_owned(),
            "liqo-ca".into(),
            "liqo-auth-tls".into(),
            "liqo-webhook-tls".into(),
            token_secret(ID),
            identity_secret("beta"),
            ca_data_secret("beta"),
            peering_kubeconfig_secret("11111111-2222-3333-4444-555555555555"),
        ];
        for theirs in kept {
            assert!(kept_secret(&theirs, ID).is_some(), "{theirs}");
        }
    }
}
