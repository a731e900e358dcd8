//! Redis's conversion rules between command replies and Lua values, both ways.
//!
//! Reply -> Lua (what `redis.call` returns) depends on the script's protocol (`redis.setresp`): under RESP2 the reply
//! is first seen as RESP2 (maps flatten, doubles become strings, nulls become `false`); under RESP3 maps, sets,
//! doubles, booleans, big numbers and nulls keep their types. Lua -> reply (what a script returns) follows the
//! table conventions (`{ok=..}`, `{err=..}`, `{double=..}`, `{map=..}`, `{set=..}`, `{big_number=..}`), numbers are
//! truncated to integers, arrays stop at the first nil, and booleans depend on the protocol the script chose.

use bytes::Bytes;
use mlua::{Lua, Table, Value as LuaValue};
use ruvio_protocol::Value;

/// A command's reply as the Lua value `redis.call` returns.
pub fn reply_to_lua(lua: &Lua, v: &Value, resp: u8) -> mlua::Result<LuaValue> {
    Ok(match v {
        Value::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(s)?)?;
            LuaValue::Table(t)
        }
        Value::Error(e) => {
            let t = lua.create_table()?;
            t.raw_set("err", lua.create_string(e)?)?;
            LuaValue::Table(t)
        }
        Value::Integer(n) => LuaValue::Number(*n as f64),
        Value::Bulk(b) => LuaValue::String(lua.create_string(b)?),
        Value::Nil | Value::NilArray => {
            if resp == 3 {
                LuaValue::Nil
            } else {
                LuaValue::Boolean(false)
            }
        }
        Value::Array(items) | Value::Push(items) => array(lua, items, resp)?,
        Value::Set(items) if resp == 3 => {
            let set = lua.create_table()?;
            for item in items {
                set.raw_set(reply_to_lua(lua, item, resp)?, true)?;
            }
            wrap(lua, "set", LuaValue::Table(set))?
        }
        Value::Set(items) => array(lua, items, resp)?,
        Value::Map(pairs) if resp == 3 => {
            let map = lua.create_table()?;
            for (k, val) in pairs {
                map.raw_set(reply_to_lua(lua, k, resp)?, reply_to_lua(lua, val, resp)?)?;
            }
            wrap(lua, "map", LuaValue::Table(map))?
        }
        Value::Map(pairs) => {
            let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            let mut i = 1;
            for (k, val) in pairs {
                t.raw_set(i, reply_to_lua(lua, k, resp)?)?;
                t.raw_set(i + 1, reply_to_lua(lua, val, resp)?)?;
                i += 2;
            }
            LuaValue::Table(t)
        }
        Value::Double(d) if resp == 3 => wrap(lua, "double", LuaValue::Number(*d))?,
        Value::Double(d) => LuaValue::String(lua.create_string(format_double(*d))?),
        Value::Boolean(b) if resp == 3 => LuaValue::Boolean(*b),
        Value::Boolean(b) => LuaValue::Number(if *b { 1.0 } else { 0.0 }),
        Value::BigNumber(n) if resp == 3 => wrap(lua, "big_number", LuaValue::String(lua.create_string(n)?))?,
        Value::BigNumber(n) => LuaValue::String(lua.create_string(n)?),
        Value::Verbatim { format, text } if resp == 3 => {
            let t = lua.create_table()?;
            t.raw_set("format", lua.create_string(format)?)?;
            t.raw_set("string", lua.create_string(text)?)?;
            wrap(lua, "verbatim_string", LuaValue::Table(t))?
        }
        Value::Verbatim { text, .. } => LuaValue::String(lua.create_string(text)?),
        Value::Attribute { data, .. } => reply_to_lua(lua, data, resp)?,
        Value::Bulks(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(item)?)?;
            }
            LuaValue::Table(t)
        }
    })
}

fn array(lua: &Lua, items: &[Value], resp: u8) -> mlua::Result<LuaValue> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, reply_to_lua(lua, item, resp)?)?;
    }
    Ok(LuaValue::Table(t))
}

fn wrap(lua: &Lua, field: &str, v: LuaValue) -> mlua::Result<LuaValue> {
    let t = lua.create_table()?;
    t.raw_set(field, v)?;
    Ok(LuaValue::Table(t))
}

/// A double as Redis's RESP2 renders it (`%.17g`, shortest form that round-trips).
fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let mut s = format!("{d}");
    if s.ends_with(".0") {
        s.truncate(s.len() - 2);
    }
    s
}

/// Nesting deeper than this is refused (Redis's reply conversion has the same guard against cycles).
const MAX_DEPTH: usize = 1000;

/// Elements a reply may take from tables it reaches more than once (a cycle, or one table shared by many
/// parents). A tree of distinct tables is never counted: the Lua state's memory limit bounds it. Without this,
/// `t[1] = t; t[2] = t` made a reply of 2^1000 elements and the process grew until it died.
const MAX_REVISITED_ELEMENTS: usize = 100_000;
/// String bytes a reply may carry in all (a short list of one large string repeated copies it each time).
const MAX_REPLY_BYTES: usize = 512 << 20;

/// What a reply's conversion has used so far.
struct Budget {
    seen: std::collections::HashSet<*const std::ffi::c_void>,
    revisited: usize,
    bytes: usize,
    exceeded: bool,
}

