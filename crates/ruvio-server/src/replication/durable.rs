//! Durable writes: a connection with `CLIENT DURABILITY REPLICAS n` gets each write answered only once it is
//! fsynced here and n replicas acknowledged it fsynced. If that does not happen within `durability-timeout`, a lock
//! grant is taken back through the log (the client was never told it holds the lock, so nobody does) and the reply
//! is a `NOTDURABLE` error; any other write stays applied (as with WAIT) and the error says so. Never a quiet
//! fall back to asynchronous. A primary that its coordinators lease (replication/lease.rs) also needs the lease
//! valid when the acknowledgements are in; otherwise the same timeout path, with its own text.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ruvio_protocol::Value;

use crate::client::{ClientInfo, ClientState};
use crate::blocking::Block;
use crate::dispatch::{execute, Caller};
use crate::errors::{not_durable_grant_undone, not_durable_no_lease, not_durable_write};
use crate::journal::Need;
use crate::shared::Shared;

/// The wait for the write `args` (database `db`, logged up to `lsn`) whose reply is `reply`.
pub fn wait(shared: &Arc<Shared>, db: usize, lsn: u64, replicas: usize, args: &[Bytes], reply: Value) -> Block {
    let timeout_ms = shared.config.read().durability_timeout;
    let grant = granted_token(args, &reply).map(|token| (args[1].clone(), token));
    shared.aof.request_fsync();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let shared = shared.clone();
    tokio::spawn(async move {
        let need = Need::durable(lsn, replicas);
        let durable = async {
            shared.journal.durability.wait(need).await;
            // Acknowledged: answered only while the coordinators' lease holds (replication/lease.rs).
            shared.replication.lease.wait_valid().await;
        };
        shared.metrics.durable_waits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let met = tokio::time::timeout(Duration::from_millis(timeout_ms), durable).await.is_ok();
        if !met {
            shared.metrics.not_durable.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let no_lease = !met && shared.journal.durability.met(need);
        let answer = match (met, grant) {
            (true, _) => reply,
            (false, Some((key, token))) => {
                undo_grant(&shared, db, key, token);
                if no_lease {
                    not_durable_no_lease(true, timeout_ms)
                } else {
                    not_durable_grant_undone(replicas, timeout_ms)
                }
            }
            (false, None) if no_lease => not_durable_no_lease(false, timeout_ms),
            (false, None) => not_durable_write(replicas, timeout_ms),
        };
        let _ = tx.send(answer);
    });
    Block { rx, timeout: None, cancel: Box::new(|_| {}), abandon: None, timeout_reply: not_durable_write(replicas, timeout_ms) }
}

/// The token of a LEASE or SEMAPHORE that granted.
pub fn granted_token(args: &[Bytes], reply: &Value) -> Option<i64> {
    let grant = args[0].eq_ignore_ascii_case(b"lease") || args[0].eq_ignore_ascii_case(b"semaphore");
    match reply {
        Value::Integer(t) if grant && args.len() > 1 => Some(*t),
        _ => None,
    }
}

/// Releases `key`'s grant `token` as the server (logged like any release, so replicas and the log drop it too).
fn undo_grant(shared: &Arc<Shared>, db: usize, key: Bytes, token: i64) {
    let mut client = ClientState::new(Arc::new(ClientInfo::new(0, "durability-undo".into(), String::new())), true);
    client.db = db;
    let args = [Bytes::from_static(b"RELEASE"), key, Bytes::from(token.to_string())];
    let mut guard = Some(shared.store.lock());
    if guard.as_ref().is_some_and(|s| s.replica) {
        // Demoted meanwhile (a failover): only the new primary's records change this node. If the grant reached the
        // new primary, it ends there at its TTL; the client was told it does not hold it.
        tracing::warn!("durable grant of token {token} not acknowledged in time; this node is a replica now, so it is not undone here");
        return;
    }
    let (reply, _) = execute(Caller::Replay, crate::clock::mono_ms(), shared, &mut client, &args, &mut guard);
    if let Some(store) = guard.as_mut() {
        shared.commit_log(store);
    }
    tracing::warn!("durable grant of token {token} not acknowledged in time: undone ({reply:?})");
}
