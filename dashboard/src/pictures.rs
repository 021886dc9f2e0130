//! The small pictures of a peer: its health over time as a strip, what it offers as bars, and
//! how long ago something was. Each has a text beside it that says the same (for a screen
//! reader, and for anyone who would rather read).

use std::collections::BTreeMap;
use std::fmt::Write;

use k8s_openapi::jiff::Timestamp;

use crate::escape::esc;
use crate::history::{History, stretches};
use crate::model::{Offer, ago};

/// `then` as a `<time>` saying how long ago it was at `now`; app.js keeps it current.
pub fn time_ago(then: Timestamp, now: Timestamp) -> String {
    format!("<time datetime=\"{then}\" data-ago>{} ago</time>", ago(then, now))
}

/// A last check as a person reads it: "3 min ago" (a late peer's, to the second), or "within
/// 20 s" (a peer checked on time: at or after `since`), each kept true by the page's script.
pub fn check_ago(check: liqo_api::last_checks::LastCheck, now: Timestamp) -> String {
    match check {
        liqo_api::last_checks::LastCheck::At(then) => time_ago(then, now),
        liqo_api::last_checks::LastCheck::Since(since) => {
            format!("within <time datetime=\"{since}\" data-within>{}</time>", ago(since, now))
        }
    }
}

/// A clock time a person reads: `14:02:11 UTC` today, with the date before when not today.
fn clock(t: Timestamp, now: Timestamp) -> String {
    let (t, today) = (t.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC), now.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC));
    if t.date() == today.date() { t.strftime("%H:%M:%S UTC").to_string() } else { t.strftime("%Y-%m-%d %H:%M UTC").to_string() }
}

/// A peer's states over time, as the dashboard saw them: a strip coloured as the chips are,
/// each stretch as wide as it lasted, then the same as a list.
pub fn health_strip(h: Option<&History>, now: Timestamp) -> String {
    let Some((h, (since, is_start))) = h.and_then(|h| Some((h, h.since()?))) else {
        return "<p>Nothing seen yet: the dashboard draws what it sees change from now on.</p>".into();
    };
    let from = if is_start { "since the dashboard saw it" } else { "its latest changes" };
    let mut svg = format!(
        "<svg class=\"strip\" viewBox=\"0 0 1000 24\" preserveAspectRatio=\"none\" role=\"img\" aria-labelledby=\"strip-title\">\
<title id=\"strip-title\">Its state {from}, from {} to now</title>",
        clock(since, now)
    );
    let mut list = String::from("<ol class=\"changes\">");
    let mut x = 0.0;
    for s in stretches(h, now) {
        let w = (s.share * 1000.0).max(2.0);
        let _ = write!(
            svg,
            "<rect class=\"{}\" x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"24\"><title>{} from {}, for {}</title></rect>",
            s.chip.class(),
            s.chip.label(),
            clock(s.from, now),
            ago(s.from, Timestamp::from_second(s.from.as_second() + s.seconds as i64).unwrap_or(now))
        );
        let _ = write!(
            list,
            "<li><span class=\"chip {}\">{}</span> from <time datetime=\"{}\">{}</time></li>",
            s.chip.class(),
            s.chip.label(),
            s.from,
            clock(s.from, now)
        );
        x += s.share * 1000.0;
    }
    // Its checks in the window, a tick each (the reconciler's record says when).
    let whole = (now.as_millisecond() - since.as_millisecond()).max(1) as f64;
    let checks: Vec<Timestamp> = h.checks.iter().copied().filter(|at| *at >= since && *at <= now).collect();
    for at in &checks {
        let x = ((at.as_millisecond() - since.as_millisecond()) as f64 / whole * 1000.0).min(998.0);
        let _ = write!(
            svg,
            "<rect class=\"check\" x=\"{x:.1}\" y=\"0\" width=\"2\" height=\"24\"><title>checked at {}</title></rect>",
            clock(*at, now)
        );
    }
    svg.push_str("</svg>");
    list.push_str("</ol>");
    let note = if is_start {
        format!("Since the dashboard saw it, {}.", time_ago(since, now))
    } else {
        format!("The latest {} changes.", h.changes.len())
    };
    let ticks = match checks.len() {
        0 => String::new(),
        1 => " The tick is the reconciler's check in that time.".into(),
        n => format!(" The {n} ticks are the reconciler's checks in that time."),
    };
    format!("{svg}<p class=\"hint\">{note}{ticks}</p>{list}")
}

