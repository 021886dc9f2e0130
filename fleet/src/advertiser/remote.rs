//! The child process that runs the fleet's broadcasters (`liqo-fleet --serve-broadcasters`):
//! its peers are the copy the fleet keeps current by [`ToChild`] lines on stdin, and it tells
//! their rounds and its figures by [`FromChild`] lines on stdout. It ends when stdin does (the
//! fleet gone). Its own open files hold the broadcasters' watches of the hub, one a peer, so
//! that the fleet's hold only the peers' side.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite};
use tokio::sync::mpsc;

use super::engine::{Advertiser, HubAccess};
use super::round::Round;
use super::side::{Credentials, Side, Who};
use super::wire::{FromChild, ToChild, Told, write_lines};
use crate::counts::Counts;

/// How often the child tells its figures when they changed.
const TELL_EVERY: Duration = Duration::from_millis(200);

/// The peers as the fleet last told them.
pub struct Remote {
    credentials: Mutex<HashMap<(usize, String), Credentials>>,
    off: Vec<AtomicBool>,
    out: mpsc::UnboundedSender<FromChild>,
}

impl Remote {
    fn set(&self, who: &Who, requester: &str, credentials: Option<Credentials>) {
        let key = (who.index, requester.to_owned());
        let mut all = self.credentials.lock().expect("not poisoned");
        match credentials {
            Some(c) => all.insert(key, c),
            None => all.remove(&key),
        };
    }
}

impl Side for Remote {
    fn credentials(&self, who: &Who, requester: &str) -> Option<Credentials> {
        self.credentials.lock().expect("not poisoned").get(&(who.index, requester.to_owned())).cloned()
    }

    fn off(&self, who: &Who) -> bool {
        self.off.get(who.index).is_some_and(|o| o.load(Ordering::Relaxed))
    }

    fn report(&self, who: &Who, requester: &str, round: Round) {
        let _ = self.out.send(FromChild::Report { index: who.index, requester: requester.to_owned(), round });
    }
}

/// Runs the broadcasters the lines of `input` tell, telling `output` how they go, until
/// `input` ends.
pub async fn serve(input: impl AsyncBufRead + Unpin, output: impl AsyncWrite + Unpin + Send + 'static) -> anyhow::Result<()> {
    let mut lines = input.lines();
    let first = lines.next_line().await?.context("no hello from the fleet")?;
    let ToChild::Hello { url, ca_pem, period_ms, watch, peers } = serde_json::from_str(&first)? else {
        anyhow::bail!("the fleet's first line is not its hello: {first}")
    };
    let (out, told) = mpsc::unbounded_channel();
    let side = Arc::new(Remote { credentials: Mutex::default(), off: (0..peers).map(|_| AtomicBool::new(false)).collect(), out });
    let counts = Arc::new(Counts::default());
    let hub = HubAccess { url, ca_pem, period: Duration::from_millis(period_ms), watch };
    let advertiser = Arc::new(Advertiser::new(hub, counts.clone(), side.clone())?);
    let writer = tokio::spawn(write_lines(told, output));
    let teller = tokio::spawn(tell(advertiser.clone(), counts, side.out.clone()));
    while let Some(text) = lines.next_line().await? {
        let message: ToChild = serde_json::from_str(&text).with_context(|| format!("a line from the fleet: {text}"))?;
        apply(&advertiser, &side, message);
    }
    teller.abort();
    writer.abort();
    Ok(())
}

/// Does what one line from the fleet says.
fn apply(advertiser: &Arc<Advertiser>, side: &Remote, message: ToChild) {
    match message {
        ToChild::Hello { .. } => {}
        ToChild::Offer { who, requester, credentials } => {
            side.set(&who, &requester, credentials);
            advertiser.offered(who, requester);
        }
        ToChild::Credentials { who, requester, credentials } => side.set(&who, &requester, credentials),
        ToChild::Withdraw { who, requester, credentials } => {
            side.set(&who, &requester, credentials);
            advertiser.withdrawn(&who, &requester);
            side.set(&who, &requester, None);
        }
        ToChild::Off { from, to, off } => {
            for o in side.off.iter().take(to).skip(from) {
                o.store(off, Ordering::Relaxed);
            }
        }
    }
}

