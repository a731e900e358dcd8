//! Lua scripting: EVAL/EVALSHA scripts and FUNCTION libraries, with Redis 7's environment and rules.
//!
//! - [`engine`]: the Lua 5.1 state (mlua, vendored), its sandbox, the `redis` API, compiling and running.
//! - [`convert`]: reply <-> Lua conversions; [`libs`]: cjson, cmsgpack, bit, struct; [`functions`]: libraries.
//!
//! How a script runs. EVAL from a client hands the script to a blocking-pool thread and waits for its reply the
//! way LEASE ... WAIT does (a blocked reply), so the client's I/O thread keeps serving its other
//! connections. The script thread takes the store lock and holds it for the whole script (atomic), runs every
//! `redis.call` through dispatch as a script caller, and wraps the write
//! records the script produced in MULTI ... EXEC (effects replication: the log holds what the script did, never the
//! script). Inside MULTI/EXEC the script runs inline under EXEC's lock, and an EXEC that queued a script runs as a
//! whole on the script thread (`transaction_family::exec_on_script_thread`), never on an I/O thread.
//!
//! While a script runs, [`RunState`] says so; connections check it before they wait for the store lock
//! ([`host::busy_gate`]): past `busy-reply-threshold` they answer `-BUSY` instead of waiting, except for the
//! commands the table flags `allow_busy` (SCRIPT KILL, FUNCTION KILL, FUNCTION STATS, SHUTDOWN NOSAVE, MULTI, ...).
//!
//! Layers: the engine knows nothing of the server; it runs `redis.call` through the [`engine::Host`] it is given.
//! [`host`] is the server's side: the host that executes through dispatch, and the gates around scripts.

pub mod convert;
pub mod engine;
pub mod functions;
pub mod host;
pub mod libs;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use ruvio_protocol::Value;

use crate::errors::*;

/// The Lua state's memory is bounded by this (allocations beyond it fail the script with an out-of-memory error).
pub const LUA_MEMORY_LIMIT: usize = 1 << 30;

/// Kill requests.
pub const KILL_NONE: u8 = 0;
pub const KILL_SCRIPT: u8 = 1;
pub const KILL_SHUTDOWN: u8 = 2;

/// What other threads may know about the script running now (read without the store lock).
#[derive(Default)]
pub struct RunState {
    pub running: AtomicBool,
    /// Monotonic ms when the running script started.
    pub started: AtomicU64,
    pub kill: AtomicU8,
    /// The running script has executed a write (it can no longer be killed).
    pub wrote: AtomicBool,
    /// The running script is a function (FCALL), not EVAL.
    pub is_function: AtomicBool,
    /// The running function's name and the command that called it (FUNCTION STATS `running_script`).
    pub current: Mutex<Option<(String, Vec<Bytes>)>>,
    /// While FUNCTION LOAD runs a library's top-level code: the monotonic ms after which it is stopped (0: none).
    pub load_deadline: AtomicU64,
}

/// How long a library's top-level code may run during FUNCTION LOAD (Redis's `LOAD_TIMEOUT_MS`, 500). An
/// unoptimised (debug) build runs registration about ten times slower, so it allows ten times as long: a library
/// of 9,000 functions that loads in release must load in the tests' debug builds too.
pub const LOAD_TIMEOUT_MS: u64 = if cfg!(debug_assertions) { 5_000 } else { 500 };

/// The error a stopped script raises (SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE, SIGTERM).
pub const KILLED_TEXT: &str = "Script killed by user with SCRIPT KILL...";
/// The error a library's top-level code raises past [`LOAD_TIMEOUT_MS`].
pub const LOAD_TIMEOUT_TEXT: &str = "FUNCTION LOAD timeout";

impl RunState {
    pub fn busy(&self, threshold_ms: u64) -> bool {
        self.running.load(Ordering::Acquire) && crate::clock::mono_ms().saturating_sub(self.started.load(Ordering::Acquire)) >= threshold_ms
    }

    /// Why the Lua code running now must stop (checked by the instruction hook, and by the pattern matcher's
    /// calls to it), or `None` to go on.
    pub fn interruption(&self) -> Option<&'static str> {
        if self.kill.load(Ordering::Acquire) != KILL_NONE {
            return Some(KILLED_TEXT);
        }
        let deadline = self.load_deadline.load(Ordering::Acquire);
        if deadline != 0 && crate::clock::mono_ms() > deadline {
            return Some(LOAD_TIMEOUT_TEXT);
        }
        None
    }
}

/// Everything about scripting the server keeps (in [`Shared`]).
pub struct Scripting {
    /// The Lua state with the script cache and function libraries; locked only under the store lock.
    pub engine: Mutex<Option<engine::Engine>>,
    pub run: Arc<RunState>,
    /// Changes to the function libraries so far (the engine's mutators count them).
    library_changes: Arc<AtomicU64>,
    /// INFO figures, refreshed after every script.
    pub lua_memory: AtomicU64,
    pub cached_scripts: AtomicU64,
    pub scripts_bytes: AtomicU64,
    pub functions_count: AtomicU64,
    pub libraries_count: AtomicU64,
    /// EVAL scripts dropped from the script cache by its LRU bound (INFO `evicted_scripts`).
    pub evicted_scripts: AtomicU64,
}

