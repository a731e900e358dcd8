//! Lists, sets and sorted sets (issue 33) are persisted and replicated like every other value: they survive a
//! restart, `kill -9` under `appendfsync always`, and a compaction that writes them into the snapshot (large ones
//! over several records); a replica receives them by full sync and then by the stream, including the pops of
//! clients that were blocked (served after the write that fed them, and logged as the pop that replays them) and
//! SPOP's random picks (logged as the SREM of what it took).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use ruvio_protocol::Value;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Sends `commands` pipelined and checks that none failed.
fn pipeline(c: &mut Conn, commands: &[Vec<String>]) {
    for chunk in commands.chunks(500) {
        for cmd in chunk {
            let a: Vec<&str> = cmd.iter().map(String::as_str).collect();
            c.send(&a).unwrap();
        }
        for cmd in chunk {
            let reply = c.read_reply().unwrap();
            assert!(!reply.is_error(), "{cmd:?}: {reply:?}");
        }
    }
}

/// Every key of database 0 with its type, encoding, contents (sets sorted) and whether it has a deadline.
fn dump(s: &Server) -> BTreeMap<String, String> {
    let mut c = s.conn();
    let Value::Array(keys) = c.cmd(&["KEYS", "*"]) else { panic!("KEYS") };
    let mut out = BTreeMap::new();
    for k in keys {
        let k = bulk(&k).unwrap();
        let ty = match c.cmd(&["TYPE", &k]) {
            Value::Simple(t) => String::from_utf8_lossy(&t).into_owned(),
            other => panic!("TYPE {other:?}"),
        };
        let value = match ty.as_str() {
            "list" => format!("{:?}", c.cmd(&["LRANGE", &k, "0", "-1"])),
            "set" => {
                let Value::Array(m) = c.cmd(&["SMEMBERS", &k]) else { panic!("SMEMBERS") };
                let mut m: Vec<String> = m.iter().map(|x| bulk(x).unwrap()).collect();
                m.sort();
                format!("{m:?}")
            }
            "zset" => format!("{:?}", c.cmd(&["ZRANGE", &k, "0", "-1", "WITHSCORES"])),
            "string" => bulk(&c.cmd(&["GET", &k])).unwrap(),
            other => panic!("unexpected type {other} at {k}"),
        };
        let encoding = bulk(&c.cmd(&["OBJECT", "ENCODING", &k])).unwrap();
        let ttl = matches!(c.cmd(&["PTTL", &k]), Value::Integer(t) if t >= 0);
        out.insert(k, format!("{ty} {encoding} ttl={ttl} {value}"));
    }
    out
}

/// Small and large lists, sets and sorted sets (the large ones about 3.6 MB each: several snapshot records), one
/// with a deadline, one emptied (deleted), odd scores, and a bitmap.
fn write_mix(c: &mut Conn) {
    let mut cmds = Vec::new();
    let pad = "p".repeat(300);
    for i in 0..12_000 {
        cmds.push(args(&["RPUSH", "big-list", &format!("{i}:{pad}")]));
        cmds.push(args(&["SADD", "big-set", &format!("{i}:{pad}")]));
        cmds.push(args(&["ZADD", "big-zset", &format!("{}", i as f64 / 7.0), &format!("{i}:{pad}")]));
    }
    for i in 0..50 {
        cmds.push(args(&["LPUSH", &format!("list:{i}"), "a", "b", &i.to_string()]));
        cmds.push(args(&["SADD", &format!("ints:{i}"), "1", "2", &i.to_string()]));
        cmds.push(args(&["ZADD", &format!("zset:{i}"), "1.5", "a", "-inf", "b", "inf", "c", "0.1", "d"]));
    }
    cmds.push(args(&["SADD", "mixed", "1", "x"]));
    cmds.push(args(&["RPUSH", "with-ttl", "a"]));
    cmds.push(args(&["PEXPIRE", "with-ttl", "600000"]));
    cmds.push(args(&["RPUSH", "gone", "a"]));
    cmds.push(args(&["LPOP", "gone"]));
    cmds.push(args(&["ZINCRBY", "zset:0", "0.2", "d"]));
    cmds.push(args(&["SETBIT", "bits", "1000", "1"]));
    cmds.push(args(&["BITFIELD", "bits", "SET", "u8", "#2", "200"]));
    pipeline(c, &cmds);
    // Random picks, logged as what they took.
    for _ in 0..100 {
        assert!(!c.cmd(&["SPOP", "big-set", "3"]).is_error());
    }
    assert!(!c.cmd(&["ZPOPMIN", "big-zset", "10"]).is_error());
    assert!(!c.cmd(&["LMOVE", "big-list", "list:0", "LEFT", "RIGHT"]).is_error());
}

