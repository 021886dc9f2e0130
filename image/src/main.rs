//! `liqo`: the image's one binary ([`liqo_image`]).

/// mimalloc, as `liqo-webhook` has on its own: admission decoding allocates on every worker
/// thread (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    liqo_serve::memory::no_huge_pages();
    match liqo_image::dispatch(std::env::args_os().collect()) {
        Ok((command, args)) => match command.run(args) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("Error: {e:?}");
                std::process::ExitCode::FAILURE
            }
        },
        Err(usage) => {
            eprintln!("{usage}");
            std::process::ExitCode::from(2)
        }
    }
}
