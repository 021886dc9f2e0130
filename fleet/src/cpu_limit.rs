//! CPU limits of the run's two sides (`--hub-cpus`, `--peers-cpus`): the hub's processes (etcd,
//! the API server, the webhook, the reconciler) in one control group, the fleet's own process
//! (the simulated peers and their broadcasters) in another, each with a quota of CPU time, so
//! that neither starves the other and a row's margin can be proven on a hub given less.
//!
//! cgroup v2 (`cpu.max` in a group under `/sys/fs/cgroup`) where the `cpu` controller is there,
//! else cgroup v1's `cpu` hierarchy (`cpu.cfs_quota_us` under `/sys/fs/cgroup/cpu`). The
//! groups are made at start and removed at the end; a machine where they cannot be written is
//! a clear error, not a run without the limits asked for.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The scheduling period the quotas are of (100 ms, the kernel's default).
const PERIOD_US: u64 = 100_000;

/// Which cgroup interface the groups are made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V2,
    V1,
}

/// One group: where it is and its quota (`None`: no limit).
#[derive(Debug)]
struct Group {
    dir: PathBuf,
    cpus: Option<f64>,
}

/// The run's two groups, removed on drop.
#[derive(Debug)]
pub struct CpuLimits {
    version: Version,
    root: PathBuf,
    parent: PathBuf,
    hub: Group,
    peers: Group,
}

/// The quota line for `cpus` cores, as cgroup v2's `cpu.max` takes it (pure).
pub fn cpu_max(cpus: f64) -> String {
    format!("{} {PERIOD_US}", quota_us(cpus))
}

/// Microseconds of CPU per [`PERIOD_US`] for `cpus` cores (pure; at least 1 ms).
pub fn quota_us(cpus: f64) -> u64 {
    ((cpus * PERIOD_US as f64).round() as u64).max(1_000)
}

/// A limit given on the command line: a positive number of cores.
pub fn parse_cpus(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if c.is_finite() && c > 0.0 && c <= 1024.0 => Ok(c),
        _ => Err(format!("{s:?}: a number of CPUs above 0, such as 1.5")),
    }
}

impl CpuLimits {
    /// Makes the groups (`liqo-fleet-<pid>/hub` and `/peers`) with their quotas. Nothing is
    /// moved yet: [`CpuLimits::enter_hub`] before the hub's processes start (they inherit it),
    /// [`CpuLimits::enter_peers`] after.
    pub fn new(hub: Option<f64>, peers: Option<f64>) -> anyhow::Result<Self> {
        let (version, root) = detect().context("CPU limits (--hub-cpus, --peers-cpus) need a writable cgroup cpu controller")?;
        let parent = root.join(format!("liqo-fleet-{}", std::process::id()));
        let mut limits = Self {
            version,
            parent: parent.clone(),
            hub: Group { dir: parent.join("hub"), cpus: hub },
            peers: Group { dir: parent.join("peers"), cpus: peers },
            root,
        };
        std::fs::create_dir(&parent).with_context(|| format!("making {}", parent.display()))?;
        if version == Version::V2 {
            write(&limits.root.join("cgroup.subtree_control"), "+cpu").ok();
            write(&parent.join("cgroup.subtree_control"), "+cpu")?;
        }
        for group in [&limits.hub, &limits.peers] {
            std::fs::create_dir(&group.dir).with_context(|| format!("making {}", group.dir.display()))?;
            if let Some(cpus) = group.cpus {
                limits.set_quota(&group.dir, cpus)?;
            }
        }
        limits.version = version;
        Ok(limits)
    }

    fn set_quota(&self, dir: &Path, cpus: f64) -> anyhow::Result<()> {
        match self.version {
            Version::V2 => write(&dir.join("cpu.max"), &cpu_max(cpus)),
            Version::V1 => {
                write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                write(&dir.join("cpu.cfs_quota_us"), &quota_us(cpus).to_string())
            }
        }
    }

    /// This process into the hub's group: the processes it starts next are the hub's.
    pub fn enter_hub(&self) -> anyhow::Result<()> {
        self.hub(std::process::id())
    }

    /// This process (the peers) into the peers' group.
    pub fn enter_peers(&self) -> anyhow::Result<()> {
        move_to(&self.peers.dir, std::process::id())
    }

    /// Process `pid` (a hub process started later, a reconciler restarted) into the hub's group.
    pub fn hub(&self, pid: u32) -> anyhow::Result<()> {
        move_to(&self.hub.dir, pid)
    }

    /// Seconds the hub's group and the peers' group were held back by their quotas so far
    /// (`throttled_usec` of v2's `cpu.stat`, `throttled_time` of v1's).
    pub fn throttled_seconds(&self) -> (f64, f64) {
        (throttled(&self.hub.dir), throttled(&self.peers.dir))
    }

    /// What the limits are, for the run's first line.
    pub fn describe(&self) -> String {
        let of = |g: &Group| g.cpus.map_or("no limit".to_owned(), |c| format!("{c} CPUs"));
        format!("hub {}, peers {} (cgroup {:?}, {})", of(&self.hub), of(&self.peers), self.version, self.parent.display())
    }
}

