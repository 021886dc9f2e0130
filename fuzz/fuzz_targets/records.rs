//! What mDNS and DNS-SD records say (TXT strings, SRV host and port) and the URLs built from
//! them: anything a LAN or a DNS zone can send. No panic; a URL accepted is normalised for good.
#![no_main]

use libfuzzer_sys::fuzz_target;
use liqo_reconciler::discovery::records::{from_dns, from_mdns, https_url, txt_pairs};

fuzz_target!(|data: &[u8]| {
    // TXT strings separated by NUL; the first two bytes a port.
    let port = u16::from_le_bytes([data.first().copied().unwrap_or(0), data.get(1).copied().unwrap_or(0)]);
    let rest = data.get(2..).unwrap_or_default();
    let strings: Vec<&[u8]> = rest.split(|b| *b == 0).collect();
    let pairs = txt_pairs(&strings);
    for value in pairs.values() {
        if let Some(url) = https_url(value) {
            assert_eq!(https_url(&url).as_deref(), Some(url.as_str()), "normalised once for good");
        }
    }
    let addresses = [std::net::IpAddr::from([10, 0, 0, 1]), std::net::IpAddr::from([0xfe80, 0, 0, 0, 0, 0, 0, 1])];
    let _ = from_mdns(&strings, &addresses, port);
    let host = String::from_utf8_lossy(strings.first().copied().unwrap_or_default());
    let _ = from_dns(&host, port, &strings[1.min(strings.len())..]);
});
