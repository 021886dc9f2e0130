//! The Liqo admission webhook: validates PeeringRequest/FederationRequest and ForeignCluster
//! changes and defaults ForeignClusters (protocol §6). [`command`] wires these modules.

pub mod admission;
pub mod command;
pub mod denial;
pub mod foreign_cluster;
pub mod metrics;
pub mod peering_request;
pub mod policy;
pub mod refusals;
pub mod review;
pub mod server;
pub mod state;
pub mod tls;
