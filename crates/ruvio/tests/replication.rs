//! Replication and durable grants against real processes (issue 13): a primary, replicas, kill -9, SIGSTOP,
//! restarts, a damaged stream from a fake primary.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ruvio_protocol::Value;

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn err(v: &Value) -> String {
    match v {
        Value::Error(e) => String::from_utf8_lossy(e).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn replica_of(primary: &Server, dir: &std::path::Path, extra: &[&str]) -> Server {
    let r = start(dir, extra);
    assert!(is_ok(&r.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    r
}

/// Every key with its type, value (strings), lock holders (locks) and whether it has a deadline.
fn dump(s: &Server) -> BTreeMap<String, String> {
    let mut c = s.conn();
    let mut out = BTreeMap::new();
    let mut cursor = "0".to_string();
    loop {
        let Value::Array(reply) = c.cmd(&["SCAN", &cursor, "COUNT", "1000"]) else { panic!("SCAN") };
        cursor = bulk(&reply[0]).unwrap();
        let Value::Array(keys) = &reply[1] else { panic!("SCAN keys") };
        for k in keys {
            let k = bulk(k).unwrap();
            let ty = bulk(&c.cmd(&["TYPE", &k])).unwrap();
            let value = match ty.as_str() {
                "string" => bulk(&c.cmd(&["GET", &k])).unwrap_or_default(),
                "none" => continue,
                "hash" => {
                    let Value::Array(flat) = c.cmd(&["HGETALL", &k]) else { panic!("HGETALL") };
                    let mut pairs: Vec<(String, String)> = flat.chunks(2).map(|p| (bulk(&p[0]).unwrap(), bulk(&p[1]).unwrap())).collect();
                    pairs.sort();
                    format!("{pairs:?}")
                }
                _ => lock_holders(&c.cmd(&["LOCKINFO", &k])),
            };
            let ttl = int(&c.cmd(&["PTTL", &k])) > 0;
            out.insert(k, format!("{ty}|{value}|{ttl}"));
        }
        if cursor == "0" {
            return out;
        }
    }
}

/// A lock's kind, limit and holder tokens from LOCKINFO (remaining times differ between nodes by the moment asked).
fn lock_holders(v: &Value) -> String {
    let Value::Array(fields) = v else { panic!("LOCKINFO: {v:?}") };
    let Value::Array(holders) = &fields[5] else { panic!("LOCKINFO holders: {v:?}") };
    let tokens: Vec<i64> = holders
        .iter()
        .map(|h| match h {
            Value::Array(h) => int(&h[1]),
            other => panic!("holder {other:?}"),
        })
        .collect();
    format!("{}/{}/{tokens:?}", bulk(&fields[1]).unwrap(), int(&fields[3]))
}

fn same_data(primary: &Server, replica: &Server) {
    caught_up(primary, replica);
    let (p, r) = (dump(primary), dump(replica));
    assert_eq!(p.len(), r.len(), "key counts differ");
    assert_eq!(p, r);
}

#[test]
fn a_replica_syncs_follows_the_stream_and_refuses_writes() {
    let (pd, rd) = (temp_dir("repl-basic-p"), temp_dir("repl-basic-r"));
    let primary = start(&pd, &["--appendfsync", "always"]);
    let mut c = primary.conn();
    for i in 0..500 {
        assert!(is_ok(&c.cmd(&["SET", &format!("k{i}"), &format!("v{i}")])));
    }
    let token = int(&c.cmd(&["LEASE", "lock:a", "60000"]));
    int(&c.cmd(&["SEMAPHORE", "sem:a", "3", "60000"]));
    assert!(is_ok(&c.cmd(&["SET", "ttl:a", "x", "PX", "600000"])));
    assert_eq!(int(&c.cmd(&["IFGT", "fenced", &token.to_string(), "guarded"])), 1);
    assert_eq!(int(&c.cmd(&["HSET", "hash:a", "f1", "v1", "f2", "v2"])), 2);
    assert_eq!(bulk(&c.cmd(&["FUNCTION", "LOAD", &library("before")])).as_deref(), Some("before"));
    let replica = replica_of(&primary, &rd, &["--appendfsync", "always"]);
    same_data(&primary, &replica);
    assert_eq!(bulk(&c.cmd(&["FUNCTION", "LOAD", &library("after")])).as_deref(), Some("after"));
    // The stream after the snapshot.
    c.cmd(&["INCR", "counter"]);
    c.cmd(&["DEL", "k1"]);
    c.cmd(&["HSET", "hash:a", "f3", "v3"]);
    c.cmd(&["HINCRBYFLOAT", "hash:b", "x", "1.5"]);
    assert_eq!(int(&c.cmd(&["RELEASE", "lock:a", &token.to_string()])), 1);
    same_data(&primary, &replica);
    let mut rc = replica.conn();
    assert_eq!(bulk(&rc.cmd(&["GET", "counter"])).as_deref(), Some("1"));
    assert_eq!(err(&rc.cmd(&["SET", "x", "1"])), "READONLY You can't write against a read only replica.");
    assert!(err(&rc.cmd(&["LEASE", "lock:b", "1000"])).starts_with("READONLY"));
    // Function libraries come with the snapshot and the stream; a replica refuses to change them itself, as Redis
    // does (FUNCTION LOAD/DELETE/FLUSH/RESTORE are writes).
    for name in ["before_get", "after_get"] {
        assert_eq!(bulk(&rc.cmd(&["FCALL_RO", name, "1", "counter"])).as_deref(), Some("1"), "{name} on the replica");
    }
    assert!(err(&rc.cmd(&["FUNCTION", "LOAD", &library("mine")])).starts_with("READONLY"));
    assert!(err(&rc.cmd(&["FUNCTION", "DELETE", "after"])).starts_with("READONLY"));
    assert!(err(&rc.cmd(&["FUNCTION", "FLUSH"])).starts_with("READONLY"));
    assert_eq!(bulk(&rc.cmd(&["FCALL_RO", "after_get", "1", "counter"])).as_deref(), Some("1"), "still there");
    // ROLE and INFO as Redis clients read them.
    let Value::Array(role) = rc.cmd(&["ROLE"]) else { panic!() };
    assert_eq!(bulk(&role[0]).as_deref(), Some("slave"));
    assert_eq!(bulk(&role[3]).as_deref(), Some("connected"));
    let Value::Array(role) = c.cmd(&["ROLE"]) else { panic!() };
    assert_eq!(bulk(&role[0]).as_deref(), Some("master"));
    let Value::Array(replicas) = &role[2] else { panic!() };
    assert_eq!(replicas.len(), 1);
    assert_eq!(primary.info_in("replication", "connected_slaves"), "1");
    assert_eq!(replica.info_in("replication", "role"), "slave");
    assert_eq!(replica.info_in("replication", "master_link_status"), "up");
    // WAIT / WAITAOF as Redisson probes and uses them.
    c.cmd(&["SET", "w", "1"]);
    assert_eq!(int(&c.cmd(&["WAIT", "1", "5000"])), 1);
    assert_eq!(c.cmd(&["WAITAOF", "1", "1", "5000"]), Value::Array(vec![Value::Integer(1), Value::Integer(1)]));
    assert_eq!(int(&c.cmd(&["WAIT", "0", "0"])), 1);
    assert!(err(&rc.cmd(&["WAIT", "1", "10"])).starts_with("ERR WAIT cannot be used with replica instances"));
    // More replicas than exist: WAIT times out with the count reached.
    assert_eq!(int(&c.cmd(&["WAIT", "2", "50"])), 1);
    // min-replicas-to-write as in Redis (and its old name).
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "min-slaves-to-write", "2"])));
    assert_eq!(err(&c.cmd(&["SET", "guarded", "1"])), "NOREPLICAS Not enough good replicas to write.");
    assert_eq!(bulk(&c.cmd(&["GET", "w"])).as_deref(), Some("1"), "reads go on");
    assert!(is_ok(&c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"])));
    assert!(is_ok(&c.cmd(&["SET", "guarded", "1"])));
}

fn library(name: &str) -> String {
    format!("#!lua name={name}\nredis.register_function{{function_name='{name}_get', callback=function(keys) return redis.call('GET', keys[1]) end, flags={{'no-writes'}}}}")
}

/// Library names FUNCTION LIST shows, sorted.
fn libraries(s: &Server) -> Vec<String> {
    let Value::Array(libs) = s.conn().cmd(&["FUNCTION", "LIST"]) else { panic!("FUNCTION LIST") };
    let mut names: Vec<String> = libs
        .iter()
        .map(|l| {
            let Value::Array(fields) = l else { panic!("{l:?}") };
            bulk(&fields[1]).unwrap()
        })
        .collect();
    names.sort();
    names
}

/// Function libraries travel inside snapshots. They used to follow a snapshot as FUNCTION LOAD records: a replica
/// that compacted its log then logged them as records of its own (LSNs its primary had given to other records),
/// and a full sync kept libraries the primary did not have.
#[test]
fn function_libraries_travel_in_snapshots_and_a_replica_compacts_without_records_of_its_own() {
    let (pd, r1d, r2d) = (temp_dir("repl-fn-p"), temp_dir("repl-fn-r1"), temp_dir("repl-fn-r2"));
    let primary = start(&pd, &[]);
    let mut c = primary.conn();
    assert_eq!(bulk(&c.cmd(&["FUNCTION", "LOAD", &library("kept")])).as_deref(), Some("kept"));
    assert!(is_ok(&c.cmd(&["SET", "k", "1"])));
    let flags = ["--appendfsync", "always"];
    let mut r1 = replica_of(&primary, &r1d, &flags);
    caught_up(&primary, &r1);
    // A node with a library of its own becomes a replica: the snapshot's libraries replace it.
    let r2 = start(&r2d, &[]);
    assert_eq!(bulk(&r2.conn().cmd(&["FUNCTION", "LOAD", &library("stale")])).as_deref(), Some("stale"));
    assert!(is_ok(&r2.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    same_data(&primary, &r2);
    assert_eq!(libraries(&r2), ["kept"]);
    // The replica compacts its log, serves a read, and follows on.
    let before: u64 = r1.info_field("aof_rewrites").parse().unwrap();
    assert!(matches!(r1.conn().cmd(&["BGREWRITEAOF"]), Value::Simple(_) | Value::Bulk(_)));
    let t = Instant::now();
    while r1.info_field("aof_rewrite_in_progress") != "0" || r1.info_field("aof_rewrites").parse::<u64>().unwrap() <= before {
        assert!(t.elapsed() < Duration::from_secs(60), "the replica's rewrite did not finish: {}", r1.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(bulk(&r1.conn().cmd(&["GET", "k"])).as_deref(), Some("1"));
    for i in 0..20 {
        c.cmd(&["SET", &format!("after:{i}"), "v"]);
    }
    same_data(&primary, &r1);
    assert!(!r1.stderr().contains("of its own"), "replica stderr: {}", r1.stderr());
    assert_eq!(primary.info_in("replication", "full_syncs"), "2", "no new snapshot; primary stderr: {}", primary.stderr());
    // Restarted from its compacted files, it still has the library and resumes its history.
    r1.kill9();
    let r1 = start(&r1d, &[&flags[..], &["--replicaof", "127.0.0.1", &primary.port.to_string()]].concat());
    caught_up(&primary, &r1);
    assert_eq!(libraries(&r1), ["kept"]);
    assert_eq!(bulk(&r1.conn().cmd(&["FCALL_RO", "kept_get", "1", "k"])).as_deref(), Some("1"));
    assert_eq!(primary.info_in("replication", "partial_syncs"), "1");
}

/// WAIT and WAITAOF wait on the journal's durability: a WAIT with no replica is answered by the acknowledgement of
/// a replica that attaches later; WAITAOF counts only replicas with appendonly, WAIT counts them all.
#[test]
fn wait_is_woken_by_an_attaching_replica_and_waitaof_counts_only_appendonly_replicas() {
    let (pd, r1, r2) = (temp_dir("repl-wait-p"), temp_dir("repl-wait-r1"), temp_dir("repl-wait-r2"));
    let primary = start(&pd, &["--appendonly", "yes"]);
    let mut c = primary.conn();
    c.cmd(&["SET", "k", "1"]);
    let port = primary.port;
    let waiting = std::thread::spawn(move || int(&Conn::connect(port).cmd(&["WAIT", "1", "0"])));
    std::thread::sleep(Duration::from_millis(200));
    assert!(!waiting.is_finished(), "WAIT 1 0 with no replica waits");
    let plain = replica_of(&primary, &r1, &["--appendonly", "no"]);
    assert_eq!(waiting.join().unwrap(), 1, "woken by the replica's first acknowledgement");
    caught_up(&primary, &plain);
    c.cmd(&["SET", "k", "2"]);
    // The replica without appendonly received it but never fsyncs it: WAITAOF times out with [1, 0].
    assert_eq!(int(&c.cmd(&["WAIT", "1", "5000"])), 1);
    assert_eq!(c.cmd(&["WAITAOF", "1", "1", "300"]), Value::Array(vec![Value::Integer(1), Value::Integer(0)]));
    let durable = replica_of(&primary, &r2, &["--appendonly", "yes", "--appendfsync", "always"]);
    caught_up(&primary, &durable);
    assert_eq!(c.cmd(&["WAITAOF", "1", "1", "5000"]), Value::Array(vec![Value::Integer(1), Value::Integer(1)]));
    assert_eq!(int(&c.cmd(&["WAIT", "2", "5000"])), 2);
}

#[test]
fn a_replica_does_not_expire_keys_by_itself_but_reads_them_as_gone() {
    let (pd, rd) = (temp_dir("repl-expiry-p"), temp_dir("repl-expiry-r"));
    // hz 1 and a paused primary: only the replica's own clock could remove the key.
    let primary = start(&pd, &["--hz", "1"]);
    let replica = replica_of(&primary, &rd, &["--hz", "50"]);
    let mut c = primary.conn();
    assert!(is_ok(&c.cmd(&["SET", "short", "x", "PX", "300"])));
    caught_up(&primary, &replica);
    signal(&primary, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(600));
    let mut rc = replica.conn();
    assert_eq!(rc.cmd(&["GET", "short"]), Value::Nil, "an expired key reads as absent");
    assert_eq!(rc.cmd(&["DBSIZE"]), Value::Integer(1), "but the replica keeps it until the primary's DEL");
    signal(&primary, libc::SIGCONT);
    c.cmd(&["GET", "short"]); // the primary expires it on access and logs the DEL
    let start = Instant::now();
    while int(&rc.cmd(&["DBSIZE"])) != 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "the primary's DEL never reached the replica");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes SET/INCR/LEASE in a loop on the primary until `stop`.
fn load(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut c = Conn::connect(port);
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            c.cmd(&["SET", &format!("load:{}", n % 2000), &n.to_string()]);
            c.cmd(&["INCR", "load:counter"]);
            if n % 50 == 0 {
                c.cmd(&["LEASE", &format!("load:lock:{}", n % 20), "60000"]);
            }
            n += 1;
        }
        n
    })
}

#[test]
fn a_replica_killed_under_load_catches_up_and_resumes_from_its_log() {
    let (pd, rd) = (temp_dir("repl-kill-p"), temp_dir("repl-kill-r"));
    let primary = start(&pd, &["--repl-backlog-size", "64mb"]);
    let replica_flags = ["--appendfsync", "always"];
    let mut replica = replica_of(&primary, &rd, &replica_flags);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = load(primary.port, stop.clone());
    std::thread::sleep(Duration::from_millis(700));
    replica.kill9();
    std::thread::sleep(Duration::from_millis(300));
    let port = primary.port.to_string();
    let replica = start(&rd, &[&replica_flags[..], &["--replicaof", "127.0.0.1", &port]].concat());
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    assert!(writer.join().unwrap() > 100);
    same_data(&primary, &replica);
    // It resumed from the LSN its own log ended at: the backlog still held it.
    assert_eq!(primary.info_in("replication", "partial_syncs"), "1", "primary stderr: {}", primary.stderr());
}

/// Leases that end while `replica` is down (they outlive the kill by a moment on the primary), and writes the
/// primary makes meanwhile, before the leases end: the records a replica with a shifted LSN would skip.
fn leases_then_a_kill(primary: &Server, replica: &mut Server) -> u64 {
    let mut c = primary.conn();
    for i in 0..5 {
        assert!(int(&c.cmd(&["LEASE", &format!("short:{i}"), "400"])) > 0);
    }
    c.cmd(&["SET", "before", "kill"]);
    caught_up(primary, replica);
    let had = lsn(replica);
    replica.kill9();
    for i in 0..5 {
        assert!(is_ok(&c.cmd(&["SET", &format!("while-down:{i}"), "v"])));
    }
    // The leases end on the primary (it logs their ends) and in the replica's files (it is down).
    std::thread::sleep(Duration::from_millis(700));
    had
}

#[test]
fn a_replica_restarted_as_a_primary_and_pointed_back_takes_a_snapshot_and_misses_nothing() {
    let (pd, rd) = (temp_dir("repl-standalone-p"), temp_dir("repl-standalone-r"));
    let primary = start(&pd, &[]);
    let replica_flags = ["--appendfsync", "always"];
    let mut replica = replica_of(&primary, &rd, &replica_flags);
    leases_then_a_kill(&primary, &mut replica);
    // Restarted without `replicaof`, it is a primary: it removes the leases that expired while it was down, with
    // records of its own. Those must not take LSNs in its old primary's history.
    let replica = start(&rd, &replica_flags);
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    // On the old code it resumed past five of the primary's records (the SETs while it was down).
    same_data(&primary, &replica);
    assert!(replica.stderr().contains("begins a new replication history"), "replica stderr: {}", replica.stderr());
    assert_eq!(primary.info_in("replication", "full_syncs"), "2", "a new history cannot resume; primary stderr: {}", primary.stderr());
}

#[test]
fn a_replica_restarted_with_replicaof_writes_nothing_of_its_own() {
    let (pd, rd) = (temp_dir("repl-restart-own-p"), temp_dir("repl-restart-own-r"));
    let primary = start(&pd, &[]);
    let replica_flags = ["--appendfsync", "always", "--hz", "100"];
    let mut replica = replica_of(&primary, &rd, &replica_flags);
    let had = leases_then_a_kill(&primary, &mut replica);
    // Its primary does not answer yet: nothing may change the replica's data, though five of its leases have ended
    // by its clock (the lock timer once ran before the role was taken, and logged their ends as its own records).
    signal(&primary, libc::SIGSTOP);
    let replica = start(&rd, &[&replica_flags[..], &["--replicaof", "127.0.0.1", &primary.port.to_string()]].concat());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lsn(&replica), had, "replica stderr: {}", replica.stderr());
    assert_eq!(replica.conn().cmd(&["DBSIZE"]), Value::Integer(6), "the ended leases stay until the primary's records");
    signal(&primary, libc::SIGCONT);
    same_data(&primary, &replica);
    assert_eq!(primary.info_in("replication", "partial_syncs"), "1", "it resumes its history; primary stderr: {}", primary.stderr());
}

/// LOCKINFO on a replica after one semaphore slot ended (its primary paused, so no LOCKDROP came yet) pruned the
/// slot and logged the drop as a record of its own.
#[test]
fn lockinfo_on_a_replica_changes_nothing() {
    let (pd, rd) = (temp_dir("repl-lockinfo-p"), temp_dir("repl-lockinfo-r"));
    let primary = start(&pd, &[]);
    let replica = replica_of(&primary, &rd, &["--appendfsync", "always"]);
    let mut c = primary.conn();
    int(&c.cmd(&["SEMAPHORE", "sem", "2", "300"]));
    let long = int(&c.cmd(&["SEMAPHORE", "sem", "2", "60000"]));
    caught_up(&primary, &replica);
    let had = lsn(&replica);
    signal(&primary, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(500));
    let info = replica.conn().cmd(&["LOCKINFO", "sem"]);
    assert_eq!(lock_holders(&info), format!("semaphore/2/[{long}]"), "the ended slot is not shown");
    assert_eq!(lsn(&replica), had, "a read changed the replica; stderr: {}", replica.stderr());
    signal(&primary, libc::SIGCONT);
    c.cmd(&["SET", "after", "1"]);
    same_data(&primary, &replica);
    assert!(!replica.stderr().contains("of its own"), "replica stderr: {}", replica.stderr());
}

/// A durable grant that times out after its primary was demoted is not undone there: the undo would be a record of
/// the replica's own (only its new primary's records may change it).
#[test]
fn a_durable_grant_timing_out_after_a_demotion_is_not_undone_on_the_replica() {
    let (pd, rd) = (temp_dir("repl-demoted-p"), temp_dir("repl-demoted-r"));
    let primary = start(&pd, &["--durability-timeout", "1500"]);
    // The replica applies the grant but never reports it fsynced, so the grant waits out its timeout.
    let replica = replica_of(&primary, &rd, &["--appendfsync", "no"]);
    caught_up(&primary, &replica);
    let port = primary.port;
    let waiting = std::thread::spawn(move || {
        let mut c = Conn::connect(port);
        assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
        c.cmd(&["LEASE", "demoted", "60000"])
    });
    let start_wait = Instant::now();
    while replica.conn().cmd(&["EXISTS", "demoted"]) != Value::Integer(1) {
        assert!(start_wait.elapsed() < Duration::from_secs(10), "the grant never reached the replica");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A switch while the grant waits: the replica is promoted (with the grant) and the old primary follows it.
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "NO", "ONE"])));
    assert!(is_ok(&primary.conn().cmd(&["REPLICAOF", "127.0.0.1", &replica.port.to_string()])));
    caught_up(&replica, &primary);
    let reply = waiting.join().unwrap();
    assert!(err(&reply).starts_with("NOTDURABLE"), "{reply:?}");
    replica.conn().cmd(&["SET", "after", "1"]);
    same_data(&replica, &primary);
    assert!(!primary.stderr().contains("of its own"), "stderr: {}", primary.stderr());
}

