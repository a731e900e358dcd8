//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC runs the queued commands under the store lock it already holds, so nothing interleaves with them. WATCH
//! registers a flag on each key; any write to the key (by any client, or its expiry) sets it, and EXEC then aborts.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ruvio_protocol::Value;

use super::flags::*;
use super::CommandSpec;
use crate::client::{ClientState, Watched};
use crate::clock::Stamp;
use super::context::{Caller, Ctx};
use crate::keyspace::{CompactBytes, WatchFlag};
use crate::shared::Shared;
use crate::metrics::Outcome;
use crate::store::Store;
use crate::errors::*;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: "transactions", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("multi", 1, FAST | LOADING | STALE | NO_QUEUE | NOSCRIPT | ALLOW_BUSY, (0, 0, 0), "Starts a transaction.", multi),
    cmd!("exec", 1, LOADING | STALE | NO_QUEUE | NOSCRIPT, (0, 0, 0), "Executes all commands in a transaction.", exec),
    cmd!("discard", 1, FAST | LOADING | STALE | NO_QUEUE | NOSCRIPT | ALLOW_BUSY, (0, 0, 0), "Discards a transaction.", discard),
    cmd!("watch", -2, FAST | LOADING | STALE | NO_QUEUE | NOSCRIPT | KEYS_NOT_READ, (1, -1, 1), "Monitors changes to keys to determine the execution of a transaction.", watch),
    cmd!("unwatch", 1, FAST | LOADING | STALE | NOSCRIPT | ALLOW_BUSY, (0, 0, 0), "Forgets about watched keys of a transaction.", unwatch),
];

fn multi(ctx: &mut Ctx) -> Value {
    if ctx.client.multi.is_some() {
        return Value::error(ERR_NESTED_MULTI);
    }
    ctx.client.multi = Some(std::mem::take(&mut ctx.client.spare_queue));
    ctx.client.multi_error = false;
    ctx.client.info.in_multi.store(true, Ordering::Relaxed);
    Value::ok()
}

/// Leaves MULTI state, dropping the queue.
pub fn discard_state(ctx: &mut Ctx) {
    ctx.client.multi = None;
    ctx.client.multi_error = false;
    ctx.client.info.in_multi.store(false, Ordering::Relaxed);
}

fn discard(ctx: &mut Ctx) -> Value {
    if ctx.client.multi.is_none() {
        return Value::error(ERR_DISCARD_WITHOUT_MULTI);
    }
    discard_state(ctx);
    unwatch_ctx(ctx);
    Value::ok()
}

fn exec(ctx: &mut Ctx) -> Value {
    let Some(queue) = ctx.client.multi.as_ref() else { return Value::error(ERR_EXEC_WITHOUT_MULTI) };
    let runs_script = queue.iter().any(|(_, r)| r.spec.has(RUNS_SCRIPT));
    if runs_script && !ctx.client.on_script_thread && ctx.caller == Caller::Client && tokio::runtime::Handle::try_current().is_ok() {
        return exec_on_script_thread(ctx);
    }
    let Some(queue) = ctx.client.multi.take() else { return Value::error(ERR_EXEC_WITHOUT_MULTI) };
    let failed = ctx.client.multi_error;
    discard_state(ctx);
    if failed {
        unwatch_ctx(ctx);
        return Value::error(ERR_EXECABORT);
    }
    // A durable connection's transaction obeys the rule of its single writes: with too few replicas to acknowledge
    // it, nothing runs (replicas may have gone since the writes were queued). The connection then waits for the
    // acknowledgements of what EXEC logged, and undoes its grants if they do not come (connection.rs).
    let n = ctx.client.durability_replicas;
    if n > 0
        && queue.iter().any(|(_, r)| r.spec.has(WRITE))
        && ctx.shared.replication.online_durable_replicas() < n
    {
        unwatch_ctx(ctx);
        return Value::error(ERR_EXECABORT_NOREPLICAS);
    }
    // Take the lock before checking the watches so no write can slip in between the check and the commands.
    let now = ctx.now;
    let watched_expired = {
        let watched: Vec<(usize, CompactBytes)> = ctx.client.watched.iter().map(|w| (w.db, w.key.clone())).collect();
        let store = ctx.store();
        watched.iter().any(|(db, k)| store.dbs[*db].peek(k).is_some_and(|e| e.is_expired(now)))
    };
    let dirty = ctx.client.watch_flag.is_dirty() || watched_expired;
    unwatch_ctx(ctx);
    if dirty {
        return Value::NilArray;
    }
    let mut replies = Vec::with_capacity(queue.len());
    let log_start = ctx.store().log.len();
    // The user's ACL rules may have changed since the commands were queued: each is checked again as it runs
    // (Redis 7.0), and refused with its own error in the reply array while the others run.
    let user = if ctx.caller == Caller::Client { ctx.client.user.clone() } else { None };
    // Each command's end is the next one's start: one clock read per queued command.
    let mut clock = Stamp::now();
    for (args, resolved) in queue.iter() {
        let reply = match user.as_ref().and_then(|u| ctx.client.perms_cache.check(u, &resolved, args).err().map(|d| (u, d))) {
            Some((u, denial)) => {
                ctx.shared.acl.deny(&denial, "multi", &u.name, ctx.client.info.describe());
                ctx.shared.metrics.record(resolved.spec, std::time::Duration::ZERO, Outcome::Rejected);
                denial.exec_reply()
            }
            None => {
                // Each queued command counts in INFO commandstats when it runs here, as in Redis (queueing did not
                // count it); a replayed log's EXEC does not.
                let mut sub = ctx.nested(args, resolved.spec);
                let reply = super::call(&mut sub);
                if ctx.caller == Caller::Client {
                    let ended = Stamp::now();
                    ctx.shared.metrics.record(resolved.spec, ended.since(clock), Outcome::Ran { failed: reply.is_error() });
                    clock = ended;
                }
                reply
            }
        };
        replies.push(reply);
    }
    // The transaction's writes are already in the log, in order; wrap them so a replay applies all or none.
    ctx.store().wrap_atomic(log_start);
    ctx.propagate_nothing();
    ctx.client.spare_queue = queue.recycle();
    Value::Array(replies)
}

