//! What the fleet and the child process that runs its broadcasters tell each other, one JSON
//! object a line: the fleet sends what its peers were offered and how they are, the child sends
//! back how their rounds went and what it has asked the hub.

use serde::{Deserialize, Serialize};

use super::round::Round;
use super::side::{Credentials, Who};

/// From the fleet to the child.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToChild {
    /// First, once: the hub and how many peers there are.
    Hello { url: String, ca_pem: String, period_ms: u64, watch: bool, peers: usize },
    /// A request offered (new or changed): its broadcaster starts again, with these credentials.
    Offer { who: Who, requester: String, credentials: Option<Credentials> },
    /// The credentials changed with no new offer (their Secret deleted).
    Credentials { who: Who, requester: String, credentials: Option<Credentials> },
    /// A request withdrawn: its broadcaster stops and withdraws its Advertisement with these.
    Withdraw { who: Who, requester: String, credentials: Option<Credentials> },
    /// The peers `from..to` are wholly off, or no longer.
    Off { from: usize, to: usize, off: bool },
}

/// From the child to the fleet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromChild {
    /// How a round for `requester` at peer `index` went (changes only, as our broadcaster tells).
    Report { index: usize, requester: String, round: Round },
    /// What the child has done so far (sent when it changed, a few times a second).
    Told(Told),
}

/// The child's figures so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Told {
    /// Requests to the hub: reads, writes, LISTs, watches opened.
    pub reads: u64,
    pub writes: u64,
    pub lists: u64,
    pub watches: u64,
    /// Watches open, and broadcasters running, now.
    pub watching: usize,
    pub running: usize,
}

/// Writes each message `messages` brings as a line of `output`, those waiting together, flushed
/// once none waits; ends when the sender does, or on the first error.
pub async fn write_lines<T: Serialize>(
    mut messages: tokio::sync::mpsc::UnboundedReceiver<T>,
    mut output: impl tokio::io::AsyncWrite + Unpin,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    while let Some(first) = messages.recv().await {
        let mut text = line(&first);
        while let Ok(next) = messages.try_recv() {
            text.push_str(&line(&next));
        }
        output.write_all(text.as_bytes()).await?;
        output.flush().await?;
    }
    Ok(())
}

/// One message as its line (no newline in it: JSON escapes them).
pub fn line<T: Serialize>(message: &T) -> String {
    let mut line = serde_json::to_string(message).expect("serializable");
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_each_and_read_back_the_same() {
        let who = Who { index: 7, id: "f1ee7000-0000-4000-8000-000000000007".into(), name: "fleet-00007".into() };
        let credentials = Some(Credentials { token: "a\nb".into(), namespace: "liqo-tenant-x".into() });
        let to = ToChild::Offer { who, requester: "hub".into(), credentials };
        let sent = line(&to);
        assert_eq!(sent.matches('\n').count(), 1, "{sent}");
        assert_eq!(serde_json::from_str::<ToChild>(&sent).unwrap(), to);
        let from = FromChild::Report { index: 7, requester: "hub".into(), round: Round::Forbidden };
        assert_eq!(serde_json::from_str::<FromChild>(&line(&from)).unwrap(), from);
        let told = FromChild::Told(Told { reads: 1, writes: 2, lists: 3, watches: 4, watching: 5, running: 6 });
        assert_eq!(serde_json::from_str::<FromChild>(&line(&told)).unwrap(), told);
    }
}
