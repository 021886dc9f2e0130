//! `liqo-reconciler`: the controllers, discovery and the auth service ([`liqo_reconciler::command`]).

fn main() -> anyhow::Result<()> {
    liqo_reconciler::command::main(std::env::args_os())
}
