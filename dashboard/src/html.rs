//! The pages, rendered on the server (pure). Everything that comes from a cluster — names,
//! cluster IDs, condition messages a remote peer wrote — goes through [`esc`]; there is no
//! inline script or style (the Content-Security-Policy forbids them), and every form posts
//! with the CSRF token. The page works without script; `app.js` only makes it live.

use std::collections::BTreeMap;
use std::fmt::Write;

use k8s_openapi::jiff::Timestamp;
use liqo_api::summary::Peer;

use crate::access::Allowed;
use crate::history::History;
use crate::model::{Card, Chip, Direction, Domain, Listing, Shown, ThisCluster};
use crate::pictures::{health_strip, offer_bars, time_ago};

pub use crate::escape::esc;

/// An error to show next to a form field: the field's name and the API server's words.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FormError {
    pub form: &'static str,
    pub field: Option<&'static str>,
    pub message: String,
}

/// The start of a table: its caption (for screen readers only when `hidden`) and column heads.
/// A table with a `stack` class (`app.css` names each cell's column there) shows a row as a
/// card on a phone's width; one without scrolls sideways in its wrapper.
pub(crate) fn table_start(caption: &str, hidden: bool, stack: Option<&str>, heads: &[&str]) -> String {
    let class = if hidden { " class=\"sr\"" } else { "" };
    let table = stack.map(|s| format!(" class=\"stack {s}\"")).unwrap_or_default();
    let heads: String = heads.iter().map(|h| format!("<th scope=\"col\">{h}</th>")).collect();
    format!("<div class=\"table-wrap\"><table{table}><caption{class}>{caption}</caption><thead><tr>{heads}</tr></thead><tbody>")
}

/// The tables whose rows are cards on a phone's width: each one's class and column heads
/// (`app.css` names the columns again, for the cards).
#[cfg(test)]
const STACKED: &[(&str, &[&str])] = &[AVAILABLE, CONNECTED, DOMAINS, REFUSED, PHASES, EVENTS];
const AVAILABLE: (&str, &[&str]) = ("t-available", &["Name", "Cluster ID", "Type", "Found in", "Trust", "State", "Action"]);
const CONNECTED: (&str, &[&str]) = ("t-connected", &["Name", "Cluster ID", "Type", "Direction", "Health", "Resources", "Action"]);
const DOMAINS: (&str, &[&str]) = ("t-domains", &["Name", "Domain", "Ready", "Reason", "Found"]);
const REFUSED: (&str, &[&str]) = ("t-refused", &["Cluster ID", "Name", "Count", "Last", "Why"]);
const PHASES: (&str, &[&str]) = ("t-phases", &["Type", "Status", "Reason", "Message", "Since", "Hint"]);
const EVENTS: (&str, &[&str]) = ("t-events", &["Type", "Reason", "Message"]);

/// The end of a table [`table_start`] began (its wrapper scrolls sideways on a narrow screen,
/// the page does not).
pub(crate) const TABLE_END: &str = "</tbody></table></div>";

/// Every page's header.
const HEADER: &str = "<header><a href=\"/\">Liqo</a><nav aria-label=\"Pages\"><a href=\"/objects\">Objects</a></nav></header>";

pub(crate) fn page(title: &str, main: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
<title>{}</title><link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\"><link rel=\"stylesheet\" href=\"/app.css\"><script src=\"/app.js\" defer></script></head>\
<body>{HEADER}<main id=\"main\" aria-live=\"polite\">{main}</main></body></html>\n",
        esc(title)
    )
}

/// `page` with a Log out button in its header (the in-cluster form).
pub fn signed_in(page: &str, csrf: &str) -> String {
    let header = format!(
        "<header><a href=\"/\">Liqo</a><nav aria-label=\"Pages\"><a href=\"/objects\">Objects</a></nav><form method=\"post\" action=\"/logout\" class=\"inline logout\">{}<button type=\"submit\">Log out</button></form></header>",
        hidden_csrf(csrf)
    );
    page.replacen(HEADER, &header, 1)
}

/// The in-cluster form's login page, with why the last token was refused.
pub fn login(error: Option<&str>) -> String {
    let error = error.map_or(String::new(), |e| format!("<p class=\"error\" id=\"token-error\" role=\"alert\">{}</p>", esc(e)));
    let main = format!(
        "<section aria-labelledby=\"login\"><h1 id=\"login\">Log in</h1>\
<p>Paste a bearer token of yours for this cluster (for example from <code>kubectl create token NAME</code>). Every page and action uses it, so your RBAC decides what you see and do. It is kept in a secure, HTTP-only cookie.</p>\
<form method=\"post\" action=\"/login\"><label for=\"token\">Token</label> <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"off\" required aria-describedby=\"token-error\">\
<button type=\"submit\">Log in</button></form>{error}</section>"
    );
    page("Liqo: log in", &main)
}

pub(crate) fn hidden_csrf(csrf: &str) -> String {
    format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", esc(csrf))
}

/// ` disabled` with the reason as a tooltip, when RBAC refuses the action.
fn denied(why: &Option<String>) -> String {
    match why {
        Some(w) => format!(" disabled title=\"{}\"", esc(w)),
        None => String::new(),
    }
}

fn button_form(action: &str, name: &str, label: &str, csrf: &str, why: &Option<String>) -> String {
    format!(
        "<form method=\"post\" action=\"{action}\" class=\"inline\">{}<input type=\"hidden\" name=\"name\" value=\"{}\"><button type=\"submit\" aria-label=\"{} {}\"{}>{}</button></form>",
        hidden_csrf(csrf),
        esc(name),
        esc(label),
        esc(name),
        denied(why),
        esc(label)
    )
}

/// A destructive action on peer `name` (Disconnect, Forget): a link to the page that asks
/// first ([`confirm`]: it works without script), looking like what it is; a disabled button
/// with the reason when RBAC refuses.
fn ask_button((label, verb): (&str, &str), name: &str, why: &Option<String>) -> String {
    match why {
        None => format!(
            "<a class=\"button danger\" href=\"/peers/{}/{verb}\" aria-label=\"{label} {}\">{label}</a>",
            esc(&urlencode(name)),
            esc(name)
        ),
        Some(_) => format!("<button type=\"button\" class=\"danger\" aria-label=\"{label} {}\"{}>{label}</button>", esc(name), denied(why)),
    }
}

fn disconnect_button(name: &str, why: &Option<String>) -> String {
    ask_button(("Disconnect", "disconnect"), name, why)
}

fn forget_button(name: &str, why: &Option<String>) -> String {
    ask_button(("Forget", "forget"), name, why)
}

