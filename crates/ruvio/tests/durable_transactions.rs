//! `CLIENT DURABILITY REPLICAS n` for MULTI/EXEC and scripts (issue 34, items 16 and 17): the same rule as a single
//! write. Too few replicas: refused before anything runs. Otherwise answered once n replicas fsynced what the
//! transaction or script logged; if they do not in `durability-timeout`, its lock grants are undone (the lock is
//! free again, nobody holds it) and the reply is NOTDURABLE. Against a real primary and replica.

mod common;

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

fn connected_replicas(primary: &Server) -> u64 {
    primary.info_in("replication", "connected_slaves").parse().unwrap()
}

/// A primary (everysec, so only durable connections wait for fsyncs) and one replica under `always`.
fn pair(name: &str, timeout_ms: &str) -> (Server, Server, std::path::PathBuf) {
    let (pd, rd) = (temp_dir(&format!("{name}-p")), temp_dir(&format!("{name}-r")));
    let primary = start(&pd, &["--appendfsync", "everysec", "--durability-timeout", timeout_ms]);
    let replica = start(&rd, &["--appendfsync", "always"]);
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    caught_up(&primary, &replica);
    (primary, replica, rd)
}

fn durable(primary: &Server) -> Conn {
    let mut c = primary.conn();
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    c
}

fn transaction(c: &mut Conn, lock: &str, data: &str) -> (Vec<Value>, Value) {
    assert!(is_ok(&c.cmd(&["MULTI"])));
    let queued = vec![c.cmd(&["LEASE", lock, "60000"]), c.cmd(&["SET", data, "v"])];
    (queued, c.cmd(&["EXEC"]))
}

fn holders(c: &mut Conn, key: &str) -> Value {
    c.cmd(&["LOCKINFO", key])
}

/// The holder tokens of a LOCKINFO reply (remaining times differ between nodes by the moment asked).
fn tokens_of(v: &Value) -> Vec<i64> {
    let Value::Array(fields) = v else { return Vec::new() };
    let Value::Array(hs) = &fields[5] else { panic!("LOCKINFO {fields:?}") };
    hs.iter()
        .map(|h| match h {
            Value::Array(h) => int(&h[1]),
            other => panic!("holder {other:?}"),
        })
        .collect()
}

#[test]
fn exec_on_a_durable_connection_obeys_the_single_write_rule() {
    let (primary, mut replica, rd) = pair("dtx", "1500");
    let mut c = durable(&primary);
    let mut other = primary.conn();

    // Acknowledged: EXEC answers once the replica has the transaction (it holds the grant when the answer comes).
    let (queued, reply) = transaction(&mut c, "tx:ok", "tx:ok:data");
    assert_eq!(queued, vec![Value::Simple("QUEUED".into()), Value::Simple("QUEUED".into())]);
    let Value::Array(r) = reply else { panic!("EXEC: {reply:?}") };
    let token = int(&r[0]);
    let on_replica = format!("{:?}", replica.conn().cmd(&["LOCKINFO", "tx:ok"]));
    assert!(on_replica.contains(&token.to_string()), "the replica lacks the acknowledged grant: {on_replica}");

    // The replica paused: EXEC is not answered before the timeout, then NOTDURABLE; the transaction's grant is
    // undone (a second client gets the lock), its other write stays applied.
    signal(&replica, libc::SIGSTOP);
    let started = Instant::now();
    let (_, reply) = transaction(&mut c, "tx:lock", "tx:data");
    let waited = started.elapsed();
    signal(&replica, libc::SIGCONT);
    let text = err(&reply);
    assert!(text.starts_with("NOTDURABLE the transaction or script was not acknowledged"), "{text}");
    assert!(text.contains("1 lock grant(s) were undone"), "{text}");
    assert!(waited >= Duration::from_millis(1500), "answered after {waited:?}, before the timeout");
    assert_eq!(holders(&mut other, "tx:lock"), Value::Nil, "the undone grant must not hold the lock");
    assert!(int(&other.cmd(&["LEASE", "tx:lock", "60000"])) > token, "a second client must get the freed lock");
    assert_eq!(bulk(&other.cmd(&["GET", "tx:data"])).as_deref(), Some("v"));
    caught_up(&primary, &replica);
    assert_eq!(tokens_of(&holders(&mut replica.conn(), "tx:lock")), tokens_of(&holders(&mut other, "tx:lock")), "the replica dropped the undone grant too");

    // A transaction that only reads waits for nothing, even with the replica paused.
    signal(&replica, libc::SIGSTOP);
    assert!(is_ok(&c.cmd(&["MULTI"])));
    c.cmd(&["GET", "tx:data"]);
    let started = Instant::now();
    assert_eq!(c.cmd(&["EXEC"]), Value::Array(vec![Value::bulk(bytes::Bytes::from_static(b"v"))]));
    assert!(started.elapsed() < Duration::from_millis(1000), "a read-only EXEC waited {:?}", started.elapsed());
    signal(&replica, libc::SIGCONT);

    // The replica gone: queued writes are refused at once and EXEC aborts; nothing happened.
    replica.kill9();
    let started = Instant::now();
    while connected_replicas(&primary) > 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the primary still counts the killed replica");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (queued, reply) = transaction(&mut c, "tx:gone", "tx:gone:data");
    assert_eq!(err(&queued[0]), "NOREPLICAS Not enough good replicas to write.");
    assert_eq!(err(&reply), "EXECABORT Transaction discarded because of previous errors.");
    assert_eq!(other.cmd(&["EXISTS", "tx:gone", "tx:gone:data"]), Value::Integer(0));
    assert!(int(&other.cmd(&["LEASE", "tx:gone", "60000"])) > 0, "the lock was never taken");

    // The replica leaves between MULTI and EXEC: EXEC refuses the whole transaction before it runs.
    let replica = start(&rd, &["--appendfsync", "always"]);
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    caught_up(&primary, &replica);
    let mut replica = replica;
    assert!(is_ok(&c.cmd(&["MULTI"])));
    assert_eq!(c.cmd(&["LEASE", "tx:late", "60000"]), Value::Simple("QUEUED".into()));
    replica.kill9();
    let started = Instant::now();
    while connected_replicas(&primary) > 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the primary still counts the killed replica");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(err(&c.cmd(&["EXEC"])), "EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.");
    assert_eq!(other.cmd(&["EXISTS", "tx:late"]), Value::Integer(0));
}

