//! String commands: GET, SET and friends, counters, ranges.

use bytes::Bytes;
use ruvio_protocol::Value;

use super::flags::*;
use super::{eq_ic, float_arg, int_arg, parse_f64, parse_i64, reply, CommandSpec, ERR_NOT_INTEGER, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::clock;
use super::context::Ctx;
use crate::keyspace::{CompactBytes, Data, Db, Entry};
use crate::errors::*;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: "string", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("get", 2, READONLY | FAST, (1, 1, 1), "Returns the string value of a key.", get),
    cmd!("set", -3, WRITE | DENYOOM | GET_OPTION_READS, (1, 1, 1), "Sets the string value of a key (never over a lock key). The key is created if it doesn't exist.", set),
    cmd!("setnx", 3, WRITE | DENYOOM | FAST | KEYS_NOT_READ, (1, 1, 1), "Set the string value of a key only when the key doesn't exist.", setnx),
    cmd!("setex", 4, WRITE | DENYOOM | KEYS_NOT_READ, (1, 1, 1), "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", setex),
    cmd!("psetex", 4, WRITE | DENYOOM | KEYS_NOT_READ, (1, 1, 1), "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", psetex),
    cmd!("getset", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "Returns the previous string value of a key after setting it to a new value.", getset),
    cmd!("getdel", 2, WRITE | FAST, (1, 1, 1), "Returns the string value of a key after deleting the key.", getdel),
    cmd!("getex", -2, WRITE | FAST, (1, 1, 1), "Returns the string value of a key after setting its expiration time.", getex),
    cmd!("mget", -2, READONLY | FAST, (1, -1, 1), "Atomically returns the string values of one or more keys.", mget),
    cmd!("mset", -3, WRITE | DENYOOM | KEYS_NOT_READ, (1, -1, 2), "Atomically creates or modifies the string values of one or more keys.", mset),
    cmd!("msetnx", -3, WRITE | DENYOOM | KEYS_NOT_READ, (1, -1, 2), "Atomically modifies the string values of one or more keys only when all keys don't exist.", msetnx),
    cmd!("incr", 2, WRITE | DENYOOM | FAST, (1, 1, 1), "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", incr),
    cmd!("decr", 2, WRITE | DENYOOM | FAST, (1, 1, 1), "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", decr),
    cmd!("incrby", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", incrby),
    cmd!("decrby", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", decrby),
    cmd!("incrbyfloat", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", incrbyfloat),
    cmd!("append", 3, WRITE | DENYOOM | FAST | KEYS_NOT_READ, (1, 1, 1), "Appends a string to the value of a key. Creates the key if it doesn't exist.", append),
    cmd!("strlen", 2, READONLY | FAST | KEYS_NOT_READ, (1, 1, 1), "Returns the length of a string value.", strlen),
    cmd!("getrange", 4, READONLY, (1, 1, 1), "Returns a substring of the string stored at a key.", getrange),
    cmd!("substr", 4, READONLY, (1, 1, 1), "Returns a substring from a string value.", getrange),
    cmd!("setrange", 4, WRITE | DENYOOM | KEYS_NOT_READ, (1, 1, 1), "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", setrange),
];

/// Largest string SETRANGE/APPEND may build (Redis's 512 MB).
const MAX_STRING: usize = 512 * 1024 * 1024;

/// Whether any of `keys` is a lock: plain writes never overwrite a lock (only DEL/UNLINK/FLUSH break one, and those
/// wake its waiters).
fn holds_lock(ctx: &mut Ctx, keys: &[Bytes]) -> bool {
    let now = ctx.now;
    let db = ctx.db();
    keys.iter().any(|k| db.get(k, now).is_some_and(|e| e.data.is_lock()))
}

/// Stores a computed string at `key`, keeping the deadline of a key that exists (INCR, APPEND and friends do not
/// touch the TTL).
fn write_string(db: &mut Db, key: &[u8], value: CompactBytes, now: u64) {
    match db.get_mut(key, now) {
        Some(Data::Str(s)) => *s = value,
        _ => {
            db.insert(key, Entry::new(Data::Str(value)));
        }
    }
}

/// The string at `key`: `Ok(None)` if missing, `Err(WRONGTYPE)` if the key holds a lock.
pub fn read_str<'d>(db: &'d mut Db, key: &[u8], now: u64) -> Result<Option<&'d CompactBytes>, Value> {
    match db.get(key, now) {
        None => Ok(None),
        Some(Entry { data: Data::Str(s), .. }) => Ok(Some(s)),
        Some(_) => Err(Value::error(ERR_WRONGTYPE)),
    }
}

fn bulk(s: &CompactBytes) -> Value {
    Value::Bulk(Bytes::copy_from_slice(s))
}

fn get(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    reply(read_str(ctx.db(), &args[1], now).map(|v| v.map_or(Value::Nil, bulk)))
}

/// A deadline given as an amount and unit (SET's EX/PX/EXAT/PXAT, SETEX, PSETEX, GETEX): returns (monotonic
/// deadline, wall-clock ms) or Redis's error. As in Redis, the amount must be positive and now + amount must not
/// overflow ([`clock::ttl_to_wall`]).
pub fn deadline(now: u64, amount: i64, millis: bool, absolute: bool, cmd: &str) -> Result<(u64, i64), Value> {
    let invalid = || invalid_expire(cmd);
    if amount <= 0 {
        return Err(invalid());
    }
    let wall = clock::ttl_to_wall(amount, millis, absolute, clock::wall_ms()).ok_or_else(invalid)?;
    if absolute {
        Ok((clock::wall_to_mono(wall), wall))
    } else {
        // Counted on the monotonic clock from the command's instant; logged as the wall-clock form of that same
        // deadline, so a replay lands on the same instant.
        // The check above proved amount in ms fits, and with it every sum below (see clock's origin).
        let ms = if millis { amount } else { amount * 1000 };
        let mono = now.saturating_add(ms as u64);
        Ok((mono, clock::mono_to_wall(mono)))
    }
}

fn wall_arg(ms: i64) -> Bytes {
    Bytes::from(ms.to_string())
}

struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    /// (monotonic deadline, wall ms)
    expire: Option<(u64, i64)>,
}

