//! Rendering of the CRD manifests committed in `manifests/crds/`.
//!
//! `crdgen` writes [`rendered`] to disk; the `committed_crds_match_generated` test fails when
//! the committed files differ from what the types produce.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{Advertisement, ClusterConfig, FederationRequest, ForeignCluster, PeeringRequest, SearchDomain};

const HEADER: &str = "# Generated from the Rust types in api/ by `just generate`; do not edit.\n";

/// Every CRD of the project.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        ForeignCluster::crd(),
        SearchDomain::crd(),
        PeeringRequest::crd(),
        FederationRequest::crd(),
        ClusterConfig::crd(),
        Advertisement::crd(),
    ]
}

/// The files of `manifests/crds/`: one YAML per CRD plus the kustomization listing them.
pub fn rendered() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = all()
        .iter()
        .map(|crd| {
            let name = format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"));
            let yaml = serde_yaml::to_string(crd).expect("a CRD always serializes");
            (name, format!("{HEADER}{yaml}"))
        })
        .collect();
    files.sort();
    // Argo CD applies the CRDs first (with the namespace; see docs/gitops.md).
    let mut kustomization = format!(
        "{HEADER}apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncommonAnnotations:\n  argocd.argoproj.io/sync-wave: \"-2\"\nresources:\n"
    );
    for (name, _) in &files {
        kustomization.push_str(&format!("  - {name}\n"));
    }
    files.push(("kustomization.yaml".to_owned(), kustomization));
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn crds_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/crds")
    }

    #[test]
    fn committed_crds_match_generated() {
        let dir = crds_dir();
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}; run `just generate`", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let generated = rendered();
        let mut names: Vec<String> = generated.iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        assert_eq!(on_disk, names, "manifests/crds/ holds other files than generated; run `just generate`");
        for (name, content) in generated {
            let committed = std::fs::read_to_string(dir.join(&name)).unwrap();
            assert!(committed == content, "manifests/crds/{name} is stale; run `just generate`");
        }
    }

    #[test]
    fn what_peers_write_is_namespaced_the_rest_cluster_scoped_all_with_a_status_subresource() {
        // Tenant namespaces: what a peer writes lives in its tenant namespace.
        let namespaced = ["peeringrequests.discovery.liqo.io", "federationrequests.discovery.liqo.io", "advertisements.sharing.liqo.io"];
        for crd in all() {
            let name = crd.metadata.name.clone().unwrap();
            let scope = if namespaced.contains(&name.as_str()) { "Namespaced" } else { "Cluster" };
            assert_eq!(crd.spec.scope, scope, "{name}");
            for v in &crd.spec.versions {
                let sub = v.subresources.as_ref().unwrap_or_else(|| panic!("{name}: no subresources"));
                assert!(sub.status.is_some(), "{name}: no status subresource");
            }
        }
    }

    #[test]
    fn foreign_cluster_prints_the_documented_columns_and_wide_the_presented_fingerprint() {
        let crd = ForeignCluster::crd();
        let columns = crd.spec.versions[0].additional_printer_columns.clone().unwrap();
        let shown = |wide: bool| -> Vec<String> {
            columns.iter().filter(|c| wide || c.priority.unwrap_or(0) == 0).map(|c| c.name.to_uppercase()).collect()
        };
        assert_eq!(shown(false), ["CLUSTER-ID", "JOIN", "TYPE", "OUTGOING", "INCOMING", "AGE"], "Liqo's columns");
        assert_eq!(shown(true).last().map(String::as_str), Some("PRESENTED-FINGERPRINT"), "-o wide adds what awaits approval");
        assert!(shown(true).contains(&"TENANT-NAMESPACE".to_owned()), "-o wide adds the peer's tenant namespace");
        assert_eq!(crd.spec.names.short_names, Some(vec!["fc".to_owned()]));
    }

    #[test]
    fn cluster_config_schema_carries_the_spec_defaults() {
        let crd = serde_json::to_value(ClusterConfig::crd()).unwrap();
        let dc =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["discoveryConfig"]["properties"];
        assert_eq!(dc["enableDiscovery"]["default"], true);
        assert_eq!(dc["enableAdvertisement"]["default"], true);
        assert_eq!(dc["autojoin"]["default"], true);
        assert_eq!(dc["autojoinUntrusted"]["default"], true);
        assert_eq!(dc["service"]["default"], "_liqo._tcp");
        assert_eq!(dc["domain"]["default"], "local.");
        assert_eq!(dc["ttl"]["default"], 90);
        assert_eq!(dc["ttl"]["minimum"], 30.0);
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["peeringPolicy"]["default"], "AcceptAll");
        assert_eq!(spec["authConfig"]["properties"]["allowEmptyToken"]["default"], true);
    }
}
