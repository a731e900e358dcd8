//! Regression tests (issue 11) that need a restart of a real server: whatever was acknowledged can be reloaded.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use ruvio_protocol::Value;

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// An MSET whose log record is over 1 GiB: acknowledged under `appendfsync always`, it must load after kill -9
/// (the loader used to refuse any record over 1 GiB as corrupt, so the server would not start).
#[test]
fn a_write_over_one_gib_is_reloaded_after_kill9() {
    let dir = temp_dir("huge-record");
    let mut server = start(&dir, &["--appendfsync", "always", "--client-query-buffer-limit", "2gb"]);
    let value_len: usize = 512 * 1024 * 1024; // proto-max-bulk-len's default: the largest bulk a client may send
    {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
        let chunk = vec![b'v'; 8 * 1024 * 1024];
        s.write_all(b"*5\r\n$4\r\nMSET\r\n").unwrap();
        for key in ["big:1", "big:2"] {
            s.write_all(format!("${}\r\n{key}\r\n${value_len}\r\n", key.len()).as_bytes()).unwrap();
            for _ in 0..value_len / chunk.len() {
                s.write_all(&chunk).unwrap();
            }
            s.write_all(b"\r\n").unwrap();
        }
        let mut reply = [0u8; 5];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"+OK\r\n", "the MSET was not acknowledged");
    }
    server.kill9();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(int(&c.cmd(&["STRLEN", "big:1"])), value_len as i64, "stderr: {}", server.stderr());
    assert_eq!(int(&c.cmd(&["STRLEN", "big:2"])), value_len as i64);
    assert_eq!(bulk(&c.cmd(&["GETRANGE", "big:2", "1000", "1002"])).as_deref(), Some("vvv"));
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The largest TTLs Redis accepts survive a restart with the same deadline (overflowing ones are refused, see
/// tests/python/test_hardening.py; before, they were logged as negative times and the keys dropped on replay).
#[test]
fn huge_valid_ttls_keep_their_deadline_across_a_restart() {
    let dir = temp_dir("huge-ttl");
    let mut server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    assert!(is_ok(&c.cmd(&["SET", "a", "v", "EX", "9223372036854"])));
    assert!(is_ok(&c.cmd(&["SET", "b", "v"])));
    assert_eq!(bulk(&c.cmd(&["GETEX", "b", "PX", "9000000000000000000"])).as_deref(), Some("v"));
    assert!(is_ok(&c.cmd(&["PSETEX", "c", "9000000000000000000", "v"])));
    assert_eq!(int(&c.cmd(&["PEXPIREAT", "d", "1"])), 0);
    assert!(is_ok(&c.cmd(&["SET", "d", "v"])));
    assert_eq!(int(&c.cmd(&["PEXPIREAT", "d", "9223372036854775807"])), 1);
    let before: Vec<i64> = ["a", "b", "c", "d"].iter().map(|k| int(&c.cmd(&["PEXPIRETIME", k]))).collect();
    assert!(before.iter().all(|&t| t > 9_000_000_000_000_000), "{before:?}");
    drop(c);
    server.kill9();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    let after: Vec<i64> = ["a", "b", "c", "d"].iter().map(|k| int(&c.cmd(&["PEXPIRETIME", k]))).collect();
    assert_eq!(before, after, "stderr: {}", server.stderr());
    assert!(!server.stderr().contains("WARN"), "replay warned: {}", server.stderr());
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Many semaphore holders replay in one pass (each replayed grant used to copy every holder so far).
#[test]
fn a_semaphore_with_many_holders_reloads_whole() {
    let dir = temp_dir("sem-replay");
    let holders = 20_000;
    let mut server = start(&dir, &[]);
    let mut c = server.conn();
    for _ in 0..holders {
        c.send(&["SEMAPHORE", "s", "100000", "600000"]).unwrap();
    }
    let mut tokens = Vec::new();
    for _ in 0..holders {
        tokens.push(int(&c.read_reply().unwrap()));
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]));
    drop(c);
    server.stop();
    let started = Instant::now();
    let server = start(&dir, &[]);
    eprintln!("restart with {holders} semaphore holders: {:?}", started.elapsed());
    let mut c = server.conn();
    let Value::Array(info) = c.cmd(&["LOCKINFO", "s"]) else { panic!("LOCKINFO") };
    let Value::Array(listed) = &info[5] else { panic!("holders: {info:?}") };
    assert_eq!(listed.len(), holders);
    // A renewal replayed after the grants still finds its holder, and a new grant comes after every token.
    assert_eq!(int(&c.cmd(&["RENEW", "s", &tokens[10].to_string(), "900000"])), 1);
    assert!(int(&c.cmd(&["SEMAPHORE", "s", "100000", "600000"])) > *tokens.last().unwrap());
    drop(c);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
