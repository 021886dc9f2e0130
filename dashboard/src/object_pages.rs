//! The pages of every Liqo object (pure): a list a kind, an object as YAML with the editor of
//! its spec, and the dry run's answer as a diff with Apply.

use std::fmt::Write;

use crate::edit::{Checked, FIELD};
use crate::html::{FormError, TABLE_END, esc, field_error, hidden_csrf, page, table_start};
use crate::objects::{Kind, Line, Listed, diff};

/// How many objects a list shows at once.
pub const PAGE: usize = 25;

/// What the list shows, from its query string: a kind, a search in the names, a page.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct ListView {
    pub kind: String,
    pub q: String,
    pub page: usize,
}

/// The link to object `l` of `kind`.
pub fn link(kind: Kind, l: &Listed) -> String {
    let name = crate::html::urlencode(&l.name);
    match &l.namespace {
        Some(ns) => format!("/objects/{}/{name}?namespace={}", kind.plural(), crate::html::urlencode(ns)),
        None => format!("/objects/{}/{name}", kind.plural()),
    }
}

fn query(kind: Kind, q: &str, page: usize) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    s.append_pair("kind", kind.plural());
    if !q.is_empty() {
        s.append_pair("q", q);
    }
    if page > 1 {
        s.append_pair("page", &page.to_string());
    }
    format!("/objects?{}", s.finish())
}

/// The list of one kind's objects, with a tab for each kind and its count.
pub fn list(kind: Kind, counts: &[(Kind, usize)], items: &[Listed], view: &ListView) -> String {
    let mut tabs = String::from("<nav class=\"tabs\" aria-label=\"Kinds\">");
    for (k, n) in counts {
        let current = if *k == kind { " aria-current=\"page\"" } else { "" };
        let _ = write!(tabs, "<a href=\"{}\"{current}>{} ({n})</a>", esc(&query(*k, "", 1)), k.title());
    }
    tabs.push_str("</nav>");
    let q = view.q.trim().to_lowercase();
    let selected: Vec<&Listed> = items.iter().filter(|l| q.is_empty() || l.name.to_lowercase().contains(&q)).collect();
    let pages = selected.len().div_ceil(PAGE).max(1);
    let at = view.page.clamp(1, pages);
    let mut t = table_start(kind.title(), true, None, if kind.namespaced() { &["Name", "Namespace"] } else { &["Name"] });
    for l in selected.iter().skip((at - 1) * PAGE).take(PAGE) {
        let ns = l.namespace.as_deref().map(|ns| format!("<td><code>{}</code></td>", esc(ns))).unwrap_or_default();
        let _ = write!(t, "<tr><td><a href=\"{}\">{}</a></td>{ns}</tr>", esc(&link(kind, l)), esc(&l.name));
    }
    t.push_str(TABLE_END);
    let more = |p: usize, label: &str| format!("<a href=\"{}\">{label}</a>", esc(&query(kind, &view.q, p)));
    let pager = match (at > 1, at < pages) {
        (false, false) => String::new(),
        (prev, next) => format!(
            "<nav class=\"pager\" aria-label=\"Objects, pages\">{} <span>page {at} of {pages} ({} objects)</span> {}</nav>",
            if prev { more(at - 1, "‹ previous") } else { String::new() },
            selected.len(),
            if next { more(at + 1, "next ›") } else { String::new() }
        ),
    };
    let main = format!(
        "<section aria-labelledby=\"objects\"><h1 id=\"objects\">Liqo objects</h1>{tabs}\
<form method=\"get\" action=\"/objects\" role=\"search\" class=\"search\"><input type=\"hidden\" name=\"kind\" value=\"{}\">\
<label>Name <input type=\"search\" name=\"q\" value=\"{}\"></label> <button type=\"submit\">Show</button></form>\
<h2>{}</h2>{}{pager}</section>",
        kind.plural(),
        esc(&view.q),
        kind.title(),
        if selected.is_empty() { "<p>None.</p>".to_owned() } else { t },
    );
    page(&format!("Liqo · {}", kind.title()), &main)
}

