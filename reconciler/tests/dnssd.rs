//! DNS-SD lookups against real DNS servers serving Liqo's documented zones: hickory-server in this
//! process, and a BIND 9 `named` process (installed by `.ci/run`; skipped loudly without it).

use liqo_reconciler::discovery::dnssd::{DnsSd, Listed, TargetError};
use liqo_reconciler::discovery::records::{DiscoveredCluster, RecordError, WanTarget};
use liqo_testenv::dns::{Named, ZoneServer, clusters_zone, zone_file};

const ID: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";
const ID2: &str = "9a596a4b-591c-4ac6-8fd6-80258b4b3bf9";

/// The API-server zone, as written there (its SRV target and its A record name differ).
fn api_server_zone_as_written() -> String {
    include_str!("fixtures/api-server.zone").replace("${YOUR_CLUSTER_ID}", ID)
}

/// The same zone with its parenthesised TXT record on one line: hickory's zone-file parser
/// keeps the quotes of strings inside parentheses (BIND reads the file as it is).
fn one_line(zone: &str) -> String {
    let mut depth = 0;
    zone.chars()
        .filter_map(|c| match c {
            '(' => {
                depth += 1;
                None
            }
            ')' => {
                depth -= 1;
                None
            }
            '\n' if depth > 0 => Some(' '),
            c => Some(c),
        })
        .collect()
}

/// The auth-service zone (two clusters, auth services behind SRV).
fn auth_service_zone() -> String {
    include_str!("fixtures/auth-service.zone").to_owned()
}

fn api_target(id: &str, api_url: &str) -> Result<WanTarget, TargetError> {
    Ok(WanTarget::Api(DiscoveredCluster {
        cluster_id: id.into(),
        namespace: Some("liqo".into()),
        api_url: Some(api_url.into()),
        ..Default::default()
    }))
}

fn listed(instance: &str, target: Result<WanTarget, TargetError>) -> Listed {
    Listed { instance: instance.into(), target }
}

#[tokio::test]
async fn the_api_server_zone_as_written_lists_its_cluster_by_api_server_name() {
    let server = ZoneServer::start("example.com.", &zone_file("example.com.", &one_line(&api_server_zone_as_written()))).await;
    let dns = DnsSd::with_nameserver(server.addr).unwrap();
    let got = dns.browse("example.com").await.unwrap();
    // The SRV host has no address in that zone: the URL keeps its name for another resolver.
    assert_eq!(
        got,
        vec![listed("liqo-cluster._liqo._tcp.example.com.", api_target(ID, "https://liqo-cluster-api.server.example.com:6443"))]
    );
}

#[tokio::test]
async fn the_api_server_zone_with_the_address_resolves_the_api_server() {
    let zone =
        one_line(&api_server_zone_as_written()).replace("liqo-cluster-api-server.example.com.", "liqo-cluster-api.server.example.com.");
    let server = ZoneServer::start("example.com.", &zone_file("example.com.", &zone)).await;
    let got = DnsSd::with_nameserver(server.addr).unwrap().browse("example.com.").await.unwrap();
    assert_eq!(got, vec![listed("liqo-cluster._liqo._tcp.example.com.", api_target(ID, "https://1.2.3.4:6443"))]);
}

#[tokio::test]
async fn the_auth_service_zone_lists_auth_services_to_ask_for_identities() {
    let server = ZoneServer::start("example.com.", &zone_file("example.com.", &auth_service_zone())).await;
    let got = DnsSd::with_nameserver(server.addr).unwrap().browse("example.com").await.unwrap();
    assert_eq!(
        got,
        vec![
            listed("liqo-cluster-2.example.com.", Ok(WanTarget::Auth { auth_url: "https://2.3.4.1:8443".into() })),
            listed("liqo-cluster.example.com.", Ok(WanTarget::Auth { auth_url: "https://1.2.3.4:443".into() })),
        ]
    );
}

