//! What `manifests/monitoring/` ships, checked against what the binaries export:
//! - the alert rules pass `promtool check rules` and their unit tests (`promtool test rules`,
//!   Debian's `prometheus` package; SKIPPED without it);
//! - the PrometheusRule holds exactly the groups of the plain rules file;
//! - every metric the rules and the Grafana dashboard query is one the reconciler or the
//!   webhook exports (a renamed metric fails here, not silently in a user's Grafana);
//! - the Grafana dashboard is valid JSON with the panels an operator needs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use liqo_testenv::skip;

fn monitoring() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/monitoring")
}

fn yaml(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(monitoring().join(name)).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn dashboard() -> serde_json::Value {
    let text = std::fs::read_to_string(monitoring().join("grafana-dashboard.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("grafana-dashboard.json is not JSON: {e}"))
}

/// The exposition of both components with one series in every family (a family shows in the
/// exposition only once it has one).
fn exposition() -> String {
    use liqo_api::reasons::{ConditionType, Reason};
    use std::time::{Duration, Instant, SystemTime};
    let r = liqo_reconciler::reporting::metrics::Metrics::default();
    r.observe::<()>("foreign_cluster", &Ok(()), Instant::now());
    r.observe_health_check::<()>(&Ok(()), Duration::from_millis(5));
    r.join_failed(ConditionType::Joined, Reason::PeerRefused);
    r.auth_identity.get_or_create(&liqo_reconciler::remote::auth::service::IdentityLabels { result: "issued" }).inc();
    r.auth_connections_refused.inc();
    let peer: liqo_api::ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster", "metadata": {"name": "p"},
        "spec": {"clusterIdentity": {"clusterID": "p"}, "join": true}
    }))
    .unwrap();
    r.count_foreign_clusters([&peer]);
    r.count_peers([&peer], SystemTime::now());
    r.tls_handshakes.get_or_create(&liqo_reconciler::reporting::metrics::HandshakeLabels { kind: "resumed" }).inc();
    r.connects_first.get_or_create(&liqo_reconciler::reporting::metrics::OutcomeLabels { outcome: "kept_answered" }).inc();
    let w = liqo_webhook::metrics::Metrics::default();
    w.record_admission(liqo_webhook::admission::Endpoint::Validate, "PeeringRequest", "CREATE", None, 0.001);
    w.bad_requests.get_or_create(&liqo_webhook::metrics::ReasonLabels { reason: "malformed" }).inc();
    w.tls_reloads.get_or_create(&liqo_webhook::metrics::ReasonLabels { reason: "reloaded" }).inc();
    r.encode() + &w.encode()
}

/// The sample names the two components expose: from the `# TYPE` lines of their expositions
/// (counters as `_total`, histograms as `_bucket`, `_sum` and `_count`).
fn exported() -> BTreeSet<String> {
    let text = exposition();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let (name, kind) = rest.split_once(' ').unwrap();
        match kind {
            "counter" => names.insert(format!("{name}_total")),
            "histogram" => ["_bucket", "_sum", "_count"].iter().all(|s| names.insert(format!("{name}{s}"))),
            _ => names.insert(name.to_owned()),
        };
    }
    names
}

/// The metric names a PromQL expression uses (ours start with `liqo_`; recording rules with
/// `liqo:`, which are checked apart).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("liqo_") {
        let before_ok = at == 0 || !rest[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        let name: String = rest[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
        if before_ok {
            names.push(name.clone());
        }
        rest = &rest[at + name.len()..];
    }
    names
}

fn rules() -> Vec<serde_json::Value> {
    let groups = yaml("liqo-alerts.rules.yaml")["groups"].as_array().unwrap().clone();
    groups.iter().flat_map(|g| g["rules"].as_array().unwrap().clone()).collect()
}

fn dashboard_exprs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in dashboard()["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap_or_default().to_owned();
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push((title.clone(), target["expr"].as_str().unwrap_or_default().to_owned()));
        }
    }
    out
}

