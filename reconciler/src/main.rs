//! liqo-reconciler: the controllers of the discovery and peering protocol (cluster ID,
//! ClusterConfig, discovery, ForeignCluster lifecycle, incoming PeeringRequests, auth service).
//! Not built yet: this binary only says so.

fn main() {
    eprintln!("liqo-reconciler: the reconciler is not built yet; only liqo-webhook and liqo-certs run today");
    std::process::exit(2);
}
