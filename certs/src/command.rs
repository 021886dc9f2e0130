//! The `liqo-certs` command (the binary, and the image's multi-call `liqo`, call [`main`]):
//! makes and renews the certificates of the webhook and the auth service, and
//! injects the CA into webhook configurations.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::files::{Lifetimes, Paths, ensure};
use crate::{Pair, inject_ca_bundle, service_dns_names, tls_secret_yaml};
use anyhow::Context;
use clap::{Parser, Subcommand};
use time::{Duration, OffsetDateTime};

#[derive(Parser)]
#[command(name = "liqo-certs", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create or renew a CA and a serving certificate in DIR (ca.crt, ca.key, tls.crt, tls.key).
    /// Existing files are kept while they are valid, cover the SANs and are not about to expire.
    Issue {
        #[arg(long)]
        dir: PathBuf,
        /// Service whose in-cluster DNS names go into the SANs.
        #[arg(long, default_value = "liqo-webhook")]
        service: String,
        /// Namespace of that Service.
        #[arg(long, env = "POD_NAMESPACE", default_value = "liqo")]
        namespace: String,
        /// Extra SANs: DNS names or IP addresses (repeatable).
        #[arg(long = "host")]
        hosts: Vec<String>,
        /// Days a serving certificate is valid.
        #[arg(long, default_value_t = 365)]
        days: i64,
        /// Renew the serving certificate when it expires within this many days.
        #[arg(long, default_value_t = 30)]
        renew_before_days: i64,
    },
    /// Print a kubernetes.io/tls Secret holding the certificate of DIR.
    Secret {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value = "liqo-webhook-tls")]
        name: String,
        #[arg(long, env = "POD_NAMESPACE", default_value = "liqo")]
        namespace: String,
    },
    /// Print MANIFEST with the CA of CA_FILE as caBundle of every webhook; with --url, the
    /// Service clientConfig becomes `url: <URL><path>` (a webhook running outside the cluster).
    Inject {
        #[arg(long)]
        ca: PathBuf,
        #[arg(long)]
        url: Option<String>,
        manifest: PathBuf,
    },
    /// In a cluster (or via KUBECONFIG): keep the CA Secret and the serving-certificate
    /// Secrets of the webhook and the auth service valid, and the CA injected as caBundle into
    /// the webhook configurations. Writes only what changed; Secrets without the
    /// app.kubernetes.io/managed-by=liqo-certs label are the user's and are never written.
    Sync(SyncArgs),
}

#[derive(clap::Args)]
struct SyncArgs {
    #[arg(long, env = "POD_NAMESPACE", default_value = "liqo")]
    namespace: String,
    /// Secret holding the CA.
    #[arg(long, default_value = "liqo-ca")]
    ca_secret: String,
    /// Secret of the webhook's serving certificate ("" for none).
    #[arg(long, default_value = "liqo-webhook-tls")]
    webhook_secret: String,
    /// Service of the webhook (its in-cluster DNS names go into the certificate).
    #[arg(long, default_value = "liqo-webhook")]
    webhook_service: String,
    /// Secret of the auth service's serving certificate ("" for none).
    #[arg(long, default_value = "liqo-auth-tls")]
    auth_secret: String,
    /// Service of the auth service.
    #[arg(long, default_value = "liqo-auth")]
    auth_service: String,
    /// Extra names or addresses for the auth certificate: how peers reach it (repeatable).
    #[arg(long = "auth-host", env = "LIQO_AUTH_HOSTS", value_delimiter = ',')]
    auth_hosts: Vec<String>,
    /// Add every node's InternalIP/ExternalIP to the auth certificate (a NodePort Service).
    #[arg(long, env = "LIQO_AUTH_NODE_ADDRESSES")]
    auth_node_addresses: bool,
    /// Secret of the in-cluster dashboard's serving certificate ("" for none, the default: the
    /// dashboard is optional, manifests/dashboard/ runs its own sync).
    #[arg(long, default_value = "")]
    dashboard_secret: String,
    /// Service of the dashboard.
    #[arg(long, default_value = "liqo-dashboard")]
    dashboard_service: String,
    /// Extra names or addresses for the dashboard certificate, e.g. an Ingress host (repeatable).
    #[arg(long = "dashboard-host", env = "LIQO_DASHBOARD_HOSTS", value_delimiter = ',')]
    dashboard_hosts: Vec<String>,
    /// ValidatingWebhookConfigurations that get the CA as caBundle (repeatable).
    #[arg(long = "validating", default_value = "validate.discovery.liqo.io")]
    validating: Vec<String>,
    /// MutatingWebhookConfigurations that get the CA as caBundle (repeatable).
    #[arg(long = "mutating", default_value = "mutate.discovery.liqo.io")]
    mutating: Vec<String>,
    /// Days a serving certificate is valid.
    #[arg(long, default_value_t = 365)]
    days: i64,
    /// Renew certificates expiring within this many days.
    #[arg(long, default_value_t = 30)]
    renew_before_days: i64,
}

