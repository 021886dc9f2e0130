//! `just test-assets` (testenv/test-assets.sh) against a local HTTPS mirror of envtest's release
//! index and archive and of Kubernetes' release binaries: the newest release of the minor asked
//! for is chosen, every file is checked against its published checksum and lands in one folder,
//! the `KUBEBUILDER_ASSETS=` line comes last; a checksum that does not match is refused and
//! nothing is installed. The mirror serves real TLS with a CA of its own (CURL_CA_BUNDLE).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/test-assets.sh");
const NODE_BINARIES: [&str; 4] = ["kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"];

fn arch() -> &'static str {
    if cfg!(target_arch = "aarch64") { "arm64" } else { "amd64" }
}

fn hash(tool: &str, file: &Path) -> String {
    let out = Command::new(tool).arg(file).output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_owned()
}

/// Serves `files` (path → bytes) over HTTPS on `listener` (127.0.0.1), with a CA of its own,
/// whose PEM it returns.
fn serve(listener: TcpListener, files: HashMap<String, Vec<u8>>) -> String {
    let now = time::OffsetDateTime::now_utc();
    let ca = liqo_certs::new_ca("mirror-ca", now, time::Duration::days(1)).unwrap();
    let leaf = liqo_certs::issue_serving(&ca, &["127.0.0.1".to_owned()], now, time::Duration::days(1)).unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes()).collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let files = Arc::new(files);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, files) = (acceptor.clone(), files.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (status, body) = match files.get(req.uri().path()) {
                        Some(b) => (200, b.clone()),
                        None => (404, b"not found".to_vec()),
                    };
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder().status(status).body(Full::new(Bytes::from(body))).unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    ca.cert_pem
}

/// A release of each binary: a script printing its name and version (its bytes are what is
/// checked). The envtest archive as controller-tools packs it, and the index naming two releases
/// of 1.36 and one of another platform. `break_this` is served with bytes other than those its
/// checksum was taken of.
fn releases(work: &Path, base: &str, break_this: Option<&str>) -> HashMap<String, Vec<u8>> {
    let a = arch();
    let mut files = HashMap::new();
    let mut index = String::from("releases:\n");
    for version in ["1.36.1", "1.36.2"] {
        let tree = work.join(format!("tree-{version}"));
        let envtest = tree.join("controller-tools/envtest");
        std::fs::create_dir_all(&envtest).unwrap();
        for b in ["kube-apiserver", "etcd", "kubectl"] {
            std::fs::write(envtest.join(b), format!("#!/bin/sh\necho {b} v{version}\n")).unwrap();
        }
        let archive = work.join(format!("envtest-v{version}-linux-{a}.tar.gz"));
        let tar = Command::new("tar").arg("-czf").arg(&archive).arg("-C").arg(&tree).arg("controller-tools").status().unwrap();
        assert!(tar.success());
        let mut bytes = std::fs::read(&archive).unwrap();
        let sha512 = hash("sha512sum", &archive);
        if break_this == Some("envtest") {
            bytes.extend_from_slice(b"tampered");
        }
        let path = format!("/download/envtest-v{version}/envtest-v{version}-linux-{a}.tar.gz");
        files.insert(path.clone(), bytes);
        index.push_str(&format!(
            "  v{version}:\n    envtest-v{version}-darwin-arm64.tar.gz:\n      hash: 00\n      selfLink: {base}/nowhere.tar.gz\n    envtest-v{version}-linux-{a}.tar.gz:\n      hash: {sha512}\n      selfLink: {base}{path}\n"
        ));
        for b in NODE_BINARIES {
            let file = work.join(format!("{b}-{version}"));
            std::fs::write(&file, format!("#!/bin/sh\necho {b} v{version}\n")).unwrap();
            let sha256 = hash("sha256sum", &file);
            let mut bytes = std::fs::read(&file).unwrap();
            if break_this == Some(b) {
                bytes.push(b'#');
            }
            files.insert(format!("/release/v{version}/bin/linux/{a}/{b}"), bytes);
            files.insert(format!("/release/v{version}/bin/linux/{a}/{b}.sha256"), sha256.into_bytes());
        }
    }
    files.insert("/envtest-releases.yaml".into(), index.into_bytes());
    files
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
    dir: PathBuf,
}

