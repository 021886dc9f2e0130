//! Broadcasters that watch their Advertisement in the peer's cluster instead of asking every
//! period, on a real API server (playing the peers: each broadcaster's kubeconfig names a
//! tenant namespace of its own there, with exactly the access a peer grants):
//! - in steady state a broadcaster sends at most one request per 10 periods there, and a
//!   deleted or edited Advertisement is repaired at once;
//! - a peer of an earlier release, which grants no `watch`, is asked every period instead;
//! - an API server restarted under 100 watching broadcasters gets them all back within one
//!   period, spread over it: no herd in its first seconds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Secret, SecretReference};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::reflector;
use liqo_api::Advertisement;
use liqo_api::names::{BROADCASTER_CLUSTER_ROLE, advertisement_name, tenant_namespace};
use liqo_reconciler::incoming::broadcaster::Broadcasters;
use liqo_reconciler::remote::peer::Network;
use liqo_reconciler::tenancy::access::advertisement_access;
use liqo_testenv::{ControlPlane, install_liqo, service_account_token};
use serde_json::json;
use tokio::sync::watch;

const OWN: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

/// The `n`-th peer's cluster ID.
fn peer(n: usize) -> String {
    format!("9a596a4b-591c-4ac6-8fd6-{n:012x}")
}

/// Broadcasters of OWN over `admin` (where the peers' kubeconfig Secrets are kept, in `liqo`),
/// with period `period`, reaching peers through the real network.
fn broadcasters(admin: &Client, period: Duration) -> Arc<Broadcasters<Network>> {
    let (_, id) = watch::channel(Some(OWN.to_owned()));
    let (_, config) = watch::channel(Some(liqo_api::ClusterConfigSpec::default()));
    let network = Network::new(liqo_reconciler::remote::auth::client::Verify::Nothing, Duration::from_secs(10));
    Broadcasters::new(admin.clone(), id, config, reflector::store::<Node>().0, Arc::new(network), period, "liqo")
}

/// What peer `p` grants our broadcaster: the tenant namespace `liqo-tenant-<p>` and in it the
/// access a peer of this release grants (`earlier`: one of an earlier release, without `list`
/// and `watch`). The kubeconfig it hands us is kept in Secret `liqo/kubeconfig-<p>`.
async fn granted(cp: &ControlPlane, admin: &Client, p: &str, earlier: bool) -> SecretReference {
    let access = advertisement_access(p);
    liqo_reconciler::tenancy::tenant::grant(admin, "test", p, &access).await.unwrap();
    let namespace = tenant_namespace(p);
    if earlier {
        let rule = PolicyRule {
            api_groups: Some(vec!["sharing.liqo.io".into()]),
            resources: Some(vec!["advertisements".into()]),
            verbs: ["get", "create", "update", "patch", "delete"].map(String::from).to_vec(),
            ..Default::default()
        };
        let role = Role { metadata: meta("earlier-broadcaster", &namespace), rules: Some(vec![rule]) };
        Api::<Role>::namespaced(admin.clone(), &namespace).create(&PostParams::default(), &role).await.unwrap();
        let binding = RoleBinding {
            metadata: meta(BROADCASTER_CLUSTER_ROLE, &namespace),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Role".into(),
                name: "earlier-broadcaster".into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: access.service_account_name().into(),
                namespace: Some(namespace.clone()),
                ..Default::default()
            }]),
        };
        let bindings = Api::<RoleBinding>::namespaced(admin.clone(), &namespace);
        // Bound to a Role of the earlier grant instead of this release's ClusterRole.
        bindings.delete(BROADCASTER_CLUSTER_ROLE, &DeleteParams::default()).await.unwrap();
        liqo_testenv::eventually("the binding of this release gone", || async {
            bindings.get_opt(BROADCASTER_CLUSTER_ROLE).await.unwrap().is_none().then_some(())
        })
        .await;
        bindings.create(&PostParams::default(), &binding).await.unwrap();
        // In force before the broadcaster starts: a LIST by its token refused.
        let token = service_account_token(admin, access.namespace(), access.service_account_name()).await;
        let as_peer = Api::<Advertisement>::namespaced(cp.client(&token).unwrap(), &namespace);
        liqo_testenv::eventually("the earlier grant in force (no list)", || async {
            as_peer.list(&Default::default()).await.is_err().then_some(())
        })
        .await;
    }
    let token = service_account_token(admin, access.namespace(), access.service_account_name()).await;
    let kubeconfig = kubeconfig(cp, &token, &namespace);
    let name = format!("kubeconfig-{p}");
    let secret =
        Secret { metadata: meta(&name, "liqo"), string_data: Some([("kubeconfig".to_owned(), kubeconfig)].into()), ..Default::default() };
    Api::<Secret>::namespaced(admin.clone(), "liqo").create(&PostParams::default(), &secret).await.unwrap();
    SecretReference { name: Some(name), namespace: Some("liqo".into()) }
}

fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: Some(namespace.into()), ..Default::default() }
}

/// A self-contained kubeconfig for `token` on `cp`, its context in `namespace`.
fn kubeconfig(cp: &ControlPlane, token: &str, namespace: &str) -> String {
    use base64::Engine;
    let ca = std::fs::read(cp.path().join("certs/ca.crt")).unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let server = cp.config().unwrap().cluster_url;
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: t, user: u, namespace: {namespace}}}\ncurrent-context: c\n"
    )
}

/// Requests the API server served for Advertisements since it started, by verb.
async fn advertisement_requests(admin: &Client) -> std::collections::BTreeMap<String, f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = admin.request_text(request).await.unwrap_or_default();
    let mut by_verb = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{") && l.contains("resource=\"advertisements\"")) {
        let verb = line.split("verb=\"").nth(1).and_then(|v| v.split('"').next()).unwrap_or_default().to_owned();
        let n: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
        *by_verb.entry(verb).or_insert(0.0) += n;
    }
    by_verb
}

fn total(by_verb: &std::collections::BTreeMap<String, f64>) -> f64 {
    by_verb.values().sum()
}

async fn advertisement(admin: &Client, p: &str) -> Option<Advertisement> {
    Api::<Advertisement>::namespaced(admin.clone(), &tenant_namespace(p)).get_opt(&advertisement_name(OWN)).await.unwrap()
}

/// What our broadcasters publish: the summary of no nodes.
fn published() -> liqo_api::ResourceSummary {
    liqo_reconciler::cluster::resources::summarize(std::iter::empty())
}

/// Broadcasters' watches of Advertisements open now: each of its own by name (the controller
/// manager's watch of them all, over the cluster, is not counted).
async fn watches_held(admin: &Client) -> f64 {
    liqo_testenv::watches_open(admin, "advertisements", liqo_testenv::WatchScope::ByName).await
}

