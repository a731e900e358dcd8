//! Per-connection state: what the connection task owns ([`ClientState`]) and what other tasks may look at or poke
//! ([`ClientInfo`]: CLIENT LIST/KILL, pub/sub delivery).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use ruvio_protocol::Protocol;
use tokio::sync::Notify;

use crate::commands::{CommandSpec, Resolved};
use crate::config::OutputLimit;
use crate::keyspace::{CompactBytes, WatchFlag};

/// The commands queued since MULTI, in order: their arguments back to back in one vector, as a connection's batch
/// keeps them (a vector per queued command was an allocation per command of every transaction), and the command each
/// resolved to when it was queued, so EXEC does not look the names up again (the command table does not change while
/// the server runs).
#[derive(Default)]
pub struct Queued {
    args: Vec<Bytes>,
    /// Per command: where its arguments end in `args`, and what it resolved to.
    commands: Vec<(usize, Resolved)>,
}

impl Queued {
    pub fn push(&mut self, args: &[Bytes], resolved: Resolved) {
        self.args.extend_from_slice(args);
        self.commands.push((self.args.len(), resolved));
    }

    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// Empties the queue for reuse, keeping its vectors unless a large transaction grew them.
    pub fn recycle(mut self) -> Queued {
        const KEEP_ARGS: usize = 64;
        if self.args.capacity() > KEEP_ARGS {
            return Queued::default();
        }
        self.args.clear();
        self.commands.clear();
        self
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Each queued command's arguments and the command they resolved to.
    pub fn iter(&self) -> impl Iterator<Item = (&[Bytes], Resolved)> + '_ {
        self.commands.iter().scan(0, |start, &(end, resolved)| {
            let args = &self.args[*start..end];
            *start = end;
            Some((args, resolved))
        })
    }
}

/// Messages pushed to a client by others (pub/sub), bounded by `client-output-buffer-limit`.
#[derive(Default)]
pub struct Outbox {
    queue: Mutex<VecDeque<Bytes>>,
    bytes: AtomicUsize,
    soft_since: Mutex<Option<Instant>>,
    /// Wakes the connection waiting for input: a message queued here, and also a kill and shutdown
    /// ([`ClientInfo::kill`], `Shared::request_shutdown`), so an idle connection waits on one Notify, not three.
    pub notify: Notify,
}

impl Outbox {
    /// Queues `msg`; false when that takes the client over its limit (the caller then disconnects it).
    pub fn push(&self, msg: Bytes, limit: &OutputLimit) -> bool {
        if msg.is_empty() {
            // Nothing to deliver; and `drain` may then trust the byte count alone to say the queue is empty.
            return true;
        }
        let total = self.bytes.fetch_add(msg.len(), Ordering::AcqRel) + msg.len();
        self.queue.lock().push_back(msg);
        self.notify.notify_one();
        let total = total as u64;
        if limit.hard > 0 && total > limit.hard {
            return false;
        }
        if limit.soft > 0 && total > limit.soft {
            let mut since = self.soft_since.lock();
            let start = *since.get_or_insert_with(Instant::now);
            if start.elapsed().as_secs() >= limit.soft_seconds {
                return false;
            }
        } else {
            *self.soft_since.lock() = None;
        }
        true
    }

    /// Takes everything queued.
    pub fn drain(&self) -> Vec<Bytes> {
        // Asked after every request batch and nearly always empty: one load instead of the lock. A message counts
        // its bytes before it is queued, so zero here means nothing is queued or its `push` has not begun (and
        // that push's notify wakes the connection again).
        if self.bytes.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let items: Vec<Bytes> = self.queue.lock().drain(..).collect();
        let n: usize = items.iter().map(|b| b.len()).sum();
        self.bytes.fetch_sub(n, Ordering::AcqRel);
        items
    }

    pub fn pending_bytes(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }
}

/// A lock grant made for a durable connection (`CLIENT DURABILITY REPLICAS n`): undone if the command it came
/// from (LEASE, SEMAPHORE, an EXEC or a script that granted) is not acknowledged by the replicas in time.
#[derive(Debug, Clone)]
pub struct Grant {
    pub db: usize,
    pub key: Bytes,
    pub token: i64,
}