/// An EXEC whose queue runs a script runs where a script alone would: on a blocking-pool thread, so that its
/// client's I/O thread goes on serving its other connections (which wait for the store lock without parking on
/// it, get `-BUSY` past `busy-reply-threshold`, and can send SCRIPT KILL, FUNCTION KILL or SHUTDOWN NOSAVE). Run
/// inline on the I/O thread, a looping script there left every client of that thread without any reply.
///
/// The connection's state travels with it (the queue, WATCHes, SELECT and CLIENT changes the queue makes) and comes
/// back through [`ClientState::away`]; meanwhile the connection waits as for a blocked command, with a stand-in.
/// On the thread the EXEC goes through `commands::call` as it would have here (watch check under the lock, the
/// queue, the MULTI ... EXEC wrapping of its records, waking blocked clients), so nothing but the thread differs.
fn exec_on_script_thread(ctx: &mut Ctx) -> Value {
    ctx.unlock();
    let (back_tx, back_rx) = tokio::sync::oneshot::channel();
    let stand_in = ctx.client.stand_in(back_rx);
    let mut state = std::mem::replace(&mut *ctx.client, stand_in);
    let (shared, spec, execute) = (ctx.shared.clone(), ctx.spec, ctx.execute);
    let args: Vec<bytes::Bytes> = ctx.args.to_vec();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::task::spawn_blocking(move || {
        state.on_script_thread = true;
        let mut guard = None;
        let now = {
            shared.store_in(&mut guard);
            crate::clock::mono_ms()
        };
        let reply = {
            let mut exec_ctx = Ctx::new(now, &shared, &mut state, &args, spec, &mut guard, false, Caller::Client, execute);
            super::call(&mut exec_ctx)
        };
        drop(guard);
        state.on_script_thread = false;
        // The state first: the connection takes it back as soon as the reply arrives.
        let _ = back_tx.send(state);
        let _ = tx.send(reply);
    });
    ctx.set_block(crate::blocking::Block {
        rx,
        timeout: None,
        cancel: Box::new(|_| {}),
        abandon: None,
        timeout_reply: Value::error(ERR_SCRIPT_ABORTED),
    });
    Value::Nil
}

fn watch(ctx: &mut Ctx) -> Value {
    if ctx.client.multi.is_some() {
        return Value::error(ERR_WATCH_IN_MULTI);
    }
    let (args, db) = (ctx.args, ctx.client.db);
    let flag: Arc<WatchFlag> = ctx.client.watch_flag.clone();
    let store = ctx.store();
    let mut added = Vec::new();
    for k in &args[1..] {
        store.dbs[db].watch(k, flag.clone());
        added.push(Watched { db, key: CompactBytes::new(k) });
    }
    ctx.client.watched.extend(added);
    Value::ok()
}

fn unwatch(ctx: &mut Ctx) -> Value {
    unwatch_ctx(ctx);
    Value::ok()
}

/// Drops every WATCH of `client` (and those it dropped while a script ran) and gives it a fresh flag.
pub fn unwatch_in(store: &mut Store, client: &mut ClientState) {
    drop_stale_watches(store, client);
    for w in std::mem::take(&mut client.watched) {
        store.dbs[w.db].unwatch(&w.key, &client.watch_flag);
    }
    client.watch_flag = Arc::new(WatchFlag::default());
}

/// Unregisters the WATCHes [`forget_watches`] set aside.
fn drop_stale_watches(store: &mut Store, client: &mut ClientState) {
    for (watched, flag) in std::mem::take(&mut client.stale_watches) {
        for w in watched {
            store.dbs[w.db].unwatch(&w.key, &flag);
        }
    }
}

/// Drops the client's WATCHes without the store lock: they stop counting at once (a fresh flag); their
/// registrations on the keys are removed the next time the connection holds the lock. For a connection that
/// must not wait for the lock while a script holds it.
pub fn forget_watches(client: &mut ClientState) {
    let flag = std::mem::replace(&mut client.watch_flag, Arc::new(WatchFlag::default()));
    let watched = std::mem::take(&mut client.watched);
    if !watched.is_empty() {
        client.stale_watches.push((watched, flag));
    }
}

/// [`unwatch_in`] from inside a command, with the store lock the command holds (or takes). While a script is
/// running and the lock is not held already (UNWATCH, DISCARD, RESET may run during a busy script), the lock is
/// not waited for: [`forget_watches`].
pub fn unwatch_ctx(ctx: &mut Ctx) {
    if ctx.client.watched.is_empty() && ctx.client.stale_watches.is_empty() {
        ctx.client.watch_flag = Arc::new(WatchFlag::default());
        return;
    }
    if !ctx.is_locked() && ctx.shared.scripts.run.running.load(Ordering::Acquire) {
        forget_watches(ctx.client);
        return;
    }
    let (shared, client, guard) = ctx.parts();
    unwatch_in(shared.store_in(guard), client);
}

/// [`unwatch_in`] from outside any command (the connection closing).
pub fn unwatch_all(shared: &Shared, client: &mut ClientState) {
    if client.watched.is_empty() && client.stale_watches.is_empty() {
        return;
    }
    unwatch_in(&mut shared.store.lock(), client);
}
