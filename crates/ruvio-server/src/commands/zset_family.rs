//! Sorted-set commands: ZADD, ZRANGE (by rank, score or member, forwards or backwards), the set operations, pops
//! and their blocking forms, with Redis 7.0's replies and errors.
//!
//! The value type is in `keyspace/zset.rs`. Every change goes through the keyspace's counted mutators, and a command
//! that changes nothing (ZADD XX of a missing member, ZREM of absent members) never asks for the value mutably, so
//! nothing is logged. A sorted set emptied by a command is deleted, as in Redis. Scores are doubles written as Redis
//! 7.0 writes them (`%.17g`, `inf`, `-inf`); under RESP3 they are doubles, and WITHSCORES replies are pairs.

use bytes::Bytes;
use ruvio_protocol::{Protocol, Value};

use super::context::Ctx;
use super::flags::*;
use super::{eq_ic, parse_f64, parse_i64, CommandSpec, ERR_NOT_INTEGER, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::errors::*;
use crate::keyspace::glob::glob_match;
use crate::keyspace::zset::Limits;
use crate::keyspace::{Data, Db, Entry, ZSetValue};

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: "sorted-set", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

// Commands whose keys follow a `numkeys` argument say so with a flag (NUMKEYS_AT_1/2, Redis's `movablekeys`); their
// fixed key positions are Redis's legacy ones (0,0,0, or the destination).
pub static COMMANDS: &[CommandSpec] = &[
    cmd!("zadd", -4, WRITE | DENYOOM | FAST | KEYS_NOT_READ, (1, 1, 1), "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", zadd),
    cmd!("zincrby", 4, WRITE | DENYOOM | FAST, (1, 1, 1), "Increments the score of a member in a sorted set.", zincrby),
    cmd!("zrem", -3, WRITE | FAST | KEYS_NOT_READ, (1, 1, 1), "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", zrem),
    cmd!("zscore", 3, READONLY | FAST, (1, 1, 1), "Returns the score of a member in a sorted set.", zscore),
    cmd!("zmscore", -3, READONLY | FAST, (1, 1, 1), "Returns the score of one or more members in a sorted set.", zmscore),
    cmd!("zcard", 2, READONLY | FAST | KEYS_NOT_READ, (1, 1, 1), "Returns the number of members in a sorted set.", zcard),
    cmd!("zcount", 4, READONLY | FAST, (1, 1, 1), "Returns the count of members in a sorted set that have scores within a range.", zcount),
    cmd!("zlexcount", 4, READONLY | FAST, (1, 1, 1), "Returns the number of members in a sorted set within a lexicographical range.", zlexcount),
    cmd!("zrange", -4, READONLY, (1, 1, 1), "Returns members in a sorted set within a range of indexes.", zrange),
    cmd!("zrangestore", -5, WRITE | DENYOOM | DEST_FIRST, (1, 2, 1), "Stores a range of members from sorted set in a key.", zrangestore),
    cmd!("zrangebyscore", -4, READONLY, (1, 1, 1), "Returns members in a sorted set within a range of scores.", zrangebyscore),
    cmd!("zrevrangebyscore", -4, READONLY, (1, 1, 1), "Returns members in a sorted set within a range of scores in reverse order.", zrevrangebyscore),
    cmd!("zrangebylex", -4, READONLY, (1, 1, 1), "Returns members in a sorted set within a lexicographical range.", zrangebylex),
    cmd!("zrevrangebylex", -4, READONLY, (1, 1, 1), "Returns members in a sorted set within a lexicographical range in reverse order.", zrevrangebylex),
    cmd!("zrevrange", -4, READONLY, (1, 1, 1), "Returns members in a sorted set within a range of indexes in reverse order.", zrevrange),
    cmd!("zrank", 3, READONLY | FAST, (1, 1, 1), "Returns the index of a member in a sorted set ordered by ascending scores.", zrank),
    cmd!("zrevrank", 3, READONLY | FAST, (1, 1, 1), "Returns the index of a member in a sorted set ordered by descending scores.", zrevrank),
    cmd!("zremrangebyrank", 4, WRITE | KEYS_NOT_READ, (1, 1, 1), "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", zremrangebyrank),
    cmd!("zremrangebyscore", 4, WRITE | KEYS_NOT_READ, (1, 1, 1), "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", zremrangebyscore),
    cmd!("zremrangebylex", 4, WRITE | KEYS_NOT_READ, (1, 1, 1), "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", zremrangebylex),
    cmd!("zpopmin", -2, WRITE | FAST, (1, 1, 1), "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", zpopmin),
    cmd!("zpopmax", -2, WRITE | FAST, (1, 1, 1), "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", zpopmax),
    cmd!("zmpop", -4, WRITE | NUMKEYS_AT_1 | NOTIFY_AS_LOGGED, (0, 0, 0), "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", zmpop),
    cmd!("bzpopmin", -3, WRITE | NOSCRIPT | FAST | BLOCKING, (1, -2, 1), "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", bzpopmin),
    cmd!("bzpopmax", -3, WRITE | NOSCRIPT | FAST | BLOCKING, (1, -2, 1), "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.", bzpopmax),
    cmd!("bzmpop", -5, WRITE | BLOCKING | NUMKEYS_AT_2 | NOTIFY_AS_LOGGED, (0, 0, 0), "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", bzmpop),
    cmd!("zunion", -3, READONLY | NUMKEYS_AT_1, (0, 0, 0), "Returns the union of multiple sorted sets.", zunion),
    cmd!("zinter", -3, READONLY | NUMKEYS_AT_1, (0, 0, 0), "Returns the intersect of multiple sorted sets.", zinter),
    cmd!("zdiff", -3, READONLY | NUMKEYS_AT_1, (0, 0, 0), "Returns the difference between multiple sorted sets.", zdiff),
    cmd!("zunionstore", -4, WRITE | DENYOOM | NUMKEYS_AT_2 | DEST_FIRST, (1, 1, 1), "Stores the union of multiple sorted sets in a key.", zunionstore),
    cmd!("zinterstore", -4, WRITE | DENYOOM | NUMKEYS_AT_2 | DEST_FIRST, (1, 1, 1), "Stores the intersect of multiple sorted sets in a key.", zinterstore),
    cmd!("zdiffstore", -4, WRITE | DENYOOM | NUMKEYS_AT_2 | DEST_FIRST, (1, 1, 1), "Stores the difference of multiple sorted sets in a key.", zdiffstore),
    cmd!("zintercard", -3, READONLY | NUMKEYS_AT_1, (0, 0, 0), "Returns the number of members of the intersect of multiple sorted sets.", zintercard),
    cmd!("zrandmember", -2, READONLY, (1, 1, 1), "Returns one or more random members from a sorted set.", zrandmember),
    cmd!("zscan", -3, READONLY, (1, 1, 1), "Iterates over members and scores of a sorted set.", zscan),
];

pub const ERR_MIN_MAX_NOT_FLOAT: &str = "ERR min or max is not a float";
pub const ERR_MIN_MAX_NOT_STRING: &str = "ERR min or max not valid string range item";
pub const ERR_SCORE_NAN: &str = "ERR resulting score is not a number (NaN)";
pub const ERR_ZADD_XX_NX: &str = "ERR XX and NX options at the same time are not compatible";
pub const ERR_ZADD_GT_LT_NX: &str = "ERR GT, LT, and/or NX options at the same time are not compatible";
pub const ERR_ZADD_INCR_PAIR: &str = "ERR INCR option supports a single increment-element pair";
pub const ERR_WEIGHT_NOT_FLOAT: &str = "ERR weight value is not a float";
pub const ERR_MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
pub const ERR_NUMKEYS_POSITIVE: &str = "ERR numkeys should be greater than 0";
pub const ERR_COUNT_POSITIVE: &str = "ERR count should be greater than 0";
pub const ERR_LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";
pub const ERR_VALUE_OUT_OF_RANGE: &str = "ERR value is out of range";
pub const ERR_LIMIT_NEEDS_BY: &str = "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
pub const ERR_WITHSCORES_BYLEX: &str = "ERR syntax error, WITHSCORES not supported in combination with BYLEX";
pub const ERR_TIMEOUT_NOT_FLOAT: &str = "ERR timeout is not a float or out of range";

pub fn at_least_one_key(command: &str) -> Value {
    Value::error(format!("ERR at least 1 input key is needed for '{command}' command"))
}

/// Redis 7.0's `%.17g` (what ZSCORE and WITHSCORES print), with `inf` and `-inf`.
pub fn fmt_score(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // A whole number below 2^53 is exact, and `%.17g` prints it as its digits (no exponent below 1e17): the
    // common case (timestamps, counters) without the exact-precision formatter, whose slow path dominated ZPOPMIN.
    if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        return (v as i64).to_string();
    }
    fmt_score_general(v)
}