/// What a durable connection's current command did, which decides its durable wait: whether it logged anything, and
/// the lock grants to undo if that is not acknowledged in time. Kept in [`ClientInfo`] because a script reports
/// here from the thread it runs on, with a client state of its own.
#[derive(Debug, Default)]
pub struct DurablePending {
    pub wrote: bool,
    pub grants: Vec<Grant>,
}

/// The parts of a client that other tasks can see.
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub created: Instant,
    pub name: Mutex<Bytes>,
    pub lib_name: Mutex<String>,
    pub lib_ver: Mutex<String>,
    pub db: AtomicUsize,
    /// Monotonic ms of the last command.
    pub last_active: AtomicU64,
    /// The last command run (its table entry, a subcommand's own; null before the first): one relaxed store per
    /// command, where a lock cost two atomic operations. CLIENT LIST finds a subcommand's container when it shows it.
    pub last_cmd: AtomicPtr<CommandSpec>,
    pub resp: AtomicU8,
    pub subscriptions: AtomicUsize,
    pub psubscriptions: AtomicUsize,
    /// Shard channels (SSUBSCRIBE).
    pub ssubscriptions: AtomicUsize,
    pub in_multi: AtomicBool,
    /// Set by a script (on whatever thread it ran) whose error reply was already counted in INFO errorstats where
    /// a `redis.call` made it; the connection then does not count the reply again. Cleared before each command.
    pub reply_error_counted: AtomicBool,
    pub blocked: AtomicBool,
    /// Blocked on keys (BLPOP and friends): CLIENT UNBLOCK may end the wait.
    pub unblockable: AtomicBool,
    /// CLIENT UNBLOCK's reply for the waiting command (the timeout reply, or an UNBLOCKED error), and its wake-up.
    pub unblock_with: Mutex<Option<ruvio_protocol::Value>>,
    pub unblock_notify: Notify,
    killed: AtomicBool,
    pub kill_notify: Notify,
    pub outbox: Outbox,
    /// Filled only on a durable connection; taken by its durable wait after each command.
    pub durable: Mutex<DurablePending>,
    /// The ACL user this connection is logged in as (CLIENT LIST `user=`, CLIENT KILL USER, ACL DELUSER).
    pub user: Mutex<String>,
    /// In MONITOR mode (CLIENT LIST flag `O`; no idle timeout).
    pub monitor: AtomicBool,
}

impl ClientInfo {
    pub fn new(id: u64, addr: String, laddr: String) -> Self {
        ClientInfo {
            id,
            addr,
            laddr,
            created: Instant::now(),
            name: Mutex::new(Bytes::new()),
            lib_name: Mutex::new(String::new()),
            lib_ver: Mutex::new(String::new()),
            db: AtomicUsize::new(0),
            last_active: AtomicU64::new(crate::clock::mono_ms()),
            last_cmd: AtomicPtr::new(std::ptr::null_mut()),
            resp: AtomicU8::new(2),
            subscriptions: AtomicUsize::new(0),
            psubscriptions: AtomicUsize::new(0),
            ssubscriptions: AtomicUsize::new(0),
            in_multi: AtomicBool::new(false),
            reply_error_counted: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            unblockable: AtomicBool::new(false),
            unblock_with: Mutex::new(None),
            unblock_notify: Notify::new(),
            killed: AtomicBool::new(false),
            kill_notify: Notify::new(),
            outbox: Outbox::default(),
            durable: Mutex::new(DurablePending::default()),
            user: Mutex::new("default".into()),
            monitor: AtomicBool::new(false),
        }
    }

    /// Whether it has any subscription (channel, pattern or shard channel): a pub/sub client.
    pub fn is_pubsub(&self) -> bool {
        self.subscriptions.load(Ordering::Relaxed) + self.psubscriptions.load(Ordering::Relaxed) + self.ssubscriptions.load(Ordering::Relaxed) > 0
    }

    /// Asks the connection to close (CLIENT KILL, output limit, shutdown).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill_notify.notify_one();
        self.outbox.notify.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// One line of CLIENT LIST / CLIENT INFO, in Redis's field order.
    /// Notes the command about to run (CLIENT LIST's `cmd`).
    pub fn set_last_command(&self, spec: &'static CommandSpec) {
        self.last_cmd.store(spec as *const CommandSpec as *mut CommandSpec, Ordering::Relaxed);
    }

