//! The server's side of scripting that connections see: the BUSY gate they pass while a script runs. (The
//! [`Host`](super::engine::Host) through which a script's `redis.call` runs the execution path is the command
//! layer's: `commands/script_host.rs`; a script holds the store lock through `Shared::store_in`.)

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use ruvio_protocol::Value;

use crate::commands::flags;
use crate::errors::*;
use crate::shared::Shared;

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

/// During a busy script: `None` for the commands the table marks `allow_busy` (SCRIPT KILL, FUNCTION KILL,
/// FUNCTION STATS, SHUTDOWN, MULTI, DISCARD, ...: they run without waiting for the store lock; SHUTDOWN's handler
/// refuses all but NOSAVE), the BUSY
/// error for anything else (an unknown command or wrong arity too: Redis checks busy first only for known
/// commands, and reports the others' own error).
fn busy_reply(shared: &Shared, args: &[Bytes]) -> Option<Value> {
    let Ok(resolved) = crate::commands::resolve(args) else { return None };
    if resolved.spec.has(flags::ALLOW_BUSY) {
        return None;
    }
    Some(busy_error(shared))
}

/// `-BUSY`, naming the kill command for what is running (FUNCTION KILL for a function, SCRIPT KILL for EVAL).
pub fn busy_error(shared: &Shared) -> Value {
    Value::error(if shared.scripts.run.is_function.load(Ordering::Acquire) { ERR_BUSY_FUNCTION } else { ERR_BUSY_SCRIPT })
}
