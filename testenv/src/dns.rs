//! DNS servers for DNS-SD tests, both serving real zone files on 127.0.0.1:
//!
//! - [`ZoneServer`]: hickory-server in this process (UDP and TCP), its zone replaceable;
//! - [`Named`]: a real `named` (BIND 9) process, when the machine has it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::rr::{LowerName, Name};
use hickory_proto::serialize::txt::Parser;
use hickory_server::Server;
use hickory_server::net::runtime::Time;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{AxfrPolicy, Catalog, ZoneType};

/// Adds the SOA and NS records a zone file needs around `records` (one per line, names
/// absolute or relative to `origin`).
pub fn zone_file(origin: &str, records: &str) -> String {
    format!(
        "$ORIGIN {origin}\n$TTL 5\n@ IN SOA ns.{origin} hostmaster.{origin} 1 60 60 600 5\n@ IN NS ns.{origin}\nns.{origin} IN A 127.0.0.1\n{records}\n"
    )
}

/// A zone (origin `example.com.`) of `n` clusters of the API-server shape (protocol §5): `c<i>._liqo._tcp`
/// with an SRV to `api-<i>` (an A record of its own) and a TXT with its cluster ID and
/// namespace. Listed at the apex when `per` is 0; else `per` to a sub-domain
/// `s<k>.example.com.`, each named by `b._dns-sd._udp.example.com.` (RFC 6763 §11), as a
/// domain too large for one PTR RRset lists them.
pub fn clusters_zone(n: usize, per: usize) -> String {
    let mut z = String::with_capacity(n * 200);
    for i in 0..n {
        let listed_at = match i.checked_div(per) {
            Some(k) => format!("s{k}.example.com."),
            None => "example.com.".to_owned(),
        };
        if per > 0 && i % per == 0 {
            z.push_str(&format!("b._dns-sd._udp.example.com. PTR {listed_at}\n"));
        }
        z.push_str(&format!(
            "{listed_at} PTR c{i}._liqo._tcp.example.com.\n\
             c{i}._liqo._tcp.example.com. SRV 0 0 6443 api-{i}.example.com.\n\
             c{i}._liqo._tcp.example.com. TXT \"id=c{i:08}-0000-4000-8000-000000000000\" \"namespace=liqo\"\n\
             api-{i}.example.com. A 10.{}.{}.{}\n",
            i / 65536 % 256,
            i / 256 % 256,
            i % 256
        ));
    }
    zone_file("example.com.", &z)
}

/// hickory-server serving one zone on 127.0.0.1. Its zone is replaced in place
/// ([`ZoneServer::set_zone`]): the sockets stay bound, so no other socket (a resolver's random
/// source port, another test's server) can take the address between two zones.
pub struct ZoneServer {
    pub addr: SocketAddr,
    origin: String,
    zone: Arc<Swappable>,
    server: Option<Server<SwappableHandler>>,
}

/// The catalog a running server answers from, replaceable while it runs.
struct Swappable(std::sync::RwLock<Arc<Catalog>>);

/// The server's handler: answers each request from the catalog of the moment.
struct SwappableHandler(Arc<Swappable>);

#[async_trait::async_trait]
impl RequestHandler for SwappableHandler {
    async fn handle_request<R: ResponseHandler, T: Time>(&self, request: &Request, response_handle: R) -> ResponseInfo {
        let catalog = Arc::clone(&self.0.0.read().unwrap_or_else(|e| e.into_inner()));
        catalog.handle_request::<R, T>(request, response_handle).await
    }
}

fn catalog(origin: &str, zone: &str) -> Result<Catalog, String> {
    let origin_name = Name::from_ascii(origin).map_err(|e| e.to_string())?;
    let (name, records) = Parser::new(zone, None, Some(origin_name)).parse().map_err(|e| format!("zone: {e}"))?;
    let handler = InMemoryZoneHandler::<hickory_server::net::runtime::TokioRuntimeProvider>::new(
        name.clone(),
        records,
        ZoneType::Primary,
        AxfrPolicy::Deny,
    )?;
    let mut catalog = Catalog::new();
    catalog.upsert(LowerName::new(&name), vec![Arc::new(handler)]);
    Ok(catalog)
}

/// A UDP socket and a TCP listener on the same address, or the error of the first that failed.
async fn bind_both(addr: SocketAddr) -> std::io::Result<(tokio::net::UdpSocket, tokio::net::TcpListener)> {
    let udp = tokio::net::UdpSocket::bind(addr).await?;
    let tcp = tokio::net::TcpListener::bind(addr).await?;
    Ok((udp, tcp))
}

impl ZoneServer {
    /// Serves `zone` (a zone file) for `origin` on a port free for both UDP and TCP.
    pub async fn start(origin: &str, zone: &str) -> Self {
        let catalog = catalog(origin, zone).expect("a valid zone");
        for _ in 0..64 {
            // A port free for TCP when chosen may be some resolver's UDP source port by now.
            let addr = SocketAddr::from(([127, 0, 0, 1], crate::free_port()));
            if let Ok(sockets) = bind_both(addr).await {
                let zone = Arc::new(Swappable(std::sync::RwLock::new(Arc::new(catalog))));
                let mut s = Self { addr, origin: origin.to_owned(), zone, server: None };
                s.serve(sockets);
                return s;
            }
        }
        panic!("no port in the test range was free for both UDP and TCP in 64 tries");
    }

