//! `liqo-certs`: makes and renews the certificates of the webhook and the auth service, and
//! injects the CA into webhook configurations.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use liqo_certs::files::{Lifetimes, Paths, ensure};
use liqo_certs::{Pair, inject_ca_bundle, service_dns_names, tls_secret_yaml};
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
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Issue { dir, service, namespace, hosts, days, renew_before_days } => {
            let mut sans = service_dns_names(&service, &namespace);
            sans.extend(hosts);
            let life = Lifetimes {
                serving: Duration::days(days),
                renew_before: Duration::days(renew_before_days),
                ..Lifetimes::default()
            };
            let outcome = ensure(&dir, &sans, OffsetDateTime::now_utc(), &life)?;
            match outcome.ca {
                Some(why) => println!("new CA in {} ({why})", dir.display()),
                None => println!("kept the CA in {}", dir.display()),
            }
            match outcome.serving {
                Some(why) => println!("new serving certificate for {} ({why})", sans.join(", ")),
                None => println!("kept the serving certificate"),
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
