//! Renders `manifests/` at build time for `kubectl liqo install`, so that the plugin installs
//! exactly the manifests of its own version. The kustomizations use only `resources` (files
//! and folders), `commonAnnotations` and a `configMapGenerator` of files without a name
//! suffix; anything else fails the build here rather than rendering something else than
//! `kubectl kustomize` does (`install::tests` compares the two when kubectl is installed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml::{Mapping, Value};

/// The bundles `install` knows: its name and its kustomization folder under `manifests/`.
const BUNDLES: &[(&str, &str)] =
    &[("base", ""), ("config", "config"), ("dashboard", "dashboard"), ("monitoring", "monitoring"), ("ingress", "auth-ingress")];

const KNOWN_KEYS: &[&str] = &["apiVersion", "kind", "resources", "commonAnnotations", "configMapGenerator", "generatorOptions"];

fn main() {
    let manifests = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../manifests");
    println!("cargo:rerun-if-changed={}", manifests.display());
    let mut out = BTreeMap::new();
    for (name, dir) in BUNDLES {
        let objects = render(&manifests.join(dir));
        out.insert(name.to_string(), objects);
    }
    let json = serde_json::to_string(&out).expect("the rendered manifests serialize");
    std::fs::write(PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("manifests.json"), json).unwrap();
}

fn read_yaml(path: &Path) -> Vec<Value> {
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// The objects of the kustomization in `dir`, in the order its resources list them.
fn render(dir: &Path) -> Vec<serde_json::Value> {
    let file = dir.join("kustomization.yaml");
    let k = read_yaml(&file).remove(0);
    let k = k.as_mapping().unwrap_or_else(|| panic!("{}: not a mapping", file.display()));
    for key in k.keys() {
        let key = key.as_str().unwrap_or_default();
        assert!(KNOWN_KEYS.contains(&key), "{}: `{key}` is not rendered by cli/build.rs; teach it, or do without", file.display());
    }
    let mut objects: Vec<Value> = Vec::new();
    for resource in k.get("resources").and_then(Value::as_sequence).into_iter().flatten() {
        let path = dir.join(resource.as_str().expect("a resource is a path"));
        if path.is_dir() {
            objects.extend(render(&path).into_iter().map(|o| serde_yaml::to_value(o).unwrap()));
        } else {
            objects.extend(read_yaml(&path));
        }
    }
    for generated in k.get("configMapGenerator").and_then(Value::as_sequence).into_iter().flatten() {
        objects.push(config_map(dir, generated, k));
    }
    if let Some(annotations) = k.get("commonAnnotations").and_then(Value::as_mapping) {
        for o in &mut objects {
            let metadata = o.get_mut("metadata").and_then(Value::as_mapping_mut).expect("every object has metadata");
            let entry = metadata.entry("annotations".into()).or_insert_with(|| Value::Mapping(Mapping::new()));
            let existing = entry.as_mapping_mut().expect("annotations are a mapping");
            for (key, value) in annotations {
                existing.insert(key.clone(), value.clone());
            }
        }
    }
    objects.into_iter().map(|o| serde_json::to_value(o).unwrap()).collect()
}

/// A `configMapGenerator` entry: `name`, `namespace`, `files`, `options.labels`; without a name
/// suffix (`generatorOptions.disableNameSuffixHash: true` is required).
fn config_map(dir: &Path, generated: &Value, k: &Mapping) -> Value {
    let no_suffix = k.get("generatorOptions").and_then(|g| g.get("disableNameSuffixHash")).and_then(Value::as_bool) == Some(true);
    assert!(no_suffix, "{}: configMapGenerator needs generatorOptions.disableNameSuffixHash: true", dir.display());
    for key in generated.as_mapping().expect("a generator is a mapping").keys() {
        let key = key.as_str().unwrap_or_default();
        assert!(["name", "namespace", "files", "options"].contains(&key), "{}: configMapGenerator `{key}` is not rendered", dir.display());
    }
    let mut data = Mapping::new();
    for f in generated.get("files").and_then(Value::as_sequence).into_iter().flatten() {
        let f = f.as_str().expect("a file name");
        let path = dir.join(f);
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        data.insert(Value::from(Path::new(f).file_name().unwrap().to_str().unwrap()), Value::from(text));
    }
    let mut metadata = Mapping::new();
    metadata.insert("name".into(), generated.get("name").cloned().expect("a generated ConfigMap has a name"));
    if let Some(ns) = generated.get("namespace") {
        metadata.insert("namespace".into(), ns.clone());
    }
    if let Some(labels) = generated.get("options").and_then(|o| o.get("labels")) {
        metadata.insert("labels".into(), labels.clone());
    }
    let mut cm = Mapping::new();
    cm.insert("apiVersion".into(), "v1".into());
    cm.insert("kind".into(), "ConfigMap".into());
    cm.insert("metadata".into(), Value::Mapping(metadata));
    cm.insert("data".into(), Value::Mapping(data));
    Value::Mapping(cm)
}
