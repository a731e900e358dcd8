//! The Lua state: sandboxed globals, the `redis` table, the script cache, and running a script or function.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, LuaOptions, RegistryKey, StdLib, Table, Value as LuaValue, Variadic, VmState};
use ruvio_protocol::Value;

use super::convert::{lua_error_text, lua_to_reply, reply_to_lua};
use super::RunState;
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
local select = select
-- The arguments reach Rust packed in one table (with their count, as they may hold nils), not as thousands of
-- separate values: each value handed to Rust takes a slot of mlua's reference stack, which has room for 8,000.
redis.call = function(...)
  if not B.call then error("Script attempted to access nonexistent global variable 'call'", 2) end
  local is_err, v = B.call(select('#', ...), {...})
  if is_err then error(v, 0) end
  return v
end
redis.pcall = function(...)
  if not B.call then error("Script attempted to access nonexistent global variable 'pcall'", 2) end
  local _, v = B.call(select('#', ...), {...})
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
local sha1hex = B.sha1hex
redis.sha1hex = function(...)
  if select('#', ...) ~= 1 then error({err = "ERR wrong number of arguments"}, 0) end
  return sha1hex(...)
end
redis.log = B.log
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.set_repl = function(v)
  if type(v) ~= 'number' or v < 0 or v > 3 then error({err = "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."}, 0) end
end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
-- Whether the user of the connection that runs the script may run this command on these keys (Redis 7.0's
-- redis.acl_check_cmd): true or false; an unknown command raises an error.
redis.acl_check_cmd = function(...)
  if not B.acl_check then error("Script attempted to access nonexistent global variable 'acl_check_cmd'", 2) end
  local is_err, v = B.acl_check(select('#', ...), {...})
  if is_err then error(v, 0) end
  return v
end
redis.setresp = redis.setresp
-- register_function is not in the `redis` table scripts and functions see (calling it there is `attempt to call
-- field 'register_function' (a nil value)`, as in Redis); it is in the load-time one below.
local register_function = function(...)
  if not B.register then error({err = "ERR redis.register_function can only be called on FUNCTION LOAD command"}, 0) end
  return B.register(...)
end
B.trampoline = function() return B.fn(B.fkeys, B.fargs) end
redis.REDIS_VERSION = B.version
redis.REDIS_VERSION_NUM = B.version_num

for _, name in ipairs({'assert', 'error', 'ipairs', 'next', 'pairs', 'pcall', 'rawequal', 'rawget', 'select',
    'tonumber', 'tostring', 'type', 'unpack', 'xpcall', '_VERSION', 'setmetatable', 'getmetatable', 'gcinfo',
    'load'}) do
  base[name] = G[name]
end
-- A script that stops the collector is noted, so the engine restarts it after the script (Lua 5.1 cannot ask
-- whether it runs): a stopped collector must not outlive the script that stopped it.
local collectgarbage = G.collectgarbage
base.collectgarbage = function(opt, ...)
  if opt == 'stop' then B.gc_stopped = true end
  return collectgarbage(opt, ...)
end
-- setmetatable on the globals or a library table is refused with the readonly text (Redis's), not Lua's own
-- "cannot change a protected metatable".
base.setmetatable = function(t, mt)
  if rawequal(t, G) or protected[t] then error("Attempt to modify a readonly table", 2) end
  return setmetatable(t, mt)
end
-- Text only, as load() (third_party/lua-src refuses binary chunks): a precompiled chunk gives nil and a message,
-- as in Redis 7.0.
base.loadstring = G.loadstring
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
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
for k in pairs(G) do G[k] = nil end
-- getmetatable(_G) gives a read-only view of the globals' metatable (Redis's: a script that tries to change it
-- gets the readonly error).
local gmt = {__index = base, __newindex = function() error("Attempt to modify a readonly table", 2) end}
gmt.__metatable = readonly(gmt)
setmetatable(G, gmt)

-- What a library's top-level code sees while FUNCTION LOAD runs it (Redis 7.0's load-time globals): only `redis`
-- with register_function, log and the version fields; anything else (math, redis.call, getmetatable, ...) is a
-- nonexistent global variable. The globals' __index is switched to it for the load and back afterwards, so the
-- functions the library registers see the full environment when they run.
local function strict(t)
  local proxy = {}
  setmetatable(proxy, {
    __index = function(_, k)
      local v = t[k]
      if v == nil then error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2) end
      return v
    end,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
    __metatable = false,
  })
  protected[proxy] = true
  return proxy
