//! The blocking lock guard against a real server: renewal across several TTLs, the loss signal when the
//! server is paused past the TTL (raised before the server-side deadline), the hold cap, rejection, waiting,
//! semaphores, explicit release and what Drop does.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::Server;
use ruvio_client::{Client, LockOptions, LossReason};

const TTL: Duration = Duration::from_millis(450);

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn guard_renews_across_several_ttls_then_releases() {
    let server = Server::start();
    let mut db = server.client();
    let mut other = server.client();
    let guard = db.acquire("job", LockOptions::new(TTL)).unwrap().expect("free lock");
    assert_eq!(guard.key(), "job");
    let token = guard.token();
    let signal = guard.loss_signal();

    // Five TTLs: without renewal the lock would have expired four times over.
    let end = Instant::now() + TTL * 5;
    while Instant::now() < end {
        assert!(!guard.is_lost() && !signal.is_lost(), "lost while the server answers: {:?}", signal.reason());
        assert_eq!(other.lease("job", 1_000).unwrap(), None, "someone else got the guarded lock");
        thread::sleep(TTL / 4);
    }
    let info = other.lock_info("job").unwrap().expect("still held");
    assert_eq!(info.holders[0].token, token);
    assert_eq!(signal.wait_timeout(Duration::from_millis(1)), None);

    assert_eq!(guard.release().unwrap(), 1);
    assert_eq!(signal.reason(), Some(LossReason::Released));
    assert_eq!(signal.wait(), LossReason::Released);
    assert!(other.lease("job", 1_000).unwrap().unwrap() > token);
}

#[test]
fn loss_is_signalled_before_the_deadline_when_the_server_is_paused() {
    let server = Server::start();
    let mut db = server.client();
    // Long enough that the default margin (ttl / 5) absorbs scheduling delays on a loaded machine.
    let ttl = Duration::from_millis(1000);
    let sent = Instant::now();
    let guard = db.acquire("paused", LockOptions::new(ttl)).unwrap().unwrap();
    let token = guard.token();
    let signal = guard.loss_signal();
    server.pause();

    let reason = signal.wait_timeout(Duration::from_secs(5)).expect("loss must be signalled");
    let at = sent.elapsed();
    assert_eq!(reason, LossReason::Expired);
    // Raised before the grant's earliest possible server-side deadline (sent + ttl), and not absurdly early:
    // the default margin is ttl / 5.
    assert!(at < ttl, "signalled at {at:?}, after the deadline {ttl:?}");
    assert!(at >= ttl - ttl / 5 - Duration::from_millis(30), "signalled too early: {at:?}");
    assert!(guard.is_lost());

    server.resume();
    // The server's clock ran on while it was stopped: the lock is gone there too, and a new holder gets a
    // higher token; the stale guard's release changes nothing.
    let mut other = server.client();
    let mut newer = None;
    wait_until("the paused lock to expire on the server", Duration::from_secs(3), || {
        newer = other.lease("paused", 5_000).unwrap();
        newer.is_some()
    });
    assert!(newer.unwrap() > token);
    assert_eq!(guard.release().unwrap(), 0);
    assert_eq!(signal.reason(), Some(LossReason::Expired), "the first reason stays");
}

#[test]
fn renewal_rejected_when_the_lock_was_taken_away() {
    let server = Server::start();
    let mut db = server.client();
    let mut other = server.client();
    let guard = db.acquire("taken", LockOptions::new(TTL)).unwrap().unwrap();
    // Someone with the token (here: a second connection) frees it; the next RENEW answers 0.
    assert_eq!(other.release("taken", guard.token()).unwrap(), 1);
    let reason = guard.loss_signal().wait_timeout(TTL * 3).expect("rejection must be signalled");
    assert_eq!(reason, LossReason::Rejected);
    assert_eq!(guard.release().unwrap(), 0);
}

