//! What discovery records say (pure): TXT key/values (RFC 6763 §6), Liqo's TXT keys, and the
//! cluster an mDNS service or a DNS-SD target stands for. No input panics; every refusal says why.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use liqo_api::{ClusterIdError, validate_cluster_id};

/// TXT keys Liqo publishes (protocol §4).
pub const KEY_ID: &str = "id";
pub const KEY_NAMESPACE: &str = "namespace";
pub const KEY_NAME: &str = "name";
pub const KEY_AUTH: &str = "auth";
pub const KEY_API: &str = "api";

/// A cluster as a discovery record describes it, before it is merged into a ForeignCluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoveredCluster {
    pub cluster_id: String,
    pub cluster_name: Option<String>,
    /// The remote Liqo namespace.
    pub namespace: Option<String>,
    /// The remote auth service, `https://host:port`.
    pub auth_url: Option<String>,
    /// The remote API server, `https://host:port`.
    pub api_url: Option<String>,
}

/// Why a record does not describe a usable cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// No `id` key: not a Liqo record we can use.
    MissingId,
    MalformedId(String, ClusterIdError),
    /// A URL key that is not `https://host[:port]`.
    BadUrl {
        key: &'static str,
        value: String,
    },
    /// Neither a usable address nor an `auth` URL.
    NoAddress,
    /// A Liqo key longer than one DNS character-string can be (255 bytes).
    TooLong {
        key: &'static str,
        len: usize,
    },
    /// A Liqo key whose value holds a control character (it would end up in objects and on
    /// users' terminals).
    ControlCharacter {
        key: &'static str,
    },
}

/// The longest value of a Liqo key: one TXT character-string holds at most 255 bytes.
pub const MAX_VALUE: usize = 255;

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingId => write!(f, "no {KEY_ID}= key in the TXT record"),
            Self::MalformedId(id, e) => write!(f, "{KEY_ID}={id:?} is not a cluster ID: {e}"),
            Self::BadUrl { key, value } => write!(f, "{key}={value:?} is not an https://host:port URL"),
            Self::NoAddress => write!(f, "no address to reach the cluster and no {KEY_AUTH}= key"),
            Self::TooLong { key, len } => write!(f, "{key}= is {len} bytes long (at most {MAX_VALUE})"),
            Self::ControlCharacter { key } => write!(f, "{key}= holds a control character"),
        }
    }
}

impl std::error::Error for RecordError {}

/// The key/value pairs of TXT strings (RFC 6763 §6.3–6.4): keys are case-insensitive and the
/// first occurrence wins; a string without `=` is a boolean attribute (empty value); strings
/// with an empty key, and keys or values that are not UTF-8, are skipped.
pub fn txt_pairs<S: AsRef<[u8]>>(strings: &[S]) -> BTreeMap<String, String> {
    let mut pairs = BTreeMap::new();
    for s in strings {
        let bytes = s.as_ref();
        let (key, value) = match bytes.iter().position(|b| *b == b'=') {
            Some(i) => (&bytes[..i], &bytes[i + 1..]),
            None => (bytes, &[][..]),
        };
        let (Ok(key), Ok(value)) = (std::str::from_utf8(key), std::str::from_utf8(value)) else { continue };
        if key.is_empty() {
            continue;
        }
        pairs.entry(key.to_ascii_lowercase()).or_insert_with(|| value.to_owned());
    }
    pairs
}

/// Liqo's keys of a TXT record, checked: `id` well formed, `auth`/`api` https URLs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiqoTxt {
    pub id: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub auth: Option<String>,
    pub api: Option<String>,
}

impl LiqoTxt {
    pub fn parse(pairs: &BTreeMap<String, String>) -> Result<Self, RecordError> {
        for key in [KEY_ID, KEY_NAMESPACE, KEY_NAME, KEY_AUTH, KEY_API] {
            if let Some(len) = pairs.get(key).map(String::len).filter(|l| *l > MAX_VALUE) {
                return Err(RecordError::TooLong { key, len });
            }
            if pairs.get(key).is_some_and(|v| !liqo_api::terminal::is_printable(v)) {
                return Err(RecordError::ControlCharacter { key });
            }
        }
        let get = |k: &str| pairs.get(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let id = get(KEY_ID);
        if let Some(id) = &id {
            validate_cluster_id(id).map_err(|e| RecordError::MalformedId(id.clone(), e))?;
        }
        let url = |key: &'static str| -> Result<Option<String>, RecordError> {
            match get(key) {
                None => Ok(None),
                Some(v) => https_url(&v).map(Some).ok_or(RecordError::BadUrl { key, value: v }),
            }
        };
        Ok(Self { id, namespace: get(KEY_NAMESPACE), name: get(KEY_NAME), auth: url(KEY_AUTH)?, api: url(KEY_API)? })
    }