/// [`fmt_score`] for a finite, non-zero score, through the exact-precision formatter.
fn fmt_score_general(v: f64) -> String {
    let sci = format!("{v:.16e}");
    let (mantissa, exp) = sci.split_once('e').expect("LowerExp writes an exponent");
    let exp: i32 = exp.parse().expect("a decimal exponent");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        trim(&format!("{:.*}", (16 - exp) as usize, v))
    }
}

/// A score in a reply: a bulk string under RESP2, a double under RESP3.
pub fn score_reply(resp3: bool, v: f64) -> Value {
    if resp3 { Value::Double(v) } else { Value::Bulk(Bytes::from(fmt_score(v))) }
}

fn bulk(b: &[u8]) -> Value {
    Value::Bulk(Bytes::copy_from_slice(b))
}

/// Members with scores: RESP2 a flat array, RESP3 an array of [member, score] pairs.
pub fn with_scores(resp3: bool, items: &[(Bytes, f64)]) -> Value {
    if resp3 {
        Value::Array(items.iter().map(|(m, s)| Value::Array(vec![Value::Bulk(m.clone()), Value::Double(*s)])).collect())
    } else {
        let mut out = Vec::with_capacity(items.len() * 2);
        for (m, s) in items {
            out.push(Value::Bulk(m.clone()));
            out.push(score_reply(false, *s));
        }
        Value::Array(out)
    }
}

fn resp3(ctx: &Ctx) -> bool {
    ctx.client.proto == Protocol::Resp3
}

fn limits(ctx: &Ctx) -> Limits {
    ctx.shared.config.read().collection_limits().zset
}

/// The sorted set at `key`: `Ok(None)` if missing, WRONGTYPE if the key holds something else.
pub fn read_zset<'d>(db: &'d mut Db, key: &[u8], now: u64) -> Result<Option<&'d ZSetValue>, Value> {
    super::collection::read(db, key, now)
}

/// Changes the sorted set at `key` (created if missing; the caller checked the type) through the counted
/// mutators; deletes it if `f` left it empty.
pub fn write_zset<R>(db: &mut Db, key: &[u8], now: u64, f: impl FnOnce(&mut ZSetValue) -> R) -> R {
    super::collection::write(db, key, now, f)
}

/// Replaces `dst` with `z` (deleted when empty); true if anything was there or is now.
fn store_zset(db: &mut Db, dst: &[u8], now: u64, mut z: ZSetValue, limits: &Limits) {
    if z.is_empty() {
        db.remove(dst, now);
    } else {
        z.refit(limits);
        db.insert(dst, Entry::new(Data::ZSet(z)));
    }
}

// ----- ZADD, ZINCRBY, ZREM -----

fn zadd(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) = (false, false, false, false, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "nx") {
            nx = true
        } else if eq_ic(a, "xx") {
            xx = true
        } else if eq_ic(a, "gt") {
            gt = true
        } else if eq_ic(a, "lt") {
            lt = true
        } else if eq_ic(a, "ch") {
            ch = true
        } else if eq_ic(a, "incr") {
            incr = true
        } else {
            break;
        }
        i += 1;
    }
    let rest = &args[i..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return Value::error(ERR_SYNTAX);
    }
    if nx && xx {
        return Value::error(ERR_ZADD_XX_NX);
    }
    if (gt && nx) || (lt && nx) || (gt && lt) {
        return Value::error(ERR_ZADD_GT_LT_NX);
    }
    if incr && rest.len() > 2 {
        return Value::error(ERR_ZADD_INCR_PAIR);
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks(2) {
        match parse_f64(&p[0]) {
            Some(s) => pairs.push((s, &p[1])),
            None => return Value::error(ERR_NOT_FLOAT),
        }
    }
    let (key, now, limits, resp3) = (&args[1], ctx.now, limits(ctx), resp3(ctx));
    let db = ctx.db();
    let existing = match read_zset(db, key, now) {
        Err(e) => return e,
        Ok(z) => z,
    };
    // Decide first, without touching the value: a ZADD that would change nothing is not a write. The plan (what
    // to insert, with final scores) is kept in `pairs`' own vector; a member named twice is remembered in `seen`,
    // needed (and allocated) only when there are several pairs.
    let mut planned = 0;
    let mut added = 0i64;
    let mut changed = 0i64;
    let mut incr_result: Option<f64> = None;
    let several = pairs.len() > 1;
    let mut seen: hashbrown::HashMap<&[u8], f64> = hashbrown::HashMap::new();
    // One pair with its final score (no INCR): the scan of a small set that finds the member's score also finds
    // where its entry goes, and the write below uses that instead of scanning again.
    let mut placement = match (&pairs[..], existing) {
        ([(score, member)], Some(z)) if !incr => Some(z.place(member, *score)),
        _ => None,
    };
    for j in 0..pairs.len() {
        let (score, member) = pairs[j];
        let earlier = if several { seen.get(&member[..]).copied() } else { None };
        let current = match &placement {
            Some(p) => p.current(),
            None => earlier.or_else(|| existing.and_then(|z| z.score(member))),
        };
        let new = if incr { current.unwrap_or(0.0) + score } else { score };
        if new.is_nan() {
            return Value::error(ERR_SCORE_NAN);
        }
        match current {
            None => {
                if xx {
                    continue;
                }
                added += 1;
            }
            Some(cur) => {
                if nx || (gt && new <= cur) || (lt && new >= cur) {
                    continue;
                }
                if new != cur {
                    changed += 1;
                }
            }
        }
        if several {
            seen.insert(&member[..], new);
        }
        incr_result = Some(new);
        pairs[planned] = (new, member);
        planned += 1;
    }
    pairs.truncate(planned);
    if incr && incr_result.is_none() {
        return Value::Nil;
    }
    if !pairs.is_empty() && (added > 0 || changed > 0) {
        write_zset(db, key, now, |z| match (placement.take(), &pairs[..]) {
            (Some(p), [(s, m)]) => {
                z.insert_placed(p, m, *s, &limits);
            }
            _ => {
                for (s, m) in &pairs {
                    z.insert(m, *s, &limits);
                }
            }
        });
    }
    if incr {
        return score_reply(resp3, incr_result.expect("checked"));
    }
    Value::Integer(if ch { added + changed } else { added })
}