/// Waits until the Advertisement in `p`'s namespace is ours as we publish it, and says how
/// long it took.
async fn repaired(admin: &Client, p: &str, what: &str) -> Duration {
    let started = Instant::now();
    liqo_testenv::eventually(what, || async {
        advertisement(admin, p).await.filter(|a| a.spec.cluster_id == OWN && a.spec.resources == published()).map(|_| ())
    })
    .await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcaster_watches_its_advertisement_asks_nothing_in_steady_state_and_repairs_it_at_once() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let period = Duration::from_secs(1);
    let b = broadcasters(&admin, period);
    let p = peer(1);
    b.ensure(&p, "PeeringRequest", "liqo", granted(&cp, &admin, &p, false).await);
    liqo_testenv::eventually("our Advertisement published", || advertisement(&admin, &p)).await;
    liqo_testenv::eventually("its watch open", || async { (watches_held(&admin).await >= 1.0).then_some(()) }).await;

    // Ten periods of steady state: nothing asked (a watch lasts 20 to 30 periods).
    let before = advertisement_requests(&admin).await;
    tokio::time::sleep(period * 10).await;
    let after = advertisement_requests(&admin).await;
    let sent = total(&after) - total(&before);
    assert!(sent <= 1.0, "{sent} requests in 10 periods (before {before:?}, after {after:?})");
    assert_eq!(after.get("GET"), before.get("GET"), "no GET while watching");

    // Deleted: made again at once, told by the watch.
    let advertisements = Api::<Advertisement>::namespaced(admin.clone(), &tenant_namespace(&p));
    advertisements.delete(&advertisement_name(OWN), &DeleteParams::default()).await.unwrap();
    let took = repaired(&admin, &p, "the deleted Advertisement made again").await;
    eprintln!("deleted: made again in {:.2} s (period {period:?})", took.as_secs_f64());

    // Edited away from what we publish: written back.
    let edit = json!({"spec": {"resources": {"cpu": "64"}}});
    advertisements.patch(&advertisement_name(OWN), &PatchParams::default(), &Patch::Merge(edit)).await.unwrap();
    let took = repaired(&admin, &p, "the edited Advertisement written back").await;
    eprintln!("edited: written back in {:.2} s", took.as_secs_f64());

    // Released: withdrawn, and its watch closed.
    b.release(&p, "PeeringRequest", None).await.unwrap();
    assert!(advertisement(&admin, &p).await.is_none(), "withdrawn");
    liqo_testenv::eventually("no watch left", || async { (watches_held(&admin).await == 0.0).then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_grants_no_watch_is_asked_every_period_and_still_repaired() {
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let period = Duration::from_secs(1);
    let b = broadcasters(&admin, period);
    let p = peer(2);
    b.ensure(&p, "PeeringRequest", "liqo", granted(&cp, &admin, &p, true).await);
    liqo_testenv::eventually("our Advertisement published", || advertisement(&admin, &p)).await;
    // Asked every period: a GET each.
    let before = advertisement_requests(&admin).await;
    liqo_testenv::eventually("GETs every period", || async {
        let now = advertisement_requests(&admin).await;
        (now.get("GET").copied().unwrap_or(0.0) - before.get("GET").copied().unwrap_or(0.0) >= 3.0).then_some(())
    })
    .await;
    assert_eq!(watches_held(&admin).await, 0.0, "no watch held");
    Api::<Advertisement>::namespaced(admin.clone(), &tenant_namespace(&p))
        .delete(&advertisement_name(OWN), &DeleteParams::default())
        .await
        .unwrap();
    repaired(&admin, &p, "the deleted Advertisement made again by a round").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restarted_under_100_watching_broadcasters_gets_them_back_within_a_period_spread() {
    let Some(mut cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    const N: usize = 100;
    let period = Duration::from_secs(60);
    let b = broadcasters(&admin, period);
    for n in 0..N {
        let p = peer(100 + n);
        b.ensure(&p, "PeeringRequest", "liqo", granted(&cp, &admin, &p, false).await);
    }
    liqo_testenv::eventually("every broadcaster watching", || async { (watches_held(&admin).await == N as f64).then_some(()) }).await;

    let killed = Instant::now();
    cp.restart_apiserver().await;
    let back = Instant::now();
    eprintln!("the API server was back {:.1} s after it was killed", (back - killed).as_secs_f64());
    let admin = cp.admin();
    // The API server's counters start again with it: all it served since.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let first = advertisement_requests(&admin).await;
    let watching = watches_held(&admin).await;
    eprintln!("first 10 s after the restart: {first:?}, {watching} watching");
    // The counters count a watch once it ends: those open now are added. All at once, each
    // would list and watch again: 200 requests or more. Spread over the 60 s period, about a
    // quarter of them.
    let sent = total(&first) + watching;
    assert!(sent <= N as f64, "{sent} requests in the first 10 s: {first:?} and {watching} watches open");
    let deadline = period + Duration::from_secs(5);
    loop {
        let watching = watches_held(&admin).await;
        if watching == N as f64 {
            break;
        }
        assert!(back.elapsed() < deadline, "{watching} of {N} watching {:.0} s after the restart", back.elapsed().as_secs_f64());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("all {N} watching again {:.1} s after the restart", back.elapsed().as_secs_f64());
    let requests = advertisement_requests(&admin).await;
    assert!(total(&requests) <= 4.0 * N as f64, "at most two lists and two watches each: {requests:?}");
    for n in 0..N {
        assert!(advertisement(&admin, &peer(100 + n)).await.is_some());
    }
}

/// A watch opened after our Advertisement went (deleted between a round and the watch, or
/// while none was open) tells so first, and a round follows: from `resourceVersion=0` it told
/// nothing, and the chaos soak (seed 4) saw an Advertisement deleted just as a restarted
/// broadcaster opened its watch never made again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_opened_after_our_advertisement_went_tells_so_first() {
    use liqo_reconciler::incoming::broadcaster::follow::{Following, Next, Target, judge};
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.admin();
    install_liqo(&admin, "liqo").await;
    let p = peer(3);
    let access = advertisement_access(&p);
    liqo_reconciler::tenancy::tenant::grant(&admin, "test", &p, &access).await.unwrap();
    let token = service_account_token(&admin, access.namespace(), access.service_account_name()).await;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&kubeconfig(&cp, &token, &tenant_namespace(&p))).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let client = Client::try_from(config).unwrap();
    let (period, resources) = (Duration::from_secs(1), published());
    let mut follow = Following::default();
    follow.published = true;
    let to = |generation| Target { client: &client, generation, access: 0, own: OWN, period, spread: 0.5 };

    // None there: the first thing told is a deletion, which runs a round.
    follow.open(&to(1), None);
    let (told, lasted, lasts) = follow.next().await;
    assert_eq!(judge(told, OWN, &resources, lasted, lasts), Next::Round { rewatch: false });

    // Ours there, as we publish it: told, and nothing to do; then its deletion is told.
    let adv = Advertisement::new(
        &advertisement_name(OWN),
        liqo_api::AdvertisementSpec { cluster_id: OWN.into(), kube_config_ref: None, resources: published(), timestamp: None },
    );
    let theirs = Api::<Advertisement>::namespaced(admin.clone(), &tenant_namespace(&p));
    theirs.create(&PostParams::default(), &adv).await.unwrap();
    follow.close();
    follow.open(&to(1), None);
    let (told, lasted, lasts) = follow.next().await;
    assert_eq!(judge(told, OWN, &resources, lasted, lasts), Next::Keep);
    theirs.delete(&advertisement_name(OWN), &DeleteParams::default()).await.unwrap();
    let (told, lasted, lasts) = follow.next().await;
    assert_eq!(judge(told, OWN, &resources, lasted, lasts), Next::Round { rewatch: false });

    // Resumed after a break from the last version told, with one request: what changed while
    // no watch was open (ours made again, then deleted) is told, the deletion last.
    theirs.create(&PostParams::default(), &adv).await.unwrap();
    let (told, lasted, lasts) = follow.next().await;
    assert_eq!(judge(told, OWN, &resources, lasted, lasts), Next::Keep, "ours made again, as we publish it");
    let seen = follow.seen(0).expect("the version of the last event told");
    assert_eq!(follow.seen(1), None, "a version seen through another access is not resumed from");
    follow.close();
    theirs.delete(&advertisement_name(OWN), &DeleteParams::default()).await.unwrap();
    let before = advertisement_requests(&admin).await;
    follow.resume(&to(2), &seen).await.unwrap();
    assert!(follow.watching(2));
    let (told, lasted, lasts) = follow.next().await;
    assert_eq!(judge(told, OWN, &resources, lasted, lasts), Next::Round { rewatch: false }, "the deletion while away");
    follow.close();
    // (The API server counts a watch once it ends.)
    let after = liqo_testenv::eventually("the resumed watch counted", || async {
        let after = advertisement_requests(&admin).await;
        (total(&after) > total(&before)).then_some(after)
    })
    .await;
    let lists = |m: &std::collections::BTreeMap<String, f64>| m.get("LIST").copied().unwrap_or(0.0) + m.get("GET").copied().unwrap_or(0.0);
    assert_eq!(lists(&after), lists(&before), "no LIST nor GET to resume: {before:?} then {after:?}");
}
