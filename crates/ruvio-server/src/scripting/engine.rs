//! The Lua state: sandboxed globals, the `redis` table, the script cache, and running a script or function.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value as LuaValue, Variadic, VmState};
use ruvio_protocol::Value;

use super::convert::{lua_error_text, lua_to_reply, reply_to_lua};
use super::{RunState, KILL_NONE};
use crate::errors::*;

/// Sets up the sandbox. Runs once with the full base library; `base` receives what scripts may use, `B` is the
/// bridge the Rust side fills for each run (call, KEYS, ARGV, resp, register).
const PRELUDE: &str = r#"
local base, B, G = ...
local error, type, tostring, setmetatable, rawset, rawequal = error, type, tostring, setmetatable, rawset, rawequal
local protected = setmetatable({}, {__mode = 'k'})
local function readonly(t)
  local proxy = {}
  setmetatable(proxy, {__index = t, __newindex = function() error("Attempt to modify a readonly table", 2) end, __metatable = false})
  protected[proxy] = true
  return proxy
end

local redis = {}
redis.call = function(...)
  if not B.call then error("Script attempted to access nonexistent global variable 'call'", 2) end
  local is_err, v = B.call(...)
  if is_err then error(v, 0) end
  return v
end
redis.pcall = function(...)
  if not B.call then error("Script attempted to access nonexistent global variable 'pcall'", 2) end
  local _, v = B.call(...)
  return v
end
redis.setresp = function(v)
  if v ~= 2 and v ~= 3 then error({err = "ERR RESP version must be 2 or 3."}, 0) end
  B.resp = v
end
redis.error_reply = function(s)
  if type(s) ~= 'string' then error({err = "ERR wrong number or type of arguments"}, 0) end
  return {err = s}
end
redis.status_reply = function(s)
  if type(s) ~= 'string' then error({err = "ERR wrong number or type of arguments"}, 0) end
  return {ok = s}
end
redis.sha1hex = B.sha1hex
redis.log = B.log
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.set_repl = function(v)
  if type(v) ~= 'number' or v < 0 or v > 3 then error({err = "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."}, 0) end
end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = function() return true end
redis.setresp = redis.setresp
redis.register_function = function(...)
  if not B.register then error({err = "ERR redis.register_function can only be called on FUNCTION LOAD command"}, 0) end
  return B.register(...)
end
B.trampoline = function() return B.fn(B.fkeys, B.fargs) end
redis.REDIS_VERSION = B.version
redis.REDIS_VERSION_NUM = B.version_num

for _, name in ipairs({'assert', 'error', 'ipairs', 'next', 'pairs', 'pcall', 'rawequal', 'rawget', 'select',
    'tonumber', 'tostring', 'type', 'unpack', 'xpcall', '_VERSION', 'setmetatable', 'getmetatable', 'gcinfo',
    'collectgarbage', 'load'}) do
  base[name] = G[name]
end
base.rawset = function(t, k, v)
  if rawequal(t, G) or protected[t] then error("Attempt to modify a readonly table", 2) end
  return rawset(t, k, v)
end
for _, name in ipairs({'string', 'table', 'math', 'coroutine'}) do
  base[name] = readonly(G[name])
end
for _, name in ipairs({'bit', 'cjson', 'cmsgpack', 'struct'}) do
  base[name] = readonly(base[name])
end
base.redis = readonly(redis)
base._G = G
getmetatable('').__metatable = false