end
local load_redis = {register_function = register_function, log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE, LOG_NOTICE = redis.LOG_NOTICE,
  LOG_WARNING = redis.LOG_WARNING, REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM}
local load_globals = strict({redis = strict(load_redis)})
-- Switched from Rust with raw sets (no Lua code runs, so a kill or the load timeout pending in the hook cannot stop
-- the switch back).
B.globals_mt, B.load_globals, B.run_globals = gmt, load_globals, base
"#;

/// Redis's `LUA_GC_CYCLE_PERIOD`: every this many script runs the collector takes [`GC_STEPS`] basic steps.
const GC_STEP_EVERY: u32 = 50;
const GC_STEPS: u32 = 25;

pub struct Script {
    /// The compiled chunk, in the Lua registry: a `Function` held in Rust would take a slot of mlua's reference
    /// stack (room for 8,000), and thousands of cached scripts used to exhaust it.
    pub func: RegistryKey,
    pub body: Bytes,
    pub flags: super::functions::Flags,
    /// Its place in the EVAL LRU (`None`: loaded with SCRIPT LOAD, never evicted).
    lru: Option<u64>,
}

/// EVAL scripts kept in the script cache (Redis 7.4's bound): an app that inlines values into script bodies makes
/// a new script per call. Beyond this the least recently EVAL'ed one is dropped (EVALSHA of it then answers
/// NOSCRIPT, which clients handle by sending EVAL). SCRIPT LOAD'ed scripts are kept until SCRIPT FLUSH.
pub const EVAL_SCRIPTS_MAX: usize = 500;

/// How often (in Lua instructions) the hook checks for SCRIPT KILL, SHUTDOWN and the FUNCTION LOAD timeout.
const HOOK_EVERY: u32 = 10_000;

pub struct Engine {
    lua: Lua,
    bridge: Table,
    xpcall: Function,
    handler: Function,
    run_state: Arc<RunState>,
    /// The hook fires at every instruction (set once a kill was seen, so pcall cannot swallow it); relaxed after
    /// the script.
    hook_tight: Arc<AtomicBool>,
    /// Runs since the collector last took a step of its own (Redis: every 50 scripts, a step of 50 KB's worth), so
    /// a stream of small scripts does not let garbage pile up to the incremental collector's next cycle.
    runs_since_gc_step: std::sync::atomic::AtomicU32,
    pub scripts: HashMap<String, Script>,
    pub scripts_bytes: usize,
    /// EVAL-only scripts by last use (tick -> sha), oldest first.
    eval_lru: BTreeMap<u64, String>,
    lru_tick: u64,
    /// EVAL scripts dropped by the LRU bound so far.
    pub evicted_scripts: u64,
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
    /// `redis.acl_check_cmd`: whether the caller's ACL user may run `argv` (command and keys); `Err` is the error
    /// the script raises (an unknown command).
    fn acl_check(&mut self, argv: &[Bytes]) -> Result<bool, String>;
    /// The script ends with an error that `call` already counted in INFO errorstats (the error table of a
    /// `redis.call`/`redis.pcall` raised or returned as it came): its reply must not be counted again.
    fn error_already_counted(&mut self);
}