#[test]
fn after_a_primary_restart_its_replicas_resume_without_a_new_snapshot() {
    let (pd, r1d, r2d) = (temp_dir("repl-prestart-p"), temp_dir("repl-prestart-r1"), temp_dir("repl-prestart-r2"));
    let mut primary = start(&pd, &["--appendfsync", "always"]);
    let r1 = replica_of(&primary, &r1d, &[]);
    let r2 = replica_of(&primary, &r2d, &["--appendfsync", "always"]);
    let mut c = primary.conn();
    for i in 0..300 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    caught_up(&primary, &r1);
    caught_up(&primary, &r2);
    let port = primary.port;
    primary.kill9();
    let primary = start_on(port, &pd, &["--appendfsync", "always"]);
    caught_up(&primary, &r1);
    caught_up(&primary, &r2);
    assert_eq!(primary.info_in("replication", "full_syncs"), "0", "primary stderr: {}", primary.stderr());
    assert_eq!(primary.info_in("replication", "partial_syncs"), "2");
    primary.conn().cmd(&["SET", "after", "restart"]);
    same_data(&primary, &r1);
    same_data(&primary, &r2);
}

#[test]
fn a_replica_paused_past_the_backlog_takes_a_new_snapshot() {
    let (pd, rd) = (temp_dir("repl-lag-p"), temp_dir("repl-lag-r"));
    let primary = start(&pd, &["--repl-backlog-size", "16kb"]);
    let replica = replica_of(&primary, &rd, &[]);
    caught_up(&primary, &replica);
    signal(&replica, libc::SIGSTOP);
    let mut c = primary.conn();
    // More than the socket buffers between the two can hold, so the primary's cursor must fall behind the backlog.
    let value = "x".repeat(10_000);
    for i in 0..3000 {
        c.cmd(&["SET", &format!("big:{}", i % 500), &value]);
    }
    signal(&replica, libc::SIGCONT);
    same_data(&primary, &replica);
    let full: u64 = primary.info_in("replication", "full_syncs").parse().unwrap();
    assert!(full >= 2, "expected a second full sync, got {full}; primary stderr: {}", primary.stderr());
}

