//! A server that stops answering, goes away or restarts: errors arrive within the timeouts, never a hang,
//! and the client reconnects on its own afterwards.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::Server;
use ruvio_client::{cmd, Client, ErrorKind, Protocol};

const SHORT: Duration = Duration::from_millis(300);
/// Generous upper bound for "within the timeout" on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);

#[test]
fn command_timeout_against_a_paused_server_then_recovery() {
    let server = Server::start();
    let mut db = server.builder().command_timeout(Some(SHORT)).connect().unwrap();
    db.set("k", "v").unwrap();

    server.pause();
    let started = Instant::now();
    let e = db.get::<String>("k").unwrap_err();
    let took = started.elapsed();
    assert!(e.is_timeout() && e.is_io_error(), "{e}");
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(took >= SHORT - Duration::from_millis(20) && took < SHORT + SLACK, "took {took:?}");
    assert!(!db.is_connected(), "a connection with a reply possibly in flight must be dropped");

    // Pipelines are bounded the same way.
    let started = Instant::now();
    let e = ruvio_client::pipe().cmd("PING").cmd("PING").query::<Vec<String>>(&mut db).unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(started.elapsed() < SHORT * 2 + SLACK);

    server.resume();
    assert_eq!(db.get::<String>("k").unwrap().as_deref(), Some("v"));
}

#[test]
fn connecting_to_a_paused_server_times_out() {
    let server = Server::start();
    server.pause();
    // RESP3 means a HELLO handshake, which the connect timeout bounds along with the TCP connect.
    let started = Instant::now();
    let e = server.builder().connect_timeout(SHORT).protocol(Protocol::Resp3).connect().unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(started.elapsed() < SHORT + SLACK, "took {:?}", started.elapsed());

    // Without a handshake the connection opens (the kernel accepts for the frozen process) and the first
    // command times out instead.
    let mut db = server.builder().connect_timeout(SHORT).command_timeout(Some(SHORT)).connect().unwrap();
    let started = Instant::now();
    assert!(db.ping().unwrap_err().is_timeout());
    assert!(started.elapsed() < SHORT + SLACK);
    server.resume();
    db.ping().unwrap();
}

#[test]
fn nothing_listening_is_an_io_error() {
    let (_reserved, port) = common::refusing_port();
    let started = Instant::now();
    let e = Client::builder("127.0.0.1", port).connect_timeout(SHORT).connect().unwrap_err();
    assert!(e.is_io_error() && e.is_connection_refused(), "{e}");
    assert!(!e.is_timeout() && !e.is_server_error() && e.code().is_none());
    assert!(started.elapsed() < SLACK);
}

#[test]
fn reconnects_after_a_server_restart() {
    let mut server = Server::start();
    let mut db = server.client();
    db.set("before", 1).unwrap();

    server.restart();
    // The old connection was closed by the server while idle; the client notices before sending and
    // reconnects, so even a command that must not be repeated goes through on the first try.
    db.set("after", 2).unwrap();
    assert_eq!(db.get::<i64>("after").unwrap(), Some(2));
    assert!(db.is_connected());

    // Killed while a command waits for its reply: the connection drop is reported, then the next call
    // reconnects.
    server.pause();
    let port = server.port;
    let waiter = thread::spawn(move || {
        // The handshake-free connect succeeds against the paused server; the PING then waits.
        let mut db = Client::builder("127.0.0.1", port).command_timeout(Some(Duration::from_secs(10))).connect()?;
        db.ping()
    });
    thread::sleep(Duration::from_millis(300));
    server.restart();
    let e = waiter.join().unwrap().unwrap_err();
    assert!(e.is_connection_dropped() && e.is_io_error() && !e.is_timeout(), "{e}");

    db.ping().unwrap();
}

#[test]
fn connection_killed_by_the_server_is_replaced_transparently() {
    let server = Server::start();
    let mut db = server.client();
    let mut admin = server.client();
    let id: i64 = cmd("CLIENT").arg("ID").query(&mut db).unwrap();
    let killed: i64 = cmd("CLIENT").arg("KILL").arg("ID").arg(id).query(&mut admin).unwrap();
    assert_eq!(killed, 1);
    let bounded = Instant::now() + Duration::from_secs(2);
    // The kill is asynchronous on the server side; the next command must work either way.
    thread::sleep(Duration::from_millis(50));
    assert!(Instant::now() < bounded);
    db.ping().unwrap();
    let new_id: i64 = cmd("CLIENT").arg("ID").query(&mut db).unwrap();
    assert_ne!(new_id, id);
}

