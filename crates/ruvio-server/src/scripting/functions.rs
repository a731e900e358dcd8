//! Redis 7 functions: libraries loaded with FUNCTION LOAD (`#!lua name=<lib>` followed by code that calls
//! `redis.register_function`), their functions called with FCALL / FCALL_RO, and the shebang flags that EVAL scripts
//! may carry too (`#!lua flags=no-writes`).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use mlua::{Function, RegistryKey, Table, Value as LuaValue};
use ruvio_protocol::Value;

use super::convert::lua_error_text;
use crate::errors::*;

/// Script flags (`no-writes`, `allow-oom`, `allow-stale`, `no-cluster`, `allow-cross-slot-keys`).
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// The script declared flags in a shebang (or is a function): without `no-writes` it may not run from *_RO.
    pub declared: bool,
    pub no_writes: bool,
    pub names: Vec<String>,
}

const KNOWN_FLAGS: &[&str] = &["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

impl Flags {
    fn add(&mut self, name: &str) -> Result<(), Value> {
        if !KNOWN_FLAGS.contains(&name) {
            return Err(script_error(ScriptError::UnexpectedFlag, name));
        }
        if name == "no-writes" {
            self.no_writes = true;
        }
        self.names.push(name.to_string());
        Ok(())
    }
}

/// Splits an EVAL body's optional `#!lua flags=...` line off; returns the flags and the code to compile (the
/// shebang line left empty, so line numbers stay those of the body).
pub fn parse_eval_shebang(body: &Bytes) -> Result<(Flags, Bytes), Value> {
    if !body.starts_with(b"#!") {
        return Ok((Flags::default(), body.clone()));
    }
    let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(script_error(ScriptError::UnexpectedEngine, engine));
    }
    let mut flags = Flags { declared: true, ..Default::default() };
    for p in parts {
        match p.strip_prefix("flags=") {
            Some(list) => {
                for f in list.split(',').filter(|f| !f.is_empty()) {
                    flags.add(f)?;
                }
            }
            None => return Err(script_error(ScriptError::UnknownShebangOption, p)),
        }
    }
    let mut code = Vec::with_capacity(body.len());
    code.extend_from_slice(&body[end..]);
    Ok((flags, Bytes::from(code)))
}

pub struct RegisteredFunction {
    /// In the Lua registry, not on mlua's reference stack (room for 8,000: a library of 9,000 functions, or many
    /// libraries, would exhaust it).
    pub func: RegistryKey,
    pub library: String,
    pub flags: Flags,
    pub description: Option<String>,
}

pub struct Library {
    pub code: Bytes,
    /// Function names, in registration order.
    pub functions: Vec<String>,
}

/// FUNCTION RESTORE's policy.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RestorePolicy {
    Append,
    Replace,
    Flush,
}

#[derive(Default)]
pub struct Registry {
    pub libraries: BTreeMap<String, Library>,
    pub functions: HashMap<String, RegisteredFunction>,
}

fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Parses `#!lua name=<lib>` (the first line of a library); returns the name and the code to compile.
fn parse_library_header(code: &Bytes) -> Result<(String, Bytes), Value> {
    if !code.starts_with(b"#!") {
        return Err(Value::error(ERR_FUNCTION_NO_METADATA));
    }
    let end = code.iter().position(|&c| c == b'\n').unwrap_or(code.len());
    let line = String::from_utf8_lossy(&code[2..end]).into_owned();
    // The engine is everything up to the first space (`#! name=x` names the engine ''), as Redis reads it.
    let (engine, rest) = line.split_once(' ').unwrap_or((&line, ""));
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(script_error(ScriptError::EngineNotFound, engine));
    }
    let mut name = None;
    let parts = split_args(rest).ok_or_else(|| Value::error(ERR_FUNCTION_BAD_METADATA))?;
    for p in parts.iter().map(String::as_str) {
        match p.strip_prefix("name=") {
            Some(_) if name.is_some() => return Err(Value::error(ERR_FUNCTION_NAME_TWICE)),
            Some(n) => name = Some(n.to_string()),
            None => return Err(script_error(ScriptError::InvalidMetadata, p)),
        }
    }
    let name = name.ok_or_else(|| Value::error(ERR_FUNCTION_NO_LIBRARY_NAME))?;
    if !valid_name(&name) {
        return Err(Value::error(ERR_FUNCTION_BAD_LIBRARY_NAME));
    }
    Ok((name, Bytes::copy_from_slice(&code[end..])))
}

