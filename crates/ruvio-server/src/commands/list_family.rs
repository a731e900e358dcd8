//! List commands: pushes and pops at both ends, ranges, LPOS, LMOVE and the blocking forms (in
//! `blocking_family.rs`), with Redis 7.0's replies and errors.
//!
//! The value is a deque of packed chunks (`keyspace/list.rs`). As for every type, changes go through the keyspace's counted
//! mutators and only once a command knows it will change something; a list emptied by a command is deleted.

use bytes::Bytes;
use ruvio_protocol::Value;

use super::context::Ctx;
use super::flags::*;
use super::{eq_ic, parse_i64, CommandSpec, ERR_NOT_INTEGER, ERR_SYNTAX};
use crate::errors::*;
use crate::keyspace::{Data, Db, Entry, ListValue};

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: "list", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("lpush", -3, WRITE | DENYOOM | FAST | KEYS_NOT_READ, (1, 1, 1), "Prepends one or more elements to a list. Creates the key if it doesn't exist.", lpush),
    cmd!("rpush", -3, WRITE | DENYOOM | FAST | KEYS_NOT_READ, (1, 1, 1), "Appends one or more elements to a list. Creates the key if it doesn't exist.", rpush),
    cmd!("lpushx", -3, WRITE | DENYOOM | FAST | KEYS_NOT_READ, (1, 1, 1), "Prepends one or more elements to a list only when the list exists.", lpushx),
    cmd!("rpushx", -3, WRITE | DENYOOM | FAST | KEYS_NOT_READ, (1, 1, 1), "Appends an element to a list only when the list exists.", rpushx),
    cmd!("lpop", -2, WRITE | FAST, (1, 1, 1), "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", lpop),
    cmd!("rpop", -2, WRITE | FAST, (1, 1, 1), "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", rpop),
    cmd!("lrange", 4, READONLY, (1, 1, 1), "Returns a range of elements from a list.", lrange),
    cmd!("llen", 2, READONLY | FAST | KEYS_NOT_READ, (1, 1, 1), "Returns the length of a list.", llen),
    cmd!("lindex", 3, READONLY, (1, 1, 1), "Returns an element from a list by its index.", lindex),
    cmd!("lset", 4, WRITE | DENYOOM | KEYS_NOT_READ, (1, 1, 1), "Sets the value of an element in a list by its index.", lset),
    cmd!("linsert", 5, WRITE | DENYOOM | KEYS_NOT_READ, (1, 1, 1), "Inserts an element before or after another element in a list.", linsert),
    cmd!("lrem", 4, WRITE | KEYS_NOT_READ, (1, 1, 1), "Removes elements from a list. Deletes the list if the last element was removed.", lrem),
    cmd!("ltrim", 4, WRITE | KEYS_NOT_READ, (1, 1, 1), "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", ltrim),
    cmd!("lpos", -3, READONLY, (1, 1, 1), "Returns the index of matching elements in a list.", lpos),
    cmd!("lmove", 5, WRITE | DENYOOM | MOVES_TO_LAST, (1, 2, 1), "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", lmove),
    cmd!("rpoplpush", 3, WRITE | DENYOOM | MOVES_TO_LAST, (1, 2, 1), "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", rpoplpush),
    cmd!("lmpop", -4, WRITE | NUMKEYS_AT_1 | NOTIFY_AS_LOGGED, (0, 0, 0), "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", lmpop),
    cmd!("blpop", -3, WRITE | NOSCRIPT | BLOCKING, (1, -2, 1), "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", super::blocking_family::blpop),
    cmd!("brpop", -3, WRITE | NOSCRIPT | BLOCKING, (1, -2, 1), "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", super::blocking_family::brpop),
    cmd!("blmove", 6, WRITE | NOSCRIPT | DENYOOM | BLOCKING | MOVES_TO_LAST, (1, 2, 1), "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", super::blocking_family::blmove),
    cmd!("brpoplpush", 4, WRITE | NOSCRIPT | DENYOOM | BLOCKING | MOVES_TO_LAST, (1, 2, 1), "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", super::blocking_family::brpoplpush),
    cmd!("blmpop", -5, WRITE | BLOCKING | NUMKEYS_AT_2 | NOTIFY_AS_LOGGED, (0, 0, 0), "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", super::blocking_family::blmpop),
];

pub const ERR_NO_SUCH_KEY_LSET: &str = ERR_NO_SUCH_KEY;
pub const ERR_INDEX_RANGE: &str = "ERR index out of range";
pub const ERR_RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
pub const ERR_COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
pub const ERR_MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";

