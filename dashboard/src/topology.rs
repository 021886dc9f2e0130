//! The picture of the home view: this cluster in the centre, its peers around it. A few peers
//! are drawn one by one, an arrow per direction coloured by health; many are drawn as groups
//! of one state and one type, each with its count and a link to the list of just those.

use std::fmt::Write;

use crate::escape::esc;
use crate::model::{Card, Chip, Edge, Group, Health, Listing, ThisCluster, View};

/// Above this many peers the picture draws groups, not peers.
pub const ONE_BY_ONE: usize = 24;

/// The picture for `listing`: the listed `cards` one by one when there are few peers, else
/// every peer in groups.
pub fn picture(this: &ThisCluster, cards: &[&Card], edges: &[Edge], listing: &Listing) -> String {
    if listing.total > ONE_BY_ONE { groups(this, &listing.groups, listing.total) } else { graph(this, cards, edges, listing.total) }
}

fn home_node(this: &ThisCluster, cx: f64, cy: f64) -> String {
    let label = if this.cluster_name.is_empty() { "this cluster".to_owned() } else { this.cluster_name.clone() };
    format!(
        "<g class=\"node home\"><circle cx=\"{cx}\" cy=\"{cy}\" r=\"34\"/><text x=\"{cx}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
        cy + 5.0,
        esc(&label)
    )
}

/// A type as short as a node holds it: `IncomingPeering` is `Incoming`.
fn short_type(t: &str) -> &str {
    if t == "IncomingPeering" { "Incoming" } else { t }
}

/// The class of an edge to peers showing `chip`.
fn edge_class(chip: Chip) -> &'static str {
    match chip {
        Chip::Joined => "good",
        Chip::Unreachable | Chip::Refused => "bad",
        Chip::Joining | Chip::AwaitingApproval => "pending",
        Chip::Incoming | Chip::Available => "idle",
    }
}

/// More groups than this are merged by state alone (at most seven), so none is left out.
const MOST: usize = 12;

/// `groups` merged by chip, their type left empty (pure).
fn by_chip(groups: &[Group]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for g in groups {
        match out.iter_mut().find(|o| o.chip == g.chip) {
            Some(o) => {
                o.count += g.count;
                o.incoming += g.incoming;
            }
            None => out.push(Group { type_: String::new(), ..g.clone() }),
        }
    }
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.chip.label().cmp(b.chip.label())));
    out
}

/// A group's two lines of label beside its node, pointing away from the centre: right of a
/// node on the right, left on the left, above or below one at the top or bottom.
fn group_label(x: f64, y: f64, radius: f64, angle: f64, lines: [&str; 2]) -> String {
    let (dx, dy, anchor) = match angle.cos() {
        c if c > 0.35 => (radius + 5.0, -2.0, "start"),
        c if c < -0.35 => (-radius - 5.0, -2.0, "end"),
        _ if angle.sin() < 0.0 => (0.0, -radius - 19.0, "middle"),
        _ => (0.0, radius + 13.0, "middle"),
    };
    let (lx, ly) = (x + dx, y + dy);
    format!(
        "<text class=\"label\" x=\"{lx:.0}\" y=\"{ly:.0}\" text-anchor=\"{anchor}\">{}</text><text class=\"label\" x=\"{lx:.0}\" y=\"{:.0}\" text-anchor=\"{anchor}\">{}</text>",
        esc(lines[0]),
        ly + 12.0,
        esc(lines[1])
    )
}