/// The field an error table from `redis.call`/`redis.pcall` carries when the host already counted that error
/// (Redis's name for it).
const COUNTED_MARK: &str = "ignore_error_stats_update";

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
        let hook_tight = Arc::new(AtomicBool::new(false));
        install_hook(&lua, run.clone(), hook_tight.clone(), HOOK_EVERY)?;
        Ok(Engine {
            lua,
            bridge,
            xpcall,
            handler,
            run_state: run,
            hook_tight,
            runs_since_gc_step: std::sync::atomic::AtomicU32::new(0),
            scripts: HashMap::new(),
            scripts_bytes: 0,
            eval_lru: BTreeMap::new(),
            lru_tick: 0,
            evicted_scripts: 0,
            functions: Default::default(),
            library_changes,
        })
    }

    /// After a script or a library load: the hook back to every [`HOOK_EVERY`] instructions if a kill tightened
    /// it, and the collector running again (`collectgarbage('stop')` in one script must not leave the state
    /// growing for every later one).
    fn settle_after_run(&self) {
        if self.hook_tight.swap(false, Ordering::AcqRel) {
            let _ = install_hook(&self.lua, self.run_state.clone(), self.hook_tight.clone(), HOOK_EVERY);
        }
        if self.bridge.raw_get::<bool>("gc_stopped").unwrap_or(false) {
            let _ = self.bridge.raw_set("gc_stopped", false);
            self.lua.gc_restart();
        }
        if self.runs_since_gc_step.fetch_add(1, Ordering::Relaxed) + 1 >= GC_STEP_EVERY {
            self.runs_since_gc_step.store(0, Ordering::Relaxed);
            // A bounded amount of collector work (basic steps, each about 2 KB's worth), never a full cycle: with
            // thousands of cached scripts the heap is large.
            for _ in 0..GC_STEPS {
                if self.lua.gc_step().unwrap_or(true) {
                    break;
                }
            }
        }
    }

    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    pub fn bridge(&self) -> &Table {
        &self.bridge
    }

    /// FUNCTION LOAD: compiles and runs the library's code, collecting what it registers. Returns the library name.
    pub fn load_library(&mut self, code: &Bytes, replace: bool) -> Result<String, Value> {
        let loaded = self.with_load_deadline(|e| e.functions.load_library(&e.lua, &e.bridge, code, replace));
        if loaded.is_ok() {
            self.library_changes.fetch_add(1, Ordering::Relaxed);
        }
        loaded
    }

    /// Runs library code with the FUNCTION LOAD timeout armed: its top-level code (`while true do end` in a
    /// library) is stopped after [`super::LOAD_TIMEOUT_MS`], wherever the load happens (FUNCTION LOAD, a restore,
    /// start-up, a replica's full sync).
    fn with_load_deadline<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let deadline = crate::clock::mono_ms() + super::LOAD_TIMEOUT_MS;
        self.run_state.load_deadline.store(deadline, Ordering::Release);
        let r = f(self);
        self.run_state.load_deadline.store(0, Ordering::Release);
        self.settle_after_run();
        r
    }

    /// FUNCTION RESTORE: every library of the payload or none. They are compiled and run into a scratch registry
    /// first; the live libraries change only once all of them loaded and none conflicts.
    pub fn restore_libraries(&mut self, libs: &[Bytes], policy: super::functions::RestorePolicy) -> Result<(), Value> {
        let mut scratch = super::functions::Registry::default();
        for code in libs {
            // Each library gets the deadline FUNCTION LOAD would give it.
            self.with_load_deadline(|e| scratch.load_library(&e.lua, &e.bridge, code, false))?;
        }
        self.functions.merge_restored(scratch, policy)?;
        self.library_changes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Removes a library and its functions; false if there was none.
    pub fn delete_library(&mut self, name: &str) -> bool {
        let deleted = self.functions.delete_library(name);
        self.lua.expire_registry_values();
        if deleted {
            self.library_changes.fetch_add(1, Ordering::Relaxed);
        }
        deleted
    }

    /// Removes every library (a change even when there were none: Redis propagates FUNCTION FLUSH always).
    pub fn flush_functions(&mut self) {
        self.functions = super::functions::Registry::default();
        self.library_changes.fetch_add(1, Ordering::Relaxed);
        self.lua.expire_registry_values();
        let _ = self.lua.gc_collect();
    }

    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Compiles `body` into the cache; returns its SHA1. `pinned`: SCRIPT LOAD (kept until SCRIPT FLUSH);
    /// otherwise an EVAL, which takes (or refreshes) a place in the LRU of [`EVAL_SCRIPTS_MAX`] scripts.
    pub fn load_script(&mut self, body: &Bytes, pinned: bool) -> Result<String, Value> {
        let sha = super::sha1_hex(body);
        self.lru_tick += 1;
        let tick = self.lru_tick;
        if let Some(s) = self.scripts.get_mut(&sha) {
            if let Some(old) = s.lru.take() {
                self.eval_lru.remove(&old);
                if !pinned {
                    s.lru = Some(tick);
                    self.eval_lru.insert(tick, sha.clone());
                }
            }
            return Ok(sha);
        }
        let (flags, code) = super::functions::parse_eval_shebang(body)?;
        let func = self
            .lua
            .load(&code[..])
            .set_name("@user_script")
            .into_function()
            .map_err(|e| script_error(ScriptError::CompilingScript, &lua_error_text(&e)))?;
        let func = self.lua.create_registry_value(func).map_err(|e| script_error(ScriptError::CompilingScript, &lua_error_text(&e)))?;
        self.scripts_bytes += body.len();
        let lru = if pinned { None } else { Some(tick) };
        self.scripts.insert(sha.clone(), Script { func, body: body.clone(), flags, lru });
        if !pinned {
            self.eval_lru.insert(tick, sha.clone());
            while self.eval_lru.len() > EVAL_SCRIPTS_MAX {
                let Some((_, oldest)) = self.eval_lru.pop_first() else { break };
                if let Some(s) = self.scripts.remove(&oldest) {
                    self.scripts_bytes -= s.body.len();
                    let _ = self.lua.remove_registry_value(s.func);
                    self.evicted_scripts += 1;
                }
            }
        }
        Ok(sha)
    }

    pub fn flush_scripts(&mut self) {
        for (_, s) in self.scripts.drain() {
            let _ = self.lua.remove_registry_value(s.func);
        }
        self.eval_lru.clear();
        self.scripts_bytes = 0;
        let _ = self.lua.gc_collect();
    }

    /// Runs a cached script or a function with `keys` and `argv`; the reply is ready to send.
    pub fn run(&mut self, target: Target, keys: &[Bytes], argv: &[Bytes], host: &mut dyn Host) -> Value {
        let (func, name, is_function) = match target {
            Target::Script(sha) => match self.scripts.get(sha) {
                Some(s) => (self.lua.registry_value::<Function>(&s.func), sha.to_string(), false),
                None => return Value::error(ERR_NOSCRIPT),
            },
            Target::Function(name) => match self.functions.function(name) {
                Some(f) => (self.lua.registry_value::<Function>(&f.func), name.to_string(), true),
                None => return Value::error(ERR_FUNCTION_NOT_FOUND),
            },
        };
        let func = match func {
            Ok(f) => f,
            Err(e) => return script_runtime_error(&name, &lua_error_text(&e)),
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
            // Both bridges reach the host; they never run at once (neither calls back into Lua).
            let host = std::cell::RefCell::new(host);
            let result = lua.scope(|scope| {
                let call = scope.create_function_mut(|lua, (n, args): (i64, Table)| bridge_call(lua, &bridge, n, &args, &mut **host.borrow_mut()))?;
                self.bridge.raw_set("call", call)?;
                let acl_check = scope.create_function_mut(|lua, (n, args): (i64, Table)| bridge_acl_check(lua, n, &args, &mut **host.borrow_mut()))?;
                self.bridge.raw_set("acl_check", acl_check)?;
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
                self.bridge.raw_set("acl_check", LuaValue::Nil)?;
                Ok(r)
            });
            self.bridge.raw_set("KEYS", LuaValue::Nil)?;
            self.bridge.raw_set("fn", LuaValue::Nil)?;
            self.bridge.raw_set("fkeys", LuaValue::Nil)?;
            self.bridge.raw_set("fargs", LuaValue::Nil)?;
            self.bridge.raw_set("ARGV", LuaValue::Nil)?;
            let resp: u8 = self.bridge.raw_get::<i64>("resp").unwrap_or(2) as u8;
            if let Ok((_, LuaValue::Table(t))) = &result {
                if t.raw_get::<bool>(COUNTED_MARK).unwrap_or(false) && matches!(t.raw_get::<LuaValue>("err"), Ok(LuaValue::String(_))) {
                    host.borrow_mut().error_already_counted();
                }
            }
            match result {
                Ok((true, v)) => Ok(lua_to_reply(&v, resp)),
                Ok((false, err)) => Ok(format_error(&err, &name)),
                Err(e) => Ok(script_runtime_error(&name, &lua_error_text(&e))),
            }
        })();
        self.settle_after_run();
        outcome.unwrap_or_else(|e| script_runtime_error(&name, &lua_error_text(&e)))
    }
}