    /// The TXT strings of this record, in a stable order.
    pub fn to_strings(&self) -> Vec<String> {
        [(KEY_ID, &self.id), (KEY_NAMESPACE, &self.namespace), (KEY_NAME, &self.name), (KEY_AUTH, &self.auth), (KEY_API, &self.api)]
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
            .collect()
    }
}

/// `value` as a normalised `https://host:port[/path]` URL (lowercase host, explicit port, no
/// trailing slash), or `None` when it is anything else.
pub fn https_url(value: &str) -> Option<String> {
    let url = url::Url::parse(value.trim()).ok()?;
    if url.scheme() != "https" || url.host_str().is_none_or(str::is_empty) || url.cannot_be_a_base() {
        return None;
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
        return None;
    }
    let host = match url.host()? {
        url::Host::Ipv6(a) => format!("[{a}]"),
        h => h.to_string().to_ascii_lowercase(),
    };
    let port = url.port_or_known_default().map(|p| format!(":{p}")).unwrap_or_default();
    Some(format!("https://{host}{port}{}", url.path().trim_end_matches('/')))
}

/// `https://host:port` for a DNS name (trailing dot dropped) or an address.
pub fn endpoint_url(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(a)) => format!("https://[{a}]:{port}"),
        Ok(a) => format!("https://{a}:{port}"),
        Err(_) => format!("https://{}:{port}", host.trim_end_matches('.').to_ascii_lowercase()),
    }
}

/// The address peers should use among those an mDNS service resolved to: IPv4 before IPv6,
/// global before link-local, loopback last; smallest first for a stable choice. IPv6
/// link-local addresses are never chosen: a URL cannot carry the interface they need.
pub fn preferred_address(addresses: &[IpAddr]) -> Option<IpAddr> {
    let rank = |a: &IpAddr| match a {
        IpAddr::V4(v4) if v4.is_loopback() => 3,
        IpAddr::V4(v4) if v4.is_link_local() => 1,
        IpAddr::V4(_) => 0,
        IpAddr::V6(v6) if v6.is_loopback() => 4,
        IpAddr::V6(_) => 2,
    };
    addresses.iter().copied().filter(|a| !matches!(a, IpAddr::V6(v6) if v6.is_unicast_link_local())).min_by_key(|a| (rank(a), *a))
}

/// The cluster an mDNS `_liqo._tcp` service describes: its TXT must carry `id`; the auth URL is
/// the TXT `auth` key, else the service's address and port.
pub fn from_mdns<S: AsRef<[u8]>>(txt: &[S], addresses: &[IpAddr], port: u16) -> Result<DiscoveredCluster, RecordError> {
    let t = LiqoTxt::parse(&txt_pairs(txt))?;
    let cluster_id = t.id.ok_or(RecordError::MissingId)?;
    let auth_url = match t.auth {
        Some(url) => url,
        None => endpoint_url(&preferred_address(addresses).ok_or(RecordError::NoAddress)?.to_string(), port),
    };
    Ok(DiscoveredCluster { cluster_id, cluster_name: t.name, namespace: t.namespace, auth_url: Some(auth_url), api_url: t.api })
}

/// What one DNS-SD target (SRV + optional TXT) of a SearchDomain describes (protocol §5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WanTarget {
    /// The API-server zone: TXT carries `id` and `namespace`, the SRV endpoint is the API server.
    Api(DiscoveredCluster),
    /// The auth-service zone: the SRV endpoint is the auth service; the identity comes from `/ids`.
    Auth { auth_url: String },
}

