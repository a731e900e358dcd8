//! TLS (`tls-port`, `tls-auth-clients`, `tls-replication`): real `ruvio` processes, redis-cli (`--tls`) and the
//! Rust client over TLS, a replica following its primary over TLS. The certificates are made by the test
//! (scripts/gen-test-certs.sh, the openssl CLI) in a temporary folder.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{free_port, is_ok, temp_dir, Server};
use ruvio_client::{cmd, Client, TlsConfig};

/// Fresh test certificates in `<dir>/certs`: ca, server (127.0.0.1, server and client use), client, and an
/// untrusted CA's client.
fn certs(dir: &Path) -> PathBuf {
    let out = dir.join("certs");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gen-test-certs.sh");
    let st = Command::new("bash").arg(script).arg(&out).status().expect("running gen-test-certs.sh (needs openssl)");
    assert!(st.success(), "gen-test-certs.sh failed");
    out
}

fn f(certs: &Path, name: &str) -> String {
    certs.join(name).display().to_string()
}

/// The flags of a node with TLS on `tls_port` (the server's certificate, the test CA).
fn tls_flags(certs: &Path, tls_port: u16) -> Vec<String> {
    vec![
        "--tls-port".into(),
        tls_port.to_string(),
        "--tls-cert-file".into(),
        f(certs, "server.crt"),
        "--tls-key-file".into(),
        f(certs, "server.key"),
        "--tls-ca-cert-file".into(),
        f(certs, "ca.crt"),
    ]
}

/// A Rust client over TLS, presenting `cert` (`client`, `untrusted-client`, or none).
fn tls_client(certs: &Path, port: u16, cert: Option<&str>) -> ruvio_client::Result<Client> {
    let mut b = TlsConfig::builder().ca_file(certs.join("ca.crt"));
    if let Some(c) = cert {
        b = b.client_cert(certs.join(format!("{c}.crt")), certs.join(format!("{c}.key")));
    }
    Client::builder("127.0.0.1", port).tls(b.build()?).connect_timeout(Duration::from_secs(3)).connect()
}

/// Starts a node whose only listener is the TLS port (`port 0`) and waits until it answers over TLS.
fn start_tls_only(dir: &Path, certs: &Path, extra: &[&str]) -> (Server, u16) {
    let tls_port = free_port();
    let stderr_path = dir.join("stderr.log");
    let child = Command::new(env!("CARGO_BIN_EXE_ruvio"))
        .args(["--port", "0", "--dir", dir.to_str().unwrap()])
        .args(tls_flags(certs, tls_port))
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("spawning ruvio");
    let s = Server { child, port: tls_port, dir: dir.to_path_buf(), stderr_path };
    let start = Instant::now();
    while tls_client(certs, tls_port, Some("client")).and_then(|mut c| c.ping()).is_err() {
        assert!(start.elapsed() < Duration::from_secs(60), "server did not answer over TLS; stderr: {}", s.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    (s, tls_port)
}

/// redis-cli (Debian's is built with TLS) against `port`, presenting `cert`.
fn redis_cli(certs: &Path, port: u16, cert: Option<&str>, args: &[&str]) -> String {
    let mut c = Command::new("redis-cli");
    c.args(["--tls", "--cacert", &f(certs, "ca.crt"), "-h", "127.0.0.1", "-p", &port.to_string()]);
    if let Some(name) = cert {
        c.args(["--cert", &f(certs, &format!("{name}.crt")), "--key", &f(certs, &format!("{name}.key"))]);
    }
    let out = c.args(args).output().expect("running redis-cli");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)).trim().to_string()
}