#[test]
fn durable_connections_wait_for_replicas_and_undo_grants_they_cannot_make_durable() {
    let (pd, rd) = (temp_dir("repl-durable-p"), temp_dir("repl-durable-r"));
    let primary = start(&pd, &["--appendfsync", "everysec", "--durability-timeout", "2000"]);
    let replica = replica_of(&primary, &rd, &["--appendfsync", "always"]);
    caught_up(&primary, &replica);
    let mut c = primary.conn();
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    assert_eq!(c.cmd(&["CLIENT", "DURABILITY"]), Value::Array(vec![Value::bulk(bytes::Bytes::from_static(b"replicas")), Value::Integer(1)]));
    // Acknowledged durable grant: the replica holds it on disk when the answer comes.
    let token = int(&c.cmd(&["LEASE", "durable:1", "60000"]));
    assert!(is_ok(&c.cmd(&["SET", "durable:k", "v"])));
    // More replicas than are connected: refused at once, nothing applied.
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "2"])));
    assert_eq!(err(&c.cmd(&["SET", "durable:two", "v"])), "NOREPLICAS Not enough good replicas to write.");
    assert_eq!(c.cmd(&["EXISTS", "durable:two"]), Value::Integer(0));
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    // Every replica paused: no answer before the timeout, then NOTDURABLE, and the lock is free again. Meanwhile a
    // connection without durability is answered as usual.
    signal(&replica, libc::SIGSTOP);
    let port = primary.port;
    let waiting = std::thread::spawn(move || {
        let mut c = Conn::connect(port);
        assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
        let started = Instant::now();
        let reply = c.cmd(&["LEASE", "durable:2", "60000"]);
        (reply, started.elapsed())
    });
    let mut plain = primary.conn();
    // Once the durable LEASE is waiting (a blocked client), the plain connection writes.
    let started = Instant::now();
    while primary.info_in("clients", "blocked_clients") == "0" {
        assert!(started.elapsed() < Duration::from_secs(30), "the durable LEASE never waited");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(is_ok(&plain.cmd(&["SET", "plain:during", "1"])));
    assert!(!waiting.is_finished(), "the durable grant was answered while every replica was paused");
    let (reply, waited) = waiting.join().unwrap();
    signal(&replica, libc::SIGCONT);
    assert!(err(&reply).starts_with("NOTDURABLE the grant was not acknowledged"), "{reply:?}");
    assert!(waited >= Duration::from_millis(2000), "answered after {waited:?}, before the timeout");
    let mut other = primary.conn();
    assert_eq!(other.cmd(&["LOCKINFO", "durable:2"]), Value::Nil, "the undone grant must not hold the lock");
    assert!(int(&other.cmd(&["LEASE", "durable:2", "1000"])) > token);
    // A plain write that could not be made durable stays applied, and the error says so.
    signal(&replica, libc::SIGSTOP);
    let reply = c.cmd(&["SET", "durable:3", "v"]);
    signal(&replica, libc::SIGCONT);
    assert!(err(&reply).starts_with("NOTDURABLE the write was applied here"), "{reply:?}");
    assert_eq!(bulk(&other.cmd(&["GET", "durable:3"])).as_deref(), Some("v"));
    // Other connections are not slowed down by a durable one waiting.
    same_data(&primary, &replica);
}

