//! The full two-cluster flow against two real control planes (envtest convention:
//! `KUBEBUILDER_ASSETS`), each with the `liqo-reconciler` binary running as in local
//! development (KUBECONFIG, generated auth certificate) with the shipped RBAC: join → health and repair → unjoin,
//! then deletion of a ForeignCluster whose remote is gone for good. Skips loudly without the
//! assets.

mod common;

use common::{Two, advertisement_status, fc_where, gone, ops_get, outgoing_joined, terminate, two_clusters};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use liqo_api::{Advertisement, ForeignCluster, PeeringRequest};
use liqo_testenv::eventually;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_health_unjoin_and_deletion_with_the_remote_gone() {
    let Some(Two { home_cp, remote_cp, home, remote, home_rec, remote_rec, home_id, remote_id }) = two_clusters().await else { return };
    let _ = &home_cp;

    // the auth-service form: only the remote's auth service, its self-signed CA allowed explicitly.
    let fcs: Api<ForeignCluster> = Api::all(home.clone());
    let fc: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "my-remote"},
        "spec": {"authUrl": remote_rec.auth_url, "join": true, "allowUntrustedCA": true}
    }))
    .unwrap();
    fcs.create(&PostParams::default(), &fc).await.unwrap();

    // Joined: identified, CA pinned, our PeeringRequest on the remote, its Advertisement here.
    let joined = fc_where(&home, "my-remote", "the ForeignCluster joined", outgoing_joined).await;
    assert_eq!(joined.spec.remote_cluster_id(), Some(remote_id.as_str()));
    assert_eq!(joined.spec.namespace.as_deref(), Some("liqo"));
    assert_eq!(joined.spec.trust_mode, Some(liqo_api::TrustMode::Untrusted));
    assert!(joined.finalizers().iter().any(|f| f == "discovery.liqo.io/peered"));
    let status = joined.status.clone().unwrap();
    let ca_secret = Api::<Secret>::namespaced(home.clone(), "liqo").get("my-remote-ca-data").await.unwrap();
    let stored_ca = String::from_utf8(ca_secret.data.unwrap()["ca.crt"].0.clone()).unwrap();
    assert_eq!(stored_ca, remote_cp.ca_pem, "the remote API server CA, as /ca served it");
    assert_eq!(status.ca_fingerprint.as_deref(), Some(&*liqo_certs::inspect::fingerprint_sha256(&remote_cp.ca_pem).unwrap()));
    assert_eq!(status.auth_status, Some(liqo_api::AuthStatus::Accepted));
    assert!(liqo_reconciler::reporting::conditions::is_true(&status.conditions, "Joined"));

    // protocol §9: each side's tenant namespace for the other, as the status tells them.
    let tenants = status.tenant_namespace.clone().expect("status.tenantNamespace");
    assert_eq!(tenants.local, Some(format!("liqo-tenant-{remote_id}")));
    assert_eq!(tenants.remote, Some(format!("liqo-tenant-{home_id}")));
    let remote_prs = common::requests_of(&remote, &home_id);
    let pr = remote_prs.get(&home_id).await.unwrap();
    assert_eq!(pr.spec.requester_cluster_id(), Some(home_id.as_str()));
    assert_eq!(pr.spec.kube_config_ref.as_ref().and_then(|r| r.namespace.clone()), Some(format!("liqo-tenant-{home_id}")));
    assert_eq!(pr.spec.auth_url.as_deref(), Some(home_rec.auth_url.as_str()));
    // Our finalizer, on the ForeignCluster here and on our request there, is written under our
    // name (a patch names no field manager: the API server takes our User-Agent's), not "unknown".
    for (what, entries) in [("the ForeignCluster", joined.managed_fields()), ("our PeeringRequest on the remote", pr.managed_fields())] {
        let owner = entries.iter().find(|e| serde_json::to_string(&e.fields_v1).unwrap().contains("discovery.liqo.io/peered"));
        assert_eq!(owner.and_then(|e| e.manager.as_deref()), Some("liqo-reconciler"), "{what}'s finalizer: {entries:?}");
    }
    advertisement_status(&remote_prs, &home_id, liqo_api::AdvertisementState::Created, "Published").await;
    let accepted = eventually("a PeeringAccepted Event on the remote", || liqo_testenv::event(&remote, "PeeringAccepted", &home_id)).await;
    assert!(accepted.note.unwrap().contains(&format!("PeeringRequest of cluster {home_id}")));
    let incoming = fc_where(&remote, &home_id, "the remote's IncomingPeering ForeignCluster", |f| {
        f.status.as_ref().and_then(|s| s.incoming.as_ref()).is_some_and(|i| i.joined)
    })
    .await;
    assert_eq!(incoming.spec.discovery_type, Some(liqo_api::DiscoveryType::IncomingPeering));
    let home_adverts: Api<Advertisement> = common::advertisements_of(&home, &remote_id);
    let adv = home_adverts.get(&format!("advertisement-{remote_id}")).await.unwrap();
    assert_eq!(adv.spec.cluster_id, remote_id);
    // The remote wrote it with the access we granted, in its tenant namespace here.
    common::identities_of(&home, &remote_id).get(&remote_id).await.unwrap();

    // The record of the last checks names the joined peer, checked since it joined (the
    // leader writes it every half period, here 1 s).
    let joined_at = liqo_reconciler::reporting::conditions::get(&status.conditions, "Joined").unwrap().last_transition_time.0;
    let record: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(home.clone(), "liqo");
    let checked = eventually("the joined peer in the record of the last checks", || async {
        let cm = record.get_opt(liqo_api::last_checks::CONFIGMAP).await.ok()??;
        let text = cm.data?.get(liqo_api::last_checks::KEY)?.clone();
        let check = liqo_api::last_checks::parse(&text).find("my-remote")?;
        (check.time().as_second() >= joined_at.as_second()).then_some((check, text))
    })
    .await;
    let (checked, text) = checked;
    assert!(checked.time() <= k8s_openapi::jiff::Timestamp::now(), "a check in the future: {checked:?}");
    // Checked on time, so not named: the record is its one "checked since" line.
    assert!(matches!(checked, liqo_api::last_checks::LastCheck::Since(_)) && text.lines().count() == 1, "{text}");
    assert_eq!(
        record.get(liqo_api::last_checks::CONFIGMAP).await.unwrap().annotations().get(liqo_api::last_checks::OMITTED_ANNOTATION),
        None
    );

    // The ops port counts the work done.
    let (_, metrics) = ops_get(&home_rec, "/metrics").await.unwrap();
    assert!(metrics.contains(r#"liqo_reconciler_reconciles_total{controller="foreign_cluster",result="ok"}"#), "{metrics}");
    // One offer for one join (grant, token, kubeconfig, request), none made again.
    assert!(metrics.contains("liqo_reconciler_offers_total{plan=\"make\",on_remote=\"missing\"} 1\n"), "{metrics}");
    assert_eq!(metrics.matches("liqo_reconciler_offers_total{").count(), 1, "{metrics}");
    let (_, metrics) = ops_get(&remote_rec, "/metrics").await.unwrap();
    assert!(metrics.contains("liqo_reconciler_broadcasters 1"), "{metrics}");

    // Health: the remote deletes our PeeringRequest; the home side puts it back.
    let first_uid = pr.uid();
    remote_prs.delete(&home_id, &DeleteParams::default()).await.unwrap();
    eventually("our PeeringRequest re-created on the remote", || {
        let prs = remote_prs.clone();
        let id = home_id.clone();
        let first = first_uid.clone();
        async move {
            let pr = prs.get_opt(&id).await.ok()??;
            (pr.uid() != first && pr.metadata.deletion_timestamp.is_none()).then_some(())
        }
    })
    .await;
    fc_where(&home, "my-remote", "joined again after the repair", outgoing_joined).await;
    let (_, metrics) = ops_get(&home_rec, "/metrics").await.unwrap();
    assert!(metrics.contains("liqo_reconciler_offers_total{plan=\"repair\",on_remote=\"missing\"} 1\n"), "{metrics}");
    // The remote withdrew its Advertisement with our request and publishes it again for the new
    // one; "joined" may be read before the withdrawal is (a status of a moment before): wait for
    // the Advertisement itself.
    eventually("the remote's Advertisement here again", || async {
        home_adverts.get_opt(&format!("advertisement-{remote_id}")).await.ok()?.filter(|a| a.metadata.deletion_timestamp.is_none())
    })
    .await;

    // Unjoin: join=false cascades to both sides.
    fcs.patch("my-remote", &PatchParams::default(), &Patch::Merge(json!({"spec": {"join": false}}))).await.unwrap();
    gone(&remote_prs, &home_id, "our PeeringRequest removed from the remote").await;
    eventually("a PeeringEnded Event on the remote", || liqo_testenv::event(&remote, "PeeringEnded", &home_id)).await;
    gone(&home_adverts, &format!("advertisement-{remote_id}"), "the remote's Advertisement removed here").await;
    gone(&common::identities_of(&home, &remote_id), &remote_id, "the peer's access removed here").await;
    // No direction is left on either side: the tenant namespaces go (protocol §9).
    common::tenant_gone(&home_cp, &home, &remote_id).await;
    common::tenant_gone(&remote_cp, &remote, &home_id).await;
    let unjoined = fc_where(&home, "my-remote", "outgoing.joined cleared", |f| {
        !outgoing_joined(f) && !f.finalizers().iter().any(|x| x == "discovery.liqo.io/peered")
    })
    .await;
    assert!(!liqo_reconciler::reporting::conditions::is_true(&unjoined.status.unwrap().conditions, "Joined"));
    eventually("the unjoined peer out of the record of the last checks", || async {
        let cm = record.get_opt(liqo_api::last_checks::CONFIGMAP).await.ok()??;
        let record = liqo_api::last_checks::parse(cm.data?.get(liqo_api::last_checks::KEY)?);
        record.find("my-remote").is_none().then_some(())
    })
    .await;
    fc_where(&remote, &home_id, "the remote's incoming.joined cleared", |f| {
        f.status.as_ref().and_then(|s| s.incoming.as_ref()).is_some_and(|i| !i.joined)
    })
    .await;

    // Join again, then lose the remote for good and delete the ForeignCluster: it goes anyway.
    fcs.patch("my-remote", &PatchParams::default(), &Patch::Merge(json!({"spec": {"join": true}}))).await.unwrap();
    fc_where(&home, "my-remote", "joined once more", outgoing_joined).await;
    drop(remote_rec);
    drop(remote_cp);
    fcs.delete("my-remote", &DeleteParams::default()).await.unwrap();
    gone(&fcs, "my-remote", "the ForeignCluster deleted although its remote is gone").await;
    gone(&home_adverts, &format!("advertisement-{remote_id}"), "the Advertisement removed locally").await;

    // SIGTERM: the controllers and servers stop cleanly and the process exits 0.
    let mut home_rec = home_rec;
    let status = terminate(&mut home_rec).await;
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manual_form_peers_anonymously_where_the_remote_allows_it() {
    let Some(Two { home_cp, remote_cp, home, remote, home_rec, remote_rec, home_id, remote_id }) = two_clusters().await else { return };
    let _ = (&home_cp, &home_rec, &remote_rec);
    liqo_testenv::publish_cluster_info(&remote_cp, &remote).await;

    // Liqo's manual form: the remote's cluster ID and API server, no auth service.
    let fcs: Api<ForeignCluster> = Api::all(home.clone());
    let fc: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "foreign-cluster"},
        "spec": {"clusterID": remote_id, "join": true, "namespace": "liqo", "apiUrl": remote_cp.url, "discoveryType": "Manual", "allowUntrustedCA": true}
    }))
    .unwrap();
    fcs.create(&PostParams::default(), &fc).await.unwrap();

    // The remote does not admit anonymous PeeringRequests yet: the condition says what to do.
    let refused = fc_where(&home, "foreign-cluster", "the anonymous offer refused", |f| {
        f.status
            .as_ref()
            .and_then(|s| liqo_reconciler::reporting::conditions::get(&s.conditions, "Joined"))
            .is_some_and(|c| c.reason == "AnonymousPeeringRefused")
    })
    .await;
    let message = liqo_reconciler::reporting::conditions::get(&refused.status.unwrap().conditions, "Joined").unwrap().message.clone();
    assert!(message.contains("manifests/anonymous-peering"), "{message}");

    // With the opt-in RBAC on the remote, the next health round peers.
    let overlay =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/anonymous-peering/anonymous-peering.yaml")).unwrap();
    liqo_testenv::create_manifest(&remote, &overlay, "liqo").await;
    let joined = fc_where(&home, "foreign-cluster", "the ForeignCluster joined anonymously", outgoing_joined).await;
    let status = joined.status.clone().unwrap();
    let ca_secret = Api::<Secret>::namespaced(home.clone(), "liqo").get("foreign-cluster-ca-data").await.unwrap();
    assert_eq!(
        String::from_utf8(ca_secret.data.unwrap()["ca.crt"].0.clone()).unwrap(),
        remote_cp.ca_pem,
        "the CA of kube-public/cluster-info"
    );
    assert_eq!(status.ca_fingerprint.as_deref(), Some(&*liqo_certs::inspect::fingerprint_sha256(&remote_cp.ca_pem).unwrap()));
    assert_eq!(joined.spec.trust_mode, Some(liqo_api::TrustMode::Untrusted));
    let authenticated = liqo_reconciler::reporting::conditions::get(&status.conditions, "Authenticated").unwrap();
    assert_eq!(authenticated.reason, "Anonymous");
    // Anonymously: in the remote's Liqo namespace (the one place it may write without identity).
    let remote_prs: Api<PeeringRequest> = Api::namespaced(remote.clone(), "liqo");
    let pr = remote_prs.get(&home_id).await.unwrap();
    assert_eq!(pr.spec.requester_cluster_id(), Some(home_id.as_str()));
    let home_adverts: Api<Advertisement> = common::advertisements_of(&home, &remote_id);
    home_adverts.get(&format!("advertisement-{remote_id}")).await.unwrap();
    assert!(
        Api::<Secret>::namespaced(home.clone(), "liqo").get_opt("foreign-cluster-identity").await.unwrap().is_none(),
        "no identity was issued"
    );

    // Unjoin: the peer's access here is revoked, the condition says the PeeringRequest stays.
    fcs.patch("foreign-cluster", &PatchParams::default(), &Patch::Merge(json!({"spec": {"join": false}}))).await.unwrap();
    gone(&home_adverts, &format!("advertisement-{remote_id}"), "the remote's Advertisement removed here").await;
    gone(&common::identities_of(&home, &remote_id), &remote_id, "the peer's access removed here").await;
    let unjoined =
        fc_where(&home, "foreign-cluster", "outgoing.joined cleared", |f| !outgoing_joined(f) && f.finalizers().is_empty()).await;
    let joined_condition =
        liqo_reconciler::reporting::conditions::get(&unjoined.status.as_ref().unwrap().conditions, "Joined").unwrap().clone();
    assert_eq!(joined_condition.reason, "Unjoined");
    assert!(joined_condition.message.contains("stays on the remote"), "{}", joined_condition.message);
    assert!(remote_prs.get_opt(&home_id).await.unwrap().is_some(), "an anonymous requester cannot delete it");
    // The remote's broadcaster is refused by our revoked access, and its PeeringRequest says so.
    advertisement_status(&remote_prs, &home_id, liqo_api::AdvertisementState::Refused, "PeerRefused").await;
}