/// Every peer in groups of one chip and one type (of one chip alone when there would be more
/// than twelve): a group of links (not an image: its nodes are links), a node a group, as large as the log of its count, its edge coloured as its
/// chip, a link to the list of just those peers.
pub fn groups(this: &ThisCluster, groups: &[Group], total: usize) -> String {
    let merged;
    let (groups, by) = if groups.len() > MOST {
        merged = by_chip(groups);
        (merged.as_slice(), "state")
    } else {
        (groups, "state and type")
    };
    let (w, h, cx, cy, rx, ry) = (720.0_f64, 460.0_f64, 360.0_f64, 235.0_f64, 220.0_f64, 155.0_f64);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" role=\"group\" aria-labelledby=\"graph-title\" class=\"graph\">\
<title id=\"graph-title\">This cluster and its {total} peers, in {} groups by {by}</title>",
        groups.len()
    );
    let n = groups.len().max(1) as f64;
    for (i, g) in groups.iter().enumerate() {
        let a = std::f64::consts::TAU * i as f64 / n - std::f64::consts::FRAC_PI_2;
        let (x, y) = (cx + rx * a.cos(), cy + ry * a.sin());
        let radius = 14.0 + 5.0 * (g.count as f64).log10();
        let type_ = if g.type_.is_empty() { "any type" } else { short_type(&g.type_) };
        let _ = write!(
            svg,
            "<a href=\"{}\"><title>{} {}peers {}: list them</title><path class=\"edge {}\" d=\"M {cx} {cy} L {x:.0} {y:.0}\"/>\
<g class=\"node group {}\"><circle cx=\"{x:.0}\" cy=\"{y:.0}\" r=\"{radius:.0}\"/><text x=\"{x:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text>{}</g></a>",
            esc(&View::group_link(g.chip.label(), &g.type_)),
            g.count,
            esc(&if g.type_.is_empty() { String::new() } else { format!("{} ", g.type_) }),
            g.chip.label(),
            edge_class(g.chip),
            g.chip.class(),
            y + 4.0,
            g.count,
            group_label(x, y, radius, a, [g.chip.label(), type_])
        );
    }
    svg.push_str(&home_node(this, cx, cy));
    svg.push_str("</svg>");
    svg
}

