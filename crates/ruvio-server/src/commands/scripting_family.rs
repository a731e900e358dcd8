//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FCALL, FCALL_RO, FUNCTION. See [`crate::scripting`] for how a
//! script runs (atomically, off the I/O thread, with effects replication).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::MutexGuard;
use ruvio_protocol::Value;

use super::flags::*;
use super::script_host::{ScriptRules, ServerHost};
use super::{eq_ic, CommandSpec};
use crate::client::ClientState;
use super::context::{Ctx, Execute};
use crate::blocking::Block;
use crate::errors::*;
use crate::scripting::engine::Target;
use crate::scripting::{self, KILL_NONE, KILL_SHUTDOWN};
use crate::shared::Shared;
use crate::store::Store;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $summary:literal, $handler:expr) => {
        CommandSpec { name: $name, arity: $arity, flags: $flags, keys: (0, 0, 0), group: "scripting", summary: $summary, handler: $handler, subcommands: &[] }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd!("eval", -3, STALE | MONITOR_FIRST | NOSCRIPT | NUMKEYS_AT_2 | RUNS_SCRIPT, "Executes a server-side Lua script.", eval),
    cmd!("evalsha", -3, STALE | MONITOR_FIRST | NOSCRIPT | NUMKEYS_AT_2 | RUNS_SCRIPT, "Executes a server-side Lua script by SHA1 digest.", evalsha),
    cmd!("eval_ro", -3, STALE | MONITOR_FIRST | READONLY | NOSCRIPT | NUMKEYS_AT_2 | RUNS_SCRIPT, "Executes a read-only server-side Lua script.", eval_ro),
    cmd!("evalsha_ro", -3, STALE | MONITOR_FIRST | READONLY | NOSCRIPT | NUMKEYS_AT_2 | RUNS_SCRIPT, "Executes a read-only server-side Lua script by SHA1 digest.", evalsha_ro),
    cmd!("fcall", -3, STALE | MONITOR_FIRST | NOSCRIPT | NUMKEYS_AT_2 | RUNS_SCRIPT, "Invokes a function.", fcall),
    cmd!("fcall_ro", -3, STALE | MONITOR_FIRST | READONLY | NOSCRIPT | NUMKEYS_AT_2 | RUNS_SCRIPT, "Invokes a read-only function.", fcall_ro),
    CommandSpec { name: "script", arity: -2, flags: NOSCRIPT, keys: (0, 0, 0), group: "scripting", summary: "A container for Lua scripts management commands.", handler: super::server_family::container_help, subcommands: SCRIPT_SUBCOMMANDS },
    CommandSpec { name: "function", arity: -2, flags: NOSCRIPT, keys: (0, 0, 0), group: "scripting", summary: "A container for function commands.", handler: super::server_family::container_help, subcommands: FUNCTION_SUBCOMMANDS },
];

static SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("load", 3, STALE, "Loads a server-side Lua script to the script cache.", script_load),
    cmd!("exists", -3, STALE, "Determines whether server-side Lua scripts exist in the script cache.", script_exists),
    cmd!("flush", -2, WRITE | STALE, "Removes all server-side Lua scripts from the script cache.", script_flush),
    cmd!("kill", 2, STALE | ALLOW_BUSY, "Terminates a server-side Lua script during execution.", script_kill),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", script_help),
];

static FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("load", -3, WRITE | STALE | DENYOOM, "Creates a library.", function_load),
    cmd!("delete", 3, WRITE | STALE, "Deletes a library and its functions.", function_delete),
    cmd!("flush", -2, WRITE | STALE, "Deletes all libraries and functions.", function_flush),
    cmd!("list", -2, STALE, "Returns information about all libraries.", function_list),
    cmd!("dump", 2, STALE, "Dumps all libraries into a serialized binary payload.", function_dump),
    cmd!("restore", -3, WRITE | STALE | DENYOOM, "Restores all libraries from a payload.", function_restore),
    cmd!("stats", 2, STALE | ALLOW_BUSY, "Returns information about a function during execution.", function_stats),
    cmd!("kill", 2, STALE | ALLOW_BUSY, "Terminates a function during execution.", function_kill),
    cmd!("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", function_help),
];