#[test]
fn redis_cli_and_the_rust_client_work_over_tls_with_plain_tcp_off() {
    let dir = temp_dir("tls-basic");
    let certs = certs(&dir);
    let (s, port) = start_tls_only(&dir, &certs, &[]);
    assert_eq!(redis_cli(&certs, port, Some("client"), &["PING"]), "PONG");
    assert_eq!(redis_cli(&certs, port, Some("client"), &["SET", "greeting", "hello"]), "OK");
    assert_eq!(redis_cli(&certs, port, Some("client"), &["GET", "greeting"]), "hello");
    let token = redis_cli(&certs, port, Some("client"), &["LEASE", "lock:cli", "10000"]);
    assert!(token.parse::<i64>().is_ok_and(|t| t > 0), "LEASE over TLS gave {token}");
    assert_eq!(redis_cli(&certs, port, Some("client"), &["CONFIG", "GET", "port"]), "port\n0");
    assert_eq!(redis_cli(&certs, port, Some("client"), &["CONFIG", "GET", "tls-port"]), format!("tls-port\n{port}"));

    let mut c = tls_client(&certs, port, Some("client")).expect("TLS connect");
    let t = c.lease("lock:rust", 10_000).expect("LEASE over TLS").expect("granted");
    assert!(t > 0);
    assert_eq!(c.get::<String>("greeting").unwrap().as_deref(), Some("hello"));
    assert_eq!(c.release("lock:rust", t).unwrap(), 1);
    // A pipeline larger than one TLS record (16 KB) in each direction.
    let big = "x".repeat(100_000);
    c.set("big", big.as_str()).unwrap();
    assert_eq!(c.get::<String>("big").unwrap().unwrap().len(), 100_000);

    // The async client over TLS.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let tls = TlsConfig::builder().ca_file(certs.join("ca.crt")).client_cert(certs.join("client.crt"), certs.join("client.key")).build().unwrap();
        let mut c = ruvio_client::ClientBuilder::new("127.0.0.1", port).tls(tls).connect_async().await.expect("async TLS connect");
        let t = c.lease("lock:async", 10_000).await.unwrap().expect("granted");
        assert_eq!(c.release("lock:async", t).await.unwrap(), 1);
        assert_eq!(c.get::<String>("big").await.unwrap().unwrap().len(), 100_000);
    });

    // `port 0`: the only listener is the TLS one.
    let log = s.stderr();
    let ready: Vec<&str> = log.lines().filter(|l| l.contains("ready to accept connections on")).collect();
    assert!(!ready.is_empty() && ready.iter().all(|l| l.contains(&format!(":{port} (TLS)"))), "{log}");
}

#[test]
fn client_certificates_are_checked_as_tls_auth_clients_says() {
    let dir = temp_dir("tls-auth-clients");
    let certs = certs(&dir);
    let (s, port) = start_tls_only(&dir, &certs, &[]);
    // tls-auth-clients yes (the default): a certificate of another CA, or none, is refused.
    let untrusted = redis_cli(&certs, port, Some("untrusted-client"), &["PING"]);
    assert!(!untrusted.contains("PONG"), "an untrusted client certificate was let in: {untrusted}");
    assert!(tls_client(&certs, port, Some("untrusted-client")).and_then(|mut c| c.ping()).is_err());
    let none = redis_cli(&certs, port, None, &["PING"]);
    assert!(!none.contains("PONG"), "a client without a certificate was let in: {none}");
    assert!(tls_client(&certs, port, None).and_then(|mut c| c.ping()).is_err());
    assert!(s.stderr().contains("TLS handshake with 127.0.0.1"), "the refusals are logged: {}", s.stderr());

    // optional: no certificate is fine, a bad one still is not.
    let mut admin = tls_client(&certs, port, Some("client")).unwrap();
    cmd("CONFIG").arg("SET").arg("tls-auth-clients").arg("optional").query::<()>(&mut admin).unwrap();
    assert_eq!(redis_cli(&certs, port, None, &["PING"]), "PONG");
    assert!(tls_client(&certs, port, None).and_then(|mut c| c.ping()).is_ok());
    assert!(tls_client(&certs, port, Some("untrusted-client")).and_then(|mut c| c.ping()).is_err());

    // A certificate that does not load is refused by CONFIG SET, and the running one stays.
    let bad = dir.join("missing.crt").display().to_string();
    let e = cmd("CONFIG").arg("SET").arg("tls-cert-file").arg(bad.as_str()).query::<()>(&mut admin).unwrap_err();
    assert!(e.to_string().contains("Unable to update TLS configuration"), "{e}");
    assert_eq!(redis_cli(&certs, port, Some("client"), &["PING"]), "PONG");
}

