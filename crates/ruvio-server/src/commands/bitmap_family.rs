//! Bit operations on strings (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO) and LCS, with Redis
//! 7.0's replies and errors.
//!
//! Bits are numbered from the most significant bit of the first byte, as in Redis. A write past the end grows the
//! string with zero bytes; how far it may grow is bounded before anything is allocated: a bit offset must address a
//! byte below `proto-max-bulk-len` (Redis's rule; 512 MB by default), and LCS refuses inputs whose table would not
//! fit in that size either.

use bytes::Bytes;
use ruvio_protocol::Value;

use super::context::Ctx;
use super::flags::*;
use super::string_family::read_str;
use super::{eq_ic, parse_i64, CommandSpec, ERR_NOT_INTEGER, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::keyspace::{CompactBytes, Data, Db, Entry};

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $group:literal, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: $keys, group: $group, summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("setbit", 4, WRITE | DENYOOM, (1, 1, 1), "bitmap", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", setbit),
    cmd!("getbit", 3, READONLY | FAST, (1, 1, 1), "bitmap", "Returns a bit value by offset.", getbit),
    cmd!("bitcount", -2, READONLY, (1, 1, 1), "bitmap", "Counts the number of set bits (population counting) in a string.", bitcount),
    cmd!("bitpos", -3, READONLY, (1, 1, 1), "bitmap", "Finds the first set (1) or clear (0) bit in a string.", bitpos),
    cmd!("bitop", -4, WRITE | DENYOOM | DEST_FIRST, (2, -1, 1), "bitmap", "Performs bitwise operations on multiple strings, and stores the result.", bitop),
    cmd!("bitfield", -2, WRITE | DENYOOM | SUBCOMMANDS_WRITE, (1, 1, 1), "bitmap", "Performs arbitrary bitfield integer operations on strings.", bitfield),
    cmd!("bitfield_ro", -2, READONLY | FAST, (1, 1, 1), "bitmap", "Performs arbitrary read-only bitfield integer operations on strings.", bitfield_ro),
    cmd!("lcs", -3, READONLY, (1, 2, 1), "string", "Finds the longest common substring.", lcs),
];

pub const ERR_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
pub const ERR_BIT_VALUE: &str = "ERR bit is not an integer or out of range";
pub const ERR_BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
pub const ERR_BITOP_NOT: &str = "ERR BITOP NOT must be called with a single source key.";
pub const ERR_BITFIELD_TYPE: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
pub const ERR_BITFIELD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
pub const ERR_BITFIELD_RO: &str = "ERR BITFIELD_RO only supports the GET subcommand";
pub const ERR_LCS_TYPE: &str = "ERR The specified keys must contain string values";
pub const ERR_LCS_LEN_IDX: &str = "ERR If you want both the length and indexes, please just use IDX.";
pub const ERR_LCS_MEMORY: &str = "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";

fn max_bulk(ctx: &Ctx) -> u64 {
    ctx.shared.config.read().proto_max_bulk_len
}

/// A bit offset: non-negative and addressing a byte below `proto-max-bulk-len`. `#N` (BITFIELD) means N fields of
/// `width` bits.
fn bit_offset(b: &[u8], width: Option<u64>, max_bulk: u64) -> Result<u64, Value> {
    let err = || Value::error(ERR_BIT_OFFSET);
    let (mul, text) = match (width, b.first()) {
        (Some(w), Some(b'#')) => (w, &b[1..]),
        _ => (1, b),
    };
    let n = parse_i64(text).filter(|n| *n >= 0).ok_or_else(err)? as u64;
    let off = n.checked_mul(mul).ok_or_else(err)?;
    if off >> 3 >= max_bulk || off.checked_add(width.unwrap_or(1)).is_none() {
        return Err(err());
    }
    Ok(off)
}

fn get_bit(s: &[u8], off: u64) -> u8 {
    let byte = (off >> 3) as usize;
    if byte >= s.len() {
        return 0;
    }
    (s[byte] >> (7 - (off & 7))) & 1
}

/// Writes `patch` at byte `at` of the string at `key` (created if missing; the caller checked the type), in place:
/// the cost is the patch, not the whole string.
fn patch_bytes(db: &mut Db, key: &[u8], now: u64, at: usize, patch: &[u8]) {
    match db.get_mut(key, now) {
        Some(Data::Str(s)) => s.set_range(at, patch),
        _ => {
            let mut value = CompactBytes::new(&[]);
            value.set_range(at, patch);
            db.insert(key, Entry::new(Data::Str(value)));
        }
    }
}

fn setbit(ctx: &mut Ctx) -> Value {
    let (args, now, max) = (ctx.args, ctx.now, max_bulk(ctx));
    let off = match bit_offset(&args[2], None, max) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let on = match &args[3][..] {
        b"0" => false,
        b"1" => true,
        _ => return Value::error(ERR_BIT_VALUE),
    };
    let db = ctx.db();
    let at = (off >> 3) as usize;
    let (old_byte, len_now) = match read_str(db, &args[1], now) {
        Err(e) => return e,
        Ok(s) => s.map_or((0, 0), |s| (s.get(at).copied().unwrap_or(0), s.len())),
    };
    let mask = 1u8 << (7 - (off & 7));
    let old = (old_byte & mask != 0) as i64;
    let new_byte = if on { old_byte | mask } else { old_byte & !mask };
    if new_byte == old_byte && len_now > at {
        return Value::Integer(old); // nothing changes: not a write
    }
    patch_bytes(db, &args[1], now, at, &[new_byte]);
    Value::Integer(old)
}

fn getbit(ctx: &mut Ctx) -> Value {
    let (args, now, max) = (ctx.args, ctx.now, max_bulk(ctx));
    let off = match bit_offset(&args[2], None, max) {
        Ok(o) => o,
        Err(e) => return e,
    };
    match read_str(ctx.db(), &args[1], now) {
        Err(e) => e,
        Ok(s) => Value::Integer(s.map_or(0, |s| get_bit(s, off)) as i64),
    }
}

/// `[start end [BYTE|BIT]]` from `args[at..]` for a string of `len` bytes: the inclusive bit range, None if empty.
/// `end_given` tells BITPOS whether an end was named.
fn bit_range(args: &[Bytes], at: usize, len: usize, allow_start_only: bool) -> Result<(Option<(u64, u64)>, bool), Value> {
    let rest = &args[at..];
    let total_bits = len as i64 * 8;
    if rest.is_empty() {
        return Ok((if len == 0 { None } else { Some((0, total_bits as u64 - 1)) }, false));
    }
    if rest.len() == 1 && !allow_start_only || rest.len() > 3 {
        return Err(Value::error(ERR_SYNTAX));
    }
    let unit = || match rest.get(2) {
        None => Ok(false),
        Some(u) if eq_ic(u, "bit") => Ok(true),
        Some(u) if eq_ic(u, "byte") => Ok(false),
        Some(_) => Err(Value::error(ERR_SYNTAX)),
    };
    let number = |b: &[u8]| parse_i64(b).ok_or_else(|| Value::error(ERR_NOT_INTEGER));
    let start = number(&rest[0])?;
    let end_given = rest.len() >= 2;
    // Redis reads BITCOUNT's start, end, then unit, and BITPOS's start, unit, then end (bitcountCommand,
    // bitposCommand).
    let (bit_mode, end) = if allow_start_only {
        let bit_mode = unit()?;
        (bit_mode, if end_given { Some(number(&rest[1])?) } else { None })
    } else {
        let end = if end_given { Some(number(&rest[1])?) } else { None };
        (unit()?, end)
    };
    let unit_len = if bit_mode { total_bits } else { len as i64 };
    let end = end.unwrap_or(unit_len - 1);
    if start < 0 && end < 0 && start > end {
        return Ok((None, end_given));
    }
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s += unit_len;
    }
    if e < 0 {
        e += unit_len;
    }
    s = s.max(0);
    e = e.max(0);
    e = e.min(unit_len - 1);
    if s > e || unit_len == 0 {
        return Ok((None, end_given));
    }
    Ok((Some(if bit_mode { (s as u64, e as u64) } else { (s as u64 * 8, e as u64 * 8 + 7) }), end_given))
}