// ----- EVAL family -----

/// What to run, owned (it may travel to the script thread).
#[derive(Clone)]
enum Job {
    Script(String),
    /// A function's name, and the FCALL that called it (for FUNCTION STATS).
    Function(String, Vec<Bytes>),
}

fn eval(ctx: &mut Ctx) -> Value {
    eval_generic(ctx, false, false)
}
fn evalsha(ctx: &mut Ctx) -> Value {
    eval_generic(ctx, true, false)
}
fn eval_ro(ctx: &mut Ctx) -> Value {
    eval_generic(ctx, false, true)
}
fn evalsha_ro(ctx: &mut Ctx) -> Value {
    eval_generic(ctx, true, true)
}
fn fcall(ctx: &mut Ctx) -> Value {
    fcall_generic(ctx, false)
}
fn fcall_ro(ctx: &mut Ctx) -> Value {
    fcall_generic(ctx, true)
}

/// `<name-or-body> numkeys key... arg...` -> (keys, args).
fn split_keys(args: &[Bytes]) -> Result<(Vec<Bytes>, Vec<Bytes>), Value> {
    let n = super::int_arg(&args[2])?;
    split_keys_at(args, n)
}

/// [`split_keys`] with the count already read.
fn split_keys_at(args: &[Bytes], n: i64) -> Result<(Vec<Bytes>, Vec<Bytes>), Value> {
    if n < 0 {
        return Err(Value::error(ERR_NUMKEYS_NEGATIVE));
    }
    let n = n as usize;
    if n > args.len() - 3 {
        return Err(Value::error(ERR_NUMKEYS_TOO_MANY));
    }
    Ok((args[3..3 + n].to_vec(), args[3 + n..].to_vec()))
}

fn eval_generic(ctx: &mut Ctx, by_sha: bool, ro_cmd: bool) -> Value {
    let (keys, argv) = match split_keys(ctx.args) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let body = ctx.args[1].clone();
    let shared = ctx.shared;
    ctx.store();
    let (sha, flags) = {
        let mut engine = shared.scripts.engine();
        let sha = if by_sha {
            let sha = String::from_utf8_lossy(&body).to_ascii_lowercase();
            if !engine.scripts.contains_key(&sha) {
                return Value::error(ERR_NOSCRIPT);
            }
            sha
        } else {
            match engine.load_script(&body, false) {
                Ok(sha) => sha,
                Err(e) => return e,
            }
        };
        shared.scripts.update_stats(&engine);
        let script = &engine.scripts[&sha];
        (sha, script.flags.clone())
    };
    if let Some(refused) = refuse_by_flags(ctx.shared, &flags, ro_cmd) {
        return refused;
    }
    // A script that declares no flags may write and is checked against maxmemory command by command, as in Redis.
    let rules = ScriptRules { read_only: ro_cmd || flags.no_writes, oom_per_command: !flags.declared };
    start(ctx, Job::Script(sha), keys, argv, rules)
}

fn fcall_generic(ctx: &mut Ctx, ro_cmd: bool) -> Value {
    // FCALL words a count that is not a number its own way (EVAL answers "value is not an integer ...").
    let Some(n) = super::parse_i64(&ctx.args[2]) else { return Value::error(ERR_FCALL_NUMKEYS) };
    let (keys, argv) = match split_keys_at(ctx.args, n) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let name = String::from_utf8_lossy(&ctx.args[1]).into_owned();
    let shared = ctx.shared;
    ctx.store();
    let (flags, name) = {
        let engine = shared.scripts.engine();
        match engine.functions.function(&name) {
            // The name as registered (FCALL's is matched in any case), for FUNCTION STATS.
            Some(f) => {
                let registered = engine.functions.libraries.get(&f.library).and_then(|l| l.functions.iter().find(|n| n.eq_ignore_ascii_case(&name)));
                (f.flags.clone(), registered.cloned().unwrap_or(name))
            }
            None => return Value::error(ERR_FUNCTION_NOT_FOUND),
        }
    };
    if let Some(refused) = refuse_by_flags(ctx.shared, &flags, ro_cmd) {
        return refused;
    }
    // A script that declares no flags may write and is checked against maxmemory command by command, as in Redis.
    let rules = ScriptRules { read_only: ro_cmd || flags.no_writes, oom_per_command: !flags.declared };
    let command = ctx.args.to_vec();
    start(ctx, Job::Function(name, command), keys, argv, rules)
}

