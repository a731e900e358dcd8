//! Durability: the append-only log, snapshots (compaction), start-up loading and the token reservation.
//!
//! - The files hold the journal's records (`crate::journal::format`: header, framing with length + CRC32);
//!   [`manifest`]: which files make up the data.
//! - Persistence is one consumer of the journal (`crate::journal`, which numbers the records and keeps the
//!   backlog): [`writer`] reads the journal's records from its own cursor, writes and fsyncs them per
//!   `appendfsync` and publishes the last fsynced LSN to the journal's durability tracking, which connections wait
//!   for under `always` before replying (group commit).
//! - [`loader`]: snapshot + log replay at start-up; [`rewrite`]: compaction without stalling clients;
//!   [`check`]: `ruvio check-aof`; [`tokens`]: the fsynced token reservation.
//!
//! Persistence does not know the server: it reaches the store, the configuration and the journal through [`Host`]
//! (implemented by `Shared`, which owns the [`Aof`]), and the loader runs commands through a [`loader::Replay`].
//!
//! docs/persistence.md describes the files, the guarantees and the failure handling.

pub mod check;
pub mod collection_records;
pub mod hash_records;
pub mod loader;
pub mod manifest;
pub mod rewrite;
pub mod tokens;
pub mod writer;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::config::Config;
use crate::journal::Journal;
use crate::store::Store;

/// What persistence needs of the server that owns it (`Shared` implements it).
pub trait Host: Send + Sync + 'static {
    fn store(&self) -> &Mutex<Store>;
    fn config(&self) -> &RwLock<Config>;
    fn journal(&self) -> &Journal;
    fn aof(&self) -> &Aof;
    /// Numbers what `store` staged in the journal (under the store lock, so LSN order is execution order);
    /// returns the last LSN.
    fn commit_log(&self, store: &mut Store) -> u64;
    /// The function libraries' code (under the store lock: a snapshot carries them as of its instant).
    fn function_libraries(&self, store: &mut Store) -> Vec<bytes::Bytes>;
    /// Replaces every function library with these (a snapshot was loaded; under the store lock).
    fn replace_function_libraries(&self, store: &mut Store, libraries: &[bytes::Bytes]) -> Result<(), String>;
}

impl<T: Host> Host for Arc<T> {
    fn store(&self) -> &Mutex<Store> {
        (**self).store()
    }
    fn config(&self) -> &RwLock<Config> {
        (**self).config()
    }
    fn journal(&self) -> &Journal {
        (**self).journal()
    }
    fn aof(&self) -> &Aof {
        (**self).aof()
    }
    fn commit_log(&self, store: &mut Store) -> u64 {
        (**self).commit_log(store)
    }
    fn function_libraries(&self, store: &mut Store) -> Vec<bytes::Bytes> {
        (**self).function_libraries(store)
    }
    fn replace_function_libraries(&self, store: &mut Store, libraries: &[bytes::Bytes]) -> Result<(), String> {
        (**self).replace_function_libraries(store, libraries)
    }
}


/// How many times in a row an I/O worker polls its sockets once more before it commits a group (`before_park`).
const EXTRA_POLLS: u32 = 8;

/// Queued bytes that wake the writer even when commits do not (everysec/no).
const WAKE_AT_BYTES: usize = 256 * 1024;

/// Work for the writer, in LSN order.
pub(crate) enum Chunk {
    /// Encoded records (a journal segment); `last_lsn` is the LSN of the last one.
    Data { bytes: bytes::Bytes, last_lsn: u64 },
    /// Start a new log file (generation `gen`) for the records that follow: compaction began.
    Rotate { gen: u64, first_lsn: u64 },
}

/// Figures for INFO `persistence`.
#[derive(Default)]
pub struct PersistStats {
    pub aof_current_size: AtomicU64,
    pub aof_base_size: AtomicU64,
    pub rewrite_in_progress: AtomicBool,
    /// Unix ms when the running rewrite started.
    pub rewrite_started_ms: AtomicI64,
    /// -1 = never.
    pub last_rewrite_ms: AtomicI64,
    pub last_rewrite_ok: AtomicBool,
    pub rewrites: AtomicU64,
    /// Unix seconds of the last successful snapshot (LASTSAVE); start-up time before the first.
    pub lastsave: AtomicI64,
    pub last_write_ok: AtomicBool,
    /// Unix ms of the last successful fsync.
    pub last_fsync_ms: AtomicI64,
    pub fsyncs: AtomicU64,
    pub loading_start_ms: AtomicI64,
    pub loaded_records: AtomicU64,
    pub load_time_ms: AtomicU64,
}

