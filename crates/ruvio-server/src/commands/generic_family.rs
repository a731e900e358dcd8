//! Generic key commands: deletion, existence, iteration, renaming, moving, expiry.
//!
//! Lock keys (leases and semaphores) can be inspected (TYPE, TTL, EXISTS, SCAN) and broken by an administrator
//! (DEL, UNLINK, FLUSH*), but not renamed, copied, moved or given a TTL by hand: their deadlines belong to their
//! holders (RENEW), and a renamed lock would strand its waiters. Those commands answer WRONGTYPE.

use bytes::Bytes;
use ruvio_protocol::Value;

use super::flags::*;
use super::{eq_ic, int_arg, CommandSpec, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::clock;
use super::context::Ctx;
use crate::keyspace::glob::glob_match;
use crate::keyspace::Entry;
use crate::locks::engine::on_lock_removed;
use crate::errors::*;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: "generic", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("del", -2, WRITE | KEYS_NOT_READ, (1, -1, 1), "Deletes one or more keys.", del),
    cmd!("unlink", -2, WRITE | FAST | KEYS_NOT_READ, (1, -1, 1), "Asynchronously deletes one or more keys.", del),
    cmd!("exists", -2, READONLY | FAST | KEYS_NOT_READ, (1, -1, 1), "Determines whether one or more keys exist.", exists),
    cmd!("touch", -2, READONLY | FAST | KEYS_NOT_READ, (1, -1, 1), "Returns the number of existing keys out of those specified after updating the time they were last accessed.", exists),
    cmd!("type", 2, READONLY | FAST | KEYS_NOT_READ, (1, 1, 1), "Determines the type of value stored at a key.", key_type),
    cmd!("keys", 2, READONLY, (0, 0, 0), "Returns all key names that match a pattern.", keys),
    cmd!("scan", -2, READONLY, (0, 0, 0), "Iterates over the key names in the database.", scan),
    cmd!("randomkey", 1, READONLY, (0, 0, 0), "Returns a random key name from the database.", randomkey),
    cmd!("dbsize", 1, READONLY | FAST, (0, 0, 0), "Returns the number of keys in the database.", dbsize),
    cmd!("rename", 3, WRITE | MOVES_TO_LAST, (1, 2, 1), "Renames a key and overwrites the destination.", rename),
    cmd!("renamenx", 3, WRITE | FAST | MOVES_TO_LAST, (1, 2, 1), "Renames a key only when the target key name doesn't exist.", renamenx),
    cmd!("copy", -3, WRITE | DENYOOM | COPIES_TO_LAST, (1, 2, 1), "Copies the value of a key to a new key.", copy),
    cmd!("move", 3, WRITE | FAST, (1, 1, 1), "Moves a key to another database.", move_key),
    cmd!("swapdb", 3, WRITE | FAST, (0, 0, 0), "Swaps two Redis databases.", swapdb),
    cmd!("flushdb", -1, WRITE, (0, 0, 0), "Removes all keys from the current database.", flushdb),
    cmd!("flushall", -1, WRITE, (0, 0, 0), "Removes all keys from all databases.", flushall),
    cmd!("expire", -3, WRITE | FAST | KEYS_NOT_READ, (1, 1, 1), "Sets the expiration time of a key in seconds.", expire),
    cmd!("pexpire", -3, WRITE | FAST | KEYS_NOT_READ, (1, 1, 1), "Sets the expiration time of a key in milliseconds.", pexpire),
    cmd!("expireat", -3, WRITE | FAST | KEYS_NOT_READ, (1, 1, 1), "Sets the expiration time of a key to a Unix timestamp.", expireat),
    cmd!("pexpireat", -3, WRITE | FAST | KEYS_NOT_READ, (1, 1, 1), "Sets the expiration time of a key to a Unix milliseconds timestamp.", pexpireat),
    cmd!("ttl", 2, READONLY | FAST, (1, 1, 1), "Returns the expiration time in seconds of a key.", ttl),
    cmd!("pttl", 2, READONLY | FAST, (1, 1, 1), "Returns the expiration time in milliseconds of a key.", pttl),
    cmd!("expiretime", 2, READONLY | FAST, (1, 1, 1), "Returns the expiration time of a key as a Unix timestamp.", expiretime),
    cmd!("pexpiretime", 2, READONLY | FAST, (1, 1, 1), "Returns the expiration time of a key as a Unix milliseconds timestamp.", pexpiretime),
    cmd!("persist", 2, WRITE | FAST | KEYS_NOT_READ, (1, 1, 1), "Removes the expiration time of a key.", persist),
];