/// What a script that declares its flags (a function, or an EVAL body with a `#!lua` shebang) is refused before it
/// runs, as Redis 7 does from the flags alone (a script without a shebang is checked command by command instead):
/// over `maxmemory` without `allow-oom`; and unless it is `no-writes`, on a replica, from a `*_RO` command, or with
/// fewer good replicas than `min-replicas-to-write`.
fn refuse_by_flags(shared: &Shared, flags: &scripting::functions::Flags, ro_cmd: bool) -> Option<Value> {
    if !flags.declared {
        return None;
    }
    if !flags.names.iter().any(|f| f == "allow-oom") && shared.stats.over_maxmemory() {
        return Some(Value::error(ERR_SCRIPT_OOM));
    }
    if flags.no_writes {
        return None;
    }
    if shared.replication.is_replica() {
        return Some(Value::error(ERR_SCRIPT_WRITE_ON_REPLICA));
    }
    if ro_cmd {
        return Some(Value::error(ERR_SCRIPT_WRITE_FLAG_RO));
    }
    if !shared.replication.enough_good_replicas() {
        return Some(Value::error(ERR_NOREPLICAS));
    }
    None
}

/// How long the I/O thread waits for a script it handed off before it lets the client wait as a blocked command.
/// A lock library's compare-and-delete finishes well within this, so its reply goes out in the same turn (no trip
/// through the blocked-client path); a longer script costs the thread's other clients at most this much before
/// they are served again (and answered `-BUSY` past `busy-reply-threshold`).
const SCRIPT_SYNC_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

/// The script thread's reply, and a flag the I/O thread can wait on for a short while.
struct Handoff {
    done: parking_lot::Mutex<bool>,
    cv: parking_lot::Condvar,
}

/// Runs the script: inline inside MULTI/EXEC (or without a runtime), otherwise on a blocking-pool thread. The
/// client's I/O thread waits up to [`SCRIPT_SYNC_WAIT`] for the reply and otherwise lets the client wait like a
/// blocked command, so it keeps serving its other connections (which get -BUSY once the script is past
/// `busy-reply-threshold`, and can send SCRIPT KILL or SHUTDOWN NOSAVE). A script never runs on an I/O thread
/// outside EXEC: one that ran long there would leave every client of that thread unanswered.
fn start(ctx: &mut Ctx, job: Job, keys: Vec<Bytes>, argv: Vec<Bytes>, rules: ScriptRules) -> Value {
    let execute = ctx.execute;
    if ctx.in_exec || tokio::runtime::Handle::try_current().is_err() {
        let now = ctx.now;
        let in_exec = ctx.in_exec;
        let (shared, client, guard) = ctx.parts();
        // Inside EXEC the transaction's MULTI ... EXEC already wraps the script's records.
        return run_job(shared, client, guard, execute, &job, &keys, &argv, rules, now, !in_exec);
    }
    ctx.unlock();
    let shared = ctx.shared.clone();
    let mut client = ClientState::new(ctx.client.info.clone(), true);
    client.db = ctx.client.db;
    client.proto = ctx.client.proto;
    // The script's commands are checked against the caller's ACL user, as in Redis (dispatch.rs, context `lua`).
    client.user = ctx.client.user.clone();
    // A durable connection's script reports its writes and grants (through the shared ClientInfo) for the wait.
    client.durability_replicas = ctx.client.durability_replicas;
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let handoff = Arc::new(Handoff { done: parking_lot::Mutex::new(false), cv: parking_lot::Condvar::new() });
    let signal = handoff.clone();
    tokio::task::spawn_blocking(move || {
        let mut guard: Option<MutexGuard<'_, Store>> = None;
        let now = {
            shared.store_in(&mut guard);
            crate::clock::mono_ms()
        };
        let reply = run_job(&shared, &mut client, &mut guard, execute, &job, &keys, &argv, rules, now, true);
        drop(guard);
        let _ = tx.send(reply);
        *signal.done.lock() = true;
        signal.cv.notify_one();
    });
    {
        let mut done = handoff.done.lock();
        if !*done {
            let _ = handoff.cv.wait_for(&mut done, SCRIPT_SYNC_WAIT);
        }
    }
    if let Ok(reply) = rx.try_recv() {
        // Back under the store lock, as a command that ran here: the connection then commits the script's staged
        // records and holds this reply until they are as durable as any other write's (appendfsync always, and
        // CLIENT DURABILITY), exactly as it does after a blocked reply.
        ctx.store();
        return reply;
    }
    ctx.set_block(Block { rx, timeout: None, cancel: Box::new(|_| {}), abandon: None, timeout_reply: Value::error(ERR_SCRIPT_ABORTED) });
    Value::Nil
}

