//! Lock commands: LEASE, RENEW, RELEASE, SEMAPHORE, IFGT, LOCKINFO, and the internal records LOCKSET, LOCKDROP
//! and FENCESET that the write log holds instead of them. The rules live in [`crate::locks::engine`]; these
//! handlers parse arguments and shape replies. The engine logs every write itself (with explicit tokens and
//! absolute deadlines), so the handlers propagate nothing.

use std::sync::Arc;
use std::time::Duration;

use ruvio_protocol::Value;

use super::flags::*;
use ruvio_protocol::lock_args::{self, LockArgError, LockCommand};

use super::{eq_ic, int_arg, parse_i64, CommandSpec, ERR_NOT_INTEGER, ERR_SYNTAX};
use super::context::{Caller, Ctx};
use crate::blocking::Block;
use crate::locks::engine::{self, LockError};
use crate::locks::{replay, Grantee, Want};
use crate::shared::Shared;
use crate::store::Store;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: "lock", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("lease", -3, WRITE | DENYOOM | FAST | BLOCKING, (1, 1, 1), "Takes a single-holder lock with a TTL and returns its fencing token, or nil when it is held.", lease),
    cmd!("renew", 4, WRITE | FAST | TOKEN_ARG, (1, 1, 1), "Moves the deadline of a lock held with the given token.", renew),
    cmd!("release", 3, WRITE | FAST | TOKEN_ARG, (1, 1, 1), "Releases a lock (or semaphore slot) held with the given token.", release),
    cmd!("semaphore", -4, WRITE | DENYOOM | FAST | BLOCKING, (1, 1, 1), "Takes one of N slots of a semaphore with its own TTL and fencing token, or nil when all are taken.", semaphore),
    cmd!("ifgt", -4, WRITE | DENYOOM | TOKEN_ARG, (1, 1, 1), "Writes a string value only if no higher fencing token has written the key.", ifgt),
    cmd!("lockinfo", 2, READONLY | FAST, (1, 1, 1), "Shows a lock's kind, limit, holders with their tokens and remaining time, and waiters.", lockinfo),
    // NOSCRIPT: LOCKS answers tokens as integers, which Lua would round (scripts use LOCKINFO, whose tokens are strings there).
    cmd!("locks", -2, READONLY | NOSCRIPT, (0, 0, 0), "Iterates over the locks of the database (like SCAN), with each holder's token, remaining time, grant time and client.", locks),
    cmd!("lockset", 6, WRITE | LOADING | INTERNAL, (1, 1, 1), "Internal write-log record: a lock holder with explicit token and wall-clock deadline.", lockset),
    cmd!("lockdrop", 3, WRITE | LOADING | INTERNAL, (1, 1, 1), "Internal write-log record: a lock holder is gone.", lockdrop),
    cmd!("fenceset", 5, WRITE | LOADING | INTERNAL, (1, 1, 1), "Internal write-log record: a fenced write (IFGT) with explicit token and wall-clock deadline.", fenceset),
];

// Arguments are parsed by the typed lock commands the Rust client shares (`ruvio_protocol::lock_args`): one
// definition of each command's syntax, limits and error texts for both sides.

fn lease(ctx: &mut Ctx) -> Value {
    match lock_args::Lease::parse(ctx.args) {
        Ok(cmd) => acquire(ctx, Want::Lease, cmd.ttl_ms, cmd.wait()),
        Err(e) => e.into(),
    }
}

fn semaphore(ctx: &mut Ctx) -> Value {
    match lock_args::Semaphore::parse(ctx.args) {
        // The parser bounded the limit by MAX_LIMIT, so it fits a u32.
        Ok(cmd) => acquire(ctx, Want::Semaphore { limit: cmd.limit as u32 }, cmd.ttl_ms, cmd.wait()),
        Err(e) => e.into(),
    }
}

/// LEASE and SEMAPHORE: grant now, or queue the client when it asked to WAIT (never inside MULTI/EXEC).
fn acquire(ctx: &mut Ctx, want: Want, ttl_ms: u64, wait: Option<Option<Duration>>) -> Value {
    ctx.propagate_nothing();
    let (key, db, now) = (ctx.args[1].clone(), ctx.client.db, ctx.now);
    let granted = engine::acquire(ctx.store(), db, &key, want, ttl_ms, now);
    match granted {
        Err(e) => e.reply(),
        Ok(Some(token)) => {
            let who = grantee(ctx);
            engine::note_grant(ctx.store(), db, &key, token, who);
            ctx.client.note_durable_grant(db, key, token);
            token_value(ctx, token)
        }
        Ok(None) => match wait {
            Some(timeout) if !ctx.in_exec => {
                if ctx.client.durability_replicas > 0 {
                    // The grant arrives later, made by whoever frees the lock: the connection records it then.
                    ctx.client.lock_wait = Some((db, key.clone()));
                }
                let (tx, rx) = tokio::sync::oneshot::channel();
                let who = grantee(ctx);
                let id = engine::enqueue_waiter_as(ctx.store(), db, &key, want, ttl_ms, tx, Some(who));
                let shared: Arc<Shared> = ctx.shared.clone();
                let abandon_shared = shared.clone();
                let cancel_key = key.clone();
                ctx.set_block(Block {
                    rx,
                    timeout,
                    cancel: Box::new(move |store: &mut Store| {
                        engine::cancel_waiter(store, db, &cancel_key, id);
                        // Withdrawing a waiter can unblock the queue behind it; those grants set timers.
                        shared.after_command(store, crate::clock::mono_ms());
                    }),
                    abandon: Some(Box::new(move |store: &mut Store, granted: Value| {
                        // Granted just as the client left: nobody will use the token, so free the lock now.
                        if let Value::Integer(token) = granted {
                            let now = crate::clock::mono_ms();
                            let _ = engine::release(store, db, &key, token, now);
                            abandon_shared.after_command(store, now);
                        }
                    })),
                    timeout_reply: Value::Nil,
                });
                Value::Nil
            }
            _ => Value::Nil,
        },
    }
}

