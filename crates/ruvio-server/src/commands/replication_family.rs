//! REPLICAOF/SLAVEOF, ROLE, WAIT, WAITAOF, and the replication handshake (PSYNC, REPLCONF). The replication
//! machinery lives in [`crate::replication`]; docs/replication.md describes it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ruvio_protocol::Value;

use super::flags::*;
use super::{eq_ic, int_arg, CommandSpec};
use super::context::Ctx;
use crate::blocking::Block;
use crate::errors::*;
use crate::keyspace::Expiry;
use crate::client::Handover;
use crate::journal::{Counted, Need};
use crate::replication::lease::{MAX_COORDINATORS, MAX_DURABILITY_SET};
use crate::shared::Shared;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (0, 0, 0), group: "server", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("replicaof", -3, ADMIN | NO_MULTI | STALE | NOSCRIPT, "Configures a server as replica of another, or promotes it to a primary (Ruvio: optionally at a failover EPOCH).", replicaof),
    cmd!("slaveof", -3, ADMIN | NO_MULTI | STALE | NOSCRIPT, "Sets a Redis server as a replica of another, or promotes it to being a master.", replicaof),
    cmd!("role", 1, FAST | LOADING | STALE | NOAUTH, "Returns the replication role.", role),
    cmd!("wait", 3, NOSCRIPT, "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", wait),
    cmd!("waitaof", 4, NOSCRIPT, "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the primary and/or replicas.", waitaof),
    CommandSpec {
        name: "replication",
        arity: -2,
        flags: NOSCRIPT,
        keys: (0, 0, 0),
        group: "server",
        summary: "A container for Ruvio's failover commands (used by `ruvio coordinator`).",
        handler: super::server_family::container_help,
        subcommands: REPLICATION_SUBCOMMANDS,
    },
    cmd!("psync", -3, ADMIN | NO_MULTI | STALE | NOSCRIPT, "An internal command used in replication.", psync),
    cmd!("replconf", -1, ADMIN | LOADING | STALE | NOSCRIPT, "An internal command for configuring the replication stream.", replconf),
];

static REPLICATION_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("promise", 3, ADMIN | STALE | LOADING | COORDINATION, "Promises (durably) to follow no primary of an epoch older than the given one (or WITHDRAW: takes the promise back to this node's own epoch); answers [promised epoch, LSN, fsynced LSN].", replication_promise),
    cmd!("lease", -3, ADMIN | STALE | COORDINATION, "A coordinator's write lease: `LEASE epoch ms coordinator-id coordinators`, or `LEASE OFF` to stop requiring one.", replication_lease),
];

/// REPLICAOF host port [EPOCH e] | NO ONE [EPOCH e [FORCE]].
fn replicaof(ctx: &mut Ctx) -> Value {
    let (host, port) = (&ctx.args[1], &ctx.args[2]);
    let shared = ctx.shared;
    let no_one = eq_ic(host, "no") && eq_ic(port, "one");
    let force = ctx.args.len() == 6 && no_one && eq_ic(&ctx.args[5], "force");
    let epoch = match ctx.args.len() {
        3 => None,
        5 | 6 if eq_ic(&ctx.args[3], "epoch") && (ctx.args.len() == 5 || force) => match int_arg(&ctx.args[4]) {
            Ok(e) if (0..=crate::locks::tokens::MAX_EPOCH as i64).contains(&e) => Some(e as u64),
            _ => return Value::error(ERR_EPOCH_RANGE),
        },
        _ => return Value::error(ERR_SYNTAX),
    };
    if epoch.is_some() {
        // The epoch form moves fencing epochs: a coordinator's (the ACL category @coordination), never a client's.
        if let Some(user) = ctx.client.user.as_ref().filter(|u| !u.perms().coordination()) {
            ctx.shared.acl.log_denial("command", "toplevel", "replicaof|epoch".into(), &user.name, ctx.client.info.describe());
            return Value::error(ERR_NOPERM_EPOCH);
        }
    }
    if epoch == Some(crate::locks::tokens::MAX_EPOCH as u64) && !force {
        // At the last epoch no later failover can raise tokens above this primary's (docs/fencing.md).
        return Value::error(ERR_LAST_EPOCH);
    }
    if let Some(e) = epoch {
        if let Err(p) = shared.replication.promise(e) {
            return Value::error(epoch_older_than_promised(e, p));
        }
    }
    if eq_ic(host, "no") && eq_ic(port, "one") {
        if !shared.replication.is_replica() && epoch.is_none() {
            return Value::ok();
        }
        if epoch.is_none() {
            // A promotion by hand: the operator, not the coordinators, runs this node now.
            shared.replication.stop_requiring_lease(&shared.journal.durability);
        }
        promote(shared, ctx.store(), epoch);
        return Value::ok();
    }
    let port = match int_arg(port) {
        Ok(p) if (0..=65535).contains(&p) => p as u16,
        _ => return Value::error(ERR_INVALID_PORT),
    };
    let host = String::from_utf8_lossy(host).into_owned();
    if shared.replication.upstream().is_some_and(|u| u.host == host && u.port == port) {
        return Value::simple("OK Already connected to specified master");
    }
    follow(shared, ctx.store(), host, port);
    Value::ok()
}