fn zincrby(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let Some(delta) = parse_f64(&args[2]) else { return Value::error(ERR_NOT_FLOAT) };
    let (now, limits, resp3) = (ctx.now, limits(ctx), resp3(ctx));
    let db = ctx.db();
    let current = match read_zset(db, &args[1], now) {
        Err(e) => return e,
        Ok(z) => z.and_then(|z| z.score(&args[3])).unwrap_or(0.0),
    };
    let next = current + delta;
    if next.is_nan() {
        return Value::error(ERR_SCORE_NAN);
    }
    write_zset(db, &args[1], now, |z| z.insert(&args[3], next, &limits));
    score_reply(resp3, next)
}

fn zrem(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    match read_zset(db, &args[1], now) {
        Err(e) => return e,
        Ok(Some(z)) if args[2..].iter().any(|m| z.score(m).is_some()) => {}
        Ok(_) => return Value::Integer(0),
    }
    let n = write_zset(db, &args[1], now, |z| args[2..].iter().filter(|m| z.remove(m).is_some()).count());
    Value::Integer(n as i64)
}

// ----- reads -----

fn with_zset(ctx: &mut Ctx, f: impl FnOnce(Option<&ZSetValue>, bool) -> Value) -> Value {
    let (args, now, r3) = (ctx.args, ctx.now, resp3(ctx));
    match read_zset(ctx.db(), &args[1], now) {
        Ok(z) => f(z, r3),
        Err(e) => e,
    }
}

fn zscore(ctx: &mut Ctx) -> Value {
    let m = ctx.args[2].clone();
    with_zset(ctx, |z, r3| z.and_then(|z| z.score(&m)).map_or(Value::Nil, |s| score_reply(r3, s)))
}

fn zmscore(ctx: &mut Ctx) -> Value {
    let ms = &ctx.args[2..];
    with_zset(ctx, |z, r3| Value::Array(ms.iter().map(|m| z.and_then(|z| z.score(m)).map_or(Value::Nil, |s| score_reply(r3, s))).collect()))
}

fn zcard(ctx: &mut Ctx) -> Value {
    with_zset(ctx, |z, _| Value::Integer(z.map_or(0, |z| z.len()) as i64))
}

fn rank_impl(ctx: &mut Ctx, rev: bool) -> Value {
    let m = ctx.args[2].clone();
    with_zset(ctx, |z, _| match z.and_then(|z| z.rank(&m).map(|r| (r, z.len()))) {
        None => Value::Nil,
        Some((r, len)) => Value::Integer(if rev { len - 1 - r } else { r } as i64),
    })
}

fn zrank(ctx: &mut Ctx) -> Value {
    rank_impl(ctx, false)
}

fn zrevrank(ctx: &mut Ctx) -> Value {
    rank_impl(ctx, true)
}

// ----- ranges -----

#[derive(Clone, Copy)]
pub struct ScoreBound {
    v: f64,
    excl: bool,
}

fn parse_score_bound(b: &[u8]) -> Option<ScoreBound> {
    let (excl, text) = match b.first() {
        Some(b'(') => (true, &b[1..]),
        _ => (false, b),
    };
    parse_f64(text).map(|v| ScoreBound { v, excl })
}

#[derive(Clone)]
pub enum LexBound {
    Min,
    Max,
    Incl(Bytes),
    Excl(Bytes),
}

fn parse_lex_bound(b: &Bytes) -> Option<LexBound> {
    match b.first() {
        Some(b'-') if b.len() == 1 => Some(LexBound::Min),
        Some(b'+') if b.len() == 1 => Some(LexBound::Max),
        Some(b'[') => Some(LexBound::Incl(b.slice(1..))),
        Some(b'(') => Some(LexBound::Excl(b.slice(1..))),
        _ => None,
    }
}

impl LexBound {
    /// `m` is at or above this bound taken as a minimum.
    fn above_min(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Incl(b) => m >= &b[..],
            LexBound::Excl(b) => m > &b[..],
        }
    }
    /// `m` is at or below this bound taken as a maximum.
    fn below_max(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Incl(b) => m <= &b[..],
            LexBound::Excl(b) => m < &b[..],
        }
    }
}

pub enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// Parses `min max` for `kind` (for REV forms the caller passes them already as min, max).
fn parse_range(kind: u8, min: &Bytes, max: &Bytes) -> Result<Range, Value> {
    match kind {
        b'r' => {
            let (Some(a), Some(b)) = (parse_i64(min), parse_i64(max)) else { return Err(Value::error(ERR_NOT_INTEGER)) };
            Ok(Range::Rank(a, b))
        }
        b's' => match (parse_score_bound(min), parse_score_bound(max)) {
            (Some(a), Some(b)) => Ok(Range::Score(a, b)),
            _ => Err(Value::error(ERR_MIN_MAX_NOT_FLOAT)),
        },
        _ => match (parse_lex_bound(min), parse_lex_bound(max)) {
            (Some(a), Some(b)) => Ok(Range::Lex(a, b)),
            _ => Err(Value::error(ERR_MIN_MAX_NOT_STRING)),
        },
    }
}