/// The words of a shebang line as Redis's `sdssplitargs` reads them: separated by blanks, with `"..."` (backslash
/// escapes) and `'...'` quoting anywhere in a word (`name="foo"` is `name=foo`); a closing quote must end the word.
/// `None` for unbalanced quotes.
fn split_args(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let mut word = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_ascii_whitespace() {
                break;
            }
            chars.next();
            if c == '"' || c == '\'' {
                loop {
                    match chars.next()? {
                        q if q == c => break,
                        '\\' if c == '"' => match chars.next()? {
                            'n' => word.push('\n'),
                            'r' => word.push('\r'),
                            't' => word.push('\t'),
                            other => word.push(other),
                        },
                        other => word.push(other),
                    }
                }
                if chars.peek().is_some_and(|n| !n.is_ascii_whitespace()) {
                    return None;
                }
            } else {
                word.push(c);
            }
        }
        out.push(word);
    }
}

impl Registry {
    /// A function by name, in any case (Redis's function names are case-insensitive; `functions` is keyed by the
    /// lower-case name, FUNCTION LIST shows the name as registered).
    pub fn function(&self, name: &str) -> Option<&RegisteredFunction> {
        self.functions.get(&name.to_ascii_lowercase())
    }

    /// FUNCTION LOAD: compiles and runs the library's code, collecting what it registers. Returns the library name.
    pub fn load_library(&mut self, lua: &mlua::Lua, bridge: &Table, code: &Bytes, replace: bool) -> Result<String, Value> {
        let (name, body) = parse_library_header(code)?;
        if self.libraries.contains_key(&name) && !replace {
            return Err(script_error(ScriptError::LibraryExists, &name));
        }
        let chunk = lua
            .load(&body[..])
            .set_name("@user_function")
            .into_function()
            .map_err(|e| script_error(ScriptError::CompilingFunction, &lua_error_text(&e)))?;
        let mut registered: Vec<(String, RegisteredFunction)> = Vec::new();
        // Names registered so far (a set: a library may register thousands of functions).
        let mut names = std::collections::HashSet::new();
        let lib_name = name.clone();
        let outcome: mlua::Result<Result<(), String>> = lua.scope(|scope| {
            let register = scope.create_function_mut(|lua, args: mlua::MultiValue| {
                let r = register(lua, &args, &lib_name);
                match r {
                    Ok(f) => {
                        if !names.insert(f.0.to_ascii_lowercase()) {
                            return Err(mlua::Error::RuntimeError("Function already exists in the library".into()));
                        }
                        registered.push(f);
                        Ok(())
                    }
                    Err(e) => Err(mlua::Error::RuntimeError(e)),
                }
            })?;
            bridge.raw_set("register", register)?;
            let globals_mt: Table = bridge.raw_get("globals_mt")?;
            globals_mt.raw_set("__index", bridge.raw_get::<LuaValue>("load_globals")?)?;
            let r = chunk.call::<()>(());
            // Back to the run-time globals whatever the load did (an error, a timeout).
            globals_mt.raw_set("__index", bridge.raw_get::<LuaValue>("run_globals")?)?;
            bridge.raw_set("register", LuaValue::Nil)?;
            Ok(r.map_err(|e| lua_error_text(&e)))
        });
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(text)) | Err(mlua::Error::RuntimeError(text)) => {
                return Err(script_error(ScriptError::RegisteringFunctions, &text));
            }
            Err(e) => return Err(script_error(ScriptError::RegisteringFunctions, &lua_error_text(&e))),
        }
        if registered.is_empty() {
            return Err(Value::error(ERR_FUNCTION_NONE_REGISTERED));
        }
        for (fname, _) in &registered {
            if let Some(existing) = self.function(fname) {
                if existing.library != name {
                    return Err(script_error(ScriptError::FunctionExists, fname));
                }
            }
        }
        self.delete_library(&name);
        let names = registered.iter().map(|(n, _)| n.clone()).collect();
        for (fname, f) in registered {
            self.functions.insert(fname.to_ascii_lowercase(), f);
        }
        self.libraries.insert(name.clone(), Library { code: code.clone(), functions: names });
        Ok(name)
    }

    /// FUNCTION RESTORE's second half: moves the libraries of `restored` (all loaded, into a scratch registry) in,
    /// or changes nothing and answers the error.
    pub fn merge_restored(&mut self, restored: Registry, policy: RestorePolicy) -> Result<(), Value> {
        if policy == RestorePolicy::Flush {
            *self = restored;
            return Ok(());
        }
        for name in restored.libraries.keys() {
            if policy == RestorePolicy::Append && self.libraries.contains_key(name) {
                return Err(script_error(ScriptError::LibraryExistsOnRestore, name));
            }
        }
        for fname in restored.functions.keys() {
            if let Some(existing) = self.functions.get(fname) {
                // REPLACE drops the libraries the payload brings again; any other owner is a conflict.
                if !(policy == RestorePolicy::Replace && restored.libraries.contains_key(&existing.library)) {
                    return Err(script_error(ScriptError::FunctionExists, fname));
                }
            }
        }
        let Registry { libraries, functions } = restored;
        for name in libraries.keys() {
            self.delete_library(name);
        }
        self.libraries.extend(libraries);
        self.functions.extend(functions);
        Ok(())
    }

    /// Removes a library and its functions; false if there was none.
    pub fn delete_library(&mut self, name: &str) -> bool {
        match self.libraries.remove(name) {
            Some(lib) => {
                for f in lib.functions {
                    self.functions.remove(&f.to_ascii_lowercase());
                }
                true
            }
            None => false,
        }
    }
}

