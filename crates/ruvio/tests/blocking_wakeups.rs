//! Clients blocked on keys (BLPOP, BZPOPMIN, ...; issue 33) over TCP against real servers:
//!
//! - they are woken by every way a key can appear under them, as in Redis: MOVE into their database, SWAPDB of
//!   their database, COPY ... DB into it (not only by a write that names the key in the blocked client's database);
//! - on a durable connection (`CLIENT DURABILITY REPLICAS n`) the pop made for them is held back like any durable
//!   write: answered once the replica has it fsynced, NOTDURABLE after `durability-timeout` otherwise, and refused
//!   with NOREPLICAS (nothing popped) when too few replicas are streaming by the time data arrives.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ruvio_protocol::Value;

fn b(s: &str) -> Value {
    Value::bulk(bytes::Bytes::copy_from_slice(s.as_bytes()))
}

/// Waits until the server counts `n` clients blocked on keys.
fn blocked(s: &Server, n: usize) {
    let start = Instant::now();
    while s.info_in("clients", "blocked_clients") != n.to_string() {
        assert!(start.elapsed() < Duration::from_secs(10), "{n} blocked client(s) never showed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A client in database `db` that sends `args` (a blocking command) without reading the reply yet.
fn block(s: &Server, db: &str, args: &[&str]) -> Conn {
    let mut c = s.conn();
    assert!(is_ok(&c.cmd(&["SELECT", db])));
    c.send(args).unwrap();
    c
}

/// The blocked client's reply, and how long it took to come.
fn reply_of(c: &mut Conn) -> (Value, Duration) {
    let start = Instant::now();
    let v = c.read_reply().expect("reply");
    (v, start.elapsed())
}

#[test]
fn move_swapdb_and_copy_into_another_database_wake_blocked_clients() {
    let dir = temp_dir("wake-move");
    let s = start(&dir, &[]);
    let mut w = s.conn();

    // MOVE: the list appears in database 1, where a client waits for it (timeout 4 s: an unwoken client would
    // answer nil only then).
    let mut a = block(&s, "1", &["BLPOP", "q", "4"]);
    blocked(&s, 1);
    assert_eq!(w.cmd(&["RPUSH", "q", "job"]), Value::Integer(1));
    assert_eq!(w.cmd(&["MOVE", "q", "1"]), Value::Integer(1));
    let (v, took) = reply_of(&mut a);
    assert_eq!(v, Value::Array(vec![b("q"), b("job")]));
    assert!(took < Duration::from_secs(3), "woken only after {took:?}");

    // SWAPDB: database 1's waiter sees what database 0 held.
    let mut a = block(&s, "1", &["BZPOPMIN", "z", "4"]);
    blocked(&s, 1);
    assert_eq!(w.cmd(&["ZADD", "z", "7", "m"]), Value::Integer(1));
    assert!(is_ok(&w.cmd(&["SWAPDB", "0", "1"])));
    let (v, took) = reply_of(&mut a);
    assert_eq!(v, Value::Array(vec![b("z"), b("m"), b("7")]));
    assert!(took < Duration::from_secs(3), "woken only after {took:?}");
    assert!(is_ok(&w.cmd(&["SWAPDB", "0", "1"])));

    // COPY ... DB 1: the copy feeds the waiter there, the original stays.
    let mut a = block(&s, "1", &["BRPOP", "c", "4"]);
    blocked(&s, 1);
    assert_eq!(w.cmd(&["RPUSH", "c", "x"]), Value::Integer(1));
    assert_eq!(w.cmd(&["COPY", "c", "c", "DB", "1"]), Value::Integer(1));
    let (v, took) = reply_of(&mut a);
    assert_eq!(v, Value::Array(vec![b("c"), b("x")]));
    assert!(took < Duration::from_secs(3), "woken only after {took:?}");
    assert_eq!(w.cmd(&["LLEN", "c"]), Value::Integer(1));

    // Nothing handed out is left in database 1.
    let mut one = s.conn();
    assert!(is_ok(&one.cmd(&["SELECT", "1"])));
    assert_eq!(one.cmd(&["EXISTS", "q", "z", "c"]), Value::Integer(0));
}

fn durable_block(s: &Server, args: &[&str]) -> Conn {
    let mut c = s.conn();
    assert!(is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    c.send(args).unwrap();
    c
}

#[test]
fn a_pop_served_to_a_durable_blocked_client_is_held_back_like_a_durable_write() {
    let (pd, rd) = (temp_dir("wake-durable-p"), temp_dir("wake-durable-r"));
    let primary = start(&pd, &["--appendfsync", "everysec", "--durability-timeout", "1500"]);
    let mut replica = start(&rd, &["--appendfsync", "always"]);
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    caught_up(&primary, &replica);
    let mut w = primary.conn();

    // Acknowledged: answered with the element, and by then the replica has applied the pop.
    let mut c = durable_block(&primary, &["BLPOP", "q", "10"]);
    blocked(&primary, 1);
    w.cmd(&["RPUSH", "q", "a"]);
    assert_eq!(reply_of(&mut c).0, Value::Array(vec![b("q"), b("a")]));
    assert_eq!(replica.conn().cmd(&["LLEN", "q"]), Value::Integer(0), "answered before the replica had the pop");

    // The replica paused: the served pop is not answered before the timeout, then NOTDURABLE (the pop, like any
    // durable write that was not acknowledged, stays applied).
    let mut c = durable_block(&primary, &["BZPOPMIN", "z", "10"]);
    blocked(&primary, 1);
    signal(&replica, libc::SIGSTOP);
    w.cmd(&["ZADD", "z", "1", "m"]);
    let (v, took) = reply_of(&mut c);
    signal(&replica, libc::SIGCONT);
    match &v {
        Value::Error(e) => assert!(e.starts_with(b"NOTDURABLE"), "{v:?}"),
        other => panic!("a pop the replica never acknowledged was answered: {other:?}"),
    }
    assert!(took >= Duration::from_millis(1400), "answered after {took:?}, before the timeout");
    assert_eq!(w.cmd(&["ZCARD", "z"]), Value::Integer(0));
    caught_up(&primary, &replica);

    // Too few replicas by the time data arrives: NOREPLICAS, and nothing is popped for the durable client (a
    // plain client blocked behind it gets the element).
    let mut c = durable_block(&primary, &["BRPOPLPUSH", "src", "dst", "10"]);
    blocked(&primary, 1);
    let mut plain = block(&primary, "0", &["BRPOP", "src", "10"]);
    blocked(&primary, 2);
    replica.kill9();
    let start = Instant::now();
    while primary.info_in("replication", "connected_slaves") != "0" {
        assert!(start.elapsed() < Duration::from_secs(20), "the primary never noticed the replica gone");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.cmd(&["RPUSH", "src", "e"]);
    let (v, _) = reply_of(&mut c);
    assert_eq!(v, Value::error("NOREPLICAS Not enough good replicas to write."));
    assert_eq!(reply_of(&mut plain).0, Value::Array(vec![b("src"), b("e")]));
    assert_eq!(w.cmd(&["EXISTS", "dst"]), Value::Integer(0));
}