async fn sync(a: SyncArgs) -> anyhow::Result<()> {
    use crate::cluster::{Sync, Target, node_addresses, sync};
    let client = kube::Client::try_default().await.context("finding the API server (in-cluster or KUBECONFIG)")?;
    let mut auth_sans = service_dns_names(&a.auth_service, &a.namespace);
    auth_sans.extend(a.auth_hosts.iter().filter(|h| !h.is_empty()).cloned());
    if a.auth_node_addresses {
        auth_sans.extend(node_addresses(&client).await.context("listing the nodes' addresses")?);
    }
    let mut dashboard_sans = service_dns_names(&a.dashboard_service, &a.namespace);
    // `kubectl port-forward` reaches it as localhost.
    dashboard_sans.extend(["localhost".to_owned(), "127.0.0.1".to_owned()]);
    dashboard_sans.extend(a.dashboard_hosts.iter().filter(|h| !h.is_empty()).cloned());
    let plan = Sync {
        namespace: a.namespace.clone(),
        ca_secret: a.ca_secret,
        webhook: (!a.webhook_secret.is_empty())
            .then(|| Target { secret: a.webhook_secret, sans: service_dns_names(&a.webhook_service, &a.namespace) }),
        others: [(a.auth_secret, auth_sans), (a.dashboard_secret, dashboard_sans)]
            .into_iter()
            .filter(|(secret, _)| !secret.is_empty())
            .map(|(secret, sans)| Target { secret, sans })
            .collect(),
        validating: a.validating.into_iter().filter(|n| !n.is_empty()).collect(),
        mutating: a.mutating.into_iter().filter(|n| !n.is_empty()).collect(),
        life: Lifetimes { serving: Duration::days(a.days), renew_before: Duration::days(a.renew_before_days), ..Lifetimes::default() },
    };
    for line in sync(&client, &plan, OffsetDateTime::now_utc()).await? {
        println!("{line}");
    }
    Ok(())
}

/// Runs `liqo-certs` with `args` (the first is the program name).
pub fn main(args: impl IntoIterator<Item = OsString>) -> anyhow::Result<()> {
    match Cli::parse_from(args).command {
        Command::Sync(args) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(sync(args))?;
        }
        Command::Issue { dir, service, namespace, hosts, days, renew_before_days } => {
            let mut sans = service_dns_names(&service, &namespace);
            sans.extend(hosts);
            let life = Lifetimes { serving: Duration::days(days), renew_before: Duration::days(renew_before_days), ..Lifetimes::default() };
            let outcome = ensure(&dir, &sans, OffsetDateTime::now_utc(), &life)?;
            // Progress goes to stderr: `issue ... && inject ...` pipes only YAML into kubectl.
            match outcome.ca {
                Some(why) => eprintln!("new CA in {} ({why})", dir.display()),
                None => eprintln!("kept the CA in {}", dir.display()),
            }
            match outcome.serving {
                Some(why) => eprintln!("new serving certificate for {} ({why})", sans.join(", ")),
                None => eprintln!("kept the serving certificate"),
            }
        }
        Command::Secret { dir, name, namespace } => {
            let paths = Paths::new(&dir);
            let read = |p: &PathBuf| std::fs::read_to_string(p).with_context(|| p.display().to_string());
            let pair = Pair { cert_pem: read(&paths.tls_crt)?, key_pem: read(&paths.tls_key)? };
            print!("{}", tls_secret_yaml(&name, &namespace, &pair, &read(&paths.ca_crt)?));
        }
        Command::Inject { ca, url, manifest } => {
            let ca_pem = std::fs::read_to_string(&ca).with_context(|| ca.display().to_string())?;
            let yaml = std::fs::read_to_string(&manifest).with_context(|| manifest.display().to_string())?;
            print!("{}", inject_ca_bundle(&yaml, &ca_pem, url.as_deref())?);
        }
    }
    Ok(())
}
