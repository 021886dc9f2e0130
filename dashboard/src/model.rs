//! What the pages show, computed from the watch-fed stores (pure): this cluster, the peers
//! split into Available and Connected, the domains, and the picture's nodes and edges. The
//! phases and hints are `liqo_api::summary`'s, the same `kubectl liqo status` prints.

use liqo_api::names::LABEL_SEARCHDOMAIN;
use liqo_api::summary::Peer;
use liqo_api::{Advertisement, ClusterConfigSpec, ClusterConfigStatus, ForeignCluster, SearchDomain};

/// This cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThisCluster {
    pub cluster_id: String,
    pub cluster_name: String,
    pub namespace: String,
    pub discovery: bool,
    pub advertisement: bool,
    pub autojoin: bool,
    pub peering_policy: String,
    /// What peers are told, as the reconciler published it: the auth service URL and the
    /// fingerprint a peer's operator approves.
    pub auth_url: Option<String>,
    pub auth_ca_fingerprint: Option<String>,
    /// The API server URL peers are told, and where each URL came from.
    pub api_url: Option<String>,
    pub auth_url_from: Option<String>,
    pub api_url_from: Option<String>,
    /// Condition `AddressesReachable` when not True: why peers may not reach us, with the
    /// value to set.
    pub addresses_warning: Option<String>,
    /// PeeringRequests our policy refused lately (who asked, when, how often).
    pub refused: Vec<liqo_api::RefusedRequest>,
}

impl ThisCluster {
    pub fn of(cluster_id: Option<String>, namespace: &str, config: &ClusterConfigSpec, told: Option<&ClusterConfigStatus>) -> Self {
        let d = &config.discovery_config;
        Self {
            cluster_id: cluster_id.unwrap_or_else(|| "(not known yet)".into()),
            cluster_name: d.cluster_name.clone().unwrap_or_default(),
            namespace: namespace.to_owned(),
            discovery: d.enable_discovery,
            advertisement: d.enable_advertisement,
            autojoin: d.autojoin,
            peering_policy: config.peering_policy.as_str().to_owned(),
            auth_url: told.and_then(|t| t.auth_url.clone()),
            auth_ca_fingerprint: told.and_then(|t| t.auth_ca_fingerprint.clone()),
            api_url: told.and_then(|t| t.api_url.clone()),
            auth_url_from: told.and_then(|t| t.auth_url_from.clone()),
            api_url_from: told.and_then(|t| t.api_url_from.clone()),
            addresses_warning: told.and_then(|t| t.addresses_warning()).map(|c| c.message.clone()),
            refused: told.map(|t| t.refused_requests.clone()).unwrap_or_default(),
        }
    }
}

/// Which way a connected peering goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Outgoing,
    Incoming,
    Both,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Self::Outgoing => "outgoing",
            Self::Incoming => "incoming",
            Self::Both => "both ways",
        }
    }
}

/// A peer on the home view.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    pub peer: Peer,
    /// The SearchDomain that found it (WAN).
    pub found_in: Option<String>,
    /// `spec.trustMode`.
    pub trust: String,
    /// Connected: which way.
    pub direction: Option<Direction>,
    /// Connected: the remote answers.
    pub healthy: bool,
    /// The resources of the peer's Advertisement here, one by one (empty without one).
    pub offers: Vec<Offer>,
    /// When the reconciler last checked it, from its record (none: not joined by us, not on
    /// record yet, or the record not readable).
    pub last_check: Option<liqo_api::last_checks::LastCheck>,
}

/// One resource a peer offers in its Advertisement.
#[derive(Clone, Debug, PartialEq)]
pub struct Offer {
    /// `cpu`, `memory`, `pods`.
    pub resource: &'static str,
    /// As the Advertisement says it (`32Gi`).
    pub text: String,
    /// Its amount in base units (cores, bytes, pods), when it reads as a quantity.
    pub amount: Option<f64>,
}

/// A Kubernetes quantity in base units (`500m` is 0.5, `32Gi` is 32·2³⁰), `None` for
/// anything else.
pub use liqo_api::quantity::parse as quantity;

/// The most any peer offers of each resource: a bar's full length.
pub type Largest = std::collections::BTreeMap<&'static str, f64>;

/// The largest amount of each resource any peer offers (pure): the full length of a bar.
pub fn largest_offers(cards: &[Card]) -> Largest {
    largest(cards.iter().flat_map(|c| &c.offers))
}

