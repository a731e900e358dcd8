//! The libraries Redis scripts commonly use, as Redis embeds them: `bit` (LuaBitOp), `cjson` (lua-cjson),
//! `cmsgpack` (lua-cmsgpack) and `struct` (lua-struct). Written here in Rust against mlua (JSON parsing by
//! serde_json) with the same function names, argument conventions and results as the C modules Redis links, for the
//! calls scripts make; DESIGN NOTE in docs/scripting.md lists what is left out (cjson's configuration knobs).

use mlua::{Lua, LightUserData, MultiValue, Table, Value as LuaValue, Variadic};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

pub fn install(lua: &Lua, base: &Table) -> mlua::Result<()> {
    base.raw_set("bit", bit(lua)?)?;
    base.raw_set("cjson", cjson(lua)?)?;
    base.raw_set("cmsgpack", cmsgpack(lua)?)?;
    base.raw_set("struct", structlib(lua)?)?;
    Ok(())
}

fn num(v: &LuaValue, fname: &str, pos: usize) -> mlua::Result<f64> {
    match v {
        LuaValue::Integer(i) => Ok(*i as f64),
        LuaValue::Number(n) => Ok(*n),
        LuaValue::String(s) => {
            let t = s.to_str().map(|s| s.trim().to_string()).unwrap_or_default();
            t.parse::<f64>().map_err(|_| bad_arg(fname, pos, "number expected"))
        }
        _ => Err(bad_arg(fname, pos, "number expected")),
    }
}

fn bad_arg(fname: &str, pos: usize, what: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("bad argument #{pos} to '{fname}' ({what})"))
}

// ----- bit -----

fn tobit(n: f64) -> i32 {
    let r = n.round_ties_even().rem_euclid(4294967296.0);
    (r as u64 as u32) as i32
}

fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    fn reduce(lua: &Lua, name: &'static str, f: fn(i32, i32) -> i32) -> mlua::Result<mlua::Function> {
        lua.create_function(move |_, args: Variadic<LuaValue>| {
            let mut acc = tobit(num(args.first().unwrap_or(&LuaValue::Nil), name, 1)?);
            for (i, a) in args.iter().enumerate().skip(1) {
                acc = f(acc, tobit(num(a, name, i + 1)?));
            }
            Ok(acc as f64)
        })
    }
    t.raw_set("band", reduce(lua, "band", |a, b| a & b)?)?;
    t.raw_set("bor", reduce(lua, "bor", |a, b| a | b)?)?;
    t.raw_set("bxor", reduce(lua, "bxor", |a, b| a ^ b)?)?;
    t.raw_set("tobit", lua.create_function(|_, v: LuaValue| Ok(tobit(num(&v, "tobit", 1)?) as f64))?)?;
    t.raw_set("bnot", lua.create_function(|_, v: LuaValue| Ok((!tobit(num(&v, "bnot", 1)?)) as f64))?)?;
    t.raw_set("bswap", lua.create_function(|_, v: LuaValue| Ok(tobit(num(&v, "bswap", 1)?).swap_bytes() as f64))?)?;
    fn shift(lua: &Lua, name: &'static str, f: fn(i32, u32) -> i32) -> mlua::Result<mlua::Function> {
        lua.create_function(move |_, (x, n): (LuaValue, LuaValue)| {
            let x = tobit(num(&x, name, 1)?);
            let n = (tobit(num(&n, name, 2)?) as u32) & 31;
            Ok(f(x, n) as f64)
        })
    }
    t.raw_set("lshift", shift(lua, "lshift", |x, n| ((x as u32) << n) as i32)?)?;
    t.raw_set("rshift", shift(lua, "rshift", |x, n| ((x as u32) >> n) as i32)?)?;
    t.raw_set("arshift", shift(lua, "arshift", |x, n| x >> n)?)?;
    t.raw_set("rol", shift(lua, "rol", |x, n| (x as u32).rotate_left(n) as i32)?)?;
    t.raw_set("ror", shift(lua, "ror", |x, n| (x as u32).rotate_right(n) as i32)?)?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, (x, n): (LuaValue, Option<LuaValue>)| {
            let x = tobit(num(&x, "tohex", 1)?) as u32;
            let n = match n {
                Some(v) => tobit(num(&v, "tohex", 2)?),
                None => 8,
            };
            // A negative count asks for upper case. `unsigned_abs`: negating -2^31 overflowed (the C module's
            // CVE-2024-31449 was the same overflow writing past its buffer; here it panicked in debug builds).
            let upper = n < 0;
            let n = (n.unsigned_abs() as usize).min(8);
            let s = if upper { format!("{x:08X}") } else { format!("{x:08x}") };
            Ok(s[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}

// ----- cjson -----

/// lua-cjson's settings that scripts change (they last for the Lua state, as in Redis, until changed back):
/// nesting limits for encode and decode, and what encode does with NaN and infinities.
struct JsonConfig {
    encode_max_depth: AtomicUsize,
    decode_max_depth: AtomicUsize,
    /// 0: refuse (the default), 1: write `NaN` / `Infinity` / `-Infinity`, 2: write `null`.
    encode_invalid_numbers: AtomicU8,
}

/// lua-cjson's default nesting limit for encode and decode.
const JSON_DEFAULT_DEPTH: usize = 1000;

fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg = Arc::new(JsonConfig {
        encode_max_depth: AtomicUsize::new(JSON_DEFAULT_DEPTH),
        decode_max_depth: AtomicUsize::new(JSON_DEFAULT_DEPTH),
        encode_invalid_numbers: AtomicU8::new(0),
    });
    t.raw_set("null", LuaValue::LightUserData(LightUserData(std::ptr::null_mut())))?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |_, v: LuaValue| {
            let mut out = Vec::new();
            json_encode(&v, &mut out, 0, &c)?;
            Ok(mlua::BString::from(out))
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, s: mlua::LuaString| {
            let parsed: serde_json::Value = serde_json::from_slice(&s.as_bytes())
                .map_err(|e| mlua::Error::RuntimeError(format!("Expected value but found invalid token: {e}")))?;
            json_to_lua(lua, &parsed, 1, c.decode_max_depth.load(Ordering::Relaxed))
        })?,
    )?;
    // The nesting limits: `cjson.encode_max_depth([n])` sets (1 .. 2^31-1) and returns the setting.
    for (name, which) in [("encode_max_depth", 0), ("decode_max_depth", 1)] {
        let c = cfg.clone();
        t.raw_set(
            name,
            lua.create_function(move |_, n: Option<f64>| {
                let slot = if which == 0 { &c.encode_max_depth } else { &c.decode_max_depth };
                if let Some(n) = n {
                    if !(1.0..=i32::MAX as f64).contains(&n) {
                        return Err(mlua::Error::RuntimeError("bad argument #1 (expected integer between 1 and 2147483647)".into()));
                    }
                    slot.store(n as usize, Ordering::Relaxed);
                }
                Ok(slot.load(Ordering::Relaxed) as f64)
            })?,
        )?;
    }
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, v: Option<LuaValue>| {
            let mode = match v {
                None => c.encode_invalid_numbers.load(Ordering::Relaxed),
                Some(LuaValue::Boolean(b)) => b as u8,
                Some(LuaValue::String(s)) if &s.as_bytes()[..] == b"on" => 1,
                Some(LuaValue::String(s)) if &s.as_bytes()[..] == b"off" => 0,
                Some(LuaValue::String(s)) if &s.as_bytes()[..] == b"null" => 2,
                Some(_) => return Err(mlua::Error::RuntimeError("bad argument #1 (invalid option)".into())),
            };
            c.encode_invalid_numbers.store(mode, Ordering::Relaxed);
            Ok(match mode {
                2 => LuaValue::String(lua.create_string("null")?),
                m => LuaValue::Boolean(m == 1),
            })
        })?,
    )?;
    // Other knobs scripts sometimes call; accepted, returning what they were given.
    for name in ["encode_keep_buffer", "decode_invalid_numbers", "encode_number_precision", "encode_sparse_array"] {
        t.raw_set(name, lua.create_function(|_, args: MultiValue| Ok(args))?)?;
    }
    Ok(t)
}

fn json_number(n: f64, out: &mut Vec<u8>, cfg: &JsonConfig) -> mlua::Result<()> {
    if !n.is_finite() {
        match cfg.encode_invalid_numbers.load(Ordering::Relaxed) {
            0 => return Err(mlua::Error::RuntimeError("Cannot serialise number: must not be NaN or Inf".into())),
            1 => out.extend_from_slice(if n.is_nan() { b"NaN" as &[u8] } else if n > 0.0 { b"Infinity" } else { b"-Infinity" }),
            _ => out.extend_from_slice(b"null"),
        }
        return Ok(());
    }
    out.extend_from_slice(lua_g14(n).as_bytes());
    Ok(())
}

