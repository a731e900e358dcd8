//! The write lease (docs/coordinator.md, "The write lease"): a primary that its coordinators lease answers durable
//! writes only while a majority of them reach it. First the server's side, driven by hand with
//! `REPLICATION LEASE`; then three real coordinators, two of them paused.

mod common;

use std::time::Duration;

use common::cluster::{cmd, line, node, text, wait_for, Cluster, Proc};
use common::{free_port, is_ok, temp_dir, Conn};
use ruvio_protocol::Value;

fn err(v: &Value) -> String {
    match v {
        Value::Error(e) => String::from_utf8_lossy(e).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn token(v: &Value) -> i64 {
    match v {
        Value::Integer(t) => *t,
        other => panic!("expected a token, got {other:?}"),
    }
}

fn lease_state(port: u16) -> String {
    line(&text(port, &["INFO", "replication"]), "ruvio_write_lease").unwrap_or_default()
}

fn replica_online(primary: u16) -> bool {
    text(primary, &["INFO", "replication"]).contains("state=online")
}

/// A connection whose writes wait for one replica's fsync, giving up after `timeout_ms`.
fn durable_conn(port: u16, timeout_ms: u64) -> Conn {
    let mut c = Conn::connect(port);
    c.set_timeout(Duration::from_secs(30));
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "durability-timeout", &timeout_ms.to_string()])));
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    c
}

#[test]
fn a_leased_primary_answers_durable_writes_only_while_a_majority_of_coordinators_lease_it() {
    let dir = temp_dir("write-lease");
    let (p0, p1) = (free_port(), free_port());
    let mut n0 = node(&dir, p0, None);
    let _n1 = node(&dir, p1, Some(p0));
    wait_for("the replica online", || replica_online(p0));
    let epoch = line(&text(p0, &["INFO", "replication"]), "ruvio_epoch").unwrap();
    let mut c = durable_conn(p0, 1000);
    // The coordination commands need the coordinator user (coordinator-pass); a client's connection is refused them.
    let mut co = Conn::as_coordinator(p0);
    assert!(err(&c.cmd(&["REPLICATION", "LEASE", "OFF"])).starts_with("NOPERM"));

    // Never leased: durable writes need only the replica.
    assert_eq!(lease_state(p0), "not-required");
    token(&c.cmd(&["LEASE", "k1", "60000"]));

    // Leases that name another epoch, a bad range, or a replica are refused and change nothing.
    let other = (epoch.parse::<u64>().unwrap() + 1).to_string();
    assert!(err(&co.cmd(&["REPLICATION", "LEASE", &other, "1000", "1", "3"])).contains("refused: this primary is at epoch"));
    assert!(err(&co.cmd(&["REPLICATION", "LEASE", &epoch, "0", "1", "3"])).starts_with("ERR lease"));
    assert!(err(&co.cmd(&["REPLICATION", "LEASE", &epoch, "1000", "4", "3"])).starts_with("ERR lease"));
    assert!(err(&Conn::as_coordinator(p1).cmd(&["REPLICATION", "LEASE", &epoch, "1000", "1", "3"])).contains("replica"));
    assert_eq!(lease_state(p0), "not-required");

    // One coordinator of three: not a majority. The durable grant times out, is undone, and says why.
    assert!(is_ok(&co.cmd(&["REPLICATION", "LEASE", &epoch, "600000", "1", "3"])));
    assert_eq!(lease_state(p0), "expired");
    let refused = err(&c.cmd(&["LEASE", "k2", "60000"]));
    assert!(refused.starts_with("NOTDURABLE") && refused.contains("not been leased by a majority") && refused.contains("undone"), "{refused}");
    let mut plain = Conn::connect(p0);
    token(&plain.cmd(&["LEASE", "k2", "60000"]));
    assert!(is_ok(&plain.cmd(&["SET", "plain", "1"])), "writes that are not durable go on");
    let refused = err(&c.cmd(&["SET", "durable", "1"]));
    assert!(refused.contains("not been leased") && refused.contains("applied here"), "{refused}");

    // A durable grant waiting for the lease is answered by the lease that completes the majority.
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "durability-timeout", "20000"])));
    c.send(&["LEASE", "k3", "60000"]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(is_ok(&co.cmd(&["REPLICATION", "LEASE", &epoch, "600000", "2", "3"])));
    token(&c.read_reply().unwrap());
    assert_eq!(lease_state(p0), "valid");
    assert_eq!(line(&text(p0, &["INFO", "replication"]), "ruvio_write_lease_coordinators").as_deref(), Some("2/2"));

    // A lease ends on its own.
    assert!(is_ok(&co.cmd(&["REPLICATION", "LEASE", &epoch, "300", "1", "1"])));
    assert_eq!(lease_state(p0), "valid");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(lease_state(p0), "expired");

    // Required across a restart: a restarted primary waits for its coordinators.
    drop(c);
    n0.kill9();
    let _n0 = node(&dir, p0, None);
    wait_for("the replica online again", || replica_online(p0));
    assert_eq!(lease_state(p0), "expired");
    let mut c = durable_conn(p0, 1000);
    let mut co = Conn::as_coordinator(p0);
    assert!(err(&c.cmd(&["LEASE", "k4", "60000"])).contains("not been leased"));

    // An operator takes over: durable writes no longer need the coordinators, also after a restart.
    assert!(is_ok(&co.cmd(&["REPLICATION", "LEASE", "OFF"])));
    assert_eq!(lease_state(p0), "not-required");
    token(&c.cmd(&["LEASE", "k4", "60000"]));
    drop(c);
    drop(_n0);
    let _n0 = node(&dir, p0, None);
    assert_eq!(lease_state(p0), "not-required");
}

