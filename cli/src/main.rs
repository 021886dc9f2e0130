//! `kubectl-liqo`: the kubectl plugin (`kubectl liqo ...`). Wiring only; see the modules.

mod connect;
mod domain;
mod error;
mod follow;
mod install;
mod peer;
mod progress;
mod render;
mod status;
mod toggles;

use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};

use crate::connect::Connection;
use crate::error::{CliError, Result};
use crate::render::Output;
use crate::toggles::Toggle;

/// Liqo discovery and peering from the command line: see where this cluster and its peers
/// stand, peer and unpeer, browse the LAN and DNS domains, and flip the discovery switches.
/// Every action is done with your own kubeconfig credentials.
#[derive(Parser, Debug)]
#[command(name = "kubectl liqo", bin_name = "kubectl liqo", version)]
struct Cli {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// This cluster (ID, switches, policy, components) and its peers; with PEER, everything
    /// about one peer. Exits 1 when a peer asked to join is not joined.
    #[command(
        after_help = "Examples:\n  kubectl liqo status\n  kubectl liqo status my-peer -o yaml\n  kubectl liqo status -o wide\n  kubectl liqo status --phase RemoteUnreachable --limit 20"
    )]
    Status {
        /// A peer: its ForeignCluster's name or its cluster ID.
        peer: Option<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Show only peers in this state, as the PEERS summary names it (`Joined`,
        /// `NotJoining`, `Incoming`, ...), or its phase or reason alone (`RemoteReachable`,
        /// `TokenRefused`); any case. The summary still counts every peer.
        #[arg(long)]
        phase: Option<String>,
        /// Show at most this many peers (0: all); the summary still counts every peer.
        #[arg(long, default_value_t = 0)]
        limit: usize,
        /// ForeignClusters asked for per LIST (the API server answers in pages; 0: one LIST).
        #[arg(long, default_value_t = status::CHUNK)]
        chunk_size: u32,
    },
    /// Peer with a remote cluster: by its auth service (AUTH_URL, recommended), or by its API
    /// server and cluster ID (Liqo's manual form, for a remote that admits anonymous requests).
    #[command(
        after_help = "Examples:\n  kubectl liqo peer https://10.0.0.2:30443 --allow-untrusted-ca --wait\n  kubectl liqo peer --cluster-id 9a596a4b-591c-4ac6-8fd6-80258b4b3bf9 --api-url https://10.0.0.2:6443 --allow-untrusted-ca"
    )]
    Peer {
        /// The remote's auth service, `https://host:port`.
        auth_url: Option<String>,
        /// The remote's cluster ID (with --api-url).
        #[arg(long, requires = "api_url")]
        cluster_id: Option<String>,
        /// The remote's API server, `https://host:port` (with --cluster-id).
        #[arg(long, requires = "cluster_id", conflicts_with = "auth_url")]
        api_url: Option<String>,
        /// Name of the ForeignCluster (default: the known one for that remote, else from the URL
        /// or the cluster ID).
        #[arg(long)]
        name: Option<String>,
        /// Peer even though the remote's certificate is signed by a CA we do not know.
        #[arg(long, conflicts_with = "fingerprint")]
        allow_untrusted_ca: bool,
        /// Trust the remote by the SHA-256 fingerprint its operator reads out (what `kubectl liqo
        /// install` prints there): pinned on the ForeignCluster this joins, made or found.
        #[arg(long)]
        fingerprint: Option<String>,
        /// Follow the phases until joined, for at most this long (e.g. 90s, 5m).
        #[arg(long, num_args = 0..=1, default_missing_value = "2m", value_parser = parse_duration)]
        wait: Option<Duration>,
    },
    /// Stop peering with PEER (its ForeignCluster's name or cluster ID): `join: false`, or
    /// delete it.
    #[command(
        after_help = "Examples:\n  kubectl liqo unpeer my-peer --wait\n  kubectl liqo unpeer 9a596a4b-591c-4ac6-8fd6-80258b4b3bf9 --delete"
    )]
    Unpeer {
        peer: String,
        /// Delete the ForeignCluster instead of setting `join: false`.
        #[arg(long)]
        delete: bool,
        /// Wait for the cascade, for at most this long.
        #[arg(long, num_args = 0..=1, default_missing_value = "2m", value_parser = parse_duration)]
        wait: Option<Duration>,
    },
    /// Trust PEER by the SHA-256 fingerprint of the certificate it presents (shown by
    /// `kubectl liqo status PEER` while it awaits approval): compare it with the one the
    /// remote's operator reads out first.
    #[command(after_help = "Example:\n  kubectl liqo trust my-peer --fingerprint 3F:0A:…:9C")]
    Trust {
        /// A peer: its ForeignCluster's name or its cluster ID.
        peer: String,
        /// SHA-256, hex, colons allowed.
        #[arg(long)]
        fingerprint: String,
    },
    /// Free a cluster ID bound here to the first cluster that took an identity for it: its
    /// identity is revoked at once, and the next cluster to ask for an identity for
    /// that ID gets it. For a peer that lost its credential (reinstalled), or a stranger that
    /// took an ID first.
    #[command(after_help = "Example:\n  kubectl liqo free 9a596a4b-591c-4ac6-8fd6-80258b4b3bf9")]
    Free {
        /// The cluster ID, or the name of its ForeignCluster.
        peer: String,
    },
    /// Forget the remembered choice (join or not) about a discovered cluster: the next time
    /// discovery finds it, autojoin decides again. Choices are kept in ConfigMap
    /// liqo-known-peers.
    #[command(after_help = "Example:\n  kubectl liqo forget 9a596a4b-591c-4ac6-8fd6-80258b4b3bf9")]
    Forget {
        /// The cluster ID.
        cluster_id: String,
    },
    /// Browse the LAN (mDNS) and/or DNS domains (DNS-SD) for Liqo clusters; no Kubernetes
    /// cluster needed. Exits 1 when a DNS domain does not resolve.
    #[command(
        after_help = "Examples:\n  kubectl liqo discover --seconds 5\n  kubectl liqo discover --domain example.com --nameserver 10.0.0.53:53 --json"
    )]
    Discover(liqo_reconciler::discovery::discover::Args),
    /// The DNS domains browsed for peers (SearchDomains): add, list, remove.
    #[command(subcommand, after_help = "Examples:\n  kubectl liqo domain add example.com\n  kubectl liqo domain list")]
    Domain(DomainCommand),
    /// LAN discovery on or off (ClusterConfig `enableDiscovery`).
    #[command(after_help = "Example:\n  kubectl liqo discovery off")]
    Discovery { state: Switch },
    /// Advertising this cluster on or off (ClusterConfig `enableAdvertisement`).
    #[command(after_help = "Example:\n  kubectl liqo advertisement on")]
    Advertisement { state: Switch },
    /// Joining discovered peers by themselves on or off (ClusterConfig `autojoin`).
    #[command(after_help = "Example:\n  kubectl liqo autojoin off")]
    Autojoin { state: Switch },
    /// The dashboard: a live web page of this cluster and its peers, served on loopback with
    /// your credentials until Ctrl-C.
    #[command(after_help = "Examples:\n  kubectl liqo dashboard\n  kubectl liqo dashboard --address 127.0.0.1:9000 --open")]
    Dashboard {
        /// Where to serve it.
        #[arg(long, default_value = "127.0.0.1:8090")]
        address: std::net::SocketAddr,
        /// Serve it on an address that is not loopback (anyone who reaches it acts as you).
        #[arg(long)]
        insecure_listen_anywhere: bool,
        /// Open it in the browser (xdg-open).
        #[arg(long)]
        open: bool,
    },
    /// Install Liqo on the cluster, or upgrade it to this plugin's version (peerings are kept):
    /// the manifests of this version by server-side apply, waiting for each part; ends with the
    /// line another cluster runs to peer with this one. The addresses peers use are found in the
    /// cluster; --api-url/--auth-url override them (ConfigMap liqo-reconciler-env).
    #[command(
        after_help = "Examples:\n  kubectl liqo install\n  kubectl liqo install --with dashboard,monitoring\n  kubectl liqo install --with ingress --auth-host liqo-auth.example.com\n  kubectl liqo install --image registry.example.com/liqo/liqo-discovery:0.4.0-dev --auth-url https://liqo-auth.example.com\n  kubectl liqo install --dry-run > liqo.yaml"
    )]
    Install {
        /// The image of every component (default: liqo-discovery:<this version>).
        #[arg(long)]
        image: Option<String>,
        /// The URL peers use for this cluster's API server (default: found in the cluster).
        #[arg(long)]
        api_url: Option<String>,
        /// The URL peers use for the auth service (default: found in the cluster).
        #[arg(long)]
        auth_url: Option<String>,
        /// The name peers reach the auth service by through the Ingress (needed by --with
        /// ingress): the Ingress's host, and a name of the auth certificate.
        #[arg(long)]
        auth_host: Option<String>,
        /// Optional parts, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',')]
        with: Vec<install::Extra>,
        /// Print the YAML that would be applied, and apply nothing (no cluster needed).
        #[arg(long)]
        dry_run: bool,
        /// How long to wait for every part to be ready.
        #[arg(long, default_value = "5m", value_parser = parse_duration)]
        timeout: Duration,
    },
    /// Remove Liqo from the cluster: every object install made, the ForeignClusters and tenant
    /// namespaces, the CRDs (unless --keep-crds). Refuses while peerings are up, naming them,
    /// unless --unpeer, which unpeers them first and waits.
    #[command(after_help = "Examples:\n  kubectl liqo uninstall\n  kubectl liqo uninstall --unpeer --keep-crds")]
    Uninstall {
        /// Unpeer from every peer first (waits for each unjoin).
        #[arg(long)]
        unpeer: bool,
        /// Keep the CustomResourceDefinitions (and so the custom resources left).
        #[arg(long)]
        keep_crds: bool,
        /// How long to wait for the unpeering and the removal.
        #[arg(long, default_value = "5m", value_parser = parse_duration)]
        timeout: Duration,
    },
    /// Shell completion script.
    #[command(
        after_help = "Examples:\n  source <(kubectl liqo completion bash)\n  kubectl liqo completion zsh > \"${fpath[1]}/_kubectl-liqo\""
    )]
    Completion { shell: clap_complete::Shell },
}