/// The picture: this cluster in the middle, its peers around it, an arrow per direction
/// coloured by health, the type as a badge.
fn graph(this: &ThisCluster, cards: &[&Card], edges: &[Edge], total: usize) -> String {
    let (w, h, cx, cy, r) = (640.0_f64, 420.0_f64, 320.0_f64, 210.0_f64, 150.0_f64);
    let of = if total > cards.len() { format!(" (those listed below, of {total})") } else { String::new() };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-labelledby=\"graph-title\" class=\"graph\">\
<title id=\"graph-title\">This cluster and its {} peers{of}</title><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\"/></marker></defs>",
        cards.len()
    );
    let n = cards.len().max(1) as f64;
    let position = |i: usize| {
        let a = std::f64::consts::TAU * i as f64 / n - std::f64::consts::FRAC_PI_2;
        (cx + r * a.cos(), cy + r * a.sin())
    };
    for (i, c) in cards.iter().enumerate() {
        let (x, y) = position(i);
        for e in edges.iter().filter(|e| e.peer == c.peer.name) {
            let class = match e.health {
                Health::Good => "good",
                Health::Failing => "bad",
                Health::Pending => "pending",
            };
            // Outgoing: from us to the peer, bent one way; incoming bent the other.
            let (x1, y1, x2, y2, bend) = if e.outgoing { (cx, cy, x, y, 20.0) } else { (x, y, cx, cy, 20.0) };
            let (mx, my) = ((x1 + x2) / 2.0 + bend * (y2 - y1) / r, (y1 + y2) / 2.0 - bend * (x2 - x1) / r);
            let _ = write!(
                svg,
                "<path class=\"edge {class}\" d=\"M {x1:.0} {y1:.0} Q {mx:.0} {my:.0} {x2:.0} {y2:.0}\" marker-end=\"url(#arrow)\"><title>{} {}: {class}</title></path>",
                if e.outgoing { "to" } else { "from" },
                esc(&e.peer)
            );
        }
        let _ = write!(
            svg,
            "<g class=\"node\"><circle cx=\"{x:.0}\" cy=\"{y:.0}\" r=\"26\"/><text x=\"{x:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text><text class=\"badge\" x=\"{x:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text></g>",
            y + 42.0,
            esc(&c.peer.name),
            y + 4.0,
            esc(short_type(&c.peer.discovery_type))
        );
    }
    svg.push_str(&home_node(this, cx, cy));
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(i: usize, type_: &str, join: bool, incoming: bool) -> liqo_api::ForeignCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": format!("p{i}")},
            "spec": {"clusterIdentity": {"clusterID": format!("id{i}")}, "join": join, "discoveryType": type_},
            "status": {"incoming": {"joined": incoming}}}))
        .unwrap()
    }

    fn listing(fcs: &[liqo_api::ForeignCluster], view: View) -> Listing {
        Listing::of(crate::model::peers(fcs, &[] as &[liqo_api::Advertisement]), view)
    }

    fn draw(l: &Listing) -> String {
        let cards: Vec<&Card> = l.selected.connected.iter().chain(&l.selected.available).collect();
        picture(&ThisCluster::default(), &cards, &crate::model::edges(&cards), l)
    }

    #[test]
    fn few_peers_are_drawn_one_by_one_with_a_type_a_node_holds() {
        let fcs = [fc(0, "IncomingPeering", false, true), fc(1, "WAN", false, false)];
        let svg = draw(&listing(&fcs, View::default()));
        assert!(svg.contains("This cluster and its 2 peers</title>"), "{svg}");
        assert!(svg.contains(">Incoming</text>") && !svg.contains("IncomingPeering"), "{svg}");
        assert!(svg.contains("<title>from p0: good</title>"), "its incoming edge: {svg}");
    }

    #[test]
    fn many_peers_are_groups_of_one_state_and_type_each_a_link() {
        let mut fcs: Vec<_> = (0..60).map(|i| fc(i, "WAN", false, false)).collect();
        fcs.extend((60..100).map(|i| fc(i, "LAN", false, true)));
        let l = listing(&fcs, View::default());
        assert_eq!(
            l.groups,
            [
                Group { chip: Chip::Available, type_: "WAN".into(), count: 60, incoming: 0 },
                Group { chip: Chip::Incoming, type_: "LAN".into(), count: 40, incoming: 40 }
            ]
        );
        assert_eq!(l.by_type, [("LAN".to_owned(), 40), ("WAN".to_owned(), 60)]);
        let svg = draw(&l);
        assert!(svg.contains("This cluster and its 100 peers, in 2 groups by state and type"), "{svg}");
        assert!(svg.contains("<a href=\"/?state=available&amp;type=WAN\"><title>60 WAN peers available: list them</title>"), "{svg}");
        assert!(svg.contains("<a href=\"/?state=incoming&amp;type=LAN\">"), "{svg}");
        assert!(!svg.contains("p0<"), "no peer drawn one by one");
        // The link's view lists exactly that group.
        let group = listing(&fcs, View { state: "incoming".into(), type_: "lan".into(), ..Default::default() });
        assert_eq!(group.selected.connected.len() + group.selected.available.len(), 40);
    }

    #[test]
    fn past_twelve_groups_they_are_merged_by_state_and_none_is_left_out() {
        let chips =
            [Chip::Joined, Chip::Joining, Chip::Unreachable, Chip::Refused, Chip::AwaitingApproval, Chip::Incoming, Chip::Available];
        let all: Vec<Group> =
            chips.iter().flat_map(|c| ["LAN", "WAN"].map(|t| Group { chip: *c, type_: t.into(), count: 10, incoming: 0 })).collect();
        let svg = groups(&ThisCluster::default(), &all, 140);
        assert_eq!(svg.matches("<a href=").count(), 7, "{svg}");
        assert!(svg.contains("in 7 groups by state</title>"), "{svg}");
        assert!(svg.contains("<a href=\"/?state=not+reachable\"><title>20 peers not reachable: list them</title>"), "{svg}");
        assert!(svg.contains(">any type</text>"));
    }
}
