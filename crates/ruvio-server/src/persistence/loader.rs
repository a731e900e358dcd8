//! Start-up loading: the snapshot named by the manifest, then each log file, whose records the loader checks and
//! hands to a [`Replay`]: the server's own execution path (`dispatch::LoadReplay`), so every command (including the
//! lock engine's internal records) means the same at replay as when it ran. Persistence reads files; what a
//! command means is not its business.
//!
//! Replay runs each record at the time it originally ran (the record's wall-clock time mapped to the monotonic
//! clock, `ctx.now`), so anything a handler decides by time (a holder that had expired, a deadline) comes out as it
//! did. Deadlines inside records are absolute wall-clock times; what has expired since is removed after loading.
//!
//! Faults: the last log file may end inside a record (a crash during a write); that tail is cut off with a warning
//! if `aof-load-truncated` is yes. Anything else that fails its checksum or framing stops the server with the file
//! and offset.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use bytes::Bytes;
use parking_lot::MutexGuard;

use super::manifest::{self, Manifest};
use super::Host;
use crate::journal::format::{decode_command, open_reader, Cursor, FileKind, ReadError, Record, RecordKind};
use crate::keyspace::{CompactBytes, Data, Entry};
use crate::keyspace::{Holder, Lease, Semaphore};

/// Runs the log's commands while loading (implemented by the execution path, `dispatch::LoadReplay`).
pub trait Replay {
    /// Runs `args` on database `db` as at `wall_ms` (the Unix ms it was logged at). `Err`: the record cannot run
    /// here at all (an unknown command, a wrong arity, no such database: a damaged or foreign log);
    /// `Ok(Some(reply))`: the command answered this error.
    fn apply(&mut self, db: usize, args: &[Bytes], wall_ms: i64) -> Result<Option<String>, String>;
    /// Drops a transaction the records opened but never ended (a log cut inside MULTI ... EXEC); true if there
    /// was one.
    fn abandon_transaction(&mut self) -> bool;
    /// The last record of the data set ran: let go of the store.
    fn finish(&mut self);
}

pub struct Loaded {
    pub manifest: Manifest,
    /// The last log file and its length after any trimming: the writer appends there.
    pub current: Option<(PathBuf, u64)>,
    pub next_lsn: u64,
    pub keys: u64,
    pub records: u64,
    /// Bytes of every file loaded.
    pub total_size: u64,
}

fn at(path: &Path, e: &ReadError) -> String {
    format!("{} at offset {}: {}", path.display(), e.offset(), e.reason())
}

pub fn load(host: &impl Host, replay: &mut dyn Replay) -> Result<Loaded, String> {
    let (dir, name, load_truncated) = {
        let c = host.config().read();
        (c.dir.clone(), c.appendfilename.clone(), c.aof_load_truncated)
    };
    let mpath = manifest::path(&dir, &name);
    let Some(m) = Manifest::read(&mpath)? else {
        // Without a manifest the server would start empty and begin a new log file, and so could overwrite the
        // data these files hold: refuse instead, and say which files and what to do.
        let orphans = manifest::data_files(&dir, &name).map_err(|e| format!("reading {}: {e}", dir.display()))?;
        if !orphans.is_empty() {
            let list: Vec<String> = orphans.iter().map(|(f, len)| format!("{f} ({len} bytes)")).collect();
            return Err(format!(
                "the manifest {} is missing, but {} holds data files: {}. Ruvio will not start without the manifest, so that it cannot overwrite them. Restore the manifest, or write one that lists them ('base <file>' first if there is one, then 'incr <file>' lines, oldest first; `ruvio check-aof {}` then checks them), or move the files away to start empty",
                mpath.display(),
                dir.display(),
                list.join(", "),
                mpath.display()
            ));
        }
        return Ok(Loaded { manifest: Manifest::default(), current: None, next_lsn: 1, keys: 0, records: 0, total_size: 0 });
    };
    let mut out = Loaded { manifest: m.clone(), current: None, next_lsn: 0, keys: 0, records: 0, total_size: 0 };
    let mut expected_lsn: Option<u64> = None;
    if let Some(base) = &m.base {
        let path = dir.join(base);
        let (lsn, keys, size) = load_snapshot(host, &path, Clock::Own)?;
        expected_lsn = Some(lsn + 1);
        out.keys = keys;
        out.total_size += size;
    }
    let mut replay = LogFiles { replay, records: 0, failed: 0 };
    for (i, incr) in m.incrs.iter().enumerate() {
        let path = dir.join(incr);
        let last = i + 1 == m.incrs.len();
        let (next, len) = replay.file(&path, expected_lsn, last, load_truncated)?;
        expected_lsn = Some(next);
        out.total_size += len;
        if last {
            out.current = Some((path, len));
        }
    }
    replay.finish();
    out.records = replay.records;
    out.next_lsn = expected_lsn.unwrap_or(1);
    host.aof().stats.loaded_records.store(out.records, Ordering::Relaxed);
    Ok(out)
}

