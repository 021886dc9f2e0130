//! The peers' side in this process: a broadcaster reads its peer's objects and mode, and
//! writes its rounds into the peer's PeeringRequest status.

use std::sync::Arc;

use base64::Engine;
use serde_json::json;

use super::round::Round;
use super::side::{Credentials, Side, Who};
use crate::peer::{Mode, NAMESPACE, Peer};

/// Every peer of the fleet, by index.
pub struct Local(pub Vec<Arc<Peer>>);

impl Side for Local {
    fn credentials(&self, who: &Who, requester: &str) -> Option<Credentials> {
        credentials_of(&self.0[who.index], requester)
    }

    fn off(&self, who: &Who) -> bool {
        self.0[who.index].mode() == Mode::Off
    }

    fn report(&self, who: &Who, requester: &str, round: Round) {
        report_on(&self.0[who.index], requester, round);
    }
}

/// Who `peer` is, to its broadcasters.
pub fn who(peer: &Peer) -> Who {
    Who { index: peer.index, id: peer.id.clone(), name: peer.name.clone() }
}

/// The token of the kubeconfig `requester` handed `peer` with its PeeringRequest (the Secret
/// its `kubeConfigRef` names), and the namespace its context names, if they are there.
pub fn credentials_of(peer: &Peer, requester: &str) -> Option<Credentials> {
    let objects = peer.objects.lock().expect("not poisoned");
    let pr = objects.requests.get(requester)?;
    let reference = &pr["spec"]["kubeConfigRef"];
    let key = format!("{}/{}", reference["namespace"].as_str().unwrap_or(NAMESPACE), reference["name"].as_str()?);
    let data = objects.secrets.get(&key)?["data"]["kubeconfig"].as_str()?.to_owned();
    drop(objects);
    let yaml = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).ok()?).ok()?;
    let config = kube::config::Kubeconfig::from_yaml(&yaml).ok()?;
    let token = config.auth_infos.first()?.auth_info.as_ref()?.token.as_ref()?;
    let namespace = config.contexts.first()?.context.as_ref()?.namespace.clone()?;
    Some(Credentials { token: secrecy::ExposeSecret::expose_secret(token).to_owned(), namespace })
}

/// Writes how the last round went into `requester`'s PeeringRequest status at `peer`.
pub fn report_on(peer: &Peer, requester: &str, round: Round) {
    let (state, status, reason, message) = round.words();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let mut objects = peer.objects.lock().expect("not poisoned");
    if let Some(pr) = objects.requests.get_mut(requester) {
        pr["status"] = json!({"advertisementStatus": state, "conditions": [{
            "type": "Advertised", "status": status, "reason": reason.as_str(), "message": message, "lastTransitionTime": now}]});
        // Written by server-side apply to the status, as our broadcaster writes it.
        let fields = json!({"f:status": crate::managed::fields_v1(&pr["status"])});
        let manager = liqo_reconciler::incoming::broadcaster::FIELD_MANAGER;
        crate::managed::record(pr, manager, "Apply", Some("status"), fields, &crate::managed::now());
    }
}
