//! This cluster's holder key (protocol §10, since 0.4): the key pair whose public half each peer
//! that issues us an identity records, so that we can prove we hold our cluster ID there when
//! every token it gave us is void (the proof: `tenancy::proof`, a layer above).
//!
//! Kept in Secret `kube-system/liqo-holder-key` (the manifests ship it empty; the reconciler
//! fills it at first need and may write only that one Secret there), so that deleting the Liqo
//! namespace loses neither the ID ([`super::identity`]) nor its proof. Where that Secret is
//! missing or not ours to write (an install of before 0.4, a managed cluster refusing writes in
//! `kube-system`), in the Liqo namespace, and the log says a deletion of that namespace then
//! loses it.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use liqo_api::names::{HOLDER_KEY_KEY, HOLDER_KEY_NAMESPACE, HOLDER_KEY_SECRET};
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair};
use tokio::sync::OnceCell;

use crate::machinery::error::{Error, Result, is_conflict};

pub use liqo_api::names::HOLDER_KEY_PREFIX as KEY_PREFIX;

/// A holder's key pair (PKCS#8, as stored in its Secret).
pub struct HolderKey(Ed25519KeyPair);

impl HolderKey {
    /// A new key pair's PKCS#8 document.
    pub fn generate() -> Vec<u8> {
        Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("the system's random source").as_ref().to_vec()
    }

    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, String> {
        Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8).map(Self).map_err(|e| format!("not an Ed25519 key: {e}"))
    }

    /// The public half, as recorded ([`KEY_PREFIX`] and base64).
    pub fn public(&self) -> String {
        format!("{KEY_PREFIX}{}", STANDARD.encode(self.0.public_key().as_ref()))
    }

    /// `message` signed, in standard base64.
    pub fn sign(&self, message: &[u8]) -> String {
        STANDARD.encode(self.0.sign(message).as_ref())
    }
}

/// The key, loaded (or made) once, at its first use.
pub struct HolderKeys {
    client: Client,
    namespace: String,
    key: OnceCell<Arc<HolderKey>>,
}

impl HolderKeys {
    /// The key of the cluster `client` reaches, whose Liqo namespace is `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self { client, namespace: namespace.to_owned(), key: OnceCell::new() }
    }

    /// The key: read, or made and stored, the first time; a failure is tried again next call.
    pub async fn get(&self) -> Result<Arc<HolderKey>> {
        self.key.get_or_try_init(|| self.load()).await.cloned()
    }

    async fn load(&self) -> Result<Arc<HolderKey>> {
        let outside = Api::<Secret>::namespaced(self.client.clone(), HOLDER_KEY_NAMESPACE);
        match fill(&outside, false).await {
            Ok(Some(key)) => return Ok(key),
            Ok(None) => tracing::warn!(
                "Secret {HOLDER_KEY_NAMESPACE}/{HOLDER_KEY_SECRET} is not there (the manifests of 0.4 ship it): \
                 our holder key is kept in the Liqo namespace, and a deletion of that namespace loses it"
            ),
            Err(Error::Kube(kube::Error::Api(s))) if s.code == 403 => tracing::warn!(
                "Secret {HOLDER_KEY_NAMESPACE}/{HOLDER_KEY_SECRET} is not ours to write (403): \
                 our holder key is kept in the Liqo namespace, and a deletion of that namespace loses it"
            ),
            Err(e) => return Err(e),
        }
        let inside = Api::<Secret>::namespaced(self.client.clone(), &self.namespace);
        fill(&inside, true).await?.ok_or(Error::NotReady("the holder key's Secret"))
    }
}

/// The key held by `api`'s Secret, made there when it holds none (created when `may_create`).
/// None: no such Secret, and not ours to create.
async fn fill(api: &Api<Secret>, may_create: bool) -> Result<Option<Arc<HolderKey>>> {
    // Two writers at once (a restart racing the old process): the loser reads the winner's.
    for _ in 0..3 {
        let existing = api.get_opt(HOLDER_KEY_SECRET).await?;
        let pkcs8 = HolderKey::generate();
        let written = match existing {
            Some(secret) => {
                if let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(HOLDER_KEY_KEY)) {
                    let key = HolderKey::from_pkcs8(&bytes.0).map_err(|e| Error::Serialization(format!("{HOLDER_KEY_SECRET}: {e}")))?;
                    return Ok(Some(Arc::new(key)));
                }
                let mut secret = secret;
                secret.metadata.managed_fields = None;
                secret.data.get_or_insert_default().insert(HOLDER_KEY_KEY.to_owned(), ByteString(pkcs8.clone()));
                api.replace(HOLDER_KEY_SECRET, &PostParams::default(), &secret).await
            }
            None if may_create => {
                let secret = Secret {
                    metadata: ObjectMeta { name: Some(HOLDER_KEY_SECRET.into()), ..Default::default() },
                    data: Some([(HOLDER_KEY_KEY.to_owned(), ByteString(pkcs8.clone()))].into()),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &secret).await
            }
            None => return Ok(None),
        };
        match written {
            Ok(_) => {
                tracing::info!("made our holder key, kept in Secret {HOLDER_KEY_SECRET}");
                let key = HolderKey::from_pkcs8(&pkcs8).map_err(Error::Serialization)?;
                return Ok(Some(Arc::new(key)));
            }
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::NotReady("the holder key's Secret, written by another at the same time"))
}
