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
    pub commands_processed: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub pubsub_disconnects: AtomicU64,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.commands_processed,
            &self.rejected_connections,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.pubsub_disconnects,
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
    /// Persistence: the write log's queue, durability progress and status.
    pub aof: crate::persistence::Aof,
    /// Lua scripting: the engine, the script running now (for BUSY and SCRIPT KILL), INFO figures.
    pub scripts: crate::scripting::Scripting,
}

impl Shared {
    /// What follows every command under the store lock: lock waiters it made room for are served, and the lock
    /// timer is woken when it set an earlier deadline.
    pub fn after_command(&self, store: &mut Store, now: u64) {
        if crate::locks::engine::after_command(store, now) {
            self.lock_timer.notify_one();
        }
    }

    pub fn new(config: Config) -> Arc<Self> {
        use rand::Rng;
        let mut rng = rand::thread_rng();
        let run_id: String = (0..40).map(|_| format!("{:x}", rng.gen_range(0..16u8))).collect();
        let databases = config.databases;
        Arc::new(Shared {
            config: RwLock::new(config),
            store: Mutex::new(Store::new(databases)),
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            pubsub: Mutex::new(PubSub::default()),
            stats: Stats::default(),
            run_id,
            started: Instant::now(),
            shutdown: watch::channel(false).0,
            loading: AtomicBool::new(false),
            lock_timer: Notify::new(),
            bound_port: AtomicU64::new(0),
            aof: crate::persistence::Aof::default(),
            scripts: crate::scripting::Scripting::default(),
        })
    }

    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}