fn bitcount(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let s = match read_str(ctx.db(), &args[1], now) {
        Err(e) => return e,
        Ok(s) => s.map(|s| s.as_slice()).unwrap_or(b""),
    };
    let range = match bit_range(args, 2, s.len(), false) {
        Ok((r, _)) => r,
        Err(e) => return e,
    };
    let Some((a, b)) = range else { return Value::Integer(0) };
    Value::Integer(count_bits(s, a, b) as i64)
}

fn count_bits(s: &[u8], a: u64, b: u64) -> u64 {
    let (first, last) = ((a >> 3) as usize, (b >> 3) as usize);
    if first == last {
        return (a..=b).filter(|&i| get_bit(s, i) == 1).count() as u64;
    }
    let head = (a..(first as u64 + 1) * 8).filter(|&i| get_bit(s, i) == 1).count() as u64;
    let tail = ((last as u64) * 8..=b).filter(|&i| get_bit(s, i) == 1).count() as u64;
    let middle: u64 = s[first + 1..last].iter().map(|x| x.count_ones() as u64).sum();
    head + middle + tail
}

fn bitpos(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let bit = match parse_i64(&args[2]) {
        Some(0) => 0u8,
        Some(1) => 1u8,
        Some(_) => return Value::error(ERR_BITPOS_BIT),
        None => return Value::error(super::ERR_NOT_INTEGER),
    };
    let s = match read_str(ctx.db(), &args[1], now) {
        Err(e) => return e,
        Ok(None) => {
            // Validate the range arguments anyway.
            if let Err(e) = bit_range(args, 3, 0, true) {
                return e;
            }
            return Value::Integer(if bit == 1 { -1 } else { 0 });
        }
        Ok(Some(s)) => s.as_slice(),
    };
    let (range, end_given) = match bit_range(args, 3, s.len(), true) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some((a, b)) = range else { return Value::Integer(-1) };
    let mut i = a;
    // Whole bytes that cannot hold the bit are skipped a byte at a time.
    let skip = if bit == 1 { 0u8 } else { 0xff };
    while i <= b {
        if i & 7 == 0 && i + 7 <= b && s[(i >> 3) as usize] == skip {
            i += 8;
            continue;
        }
        if get_bit(s, i) == bit {
            return Value::Integer(i as i64);
        }
        i += 1;
    }
    // Looking for a clear bit with no end named: the string continues with zeros past its end.
    if bit == 0 && !end_given {
        return Value::Integer(b as i64 + 1);
    }
    Value::Integer(-1)
}

