//! The `build_info` metric every binary exports: its version as a label, the value always 1.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

/// Registers `<prefix>_build_info{version}` = 1 (the workspace's one version) in `registry`.
pub fn register_build_info(registry: &mut Registry) {
    let build = Family::<VersionLabels, Gauge>::default();
    registry.register("build_info", "The version of this binary (always 1)", build.clone());
    build.get_or_create(&VersionLabels { version: env!("CARGO_PKG_VERSION") }).set(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_a_label_of_a_series_of_one() {
        let mut registry = Registry::with_prefix("x");
        register_build_info(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains(&format!("x_build_info{{version=\"{}\"}} 1\n", env!("CARGO_PKG_VERSION"))), "{text}");
    }
}
