//! Set commands: SADD, SPOP, SRANDMEMBER, the set operations and SSCAN, with Redis 7.0's replies and errors.
//!
//! The value type is in `keyspace/set.rs`. Changes go through the keyspace's counted mutators and only once a
//! command knows it will change something; a set emptied by a command is deleted. SPOP picks at random, so it is
//! logged as the SREM of the members it took (as Redis propagates it): a replay removes the same ones.

use bytes::Bytes;
use ruvio_protocol::{Protocol, Value};

use super::context::Ctx;
use super::flags::*;
use super::zset_family::{intercard_args, parse_cursor, random_positions, scan_options, scan_positions, MAX_RANDOM_REPEATS};
use super::{parse_i64, CommandSpec, ERR_NOT_INTEGER, ERR_SYNTAX};
use crate::errors::*;
use crate::keyspace::glob::glob_match;
use crate::keyspace::set::Limits;
use crate::keyspace::{Data, Db, Entry, SetValue};

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: "set", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("sadd", -3, WRITE | DENYOOM | FAST | KEYS_NOT_READ, (1, 1, 1), "Adds one or more members to a set. Creates the key if it doesn't exist.", sadd),
    cmd!("srem", -3, WRITE | FAST | KEYS_NOT_READ, (1, 1, 1), "Removes one or more members from a set. Deletes the set if the last member was removed.", srem),
    cmd!("smembers", 2, READONLY, (1, 1, 1), "Returns all members of a set.", smembers),
    cmd!("sismember", 3, READONLY | FAST | KEYS_NOT_READ, (1, 1, 1), "Determines whether a member belongs to a set.", sismember),
    cmd!("smismember", -3, READONLY | FAST, (1, 1, 1), "Determines whether multiple members belong to a set.", smismember),
    cmd!("scard", 2, READONLY | FAST | KEYS_NOT_READ, (1, 1, 1), "Returns the number of members in a set.", scard),
    cmd!("spop", -2, WRITE | FAST, (1, 1, 1), "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", spop),
    cmd!("srandmember", -2, READONLY, (1, 1, 1), "Get one or multiple random members from a set", srandmember),
    cmd!("smove", 4, WRITE | FAST | MOVES_TO_LAST, (1, 2, 1), "Moves a member from one set to another.", smove),
    cmd!("sinter", -2, READONLY, (1, -1, 1), "Returns the intersect of multiple sets.", sinter),
    cmd!("sunion", -2, READONLY, (1, -1, 1), "Returns the union of multiple sets.", sunion),
    cmd!("sdiff", -2, READONLY, (1, -1, 1), "Returns the difference of multiple sets.", sdiff),
    cmd!("sinterstore", -3, WRITE | DENYOOM | DEST_FIRST, (1, -1, 1), "Stores the intersect of multiple sets in a key.", sinterstore),
    cmd!("sunionstore", -3, WRITE | DENYOOM | DEST_FIRST, (1, -1, 1), "Stores the union of multiple sets in a key.", sunionstore),
    cmd!("sdiffstore", -3, WRITE | DENYOOM | DEST_FIRST, (1, -1, 1), "Stores the difference of multiple sets in a key.", sdiffstore),
    cmd!("sintercard", -3, READONLY | NUMKEYS_AT_1, (0, 0, 0), "Returns the number of members of the intersect of multiple sets.", sintercard),
    cmd!("sscan", -3, READONLY, (1, 1, 1), "Iterates over members of a set.", sscan),
];

fn bulk(b: &[u8]) -> Value {
    Value::Bulk(Bytes::copy_from_slice(b))
}

fn limits(ctx: &Ctx) -> Limits {
    ctx.shared.config.read().collection_limits().set
}

/// A set reply: `~` under RESP3, an array under RESP2.
fn set_reply(ctx: &Ctx, items: Vec<Value>) -> Value {
    if ctx.client.proto == Protocol::Resp3 { Value::Set(items) } else { Value::Array(items) }
}

pub fn read_set<'d>(db: &'d mut Db, key: &[u8], now: u64) -> Result<Option<&'d SetValue>, Value> {
    super::collection::read(db, key, now)
}

pub fn write_set<R>(db: &mut Db, key: &[u8], now: u64, f: impl FnOnce(&mut SetValue) -> R) -> R {
    super::collection::write(db, key, now, f)
}

fn sadd(ctx: &mut Ctx) -> Value {
    let (args, now, limits) = (ctx.args, ctx.now, limits(ctx));
    // One lookup of the key for the type check and the insert; members already there change nothing (not logged,
    // not seen by WATCH).
    let added = super::collection::update(ctx.db(), &args[1], now, true, |s: Option<&mut SetValue>| {
        let n = s.map_or(0, |s| args[2..].iter().filter(|m| s.insert(m, &limits)).count());
        (n, n > 0)
    });
    match added {
        Ok(n) => Value::Integer(n as i64),
        Err(e) => e,
    }
}