fn bulk(b: &[u8]) -> Value {
    Value::Bulk(Bytes::copy_from_slice(b))
}

/// The list at `key`: `Ok(None)` if missing, WRONGTYPE if the key holds something else.
pub fn read_list<'d>(db: &'d mut Db, key: &[u8], now: u64) -> Result<Option<&'d ListValue>, Value> {
    super::collection::read(db, key, now)
}

/// Changes the list at `key` (created if missing; the caller checked the type) through the counted mutators;
/// deletes it if `f` left it empty.
pub fn write_list<R>(db: &mut Db, key: &[u8], now: u64, f: impl FnOnce(&mut ListValue) -> R) -> R {
    super::collection::write(db, key, now, f)
}

fn push(ctx: &mut Ctx, right: bool, only_existing: bool) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    // One lookup of the key for the type check and the push (LPUSHX/RPUSHX create nothing).
    let pushed = super::collection::update(ctx.db(), &args[1], now, !only_existing, |l: Option<&mut ListValue>| match l {
        Some(l) => {
            l.push_all(&args[2..], right);
            (l.len(), true)
        }
        None => (0, false),
    });
    match pushed {
        Ok(len) => Value::Integer(len as i64),
        Err(e) => e,
    }
}

fn lpush(ctx: &mut Ctx) -> Value {
    push(ctx, false, false)
}
fn rpush(ctx: &mut Ctx) -> Value {
    push(ctx, true, false)
}
fn lpushx(ctx: &mut Ctx) -> Value {
    push(ctx, false, true)
}
fn rpushx(ctx: &mut Ctx) -> Value {
    push(ctx, true, true)
}

/// Pops up to `count` elements from one end of the list at `key` (the caller checked it is a list or missing).
pub fn pop_elements(db: &mut Db, key: &[u8], now: u64, right: bool, count: usize) -> Vec<Bytes> {
    if count == 0 || !matches!(db.peek(key), Some(Entry { data: Data::List(_), .. })) {
        return Vec::new();
    }
    pop_from(db, key, now, right, count)
}

/// [`pop_elements`] from a key known to hold a list.
fn pop_from(db: &mut Db, key: &[u8], now: u64, right: bool, count: usize) -> Vec<Bytes> {
    if count == 0 {
        return Vec::new();
    }
    write_list(db, key, now, |l| {
        let n = count.min(l.len());
        (0..n).filter_map(|_| if right { l.pop_back() } else { l.pop_front() }).map(Bytes::from).collect()
    })
}

fn pop(ctx: &mut Ctx, right: bool) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    if args.len() > 3 {
        return super::wrong_arity(ctx.spec.name);
    }
    let count = match super::collection::optional_count(args.get(2)) {
        Ok(c) => c,
        Err(e) => return e,
    };
    // One lookup of the key for the type check and the pop; a count of 0 changes nothing.
    let popped = super::collection::update(ctx.db(), &args[1], now, false, |l: Option<&mut ListValue>| match l {
        None => (None, false),
        Some(l) => {
            let n = count.unwrap_or(1).min(l.len());
            let items: Vec<Bytes> = (0..n).filter_map(|_| if right { l.pop_back() } else { l.pop_front() }).map(Bytes::from).collect();
            let changed = !items.is_empty();
            (Some(items), changed)
        }
    });
    let items = match popped {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Value::NilArray } else { Value::Nil },
        Ok(Some(items)) => items,
    };
    match count {
        None => items.into_iter().next().map_or(Value::Nil, Value::Bulk),
        Some(_) => Value::Array(items.into_iter().map(Value::Bulk).collect()),
    }
}

fn lpop(ctx: &mut Ctx) -> Value {
    pop(ctx, false)
}
fn rpop(ctx: &mut Ctx) -> Value {
    pop(ctx, true)
}

/// Normalizes a start/stop pair against `len` as Redis does; None when the range is empty.
pub fn normalize_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let (mut a, mut b) = (start, stop);
    if a < 0 {
        a += len;
    }
    if b < 0 {
        b += len;
    }
    a = a.max(0);
    if a > b || a >= len {
        return None;
    }
    b = b.min(len - 1);
    Some((a as usize, b as usize))
}

fn with_list(ctx: &mut Ctx, f: impl FnOnce(Option<&ListValue>) -> Value) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    match read_list(ctx.db(), &args[1], now) {
        Ok(l) => f(l),
        Err(e) => e,
    }
}

