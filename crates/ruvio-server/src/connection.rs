//! One client connection: read, parse, run, reply.
//!
//! Replies to everything that arrived in one read are encoded into one buffer and leave in one write. Consecutive
//! commands of a batch share one acquisition of the store lock. The read side stops while replies are being
//! written, so a client that does not read its replies cannot make the server buffer without bound.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use parking_lot::MutexGuard;
use ruvio_protocol::{encode, ProtocolError, RequestLimits, RequestParser, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use ruvio_tls::Stream;

use crate::client::{ClientInfo, ClientState};
use crate::commands;
use crate::blocking::Block;
use crate::shared::{Shared, Stats};
use crate::store::Store;

/// How much each read asks the socket for at least (Redis's PROTO_IOBUF_LEN).
const READ_CHUNK: usize = 16 * 1024;

/// Before AUTH (when a password is set) at most this much may be buffered; the argument limits are the parser's
/// `UNAUTHENTICATED_*`.
const UNAUTH_QUERY_BUFFER: usize = 1024 * 1024;
/// Commands run under one store-lock acquisition before the lock is released for others.
const BATCH_UNDER_LOCK: usize = 128;
/// Argument slots a connection keeps between reads while busy (128 KB of handles: a load of 1000-element RPUSHes
/// reuses one vector instead of freeing one per read); larger vectors are given back at once.
const BATCH_KEEP_ARGS: usize = 4096;
/// Argument slots a connection keeps once idle (nothing buffered, no request in progress): 2 KB of handles.
const BATCH_IDLE_ARGS: usize = 64;
/// Replies buffered before they are written out even though more commands are waiting.
const FLUSH_AT: usize = 64 * 1024;

pub struct Connection {
    shared: Arc<Shared>,
    /// Plain TCP or TLS (`tls-port`).
    stream: Stream,
    inbuf: BytesMut,
    outbuf: BytesMut,
    parser: RequestParser,
    state: ClientState,
    /// The LSN that must be on disk before the buffered replies may leave: fsynced under `appendfsync always`,
    /// written to the log file under `everysec` and `no` (`Aof::durability_target`).
    durable_before_reply: Option<u64>,
    /// The command whose reply is being waited for (a blocked LEASE), so a durable connection can wait for its grant.
    blocked_args: Option<Vec<Bytes>>,
    /// The parsed commands of the input being run; kept between reads so its vectors are allocated once.
    batch: Batch,
    /// When the last command of the current run under the store lock ended (see `run_command`).
    batch_clock: Option<crate::clock::Stamp>,
    /// Commands of the current run, added to INFO's total_commands_processed when it ends.
    commands_run: u64,
    /// The last load window of its worker this connection was counted in (`workers::note_connection_ran`).
    counted_in_window: u64,
}

/// Parsed commands waiting to run, in order: their arguments back to back in one vector (no vector per command),
/// and where each command's arguments end.
#[derive(Default)]
struct Batch {
    args: Vec<Bytes>,
    ends: Vec<usize>,
    /// The next command to run (an index into `ends`).
    next: usize,
}

impl Batch {
    fn len(&self) -> usize {
        self.ends.len() - self.next
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The arguments of command `i` (an index into `ends`).
    fn command(&self, i: usize) -> &[Bytes] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.args[start..self.ends[i]]
    }

    /// The commands not run yet.
    fn pending(&self) -> impl Iterator<Item = &[Bytes]> {
        (self.next..self.ends.len()).map(|i| self.command(i))
    }

    /// Drops every command (their arguments release the input buffer's memory), keeping the vectors unless a
    /// burst of long commands grew them past [`BATCH_KEEP_ARGS`] (a million-argument RPUSH's vector).
    fn clear(&mut self) {
        self.args.clear();
        self.ends.clear();
        self.next = 0;
        if self.args.capacity() > BATCH_KEEP_ARGS {
            self.args = Vec::new();
        }
        if self.ends.capacity() > BATCH_KEEP_ARGS {
            self.ends = Vec::new();
        }
    }
}

enum Step {
    Continue,
    Close,
}

/// Lets every connection already queued on this I/O worker run its turn before this one writes its replies: the
/// connections that one poll of the socket found ready then read and run first and write one after another (as
/// Redis's event loop reads every ready client and writes in `beforeSleep`). Writing at once instead wakes a waiting
/// client for every reply; back to back, one wake-up serves several (measured in docs/benchmarks.md, "Replies at
/// the end of the worker's turn"). Unlike `tokio::task::yield_now`, which waits for the next poll of the sockets
/// (a system call per turn for a lone client), this requeues the task behind the ones already queued, so a lone
/// client's reply goes out at once.
async fn behind_ready_connections() {
    let mut queued = false;
    std::future::poll_fn(|cx| {
        if queued {
            return std::task::Poll::Ready(());
        }
        queued = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

impl Connection {
    pub fn new(shared: Arc<Shared>, stream: Stream, info: Arc<ClientInfo>) -> Self {
        let user = shared.acl.autologin();
        let mut state = ClientState::new(info, false);
        if let Some(u) = user {
            state.login(u);
        }
        Connection {
            shared,
            stream,
            // Allocated on first use: a connection that only sits there costs no buffers (Redis's idle client is
            // about 2 KB; ours was 11 KB with both buffers allocated up front).
            inbuf: BytesMut::new(),
            outbuf: BytesMut::new(),
            parser: RequestParser::new(),
            state,
            durable_before_reply: None,
            blocked_args: None,
            batch: Batch::default(),
            batch_clock: None,
            commands_run: 0,
            counted_in_window: 0,
        }
    }

    /// Serves the client until it leaves, is killed, or the server shuts down; then cleans up after it.
    pub async fn run(mut self) {
        if let Err(e) = self.serve().await {
            tracing::debug!(client = self.state.id(), "connection ended: {e}");
        }
        // A client that left while its EXEC ran scripts: its state (subscriptions, WATCHes) comes back to be
        // cleaned up.
        self.take_back_state().await;
        if let Some(req) = self.state.handover.take() {
            // PSYNC: this connection is a replica's link from now on.
            self.cleanup();
            crate::replication::primary::serve(self.shared.clone(), self.stream, req).await;
            return;
        }
        // Last replies (QUIT's OK, a protocol error) go out, but a client that does not read cannot hold the task.
        if !self.state.info.is_killed() {
            let _ = tokio::time::timeout(Duration::from_secs(5), self.flush()).await;
        }
        self.cleanup();
    }

    async fn serve(&mut self) -> std::io::Result<()> {
        let shutdown = self.shared.shutdown.subscribe();
        let info = self.state.info.clone();
        // The outbox's waiter is registered at the first wait and kept across waits until it fires: registering
        // and removing one per request batch took the Notify's lock twice per batch (polling a registered one
        // still takes it once). While it is registered a message, a kill or shutdown wakes it (notify_one) even if
        // it comes while a batch runs.
        let mut outbox_waiter = std::pin::pin!(info.outbox.notify.notified());
        loop {
            if let Step::Close = self.process_input().await? {
                return Ok(());
            }
            self.drain_outbox();
            if !self.outbuf.is_empty() {
                behind_ready_connections().await;
            }
            self.flush().await?;
            if info.is_killed() {
                return Ok(());
            }
            if *shutdown.borrow() {
                return self.finish_sent_requests().await;
            }
            let idle = {
                let t = self.shared.config.read().timeout;
                (t > 0 && !self.state.subscribed() && !info.monitor.load(Ordering::Relaxed)).then(|| Duration::from_secs(t))
            };
            if self.inbuf.capacity() - self.inbuf.len() < READ_CHUNK / 4 {
                self.inbuf.reserve(READ_CHUNK);
            }
            // Read first: when input is already there the other branches are never polled. A kill and shutdown
            // wake the outbox's Notify too: one waiter, not three. Nothing can starve: the loop checks for a kill,
            // the outbox and shutdown every time round. The idle timer exists only with `timeout` set (a timer
            // made and dropped per batch cost a clock read each time).
            let mut outbox_woke = false;
            tokio::select! {
                biased;
                read = self.stream.read_buf(&mut self.inbuf) => {
                    let n = read?;
                    if n == 0 {
                        return Ok(());
                    }
                    Stats::add(&self.shared.stats.net_input_bytes, n as u64);
                }
                _ = outbox_waiter.as_mut() => outbox_woke = true,
                _ = async {
                    match idle {
                        Some(limit) => tokio::time::sleep(limit).await,
                        None => std::future::pending().await,
                    }
                } => {
                    tracing::debug!(client = self.state.id(), "closing idle client");
                    return Ok(());
                }
            }
            if outbox_woke {
                // A finished `Notified` stays finished: wait on a fresh one from now on.
                outbox_waiter.set(info.outbox.notify.notified());
            }
        }
    }

    /// At shutdown: requests the client had already sent (in the socket's buffer now) still get their replies;
    /// bounded, so a client that keeps sending cannot hold the shutdown.
    async fn finish_sent_requests(&mut self) -> std::io::Result<()> {
        for _ in 0..64 {
            self.inbuf.reserve(READ_CHUNK);
            match self.stream.try_read_buf(&mut self.inbuf).await {
                Ok(n) if n > 0 => Stats::add(&self.shared.stats.net_input_bytes, n as u64),
                _ => return Ok(()),
            }
            if let Step::Close = self.process_input().await? {
                return Ok(());
            }
            self.flush().await?;
        }
        Ok(())
    }

    fn limits(&self) -> (RequestLimits, usize) {
        let c = self.shared.config.read();
        let unauthenticated = !self.state.authenticated;
        let limits = RequestLimits { max_bulk_len: c.proto_max_bulk_len as usize, max_args: i32::MAX as usize, unauthenticated };
        (limits, if unauthenticated { UNAUTH_QUERY_BUFFER } else { c.client_query_buffer_limit as usize })
    }

    /// Parses and runs every complete request in the input buffer.
    async fn process_input(&mut self) -> std::io::Result<Step> {
        loop {
            let mut batch = std::mem::take(&mut self.batch);
            let mut failure: Option<ProtocolError> = None;
            // Limits depend on authentication, which a command in the batch may change: parse after AUTH
            // separately by stopping the batch at the first command while unauthenticated.
            let (limits, query_limit) = self.limits();
            loop {
                match self.parser.parse_into(&mut self.inbuf, &limits, &mut batch.args) {
                    Ok(Some(_)) => {
                        batch.ends.push(batch.args.len());
                        if !self.state.authenticated || batch.len() >= 1024 {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            let got_any = !batch.is_empty();
            let step = self.run_batch(&mut batch).await;
            batch.clear();
            self.batch = batch;
            if let Step::Close = step? {
                return Ok(Step::Close);
            }
            if let Some(e) = failure {
                self.push_reply(&crate::errors::err_because(&e.to_string()));
                return Ok(Step::Close);
            }
            if self.parser.pending_bytes(&self.inbuf) > query_limit {
                tracing::warn!(client = self.state.id(), "closing client that exceeded its query buffer limit");
                return Ok(Step::Close);
            }
            // Everything read was taken (the usual end of a batch): another round would only find that out again.
            if !got_any || self.inbuf.is_empty() {
                if self.inbuf.is_empty() && !self.parser.in_request() {
                    // Between requests with nothing buffered: an idle connection keeps no large argument vector.
                    self.parser.release_spare();
                    if self.batch.args.capacity() > BATCH_IDLE_ARGS {
                        self.batch = Batch::default();
                    }
                }
                return Ok(Step::Continue);
            }
        }
    }

    async fn run_batch(&mut self, batch: &mut Batch) -> std::io::Result<Step> {
        while !batch.is_empty() {
            let (step, block) = self.run_some(batch);
            if let Some(block) = block {
                // Taken before the wait: an EXEC that went to the script thread leaves a stand-in state meanwhile.
                let counted = self.state.count_when_unblocked.take();
                self.flush().await?;
                let reply = self.wait_for(block).await;
                // An EXEC that ran scripts took the connection's state to its thread: take it back before anything
                // reads it (the durable wait below, the next command, the clean-up when the client left).
                self.take_back_state().await;
                let reply = match reply {
                    Some(reply) => reply,
                    None => return Ok(Step::Close),
                };
                if let Some(count) = counted {
                    count(reply.is_error());
                }
                // A grant that waited is as durable as any other write on a durable connection.
                let args = self.blocked_args.take().unwrap_or_default();
                if let (Some((db, key)), Value::Integer(token)) = (self.state.lock_wait.take(), &reply) {
                    self.state.note_durable_grant(db, key, *token);
                }
                let shared = self.shared.clone();
                let durable = (!args.is_empty()).then(|| self.durable_wait(&shared, &mut None, &args, Some(&reply))).flatten();
                let reply = match durable {
                    Some(wait) => {
                        self.flush().await?;
                        match self.wait_for(wait).await {
                            Some(reply) => reply,
                            None => return Ok(Step::Close),
                        }
                    }
                    None => reply,
                };
                // Whoever granted the wait logged the grant; it must be as durable as any other reply.
                let lsn = self.shared.commit_log(&mut self.shared.store.lock());
                self.need_durable(self.shared.aof.durability_target(&self.shared, lsn, true));
                if self.state.take_reply_permission() {
                    for extra in std::mem::take(&mut self.state.extra_replies) {
                        self.push_reply(&extra);
                    }
                    self.push_reply(&reply);
                }
            }
            if let Step::Close = step {
                return Ok(Step::Close);
            }
            if self.outbuf.len() >= FLUSH_AT {
                self.flush().await?;
            }
        }
        Ok(Step::Continue)
    }

    /// Runs commands from the front of `batch` under one lock acquisition until the batch is done, a command
    /// blocks, the connection must close, or enough ran for the lock to be released for others.
    fn run_some(&mut self, batch: &mut Batch) -> (Step, Option<Box<Block>>) {
        crate::workers::note_connection_ran(&mut self.counted_in_window, batch.len());
        // The first command reads the clock afresh: time has passed since the last run (I/O, a wait).
        self.batch_clock = None;
        let shared = self.shared.clone();
        let mut guard: Option<MutexGuard<'_, Store>> = None;
        let outcome = self.run_some_locked(&shared, batch, &mut guard);
        Stats::add(&shared.stats.commands_processed, std::mem::take(&mut self.commands_run));
        // Still under the lock: the batch's writes enter the log in execution order.
        if let Some(store) = guard.as_mut() {
            let wrote = !store.log.is_empty();
            let lsn = shared.commit_log(store);
            self.need_durable(shared.aof.durability_target(&shared, lsn, wrote));
        }
        outcome
    }

    fn need_durable(&mut self, target: Option<u64>) {
        if let Some(t) = target {
            self.durable_before_reply = Some(self.durable_before_reply.map_or(t, |d| d.max(t)));
        }
    }

    fn run_some_locked<'g>(
        &mut self,
        shared: &'g Arc<Shared>,
        batch: &mut Batch,
        guard: &mut Option<MutexGuard<'g, Store>>,
    ) -> (Step, Option<Box<Block>>) {
        let mut ran = 0;
        if batch.len() > 1 && !shared.loading.load(Ordering::Acquire) && !shared.scripts.run.running.load(Ordering::Acquire) {
            // Most commands name their key first: start fetching every key of the batch before running any.
            // (Not while loading: commands allowed then need no keys, and the loader holds the store in turns.)
            let store = guard.get_or_insert_with(|| shared.store.lock());
            // A long first argument is rarely a key (ECHO, PUBLISH's message); hashing it would be wasted work.
            // (A pipeline on one key names it again and again: `prefetch` hashes it once.)
            let keys = batch.pending().take(BATCH_UNDER_LOCK).filter_map(|args| args.get(1)).filter(|k| k.len() <= 512);
            store.dbs[self.state.db].prefetch(keys.map(|k| &k[..]));
            // Hash, set and sorted-set commands (H..., S..., Z...) name a field or member next (ZADD and ZINCRBY
            // after a score): fetch those in a large value the same way. Only a hint: a key holding something else
            // (SET's string) is skipped, and a guess that is not a member (ZADD with options) costs a lookup.
            let members = batch.pending().take(BATCH_UNDER_LOCK).filter_map(|a| {
                let member = match a[0].first().map(|c| c | 0x20) {
                    Some(b'h' | b's') => 2,
                    Some(b'z') if commands::eq_ic(&a[0], "zadd") || commands::eq_ic(&a[0], "zincrby") => 3,
                    Some(b'z') => 2,
                    _ => return None,
                };
                Some((&a.get(1)?[..], &a.get(member)?[..]))
            });
            store.dbs[self.state.db].prefetch_members(members);
        }
        while !batch.is_empty() {
            batch.next += 1;
            let args = batch.command(batch.next - 1);
            ran += 1;
            let (reply, block) = self.run_command(shared, args, guard);
            if let Some(block) = block {
                self.blocked_args = Some(args.to_vec());
                return (Step::Continue, Some(block));
            }
            if let Some(wait) = self.durable_wait(shared, guard, args, reply.as_ref()) {
                return (Step::Continue, Some(wait));
            }
            let send = self.state.take_reply_permission();
            for extra in std::mem::take(&mut self.state.extra_replies) {
                if send {
                    self.push_reply(&extra);
                }
            }
            match reply {
                Some(_) if self.state.close_without_reply => return (Step::Close, None),
                Some(v) if send => self.push_reply(&v),
                Some(_) => {}
                None => {
                    // Like Redis, an attack closes the connection without answering anything of this batch.
                    self.outbuf.clear();
                    return (Step::Close, None);
                }
            }
            if self.state.close_after_reply {
                return (Step::Close, None);
            }
            if ran >= BATCH_UNDER_LOCK || self.outbuf.len() >= FLUSH_AT {
                break;
            }
        }
        (Step::Continue, None)
    }

    /// On a durable connection (CLIENT DURABILITY REPLICAS n), a command that logged something (a write, an EXEC, a
    /// script: `commands::call` notes it, from the script's thread too) is answered only once it is fsynced here and
    /// on n replicas: the wait for that, with the reply it will give and the grants to undo if it does not come.
    fn durable_wait<'g>(&self, shared: &'g Arc<Shared>, guard: &mut Option<MutexGuard<'g, Store>>, args: &[Bytes], reply: Option<&Value>) -> Option<Box<Block>> {
        let n = self.state.durability_replicas;
        let reply = reply?;
        // Cheap checks first: this runs after every command of every connection.
        if n == 0 || self.state.multi.is_some() {
            return None;
        }
        let pending = std::mem::take(&mut *self.state.info.durable.lock());
        // An error reply acknowledges nothing (a script that wrote and then failed keeps its writes, as in Redis).
        if !pending.wrote || reply.is_error() {
            return None;
        }
        let store = guard.get_or_insert_with(|| shared.store.lock());
        // Everything logged up to now: a script may have run on another thread, its records staged since.
        let lsn = shared.commit_log(store);
        let single = commands::resolve(args).is_ok_and(|r| r.spec.has(commands::flags::WRITE));
        Some(Box::new(crate::replication::durable::wait(shared, lsn, n, pending.grants, reply.clone(), single)))
    }

    /// Runs one command. `None` means: close the connection without a reply.
    fn run_command<'g>(
        &mut self,
        shared: &'g Arc<Shared>,
        args: &[Bytes],
        guard: &mut Option<MutexGuard<'g, Store>>,
    ) -> (Option<Value>, Option<Box<Block>>) {
        self.commands_run += 1;
        let info = &self.state.info;
        info.reply_error_counted.store(false, Ordering::Relaxed);
        // Cross-protocol scripting guard: an HTTP request sent to this port is an attack, not a client.
        if commands::eq_ic(&args[0], "post") || commands::eq_ic(&args[0], "host:") {
            tracing::warn!(client = self.state.id(), "possible SECURITY ATTACK detected: HTTP request on the Redis port");
            return (None, None);
        }
        // While a script runs, wait for it without parking on the store lock, and answer -BUSY once it is long.
        if let Some(busy) = crate::scripting::host::busy_gate(shared, args, guard.is_some()) {
            return (Some(self.refused_busy(args, busy)), None);
        }
        // One clock read gives both the command's time (ms) and the start of its duration (commandstats, SLOWLOG),
        // after the gate above, whose wait for a script belongs to neither. Under the store lock, the command
        // before in this batch has just ended: its end is this one's start, no second read (nothing could wait in
        // between: the gate does not wait while the lock is held).
        let mut clock = match self.batch_clock.take() {
            Some(ended) if guard.is_some() => ended,
            _ => crate::clock::Stamp::now(),
        };
        let now = crate::clock::mono_ms_at(clock);
        self.state.info.last_active.store(now, Ordering::Relaxed);
        let (reply, block) = crate::dispatch::execute_client(&mut clock, now, shared, &mut self.state, args, guard);
        self.batch_clock = Some(clock);
        (Some(reply), block)
    }

    /// Waits for the state an EXEC took to its script thread (`ClientState::away`); it is sent before the EXEC's
    /// reply, and the thread always finishes (a kill, SHUTDOWN NOSAVE or SIGTERM stops its script).
    async fn take_back_state(&mut self) {
        if let Some(back) = self.state.away.take() {
            if let Ok(state) = back.await {
                self.state = state;
            }
        }
    }

    /// A command refused with `-BUSY` inside MULTI makes the transaction fail, as any command refused before it
    /// runs does (Redis's `rejectCommand`); EXEC itself ends the transaction with `EXECABORT Transaction discarded
    /// because of: BUSY ...`. Neither waits for the store lock the script holds.
    fn refused_busy(&mut self, args: &[Bytes], busy: Value) -> Value {
        if self.state.multi.is_none() {
            return busy;
        }
        if !commands::eq_ic(&args[0], "exec") {
            self.state.multi_error = true;
            return busy;
        }
        self.state.multi = None;
        self.state.multi_error = false;
        self.state.info.in_multi.store(false, Ordering::Relaxed);
        commands::transaction_family::forget_watches(&mut self.state);
        match busy {
            Value::Error(text) => Value::error(format!("EXECABORT Transaction discarded because of: {}", String::from_utf8_lossy(&text))),
            other => other,
        }
    }

    /// Waits for a blocked command's outcome without holding any lock. `None`: the client left (or was killed)
    /// while waiting; it is withdrawn and anything granted to it in that instant is given back.
    async fn wait_for(&mut self, block: Box<Block>) -> Option<Value> {
        let Block { mut rx, timeout, cancel, abandon, timeout_reply } = *block;
        self.state.info.blocked.store(true, Ordering::Relaxed);
        let mut shutdown = self.shared.shutdown.subscribe();
        let info = self.state.info.clone();
        let (_, query_limit) = self.limits();
        let (stream, inbuf, stats) = (&mut self.stream, &mut self.inbuf, &self.shared.stats);
        // Watch the socket while waiting so a client that goes away is noticed at once (and never granted);
        // commands it pipelined behind the blocking one stay in the buffer, bounded by the query buffer limit.
        let gone = async move {
            loop {
                if inbuf.len() >= query_limit {
                    std::future::pending::<()>().await;
                }
                match stream.read_buf(inbuf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => Stats::add(&stats.net_input_bytes, n as u64),
                }
            }
        };
        enum Outcome {
            Value(Value),
            Ended,
            Gone,
        }
        let outcome = tokio::select! {
            v = &mut rx => v.map_or(Outcome::Ended, Outcome::Value),
            _ = info.unblock_notify.notified() => Outcome::Ended,
            _ = async { match timeout { Some(t) => tokio::time::sleep(t).await, None => std::future::pending().await } } => Outcome::Ended,
            _ = shutdown.wait_for(|s| *s) => Outcome::Ended,
            _ = gone => Outcome::Gone,
            _ = info.kill_notify.notified() => Outcome::Gone,
        };
        self.state.info.blocked.store(false, Ordering::Relaxed);
        self.state.info.unblockable.store(false, Ordering::Relaxed);
        // CLIENT UNBLOCK's reply replaces the timeout reply (a value that arrived first still wins).
        let timeout_reply = self.state.info.unblock_with.lock().take().unwrap_or(timeout_reply);
        // A wait with no deadline and nothing to give back (EVAL running on the script thread, SAVE) has nothing
        // to withdraw under the store lock; not taking it keeps this I/O thread free while a long script runs.
        if abandon.is_none() && timeout.is_none() && !matches!(outcome, Outcome::Value(_)) {
            rx.close();
            return match outcome {
                Outcome::Gone => None,
                _ => Some(rx.try_recv().unwrap_or(timeout_reply)),
            };
        }
        match outcome {
            Outcome::Value(v) => Some(v),
            Outcome::Ended => {
                // Withdraw under the lock; a grant that raced the timeout is already in the channel and wins.
                cancel(&mut self.shared.store.lock());
                Some(rx.try_recv().unwrap_or(timeout_reply))
            }
            Outcome::Gone => {
                let mut store = self.shared.store.lock();
                // Closed under the store lock: from here on no grant can reach this client.
                rx.close();
                cancel(&mut store);
                if let (Ok(v), Some(abandon)) = (rx.try_recv(), abandon) {
                    abandon(&mut store, v);
                }
                None
            }
        }
    }

    fn push_reply(&mut self, v: &Value) {
        if let Value::Error(text) = v {
            if !self.state.info.reply_error_counted.swap(false, Ordering::AcqRel) {
                self.shared.stats.count_error(text);
            }
        }
        encode(v, self.state.proto, &mut self.outbuf);
    }

    /// Moves pub/sub messages waiting for this client into the output buffer.
    fn drain_outbox(&mut self) {
        for msg in self.state.info.outbox.drain() {
            self.outbuf.extend_from_slice(&msg);
        }
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        if let Some(lsn) = self.durable_before_reply.take() {
            self.shared.aof.wait_before_reply(&self.shared, lsn).await;
        }
        if self.outbuf.is_empty() {
            return Ok(());
        }
        Stats::add(&self.shared.stats.net_output_bytes, self.outbuf.len() as u64);
        // A client that stops reading blocks this write; meanwhile pub/sub messages pile up in its outbox until the
        // output limit kills it, and the kill must win over the stuck write.
        let (stream, outbuf, info) = (&mut self.stream, &self.outbuf, &self.state.info);
        tokio::select! {
            // The write first: it usually completes at once, and then the kill's waiter is never registered.
            biased;
            // TLS keeps what the socket could not take yet in its own buffer until flushed (a no-op for TCP).
            r = async { stream.write_all(outbuf).await?; stream.flush().await } => r?,
            _ = info.kill_notify.notified(), if !info.is_killed() => {
                return Err(std::io::Error::other("client killed while its output was blocked"));
            }
        }
        if info.is_killed() {
            return Err(std::io::Error::other("client killed"));
        }
        self.outbuf.clear();
        if self.outbuf.capacity() > 1024 * 1024 {
            self.outbuf = BytesMut::new();
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        let id = self.state.id();
        commands::transaction_family::unwatch_all(&self.shared, &mut self.state);
        commands::pubsub_family::unsubscribe_all(&self.shared, &mut self.state);
        self.shared.monitors.remove(&self.state.info);
        self.shared.clients.lock().remove(&id);
    }
}