fn srem(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    match read_set(db, &args[1], now) {
        Err(e) => return e,
        Ok(Some(s)) if args[2..].iter().any(|m| s.contains(m)) => {}
        Ok(_) => return Value::Integer(0),
    }
    let n = write_set(db, &args[1], now, |s| args[2..].iter().filter(|m| s.remove(m)).count());
    Value::Integer(n as i64)
}

fn with_set(ctx: &mut Ctx, f: impl FnOnce(Option<&SetValue>) -> Value) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    match read_set(ctx.db(), &args[1], now) {
        Ok(s) => f(s),
        Err(e) => e,
    }
}

fn smembers(ctx: &mut Ctx) -> Value {
    let items = with_set(ctx, |s| Value::Array(s.map(|s| s.members().into_iter().map(bulk).collect()).unwrap_or_default()));
    match items {
        Value::Array(v) => set_reply(ctx, v),
        e => e,
    }
}

fn sismember(ctx: &mut Ctx) -> Value {
    let m = ctx.args[2].clone();
    with_set(ctx, |s| Value::Integer(s.is_some_and(|s| s.contains(&m)) as i64))
}

fn smismember(ctx: &mut Ctx) -> Value {
    let ms = &ctx.args[2..];
    with_set(ctx, |s| Value::Array(ms.iter().map(|m| Value::Integer(s.is_some_and(|s| s.contains(m)) as i64)).collect()))
}

fn scard(ctx: &mut Ctx) -> Value {
    with_set(ctx, |s| Value::Integer(s.map_or(0, |s| s.len()) as i64))
}

fn spop(ctx: &mut Ctx) -> Value {
    use rand::Rng;
    let (args, now) = (ctx.args, ctx.now);
    if args.len() > 3 {
        return Value::error(ERR_SYNTAX);
    }
    let count = match super::collection::optional_count(args.get(2)) {
        Ok(c) => c,
        Err(e) => return e,
    };
    // One lookup of the key for the type check and the pops.
    let picked = super::collection::update(ctx.db(), &args[1], now, false, |s: Option<&mut SetValue>| {
        let Some(s) = s else { return (None, false) };
        let len = s.len();
        let want = count.unwrap_or(1).min(len);
        let mut rng = rand::thread_rng();
        let popped: Vec<Bytes> =
            (0..want).filter_map(|_| s.swap_remove_index(rng.gen_range(0..s.len()))).map(|m| Bytes::copy_from_slice(&m)).collect();
        let changed = !popped.is_empty();
        (Some((popped, len)), changed)
    });
    let (popped, len) = match picked {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Value::Array(vec![]) } else { Value::Nil },
        Ok(Some(p)) => p,
    };
    if popped.is_empty() {
        return Value::Array(vec![]);
    }
    // Random picks: logged as the SREM of what was taken (a whole set popped is simply deleted).
    if popped.len() == len {
        ctx.propagate_as(vec![Bytes::from_static(b"DEL"), args[1].clone()]);
    } else {
        let mut record = vec![Bytes::from_static(b"SREM"), args[1].clone()];
        record.extend(popped.iter().cloned());
        ctx.propagate_as(record);
    }
    match count {
        None => Value::Bulk(popped.into_iter().next().expect("want >= 1")),
        Some(_) => set_reply(ctx, popped.into_iter().map(Value::Bulk).collect()),
    }
}

fn srandmember(ctx: &mut Ctx) -> Value {
    use rand::Rng;
    let (args, now) = (ctx.args, ctx.now);
    if args.len() == 2 {
        return with_set(ctx, |s| match s {
            Some(s) if !s.is_empty() => s.nth(rand::thread_rng().gen_range(0..s.len())).map_or(Value::Nil, |m| bulk(m)),
            _ => Value::Nil,
        });
    }
    if args.len() > 3 {
        return Value::error(ERR_SYNTAX);
    }
    let Some(l) = parse_i64(&args[2]) else { return Value::error(ERR_NOT_INTEGER) };
    if l == i64::MIN {
        return Value::error(ERR_RANDFIELD_COUNT_RANGE);
    }
    let (count, unique) = (l.unsigned_abs(), l >= 0);
    let s = match read_set(ctx.db(), &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::Array(vec![]),
        Ok(Some(s)) => s,
    };
    if count == 0 || s.is_empty() {
        return Value::Array(vec![]);
    }
    if !unique && count > MAX_RANDOM_REPEATS {
        return Value::error(super::zset_family::ERR_VALUE_OUT_OF_RANGE);
    }
    Value::Array(random_positions(s.len(), count, unique).into_iter().filter_map(|i| s.nth(i)).map(|m| bulk(m)).collect())
}