fn parse_set_options(args: &[Bytes], now: u64) -> Result<SetOptions, Value> {
    let mut o = SetOptions { nx: false, xx: false, get: false, keepttl: false, expire: None };
    let mut i = 3;
    let mut expire_seen = false;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        if eq_ic(a, "nx") && !o.xx {
            o.nx = true;
        } else if eq_ic(a, "xx") && !o.nx {
            o.xx = true;
        } else if eq_ic(a, "get") {
            o.get = true;
        } else if eq_ic(a, "keepttl") && !expire_seen {
            o.keepttl = true;
        } else if (eq_ic(a, "ex") || eq_ic(a, "px") || eq_ic(a, "exat") || eq_ic(a, "pxat")) && !expire_seen && !o.keepttl && next.is_some() {
            let amount = int_arg(next.unwrap())?;
            let millis = eq_ic(a, "px") || eq_ic(a, "pxat");
            let absolute = eq_ic(a, "exat") || eq_ic(a, "pxat");
            o.expire = Some(deadline(now, amount, millis, absolute, "set")?);
            expire_seen = true;
            i += 1;
        } else {
            return Err(Value::error(ERR_SYNTAX));
        }
        i += 1;
    }
    Ok(o)
}

fn set(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    if args.len() == 3 {
        // No options: one probe, and the command is logged as received.
        if !ctx.db().set_plain(&args[1], &args[2], now) {
            return Value::error(ERR_WRONGTYPE);
        }
        return Value::ok();
    }
    let o = match parse_set_options(args, now) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let db = ctx.db();
    let mut holds_lock = false;
    let old = match db.get(&args[1], now) {
        None => None,
        Some(Entry { data: Data::Str(s), expire_at }) => Some((bulk(s), *expire_at)),
        Some(_) if o.get => return Value::error(ERR_WRONGTYPE),
        Some(e) => {
            // SET replaces any value but a lock (a hash, as in Redis).
            holds_lock = e.data.is_lock();
            Some((Value::Nil, e.expire_at))
        }
    };
    let exists = old.is_some();
    let skip = (o.nx && exists) || (o.xx && !exists);
    if holds_lock && !skip {
        return Value::error(ERR_WRONGTYPE);
    }
    let old_value = old.as_ref().map_or(Value::Nil, |(v, _)| v.clone());
    if skip {
        return if o.get { old_value } else { Value::Nil };
    }
    let expire_at = match (o.expire, o.keepttl) {
        (Some((mono, _)), _) => mono,
        (None, true) => old.as_ref().map_or(0, |(_, e)| *e),
        (None, false) => 0,
    };
    db.insert(&args[1], Entry { data: Data::Str(CompactBytes::new(&args[2])), expire_at });
    if let Some((_, wall)) = o.expire {
        ctx.propagate_as(vec![Bytes::from_static(b"SET"), args[1].clone(), args[2].clone(), Bytes::from_static(b"PXAT"), wall_arg(wall)]);
    } else {
        let mut rec = vec![Bytes::from_static(b"SET"), args[1].clone(), args[2].clone()];
        if o.keepttl {
            rec.push(Bytes::from_static(b"KEEPTTL"));
        }
        ctx.propagate_as(rec);
    }
    if o.get { old_value } else { Value::ok() }
}

