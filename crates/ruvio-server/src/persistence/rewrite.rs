//! Compaction: writes a snapshot of the data set as of one LSN, then drops the log files it replaces.
//!
//! Consistency without stopping clients: at the start, under the store lock, the log is committed up to LSN `L`,
//! the writer is told to start a new log file at `L + 1`, and every database begins a *capture*. The snapshot is
//! then written a chunk of segments at a time, taking the store lock per chunk. A write to a key in a segment not
//! yet written first saves the key's entry as it was (see `keyspace::Db::capture_segment`), so each segment is
//! written exactly as it was at `L`. Snapshot(`L`) + the new log file (from `L + 1`) = the current state; the
//! manifest switches to that pair atomically, and only then are the old files deleted. A crash at any point leaves
//! a manifest that lists a complete, consistent set.
//!
//! Bounds: the store lock is held for one chunk (4 of 1024 segments, ~0.4% of the keys) at a time; extra memory
//! is the entries changed during the rewrite in segments not yet written (each at most once) plus one chunk's
//! encoding buffer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ruvio_protocol::Value;

use crate::journal::format::{encode_record, put_bytes, FileHeader, FileKind, RecordKind};
use super::manifest;
use crate::keyspace::{Data, Entry, SEGMENTS};
use super::Host;

const SEGMENTS_PER_CHUNK: usize = 4;

/// Starts a background rewrite. `Err` if one is already running.
pub fn start(host: &Arc<impl Host>) -> Result<(), &'static str> {
    if host.aof().stats.rewrite_in_progress.swap(true, Ordering::AcqRel) {
        return Err("in progress");
    }
    host.aof().stats.rewrite_started_ms.store(crate::clock::wall_ms(), Ordering::Relaxed);
    let for_thread = host.clone();
    let spawned = std::thread::Builder::new().name("ruvio-rewrite".into()).spawn(move || {
        let started = Instant::now();
        let result = run(&for_thread);
        finish(&for_thread, started, result);
    });
    if let Err(e) = spawned {
        tracing::error!("could not start the rewrite thread: {e}");
        host.aof().stats.rewrite_in_progress.store(false, Ordering::Release);
        return Err("could not start");
    }
    Ok(())
}

fn finish(host: &impl Host, started: Instant, result: Result<(), String>) {
    let stats = &host.aof().stats;
    stats.last_rewrite_ms.store(started.elapsed().as_millis() as i64, Ordering::Relaxed);
    let reply = match &result {
        Ok(()) => {
            stats.last_rewrite_ok.store(true, Ordering::Relaxed);
            stats.rewrites.fetch_add(1, Ordering::Relaxed);
            stats.lastsave.store(crate::clock::wall_ms() / 1000, Ordering::Relaxed);
            tracing::info!("Background append-only log rewrite finished successfully in {:.3} s", started.elapsed().as_secs_f64());
            Value::ok()
        }
        Err(e) => {
            stats.last_rewrite_ok.store(false, Ordering::Relaxed);
            tracing::warn!("Background append-only log rewrite failed: {e}");
            crate::errors::err_because(e)
        }
    };
    stats.rewrite_in_progress.store(false, Ordering::Release);
    for w in std::mem::take(&mut *host.aof().rewrite_waiters.lock()) {
        let _ = w.send(reply.clone());
    }
}