fn smove(ctx: &mut Ctx) -> Value {
    let (args, now, limits) = (ctx.args, ctx.now, limits(ctx));
    let db = ctx.db();
    // As Redis: a missing source answers 0 before the destination's type is looked at.
    let present = match read_set(db, &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::Integer(0),
        Ok(Some(s)) => s.contains(&args[3]),
    };
    let dst_has = match read_set(db, &args[2], now) {
        Err(e) => return e,
        Ok(s) => s.is_some_and(|s| s.contains(&args[3])),
    };
    if !present {
        return Value::Integer(0);
    }
    if args[1] == args[2] {
        return Value::Integer(1);
    }
    write_set(db, &args[1], now, |s| s.remove(&args[3]));
    if !dst_has {
        write_set(db, &args[2], now, |s| s.insert(&args[3], &limits));
    }
    Value::Integer(1)
}

enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of the result of `op` over `keys` (WRONGTYPE if any key holds something else).
fn compute(db: &mut Db, keys: &[Bytes], now: u64, op: Op) -> Result<Vec<Bytes>, Value> {
    let mut sets: Vec<Option<Vec<Bytes>>> = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(read_set(db, k, now)?.map(|s| s.iter().map(Bytes::copy_from_slice).collect()));
    }
    Ok(match op {
        Op::Union => {
            let mut seen = indexmap::IndexSet::<Bytes>::new();
            for m in sets.into_iter().flatten().flatten() {
                seen.insert(m);
            }
            seen.into_iter().collect()
        }
        Op::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return Ok(Vec::new());
            }
            let mut sets: Vec<Vec<Bytes>> = sets.into_iter().flatten().collect();
            sets.sort_by_key(|s| s.len());
            let others: Vec<hashbrown::HashSet<&Bytes>> = sets[1..].iter().map(|s| s.iter().collect()).collect();
            sets[0].iter().filter(|m| others.iter().all(|o| o.contains(m))).cloned().collect()
        }
        Op::Diff => {
            let Some(Some(first)) = sets.first() else { return Ok(Vec::new()) };
            let others: Vec<hashbrown::HashSet<&Bytes>> = sets[1..].iter().flatten().map(|s| s.iter().collect()).collect();
            first.iter().filter(|m| !others.iter().any(|o| o.contains(m))).cloned().collect()
        }
    })
}

fn op_read(ctx: &mut Ctx, op: Op) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    match compute(ctx.db(), &args[1..], now, op) {
        Err(e) => e,
        Ok(v) => set_reply(ctx, v.into_iter().map(Value::Bulk).collect()),
    }
}

fn op_store(ctx: &mut Ctx, op: Op) -> Value {
    let (args, now, limits) = (ctx.args, ctx.now, limits(ctx));
    let db = ctx.db();
    let members = match compute(db, &args[2..], now, op) {
        Err(e) => return e,
        Ok(v) => v,
    };
    let n = members.len();
    if n == 0 {
        db.remove(&args[1], now);
    } else {
        let mut s = SetValue::new();
        for m in &members {
            s.insert(m, &limits);
        }
        db.insert(&args[1], Entry::new(Data::Set(Box::new(s))));
    }
    Value::Integer(n as i64)
}

fn sinter(ctx: &mut Ctx) -> Value {
    op_read(ctx, Op::Inter)
}
fn sunion(ctx: &mut Ctx) -> Value {
    op_read(ctx, Op::Union)
}
fn sdiff(ctx: &mut Ctx) -> Value {
    op_read(ctx, Op::Diff)
}
fn sinterstore(ctx: &mut Ctx) -> Value {
    op_store(ctx, Op::Inter)
}
fn sunionstore(ctx: &mut Ctx) -> Value {
    op_store(ctx, Op::Union)
}
fn sdiffstore(ctx: &mut Ctx) -> Value {
    op_store(ctx, Op::Diff)
}

fn sintercard(ctx: &mut Ctx) -> Value {
    let (keys, limit) = match intercard_args(ctx.args) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let now = ctx.now;
    match compute(ctx.db(), &keys, now, Op::Inter) {
        Err(e) => e,
        Ok(v) => Value::Integer(if limit > 0 { v.len().min(limit) } else { v.len() } as i64),
    }
}

fn sscan(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let cursor = match parse_cursor(&args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let s = match read_set(ctx.db(), &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::Array(vec![Value::Bulk(Bytes::from_static(b"0")), Value::Array(vec![])]),
        Ok(Some(s)) => s,
    };
    let (pattern, count) = match scan_options(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut items = Vec::new();
    let next = scan_positions(s.len(), cursor, count, s.encoding() == "intset", |i| {
        if let Some(m) = s.nth(i) {
            if pattern.as_ref().is_none_or(|p| glob_match(p, m, false)) {
                items.push(bulk(m));
            }
        }
    });
    Value::Array(vec![Value::Bulk(Bytes::from(next.to_string())), Value::Array(items)])
}