#[test]
fn plain_and_silent_peers_on_the_tls_port_are_closed_without_holding_other_clients() {
    let dir = temp_dir("tls-handshake");
    let certs = certs(&dir);
    // One I/O thread: a handshake that blocked it would block every other client.
    let (_s, port) = start_tls_only(&dir, &certs, &["--io-threads", "1", "--tls-handshake-timeout", "700"]);

    // A plain RESP client on the TLS port gets the connection closed at once, not a hang.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    plain.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let mut got = Vec::new();
    let end = loop {
        match plain.read(&mut buf) {
            Ok(0) => break "eof",
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => break "hang",
            Err(_) => break "reset",
        }
    };
    assert_ne!(end, "hang", "a plain client on the TLS port was left hanging");
    assert!(started.elapsed() < Duration::from_secs(2), "closing a plain client took {:?}", started.elapsed());
    assert!(!got.windows(4).any(|w| w == b"PONG"), "a plain client was answered on the TLS port");

    // A peer that opens a connection and sends nothing does not stop others from being served meanwhile ...
    let mut silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let opened = Instant::now();
    let mut c = tls_client(&certs, port, Some("client")).expect("served while a handshake waits");
    c.ping().unwrap();
    assert!(opened.elapsed() < Duration::from_millis(700), "another client waited {:?}", opened.elapsed());
    // ... and is closed when tls-handshake-timeout passes.
    let r = silent.read(&mut buf);
    let waited = opened.elapsed();
    assert!(matches!(r, Ok(0)) || r.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset), "{r:?}");
    assert!(waited >= Duration::from_millis(600) && waited < Duration::from_secs(5), "closed after {waited:?}");
}

/// The lines of one INFO section.
fn info(c: &mut Client, section: &str) -> String {
    cmd("INFO").arg(section).query::<String>(c).unwrap()
}

