//! A Kubernetes quantity (`500m`, `32Gi`, `1e3`) read as a number in base units: cores, bytes,
//! a count. What the reconciler sums into an Advertisement and the dashboard draws as bars.

/// The decimal and binary suffixes, the binary ones first (`Mi` before `m`).
const SUFFIXES: [(&str, f64); 15] = [
    ("Ki", 1024.0),
    ("Mi", 1_048_576.0),
    ("Gi", 1_073_741_824.0),
    ("Ti", 1_099_511_627_776.0),
    ("Pi", 1_125_899_906_842_624.0),
    ("Ei", 1_152_921_504_606_846_976.0),
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("E", 1e18),
];

/// `q` in base units; `None` when it does not read as a non-negative finite quantity.
pub fn parse(q: &str) -> Option<f64> {
    let q = q.trim();
    let (number, factor) = SUFFIXES.iter().find_map(|(s, f)| q.strip_suffix(s).map(|n| (n, *f))).unwrap_or((q, 1.0));
    // Digits, a point, a sign and an exponent only: not `inf` or `NaN`, which f64 would read.
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '+' | '-' | 'e' | 'E')) {
        return None;
    }
    number.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).map(|v| v * factor)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn quantities_read_as_kubernetes_writes_them() {
        assert_eq!(parse("8"), Some(8.0));
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("3500m"), Some(3.5));
        assert_eq!(parse("32Gi"), Some(32.0 * 1_073_741_824.0));
        assert_eq!(parse("2k"), Some(2000.0));
        assert_eq!(parse("2M"), Some(2e6));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("1.5Ki"), Some(1536.0));
        assert_eq!(parse("3E"), Some(3e18));
        for bad in ["", "Gi", "-1", "ten", "lots", "1x", "NaN", "inf", "1e999", "E"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