fn setnx(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    if db.exists(&args[1], now) {
        return Value::Integer(0);
    }
    db.insert(&args[1], Entry::new(Data::Str(CompactBytes::new(&args[2]))));
    Value::Integer(1)
}

fn set_with_ttl(ctx: &mut Ctx, millis: bool, name: &str) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let amount = match int_arg(&args[2]) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let (mono, wall) = match deadline(now, amount, millis, false, name) {
        Ok(d) => d,
        Err(e) => return e,
    };
    if holds_lock(ctx, &args[1..2]) {
        return Value::error(ERR_WRONGTYPE);
    }
    ctx.db().insert(&args[1], Entry { data: Data::Str(CompactBytes::new(&args[3])), expire_at: mono });
    ctx.propagate_as(vec![Bytes::from_static(b"SET"), args[1].clone(), args[3].clone(), Bytes::from_static(b"PXAT"), wall_arg(wall)]);
    Value::ok()
}

fn setex(ctx: &mut Ctx) -> Value {
    set_with_ttl(ctx, false, "setex")
}

fn psetex(ctx: &mut Ctx) -> Value {
    set_with_ttl(ctx, true, "psetex")
}

fn getset(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    let old = match read_str(db, &args[1], now) {
        Ok(v) => v.map_or(Value::Nil, bulk),
        Err(e) => return e,
    };
    db.insert(&args[1], Entry::new(Data::Str(CompactBytes::new(&args[2]))));
    ctx.propagate_as(vec![Bytes::from_static(b"SET"), args[1].clone(), args[2].clone()]);
    old
}

fn getdel(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    let old = match read_str(db, &args[1], now) {
        Ok(Some(v)) => bulk(v),
        Ok(None) => return Value::Nil,
        Err(e) => return e,
    };
    db.remove(&args[1], now);
    ctx.propagate_as(vec![Bytes::from_static(b"DEL"), args[1].clone()]);
    old
}

fn getex(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let mut expire: Option<(u64, i64)> = None;
    let mut persist = false;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "persist") && expire.is_none() && !persist {
            persist = true;
            i += 1;
        } else if (eq_ic(a, "ex") || eq_ic(a, "px") || eq_ic(a, "exat") || eq_ic(a, "pxat")) && expire.is_none() && !persist && i + 1 < args.len() {
            let amount = match int_arg(&args[i + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            let millis = eq_ic(a, "px") || eq_ic(a, "pxat");
            let absolute = eq_ic(a, "exat") || eq_ic(a, "pxat");
            match deadline(now, amount, millis, absolute, "getex") {
                Ok(d) => expire = Some(d),
                Err(e) => return e,
            }
            i += 2;
        } else {
            return Value::error(ERR_SYNTAX);
        }
    }
    let db = ctx.db();
    let value = match read_str(db, &args[1], now) {
        Ok(Some(v)) => bulk(v),
        Ok(None) => return Value::Nil,
        Err(e) => return e,
    };
    if let Some((mono, wall)) = expire {
        db.set_expire(&args[1], mono, now);
        ctx.propagate_as(vec![Bytes::from_static(b"PEXPIREAT"), args[1].clone(), wall_arg(wall)]);
    } else if persist && db.peek(&args[1]).is_some_and(|e| e.expire_at != 0) {
        db.set_expire(&args[1], 0, now);
        ctx.propagate_as(vec![Bytes::from_static(b"PERSIST"), args[1].clone()]);
    }
    value
}

fn mget(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    Value::Array(
        args[1..]
            .iter()
            .map(|k| match db.get(k, now) {
                Some(Entry { data: Data::Str(s), .. }) => bulk(s),
                _ => Value::Nil,
            })
            .collect(),
    )
}