/// Whose wall clock a snapshot's deadlines are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// This node's (its own snapshot, at start-up).
    Own,
    /// Its primary's (a full sync): lock deadlines are moved by how far this clock is from the snapshot's creation
    /// time, so each holder keeps at least the time it had left then (as `replication::replica` does for records).
    Primary,
}

/// Loads a snapshot file directly into the store. Returns (its LSN, keys, file size).
pub(crate) fn load_snapshot(host: &impl Host, path: &Path, clock: Clock) -> Result<(u64, u64, u64), String> {
    read_snapshot(host, path, clock, false)
}

/// Reads and decodes every record of a snapshot file exactly as [`load_snapshot`] does (framing, checksums, each
/// key, fence and token record, the databases it names, the end marker and nothing after it), changing nothing.
/// A replica runs it on the snapshot its primary sent before it empties its memory for it, so a damaged one leaves
/// it serving its data. (Function libraries are only compiled when loaded.) Returns (its LSN, keys, file size).
pub(crate) fn check_snapshot(host: &impl Host, path: &Path) -> Result<(u64, u64, u64), String> {
    read_snapshot(host, path, Clock::Own, true)
}

/// [`load_snapshot`], or with `check_only` [`check_snapshot`].
fn read_snapshot(host: &impl Host, path: &Path, clock: Clock, check_only: bool) -> Result<(u64, u64, u64), String> {
    let mut r = open_reader(path).map_err(|e| format!("opening {}: {e}", path.display()))?.map_err(|e| at(path, &e))?;
    if r.header.kind != FileKind::Snapshot {
        return Err(format!("{} is not a snapshot file", path.display()));
    }
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let lock_shift = match clock {
        Clock::Own => 0,
        Clock::Primary => crate::clock::wall_ms() - r.header.created_wall_ms,
    };
    let shifted = |deadline: u64| if deadline == 0 { 0 } else { (deadline as i64).saturating_add(lock_shift).max(1) as u64 };
    let mut keys = 0;
    let hash_limits = host.config().read().hash_limits();
    let collection_limits = host.config().read().collection_limits();
    let databases = host.store().lock().dbs.len();
    let mut store = (!check_only).then(|| host.store().lock());
    let mut ended = false;
    let mut spare = Vec::new();
    let mut libraries = Vec::new();
    loop {
        let mut rec = match r.next_record_reusing(std::mem::take(&mut spare)) {
            Ok(Some(rec)) => rec,
            Ok(None) => break,
            Err(e) => return Err(format!("the snapshot {} is damaged: {}", path.display(), at(path, &e))),
        };
        if ended {
            return Err(format!("{} at offset {}: data after the end marker", path.display(), rec.offset));
        }
        let db = rec.db as usize;
        if db >= databases && matches!(rec.kind, RecordKind::Key | RecordKind::Fence) {
            return Err(format!("{} at offset {}: database {db} does not exist (databases is {databases})", path.display(), rec.offset));
        }
        let bad = |reason: String| format!("{} at offset {}: {reason}", path.display(), rec.offset);
        match rec.kind {
            RecordKind::Key => {
                let (key, mut entry) = decode_key(&rec.payload).map_err(bad)?;
                let Some(store) = store.as_mut() else {
                    keys += 1;
                    spare = rec.payload;
                    continue;
                };
                // Lock holders need their deadlines on the lock timer, as a grant would have put them there.
                match &mut entry.data {
                    Data::Lease(l) => {
                        entry.expire_at = shifted(entry.expire_at);
                        store.locks.tokens.observe(l.token);
                        store.locks.arm(entry.expire_at, db, key);
                    }
                    Data::Semaphore(s) => {
                        entry.expire_at = shifted(entry.expire_at);
                        s.holders.iter_mut().for_each(|h| h.deadline = shifted(h.deadline));
                        for h in &s.holders {
                            store.locks.tokens.observe(h.token);
                            store.locks.arm(h.deadline, db, key);
                        }
                    }
                    Data::Str(_) => {}
                    Data::Hash(_) => {
                        // A large hash comes in several records (see hash_records): the first makes it.
                        if super::hash_records::merge(&mut store.dbs[db], key, &mut entry, &hash_limits) {
                            continue;
                        }
                    }
                    Data::List(_) | Data::Set(_) | Data::ZSet(_) => {
                        // Likewise for the collections (collection_records).
                        if super::collection_records::merge(&mut store.dbs[db], key, &mut entry, &collection_limits) {
                            continue;
                        }
                    }
                }
                store.dbs[db].insert(key, entry);
                keys += 1;
                if keys % 65536 == 0 {
                    // Let INFO in while a large snapshot loads.
                    MutexGuard::bump(store);
                }
            }
            RecordKind::Fence => {
                let mut c = Cursor::new(&rec.payload);
                let key = c.bytes().map_err(bad)?.to_vec();
                let token = c.i64().map_err(bad)?;
                if !c.done() {
                    return Err(bad("trailing bytes in a fence record".into()));
                }
                if let Some(store) = store.as_mut() {
                    store.locks.fences_mut(db).insert(CompactBytes::from_vec(key), token);
                }
            }
            RecordKind::Tokens => {
                let mut c = Cursor::new(&rec.payload);
                let epoch = c.u16().map_err(bad)?;
                let last = c.i64().map_err(bad)?;
                if let Some(store) = store.as_mut() {
                    store.locks.tokens.set_epoch(epoch);
                    store.locks.tokens.observe(last);
                }
            }
            RecordKind::Library => {
                libraries.push(bytes::Bytes::from(std::mem::take(&mut rec.payload)));
                continue;
            }
            RecordKind::End => ended = true,
            RecordKind::Command => return Err(bad("a command record inside a snapshot".into())),
        }
        spare = rec.payload;
    }
    if !ended {
        return Err(format!("the snapshot {} is incomplete (no end marker)", path.display()));
    }
    // Only the snapshot's libraries: a replica's full sync drops those its primary no longer has.
    if let Some(store) = store.as_mut() {
        host.replace_function_libraries(store, &libraries).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok((r.header.lsn, keys, size))
}

/// Snapshot key payload: expire (wall ms, 0 = none) i64, type u8, key, value by type.
pub fn decode_key(p: &[u8]) -> Result<(&[u8], Entry), String> {
    let mut c = Cursor::new(p);
    let expire_wall = c.i64()?;
    let ty = c.u8()?;
    let key = c.bytes()?;
    let data = match ty {
        0 => Data::Str(CompactBytes::new(c.bytes()?)),
        1 => Data::Lease(Box::new(Lease { token: c.i64()? })),
        3 => Data::Hash(super::hash_records::decode(&mut c)?),
        4..=6 => super::collection_records::decode(ty, &mut c)?,
        2 => {
            let limit = c.u32()?;
            let n = c.u32()? as usize;
            let mut holders = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                let token = c.i64()?;
                let deadline_wall = c.i64()?;
                holders.push(Holder { token, deadline: crate::clock::wall_to_mono(deadline_wall) });
            }
            Data::Semaphore(Box::new(Semaphore { limit, holders }))
        }
        t => return Err(format!("unknown value type {t}")),
    };
    if !c.done() {
        return Err("trailing bytes in a key record".into());
    }
    let expire_at = if expire_wall == 0 { 0 } else { crate::clock::wall_to_mono(expire_wall) };
    Ok((key, Entry { data, expire_at }))
}

