//! What a command handler works with: its arguments, its client, the shared server and (taken on first use) the
//! store lock.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::MutexGuard;
use ruvio_protocol::Value;

use crate::client::ClientState;
use crate::commands::CommandSpec;
use crate::keyspace::Db;
use crate::shared::Shared;
use crate::store::Store;

/// A handler that has to wait (LEASE ... WAIT) returns a placeholder reply and sets [`Ctx::block`]; the connection
/// then waits for `rx` (or the timeout) without holding any lock.
pub struct Block {
    pub rx: tokio::sync::oneshot::Receiver<Value>,
    pub timeout: Option<Duration>,
    /// Runs under the store lock when the wait ends without a value (timeout or shutdown): withdraws the waiter.
    pub cancel: Box<dyn FnOnce(&mut Store) + Send>,
    /// Runs under the store lock when a value arrived but the client is gone (it disconnected or was killed while
    /// waiting), with that value: gives back what was granted to nobody.
    pub abandon: Option<Box<dyn FnOnce(&mut Store, Value) + Send>>,
    /// The reply when the wait times out.
    pub timeout_reply: Value,
}

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
    pub block: Option<Block>,
    pub propagate: Propagate,
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
    ) -> Self {
        Ctx { shared, client, args, spec, guard, now, in_exec, block: None, propagate: Propagate::AsIs }
    }

    /// The store, locked for the rest of this command (and the commands batched with it).
    pub fn store(&mut self) -> &mut Store {
        if self.guard.is_none() {
            let shared: &'g Arc<Shared> = self.shared;
            *self.guard = Some(shared.store.lock());
        }
        self.guard.as_mut().expect("store locked above")
    }

    /// The client's selected database.
    pub fn db(&mut self) -> &mut Db {
        let idx = self.client.db;
        &mut self.store().dbs[idx]
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
        Ctx::new(self.now, self.shared, self.client, args, spec, self.guard, true)
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
