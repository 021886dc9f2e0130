//! The HTTPS server facing bad input, certificate rotation, and its operations port.

mod common;

use std::time::Duration;

use common::*;

async fn running() -> Running {
    start(default_view(), Duration::from_millis(300)).await
}

fn review(request: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request
    }))
    .unwrap()
}

#[tokio::test]
async fn bad_input_gets_a_clear_answer_and_never_kills_the_connection() {
    let r = running().await;
    let mut conn = connect(&r).await;
    let json = Some("application/json");
    // (method, content type, body, status, what the answer says)
    type Case<'a> = (&'a str, Option<&'a str>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        ("POST", json, b"{not json".to_vec(), 400, "not an AdmissionReview"),
        ("POST", json, b"".to_vec(), 400, "not an AdmissionReview"),
        ("POST", json, b"[1,2,3]".to_vec(), 400, "not an AdmissionReview"),
        (
            "POST",
            json,
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}"#.to_vec(),
            400,
            "only AdmissionReview v1",
        ),
        ("POST", json, br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}"#.to_vec(), 400, "only AdmissionReview v1"),
        ("POST", json, br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(), 400, "has no request"),
        (
            "POST",
            json,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}"#.to_vec(),
            400,
            "missing field `kind`",
        ),
        (
            "POST",
            json,
            // A valid review but for one byte that is not UTF-8, in a string no rule reads.
            String::from_utf8(fixture("peeringrequest-create-by-peer-sa.json"))
                .unwrap()
                .replacen("kubectl-create", "kubectl-cr\u{1}ate", 1)
                .into_bytes()
                .into_iter()
                .map(|b| if b == 1 { 0xff } else { b })
                .collect(),
            400,
            "JSON must be UTF-8",
        ),
        ("POST", Some("text/plain"), fixture("peeringrequest-create-by-peer-sa.json"), 415, "application/json"),
        ("POST", None, fixture("peeringrequest-create-by-peer-sa.json"), 415, "application/json"),
        ("GET", None, vec![], 405, ""),
    ];
    for (method, ct, body, status, needle) in cases {
        let answer = send(&mut conn, method, "/validate", ct, body.clone()).await;
        assert_eq!(answer.status, status, "{}: {}", String::from_utf8_lossy(&body), answer.text());
        assert!(answer.text().contains(needle), "{:?} lacks {needle:?}", answer.text());
    }
    // The same connection still serves a good review.
    let ok = send(&mut conn, "POST", "/validate", json, fixture("peeringrequest-create-by-peer-sa.json")).await;
    assert_eq!(ok.json()["response"]["allowed"], true);
    assert_eq!(send(&mut conn, "POST", "/nowhere", json, vec![]).await.status, 404);
}

#[tokio::test]
async fn unknown_resources_and_malformed_objects_are_denied_naming_the_field() {
    let r = running().await;
    let pod = review(serde_json::json!({
        "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
        "object": {"metadata": {"name": "p"}}
    }));
    let v = post(&r, "/validate", pod).await.json();
    assert_eq!(v["response"]["uid"], "u1");
    assert_eq!(v["response"]["allowed"], false);
    assert!(v["response"]["status"]["message"].as_str().unwrap().contains("does not handle core/v1 Pod"));

    let bad_field = review(serde_json::json!({
        "uid": "u2", "kind": {"group": "discovery.liqo.io", "version": "v1alpha1", "kind": "PeeringRequest"},
        "operation": "CREATE", "name": "x",
        "object": {"metadata": {"name": "x"}, "spec": {"clusterIdentity": {"clusterID": 42}}}
    }));
    let v = post(&r, "/validate", bad_field).await.json();
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["code"], 422);
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.starts_with("spec.clusterIdentity.clusterID: invalid type: integer `42`"), "{msg}");

    let no_object = review(serde_json::json!({
        "uid": "u3", "kind": {"group": "discovery.liqo.io", "version": "v1alpha1", "kind": "ForeignCluster"},
        "operation": "CREATE", "object": null
    }));
    let v = post(&r, "/mutate", no_object).await.json();
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["message"], "request.object: required for CREATE");

    let bad_enum = review(serde_json::json!({
        "uid": "u4", "kind": {"group": "discovery.liqo.io", "version": "v1alpha1", "kind": "ForeignCluster"},
        "operation": "CREATE", "object": {"metadata": {"name": "x"}, "spec": {"discoveryType": "lan"}}
    }));
    let v = post(&r, "/mutate", bad_enum).await.json();
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.starts_with("spec.discoveryType: unknown variant `lan`"), "{msg}");
}

#[tokio::test]
async fn huge_bodies_are_refused_with_413_before_being_read_whole() {
    let r = running().await;
    let big = vec![b' '; liqo_webhook::server::DEFAULT_MAX_BODY + 1];
    let answer = post(&r, "/validate", big).await;
    assert_eq!(answer.status, 413, "{}", answer.text());
}