/// The ranks `[start, end)` a score or lexicographic range covers, each end found in O(log n). A lexicographic
/// range assumes equal scores, as Redis does (with mixed scores the result is as undefined as Redis's).
fn range_ranks(z: &ZSetValue, range: &Range) -> (usize, usize) {
    let (start, end) = match range {
        Range::Score(min, max) => {
            let (min, max) = (*min, *max);
            let start = z.count_before(|s, _| if min.excl { s <= min.v } else { s < min.v });
            let end = z.count_before(|s, _| if max.excl { s < max.v } else { s <= max.v });
            (start, end)
        }
        Range::Lex(min, max) => (z.count_before(|_, m| !min.above_min(m)), z.count_before(|_, m| max.below_max(m))),
        Range::Rank(..) => unreachable!("rank ranges are resolved by the caller"),
    };
    (start, end.max(start))
}

/// The ranks `[a, end)` that `start..=stop` (ZRANGE's indexes, negative ones from the end) cover in a set of `len`
/// members; `None` when empty.
fn rank_span(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    super::list_family::normalize_range(start, stop, len).map(|(a, b)| (a, b + 1))
}

/// The members `range` selects, in order (reversed for `rev`), after skipping `offset` and taking at most `limit`
/// (negative: all). O(log n + members returned), offsets included.
pub fn select(z: &ZSetValue, range: &Range, rev: bool, offset: i64, limit: i64) -> Vec<(Bytes, f64)> {
    let copy = |it: &mut dyn Iterator<Item = (&[u8], f64)>, n: usize| -> Vec<(Bytes, f64)> {
        it.take(n).map(|(m, s)| (Bytes::copy_from_slice(m), s)).collect()
    };
    if offset < 0 {
        return Vec::new();
    }
    match range {
        Range::Rank(start, stop) => {
            let Some((a, end)) = rank_span(z.len(), *start, *stop) else { return Vec::new() };
            if rev {
                copy(&mut z.iter_down_from(z.len() - 1 - a), end - a)
            } else {
                copy(&mut z.iter_from(a), end - a)
            }
        }
        _ => {
            let (start, end) = range_ranks(z, range);
            let offset = usize::try_from(offset).unwrap_or(usize::MAX);
            if offset >= end - start {
                return Vec::new();
            }
            let n = (end - start - offset).min(if limit < 0 { usize::MAX } else { limit as usize });
            if rev {
                copy(&mut z.iter_down_from(end - 1 - offset), n)
            } else {
                copy(&mut z.iter_from(start + offset), n)
            }
        }
    }
}

/// How many members `range` selects (ZCOUNT, ZLEXCOUNT): O(log n).
fn count_range(z: &ZSetValue, range: &Range) -> usize {
    match range {
        Range::Rank(..) => select(z, range, false, 0, -1).len(),
        _ => {
            let (start, end) = range_ranks(z, range);
            end - start
        }
    }
}