/// `redis.call` / `redis.pcall`: runs one command (its `n` arguments packed in `args`, see the prelude). Returns
/// (is_error, value); the Lua side raises for `call`.
fn bridge_call(lua: &Lua, bridge: &Table, n: i64, args: &Table, host: &mut dyn Host) -> mlua::Result<(bool, LuaValue)> {
    let err = |text: &str| -> mlua::Result<(bool, LuaValue)> {
        let t = lua.create_table()?;
        t.raw_set("err", text)?;
        Ok((true, LuaValue::Table(t)))
    };
    let (argv, numbers) = match lua_args(n, args)? {
        Ok(a) => a,
        Err(text) => return err(text),
    };
    // Whatever error the host answers, it has counted (its refusals and the command's own errors).
    let counted = |v: LuaValue| -> mlua::Result<(bool, LuaValue)> {
        if let LuaValue::Table(t) = &v {
            t.raw_set(COUNTED_MARK, true)?;
        }
        Ok((true, v))
    };
    let reply = match host.call(&argv, &numbers) {
        Ok(reply) => reply,
        Err(text) => return counted(err(&text)?.1),
    };
    let resp = bridge.raw_get::<i64>("resp").unwrap_or(2) as u8;
    let value = reply_to_lua(lua, &reply, resp)?;
    if reply.is_error() {
        return counted(value);
    }
    Ok((false, value))
}