/// The question before Forget: what it undoes, and whether the peer comes back by itself.
pub fn confirm_forget(name: &str, joined: bool, discovered: bool, csrf: &str, why: &Option<String>) -> String {
    let mut what =
        String::from("Its ForeignCluster is deleted, with what this cluster keeps of it: its identity, its CA and its tenant namespace.");
    if joined {
        what.push_str(" The peering is undone first: our PeeringRequest there is withdrawn and its Advertisement here goes.");
    }
    if discovered {
        what.push_str(" It was discovered: while it still announces itself, discovery finds it again, as a new peer to connect.");
    }
    confirm(("Forget", "forget"), name, &what, csrf, why)
}

/// `s` as one path segment.
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// The question before Disconnect: what it undoes, the button that does it (a POST with the
/// CSRF token), and the way back.
pub fn confirm_disconnect(name: &str, joined: bool, csrf: &str, why: &Option<String>) -> String {
    let what = if joined {
        "Our PeeringRequest there is withdrawn and its Advertisement here goes with it; the identity it issued us is kept, so Connect joins again without asking for another."
    } else {
        "The join under way stops; what was made for it on both sides is undone."
    };
    confirm(("Disconnect", "disconnect"), name, what, csrf, why)
}

/// The question before a destructive action on peer `name`: what it undoes (`what`), the button
/// that does it (a POST to `/actions/<verb>` with the CSRF token), and the way back.
fn confirm((label, verb): (&str, &str), name: &str, what: &str, csrf: &str, why: &Option<String>) -> String {
    let main = format!(
        "<section aria-labelledby=\"confirm\"><h1 id=\"confirm\">{label} {}?</h1><p>{what}</p>\
<form method=\"post\" action=\"/actions/{verb}\" class=\"inline\">{}<input type=\"hidden\" name=\"name\" value=\"{}\">\
<button type=\"submit\" class=\"danger\" aria-label=\"Yes, {verb} {}\"{}>{label}</button></form> \
<a href=\"/peers/{}\">Cancel</a></section>",
        esc(name),
        hidden_csrf(csrf),
        esc(name),
        esc(name),
        denied(why),
        esc(&urlencode(name))
    );
    page(&format!("Liqo · {verb} {name}?"), &main)
}

fn switch(field: &str, label: &str, on: bool, csrf: &str, why: &Option<String>) -> String {
    format!(
        "<form method=\"post\" action=\"/actions/toggle\" class=\"inline\">{}<input type=\"hidden\" name=\"field\" value=\"{field}\">\
<input type=\"hidden\" name=\"on\" value=\"{}\"><button type=\"submit\" role=\"switch\" aria-checked=\"{on}\"{}>{label}: {}</button></form>",
        hidden_csrf(csrf),
        !on,
        denied(why),
        if on { "on" } else { "off" }
    )
}

/// A peer's chip ([`Chip`]).
fn chip(p: &Peer) -> String {
    let c = Chip::of(p);
    format!("<span class=\"chip {}\">{}</span>", c.class(), c.label())
}

/// A peer's chip, then what holds it up and what to do about it.
/// A peer nobody asks to join keeps the phase that held it up when someone did: said as what
/// was, not what is (unless it is that the peer does not answer, which still holds).
fn state_cell(p: &Peer) -> String {
    match p.failing() {
        Some(f) => {
            let hint = if f.hint.is_empty() { String::new() } else { format!("<div class=\"hint\">{}</div>", esc(&f.hint)) };
            let was = !p.join && f.type_ != liqo_api::reasons::ConditionType::RemoteReachable.as_str();
            format!(
                "{} <span class=\"msg\">{}{}: {}</span><div class=\"msg\">{}</div>{hint}",
                chip(p),
                if was { "when last asked, " } else { "" },
                esc(&f.type_),
                esc(&f.reason),
                esc(&f.message)
            )
        }
        None => chip(p),
    }
}

fn peer_link(p: &Peer) -> String {
    format!("<a href=\"/peers/{}\">{}</a>", esc(&urlencode(&p.name)), esc(&p.name))
}

fn available_table(cards: &[Card], csrf: &str, allowed: &Allowed) -> String {
    if cards.is_empty() {
        return "<p>None: add a domain or a remote peer below, or turn discovery on.</p>".into();
    }
    let mut t = table_start("Available peers", true, Some(AVAILABLE.0), AVAILABLE.1);
    for c in cards {
        let p = &c.peer;
        let action = if p.join {
            "joining…".to_owned()
        } else {
            format!(
                "<button type=\"submit\" form=\"connect\" name=\"name\" value=\"{0}\" aria-label=\"Connect {0}\"{1}>Connect</button>",
                esc(&p.name),
                denied(&allowed.join)
            )
        };
        let _ = write!(
            t,
            "<tr><td>{}</td><td><code>{}</code></td><td><span class=\"badge\">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{action}</td></tr>",
            peer_link(p),
            esc(&p.cluster_id),
            esc(&p.discovery_type),
            esc(c.found_in.as_deref().unwrap_or("-")),
            esc(&c.trust),
            state_cell(p)
        );
    }
    t.push_str(TABLE_END);
    // One form for every row's Connect (each button names its peer): a page of rows stays small.
    let _ = write!(t, "<form id=\"connect\" method=\"post\" action=\"/actions/connect\">{}</form>", hidden_csrf(csrf));
    t
}

fn connected_table(cards: &[Card], largest: &BTreeMap<&'static str, f64>, now: Timestamp, allowed: &Allowed) -> String {
    if cards.is_empty() {
        return "<p>None yet.</p>".into();
    }
    let mut t = table_start("Connected peers", true, Some(CONNECTED.0), CONNECTED.1);
    for c in cards {
        let p = &c.peer;
        let action = if p.join { disconnect_button(&p.name, &allowed.join) } else { "-".into() };
        let health = if c.healthy { "<span class=\"chip chip-joined\">healthy</span>".to_owned() } else { state_cell(p) };
        let health = match c.last_check {
            Some(check) => format!("{health} <span class=\"since\">checked {}</span>", crate::pictures::check_ago(check, now)),
            None => health,
        };
        let health = match crate::model::last_change(p) {
            Some(t) => format!("{health} <span class=\"since\">changed {}</span>", time_ago(t, now)),
            None => health,
        };
        let _ = write!(
            t,
            "<tr><td>{}</td><td><code>{}</code></td><td><span class=\"badge\">{}</span></td><td>{}</td><td>{health}</td><td>{}</td><td>{action}</td></tr>",
            peer_link(p),
            esc(&p.cluster_id),
            esc(&p.discovery_type),
            c.direction.map_or("-", Direction::label),
            offer_bars(&c.offers, largest)
        );
    }
    t.push_str(TABLE_END);
    t
}

pub(crate) fn field_error(error: Option<&FormError>, form: &str, field: &str) -> String {
    match error {
        Some(e) if e.form == form && e.field == Some(field) => {
            format!("<div class=\"error\" role=\"alert\" id=\"{form}-{field}-error\">{}</div>", esc(&e.message))
        }
        _ => String::new(),
    }
}

fn form_error(error: Option<&FormError>, form: &str) -> String {
    match error {
        Some(e) if e.form == form && e.field.is_none() => format!("<div class=\"error\" role=\"alert\">{}</div>", esc(&e.message)),
        _ => String::new(),
    }
}

