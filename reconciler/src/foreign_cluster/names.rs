//! The names the ForeignCluster controller's objects use: its field manager, the label of the
//! Secrets it keeps, and their keys.

/// Field manager of the objects this controller applies (its status:
/// [`super::report::STATUS_MANAGER`]).
pub const FIELD_MANAGER: &str = "liqo-peering";
/// Label on the Secrets this controller keeps (CA data, identities), which it watches.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "liqo-reconciler");
/// Key of the remote API server CA in `<fc>-ca-data`.
pub use liqo_api::names::CA_DATA_KEY as CA_KEY;
/// Key of a kubeconfig in the Secrets that hold one.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// Key of the token used with a peer's `/identity`, in Secret `remote-token-<clusterID>`.
pub const TOKEN_KEY: &str = "token";

pub use liqo_api::chosen::stands_in;
pub use liqo_api::names::{identity_secret, token_secret};