fn zcount(ctx: &mut Ctx) -> Value {
    let range = match parse_range(b's', &ctx.args[2], &ctx.args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    with_zset(ctx, |z, _| Value::Integer(z.map_or(0, |z| count_range(z, &range)) as i64))
}

fn zlexcount(ctx: &mut Ctx) -> Value {
    let range = match parse_range(b'l', &ctx.args[2], &ctx.args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    with_zset(ctx, |z, _| Value::Integer(z.map_or(0, |z| count_range(z, &range)) as i64))
}

/// What a ZRANGE-family command asks for.
struct RangeQuery {
    range: Range,
    rev: bool,
    offset: i64,
    limit: i64,
    withscores: bool,
}

/// Parses `min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]` from `args` (starting at min), with
/// `kind`/`rev` preset by the older command forms (which accept only their own options).
fn parse_query(args: &[Bytes], mut kind: u8, mut rev: bool, modern: bool, store: bool) -> Result<RangeQuery, Value> {
    let (mut offset, mut limit, mut withscores, mut has_limit) = (0i64, -1i64, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "withscores") && !store {
            withscores = true;
        } else if eq_ic(a, "limit") && i + 2 < args.len() && (modern || kind != b'r') {
            let (Some(o), Some(l)) = (parse_i64(&args[i + 1]), parse_i64(&args[i + 2])) else {
                return Err(Value::error(ERR_NOT_INTEGER));
            };
            offset = o;
            limit = l;
            has_limit = true;
            i += 2;
        } else if modern && eq_ic(a, "byscore") {
            kind = b's';
        } else if modern && eq_ic(a, "bylex") {
            kind = b'l';
        } else if modern && eq_ic(a, "rev") {
            rev = true;
        } else {
            return Err(Value::error(ERR_SYNTAX));
        }
        i += 1;
    }
    if has_limit && kind == b'r' {
        return Err(Value::error(ERR_LIMIT_NEEDS_BY));
    }
    if withscores && kind == b'l' {
        return Err(Value::error(ERR_WITHSCORES_BYLEX));
    }
    // REV forms name the bounds max first.
    let (min, max) = if rev && kind != b'r' { (&args[1], &args[0]) } else { (&args[0], &args[1]) };
    let range = parse_range(kind, min, max)?;
    Ok(RangeQuery { range, rev, offset, limit, withscores })
}

fn run_range(ctx: &mut Ctx, kind: u8, rev: bool, modern: bool) -> Value {
    let q = match parse_query(&ctx.args[2..], kind, rev, modern, false) {
        Ok(q) => q,
        Err(e) => return e,
    };
    with_zset(ctx, |z, r3| {
        let items = z.map(|z| select(z, &q.range, q.rev, q.offset, q.limit)).unwrap_or_default();
        if q.withscores {
            with_scores(r3, &items)
        } else {
            Value::Array(items.into_iter().map(|(m, _)| Value::Bulk(m)).collect())
        }
    })
}

fn zrange(ctx: &mut Ctx) -> Value {
    run_range(ctx, b'r', false, true)
}
fn zrevrange(ctx: &mut Ctx) -> Value {
    run_range(ctx, b'r', true, false)
}
fn zrangebyscore(ctx: &mut Ctx) -> Value {
    run_range(ctx, b's', false, false)
}
fn zrevrangebyscore(ctx: &mut Ctx) -> Value {
    run_range(ctx, b's', true, false)
}
fn zrangebylex(ctx: &mut Ctx) -> Value {
    run_range(ctx, b'l', false, false)
}
fn zrevrangebylex(ctx: &mut Ctx) -> Value {
    run_range(ctx, b'l', true, false)
}

fn zrangestore(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let q = match parse_query(&args[3..], b'r', false, true, true) {
        Ok(q) => q,
        Err(e) => return e,
    };
    let (now, limits) = (ctx.now, limits(ctx));
    let db = ctx.db();
    let items = match read_zset(db, &args[2], now) {
        Err(e) => return e,
        Ok(z) => z.map(|z| select(z, &q.range, q.rev, q.offset, q.limit)).unwrap_or_default(),
    };
    let n = items.len();
    let mut out = ZSetValue::new();
    for (m, s) in items {
        out.insert(&m, s, &limits);
    }
    if out.is_empty() && db.peek(&args[1]).is_none() {
        return Value::Integer(0);
    }
    store_zset(db, &args[1], now, out, &limits);
    Value::Integer(n as i64)
}

fn remrange(ctx: &mut Ctx, kind: u8) -> Value {
    let args = ctx.args;
    let range = match parse_range(kind, &args[2], &args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let now = ctx.now;
    let db = ctx.db();
    let (start, end) = match read_zset(db, &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::Integer(0),
        Ok(Some(z)) => match &range {
            Range::Rank(a, b) => rank_span(z.len(), *a, *b).unwrap_or((0, 0)),
            _ => range_ranks(z, &range),
        },
    };
    if start >= end {
        return Value::Integer(0);
    }
    // The members of a range are consecutive ranks: removed at once (one splice of a packed set), no copies.
    let n = write_zset(db, &args[1], now, |z| z.remove_ranks(start, end));
    Value::Integer(n as i64)
}

fn zremrangebyrank(ctx: &mut Ctx) -> Value {
    remrange(ctx, b'r')
}
fn zremrangebyscore(ctx: &mut Ctx) -> Value {
    remrange(ctx, b's')
}
fn zremrangebylex(ctx: &mut Ctx) -> Value {
    remrange(ctx, b'l')
}

// ----- pops -----

/// Pops up to `count` members from the low (`max` false) or high end of the sorted set at `key` (which the caller
/// checked is a sorted set or missing).
pub fn pop(db: &mut Db, key: &[u8], now: u64, max: bool, count: usize) -> Vec<(Bytes, f64)> {
    if count == 0 || !matches!(db.peek(key), Some(Entry { data: Data::ZSet(_), .. })) {
        return Vec::new();
    }
    pop_from(db, key, now, max, count)
}

/// [`pop`] from a key known to hold a sorted set.
fn pop_from(db: &mut Db, key: &[u8], now: u64, max: bool, count: usize) -> Vec<(Bytes, f64)> {
    if count == 0 {
        return Vec::new();
    }
    write_zset(db, key, now, |z| {
        let mut out = Vec::with_capacity(count.min(z.len()));
        while out.len() < count {
            let Some((m, s)) = (if max { z.pop_last() } else { z.pop_first() }) else { break };
            out.push((Bytes::copy_from_slice(&m), s));
        }
        out
    })
}

fn zpop_cmd(ctx: &mut Ctx, max: bool) -> Value {
    let args = ctx.args;
    if args.len() > 3 {
        return Value::error(ERR_SYNTAX);
    }
    let count = match super::collection::optional_count(args.get(2)) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let (now, r3) = (ctx.now, resp3(ctx));
    let Some(want) = count else {
        // The usual form pops one entry: its reply is built from the popped member itself (RESP2: one buffer with
        // the wire bytes), not from a vector of copies turned into values (five allocations per pop, then).
        let popped = super::collection::update(ctx.db(), &args[1], now, false, |z: Option<&mut ZSetValue>| {
            let popped = z.and_then(|z| if max { z.pop_last() } else { z.pop_first() });
            let changed = popped.is_some();
            (popped, changed)
        });
        return match popped {
            Err(e) => e,
            Ok(None) => Value::Array(vec![]),
            // Without a count RESP3 too answers one flat [member, score], as Redis does.
            Ok(Some((m, s))) if r3 => Value::Array(vec![bulk(&m), Value::Double(s)]),
            Ok(Some((m, s))) => super::bulk_array([&m[..], fmt_score(s).as_bytes()].into_iter()),
        };
    };
    // One lookup of the key for the type check and the pops; a count of 0 changes nothing.
    let popped = super::collection::update(ctx.db(), &args[1], now, false, |z: Option<&mut ZSetValue>| {
        let Some(z) = z else { return (Vec::new(), false) };
        let mut out = Vec::with_capacity(want.min(z.len()));
        while out.len() < want {
            let Some((m, s)) = (if max { z.pop_last() } else { z.pop_first() }) else { break };
            out.push((Bytes::copy_from_slice(&m), s));
        }
        let changed = !out.is_empty();
        (out, changed)
    });
    let items = match popped {
        Err(e) => return e,
        Ok(items) => items,
    };
    with_scores(r3, &items)
}

fn zpopmin(ctx: &mut Ctx) -> Value {
    zpop_cmd(ctx, false)
}
fn zpopmax(ctx: &mut Ctx) -> Value {
    zpop_cmd(ctx, true)
}

/// Parses a `numkeys key... ` list at `args[at]`: the keys, and the index after them. Errors as Redis words them
/// for the *MPOP and *INTERCARD commands.
pub fn numkeys_list(args: &[Bytes], at: usize) -> Result<(&[Bytes], usize), Value> {
    let n = match parse_i64(&args[at]) {
        Some(n) if n > 0 => n as usize,
        _ => return Err(Value::error(ERR_NUMKEYS_POSITIVE)),
    };
    if n > args.len() - at - 1 {
        return Err(Value::error(ERR_SYNTAX));
    }
    Ok((&args[at + 1..at + 1 + n], at + 1 + n))
}

/// `MIN|MAX [COUNT n]` (or for lists `LEFT|RIGHT`) after the keys of an *MPOP command: (max/right, count).
pub fn mpop_options(args: &[Bytes], at: usize, ends: (&str, &str)) -> Result<(bool, usize), Value> {
    let Some(end) = args.get(at) else { return Err(Value::error(ERR_SYNTAX)) };
    let high = if eq_ic(end, ends.0) {
        false
    } else if eq_ic(end, ends.1) {
        true
    } else {
        return Err(Value::error(ERR_SYNTAX));
    };
    let mut count = None;
    let mut i = at + 1;
    while i < args.len() {
        if eq_ic(&args[i], "count") && i + 1 < args.len() && count.is_none() {
            match parse_i64(&args[i + 1]) {
                Some(n) if n > 0 => count = Some(n as usize),
                _ => return Err(Value::error(ERR_COUNT_POSITIVE)),
            }
            i += 2;
        } else {
            return Err(Value::error(ERR_SYNTAX));
        }
    }
    Ok((high, count.unwrap_or(1)))
}

/// `[key, [[member, score], ...]]`, the *MPOP reply.
pub fn mpop_reply(r3: bool, key: &Bytes, items: &[(Bytes, f64)]) -> Value {
    let pairs = items.iter().map(|(m, s)| Value::Array(vec![Value::Bulk(m.clone()), score_reply(r3, *s)])).collect();
    Value::Array(vec![Value::Bulk(key.clone()), Value::Array(pairs)])
}

/// Pops from the first non-empty sorted set of `keys` (WRONGTYPE if one before it is not a sorted set); logged as
/// ZPOPMIN/ZPOPMAX with the count, as Redis propagates it.
pub fn mpop_now(ctx: &mut Ctx, keys: &[Bytes], max: bool, count: usize) -> Result<Option<(Bytes, Vec<(Bytes, f64)>)>, Value> {
    let now = ctx.now;
    for key in keys {
        let db = ctx.db();
        if read_zset(db, key, now)?.is_some() {
            let items = pop(db, key, now, max, count);
            let name: &'static [u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            ctx.propagate_as(vec![Bytes::from_static(name), key.clone(), Bytes::from(items.len().to_string())]);
            return Ok(Some((key.clone(), items)));
        }
    }
    Ok(None)
}

fn zmpop(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    let (keys, next) = match numkeys_list(args, 1) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let (max, count) = match mpop_options(args, next, ("min", "max")) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let r3 = resp3(ctx);
    match mpop_now(ctx, keys, max, count) {
        Err(e) => e,
        Ok(None) => Value::NilArray,
        Ok(Some((key, items))) => mpop_reply(r3, &key, &items),
    }
}

fn bzpopmin(ctx: &mut Ctx) -> Value {
    super::blocking_family::bzpop(ctx, false)
}
fn bzpopmax(ctx: &mut Ctx) -> Value {
    super::blocking_family::bzpop(ctx, true)
}
fn bzmpop(ctx: &mut Ctx) -> Value {
    super::blocking_family::bzmpop(ctx)
}

// ----- set operations -----

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

enum SetOp {
    Union,
    Inter,
    Diff,
}

/// The inputs of ZUNION/ZINTER/ZDIFF read as (member, score) lists: a sorted set, or a set (every score 1).
fn read_input(db: &mut Db, key: &[u8], now: u64) -> Result<Option<Vec<(Bytes, f64)>>, Value> {
    match db.get(key, now) {
        None => Ok(None),
        Some(Entry { data: Data::ZSet(z), .. }) => Ok(Some(z.iter().map(|(m, s)| (Bytes::copy_from_slice(m), s)).collect())),
        Some(Entry { data: Data::Set(s), .. }) => Ok(Some(s.iter().map(|m| (Bytes::copy_from_slice(m), 1.0)).collect())),
        Some(_) => Err(Value::error(ERR_WRONGTYPE)),
    }
}

fn combine(a: f64, b: f64, agg: Aggregate) -> f64 {
    match agg {
        Aggregate::Sum => {
            let s = a + b;
            // inf + -inf: Redis counts it as 0.
            if s.is_nan() { 0.0 } else { s }
        }
        Aggregate::Min => a.min(b),
        Aggregate::Max => a.max(b),
    }
}

/// Which of ZUNION/ZINTER/ZDIFF(STORE) and ZINTERCARD a call is: it decides which options may follow the keys.
#[derive(Clone, Copy, PartialEq)]
enum SetOpForm {
    /// ZUNION/ZINTER/ZDIFF: WITHSCORES allowed.
    Read,
    /// ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE.
    Store,
    /// ZINTERCARD: LIMIT only.
    Card,
}

/// An input of a set operation as (member, score) pairs; `None` for a missing key.
type Input = Option<Vec<(Bytes, f64)>>;

/// What a set operation's arguments (`numkeys key... [options]` at `args[at]`) say.
struct SetOpArgs {
    inputs: Vec<Input>,
    weights: Vec<f64>,
    agg: Aggregate,
    withscores: bool,
    /// ZINTERCARD's LIMIT (0 = none).
    limit: usize,
}

/// Reads a set operation's arguments in Redis 7.0's order (zunionInterDiffGenericCommand, which ZINTERCARD shares):
/// the count, then every key looked up and type-checked (a set is an input too, a missing key an empty one), and
/// only then the options, so a WRONGTYPE answers before a bad option or weight.
fn set_op_args(ctx: &mut Ctx, at: usize, op: &SetOp, form: SetOpForm) -> Result<SetOpArgs, Value> {
    let args = ctx.args;
    let n = match parse_i64(&args[at]) {
        Some(n) if n > 0 => n as usize,
        Some(_) => return Err(at_least_one_key(ctx.spec.name)),
        None => return Err(Value::error(ERR_NOT_INTEGER)),
    };
    if n > args.len() - at - 1 {
        return Err(Value::error(ERR_SYNTAX));
    }
    let now = ctx.now;
    let db = ctx.db();
    let inputs = args[at + 1..at + 1 + n].iter().map(|k| read_input(db, k, now)).collect::<Result<Vec<_>, _>>()?;
    let mut out = SetOpArgs { inputs, weights: vec![1.0; n], agg: Aggregate::Sum, withscores: false, limit: 0 };
    let weighted = !matches!(op, SetOp::Diff) && form != SetOpForm::Card;
    let mut i = at + 1 + n;
    while i < args.len() {
        let a = &args[i];
        if weighted && eq_ic(a, "weights") && i + n < args.len() {
            for (w, text) in out.weights.iter_mut().zip(&args[i + 1..]) {
                *w = parse_f64(text).ok_or_else(|| Value::error(ERR_WEIGHT_NOT_FLOAT))?;
            }
            i += n + 1;
        } else if weighted && eq_ic(a, "aggregate") && i + 1 < args.len() {
            let v = &args[i + 1];
            out.agg = if eq_ic(v, "sum") {
                Aggregate::Sum
            } else if eq_ic(v, "min") {
                Aggregate::Min
            } else if eq_ic(v, "max") {
                Aggregate::Max
            } else {
                return Err(Value::error(ERR_SYNTAX));
            };
            i += 2;
        } else if form == SetOpForm::Read && eq_ic(a, "withscores") {
            out.withscores = true;
            i += 1;
        } else if form == SetOpForm::Card && eq_ic(a, "limit") && i + 1 < args.len() {
            match parse_i64(&args[i + 1]) {
                Some(l) if l >= 0 => out.limit = l as usize,
                _ => return Err(Value::error(ERR_LIMIT_NEGATIVE)),
            }
            i += 2;
        } else {
            return Err(Value::error(ERR_SYNTAX));
        }
    }
    Ok(out)
}

/// Computes ZUNION/ZINTER/ZDIFF over `args[at..]` (`numkeys key... [WEIGHTS w...] [AGGREGATE a] [WITHSCORES]`).
/// Returns the result and whether WITHSCORES was asked.
fn set_op(ctx: &mut Ctx, at: usize, op: SetOp, form: SetOpForm) -> Result<(ZSetValue, bool), Value> {
    let SetOpArgs { inputs, weights, agg, withscores, .. } = set_op_args(ctx, at, &op, form)?;
    let n = inputs.len();
    let limits = limits(ctx);
    let weigh = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() { 0.0 } else { v }
    };
    let mut acc: hashbrown::HashMap<Bytes, f64> = hashbrown::HashMap::new();
    match op {
        SetOp::Union => {
            for (input, w) in inputs.iter().zip(&weights) {
                for (m, s) in input.iter().flatten() {
                    let v = weigh(*s, *w);
                    acc.entry(m.clone()).and_modify(|cur| *cur = combine(*cur, v, agg)).or_insert(v);
                }
            }
        }
        SetOp::Inter => {
            if inputs.iter().all(|i| i.is_some()) {
                let maps: Vec<hashbrown::HashMap<&Bytes, f64>> =
                    inputs.iter().map(|i| i.as_ref().expect("all present").iter().map(|(m, s)| (m, *s)).collect()).collect();
                let smallest = (0..n).min_by_key(|&i| maps[i].len()).expect("n > 0");
                'member: for (m, _) in inputs[smallest].as_ref().expect("present") {
                    let mut total: Option<f64> = None;
                    for (j, map) in maps.iter().enumerate() {
                        let Some(s) = map.get(m) else { continue 'member };
                        let v = weigh(*s, weights[j]);
                        total = Some(total.map_or(v, |t| combine(t, v, agg)));
                    }
                    acc.insert(m.clone(), total.expect("n > 0"));
                }
            }
        }
        SetOp::Diff => {
            if let Some(first) = &inputs[0] {
                let others: Vec<hashbrown::HashSet<&Bytes>> =
                    inputs[1..].iter().flatten().map(|i| i.iter().map(|(m, _)| m).collect()).collect();
                for (m, s) in first {
                    if !others.iter().any(|o| o.contains(m)) {
                        acc.insert(m.clone(), *s);
                    }
                }
            }
        }
    }
    let mut out = ZSetValue::new();
    for (m, s) in acc {
        out.insert(&m, s, &limits);
    }
    Ok((out, withscores))
}

fn set_op_read(ctx: &mut Ctx, op: SetOp) -> Value {
    let r3 = resp3(ctx);
    match set_op(ctx, 1, op, SetOpForm::Read) {
        Err(e) => e,
        Ok((z, withscores)) => {
            let items: Vec<(Bytes, f64)> = z.iter().map(|(m, s)| (Bytes::copy_from_slice(m), s)).collect();
            if withscores {
                with_scores(r3, &items)
            } else {
                Value::Array(items.into_iter().map(|(m, _)| Value::Bulk(m)).collect())
            }
        }
    }
}

fn set_op_store(ctx: &mut Ctx, op: SetOp) -> Value {
    let (dst, now, limits) = (ctx.args[1].clone(), ctx.now, limits(ctx));
    match set_op(ctx, 2, op, SetOpForm::Store) {
        Err(e) => e,
        Ok((z, _)) => {
            let n = z.len();
            let db = ctx.db();
            if n == 0 && db.peek(&dst).is_none() {
                return Value::Integer(0);
            }
            store_zset(db, &dst, now, z, &limits);
            Value::Integer(n as i64)
        }
    }
}

fn zunion(ctx: &mut Ctx) -> Value {
    set_op_read(ctx, SetOp::Union)
}
fn zinter(ctx: &mut Ctx) -> Value {
    set_op_read(ctx, SetOp::Inter)
}
fn zdiff(ctx: &mut Ctx) -> Value {
    set_op_read(ctx, SetOp::Diff)
}
fn zunionstore(ctx: &mut Ctx) -> Value {
    set_op_store(ctx, SetOp::Union)
}
fn zinterstore(ctx: &mut Ctx) -> Value {
    set_op_store(ctx, SetOp::Inter)
}
fn zdiffstore(ctx: &mut Ctx) -> Value {
    set_op_store(ctx, SetOp::Diff)
}

/// `numkeys key... [LIMIT n]` of SINTERCARD: the keys and the limit (0 = none). Redis's sinterCardCommand reads
/// them all before it looks at a key, with one message for every bad count (ZINTERCARD reads as ZINTER does).
pub fn intercard_args(args: &[Bytes]) -> Result<(Vec<Bytes>, usize), Value> {
    let n = match parse_i64(&args[1]) {
        Some(n) if n > 0 => n as usize,
        _ => return Err(Value::error(ERR_NUMKEYS_POSITIVE)),
    };
    if n > args.len() - 2 {
        return Err(Value::error(ERR_NUMKEYS_TOO_MANY));
    }
    let keys = args[2..2 + n].to_vec();
    let mut limit = 0usize;
    let mut i = 2 + n;
    while i < args.len() {
        if eq_ic(&args[i], "limit") && i + 1 < args.len() {
            match parse_i64(&args[i + 1]) {
                Some(l) if l >= 0 => limit = l as usize,
                _ => return Err(Value::error(ERR_LIMIT_NEGATIVE)),
            }
            i += 2;
        } else {
            return Err(Value::error(ERR_SYNTAX));
        }
    }
    Ok((keys, limit))
}

pub const ERR_NUMKEYS_TOO_MANY: &str = "ERR Number of keys can't be greater than number of args";

fn zintercard(ctx: &mut Ctx) -> Value {
    let SetOpArgs { inputs, limit, .. } = match set_op_args(ctx, 1, &SetOp::Inter, SetOpForm::Card) {
        Ok(a) => a,
        Err(e) => return e,
    };
    // A missing key (an empty input) makes the answer 0, once every key's type and the options were checked.
    let Some(mut inputs) = inputs.into_iter().collect::<Option<Vec<_>>>() else {
        return Value::Integer(0);
    };
    inputs.sort_by_key(|i| i.len());
    let others: Vec<hashbrown::HashSet<&Bytes>> = inputs[1..].iter().map(|i| i.iter().map(|(m, _)| m).collect()).collect();
    let mut n = 0;
    for (m, _) in &inputs[0] {
        if others.iter().all(|o| o.contains(m)) {
            n += 1;
            if limit > 0 && n >= limit {
                break;
            }
        }
    }
    Value::Integer(n as i64)
}

// ----- ZRANDMEMBER, ZSCAN -----

/// A negative count builds its whole reply in memory; beyond this many picks it is refused (as HRANDFIELD's).
pub const MAX_RANDOM_REPEATS: u64 = super::hash_family::MAX_RANDFIELD_REPEATS;

/// Positions for a random pick of `count` of `len` items: distinct when `unique`, repeats allowed otherwise.
pub fn random_positions(len: usize, count: u64, unique: bool) -> Vec<usize> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    if !unique {
        return (0..count).map(|_| rng.gen_range(0..len)).collect();
    }
    if count as usize >= len {
        return (0..len).collect();
    }
    let count = count as usize;
    if count.saturating_mul(3) <= len {
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut picks = Vec::with_capacity(count);
        while picks.len() < count {
            let i = rng.gen_range(0..len);
            if seen.insert(i) {
                picks.push(i);
            }
        }
        return picks;
    }
    let mut order: Vec<usize> = (0..len).collect();
    for i in 0..count {
        let j = rng.gen_range(i..len);
        order.swap(i, j);
    }
    order.truncate(count);
    order
}

