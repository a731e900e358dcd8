//! Issue 35: nobody gets in where they don't belong. The hostile probe's three attacks (a fake replica acknowledging
//! everything, forged coordinator proposals, coordination commands from any client) fail with clear errors, and
//! each test shows what they no longer break: the durable write still waits for the real replica, the data is not
//! wiped, the epoch does not move. Plus a primary with `requirepass` followed by a replica with `masterauth`.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::cluster::{cmd, line, text, wait_for, Cluster};
use common::*;
use ruvio_protocol::Value;

fn err(v: &Value) -> String {
    match v {
        Value::Error(e) => String::from_utf8_lossy(e).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn wait_log(s: &Server, what: &str) {
    let started = Instant::now();
    while !s.stderr().contains(what) {
        assert!(started.elapsed() < Duration::from_secs(30), "no '{what}' in the log:\n{}", s.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn caught_up(primary: &Server, replica: &Server, auth: &[&str]) {
    let lsn = |s: &Server, auth: &[&str]| {
        let mut c = s.conn();
        if !auth.is_empty() {
            c.cmd(auth);
        }
        let t = bulk(&c.cmd(&["INFO", "replication"])).unwrap();
        (line_of(&t, "ruvio_lsn"), line_of(&t, "master_link_status"))
    };
    let started = Instant::now();
    loop {
        let (p, _) = lsn(primary, auth);
        let (r, link) = lsn(replica, &[]);
        if p == r && link == "up" {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "replica not caught up ({r} of {p}, link {link}): {}", replica.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn line_of(t: &str, name: &str) -> String {
    t.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or("").trim().to_string()
}

/// A raw connection that speaks to the primary as a replica would.
fn raw(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn send(s: &mut TcpStream, args: &[&str]) {
    let mut out = bytes::BytesMut::new();
    ruvio_protocol::encode_command(args, &mut out);
    s.write_all(&out).unwrap();
}

fn read_some(s: &mut TcpStream) -> String {
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn a_fake_replica_that_acknowledges_more_than_it_was_sent_is_dropped_and_durable_writes_wait_for_the_real_one() {
    let (pd, rd) = (temp_dir("sec-fake-p"), temp_dir("sec-fake-r"));
    let primary = start(&pd, &["--appendonly", "yes", "--appendfsync", "always", "--durability-timeout", "1000"]);
    let replica = start(&rd, &["--appendonly", "yes", "--appendfsync", "always"]);
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    caught_up(&primary, &replica, &[]);
    let mut c = primary.conn();
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    assert!(is_ok(&c.cmd(&["SET", "before", "1"])), "the real replica acknowledges");

    // The probe: PSYNC as a replica with appendonly, then acknowledge everything there could ever be.
    let mut fake = raw(primary.port);
    send(&mut fake, &["PSYNC", "?", "1", "0", "1", "1"]);
    let hello = read_some(&mut fake);
    assert!(hello.starts_with("+FULLRESYNC") || hello.starts_with("+CONTINUE"), "{hello}");
    send(&mut fake, &["REPLCONF", "ACK", "18446744073709551615", "FACK", "18446744073709551615"]);
    wait_log(&primary, "was sent on this link: dropped");

    // The real replica paused: a durable write must wait for it, and times out (the forged ack counts for nothing).
    // Waited for: a replica still running for a moment after the signal could acknowledge the write.
    let sig = |n| common::signal(&replica, n);
    sig(libc::SIGSTOP);
    let r = c.cmd(&["SET", "while-paused", "1"]);
    assert!(err(&r).starts_with("NOTDURABLE") || err(&r).starts_with("NOREPLICAS"), "{r:?}");
    sig(libc::SIGCONT);
    assert!(is_ok(&c.cmd(&["SET", "after", "1"])), "acknowledged again by the real replica");
}

#[test]
fn a_primary_with_requirepass_is_followed_by_a_replica_with_masterauth_and_refuses_anyone_else() {
    let (pd, rd, bd) = (temp_dir("sec-auth-p"), temp_dir("sec-auth-r"), temp_dir("sec-auth-b"));
    let primary = start(&pd, &["--requirepass", "s3cret", "--appendonly", "yes", "--appendfsync", "always"]);
    let auth = ["AUTH", "s3cret"];
    let mut c = primary.conn();
    assert!(is_ok(&c.cmd(&auth)));
    assert!(is_ok(&c.cmd(&["SET", "k", "v"])));

    // Posing as a replica without the password: refused before anything is streamed.
    let mut fake = raw(primary.port);
    send(&mut fake, &["PSYNC", "?", "1", "0", "1", "1"]);
    assert!(read_some(&mut fake).starts_with("-NOAUTH"));

    // A replica without masterauth is refused and says so; with it, it follows.
    let bad = start(&bd, &[]);
    assert!(is_ok(&bad.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    wait_log(&bad, "the primary refused PSYNC: -NOAUTH");
    let replica = start(&rd, &["--masterauth", "s3cret", "--appendonly", "yes", "--appendfsync", "always"]);
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    caught_up(&primary, &replica, &auth);
    assert_eq!(bulk(&replica.conn().cmd(&["GET", "k"])).as_deref(), Some("v"));
    // Durable writes are acknowledged through the authenticated link.
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    assert!(is_ok(&c.cmd(&["SET", "durable", "1"])));

    // An ACL user allowed to replicate (masteruser + masterauth, set by CONFIG SET) works too; a user that is not
    // allowed PSYNC is refused.
    assert!(is_ok(&c.cmd(&["ACL", "SETUSER", "repl", "on", ">rp", "+psync", "+replconf", "+ping"])));
    assert!(is_ok(&c.cmd(&["ACL", "SETUSER", "reader", "on", ">rd", "+@read", "~*"])));
    let r2 = start(&temp_dir("sec-auth-r2"), &[]);
    let mut rc = r2.conn();
    assert!(is_ok(&rc.cmd(&["CONFIG", "SET", "masteruser", "reader", "masterauth", "rd"])));
    assert!(is_ok(&rc.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    wait_log(&r2, "the primary refused PSYNC: -NOPERM");
    assert!(is_ok(&rc.cmd(&["CONFIG", "SET", "masteruser", "repl", "masterauth", "rp"])));
    assert!(is_ok(&c.cmd(&["SET", "durable", "2"])));
    caught_up(&primary, &r2, &auth);
    assert_eq!(bulk(&r2.conn().cmd(&["GET", "durable"])).as_deref(), Some("2"));
}

#[test]
fn coordination_commands_are_closed_to_clients_and_a_hostile_primary_cannot_move_the_epoch() {
    let (pd, rd) = (temp_dir("sec-coord-p"), temp_dir("sec-coord-r"));
    let args = ["--appendonly", "yes", "--appendfsync", "always", "--durability-timeout", "2000", "--coordinator-pass", COORD_PASS];
    let primary = start(&pd, &args);
    let replica = start(&rd, &args);
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    caught_up(&primary, &replica, &[]);

    // The probe's commands, from a client of a server without any password: NOPERM, and nothing changes.
    let mut c = primary.conn();
    assert!(err(&c.cmd(&["REPLICATION", "LEASE", "0", "600000", "1", "15"])).starts_with("NOPERM"));
    assert!(err(&replica.conn().cmd(&["REPLICATION", "PROMISE", "1023"])).starts_with("NOPERM"));
    assert!(err(&replica.conn().cmd(&["REPLICAOF", "NO", "ONE", "EPOCH", "1023"])).starts_with("NOPERM"));
    assert_eq!(line_of(&bulk(&replica.conn().cmd(&["INFO", "replication"])).unwrap(), "ruvio_promised_epoch"), "0");
    assert_eq!(line_of(&bulk(&c.cmd(&["INFO", "replication"])).unwrap(), "ruvio_write_lease"), "not-required");
    // ACL LOG shows the denials.
    let log = format!("{:?}", c.cmd(&["ACL", "LOG"]));
    assert!(log.contains("replication|lease"), "{log}");
    // So durable writes go on, acknowledged by the replica, which still follows its primary.
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    assert!(is_ok(&c.cmd(&["SET", "k", "v"])));

    // The coordinator user may; the last epoch needs FORCE; a promise can be taken back.
    let mut co = Conn::as_coordinator(replica.port);
    assert!(err(&co.cmd(&["GET", "k"])).starts_with("NOPERM"), "the coordinator user has no data access");
    let Value::Array(p) = co.cmd(&["REPLICATION", "PROMISE", "7"]) else { panic!("PROMISE") };
    assert_eq!(p[0], Value::Integer(7));
    let Value::Array(p) = co.cmd(&["REPLICATION", "PROMISE", "WITHDRAW"]) else { panic!("WITHDRAW") };
    assert_eq!(p[0], Value::Integer(0));
    assert!(err(&co.cmd(&["REPLICAOF", "NO", "ONE", "EPOCH", "1023"])).contains("last failover epoch"));
    assert_eq!(line_of(&bulk(&replica.conn().cmd(&["INFO", "replication"])).unwrap(), "role"), "slave");

    // A hostile primary answering `+CONTINUE id 65535`: refused, not clamped; the replica's epoch stays.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_port = listener.local_addr().unwrap().port();
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &fake_port.to_string()])));
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _psync = read_some(&mut s);
    s.write_all(format!("+CONTINUE {} 65535\r\n", "a".repeat(40)).as_bytes()).unwrap();
    wait_log(&replica, "above the largest failover epoch");
    assert_eq!(line_of(&bulk(&replica.conn().cmd(&["INFO", "replication"])).unwrap(), "ruvio_epoch"), "0");
}

#[test]
fn forged_coordinator_messages_are_refused_and_the_group_keeps_its_primary_and_data() {
    let c = Cluster::start("sec-propose", 1, 1);
    let (p0, p1) = (c.nodes[0].0, c.nodes[1].0);
    let cp = c.coord_ports()[0];
    let mut w = Conn::connect(p0);
    assert!(is_ok(&w.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    assert!(matches!(w.cmd(&["LEASE", "job", "60000"]), Value::Integer(_)), "a durable grant through the coordinators' lease");
    let epoch = c.epoch();

    // The probe's two proposals, from a client of a coordinator: NOPERM, never applied.
    let evil = free_port();
    let begin = format!(r#"{{"BeginFailover":{{"name":"mymaster","from":"127.0.0.1:{p0}","min_epoch":0,"reason":"x","now_ms":0}}}}"#);
    let finish = format!(r#"{{"FinishFailover":{{"name":"mymaster","epoch":{},"to":"127.0.0.1:{evil}","forced":true,"note":"","now_ms":0}}}}"#, epoch + 1);
    for body in [&begin, &finish] {
        let r = cmd(cp, &["COORDINATOR", "PROPOSE", body]).unwrap();
        assert!(err(&r).starts_with("NOPERM"), "{r:?}");
    }
    assert!(err(&cmd(cp, &["COORDINATOR", "RAFT", "VOTE", "{}"]).unwrap()).starts_with("NOPERM"));
    // A wrong peer password is refused too.
    assert!(err(&cmd(cp, &["AUTH", PEER_USER, "guess"]).unwrap()).starts_with("WRONGPASS"));

    std::thread::sleep(Duration::from_millis(1500));
    for &(port, _) in &c.coords {
        match cmd(port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]) {
            Some(Value::Array(v)) => assert_eq!(bulk(&v[1]).unwrap(), p0.to_string()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(c.epoch(), epoch, "the epoch did not move");
    // The data is not wiped: the grant is on the primary and on its replica.
    for port in [p0, p1] {
        wait_for("the grant on both nodes", || cmd(port, &["EXISTS", "job"]) == Some(Value::Integer(1)));
    }
    assert_eq!(line(&text(p1, &["INFO", "replication"]), "master_port").unwrap(), p0.to_string());
}

#[test]
fn a_coordinator_refused_by_a_node_logs_why() {
    let dir = temp_dir("sec-refused");
    std::fs::create_dir_all(dir.join("n")).unwrap();
    let node = start(&dir.join("n"), &[]);
    let cp = free_port();
    let cdir = dir.join("c");
    std::fs::create_dir_all(&cdir).unwrap();
    let conf = cdir.join("c.conf");
    std::fs::write(&conf, format!("port {cp}\ndir {}\nsentinel monitor mymaster 127.0.0.1 {} 1\nsentinel down-after-milliseconds mymaster 1000\n", cdir.display(), node.port)).unwrap();
    let log = cdir.join("log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ruvio"))
        .args(["coordinator", "--config", conf.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // The node has no coordinator-pass: it refuses the lease, and the coordinator says what to configure.
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("refused the write lease: NOPERM") {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("no refusal logged:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(std::fs::read_to_string(&log).unwrap().contains("coordinator-pass"));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_group_of_coordinators_without_their_own_login_refuses_to_start() {
    let dir = temp_dir("sec-nopeer");
    let (a, b) = (free_port(), free_port());
    let conf = dir.join("c.conf");
    std::fs::write(&conf, format!("port {a}\ndir {}\ncoordinator-peers 127.0.0.1:{a} 127.0.0.1:{b}\nsentinel monitor m 127.0.0.1 1 1\n", dir.display())).unwrap();
    let log = dir.join("log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ruvio"))
        .args(["coordinator", "--config", conf.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Bounded: a coordinator that starts anyway is killed and the test fails.
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.is_some_and(|s| !s.success()), "the coordinator started without peer authentication:\n{text}");
    assert!(text.contains("sentinel-pass"), "{text}");
}