/// Starts following `host:port`: client writes are refused from now on, and only the primary's records change
/// the data (no expiry, no lock timer here).
pub fn follow(shared: &Arc<Shared>, store: &mut crate::store::Store, host: String, port: u16) {
    tracing::info!("Connecting to PRIMARY {host}:{port}");
    store.replica = true;
    store.log_enabled = true;
    store.set_expiry(Expiry::Hidden);
    // Lock waiters exist only on a primary: they are told, not left hanging.
    crate::locks::engine::fail_all_waiters(store, ERR_READONLY);
    // The link task (replication::replica::supervise) starts the link.
    shared.replication.follow(host, port);
}

/// REPLICAOF NO ONE: this node becomes a primary in a new epoch (the one given, or its own plus one), so its tokens
/// exceed every token the old primary issued; a new replication id starts its history (replicas of the old primary
/// resync).
fn promote(shared: &Arc<Shared>, store: &mut crate::store::Store, epoch: Option<u64>) {
    shared.replication.stop_following();
    // Leases were for the role or the epoch this node leaves; its coordinators lease it again in the new one.
    shared.replication.lease.drop_leases();
    store.replica = false;
    store.set_expiry(Expiry::Active);
    let own = store.locks.tokens.epoch() as u64;
    let epoch = epoch.unwrap_or(own.max(shared.replication.promised_epoch()) + 1).max(own).min(crate::locks::tokens::MAX_EPOCH as u64) as u16;
    store.locks.tokens.set_epoch(epoch);
    let _ = shared.replication.promise(epoch as u64);
    // Replicas of the old primary that hold no more than this node resume here without a snapshot.
    shared.replication.begin_history(shared.journal.last_lsn());
    tracing::warn!("promoted to primary (REPLICAOF NO ONE): failover epoch {epoch}");
}

fn role(ctx: &mut Ctx) -> Value {
    let shared = ctx.shared;
    let b = |s: String| Value::bulk(Bytes::from(s));
    match shared.replication.upstream() {
        Some(u) => Value::Array(vec![
            b("slave".into()),
            b(u.host),
            Value::Integer(u.port as i64),
            b(u.state.into()),
            Value::Integer(shared.journal.last_lsn() as i64),
        ]),
        None => {
            let replicas = shared
                .replication
                .downstream()
                .into_iter()
                .filter(|d| d.state == "online")
                .map(|d| Value::Array(vec![b(d.ip), b(d.port.to_string()), b(d.received.to_string())]))
                .collect();
            Value::Array(vec![b("master".into()), Value::Integer(shared.journal.last_lsn() as i64), Value::Array(replicas)])
        }
    }
}

fn timeout_arg(a: &[u8]) -> Result<u64, Value> {
    match int_arg(a) {
        Ok(t) if t < 0 => Err(Value::error(ERR_TIMEOUT_NEGATIVE)),
        Ok(t) => Ok(t as u64),
        Err(_) => Err(Value::error(ERR_TIMEOUT_NOT_INTEGER)),
    }
}

