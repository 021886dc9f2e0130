//! The peers' broadcasters toward the hub, in this process or in a child of their own.
//!
//! - [`engine`]: the broadcasters themselves (rounds, watches of the hub), over a [`side::Side`];
//! - [`round`]: how a round went, when the next runs, and the words it is told with;
//! - [`side`]: what a broadcaster needs of its peer;
//! - [`local`]: the peers' side in this process;
//! - [`wire`]: what the fleet and the child tell each other;
//! - [`remote`]: the child process (its side, a copy the fleet keeps current);
//! - [`child`]: the fleet's end of it.
//!
//! A child of their own holds the broadcasters' watches in its own open files: 10,000 peers
//! need two sockets each (the hub's kept connection to the peer, the peer's watch of the hub),
//! more than one process may hold on a machine whose hard limit is 20,000.

pub mod child;
pub mod engine;
pub mod local;
pub mod remote;
pub mod round;
pub mod side;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;

pub use engine::{Advertiser, HubAccess};

use crate::counts::Counts;
use crate::peer::Peer;
use wire::ToChild;

/// Where the broadcasters run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Broadcasters {
    /// In the fleet's process.
    InProcess,
    /// In a child process: this `liqo-fleet` binary, run with [`child::FLAG`].
    Child(PathBuf),
}

/// The fleet's broadcasters, where they run.
pub enum Advertising {
    InProcess(Arc<Advertiser>),
    Child(Box<child::Child>),
}

impl Advertising {
    /// Starts the broadcasters of `peers` toward `hub`, as `how` says; their figures go to `counts`.
    pub fn start(how: &Broadcasters, hub: HubAccess, peers: &[Arc<Peer>], counts: Arc<Counts>) -> anyhow::Result<Self> {
        Ok(match how {
            Broadcasters::InProcess => Self::InProcess(Arc::new(Advertiser::new(hub, counts, Arc::new(local::Local(peers.to_vec())))?)),
            Broadcasters::Child(program) => Self::Child(Box::new(child::Child::start(program, &hub, peers.to_vec(), counts)?)),
        })
    }

    /// `requester`'s PeeringRequest was accepted by `peer` (new or changed): its broadcaster
    /// starts again, its first round at once.
    pub fn offered(&self, peer: &Peer, requester: String) {
        match self {
            Self::InProcess(a) => a.offered(local::who(peer), requester),
            Self::Child(c) => {
                let credentials = local::credentials_of(peer, &requester);
                c.send(ToChild::Offer { who: local::who(peer), requester, credentials });
            }
        }
    }

    /// `requester`'s PeeringRequest was deleted: the broadcaster stops and its Advertisement
    /// is withdrawn (the hub may have revoked our access first: then it removed it itself).
    pub fn withdrawn(&self, peer: &Peer, requester: &str) {
        match self {
            Self::InProcess(a) => a.withdrawn(&local::who(peer), requester),
            Self::Child(c) => {
                let credentials = local::credentials_of(peer, requester);
                c.send(ToChild::Withdraw { who: local::who(peer), requester: requester.to_owned(), credentials });
            }
        }
    }

    /// The Secret of `requester`'s kubeconfig at `peer` changed with no new offer (deleted):
    /// its broadcaster reads it at its next round (in this process it reads the peer itself).
    pub fn credentials_changed(&self, peer: &Peer, requester: &str) {
        if let Self::Child(c) = self {
            let credentials = local::credentials_of(peer, requester);
            c.send(ToChild::Credentials { who: local::who(peer), requester: requester.to_owned(), credentials });
        }
    }

    /// The peers `range` were set wholly off (`off`), or to another mode.
    pub fn off_changed(&self, range: std::ops::Range<usize>, off: bool) {
        if let Self::Child(c) = self {
            c.send(ToChild::Off { from: range.start, to: range.end, off });
        }
    }

    /// How many watches of the hub are open.
    pub fn watching(&self) -> usize {
        match self {
            Self::InProcess(a) => a.watching(),
            Self::Child(c) => c.told().watching,
        }
    }

    /// How many broadcasters run.
    pub fn running(&self) -> usize {
        match self {
            Self::InProcess(a) => a.running(),
            Self::Child(c) => c.told().running,
        }
    }

    /// CPU seconds spent outside the fleet's process on the broadcasters so far (the child's).
    pub fn cpu_seconds_elsewhere(&self) -> f64 {
        match self {
            Self::InProcess(_) => 0.0,
            Self::Child(c) => c.cpu_seconds(),
        }
    }
}
