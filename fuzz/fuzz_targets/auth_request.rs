//! What the auth service reads from anyone on the network: the body of `POST /identity` and the
//! token it carries. No panic; a refusal never depends on how far a wrong token matches.
#![no_main]

use libfuzzer_sys::fuzz_target;
use liqo_reconciler::remote::auth::service::check_token;
use liqo_reconciler::remote::auth::wire::IdentityRequest;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = serde_json::from_slice::<IdentityRequest>(data) {
        let _ = liqo_api::validate_cluster_id(&req.cluster_id);
        let _ = check_token(&req.token, Some("a-stored-token-of-32-characters!"), false);
        let _ = check_token(&req.token, None, true);
        assert!(check_token(&req.token, Some(&req.token), false).is_ok() || req.token.is_empty());
    }
});
