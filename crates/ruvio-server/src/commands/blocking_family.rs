//! The blocking list and sorted-set commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP)
//! and the serving of the clients they block.
//!
//! A blocking command first tries to run as its non-blocking form; if every key is empty it registers a waiter in
//! `Store::waiters` (one FIFO queue per key) and hands the connection a [`Block`] with its timeout. Inside MULTI and
//! scripts it never blocks: it answers as on a timeout at once, as in Redis.
//!
//! A write command flagged `write` marks the keys it names as ready when someone waits for them
//! (`commands::call`); once the command (or EXEC, or script) is over, [`serve_ready`] gives each ready key's data to
//! its waiters in arrival order, logs each pop as the non-blocking command that replays it (LPOP key n, LMOVE,
//! ZPOPMIN key n; as Redis propagates them) and sends the reply down the waiter's channel. A waiter whose
//! connection went away is skipped (its channel is closed under the store lock, so this never pops for nobody).

use std::time::Duration;

use bytes::Bytes;
use ruvio_protocol::{Protocol, Value};

use super::context::Ctx;
use super::list_family::{self, lmpop_reply, move_element, pop_elements, read_list};
use super::zset_family::{self, mpop_reply, read_zset, score_reply};
use crate::blocking::Block;
use crate::errors::*;
use crate::keyspace::{Data, Entry};
use crate::store::{KeyWaiter, Store, WaitOp};

/// The longest wait a timeout may ask for (Redis accepts any positive double; a longer one is as good as forever).
const MAX_TIMEOUT_SECS: f64 = 10.0 * 365.0 * 86400.0;

/// A blocking command's timeout in seconds (a double; 0 = forever).
fn parse_timeout(b: &[u8]) -> Result<Option<Duration>, Value> {
    let t = super::parse_f64(b).filter(|t| t.is_finite()).ok_or_else(|| Value::error(zset_family::ERR_TIMEOUT_NOT_FLOAT))?;
    if t < 0.0 {
        return Err(Value::error(ERR_TIMEOUT_NEGATIVE));
    }
    Ok((t > 0.0).then(|| Duration::from_secs_f64(t.min(MAX_TIMEOUT_SECS))))
}

/// Registers the client as waiting for `keys` and hands the connection the [`Block`]; inside MULTI or a script
/// answers `timeout_reply` at once instead.
fn block_on(ctx: &mut Ctx, keys: Vec<Bytes>, op: WaitOp, timeout: Option<Duration>, timeout_reply: Value) -> Value {
    if ctx.in_exec {
        return timeout_reply;
    }
    // Nothing was popped: nothing to log.
    ctx.propagate_nothing();
    let db = ctx.client.db;
    let resp3 = ctx.client.proto == Protocol::Resp3;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let n = ctx.client.durability_replicas;
    let durable = (n > 0).then(|| (n, ctx.client.info.clone()));
    let id = ctx.store().waiters.add(KeyWaiter { db, keys, op, resp3, tx, durable });
    ctx.client.info.unblockable.store(true, std::sync::atomic::Ordering::Relaxed);
    ctx.set_block(Block {
        rx,
        timeout,
        cancel: Box::new(move |store: &mut Store| {
            store.waiters.remove(id);
        }),
        // A value that arrived just as the client left was popped for nobody; like Redis, it is not given back.
        // Present so that the connection always withdraws the waiter under the lock.
        abandon: Some(Box::new(|_: &mut Store, _: Value| {})),
        timeout_reply,
    });
    Value::Nil
}

fn keys_and_timeout(args: &[Bytes]) -> Result<(Vec<Bytes>, Option<Duration>), Value> {
    let timeout = parse_timeout(&args[args.len() - 1])?;
    Ok((args[1..args.len() - 1].to_vec(), timeout))
}

// ----- lists -----

fn bpop(ctx: &mut Ctx, right: bool) -> Value {
    let (keys, timeout) = match keys_and_timeout(ctx.args) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let now = ctx.now;
    for key in &keys {
        let db = ctx.db();
        match read_list(db, key, now) {
            Err(e) => return e,
            Ok(None) => {}
            Ok(Some(_)) => {
                let e = pop_elements(db, key, now, right, 1).into_iter().next().expect("non-empty list");
                ctx.propagate_as(vec![Bytes::from_static(if right { b"RPOP" } else { b"LPOP" }), key.clone()]);
                return Value::Array(vec![Value::Bulk(key.clone()), Value::Bulk(e)]);
            }
        }
    }
    block_on(ctx, keys, WaitOp::ListPop { right, count: None }, timeout, Value::NilArray)
}

pub fn blpop(ctx: &mut Ctx) -> Value {
    bpop(ctx, false)
}
pub fn brpop(ctx: &mut Ctx) -> Value {
    bpop(ctx, true)
}