fn bitop(ctx: &mut Ctx) -> Value {
    let (args, now) = (ctx.args, ctx.now);
    let op = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    if !["and", "or", "xor", "not"].contains(&op.as_str()) {
        return Value::error(ERR_SYNTAX);
    }
    let srcs = &args[3..];
    if op == "not" && srcs.len() != 1 {
        return Value::error(ERR_BITOP_NOT);
    }
    let db = ctx.db();
    let mut inputs: Vec<Vec<u8>> = Vec::with_capacity(srcs.len());
    for k in srcs {
        match db.get(k, now) {
            None => inputs.push(Vec::new()),
            Some(Entry { data: Data::Str(s), .. }) => inputs.push(s.to_vec()),
            Some(_) => return Value::error(ERR_WRONGTYPE),
        }
    }
    let len = inputs.iter().map(|i| i.len()).max().unwrap_or(0);
    let mut out = vec![0u8; len];
    for (j, byte) in out.iter_mut().enumerate() {
        let at = |i: &Vec<u8>| i.get(j).copied().unwrap_or(0);
        *byte = match op.as_str() {
            "and" => inputs.iter().fold(0xff, |acc, i| acc & at(i)),
            "or" => inputs.iter().fold(0, |acc, i| acc | at(i)),
            "xor" => inputs.iter().fold(0, |acc, i| acc ^ at(i)),
            _ => !at(&inputs[0]),
        };
    }
    if out.is_empty() {
        db.remove(&args[2], now);
    } else {
        db.insert(&args[2], Entry::new(Data::Str(CompactBytes::from_vec(out))));
    }
    Value::Integer(len as i64)
}