impl Default for Scripting {
    fn default() -> Self {
        Scripting {
            engine: Mutex::new(None),
            run: Arc::new(RunState::default()),
            library_changes: Arc::new(AtomicU64::new(0)),
            lua_memory: AtomicU64::new(0),
            cached_scripts: AtomicU64::new(0),
            scripts_bytes: AtomicU64::new(0),
            functions_count: AtomicU64::new(0),
            libraries_count: AtomicU64::new(0),
            evicted_scripts: AtomicU64::new(0),
        }
    }
}

impl Scripting {
    /// The engine, created on first use. Call with the store lock held.
    pub fn engine(&self) -> parking_lot::MappedMutexGuard<'_, engine::Engine> {
        let mut g = self.engine.lock();
        if g.is_none() {
            *g = Some(engine::Engine::new(self.run.clone(), self.library_changes.clone()).expect("creating the Lua state"));
        }
        MutexGuard::map(g, |e| e.as_mut().expect("created above"))
    }

    /// How many changes the function libraries have had (a write command that moved it is logged).
    pub fn library_changes(&self) -> u64 {
        self.library_changes.load(Ordering::Relaxed)
    }

    /// Refreshes the INFO figures from the engine.
    pub fn update_stats(&self, e: &engine::Engine) {
        self.lua_memory.store(e.used_memory() as u64, Ordering::Relaxed);
        self.cached_scripts.store(e.scripts.len() as u64, Ordering::Relaxed);
        self.scripts_bytes.store(e.scripts_bytes as u64, Ordering::Relaxed);
        self.functions_count.store(e.functions.functions.len() as u64, Ordering::Relaxed);
        self.libraries_count.store(e.functions.libraries.len() as u64, Ordering::Relaxed);
        self.evicted_scripts.store(e.evicted_scripts, Ordering::Relaxed);
    }

    /// The server is shutting down (SIGTERM, SIGINT, SHUTDOWN): a running script is stopped where it is, as by
    /// SHUTDOWN NOSAVE, so the process ends in bounded time; what it wrote is dropped from the write log (it never
    /// completed, so its client was never answered). A script that starts later sees the shutdown and stops too.
    pub fn stop_for_shutdown(&self) {
        if self.run.running.load(Ordering::SeqCst) {
            self.run.kill.store(KILL_SHUTDOWN, Ordering::SeqCst);
        }
    }

    /// SCRIPT KILL (`function` false) / FUNCTION KILL (`function` true).
    pub fn kill(&self, function: bool) -> Value {
        let run = &self.run;
        if !run.running.load(Ordering::Acquire) {
            return Value::error(if function { ERR_NOTBUSY_FUNCTION } else { ERR_NOTBUSY_SCRIPT });
        }
        if run.wrote.load(Ordering::Acquire) {
            return Value::error(ERR_UNKILLABLE);
        }
        // Each kill command stops only its own kind: SCRIPT KILL during a function (or FUNCTION KILL during EVAL)
        // is answered with the BUSY error that names the right one, as in Redis.
        let running_function = run.is_function.load(Ordering::Acquire);
        if running_function != function {
            return Value::error(if running_function { ERR_BUSY_FUNCTION } else { ERR_BUSY_SCRIPT });
        }
        run.kill.store(KILL_SCRIPT, Ordering::Release);
        Value::ok()
    }

    /// Every function library's code, for a snapshot (call with the store lock held).
    pub fn library_code(&self) -> Vec<Bytes> {
        let engine = self.engine.lock();
        engine.as_ref().map_or_else(Vec::new, |e| e.functions.libraries.values().map(|lib| lib.code.clone()).collect())
    }

    /// After a snapshot was loaded: its libraries, and no others (call with the store lock held). A library that
    /// fails to load names the snapshot as damaged.
    pub fn replace_libraries(&self, libraries: &[Bytes]) -> Result<(), String> {
        if libraries.is_empty() && self.engine.lock().is_none() {
            return Ok(());
        }
        let mut engine = self.engine();
        engine.flush_functions();
        let mut result = Ok(());
        for code in libraries {
            if let Err(e) = engine.load_library(code, true) {
                result = Err(format!("a function library in the snapshot does not load: {e:?}"));
                break;
            }
        }
        self.update_stats(&engine);
        result
    }

    /// INFO memory lines.
    pub fn info_memory(&self) -> String {
        let lua = self.lua_memory.load(Ordering::Relaxed);
        let scripts = self.scripts_bytes.load(Ordering::Relaxed);
        format!(
            "used_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:{scripts}\r\nnumber_of_cached_scripts:{}\r\nnumber_of_functions:{}\r\nnumber_of_libraries:{}\r\nused_memory_vm_functions:0\r\nused_memory_vm_total:{lua}\r\nused_memory_scripts:{scripts}\r\nused_memory_scripts_human:{}\r\n",
            human(lua),
            self.cached_scripts.load(Ordering::Relaxed),
            self.functions_count.load(Ordering::Relaxed),
            self.libraries_count.load(Ordering::Relaxed),
            human(scripts),
        )
    }
}

fn human(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.2}M", n as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.2}K", n as f64 / 1024.0)
    }
}

/// Redis's SHA1 hex of a script body.
pub fn sha1_hex(body: &[u8]) -> String {
    use sha1::{Digest, Sha1};
    let digest = Sha1::digest(body);
    let mut s = String::with_capacity(40);
    for b in digest.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