/// What a peer offers, a bar a resource: full at the largest any peer offers (`largest`).
/// Kept small: a table shows it on every row.
pub fn offer_bars(offers: &[Offer], largest: &BTreeMap<&'static str, f64>) -> String {
    if offers.is_empty() {
        return "-".into();
    }
    let mut out = String::from("<div class=\"offers\">");
    for o in offers {
        let name = esc(o.resource);
        let bar = match (o.amount, largest.get(&o.resource)) {
            (Some(v), Some(max)) if *max > 0.0 => format!("<meter max=\"{max}\" value=\"{v}\" title=\"{name}\"></meter>"),
            // Nothing to compare with (no peer offers any): the row keeps its three cells.
            _ => "<span></span>".into(),
        };
        let _ = write!(out, "<span>{name}</span>{bar}<span>{}</span>", esc(&o.text));
    }
    out.push_str("</div>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Histories;
    use crate::model::Chip;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_strip_draws_each_state_as_wide_as_it_lasted_and_says_it_in_words() {
        let mut hs = Histories::default();
        hs.record("p", Chip::Joining, at(0));
        hs.record("p", Chip::Joined, at(25));
        hs.record("p", Chip::Unreachable, at(75));
        let html = health_strip(hs.of("p").as_ref(), at(100));
        assert!(html.contains("<rect class=\"chip-joining\" x=\"0.0\" y=\"0\" width=\"250.0\""), "{html}");
        assert!(html.contains("<rect class=\"chip-joined\" x=\"250.0\" y=\"0\" width=\"500.0\""), "{html}");
        assert!(html.contains("<rect class=\"chip-unreachable\" x=\"750.0\" y=\"0\" width=\"250.0\""), "{html}");
        assert!(html.contains("joined from 08:00:25 UTC, for 50 s"), "{html}");
        assert!(html.contains("Since the dashboard saw it"), "{html}");
        assert_eq!(html.matches("<li>").count(), 3);
        assert!(health_strip(None, at(0)).contains("Nothing seen yet"));
    }

    #[test]
    fn the_checks_are_ticks_where_they_happened() {
        let mut hs = Histories::default();
        hs.record("p", Chip::Joined, at(0));
        hs.checked(&liqo_api::last_checks::Record::naming([("p".into(), at(50))]));
        hs.checked(&liqo_api::last_checks::Record { since: Some(at(100)), late: Vec::new() });
        let html = health_strip(hs.of("p").as_ref(), at(100));
        assert!(
            html.contains("<rect class=\"check\" x=\"500.0\" y=\"0\" width=\"2\" height=\"24\"><title>checked at 08:00:50 UTC</title>"),
            "{html}"
        );
        assert!(html.contains("x=\"998.0\""), "a check at the very end stays inside: {html}");
        assert!(html.contains("The 2 ticks are the reconciler's checks"), "{html}");
    }

    #[test]
    fn bars_are_full_at_the_largest_offer_and_unreadable_amounts_have_none() {
        let offers = vec![
            Offer { resource: "cpu", text: "4".into(), amount: Some(4.0) },
            Offer { resource: "gpu-model", text: "<b>".into(), amount: None },
        ];
        let largest = BTreeMap::from([("cpu", 8.0)]);
        let html = offer_bars(&offers, &largest);
        assert!(html.contains("<span>cpu</span><meter max=\"8\" value=\"4\" title=\"cpu\"></meter><span>4</span>"), "{html}");
        assert_eq!(html.matches("<meter").count(), 1, "{html}");
        assert_eq!(html.matches("<span").count(), 5, "three cells a resource, an empty one for no bar: {html}");
        assert!(html.contains("&lt;b&gt;") && !html.contains("<b>"), "what a peer wrote is text");
        assert_eq!(offer_bars(&[], &largest), "-");
    }

    #[test]
    fn times_say_how_long_ago_and_carry_the_instant() {
        assert_eq!(time_ago(at(0), at(125)), "<time datetime=\"2027-01-15T08:00:00Z\" data-ago>2 min ago</time>");
    }
}