fn input(form: &str, name: &str, label: &str, placeholder: &str, error: Option<&FormError>) -> String {
    let err = field_error(error, form, name);
    let described = if err.is_empty() { String::new() } else { format!(" aria-invalid=\"true\" aria-describedby=\"{form}-{name}-error\"") };
    format!(
        "<label for=\"{form}-{name}\">{label}</label><input id=\"{form}-{name}\" name=\"{name}\" placeholder=\"{}\"{described}>{err}",
        esc(placeholder)
    )
}

fn add_domain_form(csrf: &str, error: Option<&FormError>, why: &Option<String>) -> String {
    format!(
        "<form method=\"post\" action=\"/actions/domains\" class=\"card\" aria-labelledby=\"add-domain\"><h3 id=\"add-domain\">Add domain</h3>{}{}{}{}\
<label><input type=\"checkbox\" name=\"autojoin\" value=\"true\"> Join the clusters found there</label><button type=\"submit\"{}>Add domain</button></form>",
        hidden_csrf(csrf),
        form_error(error, "domain"),
        input("domain", "domain", "Domain", "example.com", error),
        input("domain", "name", "Name", "(the domain)", error),
        denied(why)
    )
}

fn add_peer_form(csrf: &str, error: Option<&FormError>, why: &Option<String>) -> String {
    format!(
        "<form method=\"post\" action=\"/actions/peers\" class=\"card\" aria-labelledby=\"add-peer\"><h3 id=\"add-peer\">Add remote peer</h3>{}{}\
<p>The remote's auth service address, or its API server address and cluster ID.</p>{}{}{}{}\
<label><input type=\"checkbox\" name=\"allow_untrusted_ca\" value=\"true\"> Allow an untrusted CA</label>\
<label><input type=\"checkbox\" name=\"join\" value=\"true\" checked> Join</label><button type=\"submit\"{}>Add remote peer</button></form>",
        hidden_csrf(csrf),
        form_error(error, "peer"),
        input("peer", "auth_url", "Auth service URL", "https://10.0.0.2:30443", error),
        input("peer", "api_url", "API server URL", "https://10.0.0.2:6443", error),
        input("peer", "cluster_id", "Cluster ID", "", error),
        input("peer", "name", "Name", "(from the address or the cluster ID)", error),
        denied(why)
    )
}

fn domains_table(domains: &[Domain]) -> String {
    if domains.is_empty() {
        return String::new();
    }
    let mut t = table_start("Domains", false, Some(DOMAINS.0), DOMAINS.1);
    for d in domains {
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.name),
            esc(&d.domain),
            esc(&d.ready),
            esc(&d.reason),
            d.found
        );
    }
    t.push_str(TABLE_END);
    t
}

/// The page for a peer there is none of (or none the user may see).
pub fn no_peer(name: &str) -> String {
    page(
        "Liqo · no such peer",
        &format!("<h1>No peer {}</h1><p>No ForeignCluster you may see has this name. <a href=\"/\">All peers</a></p>", esc(name)),
    )
}

/// The page for an object there is none of (or none the user may see).
pub fn no_object(kind: &str, name: &str) -> String {
    page(
        "Liqo · no such object",
        &format!(
            "<h1>No {} {}</h1><p>No Liqo object you may see has this kind and name. <a href=\"/objects\">All objects</a></p>",
            esc(kind),
            esc(name)
        ),
    )
}

/// What peers are told about this cluster, when the reconciler has published it; then the
/// requests our policy refused lately.
fn told(this: &ThisCluster) -> String {
    let mut out = match (&this.auth_url, &this.auth_ca_fingerprint) {
        (None, None) => String::new(),
        (url, fp) => format!(
            "<p class=\"told\">Peers reach it at <code>{}</code> · they approve the CA fingerprint <code class=\"fingerprint\">{}</code></p>",
            esc(url.as_deref().unwrap_or("each interface's address")),
            esc(fp.as_deref().unwrap_or("(not published)"))
        ),
    };
    let from = |url: &Option<String>, source: &Option<String>| match (url, source) {
        (Some(u), Some(s)) => Some(format!("<code>{}</code> (from {})", esc(u), esc(s))),
        _ => None,
    };
    let sources: Vec<String> =
        [("Auth service", from(&this.auth_url, &this.auth_url_from)), ("API server", from(&this.api_url, &this.api_url_from))]
            .into_iter()
            .filter_map(|(what, v)| Some(format!("{what} {}", v?)))
            .collect();
    if !sources.is_empty() {
        let _ = write!(out, "<p class=\"told-from\">{}</p>", sources.join(" · "));
    }
    if let Some(w) = &this.addresses_warning {
        let _ = write!(out, "<p class=\"warning\" role=\"alert\">Peers may not reach this cluster: {}</p>", esc(w));
    }
    if !this.refused.is_empty() {
        out.push_str(&table_start("Refused peering requests", false, Some(REFUSED.0), REFUSED.1));
        for r in &this.refused {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.cluster_id),
                esc(r.cluster_name.as_deref().unwrap_or("-")),
                r.count,
                esc(&r.last_time.0.to_string()),
                esc(&r.message)
            );
        }
        out.push_str(TABLE_END);
        out.push_str("<p class=\"hint\">To accept one: set join: true on its ForeignCluster, create one, approve its fingerprint, or add it to peeringAllowList.</p>");
    }
    out
}

/// The search over the peers (a GET form: it changes nothing), and what every peer's state
/// and type is.
fn peer_search(listing: &Listing) -> String {
    let v = &listing.view;
    let options = |chosen: &str, counts: &[(String, usize)]| {
        let mut out = format!("<option value=\"\"{}>any</option>", if chosen.is_empty() { " selected" } else { "" });
        for (value, n) in counts {
            let selected = if chosen.eq_ignore_ascii_case(value) { " selected" } else { "" };
            let _ = write!(out, "<option value=\"{}\"{selected}>{} ({n})</option>", esc(value), esc(value));
        }
        // A state the counts do not name (a chip's words, from the picture) stays chosen.
        if !chosen.is_empty() && !counts.iter().any(|(value, _)| chosen.eq_ignore_ascii_case(value)) {
            let _ = write!(out, "<option value=\"{}\" selected>{}</option>", esc(chosen), esc(chosen));
        }
        out
    };
    format!(
        "<form method=\"get\" action=\"/\" role=\"search\" class=\"search\"><label>Search <input type=\"search\" name=\"q\" value=\"{}\" placeholder=\"name or cluster ID\"></label> \
<label>State <select name=\"state\">{}</select></label> <label>Type <select name=\"type\">{}</select></label> <button type=\"submit\">Show</button></form>",
        esc(&v.q),
        options(&v.state, &listing.by_state),
        options(&v.type_, &listing.by_type)
    )
}