// ----- BITFIELD -----

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy)]
struct Field {
    signed: bool,
    bits: u32,
    offset: u64,
}

enum Op {
    Get(Field),
    Set(Field, i64, Overflow),
    Incr(Field, i64, Overflow),
}

fn parse_type(b: &[u8]) -> Result<(bool, u32), Value> {
    let err = || Value::error(ERR_BITFIELD_TYPE);
    let signed = match b.first() {
        Some(b'i') | Some(b'I') => true,
        Some(b'u') | Some(b'U') => false,
        _ => return Err(err()),
    };
    let bits: u32 = std::str::from_utf8(&b[1..]).ok().and_then(|t| t.parse().ok()).ok_or_else(err)?;
    if bits == 0 || (signed && bits > 64) || (!signed && bits > 63) {
        return Err(err());
    }
    Ok((signed, bits))
}

fn parse_bitfield(args: &[Bytes], read_only: bool, max_bulk: u64) -> Result<Vec<Op>, Value> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        let field = |i: usize| -> Result<Field, Value> {
            let (signed, bits) = parse_type(&args[i + 1])?;
            let offset = bit_offset(&args[i + 2], Some(bits as u64), max_bulk)?;
            Ok(Field { signed, bits, offset })
        };
        if eq_ic(a, "get") && i + 2 < args.len() {
            ops.push(Op::Get(field(i)?));
            i += 3;
        } else if (eq_ic(a, "set") || eq_ic(a, "incrby")) && i + 3 < args.len() {
            let f = field(i)?;
            let v = parse_i64(&args[i + 3]).ok_or_else(|| Value::error(ERR_NOT_INTEGER))?;
            ops.push(if eq_ic(a, "set") { Op::Set(f, v, overflow) } else { Op::Incr(f, v, overflow) });
            i += 4;
        } else if eq_ic(a, "overflow") && i + 1 < args.len() {
            let v = &args[i + 1];
            overflow = if eq_ic(v, "wrap") {
                Overflow::Wrap
            } else if eq_ic(v, "sat") {
                Overflow::Sat
            } else if eq_ic(v, "fail") {
                Overflow::Fail
            } else {
                return Err(Value::error(ERR_BITFIELD_OVERFLOW));
            };
            i += 2;
        } else {
            return Err(Value::error(ERR_SYNTAX));
        }
    }
    // BITFIELD_RO parses every subcommand as BITFIELD does (an OVERFLOW alone is accepted) and refuses a write only
    // once all parsed, as Redis's bitfieldGeneric does.
    if read_only && ops.iter().any(|o| !matches!(o, Op::Get(_))) {
        return Err(Value::error(ERR_BITFIELD_RO));
    }
    Ok(ops)
}

fn read_field(s: &[u8], f: Field) -> i64 {
    let mut v: u64 = 0;
    for i in 0..f.bits as u64 {
        v = (v << 1) | get_bit(s, f.offset + i) as u64;
    }
    if f.signed && f.bits < 64 && (v >> (f.bits - 1)) & 1 == 1 {
        v |= u64::MAX << f.bits; // sign-extend
    }
    v as i64
}

fn write_field(s: &mut [u8], f: Field, value: i64) {
    let v = value as u64;
    for i in 0..f.bits as u64 {
        let bit = (v >> (f.bits as u64 - 1 - i)) & 1;
        let off = f.offset + i;
        let byte = &mut s[(off >> 3) as usize];
        let mask = 1u8 << (7 - (off & 7));
        if bit == 1 {
            *byte |= mask
        } else {
            *byte &= !mask
        }
    }
}