/// `%.14g`, as lua-cjson's default precision and Lua 5.1's number formatting.
pub fn lua_g14(n: f64) -> String {
    if n == n.trunc() && n.abs() < 1e15 {
        return format!("{}", n as i64);
    }
    let exp = n.abs().log10().floor() as i32;
    if !(-5..14).contains(&exp) {
        let s = format!("{:.13e}", n);
        // Rust: 1.2345678901230e20 -> C: 1.234567890123e+20 (trailing zeros trimmed, signed two-digit exponent).
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mant = if mant.contains('.') { mant.trim_end_matches('0').trim_end_matches('.') } else { mant };
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (13 - exp).max(0) as usize;
    let s = format!("{:.*}", decimals, n);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn json_string(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// Whether a table is an array for lua-cjson: only positive integer keys, not excessively sparse. Returns its length.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let mut max = 0usize;
    let mut count = 0usize;
    for pair in t.pairs::<LuaValue, LuaValue>() {
        let (k, _) = pair?;
        let idx = match k {
            LuaValue::Integer(i) if i >= 1 => i as usize,
            LuaValue::Number(n) if n >= 1.0 && n == n.trunc() => n as usize,
            _ => return Ok(None),
        };
        max = max.max(idx);
        count += 1;
    }
    if max > 10 && max > count * 2 {
        return Err(mlua::Error::RuntimeError("Cannot serialise table: excessively sparse array".into()));
    }
    Ok(Some(max))
}

/// The most an encoder (cjson.encode, cmsgpack.pack) may produce: its output lives outside the Lua state's
/// memory limit until it is returned, and a table shared by many parents repeats its encoding for each.
const MAX_ENCODED: usize = 512 << 20;

fn json_encode(v: &LuaValue, out: &mut Vec<u8>, depth: usize, cfg: &JsonConfig) -> mlua::Result<()> {
    // A table one level deeper than `encode_max_depth` is refused (lua-cjson counts the outermost table as 1).
    if matches!(v, LuaValue::Table(_)) && depth + 1 > cfg.encode_max_depth.load(Ordering::Relaxed).min(JSON_DEFAULT_DEPTH) {
        return Err(mlua::Error::RuntimeError(format!("Cannot serialise, excessive nesting ({})", depth + 1)));
    }
    if out.len() > MAX_ENCODED {
        return Err(mlua::Error::RuntimeError("Cannot serialise: output larger than 512 MB".into()));
    }
    match v {
        LuaValue::Nil => out.extend_from_slice(b"null"),
        LuaValue::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        LuaValue::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        LuaValue::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        LuaValue::Number(n) => json_number(*n, out, cfg)?,
        LuaValue::String(s) => json_string(&s.as_bytes(), out),
        LuaValue::Table(t) => match array_len(t)? {
            Some(n) if n > 0 => {
                out.push(b'[');
                for i in 1..=n {
                    if i > 1 {
                        out.push(b',');
                    }
                    json_encode(&t.raw_get::<LuaValue>(i)?, out, depth + 1, cfg)?;
                }
                out.push(b']');
            }
            _ if t.raw_len() == 0 && t.pairs::<LuaValue, LuaValue>().next().is_none() => out.extend_from_slice(b"{}"),
            _ => {
                out.push(b'{');
                let mut first = true;
                for pair in t.pairs::<LuaValue, LuaValue>() {
                    let (k, val) = pair?;
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    match &k {
                        LuaValue::String(s) => json_string(&s.as_bytes(), out),
                        LuaValue::Integer(i) => json_string(i.to_string().as_bytes(), out),
                        LuaValue::Number(n) => json_string(lua_g14(*n).as_bytes(), out),
                        _ => return Err(mlua::Error::RuntimeError("Cannot serialise table: table key must be a number or string".into())),
                    }
                    out.push(b':');
                    json_encode(&val, out, depth + 1, cfg)?;
                }
                out.push(b'}');
            }
        },
        other => {
            return Err(mlua::Error::RuntimeError(format!("Cannot serialise {}: type not supported", other.type_name())));
        }
    }
    Ok(())
}

/// A decoded value as Lua; `depth` is the nesting of `v` (1 outermost), refused past `max` as lua-cjson does.
fn json_to_lua(lua: &Lua, v: &serde_json::Value, depth: usize, max: usize) -> mlua::Result<LuaValue> {
    if matches!(v, serde_json::Value::Array(_) | serde_json::Value::Object(_)) && depth > max {
        return Err(mlua::Error::RuntimeError(format!("Found too many nested data structures ({depth})")));
    }
    Ok(match v {
        serde_json::Value::Null => LuaValue::LightUserData(LightUserData(std::ptr::null_mut())),
        serde_json::Value::Bool(b) => LuaValue::Boolean(*b),
        serde_json::Value::Number(n) => LuaValue::Number(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => LuaValue::String(lua.create_string(s)?),
        serde_json::Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, json_to_lua(lua, item, depth + 1, max)?)?;
            }
            LuaValue::Table(t)
        }
        serde_json::Value::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, item) in map {
                t.raw_set(lua.create_string(k)?, json_to_lua(lua, item, depth + 1, max)?)?;
            }
            LuaValue::Table(t)
        }
    })
}