/// The most of each resource among `offers` (those with a readable amount).
fn largest<'a>(offers: impl Iterator<Item = &'a Offer>) -> Largest {
    let mut out = Largest::new();
    for o in offers {
        if let Some(a) = o.amount {
            let e = out.entry(o.resource).or_insert(0.0_f64);
            *e = e.max(a);
        }
    }
    out
}

/// How long ago `then` was at `now`, in the words a table uses: `12 s`, `3 min`, `5 h`,
/// `2 d` (pure; a time in the future is `0 s`).
pub fn ago(then: k8s_openapi::jiff::Timestamp, now: k8s_openapi::jiff::Timestamp) -> String {
    let s = (now.as_second() - then.as_second()).max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86400),
    }
}

/// When a peer's state last changed: the latest transition among its phases.
pub fn last_change(p: &Peer) -> Option<k8s_openapi::jiff::Timestamp> {
    p.phases.iter().filter_map(|ph| ph.last_transition_time.as_deref()?.parse().ok()).max()
}

/// The home view's peers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Peers {
    pub available: Vec<Card>,
    pub connected: Vec<Card>,
}

/// What `a` offers, read off its typed fields (no JSON on the way: the home reads every
/// peer's at 10,000).
fn offers_of(a: &Advertisement) -> Vec<Offer> {
    let r = &a.spec.resources;
    [("cpu", &r.cpu), ("memory", &r.memory), ("pods", &r.pods)]
        .into_iter()
        .filter_map(|(resource, q)| q.as_ref().map(|q| Offer { resource, text: q.0.clone(), amount: quantity(&q.0) }))
        .collect()
}

/// Each peer's own Advertisement, by its cluster ID: in its tenant namespace (another peer may
/// write one claiming it in its own).
fn own_advertisements<A: std::borrow::Borrow<Advertisement>>(adverts: &[A]) -> std::collections::HashMap<&str, &Advertisement> {
    adverts
        .iter()
        .map(|a| a.borrow())
        .filter(|a| a.metadata.namespace.as_deref() == Some(liqo_api::names::tenant_namespace(&a.spec.cluster_id).as_str()))
        .map(|a| (a.spec.cluster_id.as_str(), a))
        .collect()
}

/// The most any peer offers of each resource, from their own Advertisements (pure).
pub fn largest_advertised<A: std::borrow::Borrow<Advertisement>>(adverts: &[A]) -> Largest {
    let offers: Vec<Offer> = own_advertisements(adverts).values().flat_map(|a| offers_of(a)).collect();
    largest(offers.iter())
}

/// Splits the ForeignClusters: Connected when a peering runs either way, else Available.
pub fn peers<F: std::borrow::Borrow<ForeignCluster>, A: std::borrow::Borrow<Advertisement>>(fcs: &[F], adverts: &[A]) -> Peers {
    let mut out = Peers::default();
    let by_sender = own_advertisements(adverts);
    let mut sorted: Vec<&ForeignCluster> = fcs.iter().map(|f| f.borrow()).collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for fc in sorted {
        let peer = Peer::of(fc);
        let direction = match (peer.outgoing, peer.incoming) {
            (true, true) => Some(Direction::Both),
            (true, false) => Some(Direction::Outgoing),
            (false, true) => Some(Direction::Incoming),
            (false, false) => None,
        };
        let healthy = peer.phase(liqo_api::reasons::ConditionType::RemoteReachable).is_none_or(|p| p.status == "True");
        let card = Card {
            found_in: fc.metadata.labels.as_ref().and_then(|l| l.get(LABEL_SEARCHDOMAIN).cloned()),
            trust: fc.spec.trust_mode().as_str().to_owned(),
            direction,
            healthy,
            offers: by_sender.get(peer.cluster_id.as_str()).map_or_else(Vec::new, |a| offers_of(a)),
            peer,
            last_check: None,
        };
        if card.direction.is_some() { out.connected.push(card) } else { out.available.push(card) }
    }
    out
}

impl Peers {
    /// Each card with its last check from `record` (see [`liqo_api::last_checks::Record`]): what
    /// it says of a peer we joined, and of another only if it names it.
    pub fn checked(mut self, record: &liqo_api::last_checks::Record) -> Self {
        for card in self.connected.iter_mut().chain(self.available.iter_mut()) {
            card.last_check = record.of(&card.peer.name, card.peer.outgoing);
        }
        self
    }
}

