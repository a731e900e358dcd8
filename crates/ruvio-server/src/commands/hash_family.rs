//! Hash commands: HSET, HGET, HINCRBY, HSCAN, HRANDFIELD and friends, with Redis's replies and errors.
//!
//! The value type and its two encodings are in `keyspace/hash.rs`. Every change goes through the keyspace's
//! counted mutators (`Db::get_mut`, `Db::insert`, `Db::remove`), and only once a command knows it will change
//! something: HDEL of missing fields and HSETNX of an existing field look first and change (and log) nothing.
//! A hash emptied by HDEL is deleted, as in Redis. HINCRBYFLOAT is logged as the HSET of its result, so float
//! rounding cannot differ at replay.

use bytes::Bytes;
use ruvio_protocol::{Protocol, Value};

use super::flags::*;
use super::{eq_ic, float_arg, int_arg, parse_f64, parse_i64, CommandSpec, ERR_NOT_INTEGER, ERR_SYNTAX, ERR_WRONGTYPE};
use super::context::Ctx;
use crate::errors::*;
use crate::keyspace::glob::glob_match;
use crate::keyspace::hash::Limits;
use crate::keyspace::{Data, Db, Entry, HashValue};

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (1, 1, 1), group: "hash", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("hset", -4, WRITE | DENYOOM | FAST | KEYS_NOT_READ, "Creates or modifies the value of a field in a hash.", hset),
    cmd!("hmset", -4, WRITE | DENYOOM | FAST | KEYS_NOT_READ, "Sets the values of multiple fields.", hset),
    cmd!("hsetnx", 4, WRITE | DENYOOM | FAST | KEYS_NOT_READ, "Sets the value of a field in a hash only when the field doesn't exist.", hsetnx),
    cmd!("hget", 3, READONLY | FAST, "Returns the value of a field in a hash.", hget),
    cmd!("hmget", -3, READONLY | FAST, "Returns the values of all fields in a hash.", hmget),
    cmd!("hgetall", 2, READONLY, "Returns all fields and values in a hash.", hgetall),
    cmd!("hkeys", 2, READONLY, "Returns all fields in a hash.", hkeys),
    cmd!("hvals", 2, READONLY, "Returns all values in a hash.", hvals),
    cmd!("hlen", 2, READONLY | FAST | KEYS_NOT_READ, "Returns the number of fields in a hash.", hlen),
    cmd!("hstrlen", 3, READONLY | FAST | KEYS_NOT_READ, "Returns the length of the value of a field.", hstrlen),
    cmd!("hexists", 3, READONLY | FAST | KEYS_NOT_READ, "Determines whether a field exists in a hash.", hexists),
    cmd!("hdel", -3, WRITE | FAST | KEYS_NOT_READ, "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", hdel),
    cmd!("hincrby", 4, WRITE | DENYOOM | FAST, "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", hincrby),
    cmd!("hincrbyfloat", 4, WRITE | DENYOOM | FAST, "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", hincrbyfloat),
    cmd!("hrandfield", -2, READONLY, "Returns one or more random fields from a hash.", hrandfield),
    cmd!("hscan", -3, READONLY, "Iterates over fields and values of a hash.", hscan),
];

/// Read before the store lock is taken (CONFIG SET never waits for the store under the config lock, but keep the
/// two apart anyway).
fn ctx_limits(ctx: &Ctx) -> Limits {
    ctx.shared.config.read().hash_limits()
}

/// The hash at `key`: `Ok(None)` if missing, WRONGTYPE if the key holds something else.
pub fn read_hash<'d>(db: &'d mut Db, key: &[u8], now: u64) -> Result<Option<&'d HashValue>, Value> {
    match db.get(key, now) {
        None => Ok(None),
        Some(Entry { data: Data::Hash(h), .. }) => Ok(Some(h)),
        Some(_) => Err(Value::error(ERR_WRONGTYPE)),
    }
}