#[test]
fn acknowledged_durable_grants_survive_kill9_of_every_node() {
    let (pd, r1d, r2d) = (temp_dir("repl-kill-all-p"), temp_dir("repl-kill-all-r1"), temp_dir("repl-kill-all-r2"));
    let mut primary = start(&pd, &["--appendfsync", "always"]);
    let mut r1 = replica_of(&primary, &r1d, &["--appendfsync", "always"]);
    let mut r2 = replica_of(&primary, &r2d, &["--appendfsync", "always"]);
    caught_up(&primary, &r1);
    caught_up(&primary, &r2);
    let mut c = primary.conn();
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    let mut granted = Vec::new();
    for i in 0..100 {
        let key = format!("grant:{i}");
        granted.push((key.clone(), int(&c.cmd(&["LEASE", &key, "600000"]))));
    }
    primary.kill9();
    r1.kill9();
    r2.kill9();
    let r1 = start(&r1d, &[]);
    let r2 = start(&r2d, &[]);
    for (key, token) in granted {
        let holders: Vec<String> = [&r1, &r2].iter().map(|r| format!("{:?}", r.conn().cmd(&["LOCKINFO", &key]))).collect();
        let held = holders.iter().filter(|h| h.contains(&token.to_string())).count();
        assert!(held >= 1, "{key} (token {token}) is on no replica: {holders:?}");
    }
}