impl Drop for CpuLimits {
    fn drop(&mut self) {
        // Every process still in a group back to the root first: this one, and those a run
        // that stopped early has not killed yet (the hub's, the broadcasters' child), which
        // would keep their group from going ("Device or resource busy").
        for group in [&self.hub.dir, &self.peers.dir] {
            for pid in procs(group) {
                let _ = move_to(&self.root, pid);
            }
        }
        for dir in [&self.hub.dir, &self.peers.dir, &self.parent] {
            if let Err(e) = remove_group(dir) {
                eprintln!("liqo-fleet: the control group {} stays: {e}", dir.display());
            }
        }
    }
}

/// The processes in the group at `dir`.
fn procs(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Removes the (empty) group at `dir`. A process that just left it may still be counted in it
/// for a moment: tried again for up to a second while it says busy.
fn remove_group(dir: &Path) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// The cgroup interface with a `cpu` controller this process may write: v2 at
/// `/sys/fs/cgroup`, else v1's `cpu` hierarchy.
fn detect() -> anyhow::Result<(Version, PathBuf)> {
    let v2 = Path::new("/sys/fs/cgroup");
    let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "cpu") {
        return Ok((Version::V2, v2.to_owned()));
    }
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    if v1.join("cpu.cfs_quota_us").exists() {
        return Ok((Version::V1, v1.to_owned()));
    }
    bail!(
        "neither cgroup v2 with the cpu controller (/sys/fs/cgroup/cgroup.controllers) nor v1's cpu hierarchy (/sys/fs/cgroup/cpu) is here"
    )
}

/// Seconds a group was throttled, from its `cpu.stat` (pure but for the read).
fn throttled(dir: &Path) -> f64 {
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).unwrap_or_default();
    throttled_in(&stat)
}

/// Seconds throttled as `cpu.stat` tells them: v2 in microseconds, v1 in nanoseconds (pure).
pub fn throttled_in(stat: &str) -> f64 {
    let value = |key: &str| stat.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse::<f64>().ok());
    value("throttled_usec ").map(|us| us / 1e6).or_else(|| value("throttled_time ").map(|ns| ns / 1e9)).unwrap_or(0.0)
}

fn move_to(dir: &Path, pid: u32) -> anyhow::Result<()> {
    write(&dir.join("cgroup.procs"), &pid.to_string())
}

fn write(path: &Path, value: &str) -> anyhow::Result<()> {
    std::fs::write(path, value).with_context(|| format!("writing {value:?} to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_is_cpu_time_per_100_ms_period() {
        assert_eq!(cpu_max(1.0), "100000 100000");
        assert_eq!(cpu_max(1.6), "160000 100000");
        assert_eq!(quota_us(0.0001), 1_000, "at least a millisecond");
        assert_eq!(parse_cpus("1.5"), Ok(1.5));
        assert_eq!(throttled_in("nr_periods 10\nnr_throttled 2\nthrottled_usec 1500000\n"), 1.5);
        assert_eq!(throttled_in("nr_periods 10\nnr_throttled 2\nthrottled_time 250000000\n"), 0.25);
        assert_eq!(throttled_in(""), 0.0);
        for bad in ["0", "-1", "x", "NaN", "inf"] {
            assert!(parse_cpus(bad).is_err(), "{bad}");
        }
    }

    /// Where this machine lets us write control groups (as root), a group is made with its
    /// quota, takes a process, counts its CPU, and is gone after.
    #[test]
    fn groups_are_made_limited_and_removed() {
        let limits = match CpuLimits::new(Some(0.5), None) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("SKIPPED: control groups cannot be written here: {e:#}");
                return;
            }
        };
        let quota = match limits.version {
            Version::V2 => std::fs::read_to_string(limits.hub.dir.join("cpu.max")).unwrap(),
            Version::V1 => std::fs::read_to_string(limits.hub.dir.join("cpu.cfs_quota_us")).unwrap(),
        };
        assert!(quota.starts_with("50000"), "{quota}");
        // A child that spins until it is seen held back (or 20 s pass): on a loaded machine a
        // fixed amount of work could finish without ever using half a CPU in one period.
        let mut child = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        limits.hub(child.id()).unwrap();
        let procs = std::fs::read_to_string(limits.hub.dir.join("cgroup.procs")).unwrap();
        assert!(procs.lines().any(|p| p == child.id().to_string()), "{procs}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while limits.throttled_seconds().0 <= 0.0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let held_back = limits.throttled_seconds().0;
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(held_back > 0.0, "a busy child at half a CPU was never held back in 20 s");
        // A run that stops early drops its limits before it kills the hub: a process still in
        // a group does not keep the group from going, and lives on outside it.
        let mut left = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        limits.hub(left.id()).unwrap();
        let parent = limits.parent.clone();
        drop(limits);
        let alive = left.try_wait().unwrap().is_none();
        left.kill().unwrap();
        left.wait().unwrap();
        assert!(!parent.exists(), "removed, though a process was still in the hub's group");
        assert!(alive, "the process left in it was moved out, not killed");
    }
}