/// How many peers a table of the home view shows at once: a screenful, and the home at
/// 10,000 peers well under 50 KB.
pub const PAGE: usize = 25;

/// What the home view shows of the peers, from its query string: a search (`q`: in the name,
/// cluster ID or cluster name, any case), a state (`state`: as the summary names it, its phase
/// or reason alone, or a chip's words such as `not reachable`), a type (`type`: LAN, WAN,
/// Manual, IncomingPeering) and the page of each table (`available`, `connected`; from 1).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct View {
    pub q: String,
    pub state: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub available: usize,
    pub connected: usize,
}

impl View {
    pub fn selects(&self, c: &Card) -> bool {
        let p = &c.peer;
        let q = self.q.trim().to_lowercase();
        let found = q.is_empty()
            || [p.name.as_str(), p.cluster_id.as_str(), p.cluster_name.as_deref().unwrap_or_default()]
                .iter()
                .any(|v| v.to_lowercase().contains(&q));
        let state = self.state.trim();
        let in_state = state.is_empty() || p.in_state(state) || Chip::of(p).label().eq_ignore_ascii_case(state);
        let typed = self.type_.trim().is_empty() || p.discovery_type.eq_ignore_ascii_case(self.type_.trim());
        found && in_state && typed
    }

    /// The home view showing only the peers in state `state` of type `type_` (a group of the
    /// picture).
    pub fn group_link(state: &str, type_: &str) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("state", state);
        if !type_.is_empty() {
            query.append_pair("type", type_);
        }
        format!("/?{}", query.finish())
    }

    /// The link to this view with `table`'s page set to `page` (the query string, escaped).
    pub fn link(&self, table: &str, page: usize) -> String {
        let mut v = self.clone();
        if table == "available" {
            v.available = page
        } else {
            v.connected = page
        }
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, val) in [("q", v.q.as_str()), ("state", v.state.as_str()), ("type", v.type_.as_str())] {
            if !val.is_empty() {
                query.append_pair(k, val);
            }
        }
        for (k, n) in [("available", v.available), ("connected", v.connected)] {
            if n > 1 {
                query.append_pair(k, &n.to_string());
            }
        }
        let query = query.finish();
        if query.is_empty() { "/".into() } else { format!("/?{query}") }
    }
}

/// One page of a table: its cards, which page of how many, and how many were selected.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown<'a> {
    pub cards: &'a [Card],
    pub page: usize,
    pub pages: usize,
    pub selected: usize,
}

impl<'a> Shown<'a> {
    /// Page `page` (from 1; past the end: the last) of `cards`.
    pub fn of(cards: &'a [Card], page: usize) -> Self {
        let pages = cards.len().div_ceil(PAGE).max(1);
        let page = page.clamp(1, pages);
        let start = (page - 1) * PAGE;
        Self { cards: &cards[start..cards.len().min(start + PAGE)], page, pages, selected: cards.len() }
    }
}

/// The peers as the home view lists them: every peer counted by state, those `view` selects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Listing {
    /// The most any peer offers of each resource (a bar's full length).
    pub largest: Largest,
    /// The peers `view` selects, split as [`peers`] splits them.
    pub selected: Peers,
    /// Every peer by state, the most frequent first.
    pub by_state: Vec<(String, usize)>,
    /// Every peer by chip and type, the most frequent first: the picture's groups.
    pub groups: Vec<Group>,
    /// The types of every peer, with how many of each.
    pub by_type: Vec<(String, usize)>,
    pub total: usize,
    pub view: View,
}

impl Listing {
    pub fn of(all: Peers, view: View) -> Self {
        let mut counts = std::collections::BTreeMap::<String, usize>::new();
        for c in all.available.iter().chain(&all.connected) {
            *counts.entry(c.peer.state_key()).or_default() += 1;
        }
        let mut by_state: Vec<(String, usize)> = counts.into_iter().collect();
        by_state.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let total = all.available.len() + all.connected.len();
        let largest = largest_offers(&all.connected);
        let groups = groups(all.available.iter().chain(&all.connected));
        let mut by_type = std::collections::BTreeMap::<String, usize>::new();
        for g in &groups {
            *by_type.entry(g.type_.clone()).or_default() += g.count;
        }
        let keep = |cards: Vec<Card>| cards.into_iter().filter(|c| view.selects(c)).collect();
        let selected = Peers { available: keep(all.available), connected: keep(all.connected) };
        Self { largest, selected, by_state, groups, by_type: by_type.into_iter().collect(), total, view }
    }