/// Sends `what` on a fresh connection while the server is frozen, then kills and restarts the server so the
/// connection drops after the command went out: the textbook ambiguous failure.
fn across_a_dropped_connection<T: Send + 'static>(
    server: &mut Server,
    what: impl FnOnce(&mut Client) -> ruvio_client::Result<T> + Send + 'static,
) -> ruvio_client::Result<T> {
    let mut db = server.builder().command_timeout(Some(Duration::from_secs(10))).connect().unwrap();
    db.ping().unwrap();
    server.pause();
    let call = thread::spawn(move || what(&mut db));
    thread::sleep(Duration::from_millis(300));
    server.restart();
    call.join().unwrap()
}

#[test]
fn after_an_ambiguous_failure_renew_and_release_are_retried_but_lease_and_semaphore_never() {
    let mut server = Server::start();

    let e = across_a_dropped_connection(&mut server, |db| db.lease("k", 60_000)).unwrap_err();
    assert!(e.is_connection_dropped(), "{e}");
    let e = across_a_dropped_connection(&mut server, |db| db.semaphore("s", 2, 60_000)).unwrap_err();
    assert!(e.is_connection_dropped(), "{e}");
    // Had either been sent again, the restarted server would now hold it.
    let mut check = server.client();
    assert_eq!(check.lock_info("k").unwrap(), None, "LEASE was re-sent after the drop");
    assert_eq!(check.lock_info("s").unwrap(), None, "SEMAPHORE was re-sent after the drop");

    // RENEW and RELEASE are sent again on a new connection; the restarted server does not know the token,
    // so the honest answer is 0 rather than an error.
    assert_eq!(across_a_dropped_connection(&mut server, |db| db.renew("k", 12345i64, 60_000)).unwrap(), 0);
    assert_eq!(across_a_dropped_connection(&mut server, |db| db.release("k", 12345i64)).unwrap(), 0);
}

/// A primary demoted to replica answers writes with `-READONLY`. Ruvio has no replication yet, so a real
/// redis-server replica plays that part: the client must hand the error to the caller and drop the connection,
/// so the next call connects afresh (to wherever the connector says the primary now is).
#[test]
fn a_readonly_reply_drops_the_connection_and_the_next_call_reconnects() {
    let primary = Server::start_redis(&[]);
    let replica = Server::start_redis(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    let mut db = replica.client();
    let before: i64 = cmd("CLIENT").arg("ID").query(&mut db).unwrap();
    let e = cmd("SET").arg("k").arg("v").query::<()>(&mut db).unwrap_err();
    assert_eq!(e.code(), Some("READONLY"), "{e}");
    let after: i64 = cmd("CLIENT").arg("ID").query(&mut db).unwrap();
    assert_ne!(after, before, "the connection that answered READONLY must not be reused");
    // A read is fine on a replica and keeps its connection.
    let _: Option<String> = cmd("GET").arg("k").query(&mut db).unwrap();
    let same: i64 = cmd("CLIENT").arg("ID").query(&mut db).unwrap();
    assert_eq!(same, after);
}

/// `-NOREPLICAS` means the server ran nothing (too few replicas streaming, as for a moment after a failover), so the
/// client sends the command again for a while: a durable LEASE made while the replica is still attaching is granted
/// once it attached; with no replica ever coming, the refusal arrives as the error.
#[test]
fn durable_lease_rides_out_a_replica_still_attaching() {
    let durable = ["--appendonly", "yes", "--appendfsync", "always"];
    let primary = Server::start_with(&durable);
    let mut db = primary.builder().durability_replicas(1).connect().unwrap();
    let e = db.lease("noreplicas:alone", 10_000).unwrap_err();
    assert_eq!(e.code(), Some("NOREPLICAS"), "{e}");

    let leasing = thread::spawn(move || db.lease("noreplicas:attaching", 10_000));
    thread::sleep(Duration::from_millis(300));
    let replica_of = format!("127.0.0.1 {}", primary.port);
    let _replica = Server::start_with(&[durable.as_slice(), &["--replicaof", &replica_of]].concat());
    let token = leasing.join().unwrap().expect("granted once the replica streams").expect("free");
    let info = primary.client().lock_info("noreplicas:attaching").unwrap().expect("held");
    assert_eq!(info.holders.first().map(|h| h.token), Some(token));
}
