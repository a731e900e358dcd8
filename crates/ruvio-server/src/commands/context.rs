//! What a command handler works with: its arguments, its client, the shared server, (taken on first use) the
//! store lock, and the execution path to run further commands through (EXEC, a script's `redis.call`).

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::MutexGuard;
use ruvio_protocol::Value;

use super::CommandSpec;
use crate::blocking::Block;
use crate::client::ClientState;
use crate::keyspace::Db;
use crate::shared::Shared;
use crate::store::Store;

/// Who runs a command, which decides the gates it passes (dispatch.rs decides them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// An application's connection: every gate applies, internal records are refused, commands may block.
    Client,
    /// A write-log record being applied (the loader at start-up, a replica applying its primary's stream, the
    /// server undoing a grant it could not make durable): it was accepted once already, so client gates do not
    /// apply; internal records (LOCKSET, ...) run; nothing blocks.
    Replay,
    /// A command a script runs (`redis.call`): the EVAL passed the client gates already; the script's own rules
    /// (no scripting/transaction/subscribe commands, read-only scripts) are checked first (`script_host`); nothing
    /// blocks (LEASE ... WAIT answers at once, as inside EXEC).
    Script,
}

/// The execution path (`execute` in dispatch.rs), handed to every handler in its [`Ctx`] so that commands which
/// run other commands (a script's `redis.call`) pass the same gates without the command layer calling up into
/// dispatch. Returns the reply and, when the command must wait, the [`Block`] to wait on.
pub type Execute = for<'g> fn(
    Caller,
    u64,
    &'g Arc<Shared>,
    &mut ClientState,
    &[Bytes],
    &mut Option<MutexGuard<'g, Store>>,
) -> (Value, Option<Box<Block>>);

/// How a write command reaches the write log.
pub enum Propagate {
    /// As received, if it changed anything.
    AsIs,
    /// As these commands instead (relative times made absolute, tokens made explicit).
    As(Vec<Vec<Bytes>>),
    /// Not at all (nothing changed).
    Nothing,
}

pub struct Ctx<'a, 'g> {
    pub shared: &'g Arc<Shared>,
    pub client: &'a mut ClientState,
    pub args: &'a [Bytes],
    pub spec: &'static CommandSpec,
    guard: &'a mut Option<MutexGuard<'g, Store>>,
    /// Monotonic ms when the command started; every deadline the command computes uses it.
    pub now: u64,
    /// True while EXEC runs queued commands: nothing may block.
    pub in_exec: bool,
    /// Who runs this command (a command EXEC runs has its EXEC's caller): a script sees fencing tokens as strings.
    pub caller: Caller,
    /// Set by [`Ctx::set_block`]. Boxed: every command's reply travels back through several calls next to this,
    /// and a `Block` in place made that a copy of some 150 bytes per call for the rare command that waits.
    pub block: Option<Box<Block>>,
    pub propagate: Propagate,
    /// The execution path this command came through, for the commands it runs in turn.
    pub execute: Execute,
    /// Arguments MONITOR shows as `(redacted)` (passwords), marked by the handler as Redis's
    /// `redactClientCommandArgument` does.
    pub redacted: Vec<usize>,
}

impl<'a, 'g> Ctx<'a, 'g> {
    /// A command about to run at `now` (monotonic ms, read by the caller once for everything it does at that
    /// moment).
    pub fn new(
        now: u64,
        shared: &'g Arc<Shared>,
        client: &'a mut ClientState,
        args: &'a [Bytes],
        spec: &'static CommandSpec,
        guard: &'a mut Option<MutexGuard<'g, Store>>,
        in_exec: bool,
        caller: Caller,
        execute: Execute,
    ) -> Self {
        Ctx { shared, client, args, spec, guard, now, in_exec, caller, block: None, propagate: Propagate::AsIs, execute, redacted: Vec::new() }
    }

    /// The command waits: its connection waits for `block` (without any lock) and answers what arrives.
    pub fn set_block(&mut self, block: Block) {
        self.block = Some(Box::new(block));
    }

    /// The store, locked for the rest of this command (and the commands batched with it).
    pub fn store(&mut self) -> &mut Store {
        let shared: &'g Arc<Shared> = self.shared;
        shared.store_in(self.guard)
    }

    /// The client's selected database.
    pub fn db(&mut self) -> &mut Db {
        let idx = self.client.db;
        &mut self.store().dbs[idx]
    }

    /// MONITOR shows argument `i` as `(redacted)`.
    pub fn redact(&mut self, i: usize) {
        if i < self.args.len() {
            self.redacted.push(i);
        }
    }

    /// Logs this write as `args` instead of the command as received.
    pub fn propagate_as(&mut self, args: Vec<Bytes>) {
        match &mut self.propagate {
            Propagate::As(v) => v.push(args),
            _ => self.propagate = Propagate::As(vec![args]),
        }
    }

    /// This write changed nothing: log nothing.
    pub fn propagate_nothing(&mut self) {
        self.propagate = Propagate::Nothing;
    }

    pub fn is_locked(&self) -> bool {
        self.guard.is_some()
    }

    /// A context for running another command with the same client and lock (EXEC runs its queue this way).
    pub fn nested<'b>(&'b mut self, args: &'b [Bytes], spec: &'static CommandSpec) -> Ctx<'b, 'g> {
        Ctx::new(self.now, self.shared, self.client, args, spec, self.guard, true, self.caller, self.execute)
    }

    /// The shared state, the client and the store-lock slot, for running commands on this context's behalf (a
    /// script run inside EXEC).
    pub fn parts(&mut self) -> (&'g Arc<Shared>, &mut ClientState, &mut Option<MutexGuard<'g, Store>>) {
        (self.shared, &mut *self.client, &mut *self.guard)
    }

    /// Releases the store lock (before waiting on something).
    pub fn unlock(&mut self) {
        *self.guard = None;
    }
}