#[test]
fn max_hold_caps_the_total_hold_time() {
    let server = Server::start();
    let mut db = server.client();
    let mut other = server.client();
    let cap = Duration::from_millis(800);
    let started = Instant::now();
    let options = LockOptions::new(TTL).max_hold(cap).safety_margin(Duration::from_millis(200));
    let guard = db.acquire("capped", options).unwrap().unwrap();
    let reason = guard.loss_signal().wait_timeout(Duration::from_secs(5)).expect("the cap must end the hold");
    assert_eq!(reason, LossReason::MaxHoldReached);
    let at = started.elapsed();
    assert!(at < cap && at > cap - TTL, "signalled at {at:?}");
    // Renewals never asked for more than the cap: the server frees the lock by then.
    wait_until("the capped lock to be free", Duration::from_secs(2), || other.lease("capped", 1_000).unwrap().is_some());
    assert!(started.elapsed() < cap + Duration::from_millis(500), "held until {:?}", started.elapsed());
    drop(guard);
}

#[test]
fn no_renew_lets_the_first_grant_run_out() {
    let server = Server::start();
    let mut db = server.client();
    let margin = Duration::from_millis(150);
    let options = LockOptions::new(TTL).no_renew().safety_margin(margin);
    let started = Instant::now();
    let guard = db.acquire("once", options).unwrap().unwrap();
    assert_eq!(guard.loss_signal().wait(), LossReason::Expired);
    let at = started.elapsed();
    assert!(at >= TTL - margin - Duration::from_millis(10) && at < TTL, "signalled at {at:?}");
    // Nothing renewed it: the server lets it expire at its TTL.
    let mut other = server.client();
    wait_until("the unrenewed lock to expire", Duration::from_secs(2), || other.lease("once", 1_000).unwrap().is_some());
}

#[test]
fn dropping_the_guard_releases_in_the_background() {
    let server = Server::start();
    let mut db = server.client();
    let mut other = server.client();
    let guard = db.acquire("dropped", LockOptions::new(Duration::from_secs(30))).unwrap().unwrap();
    let signal = guard.loss_signal();
    drop(guard);
    // Released long before the 30 s TTL.
    wait_until("the dropped guard's release", Duration::from_secs(2), || other.lock_info("dropped").unwrap().is_none());
    assert_eq!(signal.reason(), Some(LossReason::Released));
}

#[test]
fn acquire_waits_and_semaphore_guards_renew() {
    let server = Server::start();
    let mut holder = server.client();
    let held = holder.lease("queued", 10_000).unwrap().unwrap();

    // Taken and not waiting: None.
    let mut db = server.client();
    assert!(db.acquire("queued", LockOptions::new(TTL)).unwrap().is_none());
    assert!(db.acquire("queued", LockOptions::new(TTL).wait(Duration::ZERO)).unwrap().is_none());

    // Waiting longer than a third of the TTL: the guard confirms the late grant with a renewal first.
    let port = server.port;
    let releaser = thread::spawn(move || {
        thread::sleep(Duration::from_millis(250));
        holder.release("queued", held).unwrap()
    });
    let guard = db.acquire("queued", LockOptions::new(TTL).wait(Duration::from_secs(3))).unwrap().expect("granted after release");
    assert_eq!(releaser.join().unwrap(), 1);
    assert!(guard.token() > held);
    thread::sleep(TTL * 2);
    assert!(!guard.is_lost(), "{:?}", guard.loss_signal().reason());
    assert_eq!(guard.release().unwrap(), 1);

    // Semaphore slots renew the same way.
    let mut c = Client::builder("127.0.0.1", port).connect().unwrap();
    let g1 = c.acquire_semaphore("pool", 2, LockOptions::new(TTL)).unwrap().unwrap();
    let g2 = c.acquire_semaphore("pool", 2, LockOptions::new(TTL)).unwrap().unwrap();
    assert!(c.acquire_semaphore("pool", 2, LockOptions::new(TTL)).unwrap().is_none());
    thread::sleep(TTL * 3);
    assert!(!g1.is_lost() && !g2.is_lost());
    assert_eq!(c.lock_info("pool").unwrap().unwrap().holders.len(), 2);
    assert_eq!(g1.release().unwrap(), 1);
    assert_eq!(g2.release().unwrap(), 1);
    assert_eq!(c.lock_info("pool").unwrap(), None);
}