/// WAIT numreplicas timeout: replicas that received everything this node logged so far (the caller's writes
/// included). The reply is the count reached, also after the timeout (0 = wait forever); nothing is undone.
fn wait(ctx: &mut Ctx) -> Value {
    let n = match int_arg(&ctx.args[1]) {
        Ok(n) => n.max(0) as usize,
        Err(e) => return e,
    };
    let timeout = match timeout_arg(&ctx.args[2]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if ctx.shared.replication.is_replica() {
        return Value::error(ERR_WAIT_ON_REPLICA);
    }
    let lsn = ctx.shared.commit_log(ctx.store());
    let need = Need { lsn, local: false, replicas: n, counted: Counted::Received };
    block_until(ctx, timeout, need, move |s| Value::Integer(s.journal.durability.replicas_at(lsn, Counted::Received) as i64))
}

/// WAITAOF numlocal numreplicas timeout: `[1 if fsynced here, replicas that fsynced it]` (only replicas with
/// appendonly count).
fn waitaof(ctx: &mut Ctx) -> Value {
    let (local, n) = match (int_arg(&ctx.args[1]), int_arg(&ctx.args[2])) {
        (Ok(l), Ok(n)) if l >= 0 && n >= 0 => (l, n as usize),
        (Ok(_), Ok(_)) => return Value::error(ERR_VALUE_OUT_OF_RANGE),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let timeout = match timeout_arg(&ctx.args[3]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if ctx.shared.replication.is_replica() {
        return Value::error(ERR_WAITAOF_ON_REPLICA);
    }
    if local > 0 && !ctx.shared.aof.enabled() {
        return Value::error(ERR_WAITAOF_NO_AOF);
    }
    let lsn = ctx.shared.commit_log(ctx.store());
    ctx.shared.aof.request_fsync();
    let need = Need { lsn, local: local > 0, replicas: n, counted: Counted::Fsynced };
    block_until(ctx, timeout, need, move |s| {
        let here = (s.aof.enabled() && s.journal.durability.local() >= lsn) as i64;
        let replicas = s.journal.durability.replicas_at(lsn, Counted::Fsynced) as i64;
        Value::Array(vec![Value::Integer(here), Value::Integer(replicas)])
    })
}

/// Answers at once when `need` is met, else makes the connection wait until the fsync or acknowledgement that
/// meets it (the journal's durability wakes exactly that waiter), the timeout (`timeout_ms`, 0 = forever) or
/// shutdown; `reply` then reports what was reached.
fn block_until(ctx: &mut Ctx, timeout_ms: u64, need: Need, reply: impl Fn(&Shared) -> Value + Send + 'static) -> Value {
    if ctx.in_exec || ctx.shared.journal.durability.met(need) {
        return reply(ctx.shared);
    }
    ctx.unlock();
    let (mut tx, rx) = tokio::sync::oneshot::channel();
    let shared = ctx.shared.clone();
    let deadline = (timeout_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(timeout_ms));
    tokio::spawn(async move {
        let mut shutdown = shared.shutdown.subscribe();
        let timeout = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shared.journal.durability.wait(need) => {}
            _ = timeout => shared.journal.durability.forget_abandoned(),
            _ = shutdown.wait_for(|s| *s) => {}
            _ = tx.closed() => return shared.journal.durability.forget_abandoned(),
        }
        let _ = tx.send(reply(&shared));
    });
    ctx.set_block(Block { rx, timeout: None, cancel: Box::new(|_| {}), abandon: None, timeout_reply: Value::Integer(0) });
    Value::Nil
}

/// PSYNC <replid> <next lsn> <epoch> <appendonly 0|1> <listening port>: a Ruvio replica asks for the stream; the
/// connection becomes the replication link. Redis's two-argument form (a redis-server replica) is refused.
fn psync(ctx: &mut Ctx) -> Value {
    let a = ctx.args;
    if a.len() != 6 {
        return Value::error(ERR_PSYNC_FOREIGN);
    }
    let num = |b: &Bytes| std::str::from_utf8(b).ok().and_then(|s| s.parse::<u64>().ok());
    let (Some(next_lsn), Some(epoch), Some(aof), Some(port)) = (num(&a[2]), num(&a[3]), num(&a[4]), num(&a[5])) else {
        return Value::error(ERR_SYNTAX);
    };
    if ctx.shared.replication.is_replica() {
        return Value::error(ERR_PSYNC_ON_REPLICA);
    }
    let req = Handover {
        replid: String::from_utf8_lossy(&a[1]).into_owned(),
        next_lsn,
        epoch: epoch.min(u16::MAX as u64) as u16,
        aof: aof == 1,
        port: port.min(65535) as u16,
    };
    ctx.client.handover = Some(req);
    ctx.client.close_without_reply = true;
    Value::Nil
}

/// REPLCONF: accepted (listening-port, capa, ...) for tools that send it; acknowledgements travel on the link.
fn replconf(ctx: &mut Ctx) -> Value {
    if ctx.args.len().is_multiple_of(2) {
        return Value::error(ERR_SYNTAX);
    }
    Value::ok()
}

/// REPLICATION PROMISE epoch: the failover step that fences the old primary (docs/replication.md).
/// REPLICATION PROMISE WITHDRAW: an operator takes a promise back, down to this node's own epoch (a replica that
/// promised an attempt that will never finish follows its primary again).
fn replication_promise(ctx: &mut Ctx) -> Value {
    if eq_ic(&ctx.args[2], "withdraw") {
        let own = ctx.store().locks.tokens.epoch() as u64;
        let before = ctx.shared.replication.withdraw_promise(own);
        tracing::warn!("REPLICATION PROMISE WITHDRAW: the promise of epoch {before} is taken back to this node's epoch {own}");
        return promise_reply(ctx);
    }
    let e = match int_arg(&ctx.args[2]) {
        Ok(e) if (0..=crate::locks::tokens::MAX_EPOCH as i64).contains(&e) => e as u64,
        _ => return Value::error(ERR_EPOCH_RANGE),
    };
    if let Err(p) = ctx.shared.replication.promise(e) {
        return Value::error(epoch_older_than_promised(e, p));
    }
    promise_reply(ctx)
}

/// [promised epoch, LSN, fsynced LSN].
fn promise_reply(ctx: &mut Ctx) -> Value {
    let fsynced = if ctx.shared.aof.enabled() { ctx.shared.journal.durability.local() } else { 0 };
    Value::Array(vec![
        Value::Integer(ctx.shared.replication.promised_epoch() as i64),
        Value::Integer(ctx.shared.journal.last_lsn() as i64),
        Value::Integer(fsynced as i64),
    ])
}

/// REPLICATION LEASE epoch ms coordinator-id coordinators [DURABLE host:port ...] | REPLICATION LEASE OFF
/// (replication/lease.rs).
fn replication_lease(ctx: &mut Ctx) -> Value {
    let a = ctx.args;
    let durability = &ctx.shared.journal.durability;
    if a.len() == 3 && eq_ic(&a[2], "off") {
        ctx.shared.replication.stop_requiring_lease(durability);
        return Value::ok();
    }
    let durable = match a.get(6) {
        None if a.len() == 6 => None,
        Some(k) if eq_ic(k, "durable") && a.len() - 7 <= MAX_DURABILITY_SET => {
            Some(a[7..].iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect())
        }
        _ => return Value::error(ERR_SYNTAX),
    };
    let num = |b: &Bytes| int_arg(b).ok().filter(|n| *n >= 0).map(|n| n as u64);
    let (Some(epoch), Some(ms), Some(id), Some(of)) = (num(&a[2]), num(&a[3]), num(&a[4]), num(&a[5])) else {
        return Value::error(ERR_SYNTAX);
    };
    if !(1..=MAX_LEASE_MS).contains(&ms) || !(1..=MAX_COORDINATORS).contains(&of) || !(1..=of).contains(&id) {
        return Value::error(ERR_LEASE_RANGE);
    }
    if ctx.shared.replication.is_replica() {
        return Value::error(ERR_LEASE_ON_REPLICA);
    }
    let own = ctx.store().locks.tokens.epoch() as u64;
    if epoch != own {
        return Value::error(lease_for_other_epoch(epoch, own));
    }
    ctx.shared.replication.grant_lease(id, of as usize, ms, durable, durability);
    Value::ok()
}

/// The longest lease a coordinator may give (its down-after-milliseconds is far below).
const MAX_LEASE_MS: u64 = 600_000;