    fn serve(&mut self, (udp, tcp): (tokio::net::UdpSocket, tokio::net::TcpListener)) {
        let mut server = Server::new(SwappableHandler(Arc::clone(&self.zone)));
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(5), 64 * 1024);
        self.server = Some(server);
    }

    /// Serves `zone` from now on (same address; a stopped server starts again on it).
    pub async fn set_zone(&mut self, zone: &str) {
        let catalog = catalog(&self.origin, zone).expect("a valid zone");
        *self.zone.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(catalog);
        if self.server.is_none() {
            let sockets = bind_both(self.addr).await.expect("binding the stopped server's address again");
            self.serve(sockets);
        }
    }

    /// Stops answering: the sockets are closed, so a query is refused as by a server that is
    /// down.
    pub async fn stop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.shutdown_gracefully().await;
        }
    }
}

/// A real BIND 9 `named` serving one zone on 127.0.0.1 (foreground process, killed on drop).
pub struct Named {
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Child,
}

impl Named {
    /// `named`, or why it cannot run here.
    pub fn binary() -> Result<PathBuf, String> {
        ["/usr/sbin/named", "/usr/bin/named"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .ok_or_else(|| "named (BIND 9) is not installed: apt-get install bind9".to_owned())
    }

    /// Starts `named` serving `zone` for `origin` and waits until it answers. A port taken
    /// between its choice and named's bind (a resolver's random UDP source port) is given up for
    /// another, up to 5 times.
    pub async fn start(origin: &str, zone: &str) -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..5 {
            match Self::start_on(origin, zone, free_udp_and_tcp_port()).await {
                Ok(me) => return Ok(me),
                Err(why) => last = why,
            }
        }
        Err(last)
    }

    async fn start_on(origin: &str, zone: &str, port: u16) -> Result<Self, String> {
        let named = Self::binary()?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let zone_path = dir.path().join("zone.db");
        std::fs::write(&zone_path, zone).map_err(|e| e.to_string())?;
        let conf = format!(
            "options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  recursion no;\n  dnssec-validation no;\n  allow-query {{ 127.0.0.1; }};\n  max-records-per-type 0;\n  max-types-per-name 0;\n  session-keyfile none;\n}};\ncontrols {{ }};\nzone \"{origin}\" {{ type primary; file \"{zone}\"; }};\n",
            d = dir.path().display(),
            zone = zone_path.display(),
        );
        let conf_path = dir.path().join("named.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.path().join("named.log")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(named);
        cmd.args(["-g", "-4", "-n", "1", "-c"]).arg(&conf_path);
        // (No limit on records per name: a domain may list thousands of clusters under one PTR.)
        // As root, named switches to user `bind` unless told to stay: stay, in our directory.
        if is_root() {
            cmd.args(["-u", "root"]);
        }
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::from(log)).spawn().map_err(|e| format!("starting named: {e}"))?;
        let mut me = Self { addr: SocketAddr::from(([127, 0, 0, 1], port)), dir, child };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = me.child.try_wait() {
                return Err(format!("named exited ({status}): {}", me.log()));
            }
            if answers_soa(me.addr, origin).await {
                return Ok(me);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("named did not answer in 20 s: {}", me.log()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Replaces the zone and makes named load it (SIGHUP reloads every zone).
    pub async fn set_zone(&mut self, origin: &str, zone: &str) -> Result<(), String> {
        let before = self.reloads();
        std::fs::write(self.dir.path().join("zone.db"), zone).map_err(|e| e.to_string())?;
        let pid = self.child.id().to_string();
        let ok = Command::new("kill").args(["-HUP", &pid]).status().map_err(|e| e.to_string())?.success();
        if !ok {
            return Err("kill -HUP named failed".into());
        }
        // Reloaded when named says so (it logs each reload), not after some fixed time.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.reloads() <= before {
            if tokio::time::Instant::now() > deadline {
                return Err(format!("named did not reload in 20 s: {}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if answers_soa(self.addr, origin).await { Ok(()) } else { Err(format!("named stopped answering: {}", self.log())) }
    }

    /// How many reloads named has logged as done.
    fn reloads(&self) -> usize {
        self.log().matches(RELOADED).count()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("named.log")).unwrap_or_default()
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What named logs when a reload (SIGHUP) is done.
const RELOADED: &str = "reloading zones succeeded";

/// A port of the test range that is free, right now, for both UDP and TCP on 127.0.0.1.
fn free_udp_and_tcp_port() -> u16 {
    loop {
        let port = crate::free_port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// Whether a DNS server at `addr` answers an SOA query for `origin` (a hand-made UDP query).
async fn answers_soa(addr: SocketAddr, origin: &str) -> bool {
    let Ok(sock) = tokio::net::UdpSocket::bind("127.0.0.1:0").await else { return false };
    let mut q = vec![0x12, 0x34, 0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in origin.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 6, 0, 1]);
    if sock.send_to(&q, addr).await.is_err() {
        return false;
    }
    let mut buf = [0u8; 512];
    match tokio::time::timeout(Duration::from_millis(500), sock.recv(&mut buf)).await {
        Ok(Ok(n)) => n >= 12 && buf[0] == 0x12 && buf[1] == 0x34 && (buf[3] & 0x0f) == 0 && u16::from_be_bytes([buf[6], buf[7]]) > 0,
        _ => false,
    }
}