/// Every client sending an oversized body reads the 413, never a reset: 100 one after another,
/// then 20 at once, each writing its whole body (4× the cap, here 64 KiB) before it reads.
#[tokio::test]
async fn oversized_bodies_always_read_413() {
    let r = start_with(default_view(), Duration::from_secs(5), 64 * 1024).await;
    let ca = r.certs.path().join("ca.crt");
    for (count, concurrent) in [(100, 1), (20, 20)] {
        let answers =
            liqo_testenv::https::oversized_requests(r.addr, &ca, "/validate", "application/json", 256 * 1024, count, concurrent).await;
        let wrong: Vec<&String> = answers.iter().filter(|a| *a != "HTTP/1.1 413 Payload Too Large").collect();
        assert!(wrong.is_empty(), "{} of {count} ({concurrent} at a time) read no 413: {:?}", wrong.len(), &wrong[..wrong.len().min(3)]);
    }
}

#[tokio::test]
async fn a_body_that_never_arrives_times_out() {
    use tokio::io::AsyncWriteExt;
    let r = running().await;
    let tcp = tokio::net::TcpStream::connect(r.addr).await.unwrap();
    let mut tls = connector(&r.certs.path().join("ca.crt"))
        .connect(rustls::pki_types::ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(b"POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{")
        .await
        .unwrap();
    let mut buf = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read(&mut tls, &mut buf))
        .await
        .expect("the server answers instead of hanging")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
}

#[tokio::test]
async fn swapped_certificate_files_are_served_to_new_connections() {
    let r = running().await;
    let before = connect(&r).await.peer_cert;

    // Re-issue as the certs tool does when the wanted SANs change: a new leaf, same CA.
    let dir = r.certs.path();
    let mut wider = sans();
    wider.push("webhook.example".into());
    let outcome = liqo_certs::files::ensure(dir, &wider, time::OffsetDateTime::now_utc(), &Default::default()).unwrap();
    assert_eq!(outcome.serving.as_deref(), Some("does not cover webhook.example"));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let now_served = connect(&r).await.peer_cert;
        if now_served != before {
            let new_pem = std::fs::read_to_string(dir.join("tls.crt")).unwrap();
            let new_der = rustls::pki_types::pem::PemObject::from_pem_slice(new_pem.as_bytes())
                .map(|c: rustls::pki_types::CertificateDer| c.to_vec())
                .unwrap();
            assert_eq!(now_served, new_der, "the new connection got the new certificate");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "certificate not reloaded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_broken_certificate_pair_is_refused_and_the_old_one_kept() {
    let r = running().await;
    let before = connect(&r).await.peer_cert;
    std::fs::write(r.certs.path().join("tls.key"), "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").unwrap();
    assert!(r.cert.reload().is_err());
    assert_eq!(connect(&r).await.peer_cert, before, "still serving the last good certificate");
}

#[tokio::test]
async fn operations_port_reports_health_readiness_and_metrics() {
    let r = running().await;
    post(&r, "/validate", fixture("peeringrequest-create-spoofed-id.json")).await;
    post(&r, "/validate", fixture("peeringrequest-create-by-peer-sa.json")).await;

    let get = |path: &'static str| {
        let ops = r.ops;
        async move {
            let tcp = tokio::net::TcpStream::connect(ops).await.unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await.unwrap();
            tokio::spawn(conn);
            let req = hyper::Request::get(path).header("host", "x").body(http_body_util::Empty::<hyper::body::Bytes>::new()).unwrap();
            let resp = sender.send_request(req).await.unwrap();
            let status = resp.status().as_u16();
            let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    assert_eq!(get("/healthz").await, (200, "ok\n".into()));
    assert_eq!(get("/readyz").await.0, 200);
    let (status, metrics) = get("/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"liqo_webhook_admissions_total{endpoint="validate",kind="PeeringRequest",operation="CREATE",decision="denied",reason="identity_mismatch"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"decision="allowed",reason=""} 1"#), "{metrics}");
    assert!(metrics.contains("liqo_webhook_admission_duration_seconds_count{endpoint=\"validate\"} 2"), "{metrics}");
    let served = liqo_certs::inspect(&std::fs::read_to_string(r.certs.path().join("tls.crt")).unwrap()).unwrap();
    let expiry = format!("liqo_webhook_certificate_expiry_timestamp_seconds {}\n", served.not_after.unix_timestamp());
    assert!(metrics.contains(&expiry), "the served certificate's expiry, {expiry}: {metrics}");
    let build = format!("liqo_webhook_build_info{{version=\"{}\"}} 1\n", env!("CARGO_PKG_VERSION"));
    assert!(metrics.contains(&build), "{metrics}");
}