/// The persistence handle (in `Shared`): the queue between the store and the writer thread, durability progress
/// and status.
pub struct Aof {
    enabled: AtomicBool,
    /// The writer thread sleeps on `wake` (with `wake_lock`) until records or a shutdown arrive.
    pub(crate) wake_lock: Mutex<()>,
    pub(crate) wake: Condvar,
    /// The writer thread found nothing to do and sleeps for long ([`writer`]'s `IDLE_WAIT`): the next commit wakes
    /// it ([`Aof::committed`]).
    pub(crate) writer_asleep: AtomicBool,
    pub(crate) shutdown: AtomicBool,
    /// Log rotations compaction asked for, `(generation, first LSN of the new file)`, oldest first.
    pub(crate) rotations: Mutex<VecDeque<(u64, u64)>>,
    /// A durable write waits for an fsync: the writer does one now, whatever `appendfsync` says.
    pub(crate) urgent_fsync: AtomicBool,
    /// Held while a snapshot is written (the keyspace captures one at a time).
    pub(crate) capture: Mutex<()>,
    /// LSN of the last record written (maybe not fsynced).
    pub(crate) written: AtomicU64,
    /// Wakes connections waiting for `written` (under everysec/no a reply leaves once its records are written).
    written_notify: tokio::sync::Notify,
    /// Bumped when `written` starts again lower (a replica took a snapshot): a waiter for the old history stops.
    written_resets: AtomicU64,
    /// Why the last write or fsync failed, while it is failing: write commands get `-MISCONF`.
    error: Mutex<Option<String>>,
    has_error: AtomicBool,
    pub stats: PersistStats,
    pub(crate) manifest: Mutex<manifest::Manifest>,
    pub(crate) rotated_gen: AtomicU64,
    /// True under `appendfsync always`: commits are handed to the writer as a group when an I/O worker has run
    /// everything ready (see [`Aof::before_park`]), instead of waking it once per commit.
    pub(crate) group_at_park: AtomicBool,
    /// Records are queued (or waited for) that no group commit has covered yet.
    kick_pending: AtomicBool,
    /// The last file generation handed out (each rewrite takes the next).
    pub(crate) gen_alloc: AtomicU64,
    /// Set when compaction replaced files, so the writer recounts their sizes.
    pub(crate) files_changed: AtomicBool,
    pub(crate) rewrite_waiters: Mutex<Vec<tokio::sync::oneshot::Sender<ruvio_protocol::Value>>>,
    pub(crate) runtime: Mutex<Option<Runtime>>,
    /// The log file and what is queued for it; whoever holds this writes (the writer thread, or an I/O worker
    /// committing its turn).
    pub(crate) log_writer: Mutex<Option<writer::Writer>>,
}

pub(crate) struct Runtime {
    pub writer: std::thread::JoinHandle<()>,
}

impl Default for Aof {
    fn default() -> Self {
        Aof {
            enabled: AtomicBool::new(false),
            wake_lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            rotations: Mutex::new(VecDeque::new()),
            capture: Mutex::new(()),
            urgent_fsync: AtomicBool::new(false),
            written: AtomicU64::new(0),
            written_notify: tokio::sync::Notify::new(),
            written_resets: AtomicU64::new(0),
            error: Mutex::new(None),
            has_error: AtomicBool::new(false),
            stats: PersistStats { last_rewrite_ms: AtomicI64::new(-1), last_rewrite_ok: AtomicBool::new(true), last_write_ok: AtomicBool::new(true), ..Default::default() },
            manifest: Mutex::new(manifest::Manifest::default()),
            rotated_gen: AtomicU64::new(0),
            writer_asleep: AtomicBool::new(false),
            group_at_park: AtomicBool::new(true),
            kick_pending: AtomicBool::new(false),
            gen_alloc: AtomicU64::new(0),
            files_changed: AtomicBool::new(false),
            rewrite_waiters: Mutex::new(Vec::new()),
            runtime: Mutex::new(None),
            log_writer: Mutex::new(None),
        }
    }
}

