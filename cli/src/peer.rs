//! `kubectl liqo peer` and `unpeer`: a ForeignCluster with `join: true` (either of Liqo's forms: protocol §6), or
//! `join: false` / deleted; with `--wait`, followed live until it is done or the deadline.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use liqo_api::{Advertisement, ForeignCluster};

use crate::error::{CliError, Result};
use crate::follow::Followed;
use crate::progress::{Line, Progress, SPINNER, done_line, waiting_line};
use crate::status::find;
use liqo_api::summary::Peer;

/// How the remote is reached: its auth service (Liqo's recommended form), or its API server and cluster ID
/// (Liqo's manual form, for a remote that admits anonymous PeeringRequests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    AuthUrl(String),
    ApiServer { cluster_id: String, api_url: String },
}

/// A ForeignCluster name from a URL's host and port (pure): lowercase letters, digits and
/// dashes, at most 63 characters.
pub fn name_from_url(url: &str) -> String {
    let host =
        url::Url::parse(url).ok().map(|u| format!("{}-{}", u.host_str().unwrap_or("peer"), u.port_or_known_default().unwrap_or(443)));
    let raw = host.unwrap_or_else(|| url.to_owned()).to_lowercase();
    let mut name: String = raw.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    name = name.trim_matches('-').to_owned();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    name.truncate(63);
    name.trim_end_matches('-').to_owned()
}

/// How `peer` trusts the remote: any CA (`--allow-untrusted-ca`), the one whose fingerprint was
/// read out by its operator (`--fingerprint`), or our roots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trusting {
    pub allow_untrusted_ca: bool,
    /// Normalised SHA-256 (lowercase hex).
    pub fingerprint: Option<String>,
}

impl Trusting {
    /// From the command line: the fingerprint normalised, or a usage error.
    pub fn parse(allow_untrusted_ca: bool, fingerprint: Option<&str>) -> Result<Self> {
        let fingerprint = match fingerprint {
            Some(f) => Some(liqo_api::normalize_fingerprint(f).ok_or_else(|| {
                CliError::Usage(format!(
                    "--fingerprint {f:?} is not a SHA-256 fingerprint (64 hex digits, colons allowed, as `openssl x509 -fingerprint -sha256` prints it)"
                ))
            })?),
            None => None,
        };
        Ok(Self { allow_untrusted_ca, fingerprint })
    }

    /// The spec fields saying so (pure).
    fn fields(&self, spec: &mut serde_json::Value) {
        if self.allow_untrusted_ca {
            spec["allowUntrustedCA"] = true.into();
        }
        if let Some(fp) = &self.fingerprint {
            spec["trustedCAFingerprint"] = fp.clone().into();
        }
    }
}

/// Whether `name` can be a label value, so a name given to a peer found first by discovery can
/// be told on it ([`LABEL_PEER_NAME`](liqo_api::names::LABEL_PEER_NAME)).
pub fn name_as_label(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(CliError::Usage(format!("--name {name:?}: lowercase letters, digits and dashes, at most 63, starting and ending alphanumeric")))
    }
}

/// The spec fields `peer` sets (pure).
pub fn spec(target: &Target, trusting: &Trusting) -> serde_json::Value {
    let mut spec = match target {
        Target::AuthUrl(url) => serde_json::json!({"authUrl": url}),
        Target::ApiServer { cluster_id, api_url } => serde_json::json!({"clusterIdentity": {"clusterID": cluster_id}, "apiUrl": api_url}),
    };
    spec["join"] = true.into();
    trusting.fields(&mut spec);
    spec
}

/// What the auth service at the URL given shows of itself, before anything is written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Presented {
    /// Its cluster ID (`/ids`), when it answered with a well-formed one.
    pub cluster_id: Option<String>,
    /// SHA-256 of the API server CA it serves (`/ca`).
    pub api_ca_fingerprint: Option<String>,
    /// The fingerprints its TLS handshake proves (its leaf's, its CA's).
    pub auth_fingerprints: Vec<String>,
}

