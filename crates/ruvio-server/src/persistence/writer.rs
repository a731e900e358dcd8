//! The log writer: writes queued records to the current log file and fsyncs per `appendfsync`.
//!
//! Group commit under `always`: an I/O worker that has run everything ready (see `Aof::before_park`, Redis's
//! `beforeSleep`) writes every record committed so far in one write and covers it with one fsync, then wakes the
//! connections waiting for it. Doing it on that thread spares two thread hand-offs per group, which on a small
//! machine cost more than the fsync itself; while it runs, requests pile up in the sockets and the next turn takes
//! them all, so throughput grows with the number of clients. The writer thread does everything else: records from
//! background work (expiry, lock timers), `everysec` and `no`, log rotation, retries after a failure, shutdown.
//! Both work on one [`Writer`] behind `Aof::log_writer`; records leave the queue only while it is locked, so the
//! file keeps LSN order.
//!
//! Preallocation: the log file is extended with zeros ahead of its records, a few MB at a time, so an fsync
//! after a write usually flushes data only: the file's size does not change, so there is no metadata to commit
//! (measured on this project's ext4 disk: about half the time of an fsync after an append). Readers stop at the
//! zeros (`format::open_reader`); a graceful shutdown and a log rotation cut the unused zeros off again.
//!
//! Failures: a failed write or fsync sets the `-MISCONF` state and keeps every byte not known to be on disk (the
//! bytes since the last good fsync are rewritten at the same offset); it retries every second and clears the
//! state once a write and fsync succeed. Nothing acknowledged under `always` can be lost: acknowledgements wait for
//! the synced LSN, which only a successful fsync advances.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::journal::format::{FileHeader, FileKind, HEADER_LEN};
use super::loader::Loaded;
use super::manifest::{self, Manifest};
use super::tokens::Reservation;
use super::{Chunk, Runtime};
use crate::journal::ConsumerId;
use crate::config::AppendFsync;
use super::Host;

const RETRY_EVERY: Duration = Duration::from_secs(1);
/// Records that background tasks (expiry, lock timers) leave in `store.log` are picked up at least this often.
const DRAIN_EVERY: Duration = Duration::from_millis(10);
const TOKEN_CHECK_EVERY: Duration = Duration::from_millis(100);
/// Under everysec/no, how long records may wait in memory before they are written (a kill -9 of the process can
/// lose at most this much more than a power loss could anyway).
const LAZY_WRITE_EVERY: Duration = Duration::from_millis(2);
/// How long the writer sleeps when it has nothing at all to do: nothing to write, nothing waiting for the fsync
/// `appendfsync` asks for. A commit wakes it sooner ([`super::Aof::committed`]); this keeps its other rounds (the
/// token reservation, the drain) going, and an idle server at about ten wake-ups a second, as Redis's `hz`, instead
/// of the lazy round's five hundred.
const IDLE_WAIT: Duration = TOKEN_CHECK_EVERY;
/// How far ahead of its records the log file is filled with zeros.
const PREALLOCATE: u64 = 4 * 1024 * 1024;
/// After preallocating failed (a nearly full disk), the log just grows with its writes for this long.
const PREALLOCATE_RETRY: Duration = Duration::from_secs(10);

struct LogFile {
    file: Arc<File>,
    /// Where the next write goes.
    write_off: u64,
    /// The file's length: from `write_off` to here it holds preallocated zeros.
    allocated: u64,
    /// Written but not yet known to be fsynced, oldest first: kept so a failed fsync can write them again.
    unsynced: VecDeque<Segment>,
}

struct Segment {
    start: u64,
    last_lsn: u64,
    bytes: bytes::Bytes,
}

pub(crate) struct Writer {
    /// This writer's cursor in the journal (a consumer that holds records until it has read them).
    cursor: ConsumerId,
    dir: PathBuf,
    appendfilename: String,
    file: Option<LogFile>,
    /// Sizes of the snapshot and the log files before the current one (for INFO and automatic compaction).
    other_files_size: u64,
    queue: VecDeque<Chunk>,
    written_lsn: u64,
    last_fsync: Instant,
    failing_since: Option<Instant>,
    preallocate_failed: Option<Instant>,
    /// An fsync the writer thread makes once it has let go of the writer (everysec/no).
    deferred_fsync: Option<DeferredFsync>,
}