#[derive(Subcommand, Debug)]
enum DomainCommand {
    /// Browse DOMAIN for peers (a SearchDomain).
    #[command(after_help = "Example:\n  kubectl liqo domain add example.com --no-autojoin")]
    Add {
        domain: String,
        /// Name of the SearchDomain (default: the domain).
        #[arg(long)]
        name: Option<String>,
        /// Join the clusters found there.
        #[arg(long, conflicts_with = "no_autojoin")]
        autojoin: bool,
        /// Do not join the clusters found there.
        #[arg(long)]
        no_autojoin: bool,
    },
    /// The SearchDomains, their last lookup and what they found.
    #[command(after_help = "Example:\n  kubectl liqo domain list -o wide")]
    List {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Stop browsing DOMAIN (a SearchDomain's name or domain); what it found goes with it.
    #[command(after_help = "Example:\n  kubectl liqo domain remove example.com")]
    Remove { domain: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

/// `90s`, `5m`, `1h`, or plain seconds.
fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let (number, unit) = s.trim().split_at(s.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(s.trim().len()));
    let n: u64 = number.parse().map_err(|_| format!("{s:?}: a duration like 90s, 5m or 1h"))?;
    let seconds = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{s:?}: a duration like 90s, 5m or 1h")),
    };
    Ok(Duration::from_secs(seconds))
}

async fn run(cli: Cli) -> Result<()> {
    let mut stdout = std::io::stdout();
    match cli.command {
        Command::Completion { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "kubectl-liqo", &mut stdout);
            Ok(())
        }
        Command::Install { dry_run: true, image, with, auth_host, .. } => {
            install::check_auth_host(&with, auth_host.as_deref()).map_err(CliError::Usage)?;
            let mut objects = install::objects(&with, image.as_deref());
            if let Some(host) = &auth_host {
                install::set_auth_host(&mut objects, host);
            }
            print!("{}", install::yaml(&objects));
            Ok(())
        }
        Command::Discover(args) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            match liqo_reconciler::discovery::discover::run(args).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(CliError::Reported),
                Err(e) => Err(CliError::Failed(format!("{e:#}"))),
            }
        }
        command => {
            let client = cli.connection.client().await?;
            let ns = &cli.connection.namespace;
            match command {
                Command::Status { peer: None, output, phase, limit, chunk_size } => {
                    let selection = status::Selection { phase, limit };
                    let overview = status::overview(&client, ns, &selection, chunk_size).await?;
                    print!("{}", overview.render(output));
                    if overview.healthy() {
                        return Ok(());
                    }
                    Err(CliError::Failed(overview.unhealthy_line()))
                }
                Command::Status { peer: Some(peer), output, .. } => {
                    let detail = status::detail(&client, ns, &peer).await?;
                    print!("{}", detail.render(output));
                    if detail.peer.healthy() {
                        Ok(())
                    } else {
                        Err(CliError::Failed(format!("{} is not joined although join is true", detail.peer.name)))
                    }
                }
                Command::Peer { auth_url, cluster_id, api_url, name, allow_untrusted_ca, fingerprint, wait } => {
                    let trusting = peer::Trusting::parse(allow_untrusted_ca, fingerprint.as_deref())?;
                    let target = match (auth_url, cluster_id, api_url) {
                        (Some(url), None, None) => peer::Target::AuthUrl(url),
                        (None, Some(cluster_id), Some(api_url)) => peer::Target::ApiServer { cluster_id, api_url },
                        _ => return Err(CliError::Usage("give AUTH_URL, or --cluster-id with --api-url".into())),
                    };
                    let peered = peer::peer(&client, &target, name.as_deref(), &trusting).await?;
                    if let Some(note) = &peered.note {
                        println!("{note}");
                    }
                    println!("ForeignCluster {}: join requested", peered.name);
                    if let Some(deadline) = wait
                        && let Err(e) = peer::wait_joined(&client, &peered.name, deadline, &mut stdout).await
                    {
                        // Discovery found the same cluster while ours was made: that one is joined.
                        let Some(again) = peer::discovered_meanwhile(&client, &peered, &target, name.as_deref(), &trusting).await? else {
                            return Err(e);
                        };
                        println!("{}", again.note.as_deref().unwrap_or_default());
                        peer::wait_joined(&client, &again.name, deadline, &mut stdout).await?;
                    }
                    Ok(())
                }
                Command::Unpeer { peer, delete, wait } => {
                    let (name, id) = peer::unpeer(&client, &peer, delete).await?;
                    println!("ForeignCluster {name}: {}", if delete { "deletion requested" } else { "join: false" });
                    if let Some(deadline) = wait {
                        peer::wait_unjoined(&client, &name, &id, delete, deadline, &mut stdout).await?;
                    }
                    Ok(())
                }
                Command::Install { image, api_url, auth_url, auth_host, with, timeout, .. } => {
                    install::check_auth_host(&with, auth_host.as_deref()).map_err(CliError::Usage)?;
                    let i = install::Install {
                        namespace: ns,
                        with: &with,
                        image: image.as_deref(),
                        auth_host: auth_host.as_deref(),
                        api_url: api_url.as_deref(),
                        auth_url: auth_url.as_deref(),
                        timeout,
                    };
                    install::install(&client, &i, &mut stdout).await
                }
                Command::Uninstall { unpeer, keep_crds, timeout } => {
                    install::uninstall(&client, &install::Uninstall { namespace: ns, unpeer, keep_crds, timeout }, &mut stdout).await
                }
                Command::Forget { cluster_id } => {
                    let had = liqo_reconciler::discovery::memory::forget(&client, ns, &cluster_id)
                        .await
                        .map_err(|e| CliError::Failed(format!("forgetting {cluster_id}: {e}")))?;
                    if had {
                        println!("forgot the choice about {cluster_id}: autojoin decides when it is found again");
                    } else {
                        println!("no choice about {cluster_id} was remembered");
                    }
                    Ok(())
                }
                Command::Free { peer } => {
                    let id = peer::free(&client, &peer).await?;
                    println!("cluster ID {id} freed: its identity here is revoked; the next cluster to ask for one gets it");
                    Ok(())
                }
                Command::Trust { peer, fingerprint } => {
                    let (name, fingerprint) = peer::trust(&client, &peer, &fingerprint).await?;
                    println!("ForeignCluster {name}: trusted by fingerprint {fingerprint}; checked on every connection to it");
                    Ok(())
                }
                Command::Domain(DomainCommand::Add { domain, name, autojoin, no_autojoin }) => {
                    let choice = match (autojoin, no_autojoin) {
                        (true, _) => Some(true),
                        (_, true) => Some(false),
                        _ => None,
                    };
                    let name = domain::add(&client, &domain, name.as_deref(), choice).await?;
                    println!("SearchDomain {name} created: {domain} is browsed for peers");
                    Ok(())
                }
                Command::Domain(DomainCommand::List { output }) => {
                    print!("{}", domain::render(&domain::list(&client).await?, output));
                    Ok(())
                }
                Command::Domain(DomainCommand::Remove { domain }) => {
                    let name = domain::remove(&client, &domain).await?;
                    println!("SearchDomain {name} deleted");
                    Ok(())
                }
                Command::Dashboard { address, insecure_listen_anywhere, open } => {
                    liqo_dashboard::server::check_address(address, insecure_listen_anywhere).map_err(CliError::Usage)?;
                    let listener =
                        tokio::net::TcpListener::bind(address).await.map_err(|e| CliError::Failed(format!("binding {address}: {e}")))?;
                    let stores = liqo_dashboard::Stores::start(&client, ns);
                    let dashboard = liqo_dashboard::Dashboard::new(client.clone(), ns, stores);
                    dashboard.permissions.follow(client.clone(), None, Duration::from_secs(60));
                    let app = liqo_dashboard::router(dashboard);
                    let url = format!("http://{}/", listener.local_addr().map_err(|e| CliError::Failed(e.to_string()))?);
                    println!("dashboard at {url} (Ctrl-C to stop)");
                    if open {
                        let _ = std::process::Command::new("xdg-open").arg(&url).spawn();
                    }
                    axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = tokio::signal::ctrl_c().await;
                        })
                        .await
                        .map_err(|e| CliError::Failed(e.to_string()))
                }
                Command::Discovery { state } => switch(&client, Toggle::Discovery, state).await,
                Command::Advertisement { state } => switch(&client, Toggle::Advertisement, state).await,
                Command::Autojoin { state } => switch(&client, Toggle::Autojoin, state).await,
                Command::Completion { .. } | Command::Discover(_) => unreachable!("handled above"),
            }
        }
    }
}