/// Sends the child's figures whenever they changed, every [`TELL_EVERY`].
async fn tell(advertiser: Arc<Advertiser>, counts: Arc<Counts>, out: mpsc::UnboundedSender<FromChild>) {
    let mut last = None;
    loop {
        let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let now = Told {
            reads: r(&counts.hub_reads),
            writes: r(&counts.hub_writes),
            lists: r(&counts.hub_lists),
            watches: r(&counts.hub_watches),
            watching: advertiser.watching(),
            running: advertiser.running(),
        };
        if last != Some(now) && out.send(FromChild::Told(now)).is_err() {
            return;
        }
        last = Some(now);
        tokio::time::sleep(TELL_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::line;
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// Reads lines from the child until `pick` takes one, within 10 s.
    async fn next<T>(lines: &mut tokio::io::Lines<BufReader<tokio::io::DuplexStream>>, pick: impl Fn(FromChild) -> Option<T>) -> T {
        let wait = async {
            loop {
                let text = lines.next_line().await.unwrap().expect("the child still speaks");
                if let Some(found) = pick(serde_json::from_str(&text).unwrap()) {
                    return found;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait).await.expect("told within 10 s")
    }

    #[tokio::test]
    async fn the_child_runs_what_it_is_told_and_tells_how_it_goes() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // A hub that refuses every connection (a closed port on loopback): each round fails.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let ca = liqo_certs::issue::new_ca("hub-ca", time::OffsetDateTime::now_utc(), time::Duration::days(1)).unwrap();
        let (mut to_child, child_in) = tokio::io::duplex(1 << 16);
        let (child_out, from_child) = tokio::io::duplex(1 << 16);
        let child = tokio::spawn(serve(BufReader::new(child_in), child_out));
        let mut lines = BufReader::new(from_child).lines();
        let send = |m: ToChild| line(&m);
        let hello =
            ToChild::Hello { url: format!("https://{closed}"), ca_pem: ca.cert_pem.clone(), period_ms: 60_000, watch: true, peers: 2 };
        let who = Who { index: 1, id: "f1ee7000-0000-4000-8000-000000000001".into(), name: "fleet-00001".into() };
        let credentials = Some(Credentials { token: "t".into(), namespace: "liqo-tenant-hub".into() });
        let offer = ToChild::Offer { who: who.clone(), requester: "hub".into(), credentials };
        to_child.write_all((send(hello) + &send(offer)).as_bytes()).await.unwrap();

        let report = next(&mut lines, |m| matches!(m, FromChild::Report { .. }).then_some(m)).await;
        assert_eq!(report, FromChild::Report { index: 1, requester: "hub".into(), round: Round::Failed }, "the hub refused the connection");
        let told = next(&mut lines, |m| match m {
            FromChild::Told(t) if t.lists >= 1 => Some(t),
            _ => None,
        })
        .await;
        assert_eq!((told.running, told.writes, told.watching), (1, 0, 0), "one broadcaster, its LIST tried: {told:?}");

        let withdraw = ToChild::Withdraw { who, requester: "hub".into(), credentials: None };
        to_child.write_all(send(withdraw).as_bytes()).await.unwrap();
        let told = next(&mut lines, |m| match m {
            FromChild::Told(t) if t.running == 0 => Some(t),
            _ => None,
        })
        .await;
        assert_eq!(told.writes, 0, "withdrawn with no credentials: nothing to delete at the hub");

        drop(to_child);
        tokio::time::timeout(Duration::from_secs(10), child).await.expect("the child ends with its input").unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_first_line_that_is_not_a_hello_is_refused() {
        let (mut to_child, child_in) = tokio::io::duplex(1 << 10);
        to_child.write_all(line(&ToChild::Off { from: 0, to: 1, off: true }).as_bytes()).await.unwrap();
        let error = serve(BufReader::new(child_in), tokio::io::sink()).await.unwrap_err();
        assert!(error.to_string().contains("not its hello"), "{error}");
    }

    #[tokio::test]
    async fn off_is_set_for_the_range_told_only() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = liqo_certs::issue::new_ca("hub-ca", time::OffsetDateTime::now_utc(), time::Duration::days(1)).unwrap();
        let hub = HubAccess { url: "https://127.0.0.1:9".into(), ca_pem: ca.cert_pem, period: Duration::from_secs(60), watch: true };
        let (out, _told) = mpsc::unbounded_channel();
        let side = Arc::new(Remote { credentials: Mutex::default(), off: (0..4).map(|_| AtomicBool::new(false)).collect(), out });
        let advertiser = Arc::new(Advertiser::new(hub, Arc::default(), side.clone()).unwrap());
        let who = |index| Who { index, id: String::new(), name: String::new() };
        apply(&advertiser, &side, ToChild::Off { from: 1, to: 3, off: true });
        assert_eq!((0..5).map(|i| side.off(&who(i))).collect::<Vec<_>>(), [false, true, true, false, false], "a peer unknown is not off");
        apply(&advertiser, &side, ToChild::Off { from: 2, to: 9, off: false });
        assert_eq!((0..4).map(|i| side.off(&who(i))).collect::<Vec<_>>(), [false, true, false, false]);
        let credentials = Credentials { token: "t".into(), namespace: "n".into() };
        apply(&advertiser, &side, ToChild::Credentials { who: who(0), requester: "hub".into(), credentials: Some(credentials.clone()) });
        assert_eq!(side.credentials(&who(0), "hub"), Some(credentials));
        apply(&advertiser, &side, ToChild::Credentials { who: who(0), requester: "hub".into(), credentials: None });
        assert_eq!(side.credentials(&who(0), "hub"), None, "a Secret deleted: none");
    }
}
