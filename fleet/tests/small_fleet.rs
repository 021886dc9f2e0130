//! A small fleet (50 peers) against a hub on a real API server, one scenario of each kind:
//! every scenario converges within its deadline (in health periods), and the counts hold —
//! no peer contacted before it is chosen, one offer per peer, no write in steady state, no
//! re-join after a restart, at most one status write per peer per transition.

mod common;

use liqo_fleet::scenarios::{Row, Run};

const PEERS: usize = 50;

fn show(row: &Row) -> String {
    serde_json::to_string_pretty(row).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_peers_through_every_scenario() {
    let Some((hub, fleet, health)) = common::hub_and_fleet(PEERS).await else { return };
    let mut run = Run::new(hub, fleet, health);
    let n = PEERS as u64;

    let a = run.discovered().await;
    assert!(a.ok, "{}", show(&a));
    assert_eq!((a.peer_requests_per_peer, a.status_writes, a.hub_writes), (0.0, 0.0, 0.0), "peers not chosen are left alone: {}", show(&a));

    // The dashboard on the hub: every page served to a logged-in user, each change on an open page.
    let g = run.dashboard().await;
    assert!(g.ok, "{}", show(&g));
    assert!(g.rss_mib > 0.0, "the dashboard's memory is read: {}", show(&g));

    let b = run.join_all().await;
    assert!(b.ok, "{}", show(&b));
    // Our Secret and our PeeringRequest, once each (the join offered twice before).
    assert_eq!(b.peer_writes, 2 * n, "{}", show(&b));
    assert_eq!(b.auth_requests, 3 * n, "/ids, /ca and /identity once each: {}", show(&b));
    assert_eq!(b.identity_requests, n, "one identity each: {}", show(&b));
    // protocol §9: nothing per peer is cluster-wide.
    let bindings = b.note.split("ClusterRoleBindings on the hub: ").nth(1).expect("the ClusterRoleBindings counted");
    let counts: Vec<&str> = bindings.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).take(2).collect();
    assert_eq!(counts.len(), 2, "{}", b.note);
    assert_eq!(counts[0], counts[1], "as many ClusterRoleBindings with every peer joined as with none: {}", b.note);

    let [c, at_hub] = run.steady().await;
    assert!(c.ok, "{}", show(&c));
    // The peers' broadcasters watch the hub: no GET in steady state, a watch each. (Their
    // watches last 10 to 15 periods, longer than this window: their rate is the 10,000 row's.)
    assert_eq!(at_hub.broadcaster_gets, 0, "{}", show(&at_hub));
    assert_eq!(at_hub.broadcaster_watches_held, n as usize, "{}", show(&at_hub));
    assert_eq!((c.hub_writes, c.status_writes, c.events, c.hub_lists), (0.0, 0.0, 0.0, 0.0), "{}", show(&c));
    assert_eq!((c.peer_writes, c.identity_requests), (0, 0), "{}", show(&c));
    // One look per peer per health period: over 3 periods, 3 or 4 each (the window's edges).
    let looks = c.peer_requests_per_peer_period * c.window_seconds / health.as_secs_f64();
    assert!((2.5..=4.0).contains(&looks), "{looks} looks per peer in 3 periods: {}", show(&c));

    let d = run.cold_start().await;
    assert!(d.ok, "{}", show(&d));
    assert_eq!((d.peer_writes, d.identity_requests), (0, 0), "a restart joins nobody again: {}", show(&d));

    let [down, back, all_down, all_back] = run.outage_both().await;
    for (row, affected) in [(&down, 5.0), (&back, 5.0), (&all_down, 50.0), (&all_back, 50.0)] {
        assert!(row.ok, "{}", show(row));
        assert!(row.status_writes <= affected, "at most one status write per peer per transition: {}", show(row));
        assert_eq!(row.peer_writes, 0, "{}", show(row));
    }
    // A peer that took the connection and reset it was told so without a ClientHello. On its
    // return, its first check makes one new connection (a full handshake: the access's ticket
    // was let go while its connection was kept, docs/scaling.md) and keeps it: one handshake
    // a returning peer at most, never one a check.
    assert!(all_back.handshakes <= 50, "one handshake a returning peer at most: {}", show(&all_back));

    // Wholly down: the peers' broadcasters stop writing to the hub too.
    run.outage = liqo_fleet::peer::Mode::Off;
    for row in run.outage(10).await {
        assert!(row.ok, "{}", show(&row));
        assert!(row.status_writes <= 5.0, "at most one status write per peer per transition: {}", show(&row));
    }

    let f = run.ca_rotation().await;
    assert!(f.ok, "{}", show(&f));

    // Every identity due at once: each renewed with itself as the proof, no re-join, no write
    // to a peer.
    let r = run.renewals().await;
    assert!(r.ok, "{}", show(&r));
    assert_eq!(r.identity_requests, n, "one renewal each: {}", show(&r));
    assert_eq!(r.peer_writes, 0, "{}", show(&r));

    // Strangers on 200 addresses for 3 health periods: held at the cap while a genuine
    // cluster gets in; none of theirs is left afterwards.
    run.flood = health * 3;
    let i = run.strangers().await;
    assert!(i.ok, "{}", show(&i));
    let most: f64 = i.note.split("waiting at most ").nth(1).and_then(|r| r.split(' ').next()).and_then(|m| m.parse().ok()).unwrap();
    assert!(most > 0.0 && most <= 100.0, "the shipped cap of 100 holds them: {}", i.note);
    assert!(i.note.contains("its PeeringRequest accepted"), "{}", i.note);
}