impl Aof {
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// After the journal committed records (`open_bytes` of them not yet handed to a consumer): the next I/O worker
    /// to go idle writes them as a group ([`Aof::before_park`]), and under `always` fsyncs them; the writer thread
    /// also comes round by itself (for records no worker commits), or at once when much is waiting.
    pub fn committed(&self, open_bytes: usize) {
        if open_bytes == 0 {
            return;
        }
        if self.enabled() {
            if open_bytes >= WAKE_AT_BYTES {
                return self.wake_writer();
            }
            self.kick_pending.store(true, Ordering::Release);
        }
        // A writer that went to sleep for long finds these records at once, as at its usual round (written, or with
        // no log file passed over so the journal can let them go). The fence pairs with the writer's between raising
        // `writer_asleep` and looking for records: either it sees these records, or this sees it asleep.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.writer_asleep.load(Ordering::Relaxed) && self.writer_asleep.swap(false, Ordering::Relaxed) {
            self.wake_writer();
        }
    }

    /// The log file holds every record up to `lsn` (written, maybe not fsynced): wakes the replies waiting for it.
    pub(crate) fn publish_written(&self, lsn: u64) {
        self.written.store(lsn, Ordering::Release);
        self.written_notify.notify_waiters();
    }

    /// The log starts again after `lsn` (a replica replaced its history with a snapshot).
    pub(crate) fn reset_written(&self, lsn: u64) {
        self.written_resets.fetch_add(1, Ordering::AcqRel);
        self.publish_written(lsn);
    }

    /// Gets what is committed fsynced soon, whatever `appendfsync` says (a durable write or WAITAOF waits for it):
    /// under `always` the next group commit covers it; otherwise the writer is asked for an fsync now.
    pub fn request_fsync(&self) {
        if self.syncs_every_commit() {
            // Waking the writer thread per durable write here made two threads take turns at fsyncs (measured:
            // twice the fsyncs, a thread hand-off per write).
            self.kick_pending.store(true, Ordering::Release);
            return;
        }
        self.urgent_fsync.store(true, Ordering::Release);
        self.wake_writer();
    }

    /// Whether every commit is fsynced by the next group commit (`appendfsync always`, the log writing).
    pub fn syncs_every_commit(&self) -> bool {
        self.enabled() && self.group_at_park.load(Ordering::Relaxed) && !self.has_error()
    }

    /// Records were committed that should be written without waiting for the writer's next round: under `always`
    /// the next group commit takes them (see [`Aof::committed`]), otherwise the writer is woken.
    pub fn write_soon(&self) {
        if !self.group_at_park.load(Ordering::Relaxed) {
            self.wake_writer();
        }
    }

    pub(crate) fn wake_writer(&self) {
        let _g = self.wake_lock.lock();
        self.wake.notify_one();
    }

    /// Whether the next [`Aof::before_park`] has records to commit (replies may be waiting for them).
    pub fn group_commit_pending(&self) -> bool {
        self.kick_pending.load(Ordering::Relaxed)
    }

    /// Called by each I/O worker when it has nothing left to run, just before it sleeps (Redis's `beforeSleep`):
    /// writes every record committed so far with one write and, under `appendfsync always`, one fsync, on this
    /// thread, and so wakes the connections waiting for them (under everysec/no they wait for the write alone). Waking a writer thread per commit instead would
    /// start an fsync for the first record of a turn and leave the rest to wait for the next one, and the thread
    /// hand-offs cost more than the fsync on a small machine. A second worker waits for the first one's group,
    /// then commits its own.
    ///
    /// Before it commits, a worker that ran writes since it last came here looks at its sockets once more (it
    /// leaves a task to run, and tokio then polls for I/O without sleeping): requests that arrived while the turn
    /// ran join this group instead of waiting out its fsync for the next one. That makes groups larger (about 31
    /// writes per fsync instead of 23 with 50 clients, docs/benchmarks.md). At most [`EXTRA_POLLS`] times in a row,
    /// so clients that never stop writing cannot hold a group back. (Polling without sleeping when a park
    /// hook leaves work is what tokio 1.54, the workspace's minimum, does; a tokio without it would run the empty
    /// task and come back here with nothing new, so the worker would just commit one park later.)
    pub fn before_park(&self, host: &impl Host) {
        thread_local! {
            /// `assigned` when this worker last came here, and how many extra polls it made since its last commit.
            static SEEN: std::cell::Cell<(u64, u32)> = const { std::cell::Cell::new((0, 0)) };
        }
        if !self.kick_pending.load(Ordering::Relaxed) {
            return;
        }
        let assigned = host.journal().last_lsn();
        let (seen, polls) = SEEN.get();
        // Only a group that ends in an fsync (`always`) is worth growing; under everysec/no the group is one write,
        // which costs less than the extra round.
        if seen != assigned && polls < EXTRA_POLLS && self.group_at_park.load(Ordering::Relaxed) {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                SEEN.set((assigned, polls + 1));
                rt.spawn(async {});
                return;
            }
        }
        SEEN.set((assigned, 0));
        if !self.kick_pending.swap(false, Ordering::AcqRel) {
            return;
        }
        match self.log_writer.lock().as_mut() {
            Some(w) => w.commit_turn(host),
            None => self.wake_writer(),
        }
    }

    /// The LSN a batch must see on disk before its replies leave: `lsn`, the last one committed when the batch ended,
    /// whether the batch wrote it or only may have seen it (unless the disk is failing: reads go on then). Under
    /// `always` it must be fsynced; under `everysec` and `no` written to the file, that is handed to the kernel,
    /// as Redis writes its AOF buffer before it sends replies: a kill -9 of the process then loses nothing that was
    /// answered, and only an OS crash or power loss can lose the last second. See [`Aof::wait_before_reply`].
    pub fn durability_target(&self, host: &impl Host, lsn: u64, wrote: bool) -> Option<u64> {
        if !self.enabled() {
            return None;
        }
        let reached = if host.config().read().appendfsync == crate::config::AppendFsync::Always {
            host.journal().durability.local()
        } else {
            self.written.load(Ordering::Acquire)
        };
        if lsn <= reached || (!wrote && self.has_error()) {
            return None;
        }
        Some(lsn)
    }

    /// Waits until the replies of a batch whose [`Aof::durability_target`] was `lsn` may leave: `lsn` fsynced under
    /// `always`, written otherwise. Either way this worker's next group commit ([`Aof::before_park`]) does it, one
    /// write (and under `always` one fsync) for every connection of its turn.
    pub async fn wait_before_reply(&self, host: &impl Host, lsn: u64) {
        if host.config().read().appendfsync == crate::config::AppendFsync::Always {
            return self.wait_synced(host, lsn).await;
        }
        let resets = self.written_resets.load(Ordering::Acquire);
        loop {
            let notified = self.written_notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a write that lands in between still wakes this waiter.
            notified.as_mut().enable();
            if self.written.load(Ordering::Acquire) >= lsn || self.written_resets.load(Ordering::Acquire) != resets {
                return;
            }
            self.kick_pending.store(true, Ordering::Release);
            notified.await;
        }
    }

    /// Waits until `lsn` is fsynced here.
    pub async fn wait_synced(&self, host: &impl Host, lsn: u64) {
        let durability = &host.journal().durability;
        if durability.local() >= lsn {
            return;
        }
        // Whoever committed `lsn`, this worker commits the group when it next goes idle.
        self.kick_pending.store(true, Ordering::Release);
        durability.wait(crate::journal::Need::local(lsn)).await;
    }

    pub fn has_error(&self) -> bool {
        self.has_error.load(Ordering::Acquire)
    }

    /// The reason writes are refused, if they are.
    pub fn write_error(&self) -> Option<String> {
        if !self.has_error() {
            return None;
        }
        self.error.lock().clone()
    }

    pub(crate) fn set_error(&self, reason: Option<String>) {
        let failing = reason.is_some();
        if failing != self.has_error() {
            match &reason {
                Some(r) => tracing::warn!("writing the append-only log failed: {r}; refusing writes until it works again"),
                None => tracing::warn!("writing the append-only log works again; accepting writes"),
            }
        }
        *self.error.lock() = reason;
        self.has_error.store(failing, Ordering::Release);
        self.stats.last_write_ok.store(!failing, Ordering::Relaxed);
    }

    /// Stops the writer after it wrote and fsynced everything committed so far (graceful shutdown).
    pub fn shutdown(&self, host: &impl Host) {
        host.commit_log(&mut host.store().lock());
        self.shutdown.store(true, Ordering::Release);
        self.wake_writer();
        let runtime = self.runtime.lock().take();
        if let Some(rt) = runtime {
            let _ = rt.writer.join();
        }
    }
}

