//! Hashes survive restarts: a graceful restart, `kill -9` under `appendfsync always` (every acknowledged write is
//! there), and a compaction (BGREWRITEAOF writes hashes into the snapshot, large ones over several records) while
//! clients keep changing them, followed by `kill -9` and a restart from snapshot + log.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ruvio_protocol::Value;

/// Everything a hash holds, sorted, with its encoding and whether it has a deadline.
#[derive(Debug, PartialEq)]
struct Shape {
    pairs: BTreeMap<Vec<u8>, Vec<u8>>,
    encoding: String,
    has_ttl: bool,
}

fn shape(c: &mut Conn, key: &str) -> Option<Shape> {
    let Value::Array(flat) = c.cmd(&["HGETALL", key]) else { panic!("HGETALL {key}") };
    if flat.is_empty() {
        return None;
    }
    let pairs = flat.chunks(2).map(|p| (p[0].as_bytes().unwrap().to_vec(), p[1].as_bytes().unwrap().to_vec())).collect();
    let encoding = bulk(&c.cmd(&["OBJECT", "ENCODING", key])).unwrap();
    let has_ttl = matches!(c.cmd(&["PTTL", key]), Value::Integer(t) if t >= 0);
    Some(Shape { pairs, encoding, has_ttl })
}

/// Sends `commands` pipelined and checks that none failed.
fn pipeline(c: &mut Conn, commands: &[Vec<String>]) {
    for chunk in commands.chunks(500) {
        for cmd in chunk {
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            c.send(&args).unwrap();
        }
        for cmd in chunk {
            let reply = c.read_reply().unwrap();
            assert!(!reply.is_error(), "{cmd:?}: {reply:?}");
        }
    }
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A mix of hashes: small (packed), large (table), with a deadline, binary-ish values, counters, a float, one
/// emptied and deleted, one shrunk from a table back to a few fields.
fn write_mix(c: &mut Conn) {
    let mut cmds = Vec::new();
    for i in 0..200 {
        cmds.push(args(&["HSET", &format!("small:{i}"), "name", &format!("user {i}"), "visits", &i.to_string(), "tag", "x"]));
    }
    for i in 0..3000 {
        cmds.push(args(&["HSET", "large", &format!("field:{i}"), &format!("value:{i}:{}", "z".repeat(i % 50))]));
    }
    cmds.push(args(&["HSET", "with-ttl", "a", "1"]));
    cmds.push(args(&["PEXPIRE", "with-ttl", "600000"]));
    cmds.push(args(&["HSET", "long-value", "f", &"v".repeat(100)]));
    cmds.push(args(&["HINCRBY", "counters", "hits", "41"]));
    cmds.push(args(&["HINCRBY", "counters", "hits", "1"]));
    cmds.push(args(&["HINCRBYFLOAT", "counters", "ratio", "0.1"]));
    cmds.push(args(&["HINCRBYFLOAT", "counters", "ratio", "0.2"]));
    cmds.push(args(&["HSETNX", "counters", "hits", "0"]));
    cmds.push(args(&["HSET", "gone", "a", "1", "b", "2"]));
    cmds.push(args(&["HDEL", "gone", "a", "b"]));
    for i in 0..200 {
        cmds.push(args(&["HSET", "shrunk", &format!("f{i}"), "v"]));
    }
    for i in 3..200 {
        cmds.push(args(&["HDEL", "shrunk", &format!("f{i}")]));
    }
    pipeline(c, &cmds);
}

fn keys_of_mix() -> Vec<String> {
    let mut keys: Vec<String> = (0..200).map(|i| format!("small:{i}")).collect();
    keys.extend(["large", "with-ttl", "long-value", "counters", "gone", "shrunk"].map(String::from));
    keys
}

fn snapshot(c: &mut Conn, keys: &[String]) -> BTreeMap<String, Option<Shape>> {
    keys.iter().map(|k| (k.clone(), shape(c, k))).collect()
}

#[test]
fn hashes_survive_a_restart_and_kill9_under_appendfsync_always() {
    let dir = temp_dir("hashes-restart");
    let keys = keys_of_mix();
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let before = {
        let mut c = server.conn();
        write_mix(&mut c);
        snapshot(&mut c, &keys)
    };
    assert_eq!(before["large"].as_ref().unwrap().encoding, "hashtable");
    assert_eq!(before["large"].as_ref().unwrap().pairs.len(), 3000);
    assert_eq!(before["small:7"].as_ref().unwrap().encoding, "listpack");
    assert!(before["with-ttl"].as_ref().unwrap().has_ttl);
    assert_eq!(before["long-value"].as_ref().unwrap().encoding, "hashtable");
    assert_eq!(before["counters"].as_ref().unwrap().pairs[&b"ratio"[..]], b"0.3");
    assert_eq!(before["counters"].as_ref().unwrap().pairs[&b"hits"[..]], b"42");
    assert!(before["gone"].is_none());
    // Replayed from the log, the shrunk hash is built by the same commands: still a table, as in Redis.
    assert_eq!(before["shrunk"].as_ref().unwrap().encoding, "hashtable");

    // Graceful restart.
    server.stop();
    let mut server = start(&dir, &["--appendfsync", "always"]);
    assert_eq!(snapshot(&mut server.conn(), &keys), before, "after a restart; stderr: {}", server.stderr());

    // kill -9 right after acknowledged writes: every one of them is there.
    {
        let mut c = server.conn();
        for i in 0..500 {
            assert_eq!(c.cmd(&["HINCRBY", "acked", "n", "1"]), Value::Integer(i + 1));
            c.cmd(&["HSET", "acked", &format!("f{i}"), &i.to_string()]);
        }
        assert_eq!(c.cmd(&["HDEL", "small:0", "tag"]), Value::Integer(1));
    }
    server.kill9();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    let mut expected = before;
    expected.get_mut("small:0").unwrap().as_mut().unwrap().pairs.remove(&b"tag"[..]);
    assert_eq!(snapshot(&mut c, &keys), expected, "after kill -9; stderr: {}", server.stderr());
    assert_eq!(bulk(&c.cmd(&["HGET", "acked", "n"])).as_deref(), Some("500"));
    assert_eq!(c.cmd(&["HLEN", "acked"]), Value::Integer(501));
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_rewrite(server: &Server, rewrites_before: u64) {
    let t = Instant::now();
    loop {
        let done = server.info_field("aof_rewrite_in_progress") == "0"
            && server.info_field("aof_rewrites").parse::<u64>().unwrap() > rewrites_before;
        if done {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "the rewrite did not finish; stderr: {}", server.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.info_field("aof_last_bgrewrite_status"), "ok");
}

#[test]
fn hashes_survive_compaction_under_concurrent_writes_then_kill9() {
    let dir = temp_dir("hashes-rewrite");
    let mut keys = keys_of_mix();
    keys.push("huge".into());
    let mut server = start(&dir, &["--appendfsync", "always"]);
    {
        let mut c = server.conn();
        write_mix(&mut c);
        // About 3 MB in one hash: the snapshot writes it over several records.
        let value = "h".repeat(100);
        let cmds: Vec<Vec<String>> = (0..30_000).map(|i| args(&["HSET", "huge", &format!("f:{i}"), &value])).collect();
        pipeline(&mut c, &cmds);
    }
    // Writers change hashes (counters in the huge one, fields of small ones) while the snapshot is written.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (port, stop) = (server.port, stop.clone());
            std::thread::spawn(move || {
                let mut c = Conn::connect(port);
                let mut i = w as u64;
                let mut ops = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let f = format!("f:{}", (i * 7919) % 30_000);
                    assert!(!c.cmd(&["HINCRBY", &format!("live:{w}"), &f, "1"]).is_error());
                    assert!(!c.cmd(&["HSET", "huge", &f, &format!("changed {i}")]).is_error());
                    assert!(!c.cmd(&["HSET", &format!("small:{}", i % 200), "visits", &i.to_string()]).is_error());
                    if i.is_multiple_of(5) {
                        c.cmd(&["HDEL", "huge", &format!("f:{}", (i * 104_729) % 30_000)]);
                    }
                    i += 3;
                    ops += 1;
                }
                ops
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let rewrites = server.info_field("aof_rewrites").parse::<u64>().unwrap();
    assert_eq!(server.conn().cmd(&["BGREWRITEAOF"]), Value::Simple("Background append only file rewriting started".into()));
    wait_rewrite(&server, rewrites);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(ops > 30, "the writers must have run during the rewrite ({ops} rounds)");
    keys.extend((0..3).map(|w| format!("live:{w}")));
    let mut c = server.conn();
    // Writes after the snapshot go to the new log file.
    assert_eq!(c.cmd(&["HSET", "after", "k", "v"]), Value::Integer(1));
    assert_eq!(c.cmd(&["HDEL", "large", "field:0"]), Value::Integer(1));
    keys.push("after".into());
    let before = snapshot(&mut c, &keys);
    drop(c);
    let base = std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).find(|e| e.file_name().to_string_lossy().ends_with(".base"));
    assert!(base.is_some_and(|b| b.metadata().unwrap().len() > 3_000_000), "the snapshot must hold the hashes");
    server.kill9();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    let mut after = snapshot(&mut c, &keys);
    // Loaded from a snapshot, a hash is re-encoded for what it holds now (as Redis does when it loads): the table
    // that shrank to three fields is packed again. Everything else is as it was.
    let shrunk = after.get_mut("shrunk").unwrap().as_mut().unwrap();
    assert_eq!(shrunk.encoding, "listpack");
    shrunk.encoding = "hashtable".into();
    assert_eq!(after, before, "after compaction and kill -9; stderr: {}", server.stderr());
    // And a second compaction of what was loaded, then a plain restart, still agrees.
    assert!(is_ok(&c.cmd(&["SAVE"])));
    drop(c);
    let mut server = server;
    server.stop();
    let server = start(&dir, &[]);
    let mut again = snapshot(&mut server.conn(), &keys);
    again.get_mut("shrunk").unwrap().as_mut().unwrap().encoding = "hashtable".into();
    assert_eq!(again, before);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hash_that_expired_while_the_server_was_down_is_gone() {
    let dir = temp_dir("hashes-expired");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    {
        let mut c = server.conn();
        assert_eq!(c.cmd(&["HSET", "short", "a", "1"]), Value::Integer(1));
        assert_eq!(c.cmd(&["PEXPIRE", "short", "300"]), Value::Integer(1));
        assert_eq!(c.cmd(&["HSET", "kept", "a", "1"]), Value::Integer(1));
        assert!(is_ok(&c.cmd(&["SAVE"])));
    }
    server.kill9();
    std::thread::sleep(Duration::from_millis(400));
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["EXISTS", "short"]), Value::Integer(0));
    assert_eq!(bulk(&c.cmd(&["HGET", "kept", "a"])).as_deref(), Some("1"));
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