async fn switch(client: &kube::Client, toggle: Toggle, state: Switch) -> Result<()> {
    print!("{}", toggles::set(client, toggle, state == Switch::On).await?);
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !matches!(e, CliError::Reported) {
                eprintln!("error: {e}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_has_examples_in_its_help() {
        fn check(cmd: &clap::Command, path: &str) {
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                let name = format!("{path} {}", sub.get_name());
                let after = sub.get_after_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(after.starts_with("Example"), "{name} has no examples in its --help");
                check(sub, &name);
            }
        }
        check(&Cli::command(), "kubectl liqo");
    }

    #[test]
    fn durations_read_like_kubectls() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn both_seed_forms_parse_and_mixing_them_is_a_usage_error() {
        let a = Cli::try_parse_from(["kubectl-liqo", "peer", "https://a:1", "--wait"]).unwrap();
        assert!(matches!(a.command, Command::Peer { wait: Some(d), .. } if d == Duration::from_secs(120)));
        Cli::try_parse_from(["kubectl-liqo", "peer", "--cluster-id", "x", "--api-url", "https://b:6443"]).unwrap();
        let e = Cli::try_parse_from(["kubectl-liqo", "peer", "https://a:1", "--cluster-id", "x", "--api-url", "https://b"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = Cli::try_parse_from(["kubectl-liqo", "peer", "--cluster-id", "x"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
