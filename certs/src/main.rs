//! `liqo-certs`: certificates for the webhook and the auth service ([`liqo_certs::command`]).

fn main() -> anyhow::Result<()> {
    liqo_certs::command::main(std::env::args_os())
}
