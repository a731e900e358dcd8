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
