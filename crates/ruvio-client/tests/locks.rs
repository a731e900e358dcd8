//! The lock commands through the blocking client against a real server: LEASE (and its waiting form),
//! RENEW, RELEASE, SEMAPHORE (and its waiting form), IFGT and LOCKINFO, in RESP2 and RESP3.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::Server;
use ruvio_client::{LockHolder, LockInfo, LockKind, Protocol};

#[test]
fn lease_renew_release_and_stale_tokens() {
    let server = Server::start();
    let mut a = server.client();
    let mut b = server.client();

    let t1 = a.lease("job", 5_000).unwrap().expect("free lock is granted");
    assert!(t1 > 0);
    assert_eq!(b.lease("job", 5_000).unwrap(), None, "held by a");
    assert_eq!(a.renew("job", t1, 5_000).unwrap(), 1);
    assert_eq!(b.renew("job", t1 + 1, 5_000).unwrap(), 0, "a wrong token renews nothing");
    assert_eq!(b.release("job", t1 + 1).unwrap(), 0, "a wrong token releases nothing");
    assert_eq!(a.release("job", t1 as u64).unwrap(), 1);
    assert_eq!(a.release("job", t1).unwrap(), 0, "second release of the same token");
    assert_eq!(a.renew("job", t1, 5_000).unwrap(), 0, "renew after release never re-acquires");

    let t2 = b.lease("job", 5_000).unwrap().unwrap();
    assert!(t2 > t1, "tokens only grow: {t2} > {t1}");
    // The stale holder cannot free the new holder's lock.
    assert_eq!(a.release("job", t1).unwrap(), 0);
    assert_eq!(b.lease("job", 5_000).unwrap(), None);
    assert_eq!(b.release("job", t2).unwrap(), 1);

    // Expiry: a short lease frees itself, and its renew then answers 0.
    let t3 = a.lease("short", 100).unwrap().unwrap();
    thread::sleep(Duration::from_millis(250));
    assert_eq!(a.renew("short", t3, 100).unwrap(), 0);
    let t4 = b.lease("short", 100).unwrap().unwrap();
    assert!(t4 > t3);

    // Bad arguments are server errors with Redis-style codes.
    let e = a.lease("job", 0).unwrap_err();
    assert_eq!(e.code(), Some("ERR"), "{e}");
    a.set("plain", "x").unwrap();
    assert_eq!(a.lease("plain", 1_000).unwrap_err().code(), Some("WRONGTYPE"));
    a.lease("locked", 5_000).unwrap().unwrap();
    assert_eq!(a.get::<String>("locked").unwrap_err().code(), Some("WRONGTYPE"));
}

#[test]
fn lease_wait_is_granted_on_release_or_times_out() {
    let server = Server::start();
    let mut a = server.client();
    let t1 = a.lease("q", 10_000).unwrap().unwrap();

    let port = server.port;
    let waiter = thread::spawn(move || {
        let mut b = ruvio_client::Client::builder("127.0.0.1", port).connect().unwrap();
        let started = Instant::now();
        let token = b.lease_wait("q", 10_000, 5_000).unwrap();
        (token, started.elapsed())
    });
    // Bounded wait until the waiter is queued, then release to it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.lock_info("q").unwrap().map_or(0, |i| i.waiters) == 0 {
        assert!(Instant::now() < deadline, "waiter never queued");
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(a.release("q", t1).unwrap(), 1);
    let (token, waited) = waiter.join().unwrap();
    let t2 = token.expect("the waiter gets the lock when it is released");
    assert!(t2 > t1);
    assert!(waited < Duration::from_secs(5));

    // Nobody releases: the wait ends with None after about the wait time, not the command timeout.
    let started = Instant::now();
    assert_eq!(a.lease_wait("q", 10_000, 200).unwrap(), None);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(190) && took < Duration::from_secs(2), "took {took:?}");

    // A wait longer than the command timeout is allowed: the timeout is extended by the wait.
    let mut short = server.builder().command_timeout(Some(Duration::from_millis(100))).connect().unwrap();
    assert_eq!(short.lease_wait("q", 10_000, 400).unwrap(), None);
}