fn zrandmember(ctx: &mut Ctx) -> Value {
    use rand::Rng;
    let (args, now, r3) = (ctx.args, ctx.now, resp3(ctx));
    if args.len() == 2 {
        return with_zset(ctx, |z, _| match z {
            Some(z) if !z.is_empty() => z.nth(rand::thread_rng().gen_range(0..z.len())).map_or(Value::Nil, |(m, _)| bulk(m)),
            _ => Value::Nil,
        });
    }
    let Some(l) = parse_i64(&args[2]) else { return Value::error(ERR_NOT_INTEGER) };
    if l == i64::MIN {
        return Value::error(ERR_RANDFIELD_COUNT_RANGE);
    }
    if args.len() > 4 || (args.len() == 4 && !eq_ic(&args[3], "withscores")) {
        return Value::error(ERR_SYNTAX);
    }
    let withscores = args.len() == 4;
    let (count, unique) = (l.unsigned_abs(), l >= 0);
    if withscores && count > (i64::MAX / 2) as u64 {
        return Value::error(ERR_VALUE_OUT_OF_RANGE);
    }
    let z = match read_zset(ctx.db(), &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::Array(vec![]),
        Ok(Some(z)) => z,
    };
    if count == 0 || z.is_empty() {
        return Value::Array(vec![]);
    }
    if !unique && count > MAX_RANDOM_REPEATS {
        return Value::error(ERR_VALUE_OUT_OF_RANGE);
    }
    // A packed set has no random access (nth is a scan): list it once, then pick.
    let listed: Option<Vec<(&[u8], f64)>> = z.is_packed().then(|| z.iter().collect());
    let items: Vec<(Bytes, f64)> = random_positions(z.len(), count, unique)
        .into_iter()
        .filter_map(|i| listed.as_ref().map_or_else(|| z.nth(i), |l| l.get(i).copied()))
        .map(|(m, s)| (Bytes::copy_from_slice(m), s))
        .collect();
    if withscores {
        with_scores(r3, &items)
    } else {
        Value::Array(items.into_iter().map(|(m, _)| Value::Bulk(m)).collect())
    }
}

