//! The async client (feature `tokio`) against a real server: the same surface as the blocking client,
//! timeouts against a paused server, reconnects, cancelled calls, and the async lock guard.
#![cfg(feature = "tokio")]

mod common;

use std::time::{Duration, Instant};

use common::Server;
use ruvio_client::{aio, cmd, pipe, LockKind, LockOptions, LossReason, Protocol, Value};

const TTL: Duration = Duration::from_millis(450);

async fn client(server: &Server) -> aio::Client {
    server.builder().connect_async().await.unwrap()
}

#[tokio::test]
async fn the_same_surface_as_the_blocking_client() {
    let server = Server::start_with(&["--requirepass", "pw"]);
    let mut db = server
        .builder()
        .password("pw")
        .username("default")
        .db(1)
        .client_name("async-worker")
        .protocol(Protocol::Resp3)
        .connect_async()
        .await
        .unwrap();
    assert_eq!(db.protocol(), Protocol::Resp3);
    assert!(db.is_connected());
    db.ping().await.unwrap();
    let name: String = cmd("CLIENT").arg("GETNAME").query_async(&mut db).await.unwrap();
    assert_eq!(name, "async-worker");

    assert_eq!(db.get::<String>("k").await.unwrap(), None);
    db.set("k", "v").await.unwrap();
    assert_eq!(db.get::<String>("k").await.unwrap().as_deref(), Some("v"));
    assert!(db.exists("k").await.unwrap());
    assert_eq!(db.del("k").await.unwrap(), 1);
    assert_eq!(db.incr("n", 7).await.unwrap(), 7);
    db.set_px("px", 1, 10_000).await.unwrap();
    assert!(db.query::<i64>(&cmd("PTTL").arg("px")).await.unwrap() > 0);
    assert_eq!(db.command(&["GET", "n"]).await.unwrap(), Value::Bulk("7".into()));

    let (n, missing): (i64, Option<String>) =
        pipe().cmd("INCR").arg("n").cmd("GET").arg("missing").query_async(&mut db).await.unwrap();
    assert_eq!((n, missing), (8, None));
    let tx: Option<(i64, i64)> = db.query_pipeline(&pipe().atomic().cmd("INCR").arg("n").cmd("INCR").arg("n")).await.unwrap();
    assert_eq!(tx, Some((9, 10)));
    db.set("s", "text").await.unwrap();
    assert_eq!(db.incr("s", 1).await.unwrap_err().code(), Some("ERR"));

    db.set_command_timeout(Some(Duration::from_secs(1)));
    assert_eq!(db.command_timeout(), Some(Duration::from_secs(1)));
    assert_eq!(db.options().clone().connect_async().await.unwrap().get::<i64>("n").await.unwrap(), Some(10));
    db.disconnect();
    assert!(!db.is_connected());
    db.ping().await.unwrap();
    let mut plain = aio::Client::connect("127.0.0.1", server.port).await.unwrap();
    assert_eq!(plain.ping().await.unwrap_err().code(), Some("NOAUTH"));
    let mut built = aio::Client::builder("127.0.0.1", server.port).password("pw").connect_async().await.unwrap();
    built.ping().await.unwrap();

    // Lock commands.
    let t1 = db.lease("lock", 5_000).await.unwrap().unwrap();
    assert_eq!(db.lease("lock", 5_000).await.unwrap(), None);
    assert_eq!(db.renew("lock", t1, 5_000).await.unwrap(), 1);
    let info = db.lock_info("lock").await.unwrap().unwrap();
    assert_eq!((info.kind, info.holders[0].token), (LockKind::Lease, t1));
    assert_eq!(db.lease_wait("lock", 5_000, 100).await.unwrap(), None);
    assert_eq!(db.ifgt("fenced", t1, "a").await.unwrap(), 1);
    assert_eq!(db.ifgt_px("fenced", t1 - 1, "b", 1_000).await.unwrap(), 0);
    assert_eq!(db.release("lock", t1 as u64).await.unwrap(), 1);
    assert_eq!(db.release("lock", t1).await.unwrap(), 0);
    let s1 = db.semaphore("sem", 1, 5_000).await.unwrap().unwrap();
    assert_eq!(db.semaphore_wait("sem", 1, 5_000, 100).await.unwrap(), None);
    assert_eq!(db.release("sem", s1).await.unwrap(), 1);
    assert_eq!(db.lock_info("sem").await.unwrap(), None);
}