fn del(ctx: &mut Ctx) -> Value {
    let (args, now, db) = (ctx.args, ctx.now, ctx.client.db);
    let store = ctx.store();
    let mut n = 0;
    for k in &args[1..] {
        if let Some(e) = store.dbs[db].remove(k, now) {
            n += 1;
            // A lock deleted from under its holders is a loss the /locks page lists (locks_page.rs).
            if let Some((kind, tokens)) = e.data.lock_holders() {
                for t in tokens {
                    store.locks.note_event(db, k, kind, t, crate::locks::EventKind::Deleted);
                }
            }
            on_lock_removed(store, db, k, &e, now);
        }
    }
    Value::Integer(n)
}

fn exists(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    Value::Integer(args[1..].iter().filter(|k| db.exists(k, now)).count() as i64)
}

fn key_type(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    Value::simple(ctx.db().get(&args[1], now).map_or("none", |e| e.data.type_name()))
}

fn keys(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let pattern = args[1].clone();
    let all = pattern.as_ref() == b"*";
    let db = ctx.db();
    let (_, found) = db.scan(0, usize::MAX, now, |k, _| all || glob_match(&pattern, k, false));
    Value::Array(found.into_iter().map(|k| Value::Bulk(Bytes::copy_from_slice(&k))).collect())
}

fn scan(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    // Like Redis (strtoull), a negative cursor wraps to a huge one, which ends the iteration.
    let text = std::str::from_utf8(&args[1]).unwrap_or("x");
    let Some(cursor) = text.parse::<u64>().ok().or_else(|| text.parse::<i64>().ok().map(|c| c as u64)) else {
        return Value::error(ERR_INVALID_CURSOR);
    };
    let mut pattern: Option<Bytes> = None;
    let mut count = 10usize;
    let mut type_filter: Option<String> = None;
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Value::error(ERR_SYNTAX);
        }
        let v = &args[i + 1];
        if eq_ic(&args[i], "match") {
            pattern = Some(v.clone());
        } else if eq_ic(&args[i], "count") {
            match int_arg(v) {
                Ok(c) if c >= 1 => count = c as usize,
                Ok(_) => return Value::error(ERR_SYNTAX),
                Err(e) => return e,
            }
        } else if eq_ic(&args[i], "type") {
            type_filter = Some(String::from_utf8_lossy(v).to_ascii_lowercase());
        } else {
            return Value::error(ERR_SYNTAX);
        }
        i += 2;
    }
    let db = ctx.db();
    let (next, found) = db.scan(cursor, count, now, |k, e| {
        pattern.as_ref().is_none_or(|p| p.as_ref() == b"*" || glob_match(p, k, false))
            && type_filter.as_ref().is_none_or(|t| t == e.data.type_name())
    });
    Value::Array(vec![
        Value::Bulk(Bytes::from(next.to_string())),
        Value::Array(found.into_iter().map(|k| Value::Bulk(Bytes::copy_from_slice(&k))).collect()),
    ])
}

fn randomkey(ctx: &mut Ctx) -> Value {
    let now = ctx.now;
    ctx.db().random_key(now).map_or(Value::Nil, |k| Value::Bulk(Bytes::copy_from_slice(&k)))
}

fn dbsize(ctx: &mut Ctx) -> Value {
    Value::Integer(ctx.db().len() as i64)
}

fn rename_impl(ctx: &mut Ctx, only_if_absent: bool) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    let Some(src) = db.get(&args[1], now) else { return Value::error(ERR_NO_SUCH_KEY) };
    if src.data.is_lock() || db.get(&args[2], now).is_some_and(|e| e.data.is_lock()) {
        return Value::error(ERR_WRONGTYPE);
    }
    if args[1] == args[2] {
        return if only_if_absent { Value::Integer(0) } else { Value::ok() };
    }
    if only_if_absent && db.exists(&args[2], now) {
        return Value::Integer(0);
    }
    let entry = db.remove(&args[1], now).expect("checked above");
    db.insert(&args[2], entry);
    if only_if_absent { Value::Integer(1) } else { Value::ok() }
}

fn rename(ctx: &mut Ctx) -> Value {
    rename_impl(ctx, false)
}

