//! The troubleshooting table (docs/troubleshooting.md, linked from the README) is the typed
//! list of reasons (`liqo_api::reasons`), row for row: a reason the code can set and the docs
//! do not explain (or the reverse) fails here.

#[test]
fn the_readme_troubleshooting_table_is_the_typed_list() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/troubleshooting.md")).unwrap();
    let section = &readme[readme.find("# Troubleshooting").expect("a Troubleshooting section")..];
    let start = section.find("| condition / reason |").expect("the troubleshooting table");
    let table: String = section[start..].lines().take_while(|l| l.starts_with('|')).map(|l| format!("{l}\n")).collect();
    let want = liqo_api::reasons::troubleshooting_table();
    assert_eq!(table, want, "docs/troubleshooting.md's table differs from liqo_api::reasons::TROUBLESHOOTING; paste this one:\n{want}");
    for reason in liqo_api::reasons::Reason::ALL {
        assert!(table.contains(&format!("`{reason}`")), "{reason} is not in docs/troubleshooting.md's table");
    }
}
