//! State shared by every connection and background task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use tokio::sync::{watch, Notify};

use crate::client::ClientInfo;
use crate::config::Config;
use crate::pubsub::PubSub;
use crate::store::Store;

/// Server-wide counters for INFO.
#[derive(Default)]
pub struct Stats {
    pub connections_received: AtomicU64,
    /// Added to once per run of a connection's commands under the store lock, not per command.
    pub commands_processed: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub pubsub_disconnects: AtomicU64,
    /// Resident set size in bytes, sampled by the active expiry task (`hz` times a second) rather than read from
    /// /proc on every write; what `maxmemory` is compared with (and INFO's used_memory). Not reset by RESETSTAT.
    pub used_memory: AtomicU64,
    /// The `maxmemory` setting, mirrored from the config (CONFIG SET stores it) so the check before every write
    /// is two loads rather than a read lock on the config.
    pub maxmemory: AtomicU64,
    /// Error replies sent, by error code (the first word: `ERR`, `WRONGTYPE`, a script's own `MY_CODE`), for INFO
    /// `errorstats`; at most [`ERROR_CODES_TRACKED`] codes, as Redis bounds them.
    pub error_replies: Mutex<HashMap<String, u64>>,
    /// Every error reply counted (INFO's `total_error_replies`), codes beyond the tracked ones included.
    pub error_replies_total: AtomicU64,
}

/// Redis's `ERROR_STATS_NUMBER`: distinct error codes INFO errorstats keeps (a script can make up any code).
pub const ERROR_CODES_TRACKED: usize = 128;

impl Stats {
    /// Whether commands flagged `denyoom` must be refused: `maxmemory` is set and used memory is above it.
    pub fn over_maxmemory(&self) -> bool {
        let maxmemory = self.maxmemory.load(Ordering::Relaxed);
        maxmemory > 0 && self.used_memory.load(Ordering::Relaxed) > maxmemory
    }
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
    /// Counts one error reply with the code its text starts with.
    pub fn count_error(&self, text: &[u8]) {
        let code = text.split(|&b| b == b' ').next().unwrap_or(b"ERR");
        let code = String::from_utf8_lossy(if code.is_empty() { b"ERR" } else { code });
        self.error_replies_total.fetch_add(1, Ordering::Relaxed);
        let mut errors = self.error_replies.lock();
        if let Some(n) = errors.get_mut(code.as_ref()) {
            *n += 1;
        } else if errors.len() < ERROR_CODES_TRACKED {
            errors.insert(code.into_owned(), 1);
        }
    }

