//! The [`Host`] through which a script's `redis.call` runs: the execution path the EVAL came through, as a script
//! caller, under the store lock the script holds, after the rules of what a script may not call.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::MutexGuard;
use ruvio_protocol::Value;

use super::context::{Caller, Execute};
use super::{flags, Resolved};
use crate::client::ClientState;
use crate::errors::*;
use crate::scripting::engine::Host;
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
    /// The execution path the EVAL came through ([`Ctx::execute`](super::context::Ctx)).
    pub execute: Execute,
}

impl Host for ServerHost<'_, '_> {
    fn call(&mut self, argv: &[Bytes]) -> Result<Value, String> {
        let resolved = match super::resolve(argv) {
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
        shared.store_in(self.guard);
        let before = self.guard.as_ref().map(|s| s.changes()).unwrap_or(0);
        let (reply, _block) = (self.execute)(Caller::Script, self.now, shared, self.client, argv, self.guard);
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

/// Why a command may not run from a script (None: it may).
fn refuse_in_script(shared: &Shared, resolved: &Resolved, args: &[Bytes], read_only: bool) -> Option<Value> {
    let top = resolved.parent.unwrap_or(resolved.spec);
    if top.has(flags::INTERNAL) {
        return Some(Value::error(ERR_SCRIPT_UNKNOWN_COMMAND));
    }
    if NOT_IN_SCRIPTS.contains(&top.name) || top.has(flags::NOSCRIPT) {
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