/// Reads a target from its SRV endpoint (`host` as it should appear in URLs) and TXT strings.
pub fn from_dns<S: AsRef<[u8]>>(host: &str, port: u16, txt: &[S]) -> Result<WanTarget, RecordError> {
    let t = LiqoTxt::parse(&txt_pairs(txt))?;
    let endpoint = endpoint_url(host, port);
    match (t.id, t.namespace) {
        (Some(cluster_id), Some(namespace)) => Ok(WanTarget::Api(DiscoveredCluster {
            cluster_id,
            cluster_name: t.name,
            namespace: Some(namespace),
            auth_url: t.auth,
            api_url: Some(t.api.unwrap_or(endpoint)),
        })),
        _ => Ok(WanTarget::Auth { auth_url: t.auth.unwrap_or(endpoint) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0558de48-097b-4b7d-ba04-6bd2a0f9d24f";

    #[test]
    fn a_hostile_record_is_refused_quickly_and_says_why() {
        let addr = [IpAddr::from([10, 0, 0, 2])];
        // 1,000 keys: the Liqo ones still read, the rest ignored.
        let mut many: Vec<String> = (0..1000).map(|i| format!("k{i}=v{i}")).collect();
        many.push(format!("id={ID}"));
        let found = from_mdns(&many, &addr, 443).unwrap();
        assert_eq!(found.cluster_id, ID);
        // A 60 KB value of a Liqo key: refused, the error short.
        for key in [KEY_NAME, KEY_NAMESPACE, KEY_AUTH, KEY_ID] {
            let huge = [format!("id={ID}"), format!("{key}={}", "x".repeat(60 * 1024))];
            let huge: Vec<&String> = if key == KEY_ID { vec![&huge[1]] } else { huge.iter().collect() };
            let err = from_mdns(&huge, &addr, 443).unwrap_err();
            assert_eq!(err, RecordError::TooLong { key, len: 60 * 1024 });
            assert!(err.to_string().len() < 100, "{err}");
        }
        // The same through DNS-SD.
        assert!(matches!(from_dns("h.example", 443, &[format!("name={}", "n".repeat(300))]), Err(RecordError::TooLong { .. })));
        // A name meant to drive a terminal: refused.
        let escape = [format!("id={ID}"), "name=beta\x1b]0;pwned\x07".to_owned()];
        assert_eq!(from_mdns(&escape, &addr, 443).unwrap_err(), RecordError::ControlCharacter { key: KEY_NAME });
        let newline = [format!("id={ID}"), "namespace=liqo\nfake".to_owned()];
        assert_eq!(from_mdns(&newline, &addr, 443).unwrap_err(), RecordError::ControlCharacter { key: KEY_NAMESPACE });
    }

    #[test]
    fn txt_keys_are_case_insensitive_first_wins_and_attributes_are_empty() {
        let p = txt_pairs(&["ID=a", "id=b", "flag", "=nokey", "k=v=w", ""]);
        assert_eq!(p.get("id").map(String::as_str), Some("a"));
        assert_eq!(p.get("flag").map(String::as_str), Some(""));
        assert_eq!(p.get("k").map(String::as_str), Some("v=w"));
        assert_eq!(p.len(), 3);
        let bad: &[&[u8]] = &[b"id=\xff", b"\xfe=x"];
        assert!(txt_pairs(bad).is_empty());
    }

    #[test]
    fn mdns_service_with_every_key() {
        let txt = [
            format!("id={ID}"),
            "namespace=liqo".into(),
            "name=home".into(),
            "auth=https://10.0.0.5:30443".into(),
            "api=https://Api.Example.com:6443/".into(),
        ];
        let c = from_mdns(&txt, &["10.0.0.9".parse().unwrap()], 8443).unwrap();
        assert_eq!(c.cluster_id, ID);
        assert_eq!(c.cluster_name.as_deref(), Some("home"));
        assert_eq!(c.namespace.as_deref(), Some("liqo"));
        assert_eq!(c.auth_url.as_deref(), Some("https://10.0.0.5:30443"), "the TXT auth key wins over the address");
        assert_eq!(c.api_url.as_deref(), Some("https://api.example.com:6443"));
    }

    #[test]
    fn mdns_service_without_auth_key_uses_the_preferred_address_and_port() {
        let addrs: Vec<IpAddr> =
            ["fe80::1", "127.0.0.1", "192.168.1.20", "2001:db8::5", "10.1.0.1"].iter().map(|a| a.parse().unwrap()).collect();
        let c = from_mdns(&[format!("id={ID}")], &addrs, 31234).unwrap();
        assert_eq!(c.auth_url.as_deref(), Some("https://10.1.0.1:31234"));
        let v6: Vec<IpAddr> = vec!["fe80::1".parse().unwrap(), "2001:db8::5".parse().unwrap()];
        assert_eq!(from_mdns(&[format!("id={ID}")], &v6, 1).unwrap().auth_url.as_deref(), Some("https://[2001:db8::5]:1"));
        assert_eq!(from_mdns(&[format!("id={ID}")], &[], 1), Err(RecordError::NoAddress));
        let link_local_only: Vec<IpAddr> = vec!["fe80::1".parse().unwrap()];
        assert_eq!(from_mdns(&[format!("id={ID}")], &link_local_only, 1), Err(RecordError::NoAddress), "no scope in a URL");
    }

    #[test]
    fn mdns_records_without_a_good_id_or_with_bad_urls_are_refused() {
        assert_eq!(from_mdns(&["namespace=liqo"], &["10.0.0.1".parse().unwrap()], 1), Err(RecordError::MissingId));
        assert!(matches!(from_mdns(&["id=Not_An_Id"], &[], 1), Err(RecordError::MalformedId(..))));
        assert_eq!(
            from_mdns(&[format!("id={ID}"), "auth=http://x:1".into()], &[], 1),
            Err(RecordError::BadUrl { key: KEY_AUTH, value: "http://x:1".into() })
        );
        assert!(matches!(from_mdns(&[format!("id={ID}"), "api=not a url".into()], &[], 1), Err(RecordError::BadUrl { key: KEY_API, .. })));
    }

    #[test]
    fn an_api_server_zone_target_is_the_api_server_with_identity_from_txt() {
        let t = from_dns("liqo-cluster-api.server.example.com.", 6443, &[format!("id={ID}"), "namespace=liqo".into()]).unwrap();
        assert_eq!(
            t,
            WanTarget::Api(DiscoveredCluster {
                cluster_id: ID.into(),
                namespace: Some("liqo".into()),
                api_url: Some("https://liqo-cluster-api.server.example.com:6443".into()),
                ..Default::default()
            })
        );
    }

    #[test]
    fn an_auth_service_zone_target_is_the_auth_service() {
        assert_eq!(
            from_dns("auth.server.example.com.", 443, &[] as &[&str]).unwrap(),
            WanTarget::Auth { auth_url: "https://auth.server.example.com:443".into() }
        );
        // An id without namespace is not the API-server zone's form either.
        assert_eq!(from_dns("1.2.3.4", 8443, &[format!("id={ID}")]).unwrap(), WanTarget::Auth { auth_url: "https://1.2.3.4:8443".into() });
        assert!(matches!(from_dns("h", 1, &["id=BAD"]), Err(RecordError::MalformedId(..))));
    }

    #[test]
    fn urls_are_normalised_and_only_https_host_port_is_accepted() {
        assert_eq!(https_url("https://A.b:1/").as_deref(), Some("https://a.b:1"));
        assert_eq!(https_url("https://a.b").as_deref(), Some("https://a.b:443"));
        assert_eq!(https_url("https://[2001:DB8::1]:443").as_deref(), Some("https://[2001:db8::1]:443"));
        for bad in ["http://a", "https://", "https://u@a", "https://a?q", "https://a#f", "a:1", "", "mailto:x@y"] {
            assert_eq!(https_url(bad), None, "{bad}");
        }
        assert_eq!(endpoint_url("Host.Example.", 1), "https://host.example:1");
        assert_eq!(endpoint_url("::1", 2), "https://[::1]:2");
    }

    #[test]
    fn txt_strings_round_trip() {
        let t = LiqoTxt { id: Some(ID.into()), namespace: Some("liqo".into()), name: None, auth: Some("https://a:1".into()), api: None };
        assert_eq!(LiqoTxt::parse(&txt_pairs(&t.to_strings())).unwrap(), t);
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn no_txt_input_panics(strings in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..12),
                                   addrs in proptest::collection::vec(any::<IpAddr>(), 0..4), port in any::<u16>()) {
                let pairs = txt_pairs(&strings);
                for k in pairs.keys() { prop_assert!(!k.is_empty()); prop_assert_eq!(k.to_ascii_lowercase(), k.clone()); }
                let _ = LiqoTxt::parse(&pairs);
                if let Ok(c) = from_mdns(&strings, &addrs, port) {
                    prop_assert!(validate_cluster_id(&c.cluster_id).is_ok());
                    prop_assert!(c.auth_url.as_deref().is_some_and(|u| https_url(u).as_deref() == Some(u)));
                }
                let _ = from_dns("h.example.", port, &strings);
            }

            #[test]
            fn any_text_url_is_refused_or_normalised_idempotently(s in ".{0,60}") {
                if let Some(u) = https_url(&s) { prop_assert_eq!(https_url(&u), Some(u.clone())); }
            }
        }
    }
}