/// A fencing token as the caller gets it: an integer, except in a script, where it is an exact decimal string.
/// Lua 5.1 numbers are doubles, and every token of epoch 1 and above is beyond 2^53, where a double rounds it (two
/// tokens could become one value, and a stale holder's fenced write would pass). Scripts pass the string back as it
/// is; see `script_host` for tokens passed as numbers.
fn token_value(ctx: &Ctx, token: i64) -> Value {
    if ctx.caller == Caller::Script {
        Value::bulk(bytes::Bytes::from(token.to_string()))
    } else {
        Value::Integer(token)
    }
}

/// The calling connection as LOCKS shows a holder: id, CLIENT SETNAME name, address (a script's or a replayed
/// record's caller shows the connection that ran it, or the replay's pseudo client).
fn grantee(ctx: &Ctx) -> Grantee {
    let info = &ctx.client.info;
    Grantee { client_id: info.id, name: info.name.lock().clone(), addr: info.addr.clone() }
}

fn renew(ctx: &mut Ctx) -> Value {
    ctx.propagate_nothing();
    let cmd = match lock_args::Renew::parse(ctx.args) {
        Ok(cmd) => cmd,
        Err(e) => return e.into(),
    };
    let (db, now) = (ctx.client.db, ctx.now);
    reply_bool(engine::renew(ctx.store(), db, &cmd.key, cmd.token, cmd.ttl_ms, now))
}

fn release(ctx: &mut Ctx) -> Value {
    ctx.propagate_nothing();
    let cmd = match lock_args::Release::parse(ctx.args) {
        Ok(cmd) => cmd,
        Err(e) => return e.into(),
    };
    let (db, now) = (ctx.client.db, ctx.now);
    reply_bool(engine::release(ctx.store(), db, &cmd.key, cmd.token, now))
}

fn reply_bool(r: Result<bool, LockError>) -> Value {
    match r {
        Ok(done) => Value::Integer(done as i64),
        Err(e) => e.reply(),
    }
}

/// `IFGT key token value [PX ms]`
fn ifgt(ctx: &mut Ctx) -> Value {
    ctx.propagate_nothing();
    let cmd = match lock_args::Ifgt::parse(ctx.args) {
        Ok(cmd) => cmd,
        Err(e) => return e.into(),
    };
    let now = ctx.now;
    let deadline = cmd.px_ms.map_or(0, |ms| now.saturating_add(ms));
    let db = ctx.client.db;
    reply_bool(engine::fence_write(ctx.store(), db, &cmd.key, cmd.token, &cmd.value, deadline, now))
}

fn lockinfo(ctx: &mut Ctx) -> Value {
    let (db, now) = (ctx.client.db, ctx.now);
    let key = ctx.args[1].clone();
    let info = match engine::info(ctx.store(), db, &key, now) {
        Ok(Some(info)) => info,
        Ok(None) => return Value::Nil,
        Err(e) => return e.reply(),
    };
    let holders = info
        .holders
        .iter()
        .map(|h| {
            Value::Map(vec![
                (Value::bulk_str("token"), token_value(ctx, h.token)),
                (Value::bulk_str("remaining_ms"), Value::Integer(h.remaining_ms as i64)),
            ])
        })
        .collect();
    Value::Map(vec![
        (Value::bulk_str("kind"), Value::bulk_str(info.kind)),
        (Value::bulk_str("limit"), Value::Integer(info.limit as i64)),
        (Value::bulk_str("holders"), Value::Array(holders)),
        (Value::bulk_str("waiters"), Value::Integer(info.waiters as i64)),
    ])
}