fn bmove(ctx: &mut Ctx, from_right: bool, to_right: bool, timeout_arg: &Bytes) -> Value {
    let timeout = match parse_timeout(timeout_arg) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let (src, dst, now) = (ctx.args[1].clone(), ctx.args[2].clone(), ctx.now);
    match move_element(ctx.db(), &src, &dst, from_right, to_right, now) {
        Err(e) => e,
        Ok(Some(e)) => {
            ctx.propagate_as(move_record(&src, &dst, from_right, to_right));
            Value::Bulk(e)
        }
        Ok(None) => block_on(ctx, vec![src], WaitOp::ListMove { dst, from_right, to_right }, timeout, Value::Nil),
    }
}

fn move_record(src: &Bytes, dst: &Bytes, from_right: bool, to_right: bool) -> Vec<Bytes> {
    let end = |r: bool| Bytes::from_static(if r { b"RIGHT" } else { b"LEFT" });
    vec![Bytes::from_static(b"LMOVE"), src.clone(), dst.clone(), end(from_right), end(to_right)]
}

pub fn blmove(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let (Some(from), Some(to)) = (list_family::parse_end_arg(&args[3]), list_family::parse_end_arg(&args[4])) else {
        return Value::error(ERR_SYNTAX);
    };
    bmove(ctx, from, to, &args[5])
}

pub fn brpoplpush(ctx: &mut Ctx) -> Value {
    let t = ctx.args[3].clone();
    bmove(ctx, true, false, &t)
}

/// `timeout numkeys key [key ...] <first|second> [COUNT count]` of BLMPOP and BZMPOP: the timeout, the keys, whether
/// the second direction was named, and the count.
type MpopArgs<'a> = (Option<Duration>, &'a [Bytes], bool, usize);
fn blocking_mpop_args<'a>(args: &'a [Bytes], directions: (&str, &str)) -> Result<MpopArgs<'a>, Value> {
    let timeout = parse_timeout(&args[1])?;
    let (keys, next) = zset_family::numkeys_list(args, 2)?;
    let (second, count) = zset_family::mpop_options(args, next, directions)?;
    Ok((timeout, keys, second, count))
}

pub fn blmpop(ctx: &mut Ctx) -> Value {
    let (timeout, keys, right, count) = match blocking_mpop_args(ctx.args, ("left", "right")) {
        Ok(a) => a,
        Err(e) => return e,
    };
    match list_family::lmpop_now(ctx, keys, right, count) {
        Err(e) => e,
        Ok(Some((key, items))) => lmpop_reply(&key, items),
        Ok(None) => block_on(ctx, keys.to_vec(), WaitOp::ListPop { right, count: Some(count) }, timeout, Value::NilArray),
    }
}

// ----- sorted sets -----

pub fn bzpop(ctx: &mut Ctx, max: bool) -> Value {
    let (keys, timeout) = match keys_and_timeout(ctx.args) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let (now, r3) = (ctx.now, ctx.client.proto == Protocol::Resp3);
    for key in &keys {
        let db = ctx.db();
        match read_zset(db, key, now) {
            Err(e) => return e,
            Ok(None) => {}
            Ok(Some(_)) => {
                let (m, s) = zset_family::pop(db, key, now, max, 1).into_iter().next().expect("non-empty sorted set");
                ctx.propagate_as(vec![Bytes::from_static(if max { b"ZPOPMAX" } else { b"ZPOPMIN" }), key.clone()]);
                return Value::Array(vec![Value::Bulk(key.clone()), Value::Bulk(m), score_reply(r3, s)]);
            }
        }
    }
    block_on(ctx, keys, WaitOp::ZPop { max, count: None }, timeout, Value::NilArray)
}

pub fn bzmpop(ctx: &mut Ctx) -> Value {
    let (timeout, keys, max, count) = match blocking_mpop_args(ctx.args, ("min", "max")) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let r3 = ctx.client.proto == Protocol::Resp3;
    match zset_family::mpop_now(ctx, keys, max, count) {
        Err(e) => e,
        Ok(Some((key, items))) => mpop_reply(r3, &key, &items),
        Ok(None) => block_on(ctx, keys.to_vec(), WaitOp::ZPop { max, count: Some(count) }, timeout, Value::NilArray),
    }
}

// ----- serving -----

/// Whether `data` is what a waiter with `op` pops from.
fn has_data_for(op: &WaitOp, data: Option<&Entry>) -> bool {
    match (op, data.map(|e| &e.data)) {
        (WaitOp::ListPop { .. } | WaitOp::ListMove { .. }, Some(Data::List(l))) => !l.is_empty(),
        (WaitOp::ZPop { .. }, Some(Data::ZSet(z))) => !z.is_empty(),
        _ => false,
    }
}

