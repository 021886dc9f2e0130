//! kubectl's connection conventions: `--kubeconfig` (else `KUBECONFIG`, else
//! `~/.kube/config`, else the in-cluster service account), `--context`, and `-n` for the
//! Liqo namespace. Every call is made with the user's own credentials.

use std::path::PathBuf;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{CliError, Result};

/// What `kubectl liqo` calls itself to the API server (`User-Agent`), and so the field manager of
/// its writes.
pub const USER_AGENT: &str = concat!("kubectl-liqo/", env!("CARGO_PKG_VERSION"));

/// How to reach the cluster.
#[derive(clap::Args, Clone, Debug)]
pub struct Connection {
    /// Path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, global = true, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The Liqo namespace.
    #[arg(short = 'n', long, global = true, default_value = "liqo")]
    pub namespace: String,
}

impl Connection {
    pub async fn client(&self) -> Result<Client> {
        let options = KubeConfigOptions { context: self.context.clone(), ..Default::default() };
        let config = match &self.kubeconfig {
            Some(path) => {
                // KUBECONFIG may list several files, as kubectl allows.
                let paths: Vec<PathBuf> = std::env::split_paths(path).collect();
                let mut merged = Kubeconfig::default();
                for p in &paths {
                    let one = Kubeconfig::read_from(p).map_err(|e| CliError::Connect(format!("reading {}: {e}", p.display())))?;
                    merged = merged.merge(one).map_err(|e| CliError::Connect(e.to_string()))?;
                }
                kube::Config::from_custom_kubeconfig(merged, &options).await.map_err(|e| CliError::Connect(e.to_string()))?
            }
            None if self.context.is_some() => {
                kube::Config::from_kubeconfig(&options).await.map_err(|e| CliError::Connect(e.to_string()))?
            }
            None => kube::Config::infer().await.map_err(|e| CliError::Connect(format!("no cluster to talk to: {e}")))?,
        };
        let mut config = config;
        // Who we are to the API server: its logs, its audit, and the field manager of our
        // writes (a ForeignCluster made or joined by `kubectl liqo` says so, not "unknown").
        config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT)));
        Client::try_from(config).map_err(|e| CliError::Connect(e.to_string()))
    }
}
