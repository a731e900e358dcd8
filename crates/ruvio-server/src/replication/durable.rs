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

use crate::client::{ClientInfo, ClientState, Grant};
use crate::blocking::Block;
use crate::dispatch::{execute, Caller};
use crate::errors::{not_durable_grant_undone, not_durable_grants_undone, not_durable_no_lease, not_durable_write};
use crate::journal::Need;
use crate::shared::Shared;

/// The wait for a durable connection's command that logged up to `lsn` and answered `reply`; `grants` are the
/// lock grants it made (a LEASE or SEMAPHORE, or those of an EXEC or a script), taken back if the acknowledgements do
/// not come in time. `single`: the command was one write (its grant, if any, gets the single grant's error text).
pub fn wait(shared: &Arc<Shared>, lsn: u64, replicas: usize, grants: Vec<Grant>, reply: Value, single: bool) -> Block {
    let timeout_ms = shared.config.read().durability_timeout;
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
        if no_lease {
            // Once per episode (until the lease is valid again), not once per refused write.
            if let Some(why) = shared.replication.lease.note_refusal() {
                tracing::warn!(
                    "durable writes refused (NOTDURABLE): the coordinators' write lease on this primary has expired: {why}; \
                     not logged again until the lease is valid again"
                );
            }
        }
        let answer = if met {
            reply
        } else if grants.is_empty() {
            if no_lease {
                not_durable_no_lease(false, timeout_ms)
            } else {
                not_durable_write(replicas, timeout_ms)
            }
        } else {
            undo_grants(&shared, &grants);
            if no_lease {
                not_durable_no_lease(true, timeout_ms)
            } else if single && grants.len() == 1 {
                not_durable_grant_undone(replicas, timeout_ms)
            } else {
                not_durable_grants_undone(grants.len(), replicas, timeout_ms)
            }
        };
        let _ = tx.send(answer);
    });
    Block { rx, timeout: None, cancel: Box::new(|_| {}), abandon: None, timeout_reply: not_durable_write(replicas, timeout_ms) }
}

/// Releases each grant as the server (logged like any release, so replicas and the log drop it too), under one
/// acquisition of the store lock.
fn undo_grants(shared: &Arc<Shared>, grants: &[Grant]) {
    let mut client = ClientState::new(Arc::new(ClientInfo::new(0, "durability-undo".into(), String::new())), true);
    let mut guard = Some(shared.store.lock());
    if guard.as_ref().is_some_and(|s| s.replica) {
        // Demoted meanwhile (a failover): only the new primary's records change this node. If a grant reached the
        // new primary, it ends there at its TTL; the client was told it does not hold it.
        tracing::warn!("{} durable grant(s) not acknowledged in time; this node is a replica now, so they are not undone here", grants.len());
        return;
    }
    for g in grants {
        client.db = g.db;
        let args = [Bytes::from_static(b"RELEASE"), g.key.clone(), Bytes::from(g.token.to_string())];
        let (reply, _) = execute(Caller::Replay, crate::clock::mono_ms(), shared, &mut client, &args, &mut guard);
        tracing::warn!("durable grant of token {} not acknowledged in time: undone ({reply:?})", g.token);
    }
    if let Some(store) = guard.as_mut() {
        shared.commit_log(store);
    }
}
