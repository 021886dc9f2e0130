//! Peers black-holed right after a whole fleet came back are told within three health periods,
//! and the reconciler never idles while their checks go stale.
//!
//! What it reproduces at 200 peers: after the 100 % return, the reconciles that connected
//! first waited for their turns longer than a connection stays fresh; each then connected
//! again inside its turn, to a peer that by then dropped every SYN, and waited out the client's
//! 10 s connect timeout, then as long again to read the CA the peer presents. A handful of
//! turns so held told the black hole a few peers a second (at 10,000 peers, 229 in three
//! periods). Here one turn (`--max-concurrent-reconciles=1`) and peers that take 80 ms to
//! answer each request once back from the outage make the checks fall behind for good (200 ×
//! 80 ms and more, where a period is 10 s), so that connections made first wait for their turns
//! longer than they stay fresh when the black hole opens, as 64 turns on a saturated hub did
//! at 10,000. The return's
//! own row is not held to its deadline here (its checks are behind by design).
//!
//! The whole fleet binary runs, in a network namespace of its own (the black hole is
//! `iptables` there): it needs root, `unshare`, `iptables` and `KUBEBUILDER_ASSETS`, and skips
//! loudly without them. `LIQO_FLEET_TEST_BIN` runs it against other builds of the hub's
//! binaries (a folder with liqo-webhook, liqo-reconciler, liqo-dashboard).

mod common;

use std::process::Command;

#[test]
fn peers_black_holed_right_after_a_return_are_told_within_three_periods() {
    if let Err(why) = liqo_testenv::assets() {
        return liqo_testenv::skip(&why);
    }
    if !Command::new("iptables").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return liqo_testenv::skip("iptables is not installed (apt install iptables)");
    }
    if !Command::new("unshare").args(["-n", "true"]).status().is_ok_and(|s| s.success()) {
        return liqo_testenv::skip("cannot make a network namespace (unshare -n needs root)");
    }
    let bin = match std::env::var_os("LIQO_FLEET_TEST_BIN") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => common::binaries().expect("the hub's binaries"),
    };
    let json = std::env::temp_dir().join(format!("liqo-fleet-black-hole-{}.json", std::process::id()));
    let fleet = env!("CARGO_BIN_EXE_liqo-fleet");
    let command = format!(
        "ip link set lo up && exec {fleet} --peers 200 --scenarios abeh --outage-wholly --health-period-seconds 10 \
         --advertise-period-seconds 10 --answer-delay-after-outage-ms 80 --reconciler-flag=--max-concurrent-reconciles=1 --bin {} --json {}",
        bin.display(),
        json.display()
    );
    let out = Command::new("unshare").args(["-n", "sh", "-c", &command]).output().expect("running liqo-fleet");
    let log = String::from_utf8_lossy(&out.stderr);
    let rows: Vec<serde_json::Value> =
        std::fs::read_to_string(&json).unwrap_or_default().lines().map(|l| serde_json::from_str(l).expect("a row")).collect();
    let _ = std::fs::remove_file(&json);
    let row = |prefix: &str| rows.iter().find(|r| r["scenario"].as_str().is_some_and(|s| s.starts_with(prefix))).cloned();
    let back = row("e. 100 % back").unwrap_or_else(|| panic!("no row of the return: {log}"));
    let hole = row("h. 100 % black-holed").unwrap_or_else(|| panic!("no row of the black hole: {log}"));
    eprintln!("the black hole: {hole}");
    assert_eq!(back["affected"], 200, "{back}");
    assert_eq!(hole["ok"], true, "every black-holed peer told within 3 periods: {hole}\n{log}");
    // One status write a peer: a peer told in other words on its next check is written again,
    // and with one turn those writes held back the peers not yet told (1.8 a peer did).
    let writes_per_peer = hole["status_writes"].as_f64().unwrap_or(f64::MAX) / 200.0;
    assert!(writes_per_peer < 1.5, "each black-holed peer's status written once, not once a check: {hole}");
    assert!(hole["turns_waiting_max"].as_f64().is_some_and(|w| w > 0.0), "the checks were behind when the hole opened: {hole}");
    for r in &rows {
        assert_eq!(r["stale_while_idle"], 0, "the reconciler never idles while a check is stale: {r}");
    }
    let back_again = row("h. 100 % back").unwrap_or_else(|| panic!("no row of the return from the black hole: {log}"));
    assert!(back_again["converged_seconds"].as_f64().is_some(), "all answering again in the end: {back_again}");
}
