//! The resources summary an Advertisement carries: the sum of our nodes' allocatable CPU,
//! memory and pods (pure).

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use liqo_api::ResourceSummary;

/// A Kubernetes quantity in base units (cores, bytes, count); `None` when it does not parse.
pub use liqo_api::quantity::parse as parse_quantity;

/// Sum of the nodes' allocatable resources. Nodes without a value, or with one that does not
/// parse, add nothing.
pub fn summarize<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> ResourceSummary {
    let (mut cpu, mut memory, mut pods) = (0f64, 0f64, 0f64);
    for node in nodes {
        let Some(alloc) = node.status.as_ref().and_then(|s| s.allocatable.as_ref()) else { continue };
        let get = |k: &str| alloc.get(k).and_then(|q| parse_quantity(&q.0)).unwrap_or(0.0);
        cpu += get("cpu");
        memory += get("memory");
        pods += get("pods");
    }
    ResourceSummary {
        cpu: Some(Quantity(format!("{}m", (cpu * 1000.0).round() as u64))),
        memory: Some(Quantity(format_bytes(memory.round() as u64))),
        pods: Some(Quantity(format!("{}", pods.round() as u64))),
    }
}

fn format_bytes(bytes: u64) -> String {
    for (suffix, factor) in [("Gi", 1u64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{}{suffix}", bytes / factor);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(cpu: &str, memory: &str, pods: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}}
        }))
        .unwrap()
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("4"), Some(4.0));
        assert_eq!(parse_quantity("3500m"), Some(3.5));
        assert_eq!(parse_quantity("8Gi"), Some(8.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse_quantity("1e3"), Some(1000.0));
        assert_eq!(parse_quantity("2k"), Some(2000.0));
        assert_eq!(parse_quantity("-1"), None);
        assert_eq!(parse_quantity("lots"), None);
    }

    #[test]
    fn nodes_add_up() {
        let nodes = [node("4", "16392820Ki", "110"), node("1500m", "2Gi", "110"), node("x", "y", "z")];
        let s = summarize(&nodes);
        assert_eq!(s.cpu, Some(Quantity("5500m".into())));
        assert_eq!(s.memory, Some(Quantity("18489972Ki".into())));
        assert_eq!(s.pods, Some(Quantity("220".into())));
        let empty = summarize(std::iter::empty());
        assert_eq!(empty.cpu, Some(Quantity("0m".into())));
    }
}
