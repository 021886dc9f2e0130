//! When a peer's tenant namespace is retired (protocol §9). A direction of the peering that ends
//! asks for it ([`retire`]); [`super::tenant::retire`] does it once nothing of the peer is left
//! there. An identity issued to the peer just before keeps the namespace: the peer may be
//! about to write its request with it. Such a namespace is looked at again once the peer had
//! [`USE_WITHIN`] to use that identity, so an identity nobody used never leaves it for good
//! (found by the chaos soak, seed 7: a namespace kept by the identity of a join that was
//! undone 0.2 s later, with nothing left to ask again).

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::reflector::Store;
use liqo_api::ForeignCluster;

use kube::Client;

use super::tenant::Retirement;
use crate::machinery::error::Result;

/// How long a peer has to write its request with an identity we just issued it before an
/// unused tenant namespace is retired anyway. It writes it at once (milliseconds); a peer
/// slower than this finds the namespace going and asks again once it is gone.
pub const USE_WITHIN: Duration = Duration::from_secs(3);

/// How many times a namespace kept for a fresh identity is looked at again, at most (each
/// look follows a newer identity, or an error).
const LOOKS: usize = 10;

/// [`USE_WITHIN`], to add to a time.
const USE_WITHIN_SIGNED: SignedDuration = SignedDuration::from_secs(USE_WITHIN.as_secs() as i64);

/// The time before which an identity is not fresh for a retirement asked for `now` (pure).
pub fn fresh_after(now: Timestamp) -> Timestamp {
    now - USE_WITHIN_SIGNED
}

/// How long to wait before looking again at a namespace kept for an identity issued at
/// `issued` (pure): until the peer had [`USE_WITHIN`] to use it.
pub fn look_again_in(issued: Timestamp, now: Timestamp) -> Duration {
    let due = issued + USE_WITHIN_SIGNED;
    Duration::try_from(due.duration_since(now)).unwrap_or(Duration::ZERO).min(USE_WITHIN)
}

pub use super::joining;

/// A direction of the peering with `peer` ended at `since`: retires its tenant namespace unless
/// we join it or something of it is left; when a fresh identity keeps it, looks again later.
/// While we join it, the namespace stays and only the identity the peer requested with goes,
/// looked at again the same way (found by the chaos soak, seed 2: a peer that unjoined within
/// a second of its identity's issue kept it bound here, and its next join was refused as
/// `IdentityBound` until the identity expired).
pub async fn retire(client: &Client, foreign: &Store<ForeignCluster>, peer: &str, since: Timestamp) -> Result<()> {
    if let Retirement::IssuedAt(issued) = retire_once(client, foreign, peer, since).await? {
        tokio::spawn(look_again(client.clone(), foreign.clone(), peer.to_owned(), issued));
    }
    Ok(())
}

/// One look: the tenant namespace retired, or, while we join the peer, the identity it
/// requested with revoked (so that it gets one again when it comes back, protocol §10).
async fn retire_once(client: &Client, foreign: &Store<ForeignCluster>, peer: &str, since: Timestamp) -> Result<Retirement> {
    if joining(foreign, peer) {
        super::tenant::retire_requester(client, peer, since).await
    } else {
        super::tenant::retire(client, peer, since).await
    }
}

/// Retires `peer`'s tenant namespace once the identity issued at `issued` had time to be used
/// and was not (nothing of the peer there), following any newer identity the same way.
async fn look_again(client: Client, foreign: Store<ForeignCluster>, peer: String, mut issued: Timestamp) {
    let mut wait = look_again_in(issued, Timestamp::now());
    for _ in 0..LOOKS {
        tokio::time::sleep(wait).await;
        match retire_once(&client, &foreign, &peer, issued).await {
            Ok(Retirement::IssuedAt(later)) => {
                issued = later;
                wait = look_again_in(issued, Timestamp::now());
            }
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(%peer, error = %e, cause = e.label(), "cannot look at the peer's tenant namespace yet");
                wait = USE_WITHIN;
            }
        }
    }
    tracing::warn!(%peer, "the peer's tenant namespace kept by identities it did not use: left for the next departure");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_namespace_kept_for_a_fresh_identity_is_looked_at_once_the_peer_had_time_to_use_it() {
        let issued = at("2026-11-27T12:48:14.495Z");
        assert_eq!(look_again_in(issued, at("2026-11-27T12:48:14.733Z")), Duration::from_millis(2762));
        assert_eq!(look_again_in(issued, at("2026-11-27T12:48:20Z")), Duration::ZERO, "already due");
        assert_eq!(look_again_in(issued, at("2026-11-27T12:40:00Z")), USE_WITHIN, "a clock behind waits no longer than that");
    }

    #[test]
    fn an_identity_is_fresh_for_the_last_few_seconds_only() {
        assert_eq!(fresh_after(at("2026-11-27T12:00:10Z")), at("2026-11-27T12:00:07Z"));
    }

    #[test]
    fn a_foreign_cluster_being_deleted_does_not_keep_the_namespace() {
        use kube::runtime::reflector::{ObjectRef, store};
        use kube::runtime::watcher::Event;
        let id = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";
        let fc = |join: bool, deleting: bool| {
            let mut fc: ForeignCluster = serde_json::from_value(serde_json::json!({
                "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
                "metadata": {"name": "to-b", "uid": "u1"},
                "spec": {"clusterIdentity": {"clusterID": id}, "join": join}
            }))
            .unwrap();
            if deleting {
                fc.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()));
            }
            fc
        };
        for (join, deleting, expected) in [(true, false, true), (false, false, false), (true, true, false)] {
            let (reader, mut writer) = store::<ForeignCluster>();
            writer.apply_watcher_event(&Event::Apply(fc(join, deleting)));
            assert!(reader.get(&ObjectRef::new("to-b")).is_some());
            assert_eq!(joining(&reader, id), expected, "join {join}, deleting {deleting}");
        }
        assert!(!joining(&store::<ForeignCluster>().0, id), "no ForeignCluster");
    }
}