/// fsyncs a folder so a rename or a new file in it survives a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Start-up, first half: loads the data set (clients get `-LOADING` meanwhile if it takes a while). An error means
/// the server must not start.
pub fn load(host: &impl Host, replay: &mut dyn loader::Replay) -> Result<loader::Loaded, String> {
    let started = std::time::Instant::now();
    host.aof().stats.loading_start_ms.store(crate::clock::wall_ms(), Ordering::Relaxed);
    let loaded = loader::load(host, replay)?;
    let elapsed = started.elapsed();
    host.aof().stats.load_time_ms.store(elapsed.as_millis() as u64, Ordering::Relaxed);
    if loaded.records > 0 || loaded.keys > 0 {
        tracing::info!(
            "DB loaded from disk: {} keys from the snapshot, {} log records, in {:.3} seconds",
            loaded.keys,
            loaded.records,
            elapsed.as_secs_f64()
        );
    }
    Ok(loaded)
}

/// Start-up, second half: the token reservation and the log writer (fsyncs, but no loading). Then removes what
/// expired while the server was down.
pub fn open(host: &Arc<impl Host>, loaded: loader::Loaded) -> Result<(), String> {
    let dir = host.config().read().dir.clone();
    let reservation = {
        let mut store = host.store().lock();
        tokens::start(&dir, &mut store.locks.tokens, crate::clock::wall_ms())?
    };
    host.aof().stats.lastsave.store(crate::clock::wall_ms() / 1000, Ordering::Relaxed);
    writer::start(host, loaded, reservation)?;
    // What expired while the server was down goes now, and is logged as DELs like any expiry.
    let now = crate::clock::mono_ms();
    let mut store = host.store().lock();
    let replica = store.replica;
    store.set_now(now);
    let mut removed = 0;
    // A replica never expires keys on its own (the primary's DELs do): DELs logged here would also be records its
    // primary never wrote, shifting its LSNs by one each, so it would resume past a record of the primary's and
    // lose that write (found by the fault suite, docs/faults.md).
    for db in 0..store.dbs.len() {
        if !replica {
            removed += store.dbs[db].active_expire(now, crate::keyspace::SEGMENTS);
        }
    }
    store.settle();
    host.commit_log(&mut store);
    if removed > 0 {
        tracing::info!("{removed} keys had expired while the server was down; removed");
    }
    Ok(())
}