fn renamenx(ctx: &mut Ctx) -> Value {
    rename_impl(ctx, true)
}

fn db_index(ctx: &mut Ctx, arg: &[u8]) -> Result<usize, Value> {
    let n = int_arg(arg)?;
    let count = ctx.store().dbs.len() as i64;
    if n < 0 || n >= count {
        return Err(Value::error(ERR_DB_INDEX_RANGE));
    }
    Ok(n as usize)
}

fn copy(ctx: &mut Ctx) -> Value {
    let (args, now, src_db) = (ctx.args, ctx.now, ctx.client.db);
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if eq_ic(&args[i], "replace") {
            replace = true;
            i += 1;
        } else if eq_ic(&args[i], "db") && i + 1 < args.len() {
            match db_index(ctx, &args[i + 1]) {
                Ok(d) => dst_db = d,
                Err(e) => return e,
            }
            i += 2;
        } else {
            return Value::error(ERR_SYNTAX);
        }
    }
    if src_db == dst_db && args[1] == args[2] {
        return Value::error(ERR_SAME_OBJECT);
    }
    let store = ctx.store();
    let Some(entry) = store.dbs[src_db].get(&args[1], now).cloned() else { return Value::Integer(0) };
    if entry.data.is_lock() {
        return Value::error(ERR_WRONGTYPE);
    }
    match store.dbs[dst_db].get(&args[2], now) {
        Some(e) if e.data.is_lock() => return Value::error(ERR_WRONGTYPE),
        Some(_) if !replace => return Value::Integer(0),
        _ => {}
    }
    store.dbs[dst_db].insert(&args[2], entry);
    // The command's key positions name the destination in the client's database only: a client blocked on it in
    // another database (COPY ... DB n) is woken here, as Redis wakes it for any key that appears.
    store.waiters.touched(dst_db, &args[2]);
    Value::Integer(1)
}