    pub fn reset(&self) {
        self.error_replies.lock().clear();
        for c in [
            &self.connections_received,
            &self.commands_processed,
            &self.rejected_connections,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.pubsub_disconnects,
            &self.error_replies_total,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

pub struct Shared {
    pub config: RwLock<Config>,
    pub store: Mutex<Store>,
    pub clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    next_client_id: AtomicU64,
    pub pubsub: Mutex<PubSub>,
    pub stats: Stats,
    /// Per-command and durable-write counters for the metrics endpoint (metrics.rs).
    pub metrics: crate::metrics::Metrics,
    /// 40 hex characters, new at every start.
    pub run_id: String,
    pub started: Instant,
    /// Set to true to stop the server: connections finish their current replies and close.
    pub shutdown: watch::Sender<bool>,
    /// True while the data set is loading (clients get -LOADING).
    pub loading: AtomicBool,
    /// Wakes the lock timer when an earlier lock deadline appears.
    pub lock_timer: Notify,
    /// The port actually bound (differs from the config's when it asked for port 0).
    pub bound_port: AtomicU64,
    /// The TLS port actually bound (0: none).
    pub bound_tls_port: AtomicU64,
    /// The TLS server side (`tls-port`): built at start-up, rebuilt by CONFIG SET of a `tls-*` file parameter.
    pub tls: RwLock<Option<ruvio_tls::TlsAcceptor>>,
    /// Connections on the TLS port still in their handshake: they count against `maxclients`, so a flood of
    /// handshakes cannot hold more sockets than clients could.
    pub tls_handshakes: AtomicU64,
    /// The write log: LSNs, the backlog its consumers read, durability per LSN.
    pub journal: crate::journal::Journal,
    /// Persistence (a consumer of the journal): the log writer, compaction, status.
    pub aof: crate::persistence::Aof,
    /// This node's role, its replicas or its primary.
    pub replication: crate::replication::Replication,
    /// Lua scripting: the engine, the script running now (for BUSY and SCRIPT KILL), INFO figures.
    pub scripts: crate::scripting::Scripting,
    /// `notify-keyspace-events` (class bits), copied here so a write checks it without the config lock.
    pub notify_flags: AtomicU64,
    /// ACL users (acl.rs): who may log in, and what each user may run and touch.
    pub acl: crate::acl::Acl,
    /// Clients in MONITOR mode (monitor.rs).
    pub monitors: crate::monitor::Monitors,
}

impl Shared {
    /// What follows every command under the store lock: lock waiters it made room for are served, and the lock
    /// timer is woken when it set an earlier deadline.
    pub fn after_command(&self, store: &mut Store, now: u64) {
        if crate::locks::engine::after_command(store, now) {
            self.lock_timer.notify_one();
        }
        // The grants just made, logged after the write that made room for them.
        store.settle_lock_changes();
        if let Some(expired) = store.expired_notices.as_mut().filter(|n| !n.is_empty()).map(std::mem::take) {
            for (db, key) in expired {
                self.notify_keyspace(db, crate::notify::EXPIRED, "expired", &key);
            }
        }
    }

    /// Sets `notify-keyspace-events` (CONFIG SET, start-up): the copy writes check, and whether the store keeps
    /// expired keys for `expired` events.
    pub fn set_notify_flags(&self, store: &mut Store, flags: u32) {
        self.notify_flags.store(flags as u64, Ordering::Relaxed);
        let want = crate::notify::active(flags) && flags & crate::notify::EXPIRED != 0;
        if want != store.expired_notices.is_some() {
            store.expired_notices = want.then(Vec::new);
        }
    }

    /// Publishes one keyspace event (if its class is on): `__keyspace@db__:key` with the event (K) and
    /// `__keyevent@db__:event` with the key (E). Under the store lock; takes the pub/sub lock (the allowed order).
    pub fn notify_keyspace(&self, db: usize, class: u32, event: &str, key: &[u8]) {
        let flags = self.notify_flags.load(Ordering::Relaxed) as u32;
        if flags & class == 0 {
            return;
        }
        let limit = self.config.read().output_pubsub;
        let pubsub = self.pubsub.lock();
        if flags & crate::notify::KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            pubsub.publish(&bytes::Bytes::from(channel), &bytes::Bytes::copy_from_slice(event.as_bytes()), &limit);
        }
        if flags & crate::notify::KEYEVENT != 0 {
            let channel = bytes::Bytes::from(format!("__keyevent@{db}__:{event}"));
            pubsub.publish(&channel, &bytes::Bytes::copy_from_slice(key), &limit);
        }
    }

    /// The store through `guard`, locked first if the caller does not hold it yet (a command's context and a running
    /// script keep the lock in such an `Option`, so they can let it go while they wait).
    pub fn store_in<'a, 'g>(&'g self, guard: &'a mut Option<parking_lot::MutexGuard<'g, Store>>) -> &'a mut Store {
        guard.get_or_insert_with(|| self.store.lock())
    }

    /// Numbers the writes staged in `store.log` in the journal and tells its consumers. Under the store lock (the
    /// `&mut Store`), so LSN order is execution order. Returns the last LSN.
    pub fn commit_log(&self, store: &mut Store) -> u64 {
        // Whatever a clock-driven round reported (the lock timer's drops and grants) is logged before it is numbered.
        store.settle_lock_changes();
        if store.replica && !store.log.is_empty() {
            // A bug, caught here: only the primary's records may take LSNs on a replica. This one's LSNs no longer
            // match its primary's, so its history is given up: the link sees the next record's LSN as wrong and
            // starts over from a snapshot, instead of a later resume skipping one of the primary's records.
            let first = String::from_utf8_lossy(store.log[0].args.first().map_or(&b""[..], |a| &a[..])).into_owned();
            tracing::error!("a replica logged {} record(s) of its own (the first a {first}); it will sync again from a snapshot", store.log.len());
            self.replication.forget_history();
        }
        let (last, open_bytes) = self.journal.commit(store);
        self.aof.committed(open_bytes);
        last
    }

    pub fn new(config: Config) -> Arc<Self> {
        use rand::Rng;
        let mut rng = rand::thread_rng();
        let run_id: String = (0..40).map(|_| format!("{:x}", rng.gen_range(0..16u8))).collect();
        let databases = config.databases;
        let backlog = config.repl_backlog_size as usize;
        let min_replicas = (config.min_replicas_to_write, config.min_replicas_max_lag);
        let maxmemory = config.maxmemory;
        let notify = config.notify_keyspace_events;
        let metrics = crate::metrics::Metrics::default();
        metrics.slow.configure(&config);
        // `run` checked the ACL configuration before (a bad one refuses to start); a library caller gets the
        // default user alone and an error line.
        let acl = crate::acl::Acl::from_config(&config).unwrap_or_else(|e| {
            tracing::error!("ACL configuration: {e}");
            crate::acl::Acl::new()
        });
        let shared = Arc::new(Shared {
            config: RwLock::new(config),
            store: Mutex::new(Store::new(databases)),
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            pubsub: Mutex::new(PubSub::default()),
            stats: Stats::default(),
            metrics,
            run_id,
            started: Instant::now(),
            shutdown: watch::channel(false).0,
            loading: AtomicBool::new(false),
            lock_timer: Notify::new(),
            bound_port: AtomicU64::new(0),
            bound_tls_port: AtomicU64::new(0),
            tls: RwLock::new(None),
            tls_handshakes: AtomicU64::new(0),
            journal: crate::journal::Journal::new(backlog),
            aof: crate::persistence::Aof::default(),
            replication: crate::replication::Replication::default(),
            scripts: crate::scripting::Scripting::default(),
            notify_flags: AtomicU64::new(0),
            acl,
            monitors: crate::monitor::Monitors::default(),
        });
        shared.apply_config_copies(min_replicas, maxmemory);
        shared.set_notify_flags(&mut shared.store.lock(), notify);
        shared
    }

    /// Config values that subsystems keep copies of (set again by CONFIG SET).
    fn apply_config_copies(&self, min_replicas: (u64, u64), maxmemory: u64) {
        self.replication.set_min_replicas(min_replicas.0, min_replicas.1);
        self.stats.maxmemory.store(maxmemory, Ordering::Relaxed);
    }

    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
        // Client connections waiting for input wait on their outbox's Notify only (see `Outbox::notify`); one
        // admitted after this sees the flag before it waits.
        for info in self.clients.lock().values() {
            info.outbox.notify.notify_one();
        }
        self.scripts.stop_for_shutdown();
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}

impl crate::persistence::Host for Shared {
    fn store(&self) -> &Mutex<Store> {
        &self.store
    }
    fn config(&self) -> &RwLock<Config> {
        &self.config
    }
    fn journal(&self) -> &crate::journal::Journal {
        &self.journal
    }
    fn aof(&self) -> &crate::persistence::Aof {
        &self.aof
    }
    fn commit_log(&self, store: &mut Store) -> u64 {
        Shared::commit_log(self, store)
    }
    fn function_libraries(&self, _store: &mut Store) -> Vec<bytes::Bytes> {
        self.scripts.library_code()
    }
    fn replace_function_libraries(&self, _store: &mut Store, libraries: &[bytes::Bytes]) -> Result<(), String> {
        self.scripts.replace_libraries(libraries)
    }
}
