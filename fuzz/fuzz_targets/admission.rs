//! The webhook's whole admission path, body bytes → decode → decide → encode, both endpoints:
//! it never panics, and the one-pass decoding answers exactly as the step-by-step one wherever
//! it answers (differential).
#![no_main]

use libfuzzer_sys::fuzz_target;
use liqo_webhook::admission::{Endpoint, both_ways};
use liqo_webhook::state::StaticView;

fuzz_target!(|body: &[u8]| {
    let view = StaticView::new("liqo", "0558de48-097b-4b7d-ba04-6bd2a0f9d24f");
    for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
        let (fast, careful) = both_ways(endpoint, body, &view);
        if let Some(fast) = fast {
            assert_eq!(Ok(fast), careful, "the two decodings disagree");
        }
    }
});