fn lrange(ctx: &mut Ctx) -> Value {
    let (Some(start), Some(stop)) = (parse_i64(&ctx.args[2]), parse_i64(&ctx.args[3])) else {
        return Value::error(ERR_NOT_INTEGER);
    };
    with_list(ctx, |l| {
        let Some(l) = l else { return Value::Array(vec![]) };
        match normalize_range(start, stop, l.len()) {
            None => Value::Array(vec![]),
            Some((a, b)) => super::bulk_array(l.range(a, b)),
        }
    })
}

fn llen(ctx: &mut Ctx) -> Value {
    with_list(ctx, |l| Value::Integer(l.map_or(0, |l| l.len()) as i64))
}

/// A Redis list index (negative counts from the tail) as a position, if inside the list.
fn position(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 { index + len as i64 } else { index };
    (0..len as i64).contains(&i).then_some(i as usize)
}

// LINDEX and LSET look the key up before they read the index, as Redis does: a missing key answers nil (LSET: no such
// key) and another type WRONGTYPE whatever the index says.
fn lindex(ctx: &mut Ctx) -> Value {
    let index = parse_i64(&ctx.args[2]);
    with_list(ctx, |l| match (l, index) {
        (None, _) => Value::Nil,
        (Some(_), None) => Value::error(ERR_NOT_INTEGER),
        (Some(l), Some(index)) => position(index, l.len()).and_then(|i| l.get(i)).map_or(Value::Nil, bulk),
    })
}

fn lset(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    let i = match read_list(db, &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::error(ERR_NO_SUCH_KEY_LSET),
        Ok(Some(l)) => {
            let Some(index) = parse_i64(&args[2]) else { return Value::error(ERR_NOT_INTEGER) };
            match position(index, l.len()) {
                None => return Value::error(ERR_INDEX_RANGE),
                Some(i) => i,
            }
        }
    };
    write_list(db, &args[1], now, |l| l.set(i, &args[3]));
    Value::ok()
}

fn linsert(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let after = if eq_ic(&args[2], "after") {
        true
    } else if eq_ic(&args[2], "before") {
        false
    } else {
        return Value::error(ERR_SYNTAX);
    };
    let db = ctx.db();
    let at = match read_list(db, &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::Integer(0),
        Ok(Some(l)) => match l.iter().position(|e| e == &args[3][..]) {
            None => return Value::Integer(-1),
            Some(i) => i,
        },
    };
    let len = write_list(db, &args[1], now, |l| {
        l.insert(if after { at + 1 } else { at }, &args[4]);
        l.len()
    });
    Value::Integer(len as i64)
}

fn lrem(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let Some(count) = parse_i64(&args[2]) else { return Value::error(ERR_NOT_INTEGER) };
    let target = &args[3][..];
    let db = ctx.db();
    match read_list(db, &args[1], now) {
        Err(e) => return e,
        Ok(Some(l)) if l.iter().any(|e| e == target) => {}
        Ok(_) => return Value::Integer(0),
    }
    let limit = if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
    let removed = write_list(db, &args[1], now, |l| l.remove_matching(target, limit, count < 0));
    Value::Integer(removed as i64)
}

fn ltrim(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let (Some(start), Some(stop)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        return Value::error(ERR_NOT_INTEGER);
    };
    let db = ctx.db();
    let keep = match read_list(db, &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::ok(),
        Ok(Some(l)) => {
            let keep = normalize_range(start, stop, l.len());
            if keep == Some((0, l.len() - 1)) {
                return Value::ok(); // keeps everything: not a change
            }
            keep
        }
    };
    write_list(db, &args[1], now, |l| match keep {
        None => l.clear(),
        Some((a, b)) => l.trim(a, b),
    });
    Value::ok()
}