/// Runs a script or function under the store lock; records what it wrote (wrapped in MULTI ... EXEC when `wrap`
/// and it wrote more than one record).
#[allow(clippy::too_many_arguments)]
fn run_job<'g>(
    shared: &'g Arc<Shared>,
    client: &mut ClientState,
    guard: &mut Option<MutexGuard<'g, Store>>,
    execute: Execute,
    job: &Job,
    keys: &[Bytes],
    argv: &[Bytes],
    rules: ScriptRules,
    now: u64,
    wrap: bool,
) -> Value {
    shared.store_in(guard);
    let log_start = guard.as_ref().map(|s| s.log.len()).unwrap_or(0);
    let run = &shared.scripts.run;
    run.kill.store(KILL_NONE, Ordering::SeqCst);
    run.wrote.store(false, Ordering::Release);
    run.is_function.store(matches!(job, Job::Function(..)), Ordering::Release);
    *run.current.lock() = match job {
        Job::Function(name, command) => Some((name.clone(), command.clone())),
        Job::Script(_) => None,
    };
    run.started.store(crate::clock::mono_ms(), Ordering::Release);
    run.running.store(true, Ordering::SeqCst);
    // A shutdown requested before `running` was set did not see this script: it stops at its first check.
    if shared.is_shutting_down() {
        run.kill.store(KILL_SHUTDOWN, Ordering::SeqCst);
    }
    let saved_db = client.db;
    let reply = {
        let mut engine = shared.scripts.engine();
        let target = match job {
            Job::Script(sha) => Target::Script(sha),
            Job::Function(name, _) => Target::Function(name),
        };
        let mut host = ServerHost { shared, client: &mut *client, guard: &mut *guard, now, rules, execute };
        let reply = engine.run(target, keys, argv, &mut host);
        shared.scripts.update_stats(&engine);
        reply
    };
    client.db = saved_db;
    let killed = run.kill.swap(KILL_NONE, Ordering::AcqRel);
    if let Some(store) = guard.as_mut() {
        if killed == KILL_SHUTDOWN {
            // Stopped by SHUTDOWN NOSAVE: the script did not complete, so none of it may reach the log.
            store.log.truncate(log_start);
        } else if wrap {
            store.wrap_atomic(log_start);
        }
        // Clients blocked on keys the script wrote are served after its records (the script may have run on the
        // script thread, where no command's end would serve them).
        if wrap && !store.waiters.ready.is_empty() {
            let served = super::blocking_family::serve_ready(shared, store);
            super::blocking_family::notify_served(shared, store, served);
        }
    }
    run.running.store(false, Ordering::Release);
    reply
}

// ----- SCRIPT -----

fn script_load(ctx: &mut Ctx) -> Value {
    let body = ctx.args[2].clone();
    let shared = ctx.shared;
    ctx.store();
    let mut engine = shared.scripts.engine();
    let r = engine.load_script(&body, true);
    shared.scripts.update_stats(&engine);
    match r {
        Ok(sha) => Value::bulk(sha),
        Err(e) => e,
    }
}

fn script_exists(ctx: &mut Ctx) -> Value {
    let shared = ctx.shared;
    ctx.store();
    let engine = shared.scripts.engine();
    Value::Array(
        ctx.args[2..]
            .iter()
            .map(|s| Value::Integer(engine.scripts.contains_key(&String::from_utf8_lossy(s).to_ascii_lowercase()) as i64))
            .collect(),
    )
}

