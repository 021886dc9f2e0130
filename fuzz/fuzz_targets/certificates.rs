//! The certificate reload path: arbitrary bytes as the PEM certificate chain and key a Secret
//! volume may hold. No panic: a broken pair is refused and the current certificate stays.
#![no_main]

use libfuzzer_sys::fuzz_target;
use liqo_serve::{CertFiles, certified_key};

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|b| *b == 0).unwrap_or(data.len());
    let (cert, key) = (&data[..split], data.get(split + 1..).unwrap_or_default());
    let files = CertFiles { cert: "tls.crt".into(), key: "tls.key".into() };
    let _ = certified_key(cert, key, &files);
});
