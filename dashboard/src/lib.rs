//! The dashboard of Liqo's documentation (protocol §8), served by `kubectl liqo dashboard` on loopback with the user's
//! own credentials: this cluster and its switches, Available and Connected Peers, Add domain,
//! Add remote peer, a peer view, a live picture of the peers, every Liqo object and its editor.
//!
//! - [`stores`]: one set of watches shared by every open page;
//! - [`model`]: what the pages show (pure); [`html`]: the pages, escaped everywhere (pure);
//! - [`actions`]: what the buttons and forms do; [`access`]: which of them RBAC allows (the
//!   others are disabled, with the reason); [`server`]: routes, CSRF, CSP, live updates;
//! - [`sessions`]: the in-cluster form (`liqo-dashboard`), where each user logs in with a
//!   bearer token and every request is made with it.
//!
//! Layers, top first (`reconciler/tests/layers.rs` holds the code to them: a module uses its
//! own layer or one below, never a circle): the binary (`command`); the HTTP server (`server`);
//! the logged-in users (`sessions`); one user's dashboard (`dashboard`); the pages and the
//! actions (`html`, `actions`, `edit`, `object_pages`); the pictures (`pictures`, `topology`);
//! what the pages show and who may see it (`model`, `access`, `stores`, `history`, `objects`,
//! `escape`).

pub mod access;
pub mod actions;
pub mod command;
pub mod dashboard;
pub mod edit;
pub mod escape;
pub mod history;
pub mod html;
pub mod model;
pub mod object_pages;
pub mod objects;
pub mod pictures;
pub mod server;
pub mod sessions;
pub mod stores;
pub mod topology;

pub use server::{Dashboard, router};
pub use stores::Stores;