/// Issue 36: a durable write refused because the write lease expired says why in the log, once per episode (until
/// the lease is valid again), not once per refused write.
#[test]
fn a_durable_write_refused_for_an_expired_write_lease_is_logged_once_per_episode() {
    let dir = temp_dir("write-lease-log");
    let (p0, p1) = (free_port(), free_port());
    let n0 = node(&dir, p0, None);
    let _n1 = node(&dir, p1, Some(p0));
    wait_for("the replica online", || replica_online(p0));
    let epoch = line(&text(p0, &["INFO", "replication"]), "ruvio_epoch").unwrap();
    let mut c = durable_conn(p0, 200);
    let mut co = Conn::as_coordinator(p0);
    let refusals = |n0: &Proc| n0.log().lines().filter(|l| l.contains("durable writes refused")).map(str::to_string).collect::<Vec<_>>();
    let expire = |co: &mut Conn| {
        assert!(is_ok(&co.cmd(&["REPLICATION", "LEASE", &epoch, "200", "1", "1"])));
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(lease_state(p0), "expired");
    };

    expire(&mut co);
    for i in 0..3 {
        assert!(err(&c.cmd(&["SET", &format!("d{i}"), "1"])).contains("not been leased"));
    }
    let logged = refusals(&n0);
    assert_eq!(logged.len(), 1, "one line for three refused writes: {logged:?}");
    assert!(logged[0].contains("WARN") && logged[0].contains("0 of 1 coordinator(s) lease this primary, 1 needed"), "{}", logged[0]);
    assert!(logged[0].contains("coordinator 1's ended"), "{}", logged[0]);

    // The lease is valid again: the episode ends (a line says so), durable writes are answered.
    assert!(is_ok(&co.cmd(&["REPLICATION", "LEASE", &epoch, "600000", "1", "1"])));
    assert!(is_ok(&c.cmd(&["SET", "ok", "1"])));
    assert_eq!(n0.log().lines().filter(|l| l.contains("write lease valid again")).count(), 1);

    // A new episode is logged again, once.
    expire(&mut co);
    for i in 0..2 {
        assert!(err(&c.cmd(&["SET", &format!("e{i}"), "1"])).contains("not been leased"));
    }
    assert_eq!(refusals(&n0).len(), 2, "{:?}", refusals(&n0));
}

/// How many replicas the primary counts for durable writes (INFO replication's `durable=1`).
fn durable_replicas(primary: u16) -> usize {
    text(primary, &["INFO", "replication"]).matches("durable=1").count()
}