/// The editor of a spec: the text, the version it was read at, and Check.
fn editor(action: &str, spec: &str, version: &str, csrf: &str, error: Option<&FormError>) -> String {
    format!(
        "<form method=\"post\" action=\"{}\" class=\"editor\">{}<input type=\"hidden\" name=\"version\" value=\"{}\">\
<label for=\"edit-{FIELD}\">Spec (YAML)</label><textarea id=\"edit-{FIELD}\" name=\"{FIELD}\" rows=\"{}\" spellcheck=\"false\" aria-describedby=\"edit-{FIELD}-error\">{}</textarea>{}\
<p class=\"hint\">Check asks the API server for a dry run (RBAC, the webhook and the schema answer; nothing is stored), then shows what changes before you apply it.</p>\
<button type=\"submit\">Check</button></form>",
        esc(action),
        hidden_csrf(csrf),
        esc(version),
        spec.lines().count().clamp(4, 30) + 1,
        esc(spec),
        field_error(error, "edit", FIELD)
    )
}

/// Where an object's actions post (`check`, `apply`).
fn action(kind: Kind, name: &str, verb: &str) -> String {
    format!("/objects/{}/{}/{verb}", kind.plural(), crate::html::urlencode(name))
}

/// An object: as YAML, and its spec's editor when people edit that kind.
pub struct ObjectPage<'a> {
    pub kind: Kind,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub yaml: &'a str,
    /// The spec in the editor: as stored, or as the person last wrote it.
    pub spec: &'a str,
    pub version: &'a str,
}

pub fn object(o: &ObjectPage<'_>, csrf: &str, error: Option<&FormError>) -> String {
    let edit = if o.kind.editable() {
        format!("<h2>Edit its spec</h2>{}", editor(&action(o.kind, o.name, "check"), o.spec, o.version, csrf, error))
    } else {
        "<p class=\"hint\">Written by the peers and the reconciler; shown, not edited here.</p>".into()
    };
    // The store keeps of an Advertisement only what the pages show (10,000 of them whole would
    // cost the dashboard their kubeconfig references, timestamps and status): say so.
    let kept = match (o.kind, o.namespace) {
        (Kind::Advertisements, Some(ns)) => format!(
            "<p class=\"hint\">The dashboard keeps only whom it is from and what it offers; <code>kubectl get advertisement -n {} {} -o yaml</code> shows it whole.</p>",
            esc(ns),
            esc(o.name)
        ),
        _ => String::new(),
    };
    let ns = o.namespace.map(|ns| format!(" in <code>{}</code>", esc(ns))).unwrap_or_default();
    let main = format!(
        "<section aria-labelledby=\"object\"><p><a href=\"{}\">{}</a></p><h1 id=\"object\">{} {}{ns}</h1></section>\
<section id=\"stored\" data-live aria-labelledby=\"stored-title\"><h2 id=\"stored-title\">As stored</h2>{kept}<pre>{}</pre></section>\
<section aria-label=\"Edit\">{edit}</section>",
        esc(&query(o.kind, "", 1)),
        o.kind.title(),
        o.kind.singular(),
        esc(o.name),
        esc(o.yaml)
    );
    page(&format!("Liqo · {}", o.name), &main)
}