#[test]
fn the_name_parser_finds_every_metric_and_only_metrics() {
    let names =
        metric_names(r#"sum by (reason) (rate(liqo_webhook_admissions_total{decision="denied"}[5m])) > 3 * liqo:webhook_denials:rate1h"#);
    assert_eq!(names, ["liqo_webhook_admissions_total"]);
    assert!(metric_names("histogram_quantile(0.9, sum by (le) (rate(xliqo_y[5m])))").is_empty());
    assert!(exported().contains("liqo_webhook_admissions_total"), "{:?}", exported());
    assert_eq!(exported().len(), exposition().matches("# TYPE ").count() + 2 * exposition().matches(" histogram\n").count());
    assert!(!exported().contains("liqo_webhook_admissions"), "a counter is exposed as _total only");
}

#[test]
fn every_metric_the_alerts_and_the_dashboard_query_is_exported() {
    let exported = exported();
    for wanted in [
        "liqo_reconciler_peers",
        "liqo_reconciler_peer_unhealthy_seconds",
        "liqo_reconciler_health_period_seconds",
        "liqo_reconciler_peer_health_check_duration_seconds_bucket",
        "liqo_reconciler_join_failures_total",
        "liqo_reconciler_leader",
        "liqo_reconciler_auth_certificate_expiry_timestamp_seconds",
        "liqo_webhook_certificate_expiry_timestamp_seconds",
        "liqo_webhook_admissions_total",
        "liqo_webhook_admission_duration_seconds_bucket",
    ] {
        assert!(exported.contains(wanted), "{wanted} is not exported: {exported:?}");
    }
    let recorded: BTreeSet<String> = rules().iter().filter_map(|r| r["record"].as_str().map(str::to_owned)).collect();
    for rule in rules() {
        let name = rule["alert"].as_str().or(rule["record"].as_str()).unwrap().to_owned();
        let expr = rule["expr"].as_str().unwrap();
        for metric in metric_names(expr) {
            assert!(exported.contains(&metric), "rule {name} queries {metric}, which nothing exports");
        }
        for used in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).filter(|w| w.starts_with("liqo:")) {
            assert!(recorded.contains(used), "rule {name} uses {used}, which no rule records");
        }
    }
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 10, "{exprs:?}");
    for (panel, expr) in exprs {
        let names = metric_names(&expr);
        assert!(!names.is_empty(), "panel {panel:?} queries none of our metrics: {expr}");
        for metric in names {
            assert!(exported.contains(&metric), "panel {panel:?} queries {metric}, which nothing exports");
        }
        assert!(!expr.contains("liqo:"), "panel {panel:?} needs a recording rule; the dashboard must work without the rules");
    }
}

#[test]
fn the_dashboard_has_the_panels_an_operator_needs() {
    let d = dashboard();
    assert_eq!(d["uid"], "liqo-discovery");
    assert!(d["templating"]["list"].as_array().unwrap().iter().any(|v| v["name"] == "datasource" && v["type"] == "datasource"));
    let exprs = dashboard_exprs();
    let queried = |metric: &str| exprs.iter().any(|(_, e)| metric_names(e).iter().any(|m| m == metric));
    for (what, metric) in [
        ("peers by state", "liqo_reconciler_peers"),
        ("health-check latency", "liqo_reconciler_peer_health_check_duration_seconds_bucket"),
        ("webhook decisions", "liqo_webhook_admissions_total"),
        ("webhook latency", "liqo_webhook_admission_duration_seconds_bucket"),
        ("errors by label", "liqo_reconciler_reconciles_total"),
        ("join failures", "liqo_reconciler_join_failures_total"),
        ("certificate expiry", "liqo_webhook_certificate_expiry_timestamp_seconds"),
        ("leader", "liqo_reconciler_leader"),
    ] {
        assert!(queried(metric), "no panel shows {what} ({metric})");
    }
    for panel in d["panels"].as_array().unwrap() {
        let uid = &panel["datasource"]["uid"];
        assert_eq!(uid, "${datasource}", "panel {} must use the datasource variable", panel["title"]);
    }
}

#[test]
fn the_prometheus_rule_holds_exactly_the_plain_rules() {
    let plain = yaml("liqo-alerts.rules.yaml");
    let operator = yaml("prometheusrule.yaml");
    assert_eq!(operator["kind"], "PrometheusRule");
    assert_eq!(operator["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(operator["spec"]["groups"], plain["groups"], "prometheusrule.yaml's groups differ from liqo-alerts.rules.yaml's");
    let names: Vec<String> = rules().iter().filter_map(|r| r["alert"].as_str().map(str::to_owned)).collect();
    for wanted in
        ["LiqoPeerNotHealthy", "LiqoJoinFailing", "LiqoWebhookDenialsSpiking", "LiqoCertificateExpiringSoon", "LiqoReconcilerLeaderMissing"]
    {
        assert!(names.iter().any(|n| n == wanted), "{wanted} missing from {names:?}");
    }
}

fn promtool() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("promtool")).find(|p| p.is_file())
}

#[test]
fn promtool_checks_the_rules_and_runs_their_unit_tests() {
    let Some(promtool) = promtool() else {
        skip("promtool not found (Debian's prometheus package; .ci/run installs it): the alert rules were not checked");
        return;
    };
    let check = Command::new(&promtool).arg("check").arg("rules").arg(monitoring().join("liqo-alerts.rules.yaml")).output().unwrap();
    let said = String::from_utf8_lossy(&check.stdout).into_owned() + &String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success() && said.contains("SUCCESS"), "promtool check rules:\n{said}");

    let test =
        Command::new(&promtool).args(["test", "rules", "alerts.test.yaml"]).current_dir(monitoring().join("tests")).output().unwrap();
    let said = String::from_utf8_lossy(&test.stdout).into_owned() + &String::from_utf8_lossy(&test.stderr);
    assert!(test.status.success() && said.contains("SUCCESS"), "promtool test rules:\n{said}");

    // Every alert has unit tests: its name appears among the tests' expected alerts.
    let tests = std::fs::read_to_string(monitoring().join("tests/alerts.test.yaml")).unwrap();
    for rule in rules() {
        if let Some(alert) = rule["alert"].as_str() {
            assert!(tests.contains(&format!("alertname: {alert}")), "{alert} has no promtool unit test");
        }
    }
}