fn flush_mode(args: &[Bytes]) -> Result<(), Value> {
    match args.len() {
        2 => Ok(()),
        3 if eq_ic(&args[2], "async") || eq_ic(&args[2], "sync") => Ok(()),
        _ => Err(Value::error(ERR_SCRIPT_FLUSH_MODE)),
    }
}

/// FUNCTION FLUSH's `[ASYNC|SYNC]`, with Redis's texts (they differ from SCRIPT FLUSH's).
fn function_flush_mode(args: &[Bytes]) -> Result<(), Value> {
    match args.len() {
        2 => Ok(()),
        3 if eq_ic(&args[2], "async") || eq_ic(&args[2], "sync") => Ok(()),
        3 => Err(Value::error(ERR_FUNCTION_FLUSH_MODE)),
        _ => Err(function_sub_arity("flush")),
    }
}

fn script_flush(ctx: &mut Ctx) -> Value {
    if let Err(e) = flush_mode(ctx.args) {
        return e;
    }
    let shared = ctx.shared;
    ctx.store();
    let mut engine = shared.scripts.engine();
    engine.flush_scripts();
    shared.scripts.update_stats(&engine);
    Value::ok()
}

fn script_kill(ctx: &mut Ctx) -> Value {
    ctx.shared.scripts.kill(false)
}

fn help(lines: &[&str]) -> Value {
    Value::Array(lines.iter().map(|l| Value::Simple(Bytes::copy_from_slice(l.as_bytes()))).collect())
}

fn script_help(_ctx: &mut Ctx) -> Value {
    help(&[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Print this help.",
    ])
}

// ----- FUNCTION -----

fn function_load(ctx: &mut Ctx) -> Value {
    // `FUNCTION LOAD [REPLACE] code`: every argument before the code is an option (Redis's parsing).
    let (options, code) = ctx.args[2..].split_at(ctx.args.len() - 3);
    let code = code[0].clone();
    let mut replace = false;
    for o in options {
        if !eq_ic(o, "replace") {
            return script_error(ScriptError::UnknownOption, &String::from_utf8_lossy(o));
        }
        replace = true;
    }
    let shared = ctx.shared;
    ctx.store();
    let r = {
        let mut engine = shared.scripts.engine();
        let r = engine.load_library(&code, replace);
        shared.scripts.update_stats(&engine);
        r
    };
    match r {
        Ok(name) => Value::bulk(name),
        Err(e) => e,
    }
}

fn function_delete(ctx: &mut Ctx) -> Value {
    let name = String::from_utf8_lossy(&ctx.args[2]).into_owned();
    let shared = ctx.shared;
    ctx.store();
    let deleted = {
        let mut engine = shared.scripts.engine();
        let d = engine.delete_library(&name);
        shared.scripts.update_stats(&engine);
        d
    };
    if !deleted {
        return Value::error(ERR_FUNCTION_NO_LIBRARY);
    }
    Value::ok()
}

fn function_flush(ctx: &mut Ctx) -> Value {
    if let Err(e) = function_flush_mode(ctx.args) {
        return e;
    }
    let shared = ctx.shared;
    ctx.store();
    {
        let mut engine = shared.scripts.engine();
        engine.flush_functions();
        shared.scripts.update_stats(&engine);
    }
    Value::ok()
}