fn run(host: &Arc<impl Host>) -> Result<(), String> {
    let (dir, name) = {
        let c = host.config().read();
        (c.dir.clone(), c.appendfilename.clone())
    };
    let aof = &host.aof();
    let gen = aof.gen_alloc.fetch_add(1, Ordering::AcqRel) + 1;
    let enabled = aof.enabled();
    let tmp = dir.join(format!("{}.tmp", manifest::base_name(&name, gen)));
    let (_, size) = snapshot_to(host, &tmp, |host, lsn| {
        if enabled {
            // The new file starts exactly after `lsn`: later records go to a segment of their own.
            host.journal().seal();
            host.aof().rotations.lock().push_back((gen, lsn + 1));
            host.aof().wake_writer();
        }
    })?;
    let base = manifest::base_name(&name, gen);
    std::fs::rename(&tmp, dir.join(&base)).map_err(|e| format!("renaming the snapshot: {e}"))?;
    super::sync_dir(&dir).map_err(|e| format!("syncing {}: {e}", dir.display()))?;
    // The new log file must exist and be in the manifest before the old ones can go.
    if enabled {
        let deadline = Instant::now() + Duration::from_secs(60);
        while aof.rotated_gen.load(Ordering::Acquire) < gen {
            if Instant::now() > deadline {
                let _ = std::fs::remove_file(dir.join(&base));
                return Err("the log writer did not start the new log file (disk failing?)".into());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let old = {
        let mut m = aof.manifest.lock();
        let mut next = m.clone();
        let old: Vec<String> = m.files().filter(|f| manifest::gen_of(f) < gen).cloned().collect();
        next.base = Some(base);
        next.incrs.retain(|f| manifest::gen_of(f) >= gen);
        next.write(&manifest::path(&dir, &name)).map_err(|e| format!("writing the manifest: {e}"))?;
        *m = next;
        old
    };
    for f in old {
        if let Err(e) = std::fs::remove_file(dir.join(&f)) {
            tracing::warn!("could not remove the replaced file {f}: {e}");
        }
    }
    aof.stats.aof_base_size.store(size.max(1), Ordering::Relaxed);
    aof.files_changed.store(true, Ordering::Release);
    Ok(())
}

/// Writes a snapshot of the data set as of the last committed LSN to `path` (fsynced), without stalling clients:
/// compaction and a replica's full sync both use it, one at a time. `at_instant` runs under the store lock at the
/// snapshot's instant with its LSN (compaction starts the next log file there, a replica's stream starts after it).
/// Returns (the LSN, the file's size).
pub(crate) fn snapshot_to<H: Host>(host: &H, path: &std::path::Path, at_instant: impl FnOnce(&H, u64)) -> Result<(u64, u64), String> {
    let _one_at_a_time = host.aof().capture.lock();
    let mut buf = Vec::with_capacity(1 << 20);
    let (lsn, databases) = {
        let mut store = host.store().lock();
        let lsn = host.commit_log(&mut store);
        at_instant(host, lsn);
        for db in store.dbs.iter_mut() {
            db.begin_capture();
        }
        let wall = crate::clock::wall_ms();
        // The function libraries as of the snapshot's instant. (They once followed it as FUNCTION LOAD records: on a
        // replica those took LSNs its primary gave to other records.)
        for code in host.function_libraries(&mut store) {
            encode_record(&mut buf, lsn, wall, 0, RecordKind::Library, |o| o.extend_from_slice(&code));
        }
        let tokens = &store.locks.tokens;
        encode_record(&mut buf, lsn, wall, 0, RecordKind::Tokens, |o| {
            o.extend_from_slice(&tokens.epoch().to_le_bytes());
            o.extend_from_slice(&tokens.last().to_le_bytes());
        });
        for (db, fences) in store.locks.fences().iter().enumerate() {
            for (k, t) in fences {
                encode_record(&mut buf, lsn, wall, db as u32, RecordKind::Fence, |o| {
                    put_bytes(o, k);
                    o.extend_from_slice(&t.to_le_bytes());
                });
            }
        }
        (lsn, store.dbs.len())
    };
    let result = write_snapshot(host, path, lsn, databases, buf);
    {
        let mut store = host.store().lock();
        for db in store.dbs.iter_mut() {
            db.end_capture();
        }
    }
    match result {
        Ok(size) => Ok((lsn, size)),
        Err(e) => {
            let _ = std::fs::remove_file(path);
            Err(e)
        }
    }
}

/// Writes the snapshot file, one chunk of segments per store-lock acquisition. Returns its size.
fn write_snapshot(host: &impl Host, tmp: &std::path::Path, lsn: u64, databases: usize, mut buf: Vec<u8>) -> Result<u64, String> {
    let io = |e: std::io::Error| format!("writing the snapshot {}: {e}", tmp.display());
    let mut out = BufWriter::with_capacity(1 << 20, File::create(tmp).map_err(io)?);
    out.write_all(&FileHeader { kind: FileKind::Snapshot, lsn, created_wall_ms: crate::clock::wall_ms() }.encode()).map_err(io)?;
    out.write_all(&buf).map_err(io)?;
    let mut size = crate::journal::format::HEADER_LEN as u64 + buf.len() as u64;
    let mut keys = 0u64;
    for db in 0..databases {
        let mut seg = 0;
        while seg < SEGMENTS {
            buf.clear();
            {
                let mut store = host.store().lock();
                let d = &mut store.dbs[db];
                if !d.capture_intact() {
                    return Err("the data set was flushed or swapped during the rewrite; it will be retried".into());
                }
                // Deadlines are written as wall-clock times; one offset per chunk keeps them consistent.
                let wall_minus_mono = crate::clock::wall_ms() - crate::clock::mono_ms() as i64;
                let wall = crate::clock::wall_ms();
                for s in seg..(seg + SEGMENTS_PER_CHUNK).min(SEGMENTS) {
                    d.capture_segment(s, |k, e| {
                        keys += 1;
                        encode_key(&mut buf, lsn, wall, db as u32, k, e, wall_minus_mono);
                    });
                }
            }
            seg += SEGMENTS_PER_CHUNK;
            out.write_all(&buf).map_err(io)?;
            size += buf.len() as u64;
        }
    }
    buf.clear();
    encode_record(&mut buf, lsn, crate::clock::wall_ms(), 0, RecordKind::End, |o| o.extend_from_slice(&keys.to_le_bytes()));
    out.write_all(&buf).map_err(io)?;
    size += buf.len() as u64;
    let f = out.into_inner().map_err(|e| io(e.into_error()))?;
    f.sync_all().map_err(io)?;
    Ok(size)
}

/// Snapshot key payload; see `loader::decode_key`.
pub fn encode_key(buf: &mut Vec<u8>, lsn: u64, wall: i64, db: u32, key: &[u8], e: &Entry, wall_minus_mono: i64) {
    let to_wall = |mono: u64| (mono as i64 + wall_minus_mono).max(1);
    if let Data::Hash(h) = &e.data {
        let expire = if e.expire_at == 0 { 0 } else { to_wall(e.expire_at) };
        return super::hash_records::encode(buf, lsn, wall, db, key, expire, h);
    }
    if matches!(e.data, Data::List(_) | Data::Set(_) | Data::ZSet(_)) {
        let expire = if e.expire_at == 0 { 0 } else { to_wall(e.expire_at) };
        super::collection_records::encode(buf, lsn, wall, db, key, expire, &e.data);
        return;
    }
    encode_record(buf, lsn, wall, db, RecordKind::Key, |o| {
        let expire = if e.expire_at == 0 { 0 } else { to_wall(e.expire_at) };
        o.extend_from_slice(&expire.to_le_bytes());
        match &e.data {
            Data::Str(v) => {
                o.push(0);
                put_bytes(o, key);
                put_bytes(o, v);
            }
            Data::Lease(l) => {
                o.push(1);
                put_bytes(o, key);
                o.extend_from_slice(&l.token.to_le_bytes());
            }
            Data::Hash(_) | Data::List(_) | Data::Set(_) | Data::ZSet(_) => unreachable!("written above"),
            Data::Semaphore(s) => {
                o.push(2);
                put_bytes(o, key);
                o.extend_from_slice(&s.limit.to_le_bytes());
                o.extend_from_slice(&(s.holders.len() as u32).to_le_bytes());
                for h in &s.holders {
                    o.extend_from_slice(&h.token.to_le_bytes());
                    o.extend_from_slice(&to_wall(h.deadline).to_le_bytes());
                }
            }
        }
    });
}
