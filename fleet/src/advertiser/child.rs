//! The fleet's end of the child process that runs its broadcasters: it starts
//! `liqo-fleet --serve-broadcasters`, tells it what its peers were offered and how they are,
//! writes the rounds it tells back into the peers' PeeringRequests, and keeps its figures in
//! the fleet's counts. The child is killed with this end (and ends when its stdin does).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use super::engine::HubAccess;
use super::local::report_on;
use super::wire::{FromChild, ToChild, Told, write_lines};
use crate::counts::Counts;
use crate::peer::Peer;

/// The flag that makes `liqo-fleet` the child.
pub const FLAG: &str = "--serve-broadcasters";

/// The running child.
pub struct Child {
    to: mpsc::UnboundedSender<ToChild>,
    pid: u32,
    told: Arc<Mutex<Told>>,
    _process: tokio::process::Child,
}

impl Child {
    /// Starts `program` as the child of `peers`' broadcasters toward `hub`; its figures go to
    /// `counts`.
    pub fn start(program: &Path, hub: &HubAccess, peers: Vec<Arc<Peer>>, counts: Arc<Counts>) -> anyhow::Result<Self> {
        let mut process = tokio::process::Command::new(program)
            .arg(FLAG)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the broadcasters' process {}", program.display()))?;
        let pid = process.id().context("the broadcasters' process ended at once")?;
        let (stdin, stdout) = (process.stdin.take().context("its stdin")?, process.stdout.take().context("its stdout")?);
        let (to, from_fleet) = mpsc::unbounded_channel();
        let told = Arc::new(Mutex::new(Told::default()));
        tokio::spawn(send_all(from_fleet, stdin));
        tokio::spawn(read_all(BufReader::new(stdout), peers.clone(), counts, told.clone()));
        let period_ms = hub.period.as_millis().try_into().unwrap_or(u64::MAX);
        let hello = ToChild::Hello { url: hub.url.clone(), ca_pem: hub.ca_pem.clone(), period_ms, watch: hub.watch, peers: peers.len() };
        to.send(hello).context("the broadcasters' process")?;
        Ok(Self { to, pid, told, _process: process })
    }

    /// Tells the child `message` (lost only if the child is gone, which its reader says).
    pub fn send(&self, message: ToChild) {
        let _ = self.to.send(message);
    }

    /// What the child told last.
    pub fn told(&self) -> Told {
        *self.told.lock().expect("not poisoned")
    }

    /// CPU seconds the child used so far.
    pub fn cpu_seconds(&self) -> f64 {
        crate::hub::cpu_seconds_of(self.pid)
    }
}

async fn send_all(messages: mpsc::UnboundedReceiver<ToChild>, stdin: tokio::process::ChildStdin) {
    if let Err(e) = write_lines(messages, stdin).await {
        eprintln!("liqo-fleet: the broadcasters' process does not read: {e}");
    }
}

async fn read_all(stdout: BufReader<tokio::process::ChildStdout>, peers: Vec<Arc<Peer>>, counts: Arc<Counts>, told: Arc<Mutex<Told>>) {
    let mut lines = stdout.lines();
    while let Ok(Some(text)) = lines.next_line().await {
        match serde_json::from_str(&text) {
            Ok(FromChild::Report { index, requester, round }) => {
                if let Some(peer) = peers.get(index) {
                    report_on(peer, &requester, round);
                }
            }
            Ok(FromChild::Told(now)) => {
                counts.hub_reads.store(now.reads, Ordering::Relaxed);
                counts.hub_writes.store(now.writes, Ordering::Relaxed);
                counts.hub_lists.store(now.lists, Ordering::Relaxed);
                counts.hub_watches.store(now.watches, Ordering::Relaxed);
                *told.lock().expect("not poisoned") = now;
            }
            Err(e) => eprintln!("liqo-fleet: a line from the broadcasters' process not understood ({e}): {text}"),
        }
    }
    eprintln!("liqo-fleet: WARNING: the broadcasters' process ended: the peers no longer advertise to the hub");
}