#[test]
fn promotion_raises_the_epoch_so_tokens_keep_growing() {
    let (pd, rd) = (temp_dir("repl-promote-p"), temp_dir("repl-promote-r"));
    let mut primary = start(&pd, &[]);
    let replica = replica_of(&primary, &rd, &["--appendfsync", "always", "--coordinator-pass", COORD_PASS]);
    let mut c = primary.conn();
    let mut last = 0;
    for i in 0..50 {
        last = last.max(int(&c.cmd(&["LEASE", &format!("l{i}"), "60000"])));
    }
    caught_up(&primary, &replica);
    primary.kill9();
    let mut rc = replica.conn();
    let epoch: u64 = replica.info_in("replication", "ruvio_epoch").parse().unwrap();
    assert!(is_ok(&rc.cmd(&["REPLICAOF", "NO", "ONE"])));
    assert_eq!(replica.info_in("replication", "role"), "master");
    assert_eq!(replica.info_in("replication", "ruvio_epoch").parse::<u64>().unwrap(), epoch + 1);
    // The old holders are still there (replicated), and new tokens exceed every token of the old primary.
    assert_eq!(rc.cmd(&["LEASE", "l0", "1000"]), Value::Nil);
    let t = int(&rc.cmd(&["LEASE", "fresh", "60000"]));
    assert!(t > last, "token {t} after promotion is not above {last}");
    assert_eq!(crate_epoch(t), epoch + 1);
    // Promises: an older epoch is refused, the promise is kept across a restart.
    let mut rco = replica.conn();
    assert!(is_ok(&rco.cmd(&["AUTH", "coordinator", COORD_PASS])));
    assert!(err(&rco.cmd(&["REPLICATION", "PROMISE", &epoch.to_string()])).starts_with("ERR epoch"));
    let Value::Array(p) = rco.cmd(&["REPLICATION", "PROMISE", &(epoch + 5).to_string()]) else { panic!() };
    assert_eq!(int(&p[0]) as u64, epoch + 5);
    drop(rc);
    drop(rco);
    let mut replica = replica;
    replica.stop();
    let again = start(&rd, &[]);
    assert_eq!(again.info_in("replication", "ruvio_promised_epoch").parse::<u64>().unwrap(), epoch + 5);
}