fn mset(ctx: &mut Ctx) -> Value {
    let args = ctx.args;
    if args.len().is_multiple_of(2) {
        return super::wrong_arity("mset");
    }
    let keys: Vec<Bytes> = args[1..].iter().step_by(2).cloned().collect();
    if holds_lock(ctx, &keys) {
        return Value::error(ERR_WRONGTYPE);
    }
    let db = ctx.db();
    for pair in args[1..].chunks(2) {
        db.insert(&pair[0], Entry::new(Data::Str(CompactBytes::new(&pair[1]))));
    }
    Value::ok()
}

fn msetnx(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    if args.len() % 2 == 0 {
        return super::wrong_arity("msetnx");
    }
    let db = ctx.db();
    if args[1..].chunks(2).any(|p| db.exists(&p[0], now)) {
        return Value::Integer(0);
    }
    for pair in args[1..].chunks(2) {
        db.insert(&pair[0], Entry::new(Data::Str(CompactBytes::new(&pair[1]))));
    }
    Value::Integer(1)
}

fn incr_by(ctx: &mut Ctx, delta: i64) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    let current = match read_str(db, &args[1], now) {
        Ok(Some(s)) => match parse_i64(s) {
            Some(n) => n,
            None => return Value::error(ERR_NOT_INTEGER),
        },
        Ok(None) => 0,
        Err(e) => return e,
    };
    let Some(next) = current.checked_add(delta) else {
        return Value::error(ERR_INCR_OVERFLOW);
    };
    write_string(db, &args[1], CompactBytes::new(itoa::Buffer::new().format(next).as_bytes()), now);
    Value::Integer(next)
}

fn incr(ctx: &mut Ctx) -> Value {
    incr_by(ctx, 1)
}

fn decr(ctx: &mut Ctx) -> Value {
    incr_by(ctx, -1)
}

fn incrby(ctx: &mut Ctx) -> Value {
    match int_arg(&ctx.args[2]) {
        Ok(d) => incr_by(ctx, d),
        Err(e) => e,
    }
}

fn decrby(ctx: &mut Ctx) -> Value {
    match int_arg(&ctx.args[2]) {
        Ok(d) if d == i64::MIN => Value::error(ERR_DECR_OVERFLOW),
        Ok(d) => incr_by(ctx, -d),
        Err(e) => e,
    }
}

/// Formats a float as INCRBYFLOAT does: up to 17 significant digits, no exponent, no trailing zeros.
pub(crate) fn format_float(v: f64) -> String {
    // The shortest digits that read back as `v` (at most 17 significant), written out without an exponent as
    // Redis does: 1e300 + 1 is a 1 and 300 zeros, not the 301 digits of the binary value's exact expansion.
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').expect("LowerExp always writes an exponent");
    let exp: i64 = exp.parse().expect("LowerExp writes a decimal exponent");
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // The decimal point sits after `point` digits (negative: that many zeros precede the digits).
    let point = exp + 1;
    let text = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(-point as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
    };
    format!("{sign}{text}")
}

/// `a + b` computed in decimal when both fit in 28 significant digits. Redis adds in `long double`, so
/// `1.1 + 2.2` is `3.3` there; 64-bit floats would say `3.3000000000000003`. Decimal arithmetic gives Redis's
/// answer for every everyday value; anything larger falls back to floating point.
pub(crate) fn decimal_sum(a: &[u8], b: &[u8]) -> Option<String> {
    use rust_decimal::Decimal;
    use std::str::FromStr;
    let parse = |t: &[u8]| {
        let t = std::str::from_utf8(t).ok()?;
        if t.contains(['e', 'E']) { Decimal::from_scientific(t).ok() } else { Decimal::from_str(t).ok() }
    };
    let sum = parse(a)?.checked_add(parse(b)?)?.normalize();
    Some(sum.to_string())
}