    /// The last command's name as CLIENT LIST shows it: `get`, `client|list`, `NULL` before the first.
    pub fn last_command_name(&self) -> String {
        let ptr = self.last_cmd.load(Ordering::Relaxed) as *const CommandSpec;
        if ptr.is_null() {
            return "NULL".to_string();
        }
        // SAFETY: only addresses of the static command table are stored (`set_last_command`).
        let spec: &'static CommandSpec = unsafe { &*ptr };
        match crate::commands::all().find(|p| p.subcommands.iter().any(|s| std::ptr::eq(s, spec))) {
            Some(parent) => format!("{}|{}", parent.name, spec.name),
            None => spec.name.to_string(),
        }
    }

    pub fn describe(&self) -> String {
        let now = crate::clock::mono_ms();
        let idle = now.saturating_sub(self.last_active.load(Ordering::Relaxed)) / 1000;
        let mut flags = String::new();
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if self.in_multi.load(Ordering::Relaxed) {
            flags.push('x');
        }
        if self.blocked.load(Ordering::Relaxed) {
            flags.push('b');
        }
        if self.is_pubsub() {
            flags.push('P');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={} tot-mem=0 events=r cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            String::from_utf8_lossy(&self.name.lock()),
            self.created.elapsed().as_secs(),
            idle,
            flags,
            self.db.load(Ordering::Relaxed),
            self.subscriptions.load(Ordering::Relaxed),
            self.psubscriptions.load(Ordering::Relaxed),
            self.ssubscriptions.load(Ordering::Relaxed),
            self.outbox.pending_bytes(),
            self.last_command_name(),
            self.user.lock(),
            self.resp.load(Ordering::Relaxed),
            self.lib_name.lock(),
            self.lib_ver.lock(),
        )
    }
}

/// One WATCHed key: where, and whether it was live with a deadline when watched (so its expiry counts as a change).
pub struct Watched {
    pub db: usize,
    pub key: CompactBytes,
}

/// State the connection task owns.
/// What a replica asked for with `PSYNC <replid> <next lsn> <epoch> <appendonly 0|1> <listening port>`: the
/// connection is handed to the replication link with it.
#[derive(Debug, Clone)]
pub struct Handover {
    pub replid: String,
    pub next_lsn: u64,
    pub epoch: u16,
    pub aof: bool,
    pub port: u16,
}

/// CLIENT REPLY's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplyMode {
    #[default]
    On,
    Off,
    /// SKIP was sent: the next command's reply is left out, then replies resume.
    SkipNext,
}

pub struct ClientState {
    pub info: Arc<ClientInfo>,
    pub db: usize,
    pub proto: Protocol,
    pub authenticated: bool,
    /// The ACL user whose permissions apply (None: not logged in, or the server's own replay, which is not checked).
    pub user: Option<Arc<crate::acl::User>>,
    /// `user`'s rules as the ACL gate last read them (refreshed when they change).
    pub perms_cache: crate::acl::PermsCache,
    /// Commands queued since MULTI.
    pub multi: Option<Queued>,
    /// The last EXEC's queue, emptied, for the next MULTI: a client that sends transactions over and over queues
    /// into vectors already grown to its transactions' size.
    pub spare_queue: Queued,
    /// A command failed to queue: EXEC will answer EXECABORT.
    pub multi_error: bool,
    pub watch_flag: Arc<WatchFlag>,
    pub watched: Vec<Watched>,
    /// WATCHes dropped while a script held the store lock (UNWATCH, DISCARD, RESET, an EXEC refused with BUSY):
    /// their flags stay registered on the keys until the connection next holds the lock (nothing reads them).
    pub stale_watches: Vec<(Vec<Watched>, Arc<WatchFlag>)>,
    pub channels: HashSet<Bytes>,
    pub patterns: HashSet<Bytes>,
    /// Shard channels (SSUBSCRIBE): a namespace of their own, as in Redis.
    pub shard_channels: HashSet<Bytes>,
    /// Close the connection once the current reply is written (QUIT).
    pub close_after_reply: bool,
    /// Close the connection without writing the current reply (SHUTDOWN, as Redis does).
    pub close_without_reply: bool,
    /// Replies that go out before the handler's return value (SUBSCRIBE answers once per channel).
    pub extra_replies: Vec<ruvio_protocol::Value>,
    /// A command that blocked (BLPOP, LEASE ... WAIT, an EVAL still running on the script thread) is counted in INFO
    /// commandstats when its reply comes, as Redis counts it on unblock: only then is it known whether it failed.
    /// Called with "the reply is an error".
    pub count_when_unblocked: Option<Box<dyn FnOnce(bool) + Send>>,
    /// `CLIENT DURABILITY REPLICAS n`: each write is answered once n replicas (and this node) fsynced it.
    pub durability_replicas: usize,
    /// On a durable connection, the lock a blocked LEASE/SEMAPHORE ... WAIT waits for (database, key): the grant it
    /// receives is one to undo if it is not acknowledged in time.
    pub lock_wait: Option<(usize, Bytes)>,
    /// CLIENT REPLY ON|OFF|SKIP.
    pub reply_mode: ReplyMode,
    /// While an EXEC that runs scripts has this connection's state on a script thread, the connection keeps a
    /// stand-in ([`ClientState::stand_in`]) and gets the real state back here when the EXEC is over.
    pub away: Option<tokio::sync::oneshot::Receiver<ClientState>>,
    /// This state is on a script thread running an EXEC: the EXEC runs here, it is not handed off again.
    pub on_script_thread: bool,
    /// The current command's reply is not sent (CLIENT REPLY OFF/SKIP themselves).
    pub reply_skip_current: bool,
    /// Set by PSYNC: the connection becomes a replication link once this command's batch is done.
    pub handover: Option<Handover>,
}

