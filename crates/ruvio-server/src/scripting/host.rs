//! The server's side of scripting: the [`Host`] through which a script's `redis.call` runs (dispatch, as a script
//! caller, under the store lock the script holds), what a script may not call, and the BUSY gate connections pass
//! while a script runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::MutexGuard;
use ruvio_protocol::Value;

use super::engine::Host;
use super::{KILL_SHUTDOWN};
use crate::client::ClientState;
use crate::errors::*;
use crate::shared::Shared;
use crate::store::Store;

/// Runs a script's commands as its client, with the lock the script holds, at the script's instant.
pub struct ServerHost<'a, 'g> {
    pub shared: &'g Arc<Shared>,
    pub client: &'a mut ClientState,
    pub guard: &'a mut Option<MutexGuard<'g, Store>>,
    pub now: u64,
    /// EVAL_RO / FCALL_RO: writes are refused.
    pub read_only: bool,
}

impl Host for ServerHost<'_, '_> {
    fn call(&mut self, argv: &[Bytes]) -> Result<Value, String> {
        let resolved = match crate::commands::resolve(argv) {
            Ok(r) => r,
            Err(e) => {
                let text = error_text(&e);
                return Err(if text.starts_with("ERR unknown command") {
                    ERR_SCRIPT_UNKNOWN_COMMAND.to_string()
                } else if text.starts_with("ERR wrong number of arguments") {
                    ERR_SCRIPT_WRONG_ARITY.to_string()
                } else {
                    text
                });
            }
        };
        if let Some(refusal) = refuse_in_script(self.shared, &resolved, argv, self.read_only) {
            return Err(error_text(&refusal));
        }
        let shared = self.shared;
        lock_store(shared, self.guard);
        let before = self.guard.as_ref().map(|s| s.changes()).unwrap_or(0);
        let (reply, _block) = crate::dispatch::execute(crate::dispatch::Caller::Script, self.now, shared, self.client, argv, self.guard);
        if self.guard.as_ref().map(|s| s.changes()).unwrap_or(0) != before {
            shared.scripts.run.wrote.store(true, Ordering::Release);
        }
        Ok(reply)
    }
}

fn error_text(v: &Value) -> String {
    match v {
        Value::Error(b) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

fn threshold(shared: &Shared) -> u64 {
    shared.config.read().busy_reply_threshold
}

/// Called by a connection before a command that will want the store lock. While a script runs this waits for it
/// (polling, never parked on the lock for longer than a few ms) and, once the script is past
/// `busy-reply-threshold`, answers `-BUSY` instead, except for the commands that may run during a busy script.
/// `None`: go ahead.
pub fn busy_gate(shared: &Shared, args: &[Bytes], holding_lock: bool) -> Option<Value> {
    let run = &shared.scripts.run;
    if holding_lock || !run.running.load(Ordering::Acquire) {
        return None;
    }
    loop {
        if !run.running.load(Ordering::Acquire) {
            return None;
        }
        if run.busy(threshold(shared)) {
            return busy_reply(shared, args);
        }
        if let Some(g) = shared.store.try_lock_for(Duration::from_millis(5)) {
            drop(g);
            return None;
        }
    }
}

/// During a busy script: `None` for SCRIPT KILL / FUNCTION KILL / SHUTDOWN NOSAVE (which then run without the store
/// lock), the BUSY error for anything else.
fn busy_reply(shared: &Shared, args: &[Bytes]) -> Option<Value> {
    let name = &args[0];
    let is = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
    let sub_is = |s: &str| args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(s.as_bytes()));
    if (is("script") || is("function")) && sub_is("kill") {
        return None;
    }
    if is("shutdown") && args[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave")) {
        // The script is stopped where it is; what it wrote is dropped from the write log (it never completed).
        shared.scripts.run.kill.store(KILL_SHUTDOWN, Ordering::Release);
        return None;
    }
    Some(Value::error(if shared.scripts.run.is_function.load(Ordering::Acquire) { ERR_BUSY_FUNCTION } else { ERR_BUSY_SCRIPT }))
}

/// Why a command may not run from a script (None: it may). Called by dispatch for [`crate::dispatch::Caller::Script`].
pub fn refuse_in_script(shared: &Shared, resolved: &crate::commands::Resolved, args: &[Bytes], read_only: bool) -> Option<Value> {
    use crate::commands::flags;
    let top = resolved.parent.unwrap_or(resolved.spec);
    if top.has(flags::INTERNAL) {
        return Some(Value::error(ERR_SCRIPT_UNKNOWN_COMMAND));
    }
    if NOT_IN_SCRIPTS.contains(&top.name) {
        return Some(Value::error(ERR_SCRIPT_NOT_ALLOWED));
    }
    let spec = resolved.spec;
    if spec.has(flags::WRITE) {
        if read_only {
            return Some(Value::error(ERR_SCRIPT_WRITE_IN_RO));
        }
        if let Some(reason) = shared.aof.write_error() {
            return Some(misconf(&reason));
        }
        if !crate::journal::format::command_record_fits(args) {
            return Some(Value::error(ERR_RECORD_TOO_LARGE));
        }
    }
    None
}

/// Commands a script may not call (Redis's `noscript` flag): scripting itself, transactions, subscriptions and
/// commands that make no sense from inside a script.
const NOT_IN_SCRIPTS: &[&str] = &[
    "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "script", "function", "multi", "exec", "discard",
    "watch", "unwatch", "subscribe", "psubscribe", "unsubscribe", "punsubscribe", "ssubscribe", "sunsubscribe",
    "auth", "hello", "shutdown", "save", "bgsave", "bgrewriteaof", "quit", "reset", "client", "monitor", "sync",
    "psync", "replconf", "wait", "waitaof", "debug",
];

/// The store while a script runs, for [`engine`]: locks it if not yet held.
pub fn lock_store<'g>(shared: &'g Arc<Shared>, guard: &mut Option<MutexGuard<'g, Store>>) {
    if guard.is_none() {
        *guard = Some(shared.store.lock());
    }
}
