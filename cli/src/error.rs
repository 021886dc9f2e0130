//! The plugin's one error type: what failed, in words a user acts on, and its exit code
//! (1 failure, 2 usage; clap's own usage errors exit 2 too).

use std::fmt;

/// A failed command.
#[derive(Debug)]
pub enum CliError {
    /// The command line asks for something impossible.
    Usage(String),
    /// The API server (or our webhook, through it) refused or failed: its own message.
    Api { doing: String, status: Option<u16>, message: String },
    /// The object named does not exist.
    NotFound { what: String, hint: &'static str },
    /// The command ran, and what it checks is not so (a peer not joined, a wait timed out).
    Failed(String),
    /// No cluster to talk to.
    Connect(String),
    /// A failure already told on stderr (exit 1, nothing more to say).
    Reported,
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            _ => 1,
        }
    }

    /// `doing` failed with `e`, the API server's message kept as it is.
    pub fn api(doing: impl Into<String>, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => Self::Api { doing: doing.into(), status: Some(s.code), message: s.message },
            other => Self::Api { doing: doing.into(), status: None, message: other.to_string() },
        }
    }

    fn hint(&self) -> &'static str {
        match self {
            Self::Api { status: Some(401), .. } => "your credentials are not accepted: check --kubeconfig and --context",
            Self::Api { status: Some(403), .. } => "refused by RBAC or by Liqo's webhook (the message says which)",
            Self::Api { status: Some(404), .. } => "is Liqo installed? kubectl apply -k manifests/",
            Self::Api { status: None, .. } | Self::Connect(_) => "is the API server reachable? check --kubeconfig and --context",
            Self::NotFound { hint, .. } => hint,
            _ => "",
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(m) | Self::Failed(m) | Self::Connect(m) => write!(f, "{m}")?,
            Self::Api { doing, message, .. } => write!(f, "{doing}: {}", liqo_api::terminal::printable(message))?,
            Self::NotFound { what, .. } => write!(f, "{what} not found")?,
            Self::Reported => {}
        }
        match self.hint() {
            "" => Ok(()),
            hint => write!(f, "\n  hint: {hint}"),
        }
    }
}

impl std::error::Error for CliError {}

pub type Result<T, E = CliError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_the_api_servers_words_and_say_what_to_do() {
        let denied = kube::Error::Api(Box::new(
            kube::core::Status::failure("admission webhook \"x\" denied the request: clusterID: not a DNS-1123 label", "Forbidden")
                .with_code(403),
        ));
        let e = CliError::api("creating ForeignCluster x", denied);
        let text = e.to_string();
        assert!(text.starts_with("creating ForeignCluster x: admission webhook"), "{text}");
        assert!(text.contains("hint: refused by RBAC or by Liqo's webhook"), "{text}");
        assert_eq!(e.exit_code(), 1);
        assert_eq!(CliError::Usage("x".into()).exit_code(), 2);
    }
}
