//! `liqo-webhook`: the admission webhook binary ([`liqo_webhook::command`]).

/// mimalloc: admission decoding allocates on every worker thread; glibc malloc contends there.
/// Measured in BENCHMARKS.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    liqo_serve::memory::no_huge_pages();
    liqo_webhook::command::main(std::env::args_os())
}
