//! A hub kept busier than it can keep up with checks every peer in turn: with one reconcile
//! at a time and peers answering slowly, each joined peer is still checked within a round of
//! all of them. (Bounded by kube's controller setting instead, what fell due while every slot
//! was taken was served in hash order: the same peers again and again, others never — at
//! 10,000 joining peers some were not reconciled once in 14 minutes.)

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use liqo_fleet::peer::Mode;
use liqo_fleet::scenarios::Run;

const PEERS: usize = 20;
const SLOW: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_peer_is_checked_in_turn_when_checks_fall_behind() {
    let Some((hub, fleet, health)) = common::hub_and_fleet_with(PEERS, &["--max-concurrent-reconciles=1"]).await else { return };
    let run = Run::new(hub, fleet.clone(), health);
    assert!(run.discovered().await.ok);
    let b = run.join_all().await;
    assert!(b.ok, "{}", serde_json::to_string_pretty(&b).unwrap());

    // 20 checks fall due every health period (4 s); one at a time, 0.5 s each, 8 fit: the
    // checks fall behind and stay behind.
    fleet.set_mode(0..PEERS, Mode::Slow(SLOW));
    let before: Vec<u64> = fleet.peers.iter().map(|p| p.reads.load(Ordering::Relaxed)).collect();
    // A round of all 20 takes 10 s in turn; three rounds' time for every one to come once.
    let allowed = 3 * SLOW * PEERS as u32 + health;
    let deadline = Instant::now() + allowed;
    loop {
        let waiting: Vec<&str> =
            fleet.peers.iter().zip(&before).filter(|(p, b)| p.reads.load(Ordering::Relaxed) == **b).map(|(p, _)| p.name.as_str()).collect();
        if waiting.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "not checked once in {allowed:?} while checks fell behind: {waiting:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