#[test]
fn a_grant_in_a_script_on_a_durable_connection_is_undone_when_not_acknowledged() {
    let (primary, mut replica, _rd) = pair("dscript", "1500");
    let mut c = durable(&primary);
    let mut other = primary.conn();
    assert!(matches!(
        c.cmd(&["FUNCTION", "LOAD", "#!lua name=locks\nredis.register_function('grab', function(keys, args) return redis.call('LEASE', keys[1], 60000) end)"]),
        Value::Bulk(_)
    ));
    let lease = "return redis.call('LEASE', KEYS[1], 60000)";

    // Acknowledged: the token (a string in scripts) of a lock the replica holds.
    let Value::Bulk(t) = c.cmd(&["EVAL", lease, "1", "s:ok"]) else { panic!("EVAL LEASE") };
    let token: i64 = std::str::from_utf8(&t).unwrap().parse().unwrap();
    assert!(format!("{:?}", replica.conn().cmd(&["LOCKINFO", "s:ok"])).contains(&token.to_string()));

    // The replica paused: EVAL and FCALL answer NOTDURABLE after the timeout and their grants are undone.
    signal(&replica, libc::SIGSTOP);
    for (cmd, name, key) in [("EVAL", lease, "s:lock"), ("FCALL", "grab", "f:lock")] {
        let started = Instant::now();
        let reply = c.cmd(&[cmd, name, "1", key]);
        let text = err(&reply);
        assert!(text.starts_with("NOTDURABLE"), "{cmd}: {text}");
        assert!(text.contains("undone"), "{cmd}: {text}");
        assert!(started.elapsed() >= Duration::from_millis(1500), "{cmd} answered before the timeout");
        assert_eq!(holders(&mut other, key), Value::Nil, "{cmd}: the grant must be undone, not orphaned until its TTL");
        assert!(int(&other.cmd(&["LEASE", key, "1000"])) > token, "{cmd}: a second client must get the freed lock");
    }
    // A script that only reads waits for nothing.
    let started = Instant::now();
    assert_eq!(c.cmd(&["EVAL", "return redis.call('EXISTS', KEYS[1])", "1", "s:ok"]), Value::Integer(1));
    assert!(started.elapsed() < Duration::from_millis(1000), "a read-only script waited {:?}", started.elapsed());
    signal(&replica, libc::SIGCONT);
    caught_up(&primary, &replica);

    // The replica gone: the script's first write is refused before it runs (NOREPLICAS), so no lock is taken.
    replica.kill9();
    let started = Instant::now();
    while connected_replicas(&primary) > 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the primary still counts the killed replica");
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    let reply = c.cmd(&["EVAL", lease, "1", "s:gone"]);
    assert!(err(&reply).starts_with("NOREPLICAS Not enough good replicas to write."), "{reply:?}");
    assert!(started.elapsed() < Duration::from_millis(1000), "refused only after {:?}", started.elapsed());
    assert_eq!(other.cmd(&["EXISTS", "s:gone"]), Value::Integer(0));
}