fn incrbyfloat(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    // The key's type and value come before the increment, as in Redis's incrbyfloatCommand.
    let db = ctx.db();
    let current_text = match read_str(db, &args[1], now) {
        Ok(Some(s)) => s.to_vec(),
        Ok(None) => b"0".to_vec(),
        Err(e) => return e,
    };
    let Some(current) = parse_f64(&current_text) else {
        return Value::error(ERR_NOT_FLOAT);
    };
    let delta = match float_arg(&args[2]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let next = current + delta;
    if next.is_nan() || next.is_infinite() {
        return Value::error(ERR_INCR_NAN);
    }
    let text = decimal_sum(&current_text, &args[2]).unwrap_or_else(|| format_float(next));
    write_string(db, &args[1], CompactBytes::new(text.as_bytes()), now);
    // Replayed as SET so float rounding cannot differ on another machine.
    ctx.propagate_as(vec![Bytes::from_static(b"SET"), args[1].clone(), Bytes::from(text.clone()), Bytes::from_static(b"KEEPTTL")]);
    Value::Bulk(Bytes::from(text))
}

fn append(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let db = ctx.db();
    let len = match read_str(db, &args[1], now) {
        Ok(Some(s)) => s.len(),
        Ok(None) => 0,
        Err(e) => return e,
    };
    if len + args[2].len() > MAX_STRING {
        return Value::error(ERR_STRING_TOO_LONG);
    }
    // In place: the cost is the appended bytes, not the whole value (a 64 MB string must not be copied per call).
    match db.get_mut(&args[1], now) {
        Some(Data::Str(s)) => s.append(&args[2]),
        _ => {
            db.insert(&args[1], Entry::new(Data::Str(CompactBytes::new(&args[2]))));
        }
    }
    Value::Integer((len + args[2].len()) as i64)
}

fn strlen(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    reply(read_str(ctx.db(), &args[1], now).map(|v| Value::Integer(v.map_or(0, |s| s.len() as i64))))
}

fn getrange(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let (start, end) = match (int_arg(&args[2]), int_arg(&args[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let s = match read_str(ctx.db(), &args[1], now) {
        Ok(Some(s)) => s,
        Ok(None) => return Value::bulk(Bytes::new()),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Value::bulk(Bytes::new());
    }
    let mut start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    if start > end || len == 0 {
        return Value::bulk(Bytes::new());
    }
    start = start.min(len);
    Value::Bulk(Bytes::copy_from_slice(&s[start as usize..=end as usize]))
}

fn setrange(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let offset = match int_arg(&args[2]) {
        Ok(o) if o >= 0 => o as usize,
        Ok(_) => return Value::error(ERR_OFFSET_RANGE),
        Err(e) => return e,
    };
    let patch = &args[3];
    let db = ctx.db();
    let len = match read_str(db, &args[1], now) {
        Ok(Some(s)) => s.len(),
        Ok(None) => 0,
        Err(e) => return e,
    };
    if patch.is_empty() {
        return Value::Integer(len as i64);
    }
    if offset.saturating_add(patch.len()) > MAX_STRING {
        return Value::error(ERR_STRING_TOO_LONG);
    }
    match db.get_mut(&args[1], now) {
        Some(Data::Str(s)) => s.set_range(offset, patch),
        _ => {
            let mut value = CompactBytes::new(&[]);
            value.set_range(offset, patch);
            db.insert(&args[1], Entry::new(Data::Str(value)));
        }
    }
    Value::Integer(len.max(offset + patch.len()) as i64)
}

#[cfg(test)]
mod tests {
    use super::decimal_sum;

    #[test]
    fn incrbyfloat_sums_like_redis() {
        assert_eq!(decimal_sum(b"1.1", b"2.2").as_deref(), Some("3.3"));
        assert_eq!(decimal_sum(b"10.50", b"0.1").as_deref(), Some("10.6"));
        assert_eq!(decimal_sum(b"0", b"12345678901234567890").as_deref(), Some("12345678901234567890"));
        assert_eq!(decimal_sum(b"5.0e3", b"2.0e2").as_deref(), Some("5200"));
        assert_eq!(decimal_sum(b"-1.5", b"1.5").as_deref(), Some("0"));
        assert_eq!(decimal_sum(b"1e300", b"1"), None);
    }

    #[test]
    fn floats_print_at_most_17_significant_digits_without_exponent() {
        use super::format_float;
        assert_eq!(format_float(1e300 + 1.0), format!("1{}", "0".repeat(300)));
        assert_eq!(format_float(f64::MAX), format!("17976931348623157{}", "0".repeat(292)));
        assert_eq!(format_float(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_float(1.5e-10), "0.00000000015");
        assert_eq!(format_float(-2.5), "-2.5");
        assert_eq!(format_float(3000.0), "3000");
        assert_eq!(format_float(0.0), "0");
        assert_eq!(format_float(123456789.12345679), "123456789.12345679");
    }
}
