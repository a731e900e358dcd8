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
use crate::metrics::Outcome;
use crate::scripting::engine::Host;
use crate::shared::Shared;
use crate::store::Store;

/// What a running script may call, from the command that started it and the flags the script declares.
#[derive(Clone, Copy, Debug)]
pub struct ScriptRules {
    /// EVAL_RO / FCALL_RO, or a `no-writes` script: writes are refused.
    pub read_only: bool,
    /// A script without declared flags: a command that may grow memory is refused over `maxmemory` until the script
    /// has written something (after that, refusing would break its atomicity). A script with flags was checked
    /// once before it started (`allow-oom` lifts it).
    pub oom_per_command: bool,
}

/// Runs a script's commands as its client, with the lock the script holds, at the script's instant.
pub struct ServerHost<'a, 'g> {
    pub shared: &'g Arc<Shared>,
    pub client: &'a mut ClientState,
    pub guard: &'a mut Option<MutexGuard<'g, Store>>,
    pub now: u64,
    pub rules: ScriptRules,
    /// The execution path the EVAL came through ([`Ctx::execute`](super::context::Ctx)).
    pub execute: Execute,
}

impl Host for ServerHost<'_, '_> {
    /// Every error a called command gives (refused or failed) is counted in INFO errorstats here, where it
    /// happens, as Redis does; the engine marks it so that a script ending with that same error does not count it
    /// again ([`Host::error_already_counted`]).
    fn call(&mut self, argv: &[Bytes], numbers: &[(usize, f64)]) -> Result<Value, String> {
        let result = self.run_call(argv, numbers);
        match &result {
            Err(text) => self.shared.stats.count_error(text.as_bytes()),
            Ok(Value::Error(text)) => self.shared.stats.count_error(text),
            Ok(_) => {}
        }
        result
    }

    fn error_already_counted(&mut self) {
        self.client.info.reply_error_counted.store(true, Ordering::Release);
    }

    /// Redis's `luaRedisAclCheckCmdPermissionsCommand`: the command (or subcommand) by name alone, as Redis's
    /// `lookupCommand` finds it (arity is not checked), then the same check as the ACL gate, against the user of
    /// the connection that runs the script. Nothing is logged in ACL LOG (a question, not a denied call).
    fn acl_check(&mut self, argv: &[Bytes]) -> Result<bool, String> {
        let invalid = || ERR_SCRIPT_ACL_CHECK_INVALID.to_string();
        let spec = super::lookup_public(&argv[0]).ok_or_else(invalid)?;
        let resolved = if spec.subcommands.is_empty() || argv.len() < 2 {
            Resolved { spec, parent: None }
        } else {
            Resolved { spec: spec.find_subcommand(&argv[1]).ok_or_else(invalid)?, parent: Some(spec) }
        };
        Ok(self.client.user.as_ref().is_none_or(|u| u.perms().check(&resolved, argv).is_ok()))
    }
}

impl ServerHost<'_, '_> {
    /// One `redis.call`: the script's rules, then the execution path as [`Caller::Script`].
    fn run_call(&mut self, argv: &[Bytes], numbers: &[(usize, f64)]) -> Result<Value, String> {
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
        let rejected = |shared: &Shared| shared.metrics.record(resolved.spec, std::time::Duration::ZERO, Outcome::Rejected);
        if let Some(refusal) = refuse_in_script(self.shared, self.client, &resolved, argv, self.rules) {
            rejected(self.shared);
            return Err(error_text(&refusal));
        }
        let exact;
        let argv = match token_from_number(&resolved, numbers) {
            Ok(None) => argv,
            Ok(Some(token)) => {
                exact = with_arg(argv, flags::TOKEN_ARG_INDEX, token);
                &exact[..]
            }
            Err(e) => {
                rejected(self.shared);
                return Err(e.to_string());
            }
        };
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

/// A fencing token the script passed as a Lua number (a double): below 2^53 a double holds every integer exactly, so
/// the token is its exact digits (whatever the number formatting of other arguments). From 2^53 on, neighbouring
/// tokens share one double, so the number may be a different token rounded: refused, rather than let a stale
/// holder's RELEASE or IFGT pass as a newer one's. Tokens from LEASE and SEMAPHORE reach scripts as strings.
/// `Ok(None)`: nothing to change (no token argument, passed as a string, or not an integer at all, which the
/// command's own parser refuses).
fn token_from_number(resolved: &Resolved, numbers: &[(usize, f64)]) -> Result<Option<i64>, &'static str> {
    if !resolved.spec.has(flags::TOKEN_ARG) {
        return Ok(None);
    }
    let Some(&(_, n)) = numbers.iter().find(|(i, _)| *i == flags::TOKEN_ARG_INDEX) else { return Ok(None) };
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() != 0.0 || n.is_nan() {
        return Ok(None);
    }
    if n.abs() >= EXACT {
        return Err(ERR_SCRIPT_TOKEN_NUMBER);
    }
    Ok(Some(n as i64))
}

/// `args` with argument `at` replaced by the decimal digits of `n`.
fn with_arg(args: &[Bytes], at: usize, n: i64) -> Vec<Bytes> {
    let mut v = args.to_vec();
    v[at] = Bytes::from(n.to_string());
    v
}

/// Why a command may not run from a script (None: it may).
fn refuse_in_script(shared: &Shared, client: &ClientState, resolved: &Resolved, args: &[Bytes], rules: ScriptRules) -> Option<Value> {
    let top = resolved.parent.unwrap_or(resolved.spec);
    if top.has(flags::INTERNAL) {
        return Some(Value::error(ERR_SCRIPT_UNKNOWN_COMMAND));
    }
    let spec = resolved.spec;
    if top.has(flags::NOSCRIPT) || spec.has(flags::NOSCRIPT) {
        return Some(Value::error(ERR_SCRIPT_NOT_ALLOWED));
    }
    if rules.oom_per_command
        && spec.has(flags::DENYOOM)
        && !shared.scripts.run.wrote.load(Ordering::Acquire)
        && shared.stats.over_maxmemory()
    {
        return Some(Value::error(ERR_OOM));
    }
    if spec.has(flags::WRITE) {
        if rules.read_only {
            return Some(Value::error(ERR_SCRIPT_WRITE_IN_RO));
        }
        if !shared.replication.enough_good_replicas() {
            // min-replicas-to-write, as for a client's write (Redis checks it for every write a script calls).
            return Some(Value::error(ERR_NOREPLICAS));
        }
        if client.durability_replicas > 0 && shared.replication.online_durable_replicas() < client.durability_replicas {
            // A durable connection's script: the same rule as its single writes, before anything is written (a
            // script that already wrote keeps it, as any script that fails half-way does).
            return Some(Value::error(ERR_NOREPLICAS));
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
