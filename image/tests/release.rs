//! `release/release.sh VERSION` (`just release`), packaging the kubectl-liqo this test run
//! built: the archive holds the plugin and the LICENSE and runs as the version of Cargo.toml;
//! SHA256SUMS and the krew manifest's sha256 are the archive's; the manifest is what krew
//! reads; the same binary gives the same archive byte for byte; a version that is not
//! Cargo.toml's is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use liqo_testenv::skip;
use sha2::{Digest, Sha256};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The kubectl-liqo built beside this test (`cargo test --workspace` builds every binary).
fn plugin() -> Option<PathBuf> {
    let path = std::env::current_exe().ok()?.parent()?.parent()?.join("kubectl-liqo");
    path.exists().then_some(path)
}

fn release(version: &str, binary: &Path, dist: &Path) -> Output {
    Command::new(root().join("release/release.sh"))
        .arg(version)
        .env("LIQO_RELEASE_BINARY", binary)
        .env("LIQO_DIST_DIR", dist)
        .env("LIQO_RELEASE_URL", format!("https://downloads.example/liqo/v{VERSION}"))
        .env("SOURCE_DATE_EPOCH", "1764000000")
        .output()
        .unwrap()
}

fn sha256(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_release_packages_the_plugin_with_its_sums_and_a_krew_manifest() {
    let Some(binary) = plugin() else {
        skip("kubectl-liqo was not built beside this test (cargo test --workspace builds it)");
        return;
    };
    let dist = tempfile::tempdir().unwrap();
    let out = release(VERSION, &binary, dist.path());
    assert!(out.status.success(), "release.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let name = format!("kubectl-liqo-{VERSION}-linux-amd64.tar.gz");
    let archive = dist.path().join(&name);
    assert!(archive.is_file(), "{} missing: {}", name, String::from_utf8_lossy(&out.stderr));
    let sum = sha256(&archive);

    assert_eq!(std::fs::read_to_string(dist.path().join("SHA256SUMS")).unwrap(), format!("{sum}  {name}\n"));

    let manifest: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(dist.path().join("plugins/liqo.yaml")).unwrap()).unwrap();
    assert_eq!(manifest["apiVersion"], "krew.googlecontainertools.github.com/v1alpha2");
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "liqo", "krew names the plugin after kubectl-liqo");
    assert_eq!(manifest["spec"]["version"], format!("v{VERSION}"));
    assert!(manifest["spec"]["shortDescription"].as_str().is_some_and(|d| !d.is_empty() && d.len() < 80));
    let platforms = manifest["spec"]["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 1, "{platforms:?}");
    let p = &platforms[0];
    assert_eq!(p["selector"]["matchLabels"]["os"], "linux");
    assert_eq!(p["selector"]["matchLabels"]["arch"], "amd64");
    assert_eq!(p["uri"], format!("https://downloads.example/liqo/v{VERSION}/{name}"));
    assert_eq!(p["sha256"], sum.as_str());
    assert_eq!(p["bin"], "kubectl-liqo");

    // What krew unpacks: the plugin and its licence, and the plugin says its version.
    let unpacked = tempfile::tempdir().unwrap();
    let tar = Command::new("tar").arg("-xzf").arg(&archive).arg("-C").arg(unpacked.path()).status().unwrap();
    assert!(tar.success());
    let mut files: Vec<String> =
        std::fs::read_dir(unpacked.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files, ["LICENSE", "kubectl-liqo"]);
    let version = Command::new(unpacked.path().join("kubectl-liqo")).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), format!("kubectl liqo {VERSION}"));

    // The same binary gives the same archive.
    let again = tempfile::tempdir().unwrap();
    assert!(release(VERSION, &binary, again.path()).status.success());
    assert_eq!(sha256(&again.path().join(&name)), sum, "the archive is reproducible");
}

#[test]
fn a_version_that_is_not_cargo_tomls_is_refused() {
    let dist = tempfile::tempdir().unwrap();
    let out = release("99.0.0", Path::new("/nonexistent"), dist.path());
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("not the version in Cargo.toml ({VERSION})")) && said.contains("set-version.sh"), "{said}");
    let usage = Command::new(root().join("release/release.sh")).output().unwrap();
    assert_eq!(usage.status.code(), Some(2), "no VERSION is a usage error");
}