impl ClientState {
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> Self {
        ClientState {
            info,
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            user: None,
            perms_cache: Default::default(),
            multi: None,
            spare_queue: Queued::default(),
            multi_error: false,
            watch_flag: Arc::new(WatchFlag::default()),
            watched: Vec::new(),
            stale_watches: Vec::new(),
            channels: HashSet::new(),
            patterns: HashSet::new(),
            shard_channels: HashSet::new(),
            close_after_reply: false,
            close_without_reply: false,
            extra_replies: Vec::new(),
            count_when_unblocked: None,
            durability_replicas: 0,
            lock_wait: None,
            reply_mode: ReplyMode::On,
            reply_skip_current: false,
            away: None,
            on_script_thread: false,
            handover: None,
        }
    }

    /// Logs the connection in as `user` (AUTH, HELLO AUTH, or the default user at connect time).
    pub fn login(&mut self, user: Arc<crate::acl::User>) {
        *self.info.user.lock() = user.name.clone();
        self.user = Some(user);
        self.authenticated = true;
    }

    /// Logs the connection out (RESET, or its user was deleted): back to the default user if it needs no
    /// password, else unauthenticated.
    pub fn logout(&mut self, acl: &crate::acl::Acl) {
        self.user = None;
        self.authenticated = false;
        *self.info.user.lock() = "default".into();
        if let Some(u) = acl.autologin() {
            self.login(u);
        }
    }

    pub fn subscribed(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty() || !self.shard_channels.is_empty()
    }

    pub fn id(&self) -> u64 {
        self.info.id
    }

    /// What the connection keeps while this state is away on a script thread (an EXEC that runs scripts): enough
    /// to read the socket and be killed while it waits; `back` brings the real state back.
    pub fn stand_in(&self, back: tokio::sync::oneshot::Receiver<ClientState>) -> ClientState {
        let mut s = ClientState::new(self.info.clone(), self.authenticated);
        s.db = self.db;
        s.proto = self.proto;
        s.user = self.user.clone();
        s.durability_replicas = self.durability_replicas;
        s.away = Some(back);
        s
    }

    /// Whether the reply of the command that just ran goes out (CLIENT REPLY); called once per command.
    pub fn take_reply_permission(&mut self) -> bool {
        if std::mem::take(&mut self.reply_skip_current) {
            return false;
        }
        match self.reply_mode {
            ReplyMode::On => true,
            ReplyMode::Off => false,
            ReplyMode::SkipNext => {
                self.reply_mode = ReplyMode::On;
                false
            }
        }
    }

    /// On a durable connection: this command granted `token` on `key` (database `db`).
    pub fn note_durable_grant(&self, db: usize, key: Bytes, token: i64) {
        if self.durability_replicas > 0 {
            let mut d = self.info.durable.lock();
            d.wrote = true;
            d.grants.push(Grant { db, key, token });
        }
    }
}