#[test]
fn a_replica_follows_its_primary_over_tls_and_acknowledges_durable_grants() {
    let dir = temp_dir("tls-replication");
    let certs = certs(&dir);
    let (pd, rd) = (dir.join("primary"), dir.join("replica"));
    std::fs::create_dir_all(&pd).unwrap();
    std::fs::create_dir_all(&rd).unwrap();
    let common_flags = ["--appendonly", "yes", "--appendfsync", "always"];
    let (ptls, rtls) = (free_port(), free_port());
    let pflags: Vec<String> = tls_flags(&certs, ptls).into_iter().chain(common_flags.iter().map(|s| s.to_string())).collect();
    let primary = common::start(&pd, &pflags.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    // The replica follows the primary's TLS port (which takes TLS only), presenting its certificate.
    let mut rflags = tls_flags(&certs, rtls);
    rflags.extend(["--tls-replication", "yes", "--replicaof", &format!("127.0.0.1 {ptls}")].map(String::from));
    rflags.extend(common_flags.iter().map(|s| s.to_string()));
    let replica = common::start(&rd, &rflags.iter().map(|s| s.as_str()).collect::<Vec<_>>());

    let mut p = primary.conn();
    let start = Instant::now();
    loop {
        let v = p.cmd(&["INFO", "replication"]);
        let t = common::bulk(&v).unwrap_or_default();
        // The replica announces its TLS port (what coordinators and clients reach it on).
        if t.contains(&format!("port={rtls},state=online")) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no replica online over TLS: {t}\nreplica: {}", replica.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(is_ok(&p.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    let token = p.cmd(&["LEASE", "lock:durable", "30000"]);
    assert!(matches!(token, ruvio_protocol::Value::Integer(t) if t > 0), "durable grant over a TLS link: {token:?}");
    assert!(is_ok(&p.cmd(&["SET", "k", "v"])));
    let mut r = replica.conn();
    assert_eq!(r.cmd(&["EXISTS", "lock:durable"]), ruvio_protocol::Value::Integer(1));
    assert_eq!(common::bulk(&r.cmd(&["GET", "k"])).as_deref(), Some("v"));

    // The replica itself answers over TLS and reports its link up.
    let mut over_tls = tls_client(&certs, rtls, Some("client")).unwrap();
    assert!(info(&mut over_tls, "replication").contains("master_link_status:up"));
}

/// A coordinator group over TLS: nodes replicate over TLS (`tls-replication yes`), three coordinators monitor the
/// nodes' TLS ports and reach each other on theirs (`coordinator-peers` lists only TLS ports), with the same logins
/// as every coordinator test (coordinator-pass, auth-user/auth-pass, sentinel-user/pass). A durable grant, then
/// kill -9 of the primary: the replica is promoted and its next token is above the old one. The test itself
/// reads INFO through the processes' plain ports.
#[test]
fn a_coordinator_group_over_tls_fails_over_after_kill_9() {
    use common::cluster::{cmd, line, text, wait_for, Proc};
    use ruvio_protocol::Value;
    let dir = temp_dir("tls-coordinators");
    let certs = certs(&dir);
    let node = |port: u16, tls_port: u16, primary_tls: Option<u16>| -> Proc {
        let d = dir.join(format!("node-{port}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_ruvio"));
        c.args(["--port", &port.to_string(), "--dir", d.to_str().unwrap(), "--appendonly", "yes", "--appendfsync", "always"]);
        c.args(["--coordinator-pass", common::COORD_PASS, "--tls-replication", "yes"]);
        c.args(tls_flags(&certs, tls_port));
        if let Some(p) = primary_tls {
            c.args(["--replicaof", &format!("127.0.0.1 {p}")]);
        }
        let log = d.join("log");
        let child = c.stdout(std::process::Stdio::null()).stderr(std::fs::File::create(&log).unwrap()).spawn().unwrap();
        let p = Proc { child, log };
        wait_for(&format!("node {port} up"), || cmd(port, &["PING"]).is_some());
        p
    };
    let (p0, t0, p1, t1) = (free_port(), free_port(), free_port(), free_port());
    let mut n0 = node(p0, t0, None);
    let n1 = node(p1, t1, Some(t0));
    let cports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let peers: Vec<String> = cports.iter().map(|(_, t)| format!("127.0.0.1:{t}")).collect();
    let mut coords = Vec::new();
    for &(cp, ct) in &cports {
        let d = dir.join(format!("coordinator-{cp}"));
        std::fs::create_dir_all(&d).unwrap();
        let conf = d.join("coordinator.conf");
        std::fs::write(
            &conf,
            format!(
                "port {cp}\ntls-port {ct}\ntls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-replication yes\nbind 127.0.0.1\ndir {}\ncoordinator-peers {}\nsentinel monitor mymaster 127.0.0.1 {t0} 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\nsentinel durability-replicas mymaster 1\n{}",
                f(&certs, "server.crt"),
                f(&certs, "server.key"),
                f(&certs, "ca.crt"),
                d.display(),
                peers.join(" "),
                common::coordinator_auth_conf("mymaster", true)
            ),
        )
        .unwrap();
        let log = d.join("log");
        let child = Command::new(env!("CARGO_BIN_EXE_ruvio"))
            .args(["coordinator", "--config", conf.to_str().unwrap()])
            .env("RUST_LOG", "info,openraft=warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        coords.push(Proc { child, log });
    }
    let logs = |coords: &[Proc]| coords.iter().map(|c| c.log()).collect::<Vec<_>>().join("\n----\n");
    let replica = format!("127.0.0.1:{t1}");
    let start = Instant::now();
    while !cports.iter().all(|(cp, _)| line(&text(*cp, &["INFO", "coordinator"]), "group0").is_some_and(|g| g.contains(&format!("durability_set={replica}")))) {
        assert!(start.elapsed() < Duration::from_secs(60), "coordinators never counted the replica over TLS:\n{}\nprimary: {}", logs(&coords), n0.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for("the primary counts the replica for durable writes", || text(p0, &["INFO", "replication"]).contains("durable=1"));

    let mut c = common::Conn::connect(p0);
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    let Value::Integer(before) = c.cmd(&["LEASE", "lock:tls", "60000"]) else { panic!("no durable grant") };

    n0.kill9();
    let master = |cp: u16| match cmd(cp, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]) {
        Some(Value::Array(v)) if v.len() == 2 => common::bulk(&v[1]).and_then(|p| p.parse::<u16>().ok()),
        _ => None,
    };
    let start = Instant::now();
    while master(cports[0].0) != Some(t1) {
        assert!(start.elapsed() < Duration::from_secs(60), "no failover over TLS:\n{}\nreplica: {}", logs(&coords), n1.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for("the replica is a primary", || text(p1, &["INFO", "replication"]).contains("role:master"));
    let mut c = common::Conn::connect(p1);
    assert_eq!(c.cmd(&["EXISTS", "lock:tls"]), Value::Integer(1), "the durable grant survived the failover");
    let after = loop {
        match c.cmd(&["LEASE", "lock:after", "60000"]) {
            Value::Integer(t) => break t,
            other => {
                assert!(start.elapsed() < Duration::from_secs(60), "no grant on the new primary: {other:?}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert!(after > before, "tokens must grow across the failover: {before} then {after}");
    // A client over TLS finds the new primary through a coordinator's TLS port, as Sentinel clients do.
    let tls = TlsConfig::builder().ca_file(certs.join("ca.crt")).client_cert(certs.join("client.crt"), certs.join("client.key")).build().unwrap();
    let mut via = ruvio_client::ClientBuilder::sentinel([("127.0.0.1", cports[1].1)], "mymaster")
        .tls(tls)
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .expect("discovery and connection over TLS");
    assert_eq!(info(&mut via, "server").lines().find_map(|l| l.strip_prefix("tcp_port:")).map(|p| p.trim().to_string()), Some(p1.to_string()));
}
