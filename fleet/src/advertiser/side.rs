//! What a broadcaster needs of the peer it runs for ([`Side`]): the credentials its hub
//! handed it, whether the peer is off, and where its rounds are told. The fleet's peers give it
//! in this process ([`super::local`]); a child process holds a copy the fleet keeps current
//! ([`super::remote`]).

use serde::{Deserialize, Serialize};

use super::round::Round;

/// The peer a broadcaster runs for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Who {
    pub index: usize,
    /// Its cluster ID (its Advertisement's name and label).
    pub id: String,
    /// Its name (where its broadcasters stand in their spread window).
    pub name: String,
}

/// The token of the kubeconfig a requester handed the peer, and the namespace its context
/// names (the peer's tenant namespace at the requester, where the Advertisement goes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub token: String,
    pub namespace: String,
}

/// The peer as its broadcasters see it.
pub trait Side: Send + Sync + 'static {
    /// The credentials `requester` handed `who` now, if its request and their Secret stand.
    fn credentials(&self, who: &Who, requester: &str) -> Option<Credentials>;
    /// Whether `who` is wholly off (its broadcasters reach nothing).
    fn off(&self, who: &Who) -> bool;
    /// How the last round for `requester` went.
    fn report(&self, who: &Who, requester: &str, round: Round);
}