/// Changes the hash at `key` (created if missing; the caller has checked the type), through the counted mutators;
/// deletes it if `f` left it empty.
fn write_hash<R>(db: &mut Db, key: &[u8], now: u64, f: impl FnOnce(&mut HashValue) -> R) -> R {
    let (out, empty) = match db.get_mut(key, now) {
        Some(Data::Hash(h)) => {
            let out = f(h);
            (out, h.is_empty())
        }
        _ => {
            let mut h = HashValue::new();
            let out = f(&mut h);
            if !h.is_empty() {
                db.insert(key, Entry::new(Data::Hash(h)));
            }
            return out;
        }
    };
    if empty {
        db.remove(key, now);
    }
    out
}

fn bulk(b: &[u8]) -> Value {
    Value::Bulk(Bytes::copy_from_slice(b))
}

/// HSET (reply: fields added) and HMSET (reply: OK).
fn hset(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    if args.len() % 2 == 1 {
        return super::wrong_arity(ctx.spec.name);
    }
    let limits = ctx_limits(ctx);
    let db = ctx.db();
    if let Err(e) = read_hash(db, &args[1], now) {
        return e;
    }
    let added = write_hash(db, &args[1], now, |h| args[2..].chunks(2).filter(|p| h.set(&p[0], &p[1], &limits)).count());
    if ctx.spec.name == "hmset" { Value::ok() } else { Value::Integer(added as i64) }
}

fn hsetnx(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let limits = ctx_limits(ctx);
    let db = ctx.db();
    match read_hash(db, &args[1], now) {
        Err(e) => return e,
        Ok(Some(h)) if h.contains(&args[2]) => return Value::Integer(0),
        Ok(_) => {}
    }
    write_hash(db, &args[1], now, |h| h.set(&args[2], &args[3], &limits));
    Value::Integer(1)
}

/// Runs `f` on the hash at `key` (None if missing), or answers WRONGTYPE.
fn with_hash(ctx: &mut Ctx, f: impl FnOnce(Option<&HashValue>) -> Value) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    match read_hash(ctx.db(), &args[1], now) {
        Ok(h) => f(h),
        Err(e) => e,
    }
}

fn hget(ctx: &mut Ctx) -> Value {
    let field = ctx.args[2].clone();
    with_hash(ctx, |h| h.and_then(|h| h.get(&field)).map_or(Value::Nil, bulk))
}

fn hmget(ctx: &mut Ctx) -> Value {
    let fields = &ctx.args[2..];
    with_hash(ctx, |h| Value::Array(fields.iter().map(|f| h.and_then(|h| h.get(f)).map_or(Value::Nil, bulk)).collect()))
}

fn hgetall(ctx: &mut Ctx) -> Value {
    with_hash(ctx, |h| Value::Map(h.into_iter().flat_map(|h| h.iter()).map(|(f, v)| (bulk(f), bulk(v))).collect()))
}

fn hkeys(ctx: &mut Ctx) -> Value {
    with_hash(ctx, |h| Value::Array(h.into_iter().flat_map(|h| h.iter()).map(|(f, _)| bulk(f)).collect()))
}

fn hvals(ctx: &mut Ctx) -> Value {
    with_hash(ctx, |h| Value::Array(h.into_iter().flat_map(|h| h.iter()).map(|(_, v)| bulk(v)).collect()))
}

fn hlen(ctx: &mut Ctx) -> Value {
    with_hash(ctx, |h| Value::Integer(h.map_or(0, |h| h.len()) as i64))
}

fn hstrlen(ctx: &mut Ctx) -> Value {
    let field = ctx.args[2].clone();
    with_hash(ctx, |h| Value::Integer(h.and_then(|h| h.get(&field)).map_or(0, |v| v.len()) as i64))
}

fn hexists(ctx: &mut Ctx) -> Value {
    let field = ctx.args[2].clone();
    with_hash(ctx, |h| Value::Integer(h.is_some_and(|h| h.contains(&field)) as i64))
}