/// An fsync of `file` that covers every record up to `lsn`.
struct DeferredFsync {
    file: Arc<File>,
    lsn: u64,
}

/// Opens the log (the last file the loader read, or a new one) and starts the writer thread.
pub fn start(host: &Arc<impl Host>, loaded: Loaded, reservation: Arc<Reservation>) -> Result<(), String> {
    let (dir, name, enabled) = {
        let c = host.config().read();
        (c.dir.clone(), c.appendfilename.clone(), c.appendonly)
    };
    let aof = &host.aof();
    host.journal().start_after(loaded.next_lsn - 1);
    aof.written.store(loaded.next_lsn - 1, Ordering::Release);
    let mut m = loaded.manifest.clone();
    let mut file = None;
    let mut other = loaded.total_size;
    if enabled {
        let (path, len) = match &loaded.current {
            Some((p, len)) => (p.clone(), *len),
            None => {
                let gen = next_free_gen(&dir, &name, &m);
                let fname = manifest::incr_name(&name, gen);
                let p = dir.join(&fname);
                create_log_file(&p, loaded.next_lsn).map_err(|e| format!("creating {}: {e}", p.display()))?;
                m.incrs.push(fname);
                m.write(&manifest::path(&dir, &name)).map_err(|e| format!("writing the manifest: {e}"))?;
                (p, HEADER_LEN as u64)
            }
        };
        let f = OpenOptions::new().write(true).open(&path).map_err(|e| format!("opening {}: {e}", path.display()))?;
        other -= loaded.current.as_ref().map_or(0, |c| c.1);
        let allocated = f.metadata().map_err(|e| format!("reading {}: {e}", path.display()))?.len().max(len);
        file = Some(LogFile { file: Arc::new(f), write_off: len, allocated, unsynced: VecDeque::new() });
        aof.stats.aof_current_size.store(other + len, Ordering::Relaxed);
    } else {
        aof.stats.aof_current_size.store(loaded.total_size, Ordering::Relaxed);
    }
    aof.stats.aof_base_size.store(loaded.total_size.max(1), Ordering::Relaxed);
    aof.rotated_gen.store(m.max_gen(), Ordering::Release);
    // Generations continue above every file in the folder, listed or left over (a crash between creating a file
    // and listing it), so a new file never lands on an existing one.
    aof.gen_alloc.store(next_free_gen(&dir, &name, &m) - 1, Ordering::Release);
    *aof.manifest.lock() = m;
    let cursor = host.journal().subscribe(loaded.next_lsn, true).map_err(|e| format!("the journal refused the log writer: {e:?}"))?;
    if enabled {
        host.store().lock().log_enabled = true;
    }
    aof.enabled.store(enabled, Ordering::Release);
    let w = Writer {
        cursor,
        dir,
        appendfilename: name,
        file,
        other_files_size: other,
        queue: VecDeque::new(),
        written_lsn: loaded.next_lsn - 1,
        last_fsync: Instant::now(),
        failing_since: None,
        preallocate_failed: None,
        deferred_fsync: None,
    };
    *aof.log_writer.lock() = Some(w);
    // The thread holds the server weakly: the server owns persistence, not the other way round.
    let for_thread = Arc::downgrade(host);
    let handle = std::thread::Builder::new().name("ruvio-aof-writer".into()).spawn(move || run(&for_thread, &reservation)).map_err(|e| e.to_string())?;
    *aof.runtime.lock() = Some(Runtime { writer: handle });
    Ok(())
}

