//! The one way a command runs: every caller (a client connection, the start-up loader replaying the log, and next
//! a replica applying its primary's stream) goes through [`execute`], says who it is, and the gates that apply to
//! it are decided here once: internal records, authentication, subscribed mode, loading, a read-only replica, a
//! durable connection with too few replicas, a failing write log, a record too large to log, MULTI queueing. [`crate::commands::call`] then runs the handler and logs what changed.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::MutexGuard;
use ruvio_protocol::Value;

use crate::client::{ClientInfo, ClientState};
use crate::clock::Stamp;
use crate::commands::{self, flags};
use crate::blocking::Block;
pub use crate::commands::context::Caller;
use crate::commands::context::Ctx;
use crate::metrics::Outcome;
use crate::errors::*;
use crate::shared::Shared;
use crate::store::Store;

/// Runs `args` for `client` at `now` (monotonic ms). Returns the reply and, when the command must wait, the
/// [`Block`] the caller waits on without any lock.
pub fn execute<'g>(
    caller: Caller,
    now: u64,
    shared: &'g Arc<Shared>,
    client: &mut ClientState,
    args: &[Bytes],
    guard: &mut Option<MutexGuard<'g, Store>>,
) -> (Value, Option<Box<Block>>) {
    execute_from(caller, &mut Stamp::now(), now, shared, client, args, guard)
}

/// [`execute`] for a client's command that started at `clock` (`now` is that instant in monotonic ms, derived from
/// it). On return `clock` is the instant its timing ended, which the connection takes as the start of the next
/// command it runs at once: one clock read per command of a pipeline instead of two.
pub fn execute_client<'g>(
    clock: &mut Stamp,
    now: u64,
    shared: &'g Arc<Shared>,
    client: &mut ClientState,
    args: &[Bytes],
    guard: &mut Option<MutexGuard<'g, Store>>,
) -> (Value, Option<Box<Block>>) {
    execute_from(Caller::Client, clock, now, shared, client, args, guard)
}

/// [`execute`] for a command that started at `clock`: a client's and its scripts' commands are counted
/// ([`timed`], which moves `clock` to the end), replayed records are not.
fn execute_from<'g>(
    caller: Caller,
    clock: &mut Stamp,
    now: u64,
    shared: &'g Arc<Shared>,
    client: &mut ClientState,
    args: &[Bytes],
    guard: &mut Option<MutexGuard<'g, Store>>,
) -> (Value, Option<Box<Block>>) {
    match commands::resolve(args) {
        Ok(resolved) if caller != Caller::Replay => timed(caller, resolved, clock, now, shared, client, args, guard),
        Ok(resolved) => {
            let (reply, block, _) = execute_resolved(caller, resolved, now, shared, client, args, guard);
            (reply, block)
        }
        Err(e) => refuse(caller, client, e),
    }
}

/// Runs a client's command (or one its script calls) that started at `clock`, and counts it: calls, refusals,
/// failures and latency (INFO commandstats, the metrics endpoint; a blocked command's wait excluded), as Redis
/// counts them. `clock` is left at the instant the command ended.
#[allow(clippy::too_many_arguments)]
fn timed<'g>(
    caller: Caller,
    resolved: commands::Resolved,
    clock: &mut Stamp,
    now: u64,
    shared: &'g Arc<Shared>,
    client: &mut ClientState,
    args: &[Bytes],
    guard: &mut Option<MutexGuard<'g, Store>>,
) -> (Value, Option<Box<Block>>) {
    let spec = resolved.spec;
    let (reply, block, stage) = execute_resolved(caller, resolved, now, shared, client, args, guard);
    let ended = Stamp::now();
    let took = ended.since(*clock);
    *clock = ended;
    match stage {
        Stage::Ran if block.is_some() => {
            let shared = shared.clone();
            client.count_when_unblocked =
                Some(Box::new(move |failed| shared.metrics.record(spec, took, Outcome::Ran { failed })));
        }
        Stage::Ran => shared.metrics.record(spec, took, Outcome::Ran { failed: reply.is_error() }),
        Stage::Refused => shared.metrics.record(spec, took, Outcome::Rejected),
        // Counted when EXEC runs it.
        Stage::Queued => {}
    }
    if caller == Caller::Client {
        shared.metrics.slow.observe(spec, took, args, &client.info);
    }
    (reply, block)
}

/// A command refused before it ran. Inside a client's MULTI it also makes EXEC fail (Redis's EXECABORT).
fn refuse(caller: Caller, client: &mut ClientState, reply: Value) -> (Value, Option<Box<Block>>) {
    if caller == Caller::Client && client.multi.is_some() {
        client.multi_error = true;
    }
    (reply, None)
}