fn two_clusters(second: bool) -> String {
    let mut z = format!(
        "example.com. PTR a._liqo._tcp.example.com.\n\
         a._liqo._tcp.example.com. SRV 0 0 6443 api-a.example.com.\n\
         a._liqo._tcp.example.com. TXT \"id={ID}\" \"namespace=liqo\"\n\
         api-a.example.com. A 10.0.0.1\n"
    );
    if second {
        z.push_str(&format!(
            "example.com. PTR b._liqo._tcp.example.com.\n\
             b._liqo._tcp.example.com. SRV 0 0 6443 api-b.example.com.\n\
             b._liqo._tcp.example.com. TXT \"id={ID2}\" \"namespace=liqo\"\n\
             api-b.example.com. CNAME api-a.example.com.\n"
        ));
    }
    zone_file("example.com.", &z)
}

#[tokio::test]
async fn clusters_added_and_removed_show_in_the_next_lookup() {
    let mut server = ZoneServer::start("example.com.", &two_clusters(false)).await;
    let dns = DnsSd::with_nameserver(server.addr).unwrap();
    assert_eq!(dns.browse("example.com").await.unwrap().len(), 1);
    server.set_zone(&two_clusters(true)).await;
    let got = dns.browse("example.com").await.unwrap();
    // b's API server name is a CNAME of a's: followed to its address.
    assert_eq!(got[1], listed("b._liqo._tcp.example.com.", api_target(ID2, "https://10.0.0.1:6443")));
    server.set_zone(&two_clusters(false)).await;
    assert_eq!(
        dns.browse("example.com").await.unwrap(),
        vec![listed("a._liqo._tcp.example.com.", api_target(ID, "https://10.0.0.1:6443"))]
    );
}

#[tokio::test]
async fn a_target_without_srv_or_with_a_malformed_txt_is_skipped_alone() {
    let zone = format!(
        "{}example.com. PTR nosrv._liqo._tcp.example.com.\n\
         example.com. PTR bad._liqo._tcp.example.com.\n\
         nosrv._liqo._tcp.example.com. TXT \"id={ID2}\"\n\
         bad._liqo._tcp.example.com. SRV 0 0 6443 api-a.example.com.\n\
         bad._liqo._tcp.example.com. TXT \"id=Not_A_Cluster_ID\" \"namespace=liqo\"\n",
        two_clusters(false)
    );
    let server = ZoneServer::start("example.com.", &zone).await;
    let got = DnsSd::with_nameserver(server.addr).unwrap().browse("example.com").await.unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].target, api_target(ID, "https://10.0.0.1:6443"));
    assert!(
        matches!(&got[1].target, Err(TargetError::Record(RecordError::MalformedId(id, _))) if id == "Not_A_Cluster_ID"),
        "{:?}",
        got[1]
    );
    assert_eq!(got[2], listed("nosrv._liqo._tcp.example.com.", Err(TargetError::NoSrv)));
}

#[tokio::test]
async fn nxdomain_and_a_server_that_is_down_fail_the_lookup_but_no_ptr_lists_nothing() {
    let mut server = ZoneServer::start("example.com.", &two_clusters(false)).await;
    let dns = DnsSd::with_nameserver(server.addr).unwrap();
    let e = dns.browse("nothere.example.com").await.unwrap_err();
    assert!(e.to_string().contains("NXDOMAIN"), "{e}");
    assert_eq!(e.label(), "DnsLookupFailed");
    // A name that exists but has no PTR: a domain that lists no cluster.
    assert_eq!(dns.browse("api-a.example.com").await.unwrap(), vec![]);
    server.stop().await;
    let e = dns.browse("example.com").await.unwrap_err();
    assert_eq!(e.label(), "DnsLookupFailed");
}