    pub fn available(&self) -> Shown<'_> {
        Shown::of(&self.selected.available, self.view.available)
    }

    pub fn connected(&self) -> Shown<'_> {
        Shown::of(&self.selected.connected, self.view.connected)
    }
}

/// Peers of one chip and one type, as the picture draws them when there are many.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub chip: Chip,
    pub type_: String,
    pub count: usize,
    /// Of those, how many peer with us (incoming).
    pub incoming: usize,
}

/// The peers grouped by chip and type (pure), the largest group first.
pub fn groups<'a>(cards: impl Iterator<Item = &'a Card>) -> Vec<Group> {
    let mut by = std::collections::HashMap::<(Chip, &str), (usize, usize)>::new();
    for c in cards {
        let e = by.entry((Chip::of(&c.peer), c.peer.discovery_type.as_str())).or_default();
        e.0 += 1;
        e.1 += usize::from(c.peer.incoming);
    }
    let mut out: Vec<Group> =
        by.into_iter().map(|((chip, t), (count, incoming))| Group { chip, type_: t.to_owned(), count, incoming }).collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.chip.label().cmp(b.chip.label())).then(a.type_.cmp(&b.type_)));
    out
}

/// A domain on the home view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    pub domain: String,
    pub ready: String,
    pub reason: String,
    pub found: usize,
}

pub fn domains(sds: &[SearchDomain]) -> Vec<Domain> {
    let mut out: Vec<Domain> = sds
        .iter()
        .map(|sd| {
            let status = sd.status.clone().unwrap_or_default();
            let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
            Domain {
                name: sd.metadata.name.clone().unwrap_or_default(),
                domain: sd.spec.domain.clone(),
                ready: ready.map_or("Unknown".into(), |c| c.status.clone()),
                reason: ready.map_or("-".into(), |c| c.reason.clone()),
                found: status.foreign_clusters.len(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// A peer's state as one chip, with one meaning (and one colour) across every page: the
/// tables, a peer's page and the picture's edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Chip {
    /// Peered: it accepted us and advertises to us.
    Joined,
    /// Asked for and on its way (no phase refuses it).
    Joining,
    /// Its API server or auth service does not answer, or presents another CA than the pinned one.
    Unreachable,
    /// It, or our policy, says no (a token, a PeeringRequest, a fingerprint, a claimed ID).
    Refused,
    /// Its certificate authority waits for a person to approve its fingerprint.
    AwaitingApproval,
    /// It peers with us; we do not ask to peer with it.
    Incoming,
    /// Found, not asked for.
    Available,
}

impl Chip {
    /// The chip of `p` (pure).
    pub fn of(p: &Peer) -> Self {
        if p.joined() {
            return Chip::Joined;
        }
        if !p.join {
            return if p.incoming { Chip::Incoming } else { Chip::Available };
        }
        use liqo_api::reasons::Reason as R;
        let Some(failing) = p.failing() else { return Chip::Joining };
        match R::parse(&failing.reason) {
            Some(R::AwaitingApproval) => Chip::AwaitingApproval,
            Some(R::RemoteUnreachable | R::RemoteInvalid | R::RemoteCaChanged | R::NoCaAvailable) => Chip::Unreachable,
            Some(R::TenantNamespaceTerminating | R::UnjoinPending | R::WaitingForAdvertisement) => Chip::Joining,
            _ if failing.type_ == liqo_api::reasons::ConditionType::RemoteReachable.as_str() => Chip::Unreachable,
            _ => Chip::Refused,
        }
    }

    /// What it says.
    pub fn label(self) -> &'static str {
        match self {
            Chip::Joined => "joined",
            Chip::Joining => "joining",
            Chip::Unreachable => "not reachable",
            Chip::Refused => "refused",
            Chip::AwaitingApproval => "awaiting approval",
            Chip::Incoming => "incoming",
            Chip::Available => "available",
        }
    }

    /// Its class in app.css (`chip-…`).
    pub fn class(self) -> &'static str {
        match self {
            Chip::Joined => "chip-joined",
            Chip::Joining => "chip-joining",
            Chip::Unreachable => "chip-unreachable",
            Chip::Refused => "chip-refused",
            Chip::AwaitingApproval => "chip-awaiting",
            Chip::Incoming => "chip-incoming",
            Chip::Available => "chip-available",
        }
    }
}

/// The colour of an edge of the picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Peered and answering.
    Good,
    /// Asked for, not there (a phase holds it up, or the remote does not answer).
    Failing,
    /// In progress.
    Pending,
}

/// One edge: from us to the peer (outgoing) or back (incoming).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    pub peer: String,
    pub outgoing: bool,
    pub health: Health,
}