/// How far a command got: refused by a gate, queued inside MULTI, or run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Refused,
    Queued,
    Ran,
}

/// [`execute`] for a command already resolved from `args`, saying how far it got.
fn execute_resolved<'g>(
    caller: Caller,
    resolved: commands::Resolved,
    now: u64,
    shared: &'g Arc<Shared>,
    client: &mut ClientState,
    args: &[Bytes],
    guard: &mut Option<MutexGuard<'g, Store>>,
) -> (Value, Option<Box<Block>>, Stage) {
    if let Err(refusal) = gates(caller, &resolved, shared, client, args) {
        return (refusal, None, Stage::Refused);
    }
    let is_client = caller == Caller::Client;
    let spec = resolved.spec;
    if let Some(queue) = &mut client.multi {
        if !spec.has(flags::NO_QUEUE) {
            if spec.has(flags::NO_MULTI) {
                return (refuse(caller, client, Value::error(ERR_NOT_IN_MULTI)).0, None, Stage::Refused);
            }
            queue.push(args, resolved);
            return (Value::simple("QUEUED"), None, Stage::Queued);
        }
    }
    let mut ctx = Ctx::new(now, shared, client, args, spec, guard, !is_client, caller, execute);
    let reply = commands::call(&mut ctx);
    let block = if is_client { ctx.block.take() } else { None };
    (reply, block, Stage::Ran)
}

/// The gates a command passes before it runs or is queued; `Err` is the refusal (inside a client's MULTI, one that
/// makes EXEC fail is marked through [`refuse`]).
fn gates(caller: Caller, resolved: &commands::Resolved, shared: &Shared, client: &mut ClientState, args: &[Bytes]) -> Result<(), Value> {
    let spec = resolved.spec;
    let reject = |client: &mut ClientState, reply: Value| Err(refuse(caller, client, reply).0);
    if caller == Caller::Client {
        if spec.has(flags::INTERNAL) {
            // Write-log records replay state with explicit tokens; a client must never forge them.
            return Err(commands::unknown_command(args));
        }
        client.info.set_last_command(spec);
        if !client.authenticated && !spec.has(flags::NOAUTH) {
            return Err(Value::error(ERR_NOAUTH));
        }
        // Redis logs a denial inside MULTI (queued or run by EXEC) with the context `multi`.
        let context = if client.multi.is_some() || client.info.in_multi.load(Ordering::Relaxed) { "multi" } else { "toplevel" };
        if let Some(denied) = acl_denied(shared, client, resolved, args, context) {
            return reject(client, denied);
        }
        if client.proto == ruvio_protocol::Protocol::Resp2 && client.subscribed() && !spec.has(flags::SUBSCRIBED_OK) {
            return Err(subscribed_only(&resolved.full_name()));
        }
        if shared.loading.load(Ordering::Acquire) && !spec.has(flags::LOADING) {
            return Err(Value::error(ERR_LOADING));
        }
        // maxmemory with noeviction: commands that may grow memory are refused (queued in MULTI too, as Redis
        // does: EXEC then fails); reads, deletes and releases still run, so memory can come down.
        if spec.has(flags::DENYOOM) && shared.stats.over_maxmemory() {
            return reject(client, Value::error(ERR_OOM));
        }
        if spec.has(flags::WRITE) {
            if shared.replication.is_replica() {
                return reject(client, Value::error(ERR_READONLY));
            }
            if !shared.replication.enough_good_replicas() {
                return reject(client, Value::error(ERR_NOREPLICAS));
            }
            if client.durability_replicas > 0 && shared.replication.online_durable_replicas() < client.durability_replicas {
                // Answered before it runs rather than after the timeout: too few replicas could ever acknowledge it.
                // Inside MULTI this makes EXEC fail, as Redis's min-replicas-to-write does; EXEC checks again.
                return reject(client, Value::error(ERR_NOREPLICAS));
            }
            if let Some(reason) = shared.aof.write_error() {
                return reject(client, misconf(&reason));
            }
            if !crate::journal::format::command_record_fits(args) {
                // Refused before it runs: acknowledged, it could not be reloaded (a record has a 32-bit length).
                return reject(client, Value::error(ERR_RECORD_TOO_LARGE));
            }
        }
    }
    if caller == Caller::Script {
        if let Some(denied) = acl_denied(shared, client, resolved, args, "lua") {
            return Err(denied);
        }
    }
    if caller == Caller::Script && spec.has(flags::WRITE) && shared.replication.is_replica() {
        // A script on a replica may read, never write.
        return Err(Value::error(ERR_READONLY));
    }
    Ok(())
}