fn crate_epoch(token: i64) -> u64 {
    (token >> 53) as u64
}

/// A fake primary that answers PSYNC with `+CONTINUE` and then the given bytes.
fn fake_primary(listener: &TcpListener, send: &[u8]) -> String {
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(2).filter(|w| w == b"\r\n").count().ge(&12) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let replid = text.split("\r\n").nth(4).unwrap().to_string();
    s.write_all(format!("+CONTINUE {replid} 0\r\n").as_bytes()).unwrap();
    s.write_all(send).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    text
}

/// One framed record as the journal writes it.
fn record(lsn: u64, args: &[&str], corrupt: bool) -> Vec<u8> {
    let mut payload = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        payload.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    let mut rec = vec![0u8; 29];
    rec[8..16].copy_from_slice(&lsn.to_le_bytes());
    rec[16..24].copy_from_slice(&1_800_000_000_000i64.to_le_bytes());
    rec[28] = 0; // a command record
    rec.extend_from_slice(&payload);
    let len = (rec.len() - 29) as u32;
    rec[0..4].copy_from_slice(&len.to_le_bytes());
    let mut crc = crc32fast::hash(&rec[8..]);
    if corrupt {
        crc ^= 1;
    }
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
    rec
}

#[test]
fn a_damaged_or_out_of_order_stream_is_refused_with_a_clear_message() {
    let rd = temp_dir("repl-damaged-r");
    let replica = start(&rd, &[]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut rc = replica.conn();
    assert!(is_ok(&rc.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()])));
    // First link: one good record, then one whose checksum fails.
    let mut stream = record(1, &["SET", "good", "1"], false);
    stream.extend(record(2, &["SET", "bad", "1"], true));
    let psync = fake_primary(&listener, &stream);
    assert!(psync.contains("PSYNC"));
    // Second link (the replica retried): a record that skips LSNs.
    fake_primary(&listener, &record(7, &["SET", "skipped", "1"], false));
    let log = replica.stderr();
    assert!(log.contains("fails its checksum"), "{log}");
    assert!(log.contains("record 7 where 2 was expected"), "{log}");
    assert_eq!(bulk(&rc.cmd(&["GET", "good"])).as_deref(), Some("1"));
    assert_eq!(rc.cmd(&["GET", "bad"]), Value::Nil);
    assert_eq!(rc.cmd(&["GET", "skipped"]), Value::Nil);
}

