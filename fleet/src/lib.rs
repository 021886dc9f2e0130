//! A fleet of simulated Liqo peers in one process (their broadcasters in a child of their own),
//! and the hub scenarios measured against it.
//!
//! Each simulated peer is a distinct endpoint (its own address, or its own port) with its own
//! cluster ID and its own CA, serving over real TLS what a peer serves to a hub that joins it:
//! the auth service (`/ids`, `/ca`, `/identity`) and the part of the Kubernetes API our
//! reconciler uses there (PeeringRequests, their Secrets, `/version`). A peer that accepts a
//! PeeringRequest then acts as its broadcaster: with the kubeconfig the request's Secret
//! carries, it keeps its Advertisement in the hub, as a real peer does.
//!
//! - [`peer`]: one simulated peer (identity, certificates, mode, the objects stored there);
//! - [`answer`]: what a peer answers to one request (pure over its state);
//! - [`server`]: the TLS listeners, one connection at a time, and the counts;
//! - [`advertiser`]: the peers' broadcasters, writing to the hub (in this process or a child);
//! - [`black_hole`]: peers whose packets are dropped (iptables, in the fleet's own namespace);
//! - [`hub`]: the hub (a real API server, our webhook and reconciler as binaries) and its readings;
//! - [`cpu_limit`]: CPU limits of the hub's side and the peers' side (control groups);
//! - [`counts`]: what the peers were asked, and how long they took to answer;
//! - [`dashboard`]: the dashboard binary on the hub, fetched as a logged-in user;
//! - [`scenarios`]: (a)–(g), each a row of the table `just fleet N` prints.
//!
//! Layers, top first (`reconciler/tests/layers.rs` holds the code to them: a module uses its
//! own layer or one below, never a circle): the binary; the scenarios (`scenarios`); the
//! fleet's server (`server`); what a peer answers and writes (`answer`, `advertiser`,
//! `dashboard`); a simulated peer, the counts and the hub (`peer`, `counts`, `black_hole`,
//! `cpu_limit`, `hub`, `managed`: the managed fields its objects carry).

pub mod advertiser;
pub mod answer;
pub mod black_hole;
pub mod counts;
pub mod cpu_limit;
pub mod dashboard;
pub mod hub;
pub mod managed;
pub mod peer;
pub mod scenarios;
pub mod server;