/// One `redis.register_function` call: `(name, callback)` or `{function_name=, callback=, flags=, description=}`,
/// with Redis 7.0's error texts.
fn register(lua: &mlua::Lua, args: &mlua::MultiValue, library: &str) -> Result<(String, RegisteredFunction), String> {
    let mut flags = Flags { declared: true, ..Default::default() };
    let (name, func, description) = match args.len() {
        1 => match args.front() {
            Some(LuaValue::Table(t)) => named_args(t, &mut flags)?,
            _ => return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into()),
        },
        2 => {
            let name = lua_string(&args[0]).ok_or("first argument to redis.register_function must be a string")?;
            match &args[1] {
                LuaValue::Function(f) => (name, f.clone(), None),
                _ => return Err("second argument to redis.register_function must be a function".into()),
            }
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if !valid_name(&name) {
        // Redis 7.0 words a bad function name as it words a bad library name.
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    let func = lua.create_registry_value(func).map_err(|e| lua_error_text(&e))?;
    Ok((name, RegisteredFunction { func, library: library.to_string(), flags, description }))
}

/// A Lua string or number as text (Lua's `lua_isstring`), else `None`.
fn lua_string(v: &LuaValue) -> Option<String> {
    match v {
        LuaValue::String(s) => Some(s.to_string_lossy()),
        LuaValue::Integer(i) => Some(i.to_string()),
        LuaValue::Number(n) => Some(super::libs::lua_g14(*n)),
        _ => None,
    }
}

fn named_args(t: &Table, flags: &mut Flags) -> Result<(String, Function, Option<String>), String> {
    let mut name = None;
    let mut func = None;
    let mut description = None;
    for pair in t.pairs::<LuaValue, LuaValue>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        let Some(k) = lua_string(&k) else { return Err("named argument key given to redis.register_function is not a string".into()) };
        match k.as_str() {
            "function_name" => name = Some(lua_string(&v).ok_or("function_name argument given to redis.register_function must be a string")?),
            "description" => description = Some(lua_string(&v).ok_or("description argument given to redis.register_function must be a string")?),
            "callback" => match v {
                LuaValue::Function(f) => func = Some(f),
                _ => return Err("callback argument given to redis.register_function must be a function".into()),
            },
            "flags" => {
                let LuaValue::Table(list) = v else {
                    return Err("flags argument to redis.register_function must be a table representing function flags".into());
                };
                for f in list.sequence_values::<LuaValue>() {
                    let f = f.map_err(|e| e.to_string())?;
                    let name = lua_string(&f).ok_or("unknown flag given")?;
                    flags.add(&name).map_err(|_| "unknown flag given".to_string())?;
                }
            }
            _ => return Err("unknown argument given to redis.register_function".into()),
        }
    }
    match (name, func) {
        (Some(n), Some(f)) => Ok((n, f, description)),
        (None, _) => Err("redis.register_function must get a function name argument".into()),
        (_, None) => Err("redis.register_function must get a callback argument".into()),
    }
}

// ----- FUNCTION DUMP / RESTORE payload: our own format (Redis's is RDB-encoded; clients treat it as opaque) -----

const DUMP_MAGIC: &[u8] = b"RVFN1";

pub fn dump(reg: &Registry) -> Bytes {
    let mut out = DUMP_MAGIC.to_vec();
    for lib in reg.libraries.values() {
        out.extend_from_slice(&(lib.code.len() as u32).to_le_bytes());
        out.extend_from_slice(&lib.code);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Bytes::from(out)
}

/// The library codes in a DUMP payload.
pub fn undump(payload: &[u8]) -> Result<Vec<Bytes>, Value> {
    let bad = || Value::error(ERR_FUNCTION_BAD_PAYLOAD);
    if payload.len() < DUMP_MAGIC.len() + 4 || !payload.starts_with(DUMP_MAGIC) {
        return Err(bad());
    }
    let (body, crc) = payload.split_at(payload.len() - 4);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(bad());
    }
    let mut pos = DUMP_MAGIC.len();
    let mut libs = Vec::new();
    while pos < body.len() {
        let len = u32::from_le_bytes(body.get(pos..pos + 4).ok_or_else(bad)?.try_into().map_err(|_| bad())?) as usize;
        pos += 4;
        libs.push(Bytes::copy_from_slice(body.get(pos..pos + len).ok_or_else(bad)?));
        pos += len;
    }
    Ok(libs)
}