/// Fits `v` into the field's range by the overflow rule: None when FAIL refuses it.
fn fit(v: i128, f: Field, overflow: Overflow) -> Option<i64> {
    let (min, max): (i128, i128) = if f.signed {
        (-(1i128 << (f.bits - 1)), (1i128 << (f.bits - 1)) - 1)
    } else {
        (0, (1i128 << f.bits) - 1)
    };
    if (min..=max).contains(&v) {
        return Some(v as i64);
    }
    match overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if v > max { max } else { min } as i64),
        Overflow::Wrap => {
            let m = 1i128 << f.bits;
            let mut w = v.rem_euclid(m);
            if f.signed && w > max {
                w -= m;
            }
            Some(w as i64)
        }
    }
}

fn run_bitfield(ctx: &mut Ctx, read_only: bool) -> Value {
    let (args, now, max) = (ctx.args, ctx.now, max_bulk(ctx));
    let ops = match parse_bitfield(args, read_only, max) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let db = ctx.db();
    let current = match read_str(db, &args[1], now) {
        Err(e) => return e,
        Ok(s) => s.map(|s| s.to_vec()),
    };
    let writes = ops.iter().any(|o| !matches!(o, Op::Get(_)));
    if !writes {
        let s: &[u8] = current.as_deref().unwrap_or(b"");
        return Value::Array(ops.iter().map(|o| if let Op::Get(f) = o { Value::Integer(read_field(s, *f)) } else { Value::Nil }).collect());
    }
    // Work on the window of bytes the fields cover (not the whole string): copied out, changed, patched back.
    let field_of = |o: &Op| match o {
        Op::Get(f) | Op::Set(f, ..) | Op::Incr(f, ..) => *f,
    };
    let start = ops.iter().map(|o| (field_of(o).offset >> 3) as usize).min().unwrap_or(0);
    let end = ops.iter().map(|o| ((field_of(o).offset + field_of(o).bits as u64 - 1) >> 3) as usize + 1).max().unwrap_or(0);
    let src = current.as_deref().unwrap_or(b"");
    let mut buf: Vec<u8> = (start..end).map(|i| src.get(i).copied().unwrap_or(0)).collect();
    let before = buf.clone();
    let shift = |f: Field| Field { offset: f.offset - start as u64 * 8, ..f };
    let mut replies = Vec::with_capacity(ops.len());
    for op in &ops {
        let op = match *op {
            Op::Get(f) => Op::Get(shift(f)),
            Op::Set(f, v, ov) => Op::Set(shift(f), v, ov),
            Op::Incr(f, v, ov) => Op::Incr(shift(f), v, ov),
        };
        match op {
            Op::Get(f) => replies.push(Value::Integer(read_field(&buf, f))),
            Op::Set(f, v, ov) => {
                let old = read_field(&buf, f);
                // SET takes the value as given and fits it like an increment from zero.
                let given = if f.signed { v as i128 } else { v as i128 };
                match fit(given, f, ov) {
                    None => replies.push(Value::Nil),
                    Some(n) => {
                        write_field(&mut buf, f, n);
                        replies.push(Value::Integer(old));
                    }
                }
            }
            Op::Incr(f, d, ov) => {
                let old = read_field(&buf, f) as i128;
                match fit(old + d as i128, f, ov) {
                    None => replies.push(Value::Nil),
                    Some(n) => {
                        write_field(&mut buf, f, n);
                        replies.push(Value::Integer(n));
                    }
                }
            }
        }
    }
    // Written only if a byte changed or the string must grow (Redis grows it for a SET/INCRBY even of zeros).
    let grows = src.len() < end;
    if buf != before || grows || current.is_none() {
        patch_bytes(db, &args[1], now, start, &buf);
    }
    Value::Array(replies)
}

fn bitfield(ctx: &mut Ctx) -> Value {
    run_bitfield(ctx, false)
}

fn bitfield_ro(ctx: &mut Ctx) -> Value {
    run_bitfield(ctx, true)
}

// ----- LCS -----

