//! What a round needs to know of a peer's kubeconfig every time (the API server it names, our
//! tenant namespace there, when its token was issued and when it expires), read once per
//! kubeconfig instead of parsed each round: three YAML parses per health check were about 8 %
//! of the reconciler's CPU at 1,000 joined peers. Kept by the kubeconfig's SHA-256 (a renewed
//! identity is another kubeconfig); entries unused for [`IDLE`] are dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::config::Kubeconfig;
use sha2::{Digest, Sha256};

use crate::remote::peer::{server_in, tenant_in, token_in};
use crate::tenancy::binding;

/// Entries unused this long are dropped.
pub const IDLE: Duration = Duration::from_secs(15 * 60);

/// How often unused entries are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What a kubeconfig says (all `None` for one that does not parse).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The server of its current context (its first cluster when it names none).
    pub server: Option<String>,
    /// The tenant namespace its current context names ([`crate::remote::peer::tenant_of`]).
    pub tenant: Option<String>,
    /// When its current user's token was issued and when it expires.
    pub token_times: Option<(Timestamp, Timestamp)>,
}

impl Facts {
    /// What `kubeconfig` says (pure).
    pub fn read(kubeconfig: &str) -> Self {
        let Ok(k) = Kubeconfig::from_yaml(kubeconfig) else { return Self::default() };
        Self { server: server_in(&k), tenant: tenant_in(&k), token_times: token_in(&k).and_then(|t| binding::token_times(&t)) }
    }
}

#[derive(Default)]
struct Entries {
    map: HashMap<[u8; 32], (Arc<Facts>, Instant)>,
    swept: Option<Instant>,
}

/// The facts of the kubeconfigs rounds asked about.
#[derive(Default)]
pub struct Memo {
    entries: Mutex<Entries>,
}

impl Memo {
    /// What `kubeconfig` says, read now when no round asked before.
    pub fn of(&self, kubeconfig: &str) -> Arc<Facts> {
        let key: [u8; 32] = Sha256::digest(kubeconfig.as_bytes()).into();
        let now = Instant::now();
        {
            let mut entries = self.entries.lock().expect("not poisoned");
            entries.sweep(now);
            if let Some((facts, used)) = entries.map.get_mut(&key) {
                *used = now;
                return facts.clone();
            }
        }
        let facts = Arc::new(Facts::read(kubeconfig));
        self.entries.lock().expect("not poisoned").map.insert(key, (facts.clone(), now));
        facts
    }

    /// Kubeconfigs kept.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("not poisoned").map.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Entries {
    fn sweep(&mut self, now: Instant) {
        if self.swept.is_some_and(|at| now.duration_since(at) < SWEEP_EVERY) {
            return;
        }
        self.swept = Some(now);
        self.map.retain(|_, (_, used)| now.duration_since(*used) < IDLE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(server: &str, namespace: &str, token: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://10.9.9.9:6443\n- name: remote\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: u\n    namespace: {namespace}\ncurrent-context: remote\n"
        )
    }

    fn jwt(iat: i64, exp: i64) -> String {
        use base64::Engine;
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(r#"{{"iat":{iat},"exp":{exp}}}"#));
        format!("eyJhbGciOiJSUzI1NiJ9.{claims}.c2ln")
    }

    #[test]
    fn a_kubeconfig_says_what_the_functions_of_each_fact_say() {
        let text = kubeconfig("https://api.remote:6443", "liqo-tenant-abc", &jwt(1_700_000_000, 1_700_604_800));
        let facts = Facts::read(&text);
        let access = crate::remote::peer::RemoteAccess { kubeconfig: text.clone(), api_url: None, ca_pem: None };
        assert_eq!(facts.server, crate::remote::peer::api_url_of(&access));
        assert_eq!(facts.server.as_deref(), Some("https://api.remote:6443"), "the current context's cluster");
        assert_eq!(facts.tenant, crate::remote::peer::tenant_of(&text));
        assert_eq!(facts.tenant.as_deref(), Some("liqo-tenant-abc"));
        let times = crate::remote::peer::token_of(&text).and_then(|t| binding::token_times(&t));
        assert_eq!(facts.token_times, times);
        assert_eq!(facts.token_times.map(|(i, e)| (i.as_second(), e.as_second())), Some((1_700_000_000, 1_700_604_800)));
        assert_eq!(Facts::read("not: [yaml"), Facts::default());
    }

    #[test]
    fn each_kubeconfig_is_read_once_and_a_new_one_is_read_anew() {
        let memo = Memo::default();
        let first = kubeconfig("https://a:6443", "liqo-tenant-a", "t1");
        let a = memo.of(&first);
        assert!(Arc::ptr_eq(&a, &memo.of(&first)), "read once");
        let renewed = kubeconfig("https://a:6443", "liqo-tenant-a", "t2");
        let b = memo.of(&renewed);
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(memo.len(), 2);
    }
}
