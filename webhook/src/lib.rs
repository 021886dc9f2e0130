pub mod denial;
pub mod foreign_cluster;
pub mod peering_request;
pub mod policy;
pub mod review;