fn lcs(ctx: &mut Ctx) -> Value {
    let (args, now, max) = (ctx.args, ctx.now, max_bulk(ctx));
    // Both keys are read (and their types checked) before any option, as Redis's lcsCommand does.
    let db = ctx.db();
    let mut get = |k: &[u8]| -> Result<Vec<u8>, Value> {
        match db.get(k, now) {
            None => Ok(Vec::new()),
            Some(Entry { data: Data::Str(s), .. }) => Ok(s.to_vec()),
            Some(_) => Err(Value::error(ERR_LCS_TYPE)),
        }
    };
    let (a, b) = match (get(&args[1]), get(&args[2])) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let (mut want_len, mut want_idx, mut with_len, mut min_len) = (false, false, false, 0usize);
    let mut i = 3;
    while i < args.len() {
        if eq_ic(&args[i], "len") {
            want_len = true;
        } else if eq_ic(&args[i], "idx") {
            want_idx = true;
        } else if eq_ic(&args[i], "withmatchlen") {
            with_len = true;
        } else if eq_ic(&args[i], "minmatchlen") && i + 1 < args.len() {
            match parse_i64(&args[i + 1]) {
                Some(n) => min_len = n.max(0) as usize,
                None => return Value::error(ERR_NOT_INTEGER),
            }
            i += 1;
        } else {
            return Value::error(ERR_SYNTAX);
        }
        i += 1;
    }
    if want_len && want_idx {
        return Value::error(ERR_LCS_LEN_IDX);
    }
    // The table is (|a|+1) x (|b|+1) 32-bit cells: bounded before it is allocated, as in Redis.
    let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1);
    if cells * 4 > max as u128 || a.len() >= u32::MAX as usize || b.len() >= u32::MAX as usize {
        return Value::error(ERR_LCS_MEMORY);
    }
    let w = b.len() + 1;
    let mut t = vec![0u32; cells as usize];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * w + j] = if a[i - 1] == b[j - 1] { t[(i - 1) * w + j - 1] + 1 } else { t[(i - 1) * w + j].max(t[i * w + j - 1]) };
        }
    }
    let total = t[a.len() * w + b.len()] as usize;
    if want_len {
        return Value::Integer(total as i64);
    }
    // Walk back from the end, collecting the common string and (for IDX) the matching ranges.
    let mut out = vec![0u8; total];
    let mut idx = total;
    let (mut i, mut j) = (a.len(), b.len());
    let mut matches: Vec<Value> = Vec::new();
    let mut range: Option<(usize, usize, usize, usize)> = None; // a start, a end, b start, b end
    let emit = |r: (usize, usize, usize, usize), matches: &mut Vec<Value>| {
        let len = r.1 - r.0 + 1;
        if len >= min_len {
            let mut m = vec![
                Value::Array(vec![Value::Integer(r.0 as i64), Value::Integer(r.1 as i64)]),
                Value::Array(vec![Value::Integer(r.2 as i64), Value::Integer(r.3 as i64)]),
            ];
            if with_len {
                m.push(Value::Integer(len as i64));
            }
            matches.push(Value::Array(m));
        }
    };
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            idx -= 1;
            out[idx] = a[i - 1];
            let (ai, bj) = (i - 1, j - 1);
            range = match range {
                Some((s, e, bs, be)) if s == ai + 1 && bs == bj + 1 => Some((ai, e, bj, be)),
                Some(r) => {
                    emit(r, &mut matches);
                    Some((ai, ai, bj, bj))
                }
                None => Some((ai, ai, bj, bj)),
            };
            i -= 1;
            j -= 1;
        } else if t[(i - 1) * w + j] > t[i * w + j - 1] {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    if let Some(r) = range {
        emit(r, &mut matches);
    }
    if want_idx {
        return Value::Map(vec![
            (Value::Bulk(Bytes::from_static(b"matches")), Value::Array(matches)),
            (Value::Bulk(Bytes::from_static(b"len")), Value::Integer(total as i64)),
        ]);
    }
    Value::Bulk(Bytes::from(out))
}