fn hdel(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    match read_hash(db, &args[1], now) {
        Err(e) => return e,
        Ok(Some(h)) if args[2..].iter().any(|f| h.contains(f)) => {}
        // Nothing to delete: no change, nothing logged.
        Ok(_) => return Value::Integer(0),
    }
    let removed = write_hash(db, &args[1], now, |h| args[2..].iter().filter(|f| h.remove(f)).count());
    Value::Integer(removed as i64)
}

fn hincrby(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let delta = match int_arg(&args[3]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let limits = ctx_limits(ctx);
    let db = ctx.db();
    let current = match read_hash(db, &args[1], now) {
        Err(e) => return e,
        Ok(h) => match h.and_then(|h| h.get(&args[2])) {
            None => 0,
            Some(v) => match parse_i64(v) {
                Some(n) => n,
                None => return Value::error(ERR_HASH_NOT_INTEGER),
            },
        },
    };
    let Some(next) = current.checked_add(delta) else { return Value::error(ERR_INCR_OVERFLOW) };
    write_hash(db, &args[1], now, |h| h.set(&args[2], itoa::Buffer::new().format(next).as_bytes(), &limits));
    Value::Integer(next)
}

fn hincrbyfloat(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let delta = match float_arg(&args[3]) {
        Ok(d) if d.is_finite() => d,
        Ok(_) => return Value::error(ERR_NAN_OR_INFINITY),
        Err(e) => return e,
    };
    let limits = ctx_limits(ctx);
    let db = ctx.db();
    let current_text = match read_hash(db, &args[1], now) {
        Err(e) => return e,
        Ok(h) => h.and_then(|h| h.get(&args[2])).map_or_else(|| b"0".to_vec(), |v| v.to_vec()),
    };
    let Some(current) = parse_f64(&current_text) else { return Value::error(ERR_HASH_NOT_FLOAT) };
    let next = current + delta;
    if !next.is_finite() {
        return Value::error(ERR_INCR_NAN);
    }
    let text = super::string_family::decimal_sum(&current_text, &args[3]).unwrap_or_else(|| super::string_family::format_float(next));
    write_hash(db, &args[1], now, |h| h.set(&args[2], text.as_bytes(), &limits));
    // Replayed as HSET of the result, as Redis propagates it.
    ctx.propagate_as(vec![Bytes::from_static(b"HSET"), args[1].clone(), args[2].clone(), Bytes::from(text.clone())]);
    Value::Bulk(Bytes::from(text))
}

/// A negative HRANDFIELD count builds its whole reply in memory; beyond this many picks it is refused rather than
/// let one command take the server's memory (Redis streams such a reply instead).
pub const MAX_RANDFIELD_REPEATS: u64 = 10_000_000;

fn hrandfield(ctx: &mut Ctx) -> Value {
    use rand::Rng;
    let (args, now) = (ctx.args, ctx.now);
    if args.len() == 2 {
        return with_hash(ctx, |h| match h {
            Some(h) if !h.is_empty() => {
                let i = rand::thread_rng().gen_range(0..h.len());
                h.nth(i).map_or(Value::Nil, |(f, _)| bulk(f))
            }
            _ => Value::Nil,
        });
    }
    let Some(l) = parse_i64(&args[2]) else { return Value::error(ERR_NOT_INTEGER) };
    if l == i64::MIN {
        return Value::error(ERR_RANDFIELD_COUNT_RANGE);
    }
    if args.len() > 4 || (args.len() == 4 && !eq_ic(&args[3], "withvalues")) {
        return Value::error(ERR_SYNTAX);
    }
    let with_values = args.len() == 4;
    let (count, unique) = (l.unsigned_abs(), l >= 0);
    if with_values && count > (i64::MAX / 2) as u64 {
        return Value::error(ERR_RANDFIELD_TOO_MANY);
    }
    let resp3 = ctx.client.proto == Protocol::Resp3;
    let h = match read_hash(ctx.db(), &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::Array(vec![]),
        Ok(Some(h)) => h,
    };
    let len = h.len();
    if count == 0 || len == 0 {
        return Value::Array(vec![]);
    }
    if !unique && count > MAX_RANDFIELD_REPEATS {
        return Value::error(ERR_RANDFIELD_TOO_MANY);
    }
    // A packed hash has no random access: list its pairs once.
    let listed: Option<Vec<(&[u8], &[u8])>> = (h.encoding() == "listpack").then(|| h.iter().collect());
    let at = |i: usize| listed.as_ref().map_or_else(|| h.nth(i).expect("index below len"), |l| l[i]);
    let mut rng = rand::thread_rng();
    let picks: Vec<usize> = if !unique {
        (0..count).map(|_| rng.gen_range(0..len)).collect()
    } else if count as usize >= len {
        (0..len).collect()
    } else if (count as usize).saturating_mul(3) <= len {
        // Few of many (Redis's case 4): random positions until `count` distinct ones, without listing them all.
        let mut seen = std::collections::HashSet::with_capacity(count as usize);
        let mut picks = Vec::with_capacity(count as usize);
        while picks.len() < count as usize {
            let i = rng.gen_range(0..len);
            if seen.insert(i) {
                picks.push(i);
            }
        }
        picks
    } else {
        // Distinct positions: a partial Fisher-Yates shuffle.
        let count = count as usize;
        let mut order: Vec<usize> = (0..len).collect();
        for i in 0..count {
            let j = rng.gen_range(i..len);
            order.swap(i, j);
        }
        order.truncate(count);
        order
    };
    let mut out = Vec::with_capacity(picks.len() * if with_values && !resp3 { 2 } else { 1 });
    for i in picks {
        let (f, v) = at(i);
        match (with_values, resp3) {
            (false, _) => out.push(bulk(f)),
            // RESP3: each pick is a [field, value] pair (a map could not hold repeats).
            (true, true) => out.push(Value::Array(vec![bulk(f), bulk(v)])),
            (true, false) => {
                out.push(bulk(f));
                out.push(bulk(v));
            }
        }
    }
    Value::Array(out)
}

fn hscan(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    // As SCAN (strtoull): a negative cursor wraps to a huge one.
    let text = std::str::from_utf8(&args[2]).unwrap_or("x");
    let Some(cursor) = text.parse::<u64>().ok().or_else(|| text.parse::<i64>().ok().map(|c| c as u64)) else {
        return Value::error(ERR_INVALID_CURSOR);
    };
    let h = match read_hash(ctx.db(), &args[1], now) {
        Err(e) => return e,
        // A missing key ends the scan before its options are looked at, as in Redis.
        Ok(None) => return Value::Array(vec![Value::Bulk(Bytes::from_static(b"0")), Value::Array(vec![])]),
        Ok(Some(h)) => h,
    };
    let mut pattern: Option<&Bytes> = None;
    let mut count = 10usize;
    let mut no_values = false;
    let mut i = 3;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if eq_ic(&args[i], "count") && has_value {
            match int_arg(&args[i + 1]) {
                Ok(c) if c >= 1 => count = c as usize,
                Ok(_) => return Value::error(ERR_SYNTAX),
                Err(e) => return e,
            }
            i += 2;
        } else if eq_ic(&args[i], "match") && has_value {
            pattern = Some(&args[i + 1]).filter(|p| p.as_ref() != b"*");
            i += 2;
        } else if eq_ic(&args[i], "novalues") {
            no_values = true;
            i += 1;
        } else {
            return Value::error(ERR_SYNTAX);
        }
    }
    let mut items = Vec::new();
    let next = h.scan(cursor, count, |f, v| {
        if pattern.is_none_or(|p| glob_match(p, f, false)) {
            items.push(bulk(f));
            if !no_values {
                items.push(bulk(v));
            }
        }
    });
    Value::Array(vec![Value::Bulk(Bytes::from(next.to_string())), Value::Array(items)])
}