fn move_key(ctx: &mut Ctx) -> Value {
    let (args, now, src_db) = (ctx.args, ctx.now, ctx.client.db);
    let dst_db = match db_index(ctx, &args[2]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    if dst_db == src_db {
        return Value::error(ERR_SAME_OBJECT);
    }
    let store = ctx.store();
    match store.dbs[src_db].get(&args[1], now) {
        None => return Value::Integer(0),
        Some(e) if e.data.is_lock() => return Value::error(ERR_WRONGTYPE),
        Some(_) => {}
    }
    if store.dbs[dst_db].exists(&args[1], now) {
        return Value::Integer(0);
    }
    let entry = store.dbs[src_db].remove(&args[1], now).expect("checked above");
    store.dbs[dst_db].insert(&args[1], entry);
    // The key appears in the other database: clients blocked on it there (BLPOP, BZPOPMIN, ...) are served.
    store.waiters.touched(dst_db, &args[1]);
    Value::Integer(1)
}

fn swapdb(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let count = ctx.store().dbs.len() as i64;
    let parse = |a: &[u8], which: &str| -> Result<usize, Value> {
        let n = super::parse_i64(a).ok_or_else(|| invalid_db_index(which))?;
        if n < 0 || n >= count {
            return Err(Value::error(ERR_DB_INDEX_RANGE));
        }
        Ok(n as usize)
    };
    let (a, b) = match (parse(&args[1], "first"), parse(&args[2], "second")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let store = ctx.store();
    if a != b {
        let (lo, hi) = (a.min(b), a.max(b));
        let (left, right) = store.dbs.split_at_mut(hi);
        left[lo].swap_contents(&mut right[0]);
        store.locks.swap_dbs(a, b);
        // Clients blocked on keys of either database see that database's new contents (as in Redis, a waiter
        // stays with its database number): every key waited for there may hold data now.
        store.waiters.touched_db(a);
        store.waiters.touched_db(b);
    }
    Value::ok()
}

fn flush_mode_ok(args: &[Bytes]) -> bool {
    args.len() == 1 || (args.len() == 2 && (eq_ic(&args[1], "async") || eq_ic(&args[1], "sync")))
}

fn flushdb(ctx: &mut Ctx) -> Value {
    if !flush_mode_ok(ctx.args) {
        return Value::error(ERR_SYNTAX);
    }
    let db = ctx.client.db;
    let store = ctx.store();
    store.flush(Some(db));
    ctx.propagate_as(vec![Bytes::from_static(b"FLUSHDB")]);
    Value::ok()
}

fn flushall(ctx: &mut Ctx) -> Value {
    if !flush_mode_ok(ctx.args) {
        return Value::error(ERR_SYNTAX);
    }
    let store = ctx.store();
    store.flush(None);
    ctx.propagate_as(vec![Bytes::from_static(b"FLUSHALL")]);
    Value::ok()
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX | XX | GT | LT.
fn expire_generic(ctx: &mut Ctx, millis: bool, absolute: bool) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let name = ctx.spec.name;
    // The options before the amount, as Redis reads them.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        match String::from_utf8_lossy(opt).to_ascii_lowercase().as_str() {
            "nx" => nx = true,
            "xx" => xx = true,
            "gt" => gt = true,
            "lt" => lt = true,
            _ => return unsupported_option(opt),
        }
    }
    if nx && (xx || gt || lt) {
        return Value::error(ERR_NX_WITH_XX_GT_LT);
    }
    if gt && lt {
        return Value::error(ERR_GT_WITH_LT);
    }
    let amount = match int_arg(&args[2]) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let invalid = || invalid_expire(name);
    // The command's own instant, not the clock's: a replayed EXPIREAT must find "in the past" exactly as it did live.
    let wall_now = clock::mono_to_wall(now);
    let Some(wall) = clock::ttl_to_wall(amount, millis, absolute, wall_now) else { return invalid() };
    let ms = if millis { amount } else { amount * 1000 };
    let db = ctx.db();
    let Some(entry) = db.get(&args[1], now) else { return Value::Integer(0) };
    if entry.data.is_lock() {
        return Value::error(ERR_WRONGTYPE);
    }
    let current = entry.expire_at;
    let new_mono = if absolute { clock::wall_to_mono(wall) } else if ms <= 0 { now } else { now.saturating_add(ms as u64) };
    let ok = if nx {
        current == 0
    } else if xx && current == 0 {
        false
    } else if gt {
        current != 0 && new_mono > current
    } else if lt {
        current == 0 || new_mono < current
    } else {
        true
    };
    if !ok {
        return Value::Integer(0);
    }
    if wall <= wall_now {
        db.remove(&args[1], now);
        ctx.propagate_as(vec![Bytes::from_static(b"DEL"), args[1].clone()]);
    } else {
        db.set_expire(&args[1], new_mono, now);
        ctx.propagate_as(vec![Bytes::from_static(b"PEXPIREAT"), args[1].clone(), Bytes::from(wall.to_string())]);
    }
    Value::Integer(1)
}

fn expire(ctx: &mut Ctx) -> Value {
    expire_generic(ctx, false, false)
}
fn pexpire(ctx: &mut Ctx) -> Value {
    expire_generic(ctx, true, false)
}
fn expireat(ctx: &mut Ctx) -> Value {
    expire_generic(ctx, false, true)
}
fn pexpireat(ctx: &mut Ctx) -> Value {
    expire_generic(ctx, true, true)
}

/// -2 missing, -1 no deadline, else the deadline as `f` presents it.
fn with_deadline(ctx: &mut Ctx, f: impl Fn(u64, u64) -> i64) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    match ctx.db().get(&args[1], now) {
        None => Value::Integer(-2),
        Some(Entry { expire_at: 0, .. }) => Value::Integer(-1),
        Some(e) => Value::Integer(f(e.expire_at, now)),
    }
}

fn ttl(ctx: &mut Ctx) -> Value {
    with_deadline(ctx, |at, now| ((at - now + 500) / 1000) as i64)
}
fn pttl(ctx: &mut Ctx) -> Value {
    with_deadline(ctx, |at, now| (at - now) as i64)
}
fn expiretime(ctx: &mut Ctx) -> Value {
    with_deadline(ctx, |at, _| clock::mono_to_wall(at) / 1000)
}
fn pexpiretime(ctx: &mut Ctx) -> Value {
    with_deadline(ctx, |at, _| clock::mono_to_wall(at))
}

fn persist(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    match db.get(&args[1], now) {
        Some(e) if e.data.is_lock() => Value::error(ERR_WRONGTYPE),
        Some(e) if e.expire_at != 0 => {
            db.set_expire(&args[1], 0, now);
            Value::Integer(1)
        }
        _ => Value::Integer(0),
    }
}