#[test]
fn after_a_promotion_the_other_replicas_continue_from_the_new_primary_without_a_snapshot() {
    let (pd, r1d, r2d) = (temp_dir("repl-switch-p"), temp_dir("repl-switch-r1"), temp_dir("repl-switch-r2"));
    let mut primary = start(&pd, &[]);
    let r1 = replica_of(&primary, &r1d, &["--appendfsync", "always"]);
    let r2 = replica_of(&primary, &r2d, &["--appendfsync", "always"]);
    let mut c = primary.conn();
    for i in 0..200 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    c.cmd(&["LEASE", "held", "60000"]);
    caught_up(&primary, &r1);
    caught_up(&primary, &r2);
    primary.kill9();
    assert!(is_ok(&r1.conn().cmd(&["REPLICAOF", "NO", "ONE"])));
    assert!(is_ok(&r2.conn().cmd(&["REPLICAOF", "127.0.0.1", &r1.port.to_string()])));
    r1.conn().cmd(&["SET", "after", "failover"]);
    same_data(&r1, &r2);
    assert_eq!(r1.info_in("replication", "full_syncs"), "0", "new primary stderr: {}", r1.stderr());
    assert_eq!(r1.info_in("replication", "partial_syncs"), "1");
    assert_eq!(r2.info_in("replication", "ruvio_epoch"), r1.info_in("replication", "ruvio_epoch"));
}

#[test]
fn a_replica_that_promised_a_newer_epoch_refuses_an_older_primary() {
    let (pd, rd) = (temp_dir("repl-promise-p"), temp_dir("repl-promise-r"));
    let primary = start(&pd, &[]);
    let replica = start(&rd, &["--coordinator-pass", COORD_PASS]);
    let mut rc = replica.conn();
    assert!(is_ok(&rc.cmd(&["AUTH", "coordinator", COORD_PASS])));
    let Value::Array(p) = rc.cmd(&["REPLICATION", "PROMISE", "3"]) else { panic!("PROMISE") };
    assert_eq!(int(&p[0]), 3);
    primary.conn().cmd(&["SET", "k", "v"]);
    assert!(is_ok(&rc.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    let started = Instant::now();
    while !replica.stderr().contains("older than the replica's 3") {
        assert!(started.elapsed() < Duration::from_secs(30), "no refusal logged: {}", replica.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(replica.info_in("replication", "master_link_status"), "down");
    assert_eq!(replica.conn().cmd(&["GET", "k"]), Value::Nil, "nothing of the older primary was applied");
}

/// A fake primary that answers PSYNC with `+FULLRESYNC`, announcing a snapshot of LSN `lsn`, sends `snapshot` as
/// that snapshot, and waits (bounded) until the replica drops the link.
fn fake_full_sync(listener: &TcpListener, lsn: u64, snapshot: &[u8]) {
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.windows(2).filter(|w| w == b"\r\n").count() < 12 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).contains("PSYNC"));
    s.write_all(format!("+FULLRESYNC {} {lsn} 0\r\n${}\r\n", "f".repeat(40), snapshot.len()).as_bytes()).unwrap();
    s.write_all(snapshot).unwrap();
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
    }
}

/// Issue 34, item 19: a replica checks the snapshot it is sent completely before it empties its memory. After a
/// garbage snapshot, and after a real one cut short (every key record good, the end missing), it keeps serving the
/// data it had; its files still describe that data, so a restart brings back exactly it (no key it had deleted).
#[test]
fn a_replica_keeps_its_data_when_the_snapshot_it_is_sent_is_damaged() {
    let (pd, rd) = (temp_dir("repl-badsnap-p"), temp_dir("repl-badsnap-r"));
    // A real snapshot of another data set, to cut short.
    let primary = start(&pd, &[]);
    let mut pc = primary.conn();
    for i in 0..300 {
        assert!(is_ok(&pc.cmd(&["SET", &format!("p:{i}"), "from the other primary"])));
    }
    assert!(is_ok(&pc.cmd(&["SAVE"])));
    let base = std::fs::read_dir(&pd).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).find(|p| p.extension().is_some_and(|e| e == "base")).expect("a snapshot file");
    let snapshot = std::fs::read(&base).unwrap();
    let snap_lsn = u64::from_le_bytes(snapshot[12..20].try_into().unwrap());
    let cut = &snapshot[..snapshot.len() - 40];

    let mut replica = start(&rd, &[]);
    let mut rc = replica.conn();
    for i in 0..100 {
        assert!(is_ok(&rc.cmd(&["SET", &format!("r:{i}"), &format!("v{i}")])));
    }
    for i in 0..10 {
        assert_eq!(rc.cmd(&["DEL", &format!("r:{i}")]), Value::Integer(1));
    }
    rc.cmd(&["LEASE", "r:lock", "600000"]);
    let before = dump(&replica);
    assert_eq!(before.len(), 91);

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(is_ok(&rc.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()])));
    let garbage: Vec<u8> = (0..100_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    for (what, lsn, bytes) in [("garbage", 7, &garbage[..]), ("a snapshot cut short", snap_lsn, cut)] {
        // Returns once the replica dropped the link: it has dealt with the snapshot.
        fake_full_sync(&listener, lsn, bytes);
        assert_eq!(dump(&replica), before, "{what}: the replica must keep serving its data");
        assert_eq!(rc.cmd(&["EXISTS", "p:0"]), Value::Integer(0), "{what}: nothing of the bad snapshot may be loaded");
        assert!(replica.stderr().contains("refused the primary's snapshot"), "{what}: no refusal logged: {}", replica.stderr());
        assert!(!rd.join("replica-sync-from-primary.tmp").exists(), "{what}: the refused snapshot is left on disk");
    }
    let log = replica.stderr();
    assert!(log.contains("no end marker") || log.contains("damaged"), "{log}");
    // Its files still describe its data: a restart (kill -9) brings back the same keys, none it had deleted.
    assert!(is_ok(&rc.cmd(&["REPLICAOF", "NO", "ONE"])));
    drop(rc);
    replica.kill9();
    let replica = start(&rd, &[]);
    assert_eq!(dump(&replica), before, "after a restart");
}

