//! `liqo-reconciler`: the controllers, discovery and the auth service ([`liqo_reconciler::command`]).

/// mimalloc, as the image's binary has (what ships): it gives memory back after a burst (a
/// cold start, an outage's end) where glibc's arenas kept it (docs/scaling.md). Built without
/// it (`--no-default-features`) for heaptrack.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    liqo_serve::memory::no_huge_pages();
    liqo_reconciler::command::main(std::env::args_os())
}