fn wait_rewrite(server: &Server, before: u64) {
    let t = Instant::now();
    while !(server.info_field("aof_rewrite_in_progress") == "0" && server.info_field("aof_rewrites").parse::<u64>().unwrap() > before) {
        assert!(t.elapsed() < Duration::from_secs(120), "the rewrite did not finish; stderr: {}", server.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.info_field("aof_last_bgrewrite_status"), "ok");
}

#[test]
fn collections_survive_restart_kill9_and_compaction() {
    let dir = temp_dir("collections-persist");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let before = {
        let mut c = server.conn();
        write_mix(&mut c);
        dump(&server)
    };
    assert!(before["big-set"].starts_with("set hashtable"), "{}", &before["big-set"][..40]);
    assert!(before["ints:3"].starts_with("set intset"));
    assert!(before["big-zset"].starts_with("zset skiplist"));
    assert!(before["zset:1"].starts_with("zset listpack"));
    assert!(before["with-ttl"].contains("ttl=true"));
    assert!(!before.contains_key("gone"));

    // Replayed from the log after kill -9.
    server.kill9();
    let mut server = start(&dir, &["--appendfsync", "always"]);
    assert_eq!(dump(&server), before, "after kill -9 (log replay); stderr: {}", server.stderr());

    // Compacted into a snapshot (large values over several records), more writes in the new log, kill -9.
    let rewrites = server.info_field("aof_rewrites").parse::<u64>().unwrap();
    assert_eq!(server.conn().cmd(&["BGREWRITEAOF"]), Value::Simple("Background append only file rewriting started".into()));
    wait_rewrite(&server, rewrites);
    {
        let mut c = server.conn();
        assert_eq!(c.cmd(&["RPUSH", "after", "x"]), Value::Integer(1));
        assert_eq!(c.cmd(&["ZREM", "zset:2", "a"]), Value::Integer(1));
    }
    let before = dump(&server);
    let base = std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).find(|e| e.file_name().to_string_lossy().ends_with(".base"));
    assert!(base.is_some_and(|b| b.metadata().unwrap().len() > 9_000_000), "the snapshot must hold the collections");
    server.kill9();
    let server = start(&dir, &[]);
    assert_eq!(dump(&server), before, "after compaction and kill -9; stderr: {}", server.stderr());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replica_receives_collections_by_snapshot_and_stream_including_served_blocked_pops() {
    let (pd, rd) = (temp_dir("collections-primary"), temp_dir("collections-replica"));
    let primary = start(&pd, &[]);
    write_mix(&mut primary.conn());
    let replica = start(&rd, &[]);
    assert!(is_ok(&replica.conn().cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()])));
    caught_up(&primary, &replica);
    assert_eq!(dump(&replica), dump(&primary), "after the full sync");

    // Clients blocked on the primary are served by later writes; the replica must see the pops, in order.
    let port = primary.port;
    let blocked: Vec<_> = ["BLPOP q 10", "BZPOPMAX zq 10", "BLMOVE src dst RIGHT LEFT 10"]
        .into_iter()
        .map(|cmd| {
            std::thread::spawn(move || {
                let mut c = Conn::connect(port);
                c.cmd(&cmd.split(' ').collect::<Vec<_>>())
            })
        })
        .collect();
    let t = Instant::now();
    while primary.info_in("clients", "blocked_clients") != "3" {
        assert!(t.elapsed() < Duration::from_secs(10), "clients did not block");
        std::thread::sleep(Duration::from_millis(10));
    }
    {
        let mut c = primary.conn();
        assert_eq!(c.cmd(&["RPUSH", "q", "one", "two"]), Value::Integer(2));
        assert_eq!(c.cmd(&["ZADD", "zq", "1", "low", "2", "high"]), Value::Integer(2));
        assert_eq!(c.cmd(&["RPUSH", "src", "a", "b"]), Value::Integer(2));
        assert!(!c.cmd(&["SPOP", "ints:5", "2"]).is_error());
        assert_eq!(c.cmd(&["SADD", "new-set", "x", "1"]), Value::Integer(2));
        assert_eq!(c.cmd(&["ZUNIONSTORE", "u", "2", "zset:1", "zset:2", "AGGREGATE", "MAX"]), Value::Integer(4));
    }
    let replies: Vec<Value> = blocked.into_iter().map(|b| b.join().unwrap()).collect();
    assert_eq!(bulk(&replies[2]).as_deref(), Some("b"));
    caught_up(&primary, &replica);
    let (p, r) = (dump(&primary), dump(&replica));
    assert_eq!(p, r, "after the stream");
    assert_eq!(r["q"], "list quicklist ttl=false Array([Bulk(b\"two\")])");
    assert_eq!(r["zq"], "zset listpack ttl=false Array([Bulk(b\"low\"), Bulk(b\"1\")])");
    assert!(r["dst"].ends_with("Array([Bulk(b\"b\")])"), "{}", r["dst"]);
    // And a replica refuses writes to them, as to anything.
    let e = replica.conn().cmd(&["LPUSH", "q", "x"]);
    assert!(matches!(&e, Value::Error(t) if t.starts_with(b"READONLY")), "{e:?}");
    drop((primary, replica));
    let _ = std::fs::remove_dir_all(&pd);
    let _ = std::fs::remove_dir_all(&rd);
}

/// Files written by a build of format version 2 (strings, hashes, locks; no collections) still load: the data files
/// of a server are rewritten with a version 2 header (and its CRC), as the previous build wrote them.
#[test]
fn files_of_format_version_2_still_load() {
    let dir = temp_dir("collections-v2-files");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    {
        let mut c = server.conn();
        assert!(is_ok(&c.cmd(&["SET", "s", "v"])));
        assert_eq!(c.cmd(&["HSET", "h", "f", "1"]), Value::Integer(1));
        assert!(is_ok(&c.cmd(&["SAVE"])));
        // And one record in the log after the snapshot.
        assert_eq!(c.cmd(&["HSET", "h", "g", "2"]), Value::Integer(1));
    }
    server.stop();
    let mut patched = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        if bytes.len() < 32 || &bytes[..8] != b"RUVIOAOF" {
            continue;
        }
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 3, "this build writes version 3");
        bytes[8..10].copy_from_slice(&2u16.to_le_bytes());
        let crc = crc32fast::hash(&bytes[..28]);
        bytes[28..32].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        patched += 1;
    }
    assert!(patched >= 2, "a snapshot and a log file");
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(bulk(&c.cmd(&["GET", "s"])).as_deref(), Some("v"));
    assert_eq!(c.cmd(&["HLEN", "h"]), Value::Integer(2));
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