/// The dry run's answer: what would change, Apply (the same spec, at the same version), and
/// the editor again.
pub fn checked(kind: Kind, name: &str, spec: &str, version: &str, c: &Checked, csrf: &str) -> String {
    let lines = diff(&c.before, &c.after);
    let changes = lines.iter().filter(|l| !matches!(l, Line::Same(_))).count();
    let mut shown = String::from("<pre class=\"diff\">");
    for l in &lines {
        let _ = match l {
            Line::Same(s) => writeln!(shown, "  {}", esc(s)),
            Line::Gone(s) => writeln!(shown, "<del>- {}</del>", esc(s)),
            Line::Added(s) => writeln!(shown, "<ins>+ {}</ins>", esc(s)),
        };
    }
    shown.push_str("</pre>");
    let apply = if changes == 0 {
        "<p>Nothing changes: the spec as written is the spec as stored.</p>".to_owned()
    } else {
        format!(
            "<form method=\"post\" action=\"{}\">{}<input type=\"hidden\" name=\"version\" value=\"{}\"><input type=\"hidden\" name=\"{FIELD}\" value=\"{}\">\
<button type=\"submit\">Apply {changes} changed lines</button></form>",
            esc(&action(kind, name, "apply")),
            hidden_csrf(csrf),
            esc(version),
            esc(spec)
        )
    };
    let main = format!(
        "<section aria-labelledby=\"check\"><p><a href=\"{}\">{} {}</a></p><h1 id=\"check\">What changes in {}</h1>\
<p class=\"hint\">The API server's dry run accepted it: RBAC, the webhook and the schema, defaults filled in. Lines with - go, lines with + come.</p>\
{shown}{apply}<h2>Edit again</h2>{}</section>",
        esc(&format!("/objects/{}/{}", kind.plural(), crate::html::urlencode(name))),
        kind.singular(),
        esc(name),
        esc(name),
        editor(&action(kind, name, "check"), spec, version, csrf, None)
    );
    page(&format!("Liqo · {name}: what changes"), &main)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(n: usize) -> Vec<Listed> {
        (0..n).map(|i| Listed { namespace: None, name: format!("peer-{i:03}") }).collect()
    }

    #[test]
    fn a_kind_is_listed_a_page_at_a_time_with_a_tab_a_kind() {
        let counts: Vec<(Kind, usize)> = Kind::ALL.iter().map(|k| (*k, 3)).collect();
        let page = list(Kind::ForeignClusters, &counts, &listed(60), &ListView { page: 3, ..Default::default() });
        assert!(page.contains("<a href=\"/objects?kind=foreignclusters\" aria-current=\"page\">ForeignClusters (3)</a>"), "{page}");
        assert!(page.contains("<a href=\"/objects?kind=clusterconfigs\">ClusterConfig (3)</a>"));
        assert!(page.contains("peer-050<") && page.contains("peer-059<") && !page.contains("peer-049<"), "{page}");
        assert!(page.contains("page 3 of 3 (60 objects)"));
        let found = list(Kind::ForeignClusters, &counts, &listed(60), &ListView { q: "PEER-01".into(), ..Default::default() });
        assert_eq!(found.matches("<a href=\"/objects/foreignclusters/peer-01").count(), 10);
        let ns = [Listed { namespace: Some("liqo-tenant-x".into()), name: "advertisement-x".into() }];
        let page = list(Kind::Advertisements, &counts, &ns, &ListView::default());
        assert!(page.contains("<a href=\"/objects/advertisements/advertisement-x?namespace=liqo-tenant-x\">"), "{page}");
    }

    #[test]
    fn an_object_shows_its_yaml_and_only_an_editable_kind_its_editor() {
        let o =
            ObjectPage { kind: Kind::SearchDomains, name: "a<b", namespace: None, yaml: "spec: <x>", spec: "domain: <x>\n", version: "7" };
        let page = object(&o, "tok", None);
        assert!(page.contains("<pre>spec: &lt;x&gt;</pre>"), "{page}");
        assert!(page.contains("<form method=\"post\" action=\"/objects/searchdomains/a%3Cb/check\""), "{page}");
        assert!(page.contains("name=\"csrf\" value=\"tok\"") && page.contains("name=\"version\" value=\"7\""));
        assert!(page.contains(">domain: &lt;x&gt;\n</textarea>"));
        let refused = object(&o, "tok", Some(&FormError { form: "edit", field: Some(FIELD), message: "denied: <no>".into() }));
        assert!(refused.contains("id=\"edit-spec-error\">denied: &lt;no&gt;</div>"), "{refused}");
        let advert = object(&ObjectPage { kind: Kind::Advertisements, namespace: Some("liqo-tenant-x"), ..o }, "tok", None);
        assert!(!advert.contains("<textarea") && advert.contains("shown, not edited here"));
        assert!(advert.contains("<code>kubectl get advertisement -n liqo-tenant-x a&lt;b -o yaml</code> shows it whole"), "{advert}");
    }

    #[test]
    fn the_dry_run_shows_what_changes_and_apply_carries_the_same_spec() {
        let c = Checked { before: "autojoin: false\ndomain: x\n".into(), after: "autojoin: true\ndomain: x\n".into() };
        let page = checked(Kind::SearchDomains, "x", "autojoin: true\ndomain: x\n", "9", &c, "tok");
        assert!(page.contains("<del>- autojoin: false</del>\n<ins>+ autojoin: true</ins>\n  domain: x\n"), "{page}");
        assert!(page.contains("<form method=\"post\" action=\"/objects/searchdomains/x/apply\">"));
        assert!(page.contains("name=\"spec\" value=\"autojoin: true\ndomain: x\n\""), "{page}");
        assert!(page.contains("Apply 2 changed lines"));
        let same = checked(Kind::SearchDomains, "x", "", "9", &Checked { before: "a: 1\n".into(), after: "a: 1\n".into() }, "tok");
        assert!(same.contains("Nothing changes") && !same.contains("/apply"));
    }
}