/// Issue 34, item 20: a client that asks for a full sync and never reads does not pin a snapshot file: the file is
/// unlinked as soon as its transfer starts, and a transfer that makes no progress for `repl-timeout` ends.
#[test]
fn a_full_sync_nobody_reads_ends_after_repl_timeout_and_leaves_no_file() {
    let pd = temp_dir("repl-stalled-sync");
    let primary = start(&pd, &[]);
    let mut c = primary.conn();
    // Checked below, after the file: a server without repl-timeout fails first on the file it pins.
    let set_timeout = c.cmd(&["CONFIG", "SET", "repl-timeout", "2"]);
    // About 24 MB: far more than the socket buffers between the two ends hold.
    let value = "x".repeat(100_000);
    for i in 0..240 {
        c.send(&["SET", &format!("big:{i}"), &value]).unwrap();
    }
    for _ in 0..240 {
        assert!(is_ok(&c.read_reply().unwrap()));
    }
    let mut stalled = std::net::TcpStream::connect(("127.0.0.1", primary.port)).unwrap();
    stalled.write_all(b"*6\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$1\r\n1\r\n$1\r\n0\r\n$1\r\n0\r\n$1\r\n0\r\n").unwrap();
    let started = Instant::now();
    while !primary.info_in("replication", "slave0").contains("state=send_bulk") {
        assert!(started.elapsed() < Duration::from_secs(60), "the full sync never started sending");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let tmp_files = || -> Vec<String> {
        std::fs::read_dir(&pd).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("replica-sync")).collect()
    };
    assert_eq!(tmp_files(), Vec::<String>::new(), "a snapshot file stays on disk while nobody reads it");
    assert!(is_ok(&set_timeout), "{set_timeout:?}");
    let Value::Array(got) = c.cmd(&["CONFIG", "GET", "repl-timeout"]) else { panic!("CONFIG GET") };
    assert_eq!(bulk(&got[1]).as_deref(), Some("2"));
    // No progress for repl-timeout: the primary drops the link and the open file with it.
    let started = Instant::now();
    while primary.info_in("replication", "connected_slaves") != "0" {
        assert!(started.elapsed() < Duration::from_secs(20), "the stalled full sync was never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", primary.child.id()))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p.contains("replica-sync"))
        .collect();
    assert!(fds.is_empty(), "the primary still holds the snapshot open: {fds:?}");
    // The peer sees the link end before the whole snapshot arrived.
    stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match stalled.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let header_end = got.windows(2).enumerate().filter(|(_, w)| *w == b"\r\n").nth(1).map(|(i, _)| i + 2).expect("the FULLRESYNC header");
    let header = String::from_utf8_lossy(&got[..header_end]).into_owned();
    let size: usize = header.lines().nth(1).and_then(|l| l.strip_prefix('$')).and_then(|s| s.trim().parse().ok()).expect("a size line");
    assert!(got.len() - header_end < size, "the whole snapshot arrived ({size} bytes): the transfer was never cut");
    // The primary goes on serving.
    assert!(is_ok(&c.cmd(&["SET", "after", "1"])));
}