/// What INFO `# Persistence` reports besides the persistence handle itself.
pub struct InfoFigures {
    /// Changes since the last snapshot.
    pub dirty: u64,
    /// The token issuer's last token and the end of its fsynced reservation.
    pub tokens: (i64, i64),
    /// The data set is loading.
    pub loading: bool,
}

/// INFO `# Persistence`.
pub fn info_section(aof: &Aof, journal: &crate::journal::Journal, figures: InfoFigures, out: &mut String) {
    use std::fmt::Write;
    let InfoFigures { dirty, tokens, loading } = figures;
    let s = &aof.stats;
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let gi = |a: &AtomicI64| a.load(Ordering::Relaxed);
    let now = crate::clock::wall_ms();
    let in_progress = s.rewrite_in_progress.load(Ordering::Relaxed);
    let current_rewrite = if in_progress { (now - gi(&s.rewrite_started_ms)) / 1000 } else { -1 };
    let last_rewrite = gi(&s.last_rewrite_ms);
    let last_rewrite_sec = if last_rewrite < 0 { -1 } else { last_rewrite / 1000 };
    let status = |ok: bool| if ok { "ok" } else { "err" };
    let (last_lsn, synced) = (journal.last_lsn(), journal.durability.local());
    let pending_lsns = last_lsn.saturating_sub(synced);
    let last_fsync = gi(&s.last_fsync_ms);
    let fsync_lag = if pending_lsns == 0 || last_fsync == 0 { 0 } else { (now - last_fsync).max(0) };
    let _ = write!(
        out,
        "loading:{}\r\nasync_loading:0\r\nrdb_changes_since_last_save:{dirty}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{last_rewrite_sec}\r\n\
aof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:{last_rewrite_sec}\r\naof_current_rewrite_time_sec:{current_rewrite}\r\n\
aof_last_rewrite_time_ms:{last_rewrite}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_last_write_status:{}\r\naof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:0\r\n\
aof_unwritten_records:{}\r\naof_pending_bio_fsync:{}\r\naof_delayed_fsync:0\r\naof_fsyncs:{}\r\naof_fsync_lag_ms:{fsync_lag}\r\naof_pending_fsync_records:{pending_lsns}\r\naof_last_lsn:{}\r\naof_synced_lsn:{}\r\naof_last_write_error:{}\r\n\
loading_time_ms:{}\r\nloading_loaded_records:{}\r\nfencing_token_last:{}\r\nfencing_token_reserved_until:{}\r\n",
        loading as u8,
        in_progress as u8,
        gi(&s.lastsave),
        status(s.last_rewrite_ok.load(Ordering::Relaxed)),
        aof.enabled() as u8,
        in_progress as u8,
        status(s.last_rewrite_ok.load(Ordering::Relaxed)),
        g(&s.rewrites),
        status(s.last_write_ok.load(Ordering::Relaxed)),
        g(&s.aof_current_size),
        g(&s.aof_base_size),
        last_lsn.saturating_sub(aof.written.load(Ordering::Relaxed)),
        (aof.written.load(Ordering::Relaxed) > synced) as u8,
        g(&s.fsyncs),
        last_lsn,
        synced,
        aof.write_error().unwrap_or_default().replace(['\r', '\n'], " "),
        g(&s.load_time_ms),
        g(&s.loaded_records),
        tokens.0,
        tokens.1,
    );
}
