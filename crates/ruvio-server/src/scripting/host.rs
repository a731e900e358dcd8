//! The server's side of scripting that connections see: the BUSY gate they pass while a script runs. (The
//! [`Host`](super::engine::Host) through which a script's `redis.call` runs the execution path is the command
//! layer's: `commands/script_host.rs`; a script holds the store lock through `Shared::store_in`.)

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use ruvio_protocol::Value;

use super::KILL_SHUTDOWN;
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