/// The arguments of a `redis.call` / `redis.acl_check_cmd` as a command line, with which of them were Lua numbers
/// (position, value): a token argument given as a number of 2^53 or more may already be another token rounded,
/// and is refused by the host (`flags::TOKEN_ARG`). The inner `Err` is the error the script gets.
#[allow(clippy::type_complexity)]
fn lua_args(n: i64, args: &Table) -> mlua::Result<Result<(Vec<Bytes>, Vec<(usize, f64)>), &'static str>> {
    if n <= 0 {
        return Ok(Err(ERR_SCRIPT_NO_ARGS));
    }
    // `n` counts values on the Lua stack (at most LUAI_MAXCSTACK), so it is already bounded.
    let mut argv: Vec<Bytes> = Vec::with_capacity(n as usize);
    let mut numbers = Vec::new();
    for i in 1..=n {
        match args.raw_get::<LuaValue>(i)? {
            LuaValue::String(s) => argv.push(Bytes::copy_from_slice(&s.as_bytes())),
            // Redis formats a Lua number argument with %.17g (so 1/3 keeps its 17 digits, math.huge is `inf`).
            // mlua hands an integral Lua 5.1 number over as an Integer; it is still a double on the Lua side, and
            // the host is told (a fencing token that large may be rounded).
            LuaValue::Integer(i) => {
                numbers.push((argv.len(), i as f64));
                argv.push(Bytes::from(lua_number_arg(i as f64)));
            }
            LuaValue::Number(n) => {
                numbers.push((argv.len(), n));
                argv.push(Bytes::from(lua_number_arg(n)));
            }
            _ => return Ok(Err(ERR_SCRIPT_ARG_TYPE)),
        }
    }
    Ok(Ok((argv, numbers)))
}

/// `redis.acl_check_cmd(...)`: (false, boolean) with the verdict, or (true, error table) to raise.
fn bridge_acl_check(lua: &Lua, n: i64, args: &Table, host: &mut dyn Host) -> mlua::Result<(bool, LuaValue)> {
    let err = |text: &str| -> mlua::Result<(bool, LuaValue)> {
        let t = lua.create_table()?;
        t.raw_set("err", text)?;
        Ok((true, LuaValue::Table(t)))
    };
    let argv = match lua_args(n, args)? {
        Ok((argv, _)) => argv,
        Err(text) => return err(text),
    };
    match host.acl_check(&argv) {
        Ok(allowed) => Ok((false, LuaValue::Boolean(allowed))),
        Err(text) => err(&text),
    }
}

/// A Lua number as a command argument: C's `%.17g`, exactly as Redis's `luaRedisGenericCommand` formats it
/// (`0.33333333333333331`, `1e+17`, `inf`, `-nan`).
pub fn lua_number_arg(n: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: snprintf writes at most buf.len() bytes, NUL included, and the format takes exactly one double.
    let len = unsafe { libc::snprintf(buf.as_mut_ptr() as *mut libc::c_char, buf.len(), c"%.17g".as_ptr(), n) };
    let len = (len.max(0) as usize).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// Installs the hook that stops Lua code: every `every` instructions (and every 100k steps of the patched
/// pattern matcher, third_party/lua-src PATCH 5) it asks [`RunState::interruption`]. On a stop it raises the error
/// and switches itself to every instruction: a script that catches the error with `pcall`, `xpcall` or a coroutine
/// gets it again at its very next instruction, so it cannot go on (Redis's `luaMaskCountHook` does the same).
fn install_hook(lua: &Lua, run: Arc<RunState>, tight: Arc<AtomicBool>, every: u32) -> mlua::Result<()> {
    lua.set_global_hook(HookTriggers::new().every_nth_instruction(every), move |lua, _debug| {
        if let Some(text) = run.interruption() {
            if !tight.swap(true, Ordering::AcqRel) {
                install_hook(lua, run.clone(), tight.clone(), 1)?;
            }
            return Err(mlua::Error::RuntimeError(text.into()));
        }
        Ok(VmState::Continue)
    })
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