#[test]
fn semaphore_slots_and_waiting() {
    let server = Server::start();
    let mut db = server.client();
    let s1 = db.semaphore("sem", 2, 5_000).unwrap().unwrap();
    let s2 = db.semaphore("sem", 2, 5_000).unwrap().unwrap();
    assert!(s2 > s1);
    assert_eq!(db.semaphore("sem", 2, 5_000).unwrap(), None, "both slots taken");
    assert_eq!(db.renew("sem", s1, 5_000).unwrap(), 1, "a slot renews with its own token");

    let info = db.lock_info("sem").unwrap().unwrap();
    assert_eq!(info.kind, LockKind::Semaphore);
    assert_eq!(info.limit, 2);
    let tokens: Vec<i64> = info.holders.iter().map(|h| h.token).collect();
    assert!(tokens.contains(&s1) && tokens.contains(&s2), "{info:?}");
    assert!(info.holders.iter().all(|h| h.remaining_ms > 0 && h.remaining_ms <= 5_000));

    assert_eq!(db.release("sem", s1).unwrap(), 1);
    let s3 = db.semaphore("sem", 2, 5_000).unwrap().unwrap();
    assert!(s3 > s2);

    let started = Instant::now();
    assert_eq!(db.semaphore_wait("sem", 2, 5_000, 150).unwrap(), None);
    assert!(started.elapsed() >= Duration::from_millis(140));

    let port = server.port;
    let waiter = thread::spawn(move || {
        let mut other = ruvio_client::Client::connect("127.0.0.1", port).unwrap();
        other.semaphore_wait("sem", 2, 5_000, 5_000).unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while db.lock_info("sem").unwrap().map_or(0, |i| i.waiters) == 0 {
        assert!(Instant::now() < deadline, "waiter never queued");
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(db.release("sem", s2).unwrap(), 1);
    let s4 = waiter.join().unwrap().expect("the released slot goes to the waiter");
    assert!(s4 > s3);

    // The key goes away when the last holder leaves.
    db.release("sem", s3).unwrap();
    db.release("sem", s4).unwrap();
    assert_eq!(db.lock_info("sem").unwrap(), None);
}

#[test]
fn ifgt_fences_writes() {
    let server = Server::start();
    let mut db = server.client();
    let old = db.lease("lock", 5_000).unwrap().unwrap();
    db.release("lock", old).unwrap();
    let new = db.lease("lock", 5_000).unwrap().unwrap();

    assert_eq!(db.ifgt("report", new, "from new").unwrap(), 1);
    assert_eq!(db.ifgt("report", old, "from stale holder").unwrap(), 0, "older token rejected");
    assert_eq!(db.get::<String>("report").unwrap().as_deref(), Some("from new"));
    assert_eq!(db.ifgt("report", new, "again").unwrap(), 1, "the same token may write again");

    assert_eq!(db.ifgt_px("temp", new, "soon gone", 100).unwrap(), 1);
    assert_eq!(db.get::<String>("temp").unwrap().as_deref(), Some("soon gone"));
    let deadline = Instant::now() + Duration::from_secs(2);
    while db.get::<String>("temp").unwrap().is_some() {
        assert!(Instant::now() < deadline, "IFGT PX value did not expire");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(db.ifgt("report", -5i64, "x").unwrap_err().is_server_error());
}

#[test]
fn lock_info_in_resp2_and_resp3() {
    let server = Server::start();
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut db = server.builder().protocol(protocol).connect().unwrap();
        let key = format!("info:{protocol:?}");
        assert_eq!(db.lock_info(&key).unwrap(), None);
        let t = db.lease(&key, 3_000).unwrap().unwrap();
        let info = db.lock_info(&key).unwrap().unwrap();
        assert_eq!(info.kind, LockKind::Lease);
        assert_eq!(info.limit, 1);
        assert_eq!(info.waiters, 0);
        assert_eq!(info.holders.len(), 1);
        let LockHolder { token, remaining_ms } = info.holders[0].clone();
        assert_eq!(token, t);
        assert!(remaining_ms > 0 && remaining_ms <= 3_000, "{remaining_ms}");
        let _: LockInfo = info;
        db.release(&key, t).unwrap();
    }
}

/// `Client::locks` / `locks_all` (LOCKS): every lock with its holders' tokens and the clients they were granted to,
/// parsed the same in RESP2 and RESP3; strings are not listed.
#[test]
fn locks_lists_holders_with_their_clients() {
    let server = Server::start();
    for proto in [Protocol::Resp2, Protocol::Resp3] {
        let mut admin = server.builder().protocol(proto).connect().unwrap();
        let _: () = ruvio_client::cmd("FLUSHALL").query(&mut admin).unwrap();
        let mut worker = server.builder().protocol(proto).client_name("report-worker").connect().unwrap();
        let worker_id: i64 = ruvio_client::cmd("CLIENT").arg("ID").query(&mut worker).unwrap();
        let token = worker.lease("job:report", 30_000).unwrap().unwrap();
        let slot = admin.semaphore("upstream:billing", 4, 15_000).unwrap().unwrap();
        admin.set("plain", "v").unwrap();

        let mut all = admin.locks_all(None).unwrap();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(all.iter().map(|l| l.key.as_slice()).collect::<Vec<_>>(), [&b"job:report"[..], b"upstream:billing"]);
        let lease = &all[0];
        assert_eq!((&lease.kind, lease.limit, lease.waiters), (&LockKind::Lease, 1, 0));
        let h = &lease.holders[0];
        assert_eq!((h.token, h.client_id, h.client_name.as_deref()), (token, Some(worker_id), Some("report-worker")));
        assert!(h.client_addr.as_deref().is_some_and(|a| a.starts_with("127.0.0.1:")), "{h:?}");
        assert!(h.remaining_ms > 29_000 && h.held_ms < 10_000 && h.granted_ms > 1_700_000_000_000, "{h:?}");
        let sem = &all[1];
        assert_eq!((&sem.kind, sem.limit, sem.holders.len()), (&LockKind::Semaphore, 4, 1));
        assert_eq!((sem.holders[0].token, sem.holders[0].client_name.as_deref()), (slot, None));

        let page = admin.locks(0, Some("job:*"), Some(1000)).unwrap();
        assert_eq!(page.cursor, 0);
        assert_eq!(page.locks.len(), 1);
        assert_eq!(page.locks[0].key, b"job:report");
    }
}
