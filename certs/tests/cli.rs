//! The `liqo-certs` command line as the Justfile uses it: `issue` then `inject`, piped into
//! `kubectl apply -f -`, so stdout must carry the YAML and nothing else.

use std::process::Command;

fn liqo_certs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_liqo-certs")).args(args).output().expect("running liqo-certs")
}

#[test]
fn issue_reports_on_stderr_and_inject_prints_only_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let issued = liqo_certs(&["issue", "--dir", d, "--host", "localhost", "--host", "127.0.0.1"]);
    assert!(issued.status.success(), "{}", String::from_utf8_lossy(&issued.stderr));
    assert!(issued.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&issued.stdout));
    assert!(String::from_utf8_lossy(&issued.stderr).contains("new CA in"));

    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/webhook/webhook-configurations.yaml");
    let ca = format!("{d}/ca.crt");
    let injected = liqo_certs(&["inject", "--ca", &ca, "--url", "https://127.0.0.1:8443", manifest]);
    assert!(injected.status.success(), "{}", String::from_utf8_lossy(&injected.stderr));
    let yaml = String::from_utf8(injected.stdout).unwrap();
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let v: serde_yaml::Value = serde::Deserialize::deserialize(doc).expect("stdout is YAML only");
        assert!(v["kind"].as_str().unwrap().ends_with("WebhookConfiguration"), "{v:?}");
    }
}
