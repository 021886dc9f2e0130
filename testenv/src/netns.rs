//! Network namespaces for tests and benchmarks that send multicast: the current executable
//! re-runs itself under `unshare -n -m` in a namespace holding `lo` and a veth pair (v0
//! 10.77.0.1/24, v1 10.77.0.2/24; `accept_local`, so each end takes the other's IPv4 packets)
//! whose traffic never leaves it. Nothing here opens a socket in the machine's own namespace.

use std::process::{Command, Output};

/// Set in the re-run process.
pub const ENV: &str = "LIQO_IN_TEST_NETNS";

const SETUP: &str = "set -e; ip link set lo up; ip link add v0 type veth peer name v1; \
     ip addr add 10.77.0.1/24 dev v0; ip addr add 10.77.0.2/24 dev v1; \
     for i in v0 v1 all; do echo 1 > /proc/sys/net/ipv4/conf/$i/accept_local; echo 0 > /proc/sys/net/ipv4/conf/$i/rp_filter; done; \
     ip link set v0 up; ip link set v1 up; exec \"$@\"";

/// True in a process re-run by [`run`]; panics when told so but sharing the machine's network
/// namespace (no multicast may leave this machine).
pub fn inside() -> bool {
    if std::env::var_os(ENV).is_none() {
        return false;
    }
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    let (mine, init) = (ns("self"), ns("1"));
    assert!(mine.is_some() && mine != init, "refusing to send multicast from the machine's own network namespace");
    true
}

/// Why namespaces with a veth pair cannot be made here, if they cannot.
pub fn unavailable() -> Option<String> {
    match Command::new("unshare").args(["-n", "-m", "--", "ip", "link", "add", "t0", "type", "veth", "peer", "name", "t1"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("cannot make a network namespace with a veth pair here: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Some(format!("unshare/ip not available ({e})")),
    }
}

/// Runs this executable with `args` in a new namespace (see the module doc).
pub fn run(args: &[&str]) -> Result<Output, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new("unshare")
        .args(["-n", "-m", "--", "sh", "-c", SETUP, "sh"])
        .arg(exe)
        .args(args)
        .env(ENV, "1")
        .output()
        .map_err(|e| format!("unshare: {e}"))
}
