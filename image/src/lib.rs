//! The image's one binary, `liqo`: the four commands of the image in one file, chosen by the
//! name it is called by (`/liqo-webhook` is a link to `/liqo`) or by its first argument
//! (`liqo webhook --help`). One binary instead of four: the code they share (the Kubernetes
//! client, TLS, the async runtime) is in the image once.

use std::ffi::{OsStr, OsString};
use std::path::Path;

/// A command of the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Webhook,
    Reconciler,
    Certs,
    Dashboard,
}

impl Command {
    pub const ALL: [Command; 4] = [Command::Webhook, Command::Reconciler, Command::Certs, Command::Dashboard];

    /// The name the command has as a file of its own (the manifests' `command:`).
    pub fn program(self) -> &'static str {
        match self {
            Command::Webhook => "liqo-webhook",
            Command::Reconciler => "liqo-reconciler",
            Command::Certs => "liqo-certs",
            Command::Dashboard => "liqo-dashboard",
        }
    }

    /// The name it has as the first argument of `liqo`.
    pub fn word(self) -> &'static str {
        self.program().trim_start_matches("liqo-")
    }

    fn called(name: &OsStr, by: impl Fn(Command) -> &'static str) -> Option<Command> {
        Command::ALL.into_iter().find(|c| name == by(*c))
    }

    /// Runs the command with `args` (the first is its program name).
    pub fn run(self, args: Vec<OsString>) -> anyhow::Result<()> {
        match self {
            Command::Webhook => liqo_webhook::command::main(args),
            Command::Reconciler => liqo_reconciler::command::main(args),
            Command::Certs => liqo_certs::command::main(args),
            Command::Dashboard => liqo_dashboard::command::main(args),
        }
    }
}

/// What `liqo` was asked to run: a command with its arguments (program name first, as the
/// command's own binary would see them), or nothing it knows.
pub fn dispatch(mut args: Vec<OsString>) -> Result<(Command, Vec<OsString>), String> {
    let called = args.first().map(|a| Path::new(a).file_name().unwrap_or(a.as_os_str()).to_owned()).unwrap_or_default();
    if let Some(command) = Command::called(&called, Command::program) {
        return Ok((command, args));
    }
    let Some(command) = args.get(1).and_then(|word| Command::called(word, Command::word)) else {
        return Err(usage());
    };
    args.remove(0);
    args[0] = command.program().into();
    Ok((command, args))
}

/// What `liqo` says when called by another name without a known command.
pub fn usage() -> String {
    let words: Vec<&str> = Command::ALL.iter().map(|c| c.word()).collect();
    format!(
        "liqo {}: one binary for the image's commands\nusage: liqo <{}> [ARGS...], or call it as {}",
        env!("CARGO_PKG_VERSION"),
        words.join("|"),
        Command::ALL.iter().map(|c| c.program()).collect::<Vec<_>>().join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_name_it_is_called_by_chooses_the_command_and_keeps_every_argument() {
        let (c, rest) = dispatch(args(&["/liqo-webhook", "--standalone", "webhook"])).unwrap();
        assert_eq!(c, Command::Webhook);
        assert_eq!(rest, args(&["/liqo-webhook", "--standalone", "webhook"]));
        let (c, _) = dispatch(args(&["liqo-certs", "sync"])).unwrap();
        assert_eq!(c, Command::Certs);
    }

    #[test]
    fn the_first_argument_chooses_the_command_when_called_as_liqo() {
        let (c, rest) = dispatch(args(&["/liqo", "reconciler", "--version"])).unwrap();
        assert_eq!(c, Command::Reconciler);
        assert_eq!(rest, args(&["liqo-reconciler", "--version"]), "the command sees its own name");
        let (c, rest) = dispatch(args(&["./target/release/liqo", "dashboard"])).unwrap();
        assert_eq!((c, rest), (Command::Dashboard, args(&["liqo-dashboard"])));
    }

    #[test]
    fn anything_else_is_a_usage_error_naming_every_command() {
        for a in [args(&["/liqo"]), args(&["/liqo", "--help"]), args(&["/liqo", "liqo-webhook"]), args(&[]), args(&["/bin/sh", "-c"])] {
            let e = dispatch(a.clone()).unwrap_err();
            assert!(e.contains("webhook|reconciler|certs|dashboard") && e.contains("liqo-reconciler"), "{a:?}: {e}");
        }
    }
}
