//! SIGTERM: the webhook binary stops taking new work but finishes the admission in flight,
//! then exits 0 — what a rolling update or a node drain relies on.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{OWN_ID, fixture, fixture_uid};
use liqo_testenv::free_port;
use liqo_testenv::https::connector;

async fn refused(port: u16) -> bool {
    tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err()
}

#[tokio::test]
async fn sigterm_finishes_the_admission_in_flight_then_exits() {
    let dir = tempfile::tempdir().unwrap();
    let (port, ops) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_liqo-webhook"))
        .args(["--standalone", "--cluster-id", OWN_ID, "--shutdown-grace-seconds", "20"])
        .arg("--generate-cert-dir")
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{port}"), "--ops-listen", &format!("127.0.0.1:{ops}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    liqo_testenv::eventually("the webhook listening", || async move { (!refused(port).await).then_some(()) }).await;

    // An admission whose body is only half sent when the signal arrives.
    let body = fixture("peeringrequest-create-by-peer-sa.json");
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut tls = connector(&dir.path().join("ca.crt")).connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    // `Expect: 100-continue`: the server says when its handler starts reading the body, so the
    // signal below surely comes while the admission is in flight (not while the connection is
    // still being accepted, which a loaded machine can make last).
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    let mut interim = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        let mut byte = [0u8; 1];
        while !interim.ends_with(b"\r\n\r\n") {
            assert_eq!(tls.read(&mut byte).await.unwrap(), 1, "the server closed before 100 Continue");
            interim.push(byte[0]);
        }
    })
    .await
    .expect("100 Continue");
    assert!(interim.starts_with(b"HTTP/1.1 100"), "{}", String::from_utf8_lossy(&interim));
    let half = body.len() / 2;
    tls.write_all(&body[..half]).await.unwrap();
    tls.flush().await.unwrap();

    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    // Shutdown has begun once the operations port is closed.
    liqo_testenv::eventually("the ops port closed", || async move { refused(ops).await.then_some(()) }).await;
    assert!(child.try_wait().unwrap().is_none(), "the webhook waits for the admission in flight");

    tls.write_all(&body[half..]).await.unwrap();
    tls.flush().await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(15), tls.read_to_end(&mut answer)).await.expect("an answer").ok();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let json: serde_json::Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(json["response"]["uid"], fixture_uid("peeringrequest-create-by-peer-sa.json"));
    assert!(json["response"]["allowed"].is_boolean());

    let status = liqo_testenv::eventually("the webhook exited", || {
        let s = child.try_wait().unwrap();
        async move { s }
    })
    .await;
    assert!(status.success(), "exit status {status}");
    assert!(refused(port).await, "no new connections after shutdown");
}