setmetatable(base, {
  __index = function(_, k)
    if k == 'KEYS' then return B.KEYS end
    if k == 'ARGV' then return B.ARGV end
    if k == 'loadstring' then return nil end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
for k in pairs(G) do G[k] = nil end
setmetatable(G, {__index = base, __newindex = function() error("Attempt to modify a readonly table", 2) end, __metatable = false})
"#;

pub struct Script {
    pub func: Function,
    pub body: Bytes,
    pub flags: super::functions::Flags,
    /// Completed runs, all faster than [`FAST_RUN_MS`]; see [`Script::runs_inline`].
    pub fast_runs: u32,
    /// Some run took [`FAST_RUN_MS`] or longer: always run on the script thread.
    pub slow: bool,
}

/// A run shorter than this counts as fast.
pub const FAST_RUN_MS: u64 = 10;
/// Fast runs after which a script runs inline on the client's I/O thread.
pub const INLINE_AFTER_FAST_RUNS: u32 = 8;

impl Script {
    /// Whether the script has proven short (every one of its first runs took under [`FAST_RUN_MS`]): such a script
    /// (a lock library's compare-and-delete) runs inline on the I/O thread, saving the hand-off to the script thread.
    pub fn runs_inline(&self) -> bool {
        !self.slow && self.fast_runs >= INLINE_AFTER_FAST_RUNS
    }

    pub fn record_run(&mut self, elapsed_ms: u64) {
        if elapsed_ms >= FAST_RUN_MS {
            self.slow = true;
        } else {
            self.fast_runs = self.fast_runs.saturating_add(1);
        }
    }
}

pub struct Engine {
    lua: Lua,
    bridge: Table,
    xpcall: Function,
    handler: Function,
    pub scripts: HashMap<String, Script>,
    pub scripts_bytes: usize,
    pub functions: super::functions::Registry,
    /// Bumped by every change to the function libraries (shared with `Scripting`, read without the engine's lock:
    /// the execution path logs a FUNCTION command that moved it).
    library_changes: Arc<AtomicU64>,
}

/// The server a script runs against: executes one `redis.call` and returns its reply, or the error text the
/// script sees when the command may not run (unknown, wrong arity, not allowed in scripts, a write in EVAL_RO).
pub trait Host {
    /// `numbers`: which arguments the script gave as Lua numbers (position in `argv`, value). Their text alone does
    /// not tell whether a double had already rounded them (a fencing token above 2^53 would be).
    fn call(&mut self, argv: &[Bytes], numbers: &[(usize, f64)]) -> Result<Value, String>;
}

/// What to run: a cached script or a registered function.
pub enum Target<'a> {
    Script(&'a str),
    Function(&'a str),
}

impl Engine {
    pub fn new(run: Arc<RunState>, library_changes: Arc<AtomicU64>) -> mlua::Result<Engine> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH;
        let lua = Lua::new_with(libs, LuaOptions::default())?;
        lua.set_memory_limit(super::LUA_MEMORY_LIMIT)?;
        let base = lua.create_table()?;
        super::libs::install(&lua, &base)?;
        let bridge = lua.create_table()?;
        bridge.raw_set("sha1hex", lua.create_function(|_, s: mlua::LuaString| Ok(super::sha1_hex(&s.as_bytes())))?)?;
        bridge.raw_set(
            "log",
            lua.create_function(|_, args: Variadic<LuaValue>| {
                if args.len() < 2 {
                    return Err(mlua::Error::RuntimeError("redis.log() requires two arguments or more.".into()));
                }
                let text: Vec<String> = args[1..].iter().map(|v| v.to_string().unwrap_or_default()).collect();
                let text = text.join(" ");
                match args[0].as_i64().unwrap_or(2) {
                    0 => tracing::debug!(target: "ruvio::script", "{text}"),
                    1 | 2 => tracing::info!(target: "ruvio::script", "{text}"),
                    _ => tracing::warn!(target: "ruvio::script", "{text}"),
                }
                Ok(())
            })?,
        )?;
        bridge.raw_set("version", crate::REDIS_COMPAT_VERSION)?;
        let num = crate::REDIS_COMPAT_VERSION.split('.').fold(0i64, |acc, p| acc * 256 + p.parse::<i64>().unwrap_or(0));
        bridge.raw_set("version_num", num)?;
        bridge.raw_set("resp", 2)?;
        let globals = lua.globals();
        let xpcall: Function = globals.raw_get("xpcall")?;
        lua.load(PRELUDE).set_name("=ruvio_env").call::<()>((base, bridge.clone(), globals))?;
        let handler = lua.create_function(error_handler)?;
        // Checked every 10k instructions: SCRIPT KILL / SHUTDOWN NOSAVE stop the script at the next check.
        lua.set_global_hook(HookTriggers::new().every_nth_instruction(10_000), move |_lua, _debug| {
            if run.kill.load(Ordering::Acquire) != KILL_NONE {
                return Err(mlua::Error::RuntimeError("Script killed by user with SCRIPT KILL...".into()));
            }
            Ok(VmState::Continue)
        })?;
        Ok(Engine { lua, bridge, xpcall, handler, scripts: HashMap::new(), scripts_bytes: 0, functions: Default::default(), library_changes })
    }

    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    pub fn bridge(&self) -> &Table {
        &self.bridge
    }

    /// FUNCTION LOAD: compiles and runs the library's code, collecting what it registers. Returns the library name.
    pub fn load_library(&mut self, code: &Bytes, replace: bool) -> Result<String, Value> {
        let loaded = self.functions.load_library(&self.lua, &self.bridge, code, replace);
        if loaded.is_ok() {
            self.library_changes.fetch_add(1, Ordering::Relaxed);
        }
        loaded
    }

    /// Removes a library and its functions; false if there was none.
    pub fn delete_library(&mut self, name: &str) -> bool {
        let deleted = self.functions.delete_library(name);
        if deleted {
            self.library_changes.fetch_add(1, Ordering::Relaxed);
        }
        deleted
    }

    /// Removes every library (a change even when there were none: Redis propagates FUNCTION FLUSH always).
    pub fn flush_functions(&mut self) {
        self.functions = super::functions::Registry::default();
        self.library_changes.fetch_add(1, Ordering::Relaxed);
        let _ = self.lua.gc_collect();
    }

    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Compiles `body` (an EVAL script) into the cache; returns its SHA1.
    pub fn load_script(&mut self, body: &Bytes) -> Result<String, Value> {
        let sha = super::sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, code) = super::functions::parse_eval_shebang(body)?;
        let func = self
            .lua
            .load(&code[..])
            .set_name("@user_script")
            .into_function()
            .map_err(|e| script_error(ScriptError::CompilingScript, &lua_error_text(&e)))?;
        self.scripts_bytes += body.len();
        self.scripts.insert(sha.clone(), Script { func, body: body.clone(), flags, fast_runs: 0, slow: false });
        Ok(sha)
    }

    pub fn flush_scripts(&mut self) {
        self.scripts.clear();
        self.scripts_bytes = 0;
        let _ = self.lua.gc_collect();
    }

    /// Runs a cached script or a function with `keys` and `argv`; the reply is ready to send.
    pub fn run(&mut self, target: Target, keys: &[Bytes], argv: &[Bytes], host: &mut dyn Host) -> Value {
        let (func, name, is_function) = match target {
            Target::Script(sha) => match self.scripts.get(sha) {
                Some(s) => (s.func.clone(), sha.to_string(), false),
                None => return Value::error(ERR_NOSCRIPT),
            },
            Target::Function(name) => match self.functions.functions.get(name) {
                Some(f) => (f.func.clone(), name.to_string(), true),
                None => return Value::error(ERR_FUNCTION_NOT_FOUND),
            },
        };
        let lua = self.lua.clone();
        let outcome = (|| -> mlua::Result<Value> {
            let keys_t = lua.create_table_with_capacity(keys.len(), 0)?;
            for (i, k) in keys.iter().enumerate() {
                keys_t.raw_set(i + 1, lua.create_string(k)?)?;
            }
            let argv_t = lua.create_table_with_capacity(argv.len(), 0)?;
            for (i, a) in argv.iter().enumerate() {
                argv_t.raw_set(i + 1, lua.create_string(a)?)?;
            }
            self.bridge.raw_set("resp", 2)?;
            // A function gets KEYS and ARGV as its arguments, not as globals.
            let (call_args, globals) = if is_function { ((keys_t, argv_t), None) } else { ((keys_t.clone(), argv_t.clone()), Some((keys_t, argv_t))) };
            if let Some((k, a)) = &globals {
                self.bridge.raw_set("KEYS", k.clone())?;
                self.bridge.raw_set("ARGV", a.clone())?;
            }
            let bridge = self.bridge.clone();
            let result = lua.scope(|scope| {
                let call = scope.create_function_mut(|lua, args: Variadic<LuaValue>| bridge_call(lua, &bridge, args, host))?;
                self.bridge.raw_set("call", call)?;
                let body = if is_function {
                    // FCALL: the registered function receives (keys, args), through a Lua trampoline so its errors
                    // reach the handler with the user frames still on the stack.
                    self.bridge.raw_set("fn", func.clone())?;
                    self.bridge.raw_set("fkeys", call_args.0.clone())?;
                    self.bridge.raw_set("fargs", call_args.1.clone())?;
                    self.bridge.raw_get::<Function>("trampoline")?
                } else {
                    func.clone()
                };
                let r: (bool, LuaValue) = self.xpcall.call((body, self.handler.clone()))?;
                self.bridge.raw_set("call", LuaValue::Nil)?;
                Ok(r)
            });
            self.bridge.raw_set("KEYS", LuaValue::Nil)?;
            self.bridge.raw_set("fn", LuaValue::Nil)?;
            self.bridge.raw_set("fkeys", LuaValue::Nil)?;
            self.bridge.raw_set("fargs", LuaValue::Nil)?;
            self.bridge.raw_set("ARGV", LuaValue::Nil)?;
            let resp: u8 = self.bridge.raw_get::<i64>("resp").unwrap_or(2) as u8;
            match result {
                Ok((true, v)) => Ok(lua_to_reply(&v, resp)),
                Ok((false, err)) => Ok(format_error(&err, &name)),
                Err(e) => Ok(script_runtime_error(&name, &lua_error_text(&e))),
            }
        })();
        outcome.unwrap_or_else(|e| script_runtime_error(&name, &lua_error_text(&e)))
    }
}

/// `redis.call` / `redis.pcall`: runs one command. Returns (is_error, value); the Lua side raises for `call`.
fn bridge_call(lua: &Lua, bridge: &Table, args: Variadic<LuaValue>, host: &mut dyn Host) -> mlua::Result<(bool, LuaValue)> {
    let err = |text: &str| -> mlua::Result<(bool, LuaValue)> {
        let t = lua.create_table()?;
        t.raw_set("err", text)?;
        Ok((true, LuaValue::Table(t)))
    };
    if args.is_empty() {
        return err(ERR_SCRIPT_NO_ARGS);
    }
    let mut argv: Vec<Bytes> = Vec::with_capacity(args.len());
    let mut numbers = Vec::new();
    for a in args.iter() {
        match a {
            LuaValue::String(s) => argv.push(Bytes::copy_from_slice(&s.as_bytes())),
            // mlua hands an integral Lua 5.1 number over as an Integer; it is still a double on the Lua side.
            LuaValue::Integer(i) => {
                numbers.push((argv.len(), *i as f64));
                argv.push(Bytes::from(i.to_string()));
            }
            LuaValue::Number(n) => {
                numbers.push((argv.len(), *n));
                argv.push(Bytes::from(super::libs::lua_g14(*n)));
            }
            _ => return err(ERR_SCRIPT_ARG_TYPE),
        }
    }
    let reply = match host.call(&argv, &numbers) {
        Ok(reply) => reply,
        Err(text) => return err(&text),
    };
    let resp = bridge.raw_get::<i64>("resp").unwrap_or(2) as u8;
    let is_err = reply.is_error();
    Ok((is_err, reply_to_lua(lua, &reply, resp)?))
}

/// xpcall's message handler: turns any error into `{err=..., source=..., line=...}` with the innermost user frame.
fn error_handler(lua: &Lua, err: LuaValue) -> mlua::Result<Table> {
    let t = match err {
        LuaValue::Table(t) if matches!(t.raw_get::<LuaValue>("err"), Ok(LuaValue::String(_))) => t,
        LuaValue::String(s) => {
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {}", String::from_utf8_lossy(&s.as_bytes())))?;
            t
        }
        LuaValue::Error(e) => {
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {}", lua_error_text(&e)))?;
            t
        }
        other => {
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {}", other.to_string().unwrap_or_else(|_| "unknown error".into())))?;
            t
        }
    };
    for level in 0..64 {
        let frame = lua.inspect_stack(level, |d| (d.source().source.map(|s| s.into_owned()), d.current_line()));
        match frame {
            None => break,
            Some((Some(src), line)) if src.starts_with("@user_") => {
                t.raw_set("source", src)?;
                t.raw_set("line", line.map(|l| l as i64).unwrap_or(-1))?;
                break;
            }
            _ => {}
        }
    }
    Ok(t)
}

/// `<err> script: <name>, on @user_script:<line>.` as Redis words a script's runtime error.
fn format_error(err: &LuaValue, name: &str) -> Value {
    let LuaValue::Table(t) = err else {
        let text = match err {
            LuaValue::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            _ => "not enough memory".into(),
        };
        return script_runtime_error(name, &text);
    };
    let text = match t.raw_get::<LuaValue>("err") {
        Ok(LuaValue::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        _ => "ERR unknown error".into(),
    };
    let text = if text.is_empty() { "ERR".to_string() } else { text };
    match (t.raw_get::<LuaValue>("source"), t.raw_get::<LuaValue>("line")) {
        (Ok(LuaValue::String(src)), Ok(line)) => {
            let line = match line {
                LuaValue::Integer(i) => i.to_string(),
                LuaValue::Number(n) => (n as i64).to_string(),
                _ => "?".into(),
            };
            Value::error(format!("{text} script: {name}, on {}:{line}.", String::from_utf8_lossy(&src.as_bytes())))
        }
        _ => Value::error(format!("{text} script: {name}")),
    }
}