/// Asks the auth service at `url` who it is (`/ids`), its API server CA (`/ca`) and its TLS
/// chain, all three at once, trusting nothing yet; a part that does not answer in 5 s is left
/// unknown.
pub async fn presented(url: &str) -> Presented {
    use liqo_reconciler::remote::auth::client::{self, Verify};
    let within = Duration::from_secs(5);
    let (ids, ca, auth) = tokio::join!(
        tokio::time::timeout(within, client::ids(url, &Verify::Nothing)),
        tokio::time::timeout(within, client::ca(url, &Verify::Nothing)),
        tokio::time::timeout(within, client::presented_fingerprints(url)),
    );
    let ids = ids.ok().and_then(|r| r.ok()).map(|i| i.cluster_id);
    let ca = ca.ok().and_then(|r| r.ok());
    let auth = auth.ok().and_then(|r| r.ok()).unwrap_or_default();
    Presented {
        cluster_id: ids.filter(|id| liqo_api::cluster_id::validate_cluster_id(id).is_ok()),
        api_ca_fingerprint: ca.and_then(|pem| liqo_certs::inspect::fingerprint_sha256(&pem).ok()),
        auth_fingerprints: auth,
    }
}

/// Why joining `known` through `url` would trust someone else (pure): the address presents
/// another API server CA than the one pinned for that cluster, or an auth certificate the
/// approved fingerprint does not cover. `None` when nothing contradicts it.
pub fn impersonation(known: &ForeignCluster, url: &str, presented: &Presented) -> Option<String> {
    let name = known.name_any();
    let id = presented.cluster_id.as_deref().unwrap_or("?");
    let pinned = known.status.as_ref().and_then(|s| s.ca_fingerprint.as_deref());
    if let (Some(pinned), Some(now)) = (pinned, presented.api_ca_fingerprint.as_deref())
        && pinned != now
    {
        return Some(format!(
            "{url} answers as cluster {id}, which ForeignCluster {name} stands for, but serves another API server CA ({now}) than the one pinned for it ({pinned}): it may be another cluster impersonating {id}. \
             Nothing was changed. If {id}'s CA was rotated, check the new fingerprint with its operator, then `kubectl -n liqo delete secret {name}-ca-data` to pin the new one; otherwise check the address"
        ));
    }
    if let Some(approved) = known.spec.trusted_ca_fingerprint.as_deref()
        && !presented.auth_fingerprints.is_empty()
        && !presented.auth_fingerprints.iter().any(|f| f == approved)
    {
        return Some(format!(
            "{url} answers as cluster {id}, which ForeignCluster {name} stands for, but its certificate is not the approved fingerprint {approved}: it may be another cluster impersonating {id}. \
             Nothing was changed. Check the address, or approve the new fingerprint after checking it with {id}'s operator (`kubectl liqo trust {name} --fingerprint …`)"
        ));
    }
    None
}

/// What `peer` tells the user when the cluster was known already (pure).
pub fn known_note(known: &ForeignCluster, name_given: Option<&str>) -> String {
    let name = known.name_any();
    let how = match known.spec.discovery_type {
        Some(liqo_api::DiscoveryType::Lan) => "found on the LAN",
        Some(liqo_api::DiscoveryType::Wan) => "found through a SearchDomain",
        Some(liqo_api::DiscoveryType::IncomingPeering) => "peering with us already",
        _ => "added earlier",
    };
    let id = known.spec.remote_cluster_id().unwrap_or("?");
    let mut note = format!("cluster {id} is known already as ForeignCluster {name} ({how}): joining it");
    if let Some(given) = name_given.filter(|g| *g != name) {
        note.push_str(&format!(" (also found as {given} by every kubectl liqo command)"));
    }
    note
}