/// A script's return value (or an element of it) as the reply sent to the client. `resp` is the script's protocol.
/// A value too large to send (see [`MAX_REVISITED_ELEMENTS`], [`MAX_REPLY_BYTES`]) is answered with an error.
pub fn lua_to_reply(v: &LuaValue, resp: u8) -> Value {
    let mut budget = Budget { seen: Default::default(), revisited: 0, bytes: 0, exceeded: false };
    let reply = to_reply(v, resp, 0, &mut budget, false);
    if budget.exceeded {
        return Value::error(crate::errors::ERR_SCRIPT_REPLY_TOO_LARGE);
    }
    reply
}

fn to_reply(v: &LuaValue, resp: u8, depth: usize, budget: &mut Budget, revisit: bool) -> Value {
    if depth > MAX_DEPTH {
        return Value::error(crate::errors::ERR_LUA_STACK_LIMIT);
    }
    if budget.exceeded {
        return Value::Nil;
    }
    if revisit {
        budget.revisited += 1;
        if budget.revisited > MAX_REVISITED_ELEMENTS {
            budget.exceeded = true;
            return Value::Nil;
        }
    }
    match v {
        LuaValue::String(s) => {
            budget.bytes += s.as_bytes().len();
            if budget.bytes > MAX_REPLY_BYTES {
                budget.exceeded = true;
                return Value::Nil;
            }
            Value::Bulk(Bytes::copy_from_slice(&s.as_bytes()))
        }
        LuaValue::Integer(n) => Value::Integer(*n),
        // Redis truncates a Lua number to an integer (3.99 -> 3).
        LuaValue::Number(n) => Value::Integer(truncate(*n)),
        LuaValue::Boolean(true) if resp == 3 => Value::Boolean(true),
        LuaValue::Boolean(true) => Value::Integer(1),
        LuaValue::Boolean(false) if resp == 3 => Value::Boolean(false),
        LuaValue::Table(t) => {
            // Everything under a table met before counts against the revisit budget.
            let revisit = revisit || !budget.seen.insert(t.to_pointer());
            table_to_reply(t, resp, depth, budget, revisit)
        }
        _ => Value::Nil,
    }
}

fn truncate(n: f64) -> i64 {
    if n.is_nan() {
        0
    } else {
        n as i64
    }
}

fn table_to_reply(t: &Table, resp: u8, depth: usize, budget: &mut Budget, revisit: bool) -> Value {
    if let Ok(LuaValue::String(e)) = t.raw_get::<LuaValue>("err") {
        return error_value(&e.as_bytes());
    }
    if let Ok(LuaValue::String(s)) = t.raw_get::<LuaValue>("ok") {
        return Value::Simple(Bytes::copy_from_slice(&sanitize(&s.as_bytes())));
    }
    match t.raw_get::<LuaValue>("double") {
        Ok(LuaValue::Number(d)) => return Value::Double(d),
        Ok(LuaValue::Integer(d)) => return Value::Double(d as f64),
        _ => {}
    }
    if let Ok(LuaValue::String(s)) = t.raw_get::<LuaValue>("big_number") {
        return Value::BigNumber(Bytes::copy_from_slice(&s.as_bytes()));
    }
    if let Ok(LuaValue::Table(m)) = t.raw_get::<LuaValue>("map") {
        let mut pairs = Vec::new();
        for (k, val) in m.pairs::<LuaValue, LuaValue>().flatten() {
            pairs.push((to_reply(&k, resp, depth + 1, budget, revisit), to_reply(&val, resp, depth + 1, budget, revisit)));
        }
        return Value::Map(pairs);
    }
    if let Ok(LuaValue::Table(s)) = t.raw_get::<LuaValue>("set") {
        let items = s.pairs::<LuaValue, LuaValue>().flatten().map(|(k, _)| to_reply(&k, resp, depth + 1, budget, revisit)).collect();
        return Value::Set(items);
    }
    if let Ok(LuaValue::Table(v)) = t.raw_get::<LuaValue>("verbatim_string") {
        if let (Ok(LuaValue::String(f)), Ok(LuaValue::String(s))) = (v.raw_get::<LuaValue>("format"), v.raw_get::<LuaValue>("string")) {
            let f = f.as_bytes();
            if f.len() == 3 {
                return Value::Verbatim { format: [f[0], f[1], f[2]], text: Bytes::copy_from_slice(&s.as_bytes()) };
            }
        }
    }
    // An array: elements 1, 2, ... up to the first nil.
    let mut items = Vec::new();
    let mut i = 1;
    loop {
        match t.raw_get::<LuaValue>(i) {
            Ok(LuaValue::Nil) | Err(_) => break,
            Ok(v) => {
                items.push(to_reply(&v, resp, depth + 1, budget, revisit));
                if budget.exceeded {
                    break;
                }
            }
        }
        i += 1;
    }
    Value::Array(items)
}

/// An error reply from a script's `{err=...}`: CR/LF become spaces, and a text without an error code gets none added
/// (Redis sends it as written; `-` alone is not a valid reply, so an empty text becomes `ERR`).
pub fn error_value(text: &[u8]) -> Value {
    let clean = sanitize(text);
    if clean.is_empty() {
        return Value::error("ERR");
    }
    Value::Error(Bytes::from(clean))
}

fn sanitize(b: &[u8]) -> Vec<u8> {
    b.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect()
}

/// An mlua error as the plain Lua message (no "runtime error:" prefix, no traceback).
pub fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        // Lua errors reaching Rust carry a traceback; Redis's texts never do.
        mlua::Error::RuntimeError(m) => m.split("\nstack traceback:").next().unwrap_or(m).to_string(),
        mlua::Error::MemoryError(_) => "not enough memory".into(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        mlua::Error::WithContext { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}