/// Serves the clients blocked on the keys written since the last call, in arrival order per key, while each key
/// has data. Each pop is logged as the command that replays it, then the reply is sent.
/// Returns the records of the pops made (for keyspace notifications).
///
/// A waiter on a durable connection (`CLIENT DURABILITY REPLICAS n`) is served as its command would run then: with
/// fewer than n replicas streaming it gets `NOREPLICAS` and nothing is popped for it (refused before it runs, like
/// any durable write); otherwise its pop is noted as its connection's write, which holds the reply back until n
/// replicas fsynced it (or answers NOTDURABLE after `durability-timeout`: connection.rs, replication/durable.rs).
pub fn serve_ready(shared: &crate::shared::Shared, store: &mut Store) -> Vec<(usize, Vec<Bytes>)> {
    let now = crate::clock::mono_ms();
    store.set_now(now);
    let mut served = Vec::new();
    while !store.waiters.ready.is_empty() {
        let ready = std::mem::take(&mut store.waiters.ready);
        let mut seen = hashbrown::HashSet::new();
        for (db, key) in ready {
            if !seen.insert((db, key.clone())) {
                continue;
            }
            serve_key(shared, store, db, &key, now, &mut served);
        }
    }
    served
}

/// Keyspace notifications for the pops [`serve_ready`] made.
pub fn notify_served(shared: &crate::shared::Shared, store: &mut Store, served: Vec<(usize, Vec<Bytes>)>) {
    if served.is_empty() || shared.notify_flags.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return;
    }
    for (db, record) in served {
        publish_notices(shared, store, db, crate::notify_events_of_record(&record));
    }
}

/// Publishes `notices` (class, event, key) of database `db`, then `del` for each key the change left missing.
pub fn publish_notices(shared: &crate::shared::Shared, store: &mut Store, db: usize, notices: Vec<(u32, &'static str, Bytes)>) {
    for (class, event, key) in &notices {
        shared.notify_keyspace(db, *class, event, key);
    }
    let mut seen = hashbrown::HashSet::new();
    for (_, event, key) in &notices {
        let gone_by_itself = matches!(*event, "del" | "rename_from" | "move_from" | "expire" | "persist");
        if !gone_by_itself && seen.insert(key.clone()) && store.dbs[db].peek(key).is_none() {
            shared.notify_keyspace(db, crate::notify::GENERIC, "del", key);
        }
    }
}

fn serve_key(shared: &crate::shared::Shared, store: &mut Store, db: usize, key: &Bytes, now: u64, served: &mut Vec<(usize, Vec<Bytes>)>) {
    loop {
        let Some(queue) = store.waiters.queues.get(&(db, key.clone())) else { return };
        // The first waiter in line whose kind of value this key holds.
        let data = store.dbs[db].get(key, now);
        let Some(&id) = queue.iter().find(|id| store.waiters.by_id.get(id).is_some_and(|w| has_data_for(&w.op, data))) else { return };
        let w = store.waiters.remove(id).expect("queued waiters are registered");
        if w.tx.is_closed() {
            continue; // left while blocked
        }
        if let Some((n, _)) = &w.durable {
            if shared.replication.online_durable_replicas() < *n {
                let _ = w.tx.send(Value::error(ERR_NOREPLICAS));
                continue;
            }
        }
        let (reply, record) = match &w.op {
            WaitOp::ListPop { right, count } => {
                let items = pop_elements(&mut store.dbs[db], key, now, *right, count.unwrap_or(1));
                let name: &'static [u8] = if *right { b"RPOP" } else { b"LPOP" };
                let mut record = vec![Bytes::from_static(name), key.clone()];
                match count {
                    None => (Value::Array(vec![Value::Bulk(key.clone()), Value::Bulk(items[0].clone())]), record),
                    Some(_) => {
                        record.push(Bytes::from(items.len().to_string()));
                        (lmpop_reply(key, items), record)
                    }
                }
            }
            WaitOp::ListMove { dst, from_right, to_right } => match move_element(&mut store.dbs[db], key, dst, *from_right, *to_right, now) {
                // The destination holds something else now: the waiter gets the error (as in Redis), the source
                // keeps its element.
                Err(e) => (e, Vec::new()),
                Ok(e) => {
                    // The element may unblock someone waiting on the destination.
                    store.waiters.touched(db, dst);
                    (e.map_or(Value::Nil, Value::Bulk), move_record(key, dst, *from_right, *to_right))
                }
            },
            WaitOp::ZPop { max, count } => {
                let items = zset_family::pop(&mut store.dbs[db], key, now, *max, count.unwrap_or(1));
                let name: &'static [u8] = if *max { b"ZPOPMAX" } else { b"ZPOPMIN" };
                let mut record = vec![Bytes::from_static(name), key.clone()];
                match count {
                    None => {
                        let (m, s) = &items[0];
                        (Value::Array(vec![Value::Bulk(key.clone()), Value::Bulk(m.clone()), score_reply(w.resp3, *s)]), record)
                    }
                    Some(_) => {
                        record.push(Bytes::from(items.len().to_string()));
                        (mpop_reply(w.resp3, key, &items), record)
                    }
                }
            }
        };
        if !record.is_empty() {
            store.log(db, record.clone());
            served.push((db, record));
            if let Some((_, info)) = &w.durable {
                info.durable.lock().wrote = true;
            }
        }
        let _ = w.tx.send(reply);
    }
}
