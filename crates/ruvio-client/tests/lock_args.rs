//! `ruvio_protocol::lock_args` parses the lock commands as the server does: for each request below, the real
//! server's reply and `parse` agree, on the error text or on the request being valid.

mod common;

use bytes::Bytes;
use common::Server;
use ruvio_client::Value;
use ruvio_protocol::lock_args::{Ifgt, Lease, LockArgError, LockCommand, LockInfo, Release, Renew, Semaphore};

/// Requests as words; `K` stands for a key of its own per request, so earlier requests cannot change the answer.
const CASES: &[&[&str]] = &[
    &["LEASE", "K"],
    &["LEASE", "K", "abc"],
    &["LEASE", "K", "0"],
    &["LEASE", "K", "-5"],
    &["LEASE", "K", "007"],
    &["LEASE", "K", "2592000001"],
    &["LEASE", "K", "0", "WAIT", "x"],
    &["LEASE", "K", "10", "WAIT", "x"],
    &["LEASE", "K", "10", "WAIT", "-1"],
    &["LEASE", "K", "10", "WAIT", "2592000001"],
    &["LEASE", "K", "10", "WAIT"],
    &["LEASE", "K", "10", "NOWAIT", "5"],
    &["LEASE", "K", "10", "WAIT", "5", "WAIT", "5"],
    &["LEASE", "K", "1000"],
    &["lease", "K", "1000", "wait", "100"],
    &["LEASE", "K", "2592000000", "WAIT", "0"],
    &["RENEW", "K", "7"],
    &["RENEW", "K", "7", "100", "x"],
    &["RENEW", "K", "0", "100"],
    &["RENEW", "K", "-7", "100"],
    &["RENEW", "K", "+7", "100"],
    &["RENEW", "K", "x", "0"],
    &["RENEW", "K", "7", "0"],
    &["RENEW", "K", "7", "1.5"],
    &["RENEW", "K", "7", "100"],
    &["RELEASE", "K"],
    &["RELEASE", "K", "1", "2"],
    &["RELEASE", "K", "18446744073709551615"],
    &["RELEASE", "K", "-0"],
    &["RELEASE", "K", "9223372036854775807"],
    &["SEMAPHORE", "K", "1"],
    &["SEMAPHORE", "K", "x", "0"],
    &["SEMAPHORE", "K", "0", "0"],
    &["SEMAPHORE", "K", "100001", "10"],
    &["SEMAPHORE", "K", "-1", "10"],
    &["SEMAPHORE", "K", "2", "0", "WAIT", "x"],
    &["SEMAPHORE", "K", "2", "x"],
    &["SEMAPHORE", "K", "2", "10", "WAIT", "-3"],
    &["SEMAPHORE", "K", "2", "10", "WAIT", "x"],
    &["SEMAPHORE", "K", "2", "10", "PX", "3"],
    &["SEMAPHORE", "K", "100000", "1000", "WAIT", "10"],
    &["IFGT", "K", "5"],
    &["IFGT", "K", "0", "v", "PX", "0"],
    &["IFGT", "K", "5", "v", "PX", "0"],
    &["IFGT", "K", "5", "v", "px", "-1"],
    &["IFGT", "K", "5", "v", "PX", "4611686018427387904"],
    &["IFGT", "K", "5", "v", "PX", "soon"],
    &["IFGT", "K", "5", "v", "EX", "10"],
    &["IFGT", "K", "5", "v", "PX"],
    &["IFGT", "K", "5", "v"],
    &["IFGT", "K", "5", "v", "PX", "4611686018427387903"],
    &["LOCKINFO"],
    &["LOCKINFO", "K", "K"],
    &["LOCKINFO", "K"],
];

fn parse_as<C: LockCommand>(args: &[Bytes]) -> Result<(), LockArgError> {
    C::parse(args).map(|_| ())
}

fn parse(args: &[Bytes]) -> Result<(), LockArgError> {
    match args[0].to_ascii_uppercase().as_slice() {
        b"LEASE" => parse_as::<Lease>(args),
        b"RENEW" => parse_as::<Renew>(args),
        b"RELEASE" => parse_as::<Release>(args),
        b"SEMAPHORE" => parse_as::<Semaphore>(args),
        b"IFGT" => parse_as::<Ifgt>(args),
        b"LOCKINFO" => parse_as::<LockInfo>(args),
        other => panic!("not a lock command: {other:?}"),
    }
}

#[test]
fn parse_agrees_with_the_server_on_every_request() {
    let server = Server::start();
    let mut db = server.client();
    let mut errors = 0;
    for (i, words) in CASES.iter().enumerate() {
        let key = format!("lock-args:{i}");
        let args: Vec<Bytes> = words.iter().map(|w| Bytes::from(if *w == "K" { key.clone() } else { w.to_string() })).collect();
        let reply = db.command(&args).unwrap();
        match (parse(&args), &reply) {
            (Err(e), Value::Error(text)) => {
                assert_eq!(e.to_string(), String::from_utf8_lossy(text), "{words:?}");
                errors += 1;
            }
            (Ok(()), reply) => assert!(!reply.is_error(), "{words:?}: parsed, but the server answered {reply:?}"),
            (Err(e), reply) => panic!("{words:?}: parse says {e}, the server answered {reply:?}"),
        }
    }
    assert!(errors >= 40, "most cases are errors; only {errors} were");
}

#[test]
fn requests_the_client_encodes_are_accepted() {
    let server = Server::start();
    let mut db = server.client();
    let lease = Lease { key: Bytes::from("encoded"), ttl_ms: 5_000, wait_ms: Some(100) };
    let Value::Integer(token) = db.command(&lease.to_args()).unwrap() else { panic!("LEASE was not granted") };
    let renew = Renew { key: lease.key.clone(), token, ttl_ms: 5_000 };
    assert_eq!(db.command(&renew.to_args()).unwrap(), Value::Integer(1));
    let fenced = Ifgt { key: Bytes::from("encoded:data"), token, value: Bytes::from("v"), px_ms: Some(60_000) };
    assert_eq!(db.command(&fenced.to_args()).unwrap(), Value::Integer(1));
    let info = db.command(&LockInfo { key: lease.key.clone() }.to_args()).unwrap();
    assert!(!info.is_nil() && !info.is_error(), "LOCKINFO of a held lock: {info:?}");
    assert_eq!(db.command(&Release { key: lease.key.clone(), token }.to_args()).unwrap(), Value::Integer(1));
    let sem = Semaphore { key: Bytes::from("encoded:sem"), limit: 2, ttl_ms: 5_000, wait_ms: None };
    assert!(matches!(db.command(&sem.to_args()).unwrap(), Value::Integer(t) if t > token));
}