fn lpos(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut i = 3;
    // As Redis: the option's name first (an unknown one, or one without its value, is a syntax error), then its
    // value; COUNT and MAXLEN answer their own message for a value that is not a number too.
    while i < args.len() {
        if i + 1 >= args.len() {
            return Value::error(ERR_SYNTAX);
        }
        let v = parse_i64(&args[i + 1]);
        if eq_ic(&args[i], "rank") {
            match v {
                Some(0) => return Value::error(ERR_RANK_ZERO),
                None | Some(i64::MIN) => return Value::error(ERR_NOT_INTEGER),
                Some(v) => rank = v,
            }
        } else if eq_ic(&args[i], "count") {
            match v {
                Some(v) if v >= 0 => count = Some(v),
                _ => return Value::error(ERR_COUNT_NEGATIVE),
            }
        } else if eq_ic(&args[i], "maxlen") {
            match v {
                Some(v) if v >= 0 => maxlen = v,
                _ => return Value::error(ERR_MAXLEN_NEGATIVE),
            }
        } else {
            return Value::error(ERR_SYNTAX);
        }
        i += 2;
    }
    let target = args[2].clone();
    with_list(ctx, |l| {
        let Some(l) = l else { return if count.is_some() { Value::Array(vec![]) } else { Value::Nil } };
        let want = match count {
            Some(0) => usize::MAX,
            Some(c) => c as usize,
            None => 1,
        };
        let scan_limit = if maxlen == 0 { usize::MAX } else { maxlen as usize };
        let mut skip = rank.unsigned_abs() - 1;
        let mut found = Vec::new();
        let last = l.len() - 1;
        let elems: Box<dyn Iterator<Item = (usize, &[u8])>> =
            if rank > 0 { Box::new(l.iter().enumerate()) } else { Box::new(l.iter().rev().enumerate().map(|(j, e)| (last - j, e))) };
        for (scanned, (idx, e)) in elems.enumerate() {
            if scanned >= scan_limit || found.len() >= want {
                break;
            }
            if e == &target[..] {
                if skip > 0 {
                    skip -= 1;
                } else {
                    found.push(Value::Integer(idx as i64));
                }
            }
        }
        if count.is_some() {
            Value::Array(found)
        } else {
            found.into_iter().next().unwrap_or(Value::Nil)
        }
    })
}

fn parse_end(b: &[u8]) -> Option<bool> {
    if eq_ic(b, "left") {
        Some(false)
    } else if eq_ic(b, "right") {
        Some(true)
    } else {
        None
    }
}

/// Moves one element from `src` (its right end if `from_right`) to `dst`: checks both types first (WRONGTYPE), and
/// answers the element moved (None: `src` is empty or missing).
pub fn move_element(db: &mut Db, src: &[u8], dst: &[u8], from_right: bool, to_right: bool, now: u64) -> Result<Option<Bytes>, Value> {
    if read_list(db, src, now)?.is_none() {
        return Ok(None);
    }
    read_list(db, dst, now)?;
    let e = pop_elements(db, src, now, from_right, 1).into_iter().next().expect("src holds a non-empty list");
    write_list(db, dst, now, |l| {
        if to_right {
            l.push_back(&e);
        } else {
            l.push_front(&e);
        }
    });
    Ok(Some(e))
}

fn lmove(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let (Some(from), Some(to)) = (parse_end(&args[3]), parse_end(&args[4])) else { return Value::error(ERR_SYNTAX) };
    match move_element(ctx.db(), &args[1], &args[2], from, to, now) {
        Ok(e) => e.map_or(Value::Nil, Value::Bulk),
        Err(e) => e,
    }
}

fn rpoplpush(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    match move_element(ctx.db(), &args[1], &args[2], true, false, now) {
        Ok(e) => e.map_or(Value::Nil, Value::Bulk),
        Err(e) => e,
    }
}

/// Pops from the first non-empty list of `keys`; logged as LPOP/RPOP with the count, as Redis propagates it.
pub fn lmpop_now(ctx: &mut Ctx, keys: &[Bytes], right: bool, count: usize) -> Result<Option<(Bytes, Vec<Bytes>)>, Value> {
    let now = ctx.now;
    for key in keys {
        let db = ctx.db();
        if read_list(db, key, now)?.is_some() {
            let items = pop_elements(db, key, now, right, count);
            let name: &'static [u8] = if right { b"RPOP" } else { b"LPOP" };
            ctx.propagate_as(vec![Bytes::from_static(name), key.clone(), Bytes::from(items.len().to_string())]);
            return Ok(Some((key.clone(), items)));
        }
    }
    Ok(None)
}

pub fn lmpop_reply(key: &Bytes, items: Vec<Bytes>) -> Value {
    Value::Array(vec![Value::Bulk(key.clone()), Value::Array(items.into_iter().map(Value::Bulk).collect())])
}

fn lmpop(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let (keys, next) = match super::zset_family::numkeys_list(args, 1) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let (right, count) = match super::zset_family::mpop_options(args, next, ("left", "right")) {
        Ok(o) => o,
        Err(e) => return e,
    };
    match lmpop_now(ctx, keys, right, count) {
        Err(e) => e,
        Ok(None) => Value::NilArray,
        Ok(Some((key, items))) => lmpop_reply(&key, items),
    }
}

pub fn parse_end_arg(b: &[u8]) -> Option<bool> {
    parse_end(b)
}