/// A replica took its primary's snapshot of LSN `lsn` (`snapshot`, a file in the data folder): with the log on,
/// it becomes the base, a new log file starts at `lsn + 1` and every older file goes; the journal continues after
/// `lsn` either way. Done with the writer locked, so no record of the replaced history is written after it.
pub(crate) fn install_base(host: &impl Host, snapshot: &std::path::Path, lsn: u64) -> Result<(), String> {
    let aof = &host.aof();
    // Compaction replaces files too: wait for a running one to end, and keep the next from starting meanwhile.
    let deadline = Instant::now() + Duration::from_secs(120);
    while aof.stats.rewrite_in_progress.swap(true, Ordering::AcqRel) {
        if Instant::now() > deadline {
            return Err("a rewrite of the append-only log did not end".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let result = install_base_locked(host, snapshot, lsn);
    aof.stats.rewrite_in_progress.store(false, Ordering::Release);
    result
}

fn install_base_locked(host: &impl Host, snapshot: &std::path::Path, lsn: u64) -> Result<(), String> {
    let aof = &host.aof();
    let mut guard = aof.log_writer.lock();
    let Some(w) = guard.as_mut() else { return Err("the log writer is not running".into()) };
    w.queue.clear();
    aof.rotations.lock().clear();
    w.written_lsn = lsn;
    aof.reset_written(lsn);
    if w.file.is_none() {
        let _ = std::fs::remove_file(snapshot);
        host.journal().reset_after(lsn, false);
        return Ok(());
    }
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let gen = aof.gen_alloc.fetch_add(1, Ordering::AcqRel) + 1;
    let base = manifest::base_name(&w.appendfilename, gen);
    let base_size = std::fs::metadata(snapshot).map_err(|e| io("reading the snapshot", e))?.len();
    std::fs::rename(snapshot, w.dir.join(&base)).map_err(|e| io("renaming the snapshot", e))?;
    let incr = manifest::incr_name(&w.appendfilename, gen);
    let incr_path = w.dir.join(&incr);
    create_log_file(&incr_path, lsn + 1).map_err(|e| io("creating the log file", e))?;
    let file = OpenOptions::new().write(true).open(&incr_path).map_err(|e| io("opening the log file", e))?;
    let old: Vec<String> = {
        let mut m = aof.manifest.lock();
        let next = Manifest { base: Some(base), incrs: vec![incr] };
        next.write(&manifest::path(&w.dir, &w.appendfilename)).map_err(|e| io("writing the manifest", e))?;
        let old = m.files().filter(|f| manifest::gen_of(f) < gen).cloned().collect();
        *m = next;
        old
    };
    for f in old {
        if let Err(e) = std::fs::remove_file(w.dir.join(&f)) {
            tracing::warn!("could not remove the replaced file {f}: {e}");
        }
    }
    w.file = Some(LogFile { file: Arc::new(file), write_off: HEADER_LEN as u64, allocated: HEADER_LEN as u64, unsynced: VecDeque::new() });
    w.other_files_size = base_size;
    aof.rotated_gen.store(gen, Ordering::Release);
    aof.stats.aof_base_size.store(base_size.max(1), Ordering::Relaxed);
    aof.files_changed.store(true, Ordering::Release);
    host.journal().reset_after(lsn, true);
    Ok(())
}

/// The lowest generation above the manifest's files and every data file in the folder.
fn next_free_gen(dir: &std::path::Path, name: &str, m: &Manifest) -> u64 {
    let on_disk = manifest::data_files(dir, name).unwrap_or_default().iter().map(|(f, _)| manifest::gen_of(f)).max().unwrap_or(0);
    m.max_gen().max(on_disk) + 1
}

/// Creates a log file holding only its header, fsynced. Never replaces an existing file (it fails instead): a log
/// file this run did not create may hold data.
pub fn create_log_file(path: &std::path::Path, first_lsn: u64) -> std::io::Result<()> {
    let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
    f.write_all(&FileHeader { kind: FileKind::Log, lsn: first_lsn, created_wall_ms: crate::clock::wall_ms() }.encode())?;
    f.sync_all()?;
    super::sync_dir(path.parent().unwrap_or(std::path::Path::new(".")))
}

/// The writer thread's loop; ends at shutdown once everything committed is written and fsynced (or when the server
/// is gone).
fn run<H: Host>(server: &std::sync::Weak<H>, reservation: &Reservation) {
    let mut last_drain = Instant::now();
    let mut last_token_check = Instant::now() - TOKEN_CHECK_EVERY;
    let mut lsn_at_last_wait = 0;
    loop {
        let Some(host) = server.upgrade() else { return };
        let host = &host;
        let aof = host.aof();
        let policy = host.config().read().appendfsync;
        // Under everysec/no nobody waits for the log, so commits do not wake the writer while it is busy: it comes
        // round every couple of milliseconds instead, sparing a thread wake-up per write (only the first commit
        // after a quiet spell wakes it).
        aof.group_at_park.store(policy == AppendFsync::Always, Ordering::Relaxed);
        {
            let mut g = aof.wake_lock.lock();
            let idle = host.journal().last_lsn() <= aof.written.load(Ordering::Acquire)
                && aof.rotations.lock().is_empty()
                && !aof.urgent_fsync.load(Ordering::Acquire);
            if idle && !aof.shutdown.load(Ordering::Acquire) {
                let failing = aof.has_error();
                // Under everysec/no, once everything is written, the fsync the policy asks for is done and a whole
                // lazy round brought no record, nothing is left for the lazy round: sleep until a commit (which
                // wakes this thread) or the next slow round. (Without that quiet round, steady writes would wake
                // this thread at every commit instead of every couple of milliseconds.) Not under always, where the
                // I/O workers' group commits write and fsync every record themselves.
                let last_lsn = host.journal().last_lsn();
                let quiet_round = last_lsn == lsn_at_last_wait;
                lsn_at_last_wait = last_lsn;
                let nothing_unsynced = quiet_round
                    && (!aof.enabled()
                        || policy == AppendFsync::No
                        || host.journal().durability.local() >= aof.written.load(Ordering::Acquire));
                if failing || policy == AppendFsync::Always || !nothing_unsynced {
                    let wait = if failing {
                        Duration::from_millis(5)
                    } else if policy == AppendFsync::Always {
                        DRAIN_EVERY
                    } else {
                        LAZY_WRITE_EVERY
                    };
                    aof.wake.wait_for(&mut g, wait);
                } else {
                    aof.writer_asleep.store(true, Ordering::Relaxed);
                    // Pairs with the fence in `Aof::committed`: a commit made before this point is seen below, and
                    // one made after sees the flag (its wake-up cannot be lost: it takes `wake_lock`, held here
                    // until the wait releases it).
                    std::sync::atomic::fence(Ordering::SeqCst);
                    if host.journal().last_lsn() <= aof.written.load(Ordering::Acquire) {
                        aof.wake.wait_for(&mut g, IDLE_WAIT);
                    }
                    aof.writer_asleep.store(false, Ordering::Relaxed);
                }
            }
        }
        if last_drain.elapsed() >= DRAIN_EVERY {
            last_drain = Instant::now();
            if let Some(mut store) = host.store().try_lock() {
                host.commit_log(&mut store);
            }
        }
        if last_token_check.elapsed() >= TOKEN_CHECK_EVERY {
            last_token_check = Instant::now();
            extend_token_reservation(host, reservation);
        }
        let mut guard = aof.log_writer.lock();
        let Some(w) = guard.as_mut() else { return };
        let turn = w.turn(host, policy);
        if let Some(job) = w.deferred_fsync.take() {
            // The fsync runs with the writer unlocked: under everysec/no every reply waits for its records' write
            // (`Aof::wait_before_reply`), which must not queue behind an fsync.
            drop(guard);
            let result = job.file.sync_data();
            guard = aof.log_writer.lock();
            let Some(w) = guard.as_mut() else { return };
            w.fsync_done(host, job, result);
        }
        match turn {
            Turn::Go => {}
            Turn::Stop => return,
            Turn::Idle => {
                drop(guard);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Keeps the token reservation ahead of issuing, off the store lock (the lock is held only to read and to record
/// the new end).
fn extend_token_reservation(host: &impl Host, reservation: &Reservation) {
    let (wanted, epoch) = {
        let store = host.store().lock();
        (Reservation::wanted(&store.locks.tokens, crate::clock::wall_ms()), store.locks.tokens.epoch())
    };
    // A new epoch (a promotion) is written at once, not only with the next extension.
    let current = reservation.current();
    let wanted = wanted.or((epoch > current.epoch).then_some(current.reserved_until));
    let Some(wanted) = wanted else { return };
    match reservation.extend(wanted, epoch) {
        Ok(upto) => host.store().lock().locks.tokens.extend_reservation(upto),
        Err(e) => tracing::warn!("{e}"),
    }
}

enum Turn {
    Go,
    /// Failing: wait a moment before trying again.
    Idle,
    Stop,
}

impl Writer {
    /// Moves the records committed since the last call from the journal into the writer's own queue, with the log
    /// rotations compaction asked for at their places. Only with the writer locked, so records are written in LSN
    /// order. Returns whether the server is shutting down.
    fn take_pending(&mut self, host: &impl Host) -> bool {
        // Shutdown is read first: everything committed before it was set is read below.
        let shutdown = host.aof().shutdown.load(Ordering::Acquire);
        let segments = host.journal().read(self.cursor).expect("the log writer holds its records in the journal");
        // Rotations are read after the records: compaction registers one (under the store lock) before any record
        // of the new file can be committed, so every record read here that belongs after it finds it listed.
        let mut rotations = host.aof().rotations.lock();
        for seg in segments {
            while let Some(&(gen, first_lsn)) = rotations.front() {
                if first_lsn > seg.first_lsn {
                    break;
                }
                self.queue.push_back(Chunk::Rotate { gen, first_lsn });
                rotations.pop_front();
            }
            self.queue.push_back(Chunk::Data { bytes: seg.bytes, last_lsn: seg.last_lsn });
        }
        // A rotation at the very end (nothing committed after it yet) starts its file now.
        let next = host.journal().position(self.cursor);
        while let Some(&(gen, first_lsn)) = rotations.front() {
            if first_lsn > next {
                break;
            }
            self.queue.push_back(Chunk::Rotate { gen, first_lsn });
            rotations.pop_front();
        }
        shutdown
    }

    /// One round of the writer thread.
    fn turn(&mut self, host: &Arc<impl Host>, policy: AppendFsync) -> Turn {
        let shutdown = self.take_pending(host);
        let retry_due = self.failing_since.is_none_or(|t| t.elapsed() >= RETRY_EVERY);
        if retry_due && self.write_queue(host, policy) {
            // Under everysec/no the writer thread's fsync runs with the writer unlocked (`run`): I/O workers keep
            // writing their groups meanwhile, which their replies wait for.
            self.sync_per_policy(host, policy, shutdown, policy != AppendFsync::Always);
        }
        self.update_sizes(host);
        let synced = host.journal().durability.local();
        if shutdown && self.queue.is_empty() && (synced >= self.written_lsn || self.file.is_none()) {
            self.cut_preallocated();
            return Turn::Stop;
        }
        if shutdown && self.failing_since.is_some_and(|t| t.elapsed() > Duration::from_secs(5)) {
            tracing::error!("shutting down with records the disk refused to take");
            return Turn::Stop;
        }
        self.maybe_auto_rewrite(host);
        if !self.queue.is_empty() && self.failing_since.is_some() {
            return Turn::Idle;
        }
        Turn::Go
    }

    /// Group commit on an I/O worker about to sleep: writes everything committed so far, and under `appendfsync
    /// always` fsyncs it. Under `everysec` and `no` the write alone is what the worker's replies wait for (the
    /// records are then in the kernel's hands, safe from a crash of the process); the writer thread fsyncs once a
    /// second. While the log is failing, the writer thread's retries take over.
    pub(crate) fn commit_turn(&mut self, host: &impl Host) {
        let policy = host.config().read().appendfsync;
        if self.failing_since.is_some() {
            host.aof().wake_writer();
            return;
        }
        // At shutdown the writer thread finishes (`Aof::shutdown` wakes it).
        self.take_pending(host);
        if self.write_queue(host, policy) && policy == AppendFsync::Always {
            self.sync_per_policy(host, policy, false, false);
        }
    }

    fn fail(&mut self, host: &impl Host, what: &str, e: std::io::Error) {
        self.failing_since = Some(Instant::now());
        let reason = match e.raw_os_error() {
            Some(libc::ENOSPC) => "No space left on device".to_string(),
            _ => format!("{what}: {e}"),
        };
        host.aof().set_error(Some(reason));
    }

    /// Drops the copies of bytes an fsync has confirmed.
    fn forget_synced(&mut self, host: &impl Host) {
        let synced = host.journal().durability.local();
        if let Some(lf) = self.file.as_mut() {
            while lf.unsynced.front().is_some_and(|s| s.last_lsn <= synced) {
                lf.unsynced.pop_front();
            }
        }
    }

    /// After a failed fsync the page cache cannot be trusted: everything not confirmed is written again, at the
    /// same offsets, before any further fsync may confirm it.
    fn fsync_failed(&mut self, host: &impl Host, e: std::io::Error) {
        self.forget_synced(host);
        if let Some(lf) = self.file.as_mut() {
            let again = std::mem::take(&mut lf.unsynced);
            if let Some(first) = again.front() {
                lf.write_off = first.start;
                let _ = lf.file.set_len(first.start);
                lf.allocated = first.start;
            }
            for seg in again.into_iter().rev() {
                self.queue.push_front(Chunk::Data { bytes: seg.bytes, last_lsn: seg.last_lsn });
            }
        }
        self.fail(host, "fsync", e);
    }

    /// Writes queued chunks in order; false if one failed (it stays queued for the retry).
    fn write_queue(&mut self, host: &impl Host, policy: AppendFsync) -> bool {
        while let Some(chunk) = self.queue.front() {
            match chunk {
                Chunk::Data { bytes, last_lsn } => {
                    let last_lsn = *last_lsn;
                    if let Some(lf) = self.file.as_mut() {
                        let end = lf.write_off + bytes.len() as u64;
                        if end > lf.allocated && self.preallocate_failed.is_none_or(|t| t.elapsed() >= PREALLOCATE_RETRY) {
                            self.preallocate_failed = preallocate(lf, end + PREALLOCATE).err().map(|e| {
                                tracing::debug!("preallocating the log failed ({e}); it grows with its writes for now");
                                Instant::now()
                            });
                        }
                        if let Err(e) = lf.file.write_all_at(bytes, lf.write_off) {
                            // Drop whatever part made it, so the file never holds a half record before good ones.
                            let _ = lf.file.set_len(lf.write_off);
                            lf.allocated = lf.write_off;
                            self.fail(host, "write", e);
                            return false;
                        }
                        let start = lf.write_off;
                        lf.write_off = end;
                        lf.allocated = lf.allocated.max(end);
                        let Some(Chunk::Data { bytes, .. }) = self.queue.pop_front() else { unreachable!("front is data") };
                        // Under `no` nothing is fsynced, so there is nothing to write again later.
                        if policy != AppendFsync::No {
                            lf.unsynced.push_back(Segment { start, last_lsn, bytes });
                        }
                    } else {
                        self.queue.pop_front();
                    }
                    self.written_lsn = last_lsn;
                    host.aof().publish_written(last_lsn);
                }
                Chunk::Rotate { gen, first_lsn } => {
                    let (gen, first_lsn) = (*gen, *first_lsn);
                    if let Err(e) = self.rotate(host, gen, first_lsn) {
                        self.fail(host, "starting a new log file", e);
                        return false;
                    }
                    self.queue.pop_front();
                }
            }
        }
        true
    }

    /// Finishes the current log file (fsynced) and continues in a new one, listed in the manifest.
    fn rotate(&mut self, host: &impl Host, gen: u64, first_lsn: u64) -> std::io::Result<()> {
        if let Some(lf) = self.file.as_mut() {
            lf.file.set_len(lf.write_off)?;
            lf.file.sync_data()?;
            lf.unsynced.clear();
            host.journal().durability.publish_local(self.written_lsn);
            let fname = manifest::incr_name(&self.appendfilename, gen);
            let path = self.dir.join(&fname);
            create_log_file(&path, first_lsn)?;
            let file = OpenOptions::new().write(true).open(&path)?;
            let mut m = host.aof().manifest.lock();
            let mut next: Manifest = m.clone();
            next.incrs.push(fname);
            next.write(&manifest::path(&self.dir, &self.appendfilename))?;
            *m = next;
            self.other_files_size += lf.write_off;
            let file = Arc::new(file);
            *lf = LogFile { file, write_off: HEADER_LEN as u64, allocated: HEADER_LEN as u64, unsynced: VecDeque::new() };
        }
        host.aof().rotated_gen.store(gen, Ordering::Release);
        Ok(())
    }

    /// fsyncs when `policy` (or a durable write, or the shutdown) asks for it. `defer`: not here, but by the writer
    /// thread with the writer unlocked: the fsync is left in `deferred_fsync` for [`Writer::fsync_done`].
    fn sync_per_policy(&mut self, host: &impl Host, policy: AppendFsync, shutdown: bool, defer: bool) {
        let aof = &host.aof();
        let durability = &host.journal().durability;
        let Some(lf) = self.file.as_mut() else {
            durability.publish_local(self.written_lsn);
            return;
        };
        if self.written_lsn > durability.local() {
            let due = shutdown
                || aof.urgent_fsync.swap(false, Ordering::AcqRel)
                || policy == AppendFsync::Always
                || (policy == AppendFsync::EverySec && self.last_fsync.elapsed() >= Duration::from_secs(1));
            if due && defer && !shutdown {
                self.last_fsync = Instant::now();
                self.deferred_fsync = Some(DeferredFsync { file: lf.file.clone(), lsn: self.written_lsn });
                return;
            }
            if due {
                match lf.file.sync_data() {
                    Ok(()) => {
                        lf.unsynced.clear();
                        self.last_fsync = Instant::now();
                        durability.publish_local(self.written_lsn);
                        aof.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                        aof.stats.last_fsync_ms.store(crate::clock::wall_ms(), Ordering::Relaxed);
                    }
                    Err(e) => {
                        self.fsync_failed(host, e);
                        return;
                    }
                }
            }
        }
        if self.failing_since.is_some() && self.queue.is_empty() {
            self.failing_since = None;
            aof.set_error(None);
        }
    }

    /// The writer thread's fsync of `job`, made with the writer unlocked, is done: publish it, or handle its failure
    /// as an fsync under the lock would. Only for the file still being appended to: a rotation or a replica's new
    /// base replaced it meanwhile and fsynced (or dropped) what the old one held itself.
    fn fsync_done(&mut self, host: &impl Host, job: DeferredFsync, result: std::io::Result<()>) {
        let aof = &host.aof();
        let same_file = self.file.as_ref().is_some_and(|lf| Arc::ptr_eq(&lf.file, &job.file));
        if !same_file {
            return;
        }
        match result {
            Ok(()) => {
                host.journal().durability.publish_local(job.lsn);
                self.forget_synced(host);
                aof.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                aof.stats.last_fsync_ms.store(crate::clock::wall_ms(), Ordering::Relaxed);
                if self.failing_since.is_some() && self.queue.is_empty() {
                    self.failing_since = None;
                    aof.set_error(None);
                }
            }
            Err(e) => self.fsync_failed(host, e),
        }
    }

    /// At shutdown, with everything written and fsynced: the file ends at its last record again.
    fn cut_preallocated(&mut self) {
        if let Some(lf) = self.file.as_mut() {
            if lf.allocated > lf.write_off && lf.file.set_len(lf.write_off).and_then(|_| lf.file.sync_all()).is_ok() {
                lf.allocated = lf.write_off;
            }
        }
    }

    fn update_sizes(&mut self, host: &impl Host) {
        if host.aof().files_changed.swap(false, Ordering::AcqRel) {
            // A rewrite replaced files: recount everything but the file being appended to.
            let m = host.aof().manifest.lock().clone();
            let current = m.incrs.last().cloned();
            self.other_files_size = m
                .files()
                .filter(|f| Some(*f) != current.as_ref() || self.file.is_none())
                .filter_map(|f| std::fs::metadata(self.dir.join(f)).ok())
                .map(|md| md.len())
                .sum();
        }
        let cur = self.file.as_ref().map_or(0, |f| f.write_off);
        host.aof().stats.aof_current_size.store(self.other_files_size + cur, Ordering::Relaxed);
    }

    fn maybe_auto_rewrite(&mut self, host: &Arc<impl Host>) {
        let (pct, min) = {
            let c = host.config().read();
            (c.auto_aof_rewrite_percentage, c.auto_aof_rewrite_min_size)
        };
        if pct == 0 || self.file.is_none() || self.failing_since.is_some() {
            return;
        }
        let stats = &host.aof().stats;
        let cur = stats.aof_current_size.load(Ordering::Relaxed);
        let base = stats.aof_base_size.load(Ordering::Relaxed).max(1);
        if cur >= min && cur.saturating_sub(base) * 100 / base >= pct && !stats.rewrite_in_progress.load(Ordering::Relaxed) {
            tracing::info!("starting automatic rewrite of the append-only log ({cur} bytes, {base} after the last rewrite)");
            let _ = super::rewrite::start(host);
        }
    }
}

/// Fills the file with zeros from its current end up to `upto`. On failure the file is cut back to where it was,
/// so a full disk costs nothing but the attempt.
fn preallocate(lf: &mut LogFile, upto: u64) -> std::io::Result<()> {
    static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
    let mut at = lf.allocated.max(lf.write_off);
    while at < upto {
        let n = (upto - at).min(ZEROS.len() as u64) as usize;
        if let Err(e) = lf.file.write_all_at(&ZEROS[..n], at) {
            let _ = lf.file.set_len(lf.allocated.max(lf.write_off));
            return Err(e);
        }
        at += n as u64;
    }
    lf.allocated = upto;
    Ok(())
}