/// Reads log files and hands their records to the [`Replay`] in order.
struct LogFiles<'r> {
    replay: &'r mut dyn Replay,
    records: u64,
    failed: u64,
}

impl LogFiles<'_> {
    /// Replays one log file; returns (the LSN after its last record, its length after trimming).
    fn file(&mut self, path: &Path, expected: Option<u64>, last: bool, load_truncated: bool) -> Result<(u64, u64), String> {
        let mut r = open_reader(path).map_err(|e| format!("opening {}: {e}", path.display()))?.map_err(|e| format!("{}: {}", at(path, &e), "the log file header is damaged"))?;
        if r.header.kind != FileKind::Log {
            return Err(format!("{} is not a log file", path.display()));
        }
        if let Some(exp) = expected {
            if r.header.lsn != exp {
                return Err(format!("{}: starts at record {} but {} was expected (a file is missing from the manifest's list)", path.display(), r.header.lsn, exp));
            }
        }
        let mut next = r.header.lsn;
        loop {
            match r.next_record() {
                Ok(Some(rec)) => {
                    if rec.lsn != next {
                        return Err(format!("{} at offset {}: record number {} where {} was expected", path.display(), rec.offset, rec.lsn, next));
                    }
                    next += 1;
                    self.apply(path, rec)?;
                }
                Ok(None) => break,
                Err(ReadError::Truncated { offset, reason }) if last => {
                    if !load_truncated {
                        return Err(format!("{} at offset {offset}: {reason}. The log ends inside a record (a crash during a write). Start with aof-load-truncated yes, or run `ruvio check-aof --fix {}`, to drop the incomplete tail", path.display(), path.display()));
                    }
                    tracing::warn!("!!! Warning: short read while loading the append-only log {} at offset {offset} ({reason}) !!!", path.display());
                    tracing::warn!("The incomplete tail was cut off (aof-load-truncated is yes); the log continues from offset {offset}");
                    let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| format!("opening {} to trim it: {e}", path.display()))?;
                    f.set_len(offset).and_then(|_| f.sync_all()).map_err(|e| format!("trimming {}: {e}", path.display()))?;
                    break;
                }
                Err(e) => {
                    return Err(format!("Bad file format reading the append only file {}: corruption at offset {}: {}. Run `ruvio check-aof {}` for details; the server will not start on damaged data", path.display(), e.offset(), e.reason(), path.display()));
                }
            }
        }
        if self.replay.abandon_transaction() {
            tracing::warn!("Revert incomplete MULTI/EXEC transaction in the append-only log {}", path.display());
        }
        Ok((next, r.offset))
    }

    fn apply(&mut self, path: &Path, rec: Record) -> Result<(), String> {
        if rec.kind != RecordKind::Command {
            return Err(format!("{} at offset {}: a snapshot record inside a log file", path.display(), rec.offset));
        }
        let args = decode_command(&rec.payload).map_err(|e| format!("{} at offset {}: {e}", path.display(), rec.offset))?;
        let reply = self.replay.apply(rec.db as usize, &args, rec.wall_ms).map_err(|e| {
            format!("{} at offset {}: cannot replay '{}': {e}", path.display(), rec.offset, String::from_utf8_lossy(&args[0]))
        })?;
        if let Some(error) = reply {
            self.failed += 1;
            if self.failed <= 10 {
                tracing::warn!("replaying {} at offset {}: {} answered {error}", path.display(), rec.offset, String::from_utf8_lossy(&args[0]));
            }
        }
        self.records += 1;
        Ok(())
    }

    fn finish(&mut self) {
        if self.failed > 0 {
            tracing::warn!("{} replayed commands answered an error", self.failed);
        }
        self.replay.finish();
    }
}
