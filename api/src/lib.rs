//! The Liqo discovery and peering API: custom resource types, the names shared
//! by every component (labels, finalizer, well-known objects) and the cluster-ID format.
//!
//! Nothing here does I/O (the slim stores take the events of watches others run). The CRD
//! manifests in `manifests/crds/` are generated from these types by
//! `cargo run -p liqo-api --bin crdgen` (see [`crds`]).

pub mod advertisement;
pub mod chosen;
pub mod cluster_config;
pub mod cluster_id;
pub mod crds;
pub mod foreign_cluster;
pub mod holder;
pub mod last_checks;
pub mod names;
pub mod peering_request;
pub mod quantity;
pub mod reasons;
pub mod search_domain;
pub mod secret_value;
pub mod slim_store;
pub mod summary;
pub mod terminal;
pub mod watch_backoff;

pub use advertisement::{Advertisement, AdvertisementSpec, AdvertisementState, AdvertisementStatus, ResourceSummary};
pub use cluster_config::{
    AuthConfig, ClusterConfig, ClusterConfigSpec, ClusterConfigStatus, DiscoveryConfig, MAX_REFUSED_REQUESTS, PeeringPolicy,
    RefusedRequest, merge_refusals,
};
pub use cluster_id::{ClusterIdError, validate_cluster_id};
pub use foreign_cluster::{
    AuthStatus, ClusterIdentity, DiscoveryType, ForeignCluster, ForeignClusterSpec, ForeignClusterStatus, HandedKubeconfig, IncomingStatus,
    OutgoingStatus, SecretRef, TenantNamespaces, TrustMode, normalize_fingerprint,
};
pub use peering_request::{FederationRequest, FederationRequestSpec, PeeringRequest, PeeringRequestSpec, PeeringRequestStatus};
pub use search_domain::{FoundCluster, SearchDomain, SearchDomainSpec, SearchDomainStatus};