#[tokio::test]
async fn timeouts_reconnects_and_cancelled_calls() {
    let mut server = Server::start();
    let mut db = server.builder().command_timeout(Some(TTL)).connect_async().await.unwrap();
    db.set("k", 1).await.unwrap();

    server.pause();
    let started = Instant::now();
    let e = db.get::<i64>("k").await.unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(started.elapsed() < TTL + Duration::from_millis(1500));
    let e = server.builder().connect_timeout(TTL).protocol(Protocol::Resp3).connect_async().await.unwrap_err();
    assert!(e.is_timeout(), "{e}");
    server.resume();
    assert_eq!(db.get::<i64>("k").await.unwrap(), Some(1));

    server.restart();
    db.set("after", 2).await.unwrap();
    assert_eq!(db.get::<i64>("after").await.unwrap(), Some(2));

    // A call abandoned mid-way must not leave its reply to be read as the next call's answer.
    server.pause();
    let abandoned = tokio::time::timeout(Duration::from_millis(50), db.get::<i64>("after")).await;
    assert!(abandoned.is_err());
    server.resume();
    assert_eq!(db.query::<String>(&cmd("ECHO").arg("fresh")).await.unwrap(), "fresh");
}

#[tokio::test]
async fn async_guard_renews_signals_loss_and_releases() {
    let server = Server::start();
    let mut db = client(&server).await;
    let mut other = client(&server).await;

    let guard = db.acquire("job", LockOptions::new(TTL)).await.unwrap().unwrap();
    assert_eq!(guard.key(), "job");
    tokio::time::sleep(TTL * 4).await;
    assert!(!guard.is_lost(), "{:?}", *guard.loss().borrow());
    assert_eq!(other.lease("job", 1_000).await.unwrap(), None);
    let lost = guard.lost();
    assert_eq!(guard.release().await.unwrap(), 1);
    assert_eq!(lost.await, LossReason::Released);

    // Paused server: loss arrives before the deadline.
    let ttl = Duration::from_millis(1000);
    let sent = Instant::now();
    let guard = db.acquire("paused", LockOptions::new(ttl)).await.unwrap().unwrap();
    let mut loss = guard.loss();
    server.pause();
    let reason = tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("loss signalled");
    let at = sent.elapsed();
    server.resume();
    assert_eq!(reason, LossReason::Expired);
    assert!(at < ttl, "signalled at {at:?}");
    assert_eq!(*loss.borrow_and_update(), Some(LossReason::Expired));

    // Semaphore guard with a cap.
    let started = Instant::now();
    let guard = db.acquire_semaphore("pool", 3, LockOptions::new(TTL).max_hold(Duration::from_millis(700))).await.unwrap().unwrap();
    assert_eq!(tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.unwrap(), LossReason::MaxHoldReached);
    assert!(started.elapsed() < Duration::from_millis(700));

    // Drop releases from the background task.
    let guard = db.acquire("dropped", LockOptions::new(Duration::from_secs(30)).wait(Duration::from_millis(10))).await.unwrap().unwrap();
    drop(guard);
    let deadline = Instant::now() + Duration::from_secs(2);
    while other.lock_info("dropped").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "dropped guard did not release");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// As in the blocking client (see resilience.rs): a `-READONLY` reply, here from a real redis-server replica,
/// reaches the caller and the connection is replaced on the next call.
#[tokio::test]
async fn a_readonly_reply_drops_the_connection_and_the_next_call_reconnects() {
    let primary = Server::start_redis(&[]);
    let replica = Server::start_redis(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    let mut db = client(&replica).await;
    let before: i64 = cmd("CLIENT").arg("ID").query_async(&mut db).await.unwrap();
    let e = cmd("SET").arg("k").arg("v").query_async::<()>(&mut db).await.unwrap_err();
    assert_eq!(e.code(), Some("READONLY"), "{e}");
    let after: i64 = cmd("CLIENT").arg("ID").query_async(&mut db).await.unwrap();
    assert_ne!(after, before, "the connection that answered READONLY must not be reused");
}