/// Every peer counted by state, in one line.
fn peer_counts(listing: &Listing) -> String {
    let each: Vec<String> = listing.by_state.iter().map(|(s, n)| format!("{} {n}", esc(s))).collect();
    let selected = listing.selected.available.len() + listing.selected.connected.len();
    let shown = if selected == listing.total { String::new() } else { format!(" · {selected} match the search") };
    format!(
        "<p id=\"peer-counts\">{} {}{}{shown}</p>",
        listing.total,
        if listing.total == 1 { "peer" } else { "peers" },
        if each.is_empty() { String::new() } else { format!(": {}", each.join(", ")) }
    )
}

/// Which page of a table this is, with links to the others (none when one page holds all).
fn pager(table: &str, shown: &Shown<'_>, view: &crate::model::View) -> String {
    if shown.pages <= 1 {
        return String::new();
    }
    let link = |page: usize, label: &str| format!("<a href=\"{}\">{label}</a>", esc(&view.link(table, page)));
    let previous = if shown.page > 1 { link(shown.page - 1, "‹ previous") } else { String::new() };
    let next = if shown.page < shown.pages { link(shown.page + 1, "next ›") } else { String::new() };
    format!(
        "<nav class=\"pager\" aria-label=\"{table} peers, pages\">{previous} <span>page {} of {} ({} peers)</span> {next}</nav>",
        shown.page, shown.pages, shown.selected
    )
}

/// The home view: the peers a page at a time ([`crate::model::PAGE`] per table), as `listing`
/// selects them.
pub fn home(
    this: &ThisCluster,
    listing: &Listing,
    domains: &[Domain],
    csrf: &str,
    error: Option<&FormError>,
    allowed: &Allowed,
    now: Timestamp,
) -> String {
    let (available, connected) = (listing.available(), listing.connected());
    let cards: Vec<&Card> = connected.cards.iter().chain(available.cards).collect();
    let edges = crate::model::edges(&cards);
    let name = if this.cluster_name.is_empty() { String::new() } else { format!(" ({})", esc(&this.cluster_name)) };
    let main = format!(
        "<section id=\"this-cluster\" data-live aria-labelledby=\"this\"><h1 id=\"this\">This cluster{name}</h1><p>Cluster ID <code>{}</code> · namespace <code>{}</code> · peering policy <strong>{}</strong></p>{}\
<div class=\"switches\">{}{}{}</div>{}</section>\
<section id=\"picture-section\" data-live aria-labelledby=\"picture\"><h2 id=\"picture\">Peers at a glance</h2>{}</section>\
<section aria-label=\"Find peers\">{}</section><section id=\"counts-section\" data-live aria-label=\"Peers by state\">{}</section>\
<section id=\"available-section\" data-live aria-labelledby=\"available\"><h2 id=\"available\">Available Peers</h2>{}{}{}</section>\
<section id=\"connected-section\" data-live aria-labelledby=\"connected\"><h2 id=\"connected\">Connected Peers</h2>{}{}</section>\
<section aria-labelledby=\"add\" class=\"forms\"><h2 id=\"add\">Add</h2>{}{}</section>\
<section id=\"domains-section\" data-live aria-label=\"Domains\">{}</section>",
        esc(&this.cluster_id),
        esc(&this.namespace),
        esc(&this.peering_policy),
        told(this),
        switch("enableDiscovery", "Discovery", this.discovery, csrf, &allowed.toggles),
        switch("enableAdvertisement", "Advertisement", this.advertisement, csrf, &allowed.toggles),
        switch("autojoin", "Autojoin", this.autojoin, csrf, &allowed.toggles),
        form_error(error, "toggle"),
        crate::topology::picture(this, &cards, &edges, listing),
        peer_search(listing),
        peer_counts(listing),
        // A refused Connect or Disconnect: here, where it shows even when the peer does not.
        form_error(error, "peers"),
        available_table(available.cards, csrf, allowed),
        pager("available", &available, &listing.view),
        connected_table(connected.cards, &listing.largest, now, allowed),
        pager("connected", &connected, &listing.view),
        add_domain_form(csrf, error, &allowed.add_domain),
        add_peer_form(csrf, error, &allowed.add_peer),
        domains_table(domains)
    );
    page("Liqo", &main)
}

/// What a peer's page shows besides its card.
pub struct PeerPage<'a> {
    pub card: &'a Card,
    /// The request the peer sent us, and how our Advertisement fares there.
    pub incoming: Option<&'a str>,
    /// Its latest Events: type, reason, note.
    pub events: &'a [(String, String, String)],
    pub raw_yaml: &'a str,
    /// Its states as the dashboard saw them change.
    pub history: Option<&'a History>,
    /// The most any peer offers of each resource (a bar's full length).
    pub largest: &'a BTreeMap<&'static str, f64>,
    /// The reconciler keeps its record of the last checks and the user may read it.
    pub checks_recorded: bool,
    pub now: Timestamp,
}

/// Each way of a peering in words: ours to them (what we asked), theirs to us.
fn directions(p: &Peer) -> String {
    let ours = if p.joined() {
        chip(p)
    } else if p.join {
        format!("{} (asked)", chip(p))
    } else {
        "not asked".to_owned()
    };
    let theirs = if p.incoming { r#"<span class="chip chip-joined">peering with us</span>"# } else { "not peering with us" };
    format!("<dt>Ours to them</dt><dd>{ours}</dd><dt>Theirs to us</dt><dd>{theirs}</dd>")
}

/// In place of a table with nothing to show: its caption as a heading, and `sentence`.
fn none_yet(caption: &str, sentence: &str) -> String {
    format!("<h3 class=\"caption\">{caption}</h3><p>{sentence}</p>")
}

/// The phases as a table, each with its hint and when it last changed.
fn phases_table(p: &Peer) -> String {
    if p.phases.is_empty() {
        return none_yet("Phases", "None reported yet: the reconciler has not written this peer's conditions.");
    }
    let mut phases = table_start("Phases", false, Some(PHASES.0), PHASES.1);
    for ph in &p.phases {
        let _ = write!(
            phases,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&ph.type_),
            esc(&ph.status),
            esc(&ph.reason),
            esc(&ph.message),
            esc(ph.last_transition_time.as_deref().unwrap_or("-")),
            esc(&ph.hint)
        );
    }
    phases.push_str(TABLE_END);
    phases
}

/// What the peering made on either side, each only where it is known; a sentence when none is.
fn peering_objects(p: &Peer, incoming: Option<&str>) -> String {
    let known = [
        ("Our PeeringRequest on the remote", p.remote_peering_request.as_deref(), false),
        ("Its Advertisement here", p.advertisement.as_deref(), false),
        ("Its PeeringRequest here, and our Advertisement there", incoming, false),
        ("Its tenant namespace here", p.tenant_namespace.as_deref(), true),
        ("Ours on the remote", p.remote_tenant_namespace.as_deref(), true),
    ];
    let items: String = known
        .iter()
        .filter_map(|(label, value, code)| {
            let value = esc((*value)?);
            Some(if *code { format!("<dt>{label}</dt><dd><code>{value}</code></dd>") } else { format!("<dt>{label}</dt><dd>{value}</dd>") })
        })
        .collect();
    if items.is_empty() {
        "<p>None yet, on either side: no PeeringRequest, Advertisement or tenant namespace.</p>".into()
    } else {
        format!("<dl>{items}</dl>")
    }
}