#[test]
fn only_replicas_of_the_coordinators_durability_set_count_for_durable_writes() {
    let dir = temp_dir("write-lease-d");
    let (p0, p1, p2) = (free_port(), free_port(), free_port());
    let _n0 = node(&dir, p0, None);
    let n1 = node(&dir, p1, Some(p0));
    let _n2 = node(&dir, p2, Some(p0));
    wait_for("both replicas online", || text(p0, &["INFO", "replication"]).matches("state=online").count() == 2);
    let epoch = line(&text(p0, &["INFO", "replication"]), "ruvio_epoch").unwrap();
    let (r1, r2) = (format!("127.0.0.1:{p1}"), format!("127.0.0.1:{p2}"));
    assert_eq!(durable_replicas(p0), 2, "without coordinators every replica counts");

    // D = {r1}, named by two coordinators of three (a majority), one more names r2 too (not a majority for r2).
    let mut admin = Conn::as_coordinator(p0);
    assert!(is_ok(&admin.cmd(&["REPLICATION", "LEASE", &epoch, "600000", "1", "3", "DURABLE", &r1])));
    assert!(is_ok(&admin.cmd(&["REPLICATION", "LEASE", &epoch, "600000", "2", "3", "DURABLE", &r1])));
    assert!(is_ok(&admin.cmd(&["REPLICATION", "LEASE", &epoch, "600000", "3", "3", "DURABLE", &r1, &r2])));
    assert_eq!(durable_replicas(p0), 1);
    let mut c = durable_conn(p0, 1000);
    token(&c.cmd(&["LEASE", "before", "60000"]));

    // r1 paused: r2's acknowledgements do not make a write durable, since a failover would not count on r2.
    n1.signal(libc::SIGSTOP);
    let refused = err(&c.cmd(&["LEASE", "k", "60000"]));
    assert!(refused.starts_with("NOTDURABLE the grant was not acknowledged"), "{refused}");
    let waitaof = Conn::connect(p0).cmd(&["WAITAOF", "0", "1", "1000"]);
    assert_eq!(waitaof, Value::Array(vec![Value::Integer(1), Value::Integer(1)]), "WAITAOF still counts r2 (Redis's meaning)");

    // Once a majority names r2 too, it counts: a durable write no longer needs r1.
    assert!(is_ok(&admin.cmd(&["REPLICATION", "LEASE", &epoch, "600000", "2", "3", "DURABLE", &r1, &r2])));
    assert_eq!(durable_replicas(p0), 2);
    token(&c.cmd(&["LEASE", "k", "60000"]));

    // A durability set with no replica online refuses durable writes at once.
    assert!(is_ok(&admin.cmd(&["REPLICATION", "LEASE", &epoch, "600000", "1", "1", "DURABLE"])));
    assert_eq!(err(&c.cmd(&["LEASE", "k2", "60000"])), "NOREPLICAS Not enough good replicas to write.");
    n1.signal(libc::SIGCONT);
}

/// The primary as the first answering coordinator names it.
fn primary_of(cluster: &Cluster) -> Option<u16> {
    for cp in cluster.coord_ports() {
        if let Some(Value::Array(v)) = cmd(cp, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]) {
            return common::bulk(&v[1])?.parse().ok();
        }
    }
    None
}

fn coordinator(cluster: &Cluster, i: usize) -> &Proc {
    cluster.coords[i].1.as_ref().unwrap()
}

#[test]
fn a_primary_cut_off_from_a_majority_of_coordinators_stops_answering_durable_grants() {
    let cluster = Cluster::start("write-lease-coordinators", 1, 1);
    let p0 = cluster.nodes[0].0;
    wait_for("the coordinators lease the primary, naming the replica", || lease_state(p0) == "valid" && durable_replicas(p0) == 1);
    let mut c = durable_conn(p0, 1500);
    token(&c.cmd(&["LEASE", "a", "60000"]));

    // One coordinator of three paused: the other two still lease the primary.
    coordinator(&cluster, 0).signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(lease_state(p0), "valid", "{}", cluster.logs());
    token(&c.cmd(&["LEASE", "b", "60000"]));

    // Two of three paused: no majority reaches the primary. Within the lease (down-after / 2) it stops answering
    // durable grants (undone, so the lock is free), while writes that are not durable go on.
    coordinator(&cluster, 1).signal(libc::SIGSTOP);
    wait_for("the lease runs out", || lease_state(p0) == "expired");
    let refused = err(&c.cmd(&["LEASE", "c", "60000"]));
    assert!(refused.contains("not been leased by a majority"), "{refused}");
    let mut plain = Conn::connect(p0);
    token(&plain.cmd(&["LEASE", "c", "60000"]));
    assert!(is_ok(&plain.cmd(&["SET", "plain", "1"])));

    // The coordinators come back: durable grants go through again (on whichever node they now name primary).
    coordinator(&cluster, 0).signal(libc::SIGCONT);
    coordinator(&cluster, 1).signal(libc::SIGCONT);
    wait_for("a durable grant on the primary the coordinators name", || {
        let Some(p) = primary_of(&cluster) else { return false };
        if lease_state(p) != "valid" {
            return false;
        }
        let mut c = durable_conn(p, 1500);
        matches!(c.try_cmd(&["LEASE", "d", "60000"]), Ok(Value::Integer(_)))
    });
}
