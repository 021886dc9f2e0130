//! What a server process does about its own memory before it starts.

/// Transparent huge pages off for this process. mimalloc asks for them on its arenas (its
/// `allow_thp`), and a 2 MiB page is resident whole however little of it is used: with them
/// the reconciler held 52 MiB at 1,000 joined peers, without them 35 (docs/scaling.md). A
/// controller's footprint is worth more than its TLB hits. Call it first thing in `main`: pages
/// already huge stay so (which is why mimalloc is also built with its `no_thp` feature: it then
/// never asks for them, before `main` included).
#[cfg(target_os = "linux")]
pub fn no_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes integers and touches no memory of ours.
    let refused = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0;
    if refused {
        eprintln!("transparent huge pages could not be turned off for this process: {}", std::io::Error::last_os_error());
    }
}

#[cfg(not(target_os = "linux"))]
pub fn no_huge_pages() {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn huge_pages_are_off_for_the_process_once_asked() {
        super::no_huge_pages();
        // SAFETY: PR_GET_THP_DISABLE takes integers only.
        let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(disabled, 1);
        // Kernels since 5.0 say so in the process's status too.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert!(line.ends_with('0'), "{line}");
        }
    }
}