fn function_list(ctx: &mut Ctx) -> Value {
    let mut pattern: Option<Bytes> = None;
    let mut with_code = false;
    let mut i = 2;
    let args = ctx.args;
    while i < args.len() {
        if eq_ic(&args[i], "withcode") && !with_code {
            with_code = true;
            i += 1;
        } else if eq_ic(&args[i], "libraryname") && pattern.is_none() {
            if i + 1 >= args.len() {
                return Value::error(ERR_FUNCTION_LIST_NO_NAME);
            }
            pattern = Some(args[i + 1].clone());
            i += 2;
        } else {
            return script_error(ScriptError::UnknownArgument, &String::from_utf8_lossy(&args[i]));
        }
    }
    let shared = ctx.shared;
    ctx.store();
    let engine = shared.scripts.engine();
    let mut out = Vec::new();
    for (name, lib) in &engine.functions.libraries {
        if let Some(p) = &pattern {
            if !crate::keyspace::glob::glob_match(p, name.as_bytes(), false) {
                continue;
            }
        }
        let functions = lib
            .functions
            .iter()
            .filter_map(|f| engine.functions.function(f).map(|rf| (f, rf)))
            .map(|(f, rf)| {
                Value::Map(vec![
                    (Value::bulk_str("name"), Value::bulk_str(f)),
                    (Value::bulk_str("description"), rf.description.as_deref().map_or(Value::Nil, Value::bulk_str)),
                    (Value::bulk_str("flags"), Value::Set(rf.flags.names.iter().map(|n| Value::bulk_str(n)).collect())),
                ])
            })
            .collect();
        let mut entry = vec![
            (Value::bulk_str("library_name"), Value::bulk_str(name)),
            (Value::bulk_str("engine"), Value::bulk_str("LUA")),
            (Value::bulk_str("functions"), Value::Array(functions)),
        ];
        if with_code {
            entry.push((Value::bulk_str("library_code"), Value::Bulk(lib.code.clone())));
        }
        out.push(Value::Map(entry));
    }
    Value::Array(out)
}

fn function_dump(ctx: &mut Ctx) -> Value {
    let shared = ctx.shared;
    ctx.store();
    let engine = shared.scripts.engine();
    Value::Bulk(scripting::functions::dump(&engine.functions))
}

fn function_restore(ctx: &mut Ctx) -> Value {
    use scripting::functions::RestorePolicy as Policy;
    if ctx.args.len() > 4 {
        return function_sub_arity("restore");
    }
    let policy = match ctx.args.get(3) {
        None => Policy::Append,
        Some(p) if eq_ic(p, "append") => Policy::Append,
        Some(p) if eq_ic(p, "replace") => Policy::Replace,
        Some(p) if eq_ic(p, "flush") => Policy::Flush,
        Some(_) => return Value::error(ERR_FUNCTION_RESTORE_POLICY),
    };
    let libs = match scripting::functions::undump(&ctx.args[2]) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let shared = ctx.shared;
    ctx.store();
    let r = {
        let mut engine = shared.scripts.engine();
        // All or nothing: the payload's libraries load into a scratch registry first.
        let r = engine.restore_libraries(&libs, policy);
        shared.scripts.update_stats(&engine);
        r
    };
    match r {
        Ok(()) => Value::ok(),
        Err(e) => e,
    }
}

fn function_stats(ctx: &mut Ctx) -> Value {
    let s = &ctx.shared.scripts;
    let current = s.run.current.lock().clone();
    let running = match current {
        Some((name, command)) if s.run.running.load(Ordering::Acquire) && s.run.is_function.load(Ordering::Acquire) => {
            let ms = crate::clock::mono_ms().saturating_sub(s.run.started.load(Ordering::Acquire));
            Value::Map(vec![
                (Value::bulk_str("name"), Value::bulk_str(&name)),
                (Value::bulk_str("command"), Value::Array(command.into_iter().map(Value::Bulk).collect())),
                (Value::bulk_str("duration_ms"), Value::Integer(ms as i64)),
            ])
        }
        _ => Value::Nil,
    };
    let engines = Value::Map(vec![(
        Value::bulk_str("LUA"),
        Value::Map(vec![
            (Value::bulk_str("libraries_count"), Value::Integer(s.libraries_count.load(Ordering::Relaxed) as i64)),
            (Value::bulk_str("functions_count"), Value::Integer(s.functions_count.load(Ordering::Relaxed) as i64)),
        ]),
    )]);
    Value::Map(vec![(Value::bulk_str("running_script"), running), (Value::bulk_str("engines"), engines)])
}

fn function_kill(ctx: &mut Ctx) -> Value {
    ctx.shared.scripts.kill(true)
}

fn function_help(_ctx: &mut Ctx) -> Value {
    help(&[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "DELETE <LIBRARY NAME>",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "FLUSH [ASYNC|SYNC]",
        "DUMP",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "STATS",
        "KILL",
        "HELP",
        "    Print this help.",
    ])
}
