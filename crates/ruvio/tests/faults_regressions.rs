//! Server bugs found by the fault suite (faults/, docs/faults.md), each with the smallest reproduction.

mod common;

use std::time::{Duration, Instant};

use common::*;

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A replica restarted (with `--replicaof`) after one of its keys expired while it was down used to remove that key
/// at start-up and log a DEL of its own: one record its primary never wrote, so its log ended one LSN further than
/// the primary's stream and it resumed one record too far, losing the primary's next write for good (the fault
/// suite saw an acknowledged durable HSET missing after a replica was killed and later promoted).
#[test]
fn a_replica_restarted_after_a_key_expired_keeps_every_write_of_its_primary() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let p = start(&temp_dir("fr-primary"), &aof);
    let rdir = temp_dir("fr-replica");
    let follow = format!("127.0.0.1 {}", p.port);
    let mut args: Vec<&str> = aof.to_vec();
    args.extend(["--replicaof", &follow]);
    let mut r = start(&rdir, &args);
    let rport = r.port;
    let mut c = p.conn();
    assert!(is_ok(&c.cmd(&["SET", "short", "x", "PX", "1500"])));
    assert!(is_ok(&c.cmd(&["SET", "a", "1"])));
    wait_for("the replica has a", Duration::from_secs(30), || bulk(&r.conn().cmd(&["GET", "a"])).as_deref() == Some("1"));

    // The replica dies; the primary writes b (its next record), then "short" expires everywhere.
    r.kill9();
    assert!(is_ok(&c.cmd(&["SET", "b", "2"])));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(bulk(&c.cmd(&["GET", "short"])), None);

    // Restarted with its own log: it must resume exactly where it stopped and get b.
    let r = start_on(rport, &rdir, &args);
    wait_for("the replica has b", Duration::from_secs(30), || bulk(&r.conn().cmd(&["GET", "b"])).as_deref() == Some("2"));
    assert_eq!(bulk(&r.conn().cmd(&["GET", "a"])).as_deref(), Some("1"));
    assert_eq!(bulk(&r.conn().cmd(&["GET", "short"])), None);
}

/// libfaketime, installed by scripts/test.sh (the fault suite's clock nemesis uses it too); missing is a failure.
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// A replica whose wall clock runs 600 s ahead (its monotonic clock untouched, as after a clock step) used to turn
/// the primary's lock deadlines into already-passed instants, so once promoted it granted leases that were still
/// held (the 60-minute fault run: two holders of one durable lease after a clock jump on the promoted replica). Lock
/// deadlines from the stream and from a full sync now keep the time they had left on the primary.
#[test]
fn a_replica_with_a_clock_ahead_keeps_the_primarys_leases_held_after_promotion() {
    assert!(std::path::Path::new(FAKETIME).exists(), "{FAKETIME} is missing: scripts/test.sh installs Debian's faketime");
    let p = start(&temp_dir("fr-clock-primary"), &[]);
    let mut pc = p.conn();
    let before = pc.cmd(&["LEASE", "clock:snapshot", "60000"]);
    assert!(matches!(before, ruvio_protocol::Value::Integer(_)), "{before:?}");
    let sem = pc.cmd(&["SEMAPHORE", "clock:sem", "1", "60000"]);
    assert!(matches!(sem, ruvio_protocol::Value::Bulk(_) | ruvio_protocol::Value::Integer(_)), "{sem:?}");

    let rdir = temp_dir("fr-clock-replica");
    let port = free_port();
    let clock_file = rdir.join("faketime");
    std::fs::write(&clock_file, "+600s\n").unwrap();
    let stderr_path = rdir.join("stderr.log");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ruvio"))
        .args(["--port", &port.to_string(), "--dir", rdir.to_str().unwrap(), "--replicaof", &format!("127.0.0.1 {}", p.port)])
        .env("LD_PRELOAD", FAKETIME)
        .env("FAKETIME_TIMESTAMP_FILE", &clock_file)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("spawning ruvio under libfaketime");
    let r = Server { child, port, dir: rdir.clone(), stderr_path };
    r.wait_ready(Duration::from_secs(60));
    let mut rc = r.conn();
    let ahead = match rc.cmd(&["TIME"]) {
        ruvio_protocol::Value::Array(t) => match &t[0] {
            ruvio_protocol::Value::Bulk(b) => String::from_utf8_lossy(b).parse::<i64>().unwrap(),
            other => panic!("TIME: {other:?}"),
        },
        other => panic!("TIME: {other:?}"),
    } - std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(ahead >= 590, "the replica's clock runs {ahead} s ahead, not 600: libfaketime did not take");
    // One lease reaches the replica in the full sync's snapshot, one in the stream.
    wait_for("the replica synced", Duration::from_secs(30), || r.info_in("replication", "master_link_status") == "up");
    assert!(matches!(pc.cmd(&["LEASE", "clock:stream", "60000"]), ruvio_protocol::Value::Integer(_)));
    let lsn = p.info_in("replication", "ruvio_lsn");
    wait_for("the replica caught up", Duration::from_secs(30), || r.info_in("replication", "ruvio_lsn") == lsn);
    assert!(is_ok(&rc.cmd(&["REPLICAOF", "NO", "ONE"])));
    for key in ["clock:snapshot", "clock:stream"] {
        assert_eq!(rc.cmd(&["LEASE", key, "1000"]), ruvio_protocol::Value::Nil, "{key} is still held: the promoted replica must not grant it");
    }
    assert_eq!(rc.cmd(&["SEMAPHORE", "clock:sem", "1", "1000"]), ruvio_protocol::Value::Nil, "the semaphore's one slot is still taken");
}