async fn run(break_this: Option<&str>, version: &str) -> Run {
    let work = tempfile::tempdir().unwrap().keep();
    // The index names the mirror's address: bound first, then filled.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let ca = serve(listener, releases(&work, &base, break_this));
    let ca_path = work.join("ca.pem");
    std::fs::write(&ca_path, ca).unwrap();
    let dir = work.join("assets");
    let mut command = Command::new("bash");
    command
        .arg(SCRIPT)
        .arg(version)
        .arg(&dir)
        .env("LIQO_ENVTEST_INDEX", format!("{base}/envtest-releases.yaml"))
        .env("LIQO_K8S_RELEASES", format!("{base}/release"))
        .env("CURL_CA_BUNDLE", &ca_path);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        dir,
    }
}

fn have_tools() -> bool {
    ["curl", "sha256sum", "sha512sum", "tar"]
        .iter()
        .all(|t| Command::new("sh").arg("-c").arg(format!("command -v {t}")).output().is_ok_and(|o| o.status.success()))
}

#[tokio::test]
async fn the_newest_release_of_the_minor_is_fetched_verified_and_named() {
    if !have_tools() {
        liqo_testenv::skip("curl, sha256sum, sha512sum or tar missing: test-assets needs them");
        return;
    }
    let run = run(None, "1.36").await;
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(run.stdout.lines().last(), Some(format!("KUBEBUILDER_ASSETS={}", run.dir.display()).as_str()), "{}", run.stdout);
    assert!(run.stderr.contains("Kubernetes 1.36.2"), "{}", run.stderr);
    for b in ["kube-apiserver", "etcd"].into_iter().chain(NODE_BINARIES) {
        let file = run.dir.join(b);
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{b}: {e}"));
        assert_eq!(text, format!("#!/bin/sh\necho {b} v1.36.2\n"), "{b}");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
        assert_eq!(mode & 0o111, 0o111, "{b} is executable");
        // What the tests run: the folder works as KUBEBUILDER_ASSETS is read.
        let ran = Command::new(&file).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&ran.stdout), format!("{b} v1.36.2\n"));
    }
    assert!(!run.dir.join("kubectl").exists(), "only the six binaries");
    // A release asked for by its full version.
    let exact = self::run(None, "v1.36.1").await;
    assert!(exact.ok, "{}", exact.stderr);
    assert_eq!(std::fs::read_to_string(exact.dir.join("etcd")).unwrap(), "#!/bin/sh\necho etcd v1.36.1\n");
}

#[tokio::test]
async fn a_checksum_that_does_not_match_is_refused_and_nothing_is_installed() {
    if !have_tools() {
        liqo_testenv::skip("curl, sha256sum, sha512sum or tar missing: test-assets needs them");
        return;
    }
    for broken in ["envtest", "kubelet"] {
        let run = run(Some(broken), "1.36").await;
        assert!(!run.ok, "{broken}: accepted\n{}", run.stderr);
        let named = if broken == "envtest" { format!("envtest-v1.36.2-linux-{}.tar.gz", arch()) } else { broken.to_owned() };
        assert!(run.stderr.contains(&format!("checksum mismatch for {named}")), "{}", run.stderr);
        assert!(run.stderr.contains("nothing installed"), "{}", run.stderr);
        assert!(!run.dir.exists(), "{broken}: the folder was made");
        assert!(!run.stdout.contains("KUBEBUILDER_ASSETS="));
    }
}

#[tokio::test]
async fn a_release_the_index_lacks_is_named_with_those_it_has() {
    if !have_tools() {
        liqo_testenv::skip("curl, sha256sum, sha512sum or tar missing: test-assets needs them");
        return;
    }
    let run = run(None, "1.99").await;
    assert!(!run.ok);
    assert!(run.stderr.contains("no envtest release 1.99") && run.stderr.contains("1.36.1 1.36.2"), "{}", run.stderr);
}

#[test]
fn without_the_assets_the_command_that_gets_them_is_said_once() {
    // This test binary's parent is cargo (or whoever ran it): the hint is printed at most once
    // whatever the number of calls; what is checked here is that each call still says why.
    if std::env::var_os("KUBEBUILDER_ASSETS").is_some() {
        return; // a machine with the assets: nothing to say
    }
    for _ in 0..3 {
        assert!(liqo_testenv::assets().unwrap_err().contains("KUBEBUILDER_ASSETS is not set"));
    }
    assert!(liqo_testenv::TEST_ASSETS_HINT.contains("just test-assets"));
}