#[tokio::test]
async fn bind9_serves_the_seed_zones_and_their_changes() {
    if let Err(why) = Named::binary() {
        liqo_testenv::skip(&format!("bind9_serves_the_seed_zones_and_their_changes: {why}"));
        return;
    }
    let auth_service_zone_file = zone_file("example.com.", &auth_service_zone());
    let mut named = Named::start("example.com.", &auth_service_zone_file).await.unwrap();
    let dns = DnsSd::with_nameserver(named.addr).unwrap();
    let got = dns.browse("example.com").await.unwrap();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1], listed("liqo-cluster.example.com.", Ok(WanTarget::Auth { auth_url: "https://1.2.3.4:443".into() })));

    named.set_zone("example.com.", &zone_file("example.com.", &api_server_zone_as_written())).await.unwrap();
    let got = dns.browse("example.com").await.unwrap();
    assert_eq!(
        got,
        vec![listed("liqo-cluster._liqo._tcp.example.com.", api_target(ID, "https://liqo-cluster-api.server.example.com:6443"))],
        "{}",
        named.log()
    );
    let e = dns.browse("nothere.example.com").await.unwrap_err();
    assert!(e.to_string().contains("NXDOMAIN"), "{e}");
}

fn with_browsing_domains(domains: &[&str]) -> String {
    let mut z = two_clusters(false);
    for (d, id) in domains.iter().zip([ID2, "5e9f9c35-4a4c-4c39-9d52-2f3d1f6b8c11"]) {
        z.push_str(&format!(
            "b._dns-sd._udp.example.com. PTR {d}.example.com.\n\
             {d}.example.com. PTR in-{d}._liqo._tcp.example.com.\n\
             in-{d}._liqo._tcp.example.com. SRV 0 0 6443 api-a.example.com.\n\
             in-{d}._liqo._tcp.example.com. TXT \"id={id}\" \"namespace=liqo\"\n"
        ));
    }
    z
}

#[tokio::test]
async fn browsing_domains_the_domain_names_are_listed_too_and_dropped_when_no_longer_named() {
    let mut server = ZoneServer::start("example.com.", &with_browsing_domains(&["east", "west"])).await;
    let dns = DnsSd::with_nameserver(server.addr).unwrap();
    let got = dns.browse("example.com").await.unwrap();
    let names: Vec<&str> = got.iter().map(|l| l.instance.as_str()).collect();
    assert_eq!(names, ["a._liqo._tcp.example.com.", "in-east._liqo._tcp.example.com.", "in-west._liqo._tcp.example.com."]);
    assert_eq!(got[1].target, api_target(ID2, "https://10.0.0.1:6443"));

    server.set_zone(&with_browsing_domains(&["east"])).await;
    let names: Vec<String> = dns.browse("example.com").await.unwrap().into_iter().map(|l| l.instance).collect();
    assert_eq!(names, ["a._liqo._tcp.example.com.", "in-east._liqo._tcp.example.com."]);
}

#[tokio::test]
async fn a_named_browsing_domain_that_does_not_exist_fails_the_whole_lookup() {
    // A listing with a hole cannot be trusted: nothing it found may be taken as gone.
    let zone = format!("{}b._dns-sd._udp.example.com. PTR gone.example.com.\n", two_clusters(false));
    let server = ZoneServer::start("example.com.", &zone).await;
    let e = DnsSd::with_nameserver(server.addr).unwrap().browse("example.com").await.unwrap_err();
    assert!(e.to_string().contains("gone.example.com. does not exist"), "{e}");
    assert_eq!(e.label(), "DnsLookupFailed");
}

#[tokio::test]
async fn bind9_lists_a_domain_too_large_for_one_message_through_its_browsing_domains() {
    if let Err(why) = Named::binary() {
        liqo_testenv::skip(&format!("bind9_lists_a_domain_too_large_for_one_message_through_its_browsing_domains: {why}"));
        return;
    }
    // 3,000 names in one PTR RRset are about 100 KB, more than a DNS message holds: BIND
    // refuses to load such a zone ("ran out of space"). Listed 1,000 to a sub-domain, it serves
    // them all.
    let n = 3_000;
    let named = Named::start("example.com.", &clusters_zone(n, 1_000)).await.unwrap();
    let dns = DnsSd::with_nameserver(named.addr).unwrap();
    let got = dns.browse("example.com").await.unwrap();
    assert_eq!(got.len(), n, "{}", named.log());
    assert!(got.iter().all(|l| l.target.is_ok()), "every target resolved");
    assert_eq!(got[0].target, api_target("c00000000-0000-4000-8000-000000000000", "https://10.0.0.0:6443"));
}