/// An EXEC that queued a script runs on a script thread (as the script alone would): the single-write rule still
/// holds for it on a durable connection (acknowledged: the replica has the grant; not acknowledged: NOTDURABLE after
/// the timeout and the script's grant undone).
#[test]
fn a_script_inside_exec_on_a_durable_connection_obeys_the_single_write_rule() {
    let (primary, replica, _rd) = pair("dtxscript", "1500");
    let mut c = durable(&primary);
    let mut other = primary.conn();
    let lease = "return redis.call('LEASE', KEYS[1], 60000)";
    let exec_script = |c: &mut Conn, lock: &str, data: &str| {
        assert!(is_ok(&c.cmd(&["MULTI"])));
        assert_eq!(c.cmd(&["EVAL", lease, "1", lock]), Value::Simple("QUEUED".into()));
        assert_eq!(c.cmd(&["SET", data, "v"]), Value::Simple("QUEUED".into()));
        c.cmd(&["EXEC"])
    };

    let Value::Array(r) = exec_script(&mut c, "xs:ok", "xs:ok:data") else { panic!("EXEC") };
    let Value::Bulk(t) = &r[0] else { panic!("the script's token: {:?}", r[0]) };
    let token: i64 = std::str::from_utf8(t).unwrap().parse().unwrap();
    assert!(format!("{:?}", replica.conn().cmd(&["LOCKINFO", "xs:ok"])).contains(&token.to_string()), "the replica lacks the acknowledged grant");

    signal(&replica, libc::SIGSTOP);
    let started = Instant::now();
    let reply = exec_script(&mut c, "xs:lock", "xs:data");
    let waited = started.elapsed();
    signal(&replica, libc::SIGCONT);
    let text = err(&reply);
    assert!(text.starts_with("NOTDURABLE"), "{text}");
    assert!(text.contains("undone"), "{text}");
    assert!(waited >= Duration::from_millis(1500), "answered after {waited:?}, before the timeout");
    assert_eq!(holders(&mut other, "xs:lock"), Value::Nil, "the script's grant must be undone, not orphaned until its TTL");
    assert!(int(&other.cmd(&["LEASE", "xs:lock", "60000"])) > token, "a second client must get the freed lock");
    caught_up(&primary, &replica);
}

/// A LEASE ... WAIT that waited and was then granted (by another client's RELEASE) is undone like any durable
/// grant when the replica does not acknowledge it.
#[test]
fn a_durable_grant_that_waited_is_undone_when_not_acknowledged() {
    let (primary, replica, _rd) = pair("dwait", "1500");
    let mut holder = primary.conn();
    let first = int(&holder.cmd(&["LEASE", "w:lock", "60000"]));
    let port = primary.port;
    let waiter = std::thread::spawn(move || {
        let mut c = Conn::connect(port);
        assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
        c.cmd(&["LEASE", "w:lock", "60000", "WAIT", "20000"])
    });
    let started = Instant::now();
    while primary.info_in("clients", "blocked_clients") == "0" {
        assert!(started.elapsed() < Duration::from_secs(30), "the LEASE never waited");
        std::thread::sleep(Duration::from_millis(2));
    }
    signal(&replica, libc::SIGSTOP);
    assert_eq!(int(&holder.cmd(&["RELEASE", "w:lock", &first.to_string()])), 1);
    let reply = waiter.join().unwrap();
    signal(&replica, libc::SIGCONT);
    assert!(err(&reply).starts_with("NOTDURABLE the grant was not acknowledged"), "{reply:?}");
    assert_eq!(holders(&mut holder, "w:lock"), Value::Nil);
}
