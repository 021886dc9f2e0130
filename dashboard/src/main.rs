//! `liqo-dashboard`: the dashboard's in-cluster form ([`liqo_dashboard::command`]).

fn main() -> anyhow::Result<()> {
    liqo_serve::memory::no_huge_pages();
    liqo_dashboard::command::main(std::env::args_os())
}