/// The ForeignCluster that stands for cluster `id` ([`find`]: by name, by its label, else by
/// its spec, a page at a time), if any.
async fn by_cluster_id(client: &Client, id: &str) -> Result<Option<ForeignCluster>> {
    match find(client, id).await {
        Ok(fc) => Ok(Some(fc).filter(|f| f.spec.remote_cluster_id() == Some(id))),
        Err(CliError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What `peer` did: the ForeignCluster joined, and a note when it was one known already.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peered {
    pub name: String,
    pub note: Option<String>,
    /// The ForeignCluster was made by this command (not one known already).
    pub created: bool,
}

/// Creates (or turns to `join: true`) the ForeignCluster for `target`. A cluster known
/// already under another ForeignCluster (the URL's `/ids` names its cluster ID) is joined as it
/// is, unless the URL presents another CA than the one pinned for it.
pub async fn peer(client: &Client, target: &Target, name: Option<&str>, trusting: &Trusting) -> Result<Peered> {
    if let Some(n) = name {
        name_as_label(n)?;
    }
    let api = Api::<ForeignCluster>::all(client.clone());
    if let Target::AuthUrl(url) = target {
        let presented = presented(url).await;
        if let Some(id) = presented.cluster_id.as_deref()
            && let Some(known) = by_cluster_id(client, id).await?
            && name.is_none_or(|n| n != known.name_any())
        {
            return join_known(&api, &known, url, &presented, name, trusting).await;
        }
    }
    let existing = match name {
        Some(n) => api.get_opt(n).await.map_err(|e| CliError::api(format!("reading ForeignCluster {n}"), e))?,
        None => {
            // The same remote may be known already (discovered, or peered before).
            let all = api.list(&ListParams::default()).await.map_err(|e| CliError::api("listing ForeignClusters", e))?;
            all.items.into_iter().find(|f| match target {
                Target::AuthUrl(url) => f.spec.auth_url.as_deref() == Some(url.as_str()),
                Target::ApiServer { cluster_id, .. } => f.spec.remote_cluster_id() == Some(cluster_id.as_str()),
            })
        }
    };
    let spec = spec(target, trusting);
    match existing {
        Some(fc) => {
            let name = fc.name_any();
            let patch = serde_json::json!({"spec": spec});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(|e| CliError::api(format!("updating ForeignCluster {name}"), e))?;
            Ok(Peered { name, note: None, created: false })
        }
        None => {
            let name = name.map(str::to_owned).unwrap_or_else(|| match target {
                Target::AuthUrl(url) => name_from_url(url),
                Target::ApiServer { cluster_id, .. } => cluster_id.clone(),
            });
            let mut object = serde_json::json!({
                "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": name}, "spec": spec
            });
            object["spec"]["discoveryType"] = "Manual".into();
            let fc: ForeignCluster = serde_json::from_value(object).map_err(|e| CliError::Usage(e.to_string()))?;
            api.create(&PostParams::default(), &fc).await.map_err(|e| CliError::api(format!("creating ForeignCluster {name}"), e))?;
            Ok(Peered { name, note: None, created: true })
        }
    }
}

/// Joins `known`, the ForeignCluster that stands for the cluster `url` names, with the trust
/// asked for and the name given as its label; refused when `url` presents another CA than the
/// one pinned for it.
async fn join_known(
    api: &Api<ForeignCluster>,
    known: &ForeignCluster,
    url: &str,
    presented: &Presented,
    name: Option<&str>,
    trusting: &Trusting,
) -> Result<Peered> {
    if let Some(why) = impersonation(known, url, presented) {
        return Err(CliError::Failed(why));
    }
    let known_name = known.name_any();
    let mut patch = serde_json::json!({"spec": {"join": true}});
    trusting.fields(&mut patch["spec"]);
    if let Some(given) = name {
        // The name given finds this peer in every later command.
        patch["metadata"] = serde_json::json!({"labels": {liqo_api::names::LABEL_PEER_NAME: given}});
    }
    api.patch(&known_name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| CliError::api(format!("updating ForeignCluster {known_name}"), e))?;
    Ok(Peered { note: Some(known_note(known, name)), name: known_name, created: false })
}

/// After `peered` made a ForeignCluster for `url`: when discovery found the same cluster
/// meanwhile (LAN or DNS; the reconciler then refuses ours, `ClusterIdTaken`), ours is deleted
/// and the discovered one joined as [`peer`] joins a cluster known already. None otherwise.
pub async fn discovered_meanwhile(
    client: &Client,
    peered: &Peered,
    target: &Target,
    name: Option<&str>,
    trusting: &Trusting,
) -> Result<Option<Peered>> {
    let Target::AuthUrl(url) = target else { return Ok(None) };
    if !peered.created {
        return Ok(None);
    }
    let presented = presented(url).await;
    let Some(id) = presented.cluster_id.as_deref() else { return Ok(None) };
    let Some(other) = by_cluster_id(client, id).await?.filter(|o| o.name_any() != peered.name) else { return Ok(None) };
    if !matches!(other.spec.discovery_type, Some(liqo_api::DiscoveryType::Lan | liqo_api::DiscoveryType::Wan)) {
        return Ok(None);
    }
    let api = Api::<ForeignCluster>::all(client.clone());
    api.delete(&peered.name, &Default::default())
        .await
        .map_err(|e| CliError::api(format!("deleting ForeignCluster {}", peered.name), e))?;
    join_known(&api, &other, url, &presented, name, trusting).await.map(Some)
}

/// Prints the phases of `name` as they complete, until it is joined (Ok), a phase needs the
/// user (Err at once), or `deadline` passes (Err with the phase that holds it up).
pub async fn wait_joined(client: &Client, name: &str, deadline: Duration, out: &mut impl Write) -> Result<Peer> {
    let terminal = std::io::stdout().is_terminal();
    let started = Instant::now();
    let ends = tokio::time::Instant::now() + deadline;
    let mut progress = Progress::default();
    let mut waiting = String::new();
    let mut tick = 0usize;
    let mut spinner = tokio::time::interval(Duration::from_millis(100));
    // Followed by a watch on its real name (the user may have given a cluster ID).
    let name = find(client, name).await?.name_any();
    let mut followed = Followed::new(Api::<ForeignCluster>::all(client.clone()), &name);
    let mut current: Option<Peer> = None;
    loop {
        tokio::select! {
            alive = followed.changed() => {
                if !alive {
                    return Err(CliError::Failed(format!("the watch on ForeignCluster {name} ended")));
                }
                if !followed.known {
                    continue;
                }
                let Some(fc) = followed.current.as_ref() else {
                    return Err(CliError::Failed(format!("ForeignCluster {name} was deleted while waiting for it to join")));
                };
                let peer = Peer::of(fc);
                for line in progress.step(&peer) {
                    if terminal {
                        let _ = write!(out, "\r\x1b[2K");
                    }
                    match line {
                        Line::Done(p) => {
                            let _ = writeln!(out, "{}", done_line(&p));
                        }
                        Line::Waiting { phase, reason, message } => {
                            waiting = waiting_line(&phase, &reason, &message);
                            if !terminal {
                                let _ = writeln!(out, "  {waiting}");
                            }
                        }
                    }
                }
                if peer.joined() {
                    if terminal {
                        let _ = write!(out, "\r\x1b[2K");
                    }
                    let _ = writeln!(out, "joined {} (cluster {}) in {:.1}s", peer.name, peer.cluster_id, started.elapsed().as_secs_f64());
                    return Ok(peer);
                }
                if let Some(f) = peer.failing().filter(|f| f.needs_user()) {
                    if terminal {
                        let _ = writeln!(out, "\r\x1b[2K");
                    }
                    return Err(stuck(&peer, f));
                }
                current = Some(peer);
            }
            _ = spinner.tick(), if terminal => {
                let _ = write!(out, "\r\x1b[2K{} {waiting}", SPINNER[tick % SPINNER.len()]);
                let _ = out.flush();
                tick += 1;
            }
            _ = tokio::time::sleep_until(ends) => {
                if terminal {
                    let _ = writeln!(out, "\r\x1b[2K");
                }
                return Err(not_joined(current.as_ref(), deadline, followed.error.as_deref()));
            }
        }
    }
}

/// What a `peer --wait` that ran out of time last saw.
fn not_joined(peer: Option<&Peer>, deadline: Duration, watch_error: Option<&str>) -> CliError {
    let secs = deadline.as_secs();
    let why = peer.and_then(|p| p.failing().or(p.phases.iter().find(|p| !p.passed())).cloned());
    CliError::Failed(match (why, watch_error) {
        (Some(p), _) => format!("not joined after {secs}s: {}", describe(&p)),
        (None, Some(e)) => format!("not joined after {secs}s: the ForeignCluster could not be watched: {e}"),
        (None, None) => format!("not joined after {secs}s: the reconciler wrote no phase yet (is it running?)"),
    })
}

fn describe(p: &liqo_api::summary::Phase) -> String {
    let mut s = format!("{} is {} ({}): {}", p.type_, p.status, p.reason, liqo_api::terminal::printable(&p.message));
    if !p.hint.is_empty() {
        s.push_str(&format!("\n  hint: {}", p.hint));
    }
    s
}

fn stuck(peer: &Peer, p: &liqo_api::summary::Phase) -> CliError {
    CliError::Failed(format!("peer {} cannot join until you act: {}", peer.name, describe(p)))
}

/// `join: false`, or deletes the ForeignCluster; returns its name and the peer's cluster ID.
pub async fn unpeer(client: &Client, peer: &str, delete: bool) -> Result<(String, String)> {
    let fc = find(client, peer).await?;
    let name = fc.name_any();
    let id = fc.spec.remote_cluster_id().unwrap_or_default().to_owned();
    let api = Api::<ForeignCluster>::all(client.clone());
    if delete {
        api.delete(&name, &DeleteParams::default()).await.map_err(|e| CliError::api(format!("deleting ForeignCluster {name}"), e))?;
    } else {
        let patch = serde_json::json!({"spec": {"join": false}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| CliError::api(format!("updating ForeignCluster {name}"), e))?;
    }
    Ok((name, id))
}

/// Frees cluster ID `peer` (or the ID of the ForeignCluster named so) on this cluster (protocol
/// §10): deletes the ServiceAccount of the identity issued for it, so its tokens are refused
/// from now on and the next cluster to ask for an identity for that ID gets it. Returns the ID
/// freed.
pub async fn free(client: &Client, peer: &str) -> Result<String> {
    let id = match liqo_api::validate_cluster_id(peer) {
        Ok(()) => peer.to_owned(),
        Err(_) => find(client, peer).await?.spec.remote_cluster_id().unwrap_or(peer).to_owned(),
    };
    let namespace = liqo_api::names::tenant_namespace(&id);
    let name = liqo_api::names::peer_service_account(&id);
    let sas = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &namespace);
    match sas.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(id),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(CliError::NotFound {
            what: format!("an identity for cluster ID {id} (ServiceAccount {namespace}/{name})"),
            hint: "nothing to free: the ID is not bound here (`kubectl liqo status` lists refused claims under REFUSED)",
        }),
        Err(e) => Err(CliError::api(format!("deleting ServiceAccount {namespace}/{name}"), e)),
    }
}

/// Approves `fingerprint` for PEER (`spec.trustedCAFingerprint`); returns the ForeignCluster's
/// name and the fingerprint as stored (normalised).
pub async fn trust(client: &Client, peer: &str, fingerprint: &str) -> Result<(String, String)> {
    let Some(normal) = liqo_api::normalize_fingerprint(fingerprint) else {
        return Err(CliError::Usage(format!(
            "--fingerprint {fingerprint:?} is not a SHA-256 fingerprint (64 hex digits, colons allowed, as `openssl x509 -fingerprint -sha256` prints it)"
        )));
    };
    let fc = find(client, peer).await?;
    let name = fc.name_any();
    let patch = serde_json::json!({"spec": {"trustedCAFingerprint": normal}});
    Api::<ForeignCluster>::all(client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| CliError::api(format!("updating ForeignCluster {name}"), e))?;
    Ok((name, normal))
}

/// Waits for the unjoin cascade and says what it saw: done once the ForeignCluster is deleted
/// (`delete`) or has released its finalizer (our PeeringRequest gone from the remote), and the
/// peer's Advertisement is gone from here. Both are followed by watches.
pub async fn wait_unjoined(client: &Client, name: &str, id: &str, delete: bool, deadline: Duration, out: &mut impl Write) -> Result<()> {
    let started = Instant::now();
    let since = k8s_openapi::jiff::Timestamp::now();
    let ends = tokio::time::Instant::now() + deadline;
    let mut fc = Followed::new(Api::<ForeignCluster>::all(client.clone()), name);
    let tenant = liqo_api::names::tenant_namespace(id);
    let mut advertisement =
        Followed::new(Api::<Advertisement>::namespaced(client.clone(), &tenant), &liqo_api::names::advertisement_name(id));
    loop {
        if fc.known && advertisement.known {
            let done = match &fc.current {
                None => true,
                Some(f) => !delete && !f.finalizers().iter().any(|f| f == liqo_api::names::FINALIZER_PEERED),
            };
            if done && advertisement.current.is_none() {
                return unjoined(client, name, fc.current.as_ref(), since, started, out).await;
            }
        }
        tokio::select! {
            alive = fc.changed() => if !alive { return Err(CliError::Failed(format!("the watch on ForeignCluster {name} ended"))) },
            alive = advertisement.changed() => if !alive { return Err(CliError::Failed("the watch on the peer's Advertisement ended".into())) },
            _ = tokio::time::sleep_until(ends) => {
                let joined = fc.current.as_ref().map(Peer::of).and_then(|p| p.phase(liqo_api::reasons::ConditionType::Joined).cloned());
                let mut why = match (&fc.current, joined) {
                    (None, _) => "ForeignCluster deleted".to_owned(),
                    (Some(_), Some(p)) => describe(&p),
                    (Some(_), None) => "the reconciler wrote no Joined phase yet (is it running?)".to_owned(),
                };
                if advertisement.current.is_some() {
                    why.push_str("; the peer's Advertisement is still here");
                }
                if let Some(e) = fc.error.as_ref().or(advertisement.error.as_ref()) {
                    why.push_str(&format!("; watching failed: {e}"));
                }
                return Err(CliError::Failed(format!("unpeering {name} not done after {}s: {why}", deadline.as_secs())));
            }
        }
    }
}

/// Tells how the unjoin ended: an error when a deleted ForeignCluster completed without the
/// remote (Event `RemoteGone` since `since`), since our PeeringRequest may remain there.
async fn unjoined(
    client: &Client,
    name: &str,
    fc: Option<&ForeignCluster>,
    since: k8s_openapi::jiff::Timestamp,
    started: Instant,
    out: &mut impl Write,
) -> Result<()> {
    let _ = writeln!(out, "✓ the peer's Advertisement is gone from this cluster, and its access here");
    if let Some(p) = fc.map(Peer::of).and_then(|p| p.phase(liqo_api::reasons::ConditionType::Joined).cloned()) {
        let _ = writeln!(out, "✓ {}", liqo_api::terminal::printable(&p.message));
    } else {
        if let Some(note) = remote_gone_since(client, name, since).await {
            return Err(CliError::Failed(format!("ForeignCluster {name} deleted, but not on the remote's side: {note}")));
        }
        let _ = writeln!(out, "✓ our PeeringRequest is gone from the remote; ForeignCluster {name} deleted");
    }
    let _ = writeln!(out, "unpeered {name} in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The note of a `RemoteGone` Event about ForeignCluster `name` emitted since `since`, if any.
async fn remote_gone_since(client: &Client, name: &str, since: k8s_openapi::jiff::Timestamp) -> Option<String> {
    use k8s_openapi::api::events::v1::Event;
    let fields = format!("regarding.name={name}");
    let events = Api::<Event>::all(client.clone()).list(&ListParams::default().fields(&fields)).await.ok()?.items;
    events
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("ForeignCluster"))
        .filter(|e| e.reason.as_deref() == Some("RemoteGone"))
        .filter(|e| e.event_time.as_ref().is_some_and(|t| t.0.as_second() >= since.as_second() - 1))
        .find_map(|e| e.note)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(discovery: &str, pinned: Option<&str>, approved: Option<&str>) -> ForeignCluster {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"},
            "spec": {"clusterIdentity": {"clusterID": "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9"}, "discoveryType": discovery,
                     "authUrl": "https://10.213.0.12:8443", "trustedCAFingerprint": approved},
            "status": {"caFingerprint": pinned}
        }))
        .unwrap()
    }

    fn presented(ca: Option<&str>, auth: &[&str]) -> Presented {
        Presented {
            cluster_id: Some("9a596a4b-591c-4ac6-8fd6-80258b4b3bf9".into()),
            api_ca_fingerprint: ca.map(str::to_owned),
            auth_fingerprints: auth.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_known_cluster_is_joined_and_found_by_the_name_given_too() {
        let fc = known("LAN", None, None);
        let note = known_note(&fc, Some("node-b"));
        assert_eq!(
            note,
            "cluster 9a596a4b-591c-4ac6-8fd6-80258b4b3bf9 is known already as ForeignCluster 9a596a4b-591c-4ac6-8fd6-80258b4b3bf9 (found on the LAN): joining it (also found as node-b by every kubectl liqo command)"
        );
        assert!(!known_note(&known("WAN", None, None), None).contains("also found as"));
        assert!(known_note(&known("WAN", None, None), None).contains("found through a SearchDomain"));
        assert!(known_note(&known("Manual", None, None), None).contains("added earlier"));
    }

    #[test]
    fn another_ca_than_the_pinned_one_is_refused_as_an_impersonation() {
        let url = "https://10.213.0.12:31443";
        assert_eq!(impersonation(&known("LAN", None, None), url, &presented(Some("bb"), &["cc"])), None, "nothing pinned yet");
        assert_eq!(impersonation(&known("LAN", Some("aa"), None), url, &presented(Some("aa"), &["cc"])), None, "the same CA");
        assert_eq!(
            impersonation(&known("LAN", Some("aa"), None), url, &presented(None, &[])),
            None,
            "no /ca answer: the reconciler checks"
        );
        let why = impersonation(&known("LAN", Some("aa"), None), url, &presented(Some("bb"), &[])).unwrap();
        assert!(why.contains("impersonating") && why.contains("(bb)") && why.contains("(aa)"), "{why}");
        assert!(why.contains("kubectl -n liqo delete secret 9a596a4b-591c-4ac6-8fd6-80258b4b3bf9-ca-data"), "what to do: {why}");
        assert!(why.contains("Nothing was changed"), "{why}");
        let approved = known("LAN", None, Some("dd"));
        assert_eq!(impersonation(&approved, url, &presented(None, &["ee", "dd"])), None, "its CA is the approved one");
        let why = impersonation(&approved, url, &presented(None, &["ee"])).unwrap();
        assert!(why.contains("approved fingerprint dd") && why.contains("kubectl liqo trust"), "{why}");
    }

    #[test]
    fn names_come_from_the_url() {
        assert_eq!(name_from_url("https://10.77.0.2:8443"), "10-77-0-2-8443");
        assert_eq!(name_from_url("https://Auth.Example.com"), "auth-example-com-443");
        assert!(name_from_url(&format!("https://{}.example:1", "x".repeat(80))).len() <= 63);
    }

    #[test]
    fn the_spec_of_each_seed_form() {
        assert_eq!(
            spec(&Target::AuthUrl("https://a:1".into()), &Trusting { allow_untrusted_ca: true, fingerprint: None }),
            serde_json::json!({"authUrl": "https://a:1", "join": true, "allowUntrustedCA": true})
        );
        let s = spec(&Target::ApiServer { cluster_id: "x".into(), api_url: "https://b:6443".into() }, &Trusting::default());
        assert_eq!(s, serde_json::json!({"clusterIdentity": {"clusterID": "x"}, "apiUrl": "https://b:6443", "join": true}));
        let fp = "C1:27".repeat(16).replace("27C1", "27:C1");
        let pinned = Trusting::parse(false, Some(&fp)).unwrap();
        assert_eq!(pinned.fingerprint.as_deref(), Some("c127".repeat(16).as_str()));
        let s = spec(&Target::AuthUrl("https://a:1".into()), &pinned);
        assert_eq!(s["trustedCAFingerprint"], "c127".repeat(16));
        assert!(s.get("allowUntrustedCA").is_none());
        assert!(matches!(Trusting::parse(false, Some("nope")), Err(CliError::Usage(_))));
    }

    #[test]
    fn a_name_given_must_be_a_label_value() {
        assert!(name_as_label("node-b").is_ok());
        for bad in ["Node-B", "-b", "b-", "", "a.b", &"x".repeat(64)] {
            assert!(matches!(name_as_label(bad), Err(CliError::Usage(_))), "{bad}");
        }
    }
}