/// The picture: every peer a node (its type as badge), an edge per direction that runs or is
/// asked for.
pub fn edges(cards: &[&Card]) -> Vec<Edge> {
    let mut out = vec![];
    for c in cards {
        let p = &c.peer;
        if p.join || p.outgoing {
            let health = if p.joined() && c.healthy {
                Health::Good
            } else if p.failing().is_some() || !c.healthy {
                Health::Failing
            } else {
                Health::Pending
            };
            out.push(Edge { peer: p.name.clone(), outgoing: true, health });
        }
        if p.incoming {
            out.push(Edge { peer: p.name.clone(), outgoing: false, health: if c.healthy { Health::Good } else { Health::Failing } });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(name: &str, join: bool, outgoing: bool, incoming: bool, reachable: &str) -> ForeignCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name, "labels": {"discovery.liqo.io/searchdomain": "example.com"}},
            "spec": {"clusterIdentity": {"clusterID": format!("{name}-id")}, "join": join, "discoveryType": "WAN", "trustMode": "Untrusted"},
            "status": {"conditions": [
                {"type": "RemoteReachable", "status": reachable, "reason": if reachable == "True" { "Reachable" } else { "RemoteUnreachable" },
                 "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"},
                {"type": "Joined", "status": if outgoing { "True" } else { "False" }, "reason": if outgoing { "Joined" } else { "WaitingForAdvertisement" },
                 "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"}],
                "outgoing": {"joined": outgoing}, "incoming": {"joined": incoming}}
        }))
        .unwrap()
    }

    /// A joining peer held up at `type_` for `reason`.
    fn held_up(type_: &str, reason: &str) -> Peer {
        let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "p"},
            "spec": {"clusterIdentity": {"clusterID": "p-id"}, "join": true},
            "status": {"conditions": [{"type": type_, "status": "False", "reason": reason, "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"}]}
        }))
        .unwrap();
        Peer::of(&fc)
    }

    #[test]
    fn a_chip_says_one_state_with_one_meaning() {
        let card = |f: ForeignCluster| Peer::of(&f);
        assert_eq!(Chip::of(&card(fc("a", true, true, false, "True"))), Chip::Joined);
        assert_eq!(Chip::of(&card(fc("a", true, false, false, "False"))), Chip::Unreachable);
        assert_eq!(Chip::of(&card(fc("a", false, false, true, "True"))), Chip::Incoming);
        assert_eq!(Chip::of(&card(fc("a", false, false, false, "True"))), Chip::Available);
        assert_eq!(Chip::of(&held_up("Trusted", "AwaitingApproval")), Chip::AwaitingApproval);
        assert_eq!(Chip::of(&held_up("Trusted", "FingerprintMismatch")), Chip::Refused);
        assert_eq!(Chip::of(&held_up("Authenticated", "TokenRefused")), Chip::Refused);
        assert_eq!(Chip::of(&held_up("Joined", "PeerRefused")), Chip::Refused);
        assert_eq!(Chip::of(&held_up("CaVerified", "RemoteCaChanged")), Chip::Unreachable);
        assert_eq!(Chip::of(&held_up("Joined", "WaitingForAdvertisement")), Chip::Joining);
        let labels: std::collections::BTreeSet<_> =
            [Chip::Joined, Chip::Joining, Chip::Unreachable, Chip::Refused, Chip::AwaitingApproval, Chip::Incoming, Chip::Available]
                .iter()
                .map(|c| (c.label(), c.class()))
                .collect();
        assert_eq!(labels.len(), 7, "each chip its own words and class");
        for (_, class) in &labels {
            assert!(include_str!("../assets/app.css").contains(&format!(".{class}")), "{class} styled");
        }
    }

    #[test]
    fn connected_peers_run_a_peering_either_way_the_others_are_available() {
        let fcs =
            [fc("b-out", true, true, false, "True"), fc("a-in", false, false, true, "True"), fc("c-new", false, false, false, "True")];
        let advertisement = |name: &str, namespace: &str| {
            let mut a = Advertisement::new(
                name,
                serde_json::from_value(
                    serde_json::json!({"clusterId": "b-out-id", "resources": {"cpu": "8", "memory": "32Gi", "pods": "220"}}),
                )
                .unwrap(),
            );
            a.metadata.namespace = Some(namespace.into());
            a
        };
        // Another peer's, claiming b-out-id in its own tenant namespace, is not b-out's.
        let forged = advertisement("advertisement-b-out-id", "liqo-tenant-a-in-id");
        let p = peers(&fcs, &[forged]);
        assert_eq!(p.connected.iter().find(|c| c.peer.name == "b-out").unwrap().offers, []);
        let adverts = [advertisement("advertisement-b-out-id", "liqo-tenant-b-out-id")];
        let p = peers(&fcs, &adverts);
        let names = |cs: &[Card]| cs.iter().map(|c| c.peer.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&p.connected), ["a-in", "b-out"]);
        assert_eq!(names(&p.available), ["c-new"]);
        assert_eq!(p.connected[0].direction, Some(Direction::Incoming));
        let offered: Vec<_> = p.connected[1].offers.iter().map(|o| (o.resource, o.text.as_str(), o.amount)).collect();
        assert_eq!(offered, [("cpu", "8", Some(8.0)), ("memory", "32Gi", Some(32.0 * 1073741824.0)), ("pods", "220", Some(220.0))]);
        assert_eq!(p.available[0].found_in.as_deref(), Some("example.com"));
        assert_eq!(p.available[0].trust, "Untrusted");
    }

    #[test]
    fn the_largest_offer_counts_only_a_peers_own_advertisement() {
        let advert = |id: &str, namespace: &str, cpu: &str| {
            let mut a = Advertisement::new(
                &format!("advertisement-{id}"),
                serde_json::from_value(serde_json::json!({"clusterId": id, "resources": {"cpu": cpu, "memory": "1Gi"}})).unwrap(),
            );
            a.metadata.namespace = Some(namespace.into());
            a
        };
        let adverts = [advert("a", "liqo-tenant-a", "4"), advert("b", "liqo-tenant-b", "16"), advert("c", "liqo-tenant-a", "9999")];
        let largest = largest_advertised(&adverts);
        assert_eq!(largest.get("cpu"), Some(&16.0), "c's claim from a's namespace is not counted");
        assert_eq!(largest.get("memory"), Some(&1073741824.0));
    }

    #[test]
    fn ages_read_as_a_person_says_them_and_the_last_change_is_the_latest_phase() {
        let t = |s: &str| -> k8s_openapi::jiff::Timestamp { s.parse().unwrap() };
        let now = t("2026-11-23T12:00:00Z");
        assert_eq!(ago(t("2026-11-23T11:59:48Z"), now), "12 s");
        assert_eq!(ago(t("2026-11-23T11:57:00Z"), now), "3 min");
        assert_eq!(ago(t("2026-11-23T07:00:00Z"), now), "5 h");
        assert_eq!(ago(t("2026-11-21T12:00:00Z"), now), "2 d");
        assert_eq!(ago(t("2026-11-23T12:00:05Z"), now), "0 s", "a clock a little ahead is not the future");
        let mut f = fc("a", true, true, false, "True");
        f.status.as_mut().unwrap().conditions[1].last_transition_time =
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t("2026-11-23T11:00:00Z"));
        assert_eq!(last_change(&Peer::of(&f)), Some(t("2026-11-23T11:00:00Z")));
    }

    #[test]
    fn edges_follow_direction_and_health() {
        let fcs = [fc("up", true, true, true, "True"), fc("down", true, false, false, "False"), fc("idle", false, false, false, "True")];
        let p = peers(&fcs, &[] as &[Advertisement]);
        let all: Vec<&Card> = p.connected.iter().chain(&p.available).collect();
        let e = edges(&all);
        assert!(e.contains(&Edge { peer: "up".into(), outgoing: true, health: Health::Good }));
        assert!(e.contains(&Edge { peer: "up".into(), outgoing: false, health: Health::Good }));
        assert!(e.contains(&Edge { peer: "down".into(), outgoing: true, health: Health::Failing }));
        assert!(!e.iter().any(|e| e.peer == "idle"), "a peer nobody asked to join has no edge");
    }
}
