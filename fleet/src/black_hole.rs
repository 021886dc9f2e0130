//! Peers whose API servers drop packets: no answer, no refusal, as a cluster behind a firewall
//! that drops, or a route to nowhere. Only in the fleet's own network namespace (`just
//! fleet`), where the peers are 127.1.x.y on one port: `iptables` drops every packet to them on
//! that port (new connections' SYNs, and what is sent on connections already open, as a hub
//! keeps them from one health check to the next), in rules that cover the peers' addresses by a
//! few CIDR blocks. The peers' broadcasters still reach the hub (an outage one way).

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{Context, bail};

/// Dropping rules in force until [`BlackHole::lift`] (or drop).
pub struct BlackHole {
    rules: Vec<Vec<String>>,
}

impl BlackHole {
    /// Drops TCP packets to `port` of the addresses from `first` to `last` (inclusive).
    pub fn drop_to(first: Ipv4Addr, last: Ipv4Addr, port: u16) -> anyhow::Result<Self> {
        let mut hole = Self { rules: Vec::new() };
        for (base, prefix) in cidrs(u32::from(first), u32::from(last)) {
            let rule: Vec<String> =
                ["INPUT", "-p", "tcp", "-d", &format!("{}/{prefix}", Ipv4Addr::from(base)), "--dport", &port.to_string()]
                    .into_iter()
                    .map(str::to_owned)
                    .chain(["-j", "DROP"].map(str::to_owned))
                    .collect();
            iptables("-I", &rule)?;
            hole.rules.push(rule);
        }
        Ok(hole)
    }

    /// Takes the rules out: the peers answer again.
    pub fn lift(mut self) -> anyhow::Result<()> {
        self.remove()
    }

    fn remove(&mut self) -> anyhow::Result<()> {
        for rule in std::mem::take(&mut self.rules) {
            iptables("-D", &rule)?;
        }
        Ok(())
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("liqo-fleet: the black hole's rules stay: {e:#}");
        }
    }
}

fn iptables(action: &str, rule: &[String]) -> anyhow::Result<()> {
    let out = Command::new("iptables").arg("-w").arg(action).args(rule).output().context("running iptables (apt install iptables)")?;
    if !out.status.success() {
        bail!("iptables {action} {}: {}", rule.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// The fewest CIDR blocks (base, prefix length) that cover `first..=last` exactly (pure).
pub fn cidrs(first: u32, last: u32) -> Vec<(u32, u8)> {
    let mut blocks = Vec::new();
    let mut at = u64::from(first);
    let end = u64::from(last) + 1;
    while at < end {
        // The largest block aligned at `at` that fits before `end`.
        let mut size: u64 = if at == 0 { 1 << 32 } else { 1 << at.trailing_zeros().min(32) };
        while at + size > end {
            size >>= 1;
        }
        blocks.push((at as u32, (32 - size.trailing_zeros()) as u8));
        at += size;
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(blocks: &[(u32, u8)]) -> Vec<u32> {
        blocks.iter().flat_map(|&(base, prefix)| base..=base + u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0)).collect()
    }

    #[test]
    fn the_blocks_cover_the_range_exactly_and_are_few() {
        let base = u32::from(Ipv4Addr::new(127, 1, 0, 0));
        for (first, last) in [(1, 10_000), (1, 1), (256, 511), (1, 1000), (7, 9)] {
            let blocks = cidrs(base + first, base + last);
            assert_eq!(covered(&blocks), (base + first..=base + last).collect::<Vec<_>>(), "{first}..={last}");
            assert!(blocks.len() <= 2 * 16, "{} blocks", blocks.len());
        }
        assert_eq!(cidrs(base + 256, base + 511), vec![(base + 256, 24)]);
    }
}
