//! One logging setup for both binaries: to stderr (stdout is for what a command prints), the
//! level from `RUST_LOG` (default `info`), as text or JSON lines, repeated lines rate-limited
//! per cause.

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// How long a cause's repeated lines are counted before one summary tells them
/// (see [`crate::quiet`]).
pub const QUIET_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Installs the global subscriber, its lines rate-limited per cause ([`crate::quiet`]).
pub fn init(format: LogFormat) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let env = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let quiet = crate::quiet::Quiet::new(QUIET_INTERVAL);
    quiet.spawn_summaries();
    let filter = env.and(quiet);
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Json => tracing_subscriber::registry().with(layer.json().with_filter(filter)).init(),
        LogFormat::Text => tracing_subscriber::registry().with(layer.with_filter(filter)).init(),
    }
}