/// The ACL gate: whether the connection's user may run this command (or subcommand) on these keys and channels;
/// a denial is recorded in ACL LOG under `context` and answered with Redis's text for it. EXEC checks its queue
/// again when it runs (the user's rules may have changed since), through the same [`crate::acl::Perms::check`].
fn acl_denied(shared: &Shared, client: &mut ClientState, resolved: &commands::Resolved, args: &[Bytes], context: &'static str) -> Option<Value> {
    let user = client.user.as_ref()?;
    let denial = client.perms_cache.check(user, resolved, args).err()?;
    Some(shared.acl.deny(&denial, context, &user.name, client.info.describe()))
}

/// Applies write-log records as [`Caller::Replay`], each at the instant it was logged, so its relative times land
/// where they did then. One client state spans the records, so MULTI ... EXEC in the log is honoured. Used by the
/// start-up loader, and by a replica for its primary's stream.
pub struct Replayer {
    client: ClientState,
}

impl Default for Replayer {
    fn default() -> Self {
        Self::new()
    }
}

impl Replayer {
    pub fn new() -> Self {
        let info = Arc::new(ClientInfo::new(0, "log-replay".into(), String::new()));
        Replayer { client: ClientState::new(info, true) }
    }

    /// Runs one record against database `db` at `wall_ms` (the Unix ms it was logged at); returns its reply.
    pub fn apply<'g>(
        &mut self,
        shared: &'g Arc<Shared>,
        guard: &mut Option<MutexGuard<'g, Store>>,
        db: usize,
        args: &[Bytes],
        wall_ms: i64,
    ) -> Value {
        self.try_apply(shared, guard, db, args, wall_ms).unwrap_or_else(|e| e)
    }

    /// [`Replayer::apply`], telling apart a record this server cannot run at all (`Err`: an unknown command or a
    /// wrong arity, a damaged or foreign log) from a command's own reply (`Ok`, errors included).
    pub fn try_apply<'g>(
        &mut self,
        shared: &'g Arc<Shared>,
        guard: &mut Option<MutexGuard<'g, Store>>,
        db: usize,
        args: &[Bytes],
        wall_ms: i64,
    ) -> Result<Value, Value> {
        let resolved = commands::resolve(args)?;
        self.client.db = db;
        let now = crate::clock::wall_to_mono(wall_ms);
        Ok(execute_resolved(Caller::Replay, resolved, now, shared, &mut self.client, args, guard).0)
    }

    /// Drops a transaction the records opened but never ended (a log cut inside MULTI ... EXEC); true if there
    /// was one.
    pub fn abandon_transaction(&mut self) -> bool {
        self.client.multi.take().is_some()
    }
}

/// The start-up loader's way into the execution path: runs the log's records as [`Caller::Replay`] under the
/// store lock, let go every [`LoadReplay::RECORDS_PER_LOCK`] records so INFO and friends can run while loading.
pub struct LoadReplay<'s> {
    shared: &'s Arc<Shared>,
    replayer: Replayer,
    guard: Option<MutexGuard<'s, Store>>,
    since_lock: u64,
}

impl<'s> LoadReplay<'s> {
    const RECORDS_PER_LOCK: u64 = 4096;

    pub fn new(shared: &'s Arc<Shared>) -> Self {
        LoadReplay { shared, replayer: Replayer::new(), guard: None, since_lock: 0 }
    }
}

impl crate::persistence::loader::Replay for LoadReplay<'_> {
    fn apply(&mut self, db: usize, args: &[Bytes], wall_ms: i64) -> Result<Option<String>, String> {
        let shared = self.shared;
        let store = self.guard.get_or_insert_with(|| shared.store.lock());
        if db >= store.dbs.len() {
            return Err(format!("database {db} does not exist"));
        }
        let text = |v: Value| String::from_utf8_lossy(v.as_bytes().unwrap_or(b"error")).into_owned();
        let reply = self.replayer.try_apply(shared, &mut self.guard, db, args, wall_ms).map_err(text)?;
        if let Some(store) = self.guard.as_mut() {
            // These effects are already in the log being read.
            store.log.clear();
        }
        self.since_lock += 1;
        if self.since_lock == Self::RECORDS_PER_LOCK {
            self.since_lock = 0;
            self.guard = None;
        }
        Ok(reply.is_error().then(|| text(reply)))
    }

    fn abandon_transaction(&mut self) -> bool {
        self.replayer.abandon_transaction()
    }

    fn finish(&mut self) {
        self.guard = None;
    }
}