/// The peer view: spec, both directions, what it offers, its health over time, every phase
/// with its hint, Events, the CA fingerprint, our request on the remote and its
/// Advertisement, the raw object.
pub fn peer(v: &PeerPage<'_>, csrf: &str, allowed: &Allowed) -> String {
    let p = &v.card.peer;
    let ev = if v.events.is_empty() {
        none_yet("Events", "None: no Event of this peer is kept (the API server keeps them an hour).")
    } else {
        let mut ev = table_start("Events", false, Some(EVENTS.0), EVENTS.1);
        for (t, r, n) in v.events {
            let _ = write!(ev, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(t), esc(r), esc(n));
        }
        ev.push_str(TABLE_END);
        ev
    };
    let action = if p.join {
        disconnect_button(&p.name, &allowed.join)
    } else {
        button_form("/actions/connect", &p.name, "Connect", csrf, &allowed.join)
    };
    let action = format!("{action} {}", forget_button(&p.name, &allowed.forget));
    let dash = |v: &Option<String>| esc(v.as_deref().unwrap_or("-"));
    let changed = crate::model::last_change(p).map_or("-".into(), |t| time_ago(t, v.now));
    let checked = match v.card.last_check {
        Some(check) => crate::pictures::check_ago(check, v.now),
        None if p.outgoing && v.checks_recorded => "not on record yet (the reconciler writes its record every half health period)".into(),
        None if p.outgoing => "- (no record of the checks to read: the reconciler's --last-checks-record, or your role)".into(),
        // Only a peering of ours to them is checked.
        None => "-".into(),
    };
    let main = format!(
        "<section id=\"peer-view\" data-live><h1>Peer {}</h1><p>{action}</p><dl>\
<dt>Cluster ID</dt><dd><code>{}</code></dd><dt>Type</dt><dd><span class=\"badge\">{}</span></dd><dt>State</dt><dd>{}</dd>\
<dt>Last change</dt><dd>{changed}</dd><dt>Last check</dt><dd>{checked}</dd>{}<dt>It offers</dt><dd>{}</dd></dl>\
<h2>How we reach it</h2><dl><dt>Auth URL</dt><dd>{}</dd><dt>API URL</dt><dd>{}</dd><dt>CA fingerprint</dt><dd><code>{}</code></dd></dl>\
<h2>The peering's objects</h2>{}\
<h2>Health</h2>{}{}{ev}<details><summary>The object (YAML)</summary><pre>{}</pre></details></section>",
        esc(&p.name),
        esc(&p.cluster_id),
        esc(&p.discovery_type),
        state_cell(p),
        directions(p),
        offer_bars(&v.card.offers, v.largest),
        dash(&p.auth_url),
        dash(&p.api_url),
        dash(&p.fingerprint_shown()),
        peering_objects(p, v.incoming),
        health_strip(v.history, v.now),
        phases_table(p),
        esc(v.raw_yaml)
    );
    page(&format!("Liqo · {}", p.name), &main)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-11-23T10:05:00Z".parse().unwrap()
    }

    /// A peer's page with no history and no offers to compare.
    fn page_of<'a>(card: &'a Card, incoming: Option<&'a str>, events: &'a [(String, String, String)], raw_yaml: &'a str) -> PeerPage<'a> {
        static NONE: BTreeMap<&'static str, f64> = BTreeMap::new();
        PeerPage { card, incoming, events, raw_yaml, history: None, largest: &NONE, checks_recorded: true, now: now() }
    }

    /// Every peer, the first page of each table.
    fn listing(peers: &crate::model::Peers) -> Listing {
        Listing::of(peers.clone(), Default::default())
    }

    #[test]
    fn each_stacked_tables_cells_are_named_in_the_stylesheet_as_its_heads() {
        let css = include_str!("../assets/app.css");
        for (class, heads) in STACKED {
            for (i, head) in heads.iter().enumerate() {
                let rule = format!(".{class} td:nth-child({}) ::before {{ content: \"{head}\"; }}", i + 1).replace(" ::", "::");
                assert!(css.contains(&rule), "app.css lacks {rule}");
            }
            let extra = format!(".{class} td:nth-child({})::before", heads.len() + 1);
            assert!(!css.contains(&extra), "app.css names a column {class} does not have: {extra}");
            assert!(table_start("c", false, Some(class), heads).contains(&format!("<table class=\"stack {class}\">")));
        }
    }

    #[test]
    fn escaping_covers_text_and_attributes() {
        assert_eq!(esc("<script>alert('x')</script> & \"q\""), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
    }

    #[test]
    fn what_a_hostile_peer_writes_is_shown_as_text() {
        let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "evil"},
            "spec": {"clusterIdentity": {"clusterID": "x", "clusterName": "<img src=x onerror=alert(1)>"}, "join": true},
            "status": {"conditions": [{"type": "Joined", "status": "False", "reason": "PeerRefused",
                "message": "<script>alert(1)</script>\"><svg onload=alert(2)>", "lastTransitionTime": "2026-11-23T10:00:00Z"}]}
        }))
        .unwrap();
        let peers = crate::model::peers(&[fc], &[] as &[liqo_api::Advertisement]);
        let page = home(&ThisCluster::default(), &listing(&peers), &[], "token", None, &Allowed::default(), now());
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(!page.contains("<svg onload"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "the message is there, as text");
        let view = peer(
            &page_of(&peers.available[0], Some("<u>Created</u>"), &[("Warning".into(), "X".into(), "<b>bold</b>".into())], "name: <i>"),
            "token",
            &Allowed::default(),
        );
        assert!(!view.contains("<b>bold") && !view.contains("<i>") && !view.contains("<u>"), "{view}");
        // Only our own script, from our own origin.
        assert_eq!(page.matches("<script").count(), 1);
        assert!(page.contains("<script src=\"/app.js\" defer></script>"));
    }

    #[test]
    fn every_form_carries_the_csrf_token() {
        let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "a"},
            "spec": {"clusterIdentity": {"clusterID": "x"}}}))
        .unwrap();
        let page = home(
            &ThisCluster::default(),
            &listing(&crate::model::peers(&[fc], &[] as &[liqo_api::Advertisement])),
            &[],
            "tok-123",
            None,
            &Allowed::default(),
            now(),
        );
        // Every form that changes something posts, with the token; the search only reads.
        let forms = page.matches("<form").count() - 1;
        assert_eq!(page.matches("<form method=\"get\" action=\"/\" role=\"search\"").count(), 1);
        assert!(forms >= 6, "switches, connect, two add forms: {forms}");
        assert_eq!(page.matches("name=\"csrf\" value=\"tok-123\"").count(), forms);
        assert!(page.matches("method=\"post\"").count() == forms);
    }

    #[test]
    fn disconnect_asks_first_and_the_question_posts_with_the_token() {
        let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "a b<c"},
            "spec": {"clusterIdentity": {"clusterID": "x"}, "join": true}}))
        .unwrap();
        let peers = crate::model::peers(&[fc], &[] as &[liqo_api::Advertisement]);
        let view = peer(&page_of(&peers.available[0], None, &[], ""), "tok-123", &Allowed::default());
        // The button only asks: a link to the question, no token, nothing written.
        assert!(
            view.contains("<a class=\"button danger\" href=\"/peers/a%20b%3Cc/disconnect\" aria-label=\"Disconnect a b&lt;c\">"),
            "{view}"
        );
        let asked = confirm_disconnect("a b<c", true, "tok-123", &None);
        assert!(asked.contains("<h1 id=\"confirm\">Disconnect a b&lt;c?</h1>"), "{asked}");
        assert!(asked.contains("<form method=\"post\" action=\"/actions/disconnect\""));
        assert!(asked.contains("name=\"csrf\" value=\"tok-123\"") && asked.contains("name=\"name\" value=\"a b&lt;c\""));
        assert!(asked.contains("aria-label=\"Yes, disconnect a b&lt;c\""));
        assert!(asked.contains("<a href=\"/peers/a%20b%3Cc\">Cancel</a>"));
        assert!(asked.contains("Advertisement here goes with it"), "says what it undoes");
        let refused = confirm_disconnect("a", true, "t", &Some("you may not patch foreignclusters".into()));
        assert!(refused.contains("disabled title=\"you may not patch foreignclusters\""), "{refused}");
    }

    #[test]
    fn a_peer_shows_both_directions_its_offers_as_bars_and_its_health_over_time() {
        let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "b"},
            "spec": {"clusterIdentity": {"clusterID": "b-id"}, "join": true},
            "status": {"outgoing": {"joined": true}, "incoming": {"joined": true}, "conditions": [
                {"type": "Joined", "status": "True", "reason": "Joined", "message": "m", "lastTransitionTime": "2026-11-23T10:02:00Z"}]}}))
        .unwrap();
        let mut advert = liqo_api::Advertisement::new(
            "advertisement-b-id",
            serde_json::from_value(serde_json::json!({"clusterId": "b-id", "resources": {"cpu": "4", "pods": "110"}})).unwrap(),
        );
        advert.metadata.namespace = Some("liqo-tenant-b-id".into());
        let adverts = [advert];
        let peers = crate::model::peers(&[fc], &adverts);
        let largest = BTreeMap::from([("cpu", 8.0), ("pods", 110.0)]);
        let mut seen = crate::history::Histories::default();
        seen.record("b", Chip::Joining, "2026-11-23T10:01:00Z".parse().unwrap());
        seen.record("b", Chip::Joined, "2026-11-23T10:02:00Z".parse().unwrap());
        let history = seen.of("b");
        let card = &peers.connected[0];
        let page = PeerPage { history: history.as_ref(), largest: &largest, ..page_of(card, None, &[], "") };
        let view = peer(&page, "t", &Allowed::default());
        assert!(view.contains("<dt>Ours to them</dt><dd><span class=\"chip chip-joined\">joined</span></dd>"), "{view}");
        assert!(view.contains("<dt>Theirs to us</dt><dd><span class=\"chip chip-joined\">peering with us</span></dd>"), "{view}");
        assert!(view.contains("<dt>Last change</dt><dd><time datetime=\"2026-11-23T10:02:00Z\" data-ago>3 min ago</time>"), "{view}");
        assert!(view.contains("<meter max=\"8\" value=\"4\" title=\"cpu\">"), "half the largest CPU offer: {view}");
        assert!(view.contains("<meter max=\"110\" value=\"110\" title=\"pods\">"), "{view}");
        assert!(view.contains("<rect class=\"chip-joining\" x=\"0.0\" y=\"0\" width=\"250.0\""), "a quarter of 4 min: {view}");
        // The home's table: the same bars, and how long ago it changed.
        let home_page = home(&ThisCluster::default(), &listing(&peers), &[], "t", None, &Allowed::default(), now());
        assert!(home_page.contains("<meter max=\"4\" value=\"4\" title=\"cpu\">"), "full: it is the largest listed: {home_page}");
        assert!(home_page.contains("<span class=\"since\">changed <time datetime=\"2026-11-23T10:02:00Z\" data-ago>3 min ago</time>"));
        let unknown = peer(&page_of(card, None, &[], ""), "t", &Allowed::default());
        assert!(unknown.contains("Nothing seen yet"), "a peer the dashboard has not seen change");
        assert!(unknown.contains("<dt>Last check</dt><dd>not on record yet"), "{unknown}");
        let unrecorded = peer(&PeerPage { checks_recorded: false, ..page_of(card, None, &[], "") }, "t", &Allowed::default());
        assert!(unrecorded.contains("<dt>Last check</dt><dd>- (no record of the checks to read"), "{unrecorded}");
        // The reconciler's record: when it last checked the peer, on its page and in the table.
        let checked = peers.clone().checked(&liqo_api::last_checks::Record::naming([
            ("a".into(), "2026-11-23T09:00:00Z".parse().unwrap()),
            ("b".into(), "2026-11-23T10:04:48Z".parse().unwrap()),
        ]));
        let card = &checked.connected[0];
        let view = peer(&page_of(card, None, &[], ""), "t", &Allowed::default());
        assert!(view.contains("<dt>Last check</dt><dd><time datetime=\"2026-11-23T10:04:48Z\" data-ago>12 s ago</time></dd>"), "{view}");
        let home_page = home(&ThisCluster::default(), &listing(&checked), &[], "t", None, &Allowed::default(), now());
        assert!(
            home_page.contains("<span class=\"since\">checked <time datetime=\"2026-11-23T10:04:48Z\" data-ago>12 s ago</time></span>"),
            "{home_page}"
        );
        // A peer checked on time: at or after the record's "since" time, said as "within".
        let on_time =
            peers.checked(&liqo_api::last_checks::Record { since: Some("2026-11-23T10:04:30Z".parse().unwrap()), late: Vec::new() });
        let view = peer(&page_of(&on_time.connected[0], None, &[], ""), "t", &Allowed::default());
        assert!(
            view.contains("<dt>Last check</dt><dd>within <time datetime=\"2026-11-23T10:04:30Z\" data-within>30 s</time></dd>"),
            "{view}"
        );
    }

    #[test]
    fn forget_asks_first_says_what_it_undoes_and_whether_the_peer_comes_back() {
        let asked = confirm_forget("a b<c", true, true, "tok", &None);
        assert!(asked.contains("<h1 id=\"confirm\">Forget a b&lt;c?</h1>"), "{asked}");
        assert!(asked.contains("<form method=\"post\" action=\"/actions/forget\"") && asked.contains("name=\"csrf\" value=\"tok\""));
        assert!(asked.contains("The peering is undone first") && asked.contains("discovery finds it again"), "{asked}");
        let manual = confirm_forget("m", false, false, "tok", &Some("you may not delete foreignclusters".into()));
        assert!(!manual.contains("undone first") && !manual.contains("finds it again"), "{manual}");
        assert!(manual.contains("disabled title=\"you may not delete foreignclusters\""));
        let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "m"},
            "spec": {"clusterIdentity": {"clusterID": "x"}}}))
        .unwrap();
        let peers = crate::model::peers(&[fc], &[] as &[liqo_api::Advertisement]);
        let view = peer(&page_of(&peers.available[0], None, &[], ""), "tok", &Allowed::default());
        assert!(view.contains("<a class=\"button danger\" href=\"/peers/m/forget\" aria-label=\"Forget m\">Forget</a>"), "{view}");
    }

    #[test]
    fn a_refusal_from_when_a_peer_was_asked_is_said_as_past() {
        let peer = |join: bool, type_: &str| {
            let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
                "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "a"},
                "spec": {"clusterIdentity": {"clusterID": "x"}, "join": join},
                "status": {"conditions": [{"type": type_, "status": "False", "reason": "R", "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"}]}}))
            .unwrap();
            state_cell(&Peer::of(&fc))
        };
        assert!(peer(false, "Joined").contains("<span class=\"msg\">when last asked, Joined: R</span>"), "{}", peer(false, "Joined"));
        assert!(peer(true, "Joined").contains("<span class=\"msg\">Joined: R</span>"));
        assert!(peer(false, "RemoteReachable").contains("<span class=\"msg\">RemoteReachable: R</span>"), "still true now");
    }

    #[test]
    fn the_peer_view_shows_the_fingerprint_awaiting_approval() {
        let fp = "c9".repeat(32);
        let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "a"},
            "spec": {"clusterIdentity": {"clusterID": "x"}, "join": true},
            "status": {"outgoing": {"joined": false, "presentedFingerprint": fp}}}))
        .unwrap();
        let card = crate::model::peers(&[fc], &[] as &[liqo_api::Advertisement]).available.remove(0);
        let page = peer(&page_of(&card, None, &[], ""), "t", &Allowed::default());
        assert!(page.contains(&format!("<dt>CA fingerprint</dt><dd><code>{fp} (presented, not approved)</code></dd>")), "{page}");
    }

    #[test]
    fn the_peer_view_lists_only_the_peerings_objects_that_exist() {
        let fc = |status: serde_json::Value| -> liqo_api::ForeignCluster {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "a"},
                "spec": {"clusterIdentity": {"clusterID": "x"}, "join": true}, "status": status}))
            .unwrap()
        };
        let view = |f: liqo_api::ForeignCluster, incoming: Option<&str>| {
            let peers = crate::model::peers(&[f], &[] as &[liqo_api::Advertisement]);
            let card = peers.available.first().or(peers.connected.first()).unwrap().clone();
            peer(&page_of(&card, incoming, &[], ""), "t", &Allowed::default())
        };
        let none = view(fc(serde_json::json!({})), None);
        assert!(none.contains("<h2>The peering's objects</h2><p>None yet, on either side"), "{none}");
        assert!(!none.contains("Ours on the remote"), "{none}");
        // No empty tables of headers only: a sentence says there is nothing yet.
        assert!(none.contains("<h3 class=\"caption\">Events</h3><p>None: no Event"), "{none}");
        assert!(none.contains("<h3 class=\"caption\">Phases</h3><p>None reported yet"), "{none}");
        assert!(!none.contains("<caption>"), "{none}");
        let some = view(
            fc(
                serde_json::json!({"outgoing": {"joined": true, "remotePeeringRequestName": "pr-<1>"}, "tenantNamespace": {"local": "liqo-tenant-x"}}),
            ),
            Some("Created"),
        );
        assert!(some.contains("<dt>Our PeeringRequest on the remote</dt><dd>pr-&lt;1&gt;</dd>"), "{some}");
        assert!(some.contains("<dt>Its PeeringRequest here, and our Advertisement there</dt><dd>Created</dd>"), "{some}");
        assert!(some.contains("<dt>Its tenant namespace here</dt><dd><code>liqo-tenant-x</code></dd>"), "{some}");
        assert!(!some.contains("Its Advertisement here") && !some.contains("Ours on the remote") && !some.contains("None yet"), "{some}");
    }

    #[test]
    fn what_rbac_refuses_is_disabled_with_the_reason() {
        let fc: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "a"},
            "spec": {"clusterIdentity": {"clusterID": "x"}}}))
        .unwrap();
        let allowed = Allowed { join: Some("you may not patch foreignclusters".into()), ..Default::default() };
        let page = home(
            &ThisCluster::default(),
            &listing(&crate::model::peers(&[fc], &[] as &[liqo_api::Advertisement])),
            &[],
            "t",
            None,
            &allowed,
            now(),
        );
        assert!(page.contains("aria-label=\"Connect a\" disabled title=\"you may not patch foreignclusters\""), "{page}");
        assert_eq!(page.matches(" disabled").count(), 1, "only what is refused");
    }

    #[test]
    fn refused_requests_are_listed_escaped() {
        let t = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::from_second(1_795_000_000).unwrap());
        let this = ThisCluster {
            refused: vec![liqo_api::RefusedRequest {
                cluster_id: "stranger-id".into(),
                cluster_name: Some("<script>x</script>".into()),
                message: "peeringPolicy AcceptKnown: not chosen".into(),
                first_time: t.clone(),
                last_time: t,
                count: 3,
            }],
            ..Default::default()
        };
        let page = home(&this, &Listing::default(), &[], "t", None, &Allowed::default(), now());
        assert!(page.contains("<caption>Refused peering requests</caption>"), "{page}");
        assert!(page.contains("<td><code>stranger-id</code></td><td>&lt;script&gt;x&lt;/script&gt;</td><td>3</td>"), "{page}");
        assert!(!page.contains("<script>x"), "what a stranger wrote is escaped");
    }

    #[test]
    fn this_cluster_shows_what_peers_are_told_escaped() {
        let this = ThisCluster {
            auth_url: Some("https://10.0.0.1:30443/<x>".into()),
            auth_ca_fingerprint: Some("ab".repeat(32)),
            ..Default::default()
        };
        let page = home(&this, &Listing::default(), &[], "t", None, &Allowed::default(), now());
        assert!(page.contains("<code>https://10.0.0.1:30443/&lt;x&gt;</code>"), "{page}");
        assert!(page.contains(&format!("<code class=\"fingerprint\">{}</code>", "ab".repeat(32))), "{page}");
        let unpublished = home(&ThisCluster::default(), &Listing::default(), &[], "t", None, &Allowed::default(), now());
        assert!(!unpublished.contains("class=\"told\""), "nothing claimed before the reconciler published it");
        assert!(!unpublished.contains("class=\"warning\""));
    }

    #[test]
    fn this_cluster_shows_where_its_addresses_came_from_and_why_peers_may_not_reach_it() {
        let this = ThisCluster {
            auth_url: Some("https://10.0.0.1:30443".into()),
            auth_url_from: Some("Service liqo-auth (NodePort) on node <n> (InternalIP)".into()),
            api_url: Some("https://10.96.0.1:443".into()),
            api_url_from: Some("this process's API server URL".into()),
            addresses_warning: Some("the API server URL https://10.96.0.1:443 is a Service ClusterIP, which no peer can reach: set LIQO_API_URL in ConfigMap liqo-reconciler-env".into()),
            ..Default::default()
        };
        let page = home(&this, &Listing::default(), &[], "t", None, &Allowed::default(), now());
        assert!(
            page.contains(
                "Auth service <code>https://10.0.0.1:30443</code> (from Service liqo-auth (NodePort) on node &lt;n&gt; (InternalIP))"
            ),
            "{page}"
        );
        assert!(
            page.contains("API server <code>https://10.96.0.1:443</code> (from this process&#x27;s API server URL)")
                || page.contains("API server <code>https://10.96.0.1:443</code> (from this process&#39;s API server URL)"),
            "{page}"
        );
        assert!(page.contains("<p class=\"warning\" role=\"alert\">Peers may not reach this cluster: the API server URL https://10.96.0.1:443 is a Service ClusterIP"), "{page}");
    }

    #[test]
    fn a_refusal_is_shown_at_the_field_it_names() {
        let e = FormError { form: "peer", field: Some("cluster_id"), message: "clusterID: not a DNS-1123 label".into() };
        let page = home(&ThisCluster::default(), &Listing::default(), &[], "t", Some(&e), &Allowed::default(), now());
        let at = page.find("id=\"peer-cluster_id\"").unwrap();
        let err = page.find("id=\"peer-cluster_id-error\"").unwrap();
        assert!(err > at && page[at..err].find("<label").is_none(), "the error follows its field");
        assert!(page.contains("aria-invalid=\"true\" aria-describedby=\"peer-cluster_id-error\""));
    }

    #[test]
    fn a_refused_connect_is_shown_even_without_its_peer() {
        let e = FormError { form: "peers", field: None, message: "foreignclusters \"p\" is forbidden: <b>".into() };
        let page = home(&ThisCluster::default(), &Listing::default(), &[], "t", Some(&e), &Allowed::default(), now());
        let section = &page[page.find("id=\"available-section\"").unwrap()..page.find("id=\"connected-section\"").unwrap()];
        assert!(section.contains("role=\"alert\">foreignclusters &quot;p&quot; is forbidden: &lt;b&gt;</div>"), "{section}");
    }

    #[test]
    fn the_login_page_asks_for_a_token_and_escapes_the_refusal() {
        let page = login(Some("refused <script>"));
        assert!(page.contains("type=\"password\" id=\"token\" name=\"token\""));
        assert!(page.contains("refused &lt;script&gt;") && !page.contains("<script>"));
        let signed =
            signed_in(&home(&ThisCluster::default(), &Listing::default(), &[], "csrf-1", None, &Allowed::default(), now()), "csrf-1");
        let header = &signed[signed.find("<header>").unwrap()..signed.find("</header>").unwrap()];
        assert!(header.contains("action=\"/logout\"") && header.contains("value=\"csrf-1\""), "{header}");
    }

    #[test]
    fn the_peers_are_shown_a_page_at_a_time_as_the_search_selects() {
        let fc = |i: usize, join: bool| -> liqo_api::ForeignCluster {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": format!("peer-{i:03}")},
                "spec": {"clusterIdentity": {"clusterID": format!("id-{i:03}")}, "join": join}}))
            .unwrap()
        };
        let fcs: Vec<_> = (0..120).map(|i| fc(i, i % 3 == 0)).collect();
        let all = crate::model::peers(&fcs, &[] as &[liqo_api::Advertisement]);
        let page = |view: crate::model::View| {
            home(&ThisCluster::default(), &Listing::of(all.clone(), view), &[], "t", None, &Allowed::default(), now())
        };

        // The first page: 25 rows, a link to the next, every peer counted by state.
        let first = page(Default::default());
        assert_eq!(first.matches("<a href=\"/peers/").count(), crate::model::PAGE);
        assert!(first.contains("peer-000<") && first.contains("peer-024<") && !first.contains("peer-025<"));
        assert!(first.contains("<p id=\"peer-counts\">120 peers: NotJoining 80, Pending 40</p>"), "{first}");
        assert!(first.contains("<a href=\"/?available=2\">next ›</a>"), "{first}");
        assert!(first.contains("page 1 of 5 (120 peers)"));
        // 120 peers are too many to draw one by one: two groups, each a link to its list.
        assert!(first.contains("This cluster and its 120 peers, in 2 groups by state and type"), "{first}");
        let t = &all.available[0].peer.discovery_type;
        let link = crate::model::View::group_link("available", t).replace('&', "&amp;");
        assert!(first.contains(&format!("<a href=\"{link}\"><title>80 {t} peers available: list them</title>")), "{first}");
        let group = page(crate::model::View { state: "available".into(), type_: t.clone(), ..Default::default() });
        assert!(group.contains("120 peers: NotJoining 80, Pending 40 · 80 match the search"), "the link lists that group");
        assert!(group.contains("<option value=\"available\" selected>available</option>"), "the chip's words stay chosen");

        // The last page, past the end: what is left.
        let last = page(crate::model::View { available: 9, ..Default::default() });
        assert!(last.contains("peer-119<") && !last.contains("peer-099<"), "{last}");
        assert!(last.contains("<a href=\"/?available=4\">‹ previous</a>"), "{last}");

        // A search and a state: both kept in the links; only what matches.
        let view = crate::model::View { q: "PEER-0".into(), state: "pending".into(), ..Default::default() };
        let found = page(view.clone());
        let rows = found.matches("<a href=\"/peers/").count();
        assert_eq!(rows, crate::model::PAGE, "a page of peer-000..099 that asked to join");
        assert!(found.contains("120 peers: NotJoining 80, Pending 40 · 34 match the search"), "{found}");
        assert!(found.contains("value=\"PEER-0\"") && found.contains("<option value=\"Pending\" selected>Pending (40)</option>"));
        assert_eq!(view.link("available", 2), "/?q=PEER-0&state=pending&available=2");
        let hostile = crate::model::View { q: "\"><script>&x=1".into(), ..Default::default() };
        assert_eq!(hostile.link("connected", 3), "/?q=%22%3E%3Cscript%3E%26x%3D1&connected=3");
        assert!(!page(hostile).contains("\"><script>"));
    }
}