/// The cursor of SSCAN/ZSCAN (as SCAN's: a negative one wraps to a huge one).
pub fn parse_cursor(b: &[u8]) -> Result<u64, Value> {
    let text = std::str::from_utf8(b).unwrap_or("x");
    text.parse::<u64>().ok().or_else(|| text.parse::<i64>().ok().map(|c| c as u64)).ok_or_else(|| Value::error(ERR_INVALID_CURSOR))
}

/// `[MATCH pattern] [COUNT n]` of SSCAN/ZSCAN from `args[3..]`.
pub fn scan_options(args: &[Bytes]) -> Result<(Option<Bytes>, usize), Value> {
    let mut pattern = None;
    let mut count = 10usize;
    let mut i = 3;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(Value::error(ERR_SYNTAX));
        }
        if eq_ic(&args[i], "count") {
            match parse_i64(&args[i + 1]) {
                Some(c) if c >= 1 => count = c as usize,
                Some(_) => return Err(Value::error(ERR_SYNTAX)),
                None => return Err(Value::error(ERR_NOT_INTEGER)),
            }
        } else if eq_ic(&args[i], "match") {
            pattern = Some(args[i + 1].clone()).filter(|p| p.as_ref() != b"*");
        } else {
            return Err(Value::error(ERR_SYNTAX));
        }
        i += 2;
    }
    Ok((pattern, count))
}