/// `LOCKS cursor [MATCH pattern] [COUNT n]`: SCAN's iteration (same cursor, guarantees and bounds) over the lock keys
/// of the selected database; each lock as LOCKINFO shows it plus its key, and each holder with its grant time and
/// the client it was granted to. LOCKINFO's reply is left as it is: every client parses it.
fn locks(ctx: &mut Ctx) -> Value {
    let (args, now, db) = (ctx.args, ctx.now, ctx.client.db);
    let text = std::str::from_utf8(&args[1]).unwrap_or("x");
    let Some(cursor) = text.parse::<u64>().ok().or_else(|| text.parse::<i64>().ok().map(|c| c as u64)) else {
        return Value::error(crate::errors::ERR_INVALID_CURSOR);
    };
    let mut pattern: Option<bytes::Bytes> = None;
    let mut count = 10usize;
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Value::error(ERR_SYNTAX);
        }
        if eq_ic(&args[i], "match") {
            pattern = Some(args[i + 1].clone());
        } else if eq_ic(&args[i], "count") {
            match int_arg(&args[i + 1]) {
                Ok(c) if c >= 1 => count = c as usize,
                Ok(_) => return Value::error(ERR_SYNTAX),
                Err(e) => return e,
            }
        } else {
            return Value::error(ERR_SYNTAX);
        }
        i += 2;
    }
    let store = ctx.store();
    let (next, keys) = store.dbs[db].scan(cursor, count, now, |k, e| {
        e.data.is_lock() && pattern.as_ref().is_none_or(|p| p.as_ref() == b"*" || crate::keyspace::glob::glob_match(p, k, false))
    });
    let mut locks = Vec::with_capacity(keys.len());
    for key in keys {
        // engine::info settles the key first (a holder whose TTL just ended is not shown), as LOCKINFO does.
        let Ok(Some(info)) = engine::info(store, db, &key, now) else { continue };
        let wall_now = crate::clock::wall_ms();
        let holders = info
            .holders
            .iter()
            .map(|h| {
                let (granted_ms, who) = engine::holder_grant(store, db, &key, h.token);
                let nil_or = |v: Option<Value>| v.unwrap_or(Value::Nil);
                Value::Map(vec![
                    (Value::bulk_str("token"), Value::Integer(h.token)),
                    (Value::bulk_str("remaining_ms"), Value::Integer(h.remaining_ms as i64)),
                    (Value::bulk_str("granted_ms"), Value::Integer(granted_ms)),
                    (Value::bulk_str("held_ms"), Value::Integer(wall_now.saturating_sub(granted_ms).max(0))),
                    (Value::bulk_str("client_id"), nil_or(who.map(|w| Value::Integer(w.client_id as i64)))),
                    // No name (CLIENT SETNAME never called) is nil, as CLIENT GETNAME answers.
                    (Value::bulk_str("client_name"), nil_or(who.filter(|w| !w.name.is_empty()).map(|w| Value::Bulk(w.name.clone())))),
                    (Value::bulk_str("client_addr"), nil_or(who.map(|w| Value::bulk_str(&w.addr)))),
                ])
            })
            .collect();
        locks.push(Value::Map(vec![
            (Value::bulk_str("key"), Value::Bulk(bytes::Bytes::copy_from_slice(&key))),
            (Value::bulk_str("kind"), Value::bulk_str(info.kind)),
            (Value::bulk_str("limit"), Value::Integer(info.limit as i64)),
            (Value::bulk_str("holders"), Value::Array(holders)),
            (Value::bulk_str("waiters"), Value::Integer(info.waiters as i64)),
        ]));
    }
    Value::Array(vec![Value::Bulk(bytes::Bytes::from(next.to_string())), Value::Array(locks)])
}

// ----- internal records (see crate::locks::records, applied by crate::locks::replay); replayed by persistence, streamed to replicas -----

fn wall_arg(b: &[u8]) -> Result<i64, Value> {
    match parse_i64(b) {
        Some(t) if t >= 0 => Ok(t),
        _ => Err(Value::error(ERR_NOT_INTEGER)),
    }
}

/// `LOCKSET key lease|semaphore limit token deadline_wall_ms`
fn lockset(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let parsed = (|| {
        let limit = int_arg(&args[3])?;
        if !(1..=lock_args::MAX_LIMIT as i64).contains(&limit) {
            return Err(LockArgError::Limit.into());
        }
        let want = if eq_ic(&args[2], "lease") {
            Want::Lease
        } else if eq_ic(&args[2], "semaphore") {
            Want::Semaphore { limit: limit as u32 }
        } else {
            return Err(Value::error(ERR_SYNTAX));
        };
        Ok((want, lock_args::parse_token(&args[4])?, wall_arg(&args[5])?))
    })();
    let (want, token, wall) = match parsed {
        Ok(p) => p,
        Err(e) => return e,
    };
    let (db, now) = (ctx.client.db, ctx.now);
    replay::apply_lockset(ctx.store(), db, &args[1], want, token, wall, now);
    Value::ok()
}

/// `LOCKDROP key token`
fn lockdrop(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let token = match lock_args::parse_token(&args[2]) {
        Ok(t) => t,
        Err(e) => return e.into(),
    };
    let (db, now) = (ctx.client.db, ctx.now);
    replay::apply_lockdrop(ctx.store(), db, &args[1], token, now);
    Value::ok()
}

/// `FENCESET key token value deadline_wall_ms`
fn fenceset(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let (token, wall) = match (lock_args::parse_token(&args[2]).map_err(Value::from), wall_arg(&args[4])) {
        (Ok(t), Ok(w)) => (t, w),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let (db, now) = (ctx.client.db, ctx.now);
    replay::apply_fenceset(ctx.store(), db, &args[1], token, &args[3], wall, now);
    Value::ok()
}
