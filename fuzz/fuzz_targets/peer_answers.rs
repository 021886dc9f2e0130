//! Everything the reconciler reads from a peer: its `/ids` and `/identity` answers, the CA it
//! serves (`/ca`) or publishes (`kube-public/cluster-info`), the kubeconfig it hands us. No
//! panic, whatever a hostile peer sends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use liqo_reconciler::remote::auth::client::{Verify, ca_from_cluster_info};
use liqo_reconciler::remote::auth::wire::{IdentityResponse, Ids};
use liqo_reconciler::remote::peer::{RemoteAccess, pinned_kubeconfig};

fuzz_target!(|data: &[u8]| {
    if let Ok(ids) = serde_json::from_slice::<Ids>(data) {
        let _ = liqo_api::validate_cluster_id(&ids.cluster_id);
    }
    let _ = serde_json::from_slice::<IdentityResponse>(data);
    let _ = ca_from_cluster_info(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Verify::pinned(text);
        let access = RemoteAccess { kubeconfig: text.to_owned(), api_url: Some("https://10.0.0.2:6443".into()), ca_pem: None };
        let _ = pinned_kubeconfig(&access);
    }
});