// ----- cmsgpack -----

fn cmsgpack(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|_, args: Variadic<LuaValue>| {
            if args.is_empty() {
                return Err(mlua::Error::RuntimeError("MessagePack pack needs input.".into()));
            }
            let mut out = Vec::new();
            for a in args.iter() {
                mp_encode(a, &mut out, 0)?;
            }
            Ok(mlua::BString::from(out))
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let b = s.as_bytes();
            let mut pos = 0;
            let mut vals = Vec::new();
            while pos < b.len() {
                vals.push(mp_decode(lua, &b, &mut pos, 0)?);
            }
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    let limit = |lua: &Lua, s: &[u8], limit: usize, offset: usize| -> mlua::Result<MultiValue> {
        let mut pos = offset;
        let mut vals = Vec::new();
        while pos < s.len() && (limit == 0 || vals.len() < limit) {
            vals.push(mp_decode(lua, s, &mut pos, 0)?);
        }
        let next = if pos >= s.len() { -1 } else { pos as i64 };
        let mut out = vec![LuaValue::Number(next as f64)];
        out.extend(vals);
        Ok(MultiValue::from_iter(out))
    };
    t.raw_set(
        "unpack_one",
        lua.create_function(move |lua, (s, offset): (mlua::LuaString, Option<i64>)| limit(lua, &s.as_bytes(), 1, offset.unwrap_or(0).max(0) as usize))?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(move |lua, (s, n, offset): (mlua::LuaString, i64, Option<i64>)| {
            limit(lua, &s.as_bytes(), n.max(0) as usize, offset.unwrap_or(0).max(0) as usize)
        })?,
    )?;
    Ok(t)
}

fn mp_int(i: i64, out: &mut Vec<u8>) {
    if i >= 0 {
        let u = i as u64;
        if u < 128 {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if i >= -32 {
        out.push(i as i8 as u8);
    } else if i >= -128 {
        out.extend_from_slice(&[0xd0, i as i8 as u8]);
    } else if i >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

fn mp_len(n: usize, fix: u8, fixmax: usize, m16: u8, m32: u8, out: &mut Vec<u8>) {
    if n < fixmax {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(m16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(m32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn mp_encode(v: &LuaValue, out: &mut Vec<u8>, depth: usize) -> mlua::Result<()> {
    if out.len() > MAX_ENCODED {
        return Err(mlua::Error::RuntimeError("MessagePack pack: output larger than 512 MB".into()));
    }
    match v {
        LuaValue::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        LuaValue::Integer(i) => mp_int(*i, out),
        LuaValue::Number(n) if *n == n.trunc() && n.abs() < 9.2e18 => mp_int(*n as i64, out),
        LuaValue::Number(n) => {
            if (*n as f32) as f64 == *n {
                out.push(0xca);
                out.extend_from_slice(&(*n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        LuaValue::String(s) => {
            let b = s.as_bytes();
            if b.len() < 32 {
                out.push(0xa0 | b.len() as u8);
            } else if b.len() <= 0xff {
                out.extend_from_slice(&[0xd9, b.len() as u8]);
            } else if b.len() <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(b.len() as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        LuaValue::Table(t) if depth < 16 => {
            // An array when its keys are exactly 1..n, a map otherwise (as lua-cmsgpack decides).
            let n = t.raw_len();
            let count = t.pairs::<LuaValue, LuaValue>().count();
            if n > 0 && count == n {
                mp_len(n, 0x90, 16, 0xdc, 0xdd, out);
                for i in 1..=n {
                    mp_encode(&t.raw_get::<LuaValue>(i)?, out, depth + 1)?;
                }
            } else {
                mp_len(count, 0x80, 16, 0xde, 0xdf, out);
                for pair in t.pairs::<LuaValue, LuaValue>() {
                    let (k, val) = pair?;
                    mp_encode(&k, out, depth + 1)?;
                    mp_encode(&val, out, depth + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

/// Nesting the decoder follows before it gives up. Each level is a Rust call (and the C module's a Lua stack
/// slot): 4,000 nested one-element arrays overflowed the script thread's stack and aborted the process.
const MP_MAX_DEPTH: usize = 1000;

fn mp_decode(lua: &Lua, b: &[u8], pos: &mut usize, depth: usize) -> mlua::Result<LuaValue> {
    if depth >= MP_MAX_DEPTH {
        // lua-cmsgpack runs out of Lua stack at about this nesting; Redis answers with Lua's "stack overflow".
        return Err(mlua::Error::RuntimeError("stack overflow".into()));
    }
    let bad = || mlua::Error::RuntimeError("Missing bytes in input.".into());
    let take = |pos: &mut usize, n: usize| -> mlua::Result<&[u8]> {
        let s = b.get(*pos..*pos + n).ok_or_else(bad)?;
        *pos += n;
        Ok(s)
    };
    let c = *take(pos, 1)?.first().ok_or_else(bad)?;
    let be = |s: &[u8]| s.iter().fold(0u64, |a, &x| (a << 8) | x as u64);
    let string = |lua: &Lua, pos: &mut usize, n: usize| -> mlua::Result<LuaValue> { Ok(LuaValue::String(lua.create_string(take(pos, n)?)?)) };
    Ok(match c {
        0x00..=0x7f => LuaValue::Number(c as f64),
        0xe0..=0xff => LuaValue::Number(c as i8 as f64),
        0x80..=0x8f => mp_map(lua, b, pos, (c & 0x0f) as usize, depth)?,
        0x90..=0x9f => mp_array(lua, b, pos, (c & 0x0f) as usize, depth)?,
        0xa0..=0xbf => string(lua, pos, (c & 0x1f) as usize)?,
        0xc0 => LuaValue::Nil,
        0xc2 => LuaValue::Boolean(false),
        0xc3 => LuaValue::Boolean(true),
        0xca => LuaValue::Number(f32::from_be_bytes(take(pos, 4)?.try_into().map_err(|_| bad())?) as f64),
        0xcb => LuaValue::Number(f64::from_be_bytes(take(pos, 8)?.try_into().map_err(|_| bad())?)),
        0xcc => LuaValue::Number(be(take(pos, 1)?) as f64),
        0xcd => LuaValue::Number(be(take(pos, 2)?) as f64),
        0xce => LuaValue::Number(be(take(pos, 4)?) as f64),
        0xcf => LuaValue::Number(be(take(pos, 8)?) as f64),
        0xd0 => LuaValue::Number(be(take(pos, 1)?) as u8 as i8 as f64),
        0xd1 => LuaValue::Number(be(take(pos, 2)?) as u16 as i16 as f64),
        0xd2 => LuaValue::Number(be(take(pos, 4)?) as u32 as i32 as f64),
        0xd3 => LuaValue::Number(be(take(pos, 8)?) as i64 as f64),
        0xd9 | 0xc4 => {
            let n = be(take(pos, 1)?) as usize;
            string(lua, pos, n)?
        }
        0xda | 0xc5 => {
            let n = be(take(pos, 2)?) as usize;
            string(lua, pos, n)?
        }
        0xdb | 0xc6 => {
            let n = be(take(pos, 4)?) as usize;
            string(lua, pos, n)?
        }
        0xdc => {
            let n = be(take(pos, 2)?) as usize;
            mp_array(lua, b, pos, n, depth)?
        }
        0xdd => {
            let n = be(take(pos, 4)?) as usize;
            mp_array(lua, b, pos, n, depth)?
        }
        0xde => {
            let n = be(take(pos, 2)?) as usize;
            mp_map(lua, b, pos, n, depth)?
        }
        0xdf => {
            let n = be(take(pos, 4)?) as usize;
            mp_map(lua, b, pos, n, depth)?
        }
        _ => return Err(mlua::Error::RuntimeError("Bad data format in input.".into())),
    })
}

fn mp_array(lua: &Lua, b: &[u8], pos: &mut usize, n: usize, depth: usize) -> mlua::Result<LuaValue> {
    let t = lua.create_table()?;
    for i in 1..=n {
        t.raw_set(i, mp_decode(lua, b, pos, depth + 1)?)?;
    }
    Ok(LuaValue::Table(t))
}

fn mp_map(lua: &Lua, b: &[u8], pos: &mut usize, n: usize, depth: usize) -> mlua::Result<LuaValue> {
    let t = lua.create_table()?;
    for _ in 0..n {
        let k = mp_decode(lua, b, pos, depth + 1)?;
        let v = mp_decode(lua, b, pos, depth + 1)?;
        if !k.is_nil() {
            t.raw_set(k, v)?;
        }
    }
    Ok(LuaValue::Table(t))
}

// ----- struct -----

struct Fmt<'a> {
    f: &'a [u8],
    i: usize,
    little: bool,
}

enum Item {
    Int { size: usize, signed: bool },
    Float,
    Double,
    Str,
    Chars(Option<usize>),
    Pad,
}

impl<'a> Fmt<'a> {
    fn num(&mut self) -> Option<usize> {
        let start = self.i;
        while self.i < self.f.len() && self.f[self.i].is_ascii_digit() {
            self.i += 1;
        }
        std::str::from_utf8(&self.f[start..self.i]).ok()?.parse().ok()
    }

    fn next(&mut self) -> mlua::Result<Option<Item>> {
        while self.i < self.f.len() {
            let c = self.f[self.i];
            self.i += 1;
            let item = match c {
                b' ' => continue,
                b'<' => {
                    self.little = true;
                    continue;
                }
                b'>' => {
                    self.little = false;
                    continue;
                }
                b'=' => {
                    self.little = cfg!(target_endian = "little");
                    continue;
                }
                b'!' => {
                    self.num();
                    continue;
                }
                b'b' | b'B' => Item::Int { size: 1, signed: c == b'b' },
                b'h' | b'H' => Item::Int { size: 2, signed: c == b'h' },
                b'l' | b'L' | b'T' => Item::Int { size: 8, signed: c == b'l' },
                b'i' | b'I' => {
                    let size = self.num().unwrap_or(4);
                    if size == 0 || size > 8 {
                        return Err(mlua::Error::RuntimeError(format!("integral size {size} is larger than limit of 8")));
                    }
                    Item::Int { size, signed: c == b'i' }
                }
                b'f' => Item::Float,
                b'd' => Item::Double,
                b's' => Item::Str,
                b'c' => Item::Chars(self.num().filter(|n| *n > 0)),
                b'x' => Item::Pad,
                other => return Err(mlua::Error::RuntimeError(format!("invalid format option '{}'", other as char))),
            };
            return Ok(Some(item));
        }
        Ok(None)
    }
}

fn structlib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|_, (fmt, args): (mlua::LuaString, Variadic<LuaValue>)| {
            let fb = fmt.as_bytes();
            let mut f = Fmt { f: &fb, i: 0, little: cfg!(target_endian = "little") };
            let mut out = Vec::new();
            let mut arg = 0usize;
            let next_arg = |arg: &mut usize, what: &str| -> mlua::Result<(LuaValue, usize)> {
                *arg += 1;
                args.get(*arg - 1).cloned().map(|v| (v, *arg + 1)).ok_or_else(|| bad_arg("pack", *arg + 1, what))
            };
            while let Some(item) = f.next()? {
                match item {
                    Item::Int { size, .. } => {
                        let (v, p) = next_arg(&mut arg, "number expected")?;
                        let v = num(&v, "pack", p)? as i64;
                        let bytes = v.to_le_bytes();
                        let mut b = bytes[..size].to_vec();
                        if !f.little {
                            b.reverse();
                        }
                        out.extend_from_slice(&b);
                    }
                    Item::Float => {
                        let (v, p) = next_arg(&mut arg, "number expected")?;
                        let v = num(&v, "pack", p)? as f32;
                        out.extend_from_slice(&if f.little { v.to_le_bytes() } else { v.to_be_bytes() });
                    }
                    Item::Double => {
                        let (v, p) = next_arg(&mut arg, "number expected")?;
                        let v = num(&v, "pack", p)?;
                        out.extend_from_slice(&if f.little { v.to_le_bytes() } else { v.to_be_bytes() });
                    }
                    Item::Str | Item::Chars(_) => {
                        let (v, p) = next_arg(&mut arg, "string expected")?;
                        let v = match v {
                            LuaValue::String(s) => s.as_bytes().to_vec(),
                            LuaValue::Integer(i) => i.to_string().into_bytes(),
                            LuaValue::Number(n) => lua_g14(n).into_bytes(),
                            _ => return Err(bad_arg("pack", p, "string expected")),
                        };
                        match item {
                            Item::Chars(Some(n)) => {
                                if v.len() < n {
                                    return Err(bad_arg("pack", p, "string too short"));
                                }
                                out.extend_from_slice(&v[..n]);
                            }
                            Item::Chars(None) => out.extend_from_slice(&v),
                            _ => {
                                out.extend_from_slice(&v);
                                out.push(0);
                            }
                        }
                    }
                    Item::Pad => out.push(0),
                }
            }
            Ok(mlua::BString::from(out))
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, (fmt, data, init): (mlua::LuaString, mlua::LuaString, Option<i64>)| {
            let fb = fmt.as_bytes();
            let d = data.as_bytes();
            let mut f = Fmt { f: &fb, i: 0, little: cfg!(target_endian = "little") };
            let mut pos = (init.unwrap_or(1).max(1) - 1) as usize;
            let mut vals: Vec<LuaValue> = Vec::new();
            let short = || mlua::Error::RuntimeError("bad argument #2 to 'unpack' (data string too short)".into());
            while let Some(item) = f.next()? {
                match item {
                    Item::Int { size, signed } => {
                        let mut b = d.get(pos..pos + size).ok_or_else(short)?.to_vec();
                        pos += size;
                        if !f.little {
                            b.reverse();
                        }
                        let mut v: u64 = 0;
                        for (i, x) in b.iter().enumerate() {
                            v |= (*x as u64) << (8 * i);
                        }
                        let n: f64 = if signed && size < 8 && (v >> (size * 8 - 1)) & 1 == 1 {
                            ((v as i64) - (1i64 << (size * 8))) as f64
                        } else if signed {
                            v as i64 as f64
                        } else {
                            v as f64
                        };
                        vals.push(LuaValue::Number(n));
                    }
                    Item::Float => {
                        let b: [u8; 4] = d.get(pos..pos + 4).ok_or_else(short)?.try_into().map_err(|_| short())?;
                        pos += 4;
                        vals.push(LuaValue::Number(if f.little { f32::from_le_bytes(b) } else { f32::from_be_bytes(b) } as f64));
                    }
                    Item::Double => {
                        let b: [u8; 8] = d.get(pos..pos + 8).ok_or_else(short)?.try_into().map_err(|_| short())?;
                        pos += 8;
                        vals.push(LuaValue::Number(if f.little { f64::from_le_bytes(b) } else { f64::from_be_bytes(b) }));
                    }
                    Item::Str => {
                        let end = d[pos.min(d.len())..].iter().position(|&c| c == 0).ok_or_else(|| mlua::Error::RuntimeError("unfinished string in data".into()))?;
                        vals.push(LuaValue::String(lua.create_string(&d[pos..pos + end])?));
                        pos += end + 1;
                    }
                    Item::Chars(n) => {
                        let n = match n {
                            Some(n) => n,
                            // `c0`: the length is the previous value unpacked.
                            None => match vals.pop() {
                                Some(LuaValue::Number(x)) => x as usize,
                                _ => return Err(mlua::Error::RuntimeError("format 'c0' needs a previous size".into())),
                            },
                        };
                        let s = d.get(pos..pos + n).ok_or_else(short)?;
                        vals.push(LuaValue::String(lua.create_string(s)?));
                        pos += n;
                    }
                    Item::Pad => pos += 1,
                }
            }
            vals.push(LuaValue::Number((pos + 1) as f64));
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|_, fmt: mlua::LuaString| {
            let fb = fmt.as_bytes();
            let mut f = Fmt { f: &fb, i: 0, little: true };
            let mut size = 0usize;
            while let Some(item) = f.next()? {
                size += match item {
                    Item::Int { size, .. } => size,
                    Item::Float => 4,
                    Item::Double => 8,
                    Item::Chars(Some(n)) => n,
                    Item::Pad => 1,
                    Item::Str | Item::Chars(None) => return Err(mlua::Error::RuntimeError("options 'c0' - 's' have undefined sizes".into())),
                };
            }
            Ok(size as f64)
        })?,
    )?;
    Ok(t)
}