/// One step of a position-cursor scan over `len` items (`at(i)` adds item i's reply values when it matches). A
/// small collection (as Redis's listpack/intset ones) is returned whole with cursor 0.
pub fn scan_positions(len: usize, cursor: u64, count: usize, small: bool, mut at: impl FnMut(usize)) -> u64 {
    if small {
        (0..len).for_each(&mut at);
        return 0;
    }
    let start = cursor.min(len as u64) as usize;
    let end = start.saturating_add(count).min(len);
    (start..end).for_each(&mut at);
    if end >= len { 0 } else { end as u64 }
}

fn zscan(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let cursor = match parse_cursor(&args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let z = match read_zset(ctx.db(), &args[1], now) {
        Err(e) => return e,
        Ok(None) => return Value::Array(vec![Value::Bulk(Bytes::from_static(b"0")), Value::Array(vec![])]),
        Ok(Some(z)) => z,
    };
    let (pattern, count) = match scan_options(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut items = Vec::new();
    let mut add = |m: &[u8], s: f64| {
        if pattern.as_ref().is_none_or(|p| glob_match(p, m, false)) {
            items.push(bulk(m));
            items.push(Value::Bulk(Bytes::from(fmt_score(s))));
        }
    };
    // A packed set is returned whole with cursor 0, as Redis returns a listpack (walked in one pass: its entries
    // have no positions to jump to).
    if z.is_packed() {
        z.iter().for_each(|(m, s)| add(m, s));
        return Value::Array(vec![Value::Bulk(Bytes::from_static(b"0")), Value::Array(items)]);
    }
    // Node positions, not ranks: a member keeps its position while it stays, so one present for the whole scan
    // is returned even while others come and go.
    let next = scan_positions(z.slots(), cursor, count, false, |i| {
        if let Some((m, s)) = z.slot(i) {
            add(m, s);
        }
    });
    Value::Array(vec![Value::Bulk(Bytes::from(next.to_string())), Value::Array(items)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_print_as_redis_7_0() {
        assert_eq!(fmt_score(1.0), "1");
        assert_eq!(fmt_score(1.5), "1.5");
        assert_eq!(fmt_score(0.1), "0.10000000000000001");
        assert_eq!(fmt_score(-2.0), "-2");
        assert_eq!(fmt_score(f64::INFINITY), "inf");
        assert_eq!(fmt_score(f64::NEG_INFINITY), "-inf");
        assert_eq!(fmt_score(1e20), "1e+20");
        assert_eq!(fmt_score(123456789.0), "123456789");
        assert_eq!(fmt_score(1e-5), "1.0000000000000001e-05");
        assert_eq!(fmt_score(0.0001), "0.0001");
        // Whole numbers take a shortcut; it must print what `%.17g` does on both sides of its bound.
        assert_eq!(fmt_score(9_007_199_254_740_991.0), "9007199254740991");
        assert_eq!(fmt_score(9_007_199_254_740_992.0), "9007199254740992");
        assert_eq!(fmt_score(-9_007_199_254_740_994.0), "-9007199254740994");
        assert_eq!(fmt_score(1e16), "10000000000000000");
        assert_eq!(fmt_score(1e17), "1e+17");
        assert_eq!(fmt_score(-123.0), "-123");
        let mut x = 1u64;
        for _ in 0..2000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            for v in [(x >> 11) as f64, -((x >> 11) as f64), (x >> 40) as f64, ((x >> 11) as f64) / 1024.0] {
                assert_eq!(fmt_score(v), fmt_score_general(v), "{v}");
            }
        }
    }
}
