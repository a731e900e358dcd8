//! The replica's side: the link to its primary (`REPLICAOF host port`).
//!
//! It connects, asks to continue its history (`PSYNC <replid> <next lsn> <epoch> <aof> <port>`), loads a snapshot
//! when the primary sends one, then applies the stream: every record is checked (frame, CRC, the next LSN and no
//! other), applied through the execution path as [`Caller::Replay`](crate::dispatch::Caller) at the time the
//! primary logged it, and appended to this node's journal as the primary's own bytes, so this node's LSNs are the
//! primary's and its log writer persists them with its own group commit. After each batch, and as soon as an
//! fsync completes, it acknowledges `REPLCONF ACK <received> FACK <fsynced>`. A broken link is retried every second;
//! a damaged stream is refused with a log line and the link starts over (the next sync resumes or reloads).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ruvio_tls::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;

use crate::dispatch::Replayer;
use crate::keyspace::Expiry;
use crate::journal::format::{decode_command, encode_command, RecordKind, RECORD_HEADER_LEN};
use crate::shared::Shared;
use crate::workers::Workers;

/// Longest handshake line accepted from a primary.
const MAX_LINE: usize = 1024;

/// Starts a link each time this node begins to follow a primary (REPLICAOF, `replicaof` at start-up): the command
/// only changes the replication state, and the links are this task's. Runs until shutdown. A link runs on an I/O
/// worker, as connections do, so what it applies is fsynced by that worker's group commit when it goes idle
/// (`Aof::before_park`), and the acknowledgement leaves from the same thread: no hand-off to the log writer thread
/// and back per batch.
pub async fn supervise(shared: Arc<Shared>, workers: Arc<Workers>) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut started = 0;
    loop {
        let generation = shared.replication.generation();
        if shared.replication.is_replica() && generation != started {
            started = generation;
            workers.next().spawn(run(shared.clone(), generation));
        }
        tokio::select! {
            _ = shared.replication.link_wanted.notified() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

/// Runs the link until this node stops following this primary (`generation` changes) or shuts down.
async fn run(shared: Arc<Shared>, generation: u64) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        if shared.replication.generation() != generation || shared.is_shutting_down() {
            return;
        }
        let Some(up) = shared.replication.upstream() else { return };
        match session(&shared, generation, &up.host, up.port).await {
            Ok(()) => {}
            Err(e) => tracing::warn!("replication link to {}:{}: {e}", up.host, up.port),
        }
        shared.replication.link_update(generation, |u| {
            u.state = "connect";
            u.sync_in_progress = false;
        });
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

async fn session(shared: &Arc<Shared>, generation: u64, host: &str, port: u16) -> Result<(), String> {
    shared.replication.link_update(generation, |u| u.state = "connecting");
    let stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect((host, port)))
        .await
        .map_err(|_| "connecting timed out".to_string())?
        .map_err(|e| format!("connecting: {e}"))?;
    let _ = stream.set_nodelay(true);
    // A primary that vanished without closing the link (a dead machine, a cut cable) is noticed by TCP keepalive.
    let (keepalive, tls) = {
        let c = shared.config.read();
        (c.tcp_keepalive, c.tls_replication)
    };
    if keepalive > 0 {
        crate::os::set_keepalive(&stream, keepalive);
    }
    let stream = if tls {
        // `tls-replication yes`: the primary's TLS port, this node's client certificate, its CAs (read again at each
        // connection, so renewed files are picked up).
        let (config, limit) = {
            let c = shared.config.read();
            (c.tls_replica_client(), Duration::from_millis(c.tls_handshake_timeout))
        };
        let config = config.map_err(|e| format!("tls-replication: {e}"))?;
        ruvio_tls::connect(config, host, stream, limit).await.map_err(|e| format!("TLS handshake with the primary: {e}"))?
    } else {
        Stream::Plain(stream)
    };
    let (mut rd, mut wr) = tokio::io::split(stream);
    let (epoch, aof, my_port) = {
        let c = shared.config.read();
        let epoch = (shared.store.lock().locks.tokens.epoch() as u64).max(shared.replication.promised_epoch()).min(u16::MAX as u64) as u16;
        // The port this node is reached on, which its primary reports (INFO replication) and coordinators follow:
        // the TLS port when replication runs over TLS or when it is the only one (as Redis announces).
        let (plain, tls_port) = (shared.bound_port.load(std::sync::atomic::Ordering::Relaxed), shared.bound_tls_port.load(std::sync::atomic::Ordering::Relaxed));
        let port = if tls_port != 0 && (tls || plain == 0) { tls_port } else { plain };
        (epoch, c.appendonly, port)
    };
    let next_lsn = shared.journal.last_lsn() + 1;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let (user, pass) = {
        let c = shared.config.read();
        (c.masteruser.clone(), c.masterauth.clone())
    };
    if let Some(pass) = pass {
        // `masteruser`/`masterauth`: log in to a primary that requires a password (its user must be allowed PSYNC).
        let mut out = Vec::new();
        let args: Vec<Bytes> = std::iter::once("AUTH".to_string()).chain(user).chain(std::iter::once(pass)).map(Bytes::from).collect();
        encode_command(&mut out, &args);
        wr.write_all(&out).await.map_err(|e| format!("sending AUTH: {e}"))?;
        wr.flush().await.map_err(|e| format!("sending AUTH: {e}"))?;
        let line = read_line(&mut rd, &mut buf).await?;
        if !line.starts_with("+OK") {
            return Err(format!("the primary refused AUTH (masteruser/masterauth): {line}"));
        }
    }
    let mut out = Vec::new();
    let args: Vec<Bytes> = [
        "PSYNC".to_string(),
        shared.replication.replid(),
        next_lsn.to_string(),
        epoch.to_string(),
        (aof as u8).to_string(),
        my_port.to_string(),
    ]
    .into_iter()
    .map(Bytes::from)
    .collect();
    encode_command(&mut out, &args);
    wr.write_all(&out).await.map_err(|e| format!("sending PSYNC: {e}"))?;
    wr.flush().await.map_err(|e| format!("sending PSYNC: {e}"))?;
    let line = read_line(&mut rd, &mut buf).await?;
    let words: Vec<&str> = line.split(' ').collect();
    let primary_epoch;
    match words.as_slice() {
        ["+FULLRESYNC", replid, lsn, their_epoch] => {
            let lsn: u64 = lsn.parse().map_err(|_| format!("bad reply to PSYNC: {line}"))?;
            let their_epoch = parse_epoch(their_epoch, epoch, &line)?;
            primary_epoch = their_epoch;
            shared.replication.link_update(generation, |u| {
                u.state = "sync";
                u.sync_in_progress = true;
            });
            let size_line = read_line(&mut rd, &mut buf).await?;
            let size: u64 = size_line.strip_prefix('$').and_then(|s| s.parse().ok()).ok_or_else(|| format!("bad snapshot header: {size_line}"))?;
            let dir = shared.config.read().dir.clone();
            let path = dir.join("replica-sync-from-primary.tmp");
            receive_file(&mut rd, &mut buf, &path, size).await?;
            let (sh, p) = (shared.clone(), path.clone());
            let started = Instant::now();
            tokio::task::spawn_blocking(move || load_snapshot(&sh, &p, lsn, their_epoch)).await.map_err(|e| e.to_string())??;
            shared.replication.adopt_history(replid.to_string());
            tracing::info!("replication: loaded the primary's snapshot of LSN {lsn} ({size} bytes) in {:?}", started.elapsed());
        }
        ["+CONTINUE", replid, their_epoch] => {
            let their_epoch = parse_epoch(their_epoch, epoch, &line)?;
            primary_epoch = their_epoch;
            shared.store.lock().locks.tokens.set_epoch(their_epoch);
            shared.replication.adopt_history(replid.to_string());
            tracing::info!("replication: continuing from LSN {next_lsn}");
        }
        _ => return Err(format!("the primary refused PSYNC: {line}")),
    }
    shared.replication.link_update(generation, |u| {
        u.state = "connected";
        u.sync_in_progress = false;
        u.last_io = Some(Instant::now());
    });
    apply_stream(shared, generation, &mut rd, &mut wr, buf, aof, primary_epoch).await
}

fn parse_epoch(word: &str, mine: u16, line: &str) -> Result<u16, String> {
    let e: u16 = word.parse().map_err(|_| format!("bad reply to PSYNC: {line}"))?;
    if e > crate::locks::tokens::MAX_EPOCH {
        // Refused, not clamped: taking it would leave this node at the last epoch (docs/fencing.md).
        return Err(format!("the primary claims epoch {e}, above the largest failover epoch {}: refusing its stream", crate::locks::tokens::MAX_EPOCH));
    }
    if e < mine {
        return Err(format!("the primary is at epoch {e}, older than this node's {mine}: refusing its stream"));
    }
    Ok(e)
}

async fn read_line(rd: &mut ReadHalf<Stream>, buf: &mut BytesMut) -> Result<String, String> {
    loop {
        if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
            let line = buf.split_to(i + 2);
            return Ok(String::from_utf8_lossy(&line[..i]).into_owned());
        }
        if buf.len() > MAX_LINE {
            return Err("the primary sent an overlong line".into());
        }
        let n = tokio::time::timeout(Duration::from_secs(60), rd.read_buf(buf))
            .await
            .map_err(|_| "the primary did not answer".to_string())?
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the primary closed the link".into());
        }
    }
}

/// Writes the next `size` bytes of the link to `path` (fsynced).
async fn receive_file(rd: &mut ReadHalf<Stream>, buf: &mut BytesMut, path: &Path, size: u64) -> Result<(), String> {
    let io = |e: std::io::Error| format!("receiving the snapshot into {}: {e}", path.display());
    let mut f = tokio::fs::File::create(path).await.map_err(io)?;
    let mut left = size;
    loop {
        let take = (buf.len() as u64).min(left) as usize;
        if take > 0 {
            f.write_all(&buf.split_to(take)).await.map_err(io)?;
            left -= take as u64;
        }
        if left == 0 {
            break;
        }
        let n = tokio::time::timeout(Duration::from_secs(60), rd.read_buf(buf)).await.map_err(|_| "the snapshot stalled".to_string())?.map_err(io)?;
        if n == 0 {
            return Err("the primary closed the link during the snapshot".into());
        }
    }
    f.sync_all().await.map_err(io)?;
    Ok(())
}

/// Replaces this node's data with the primary's snapshot of LSN `lsn` (clients get -LOADING meanwhile). The
/// snapshot is checked completely first, changing nothing: a damaged, truncated or foreign one leaves this node
/// serving the data it had, with its files (which describe that data) untouched; the link then starts over.
fn load_snapshot(shared: &Arc<Shared>, path: &Path, lsn: u64, epoch: u16) -> Result<(), String> {
    let checked = crate::persistence::loader::check_snapshot(shared, path).and_then(|(snap_lsn, _, _)| {
        if snap_lsn != lsn {
            return Err(format!("the snapshot is of LSN {snap_lsn}, the primary announced {lsn}"));
        }
        Ok(())
    });
    if let Err(e) = checked {
        let _ = std::fs::remove_file(path);
        return Err(format!("refused the primary's snapshot, keeping this node's data: {e}"));
    }
    shared.loading.store(true, std::sync::atomic::Ordering::Release);
    let result = (|| {
        {
            let mut store = shared.store.lock();
            store.flush(None);
            store.log.clear();
            store.locks.tokens.set_epoch(epoch);
        }
        crate::persistence::loader::load_snapshot(shared, path, crate::persistence::loader::Clock::Primary)?;
        {
            let mut store = shared.store.lock();
            store.log.clear();
            store.set_expiry(Expiry::Hidden);
        }
        crate::persistence::writer::install_base(shared, path, lsn)
    })();
    if result.is_err() {
        // Past the check (the disk failed us, or a function library did not load): memory no longer matches this
        // node's history, so the next sync must be a snapshot, never a resume.
        shared.replication.forget_history();
    }
    shared.loading.store(false, std::sync::atomic::Ordering::Release);
    result
}

async fn apply_stream(
    shared: &Arc<Shared>,
    generation: u64,
    rd: &mut ReadHalf<Stream>,
    wr: &mut WriteHalf<Stream>,
    mut buf: BytesMut,
    aof: bool,
    primary_epoch: u16,
) -> Result<(), String> {
    let mut shutdown = shared.shutdown.subscribe();
    let mut replayer = Replayer::new();
    let mut sent = (u64::MAX, u64::MAX);
    let mut sent_at = Instant::now();
    loop {
        // A promise to a newer epoch (a failover under way) ends this link: no more records from, nor
        // acknowledgements to, the old primary.
        let promised = shared.replication.promised_epoch();
        if promised > primary_epoch as u64 {
            return Err(format!("promised epoch {promised}: no longer following a primary of epoch {primary_epoch}"));
        }
        let expected = shared.journal.last_lsn() + 1;
        let (end, last, damage) = complete_records(&buf, expected);
        if end > 0 {
            let bytes = buf.split_to(end).freeze();
            apply(shared, &mut replayer, &bytes, expected, last)?;
        }
        if let Some(damage) = damage {
            // Nothing after the damage is trusted: the next sync starts from a snapshot.
            shared.replication.forget_history();
            return Err(damage);
        }
        let received = shared.journal.last_lsn();
        let fsynced = if aof { shared.journal.durability.local().min(received) } else { 0 };
        // Under `appendfsync always` the batch just applied is fsynced as soon as this worker goes idle: an
        // acknowledgement of its receipt alone would only be followed by the one of its fsync, at twice the
        // wake-ups on both nodes (Redis's replica under `always` also fsyncs before it acknowledges).
        let fsync_imminent = aof && fsynced < received && shared.aof.syncs_every_commit();
        // At least once a second even when nothing changed: the primary's min-replicas-max-lag counts on it.
        // A completed fsync is acknowledged at once, even while more records arrive.
        let due = fsynced != sent.1 || (received != sent.0 && !fsync_imminent) || sent_at.elapsed() >= Duration::from_secs(1);
        if due && shared.replication.promised_epoch() <= primary_epoch as u64 {
            let mut out = Vec::new();
            let ack: Vec<Bytes> = vec![
                Bytes::from_static(b"REPLCONF"),
                Bytes::from_static(b"ACK"),
                Bytes::from(received.to_string()),
                Bytes::from_static(b"FACK"),
                Bytes::from(fsynced.to_string()),
            ];
            encode_command(&mut out, &ack);
            wr.write_all(&out).await.map_err(|e| format!("sending an acknowledgement: {e}"))?;
            wr.flush().await.map_err(|e| format!("sending an acknowledgement: {e}"))?;
            sent = (received, fsynced);
            sent_at = Instant::now();
        }
        let need = crate::journal::Need::local(received);
        tokio::select! {
            read = rd.read_buf(&mut buf) => {
                match read {
                    Ok(0) => return Err("the primary closed the link".into()),
                    Ok(_) => shared.replication.link_update(generation, |u| u.last_io = Some(Instant::now())),
                    Err(e) => return Err(format!("reading the stream: {e}")),
                }
            }
            _ = shared.journal.durability.wait(need), if aof && fsynced < received => {}
            _ = shutdown.wait_for(|s| *s) => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        if shared.replication.generation() != generation {
            return Ok(());
        }
    }
}

/// How many bytes at the front of `buf` are whole records, checked: framing, CRC, consecutive LSNs from
/// `expected`, command records only. Returns that length, the last LSN among them, and what is wrong with the
/// record after them, if anything (the good records before a damaged one are still applied).
fn complete_records(buf: &[u8], expected: u64) -> (usize, u64, Option<String>) {
    let mut at = 0;
    let mut lsn = expected;
    let mut damage = None;
    while buf.len() - at >= RECORD_HEADER_LEN {
        let h = &buf[at..at + RECORD_HEADER_LEN];
        let len = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes")) as usize;
        if buf.len() - at < RECORD_HEADER_LEN + len {
            break;
        }
        let crc = crc32fast::hash(&buf[at + 8..at + RECORD_HEADER_LEN + len]);
        let got = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
        if crc != u32::from_le_bytes(h[4..8].try_into().expect("4 bytes")) {
            damage = Some(format!("damaged stream: record {lsn} fails its checksum; starting over"));
        } else if got != lsn {
            damage = Some(format!("damaged stream: record {got} where {lsn} was expected; starting over"));
        } else if h[28] != RecordKind::Command as u8 {
            damage = Some(format!("damaged stream: record {lsn} is not a command; starting over"));
        }
        if damage.is_some() {
            break;
        }
        at += RECORD_HEADER_LEN + len;
        lsn += 1;
    }
    (at, lsn - 1, damage)
}

/// Applies checked records `first..=last` (`bytes`) and appends them to this node's journal as they are.
fn apply(shared: &Arc<Shared>, replayer: &mut Replayer, bytes: &[u8], first: u64, last: u64) -> Result<(), String> {
    let mut guard = Some(shared.store.lock());
    guard.as_mut().expect("locked").set_expiry(Expiry::Ignored);
    let mut at = 0;
    let mut failure = None;
    while at < bytes.len() {
        let h = &bytes[at..at + RECORD_HEADER_LEN];
        let len = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes")) as usize;
        let lsn = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
        let wall = i64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
        let db = u32::from_le_bytes(h[24..28].try_into().expect("4 bytes")) as usize;
        let payload = &bytes[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + len];
        at += RECORD_HEADER_LEN + len;
        let mut args = match decode_command(payload) {
            Ok(a) => a,
            Err(e) => {
                failure = Some(format!("record {lsn}: {e}"));
                break;
            }
        };
        // The record's times are on the primary's wall clock. It is applied as of now on this node's clock, and a
        // lock deadline moves by as much, so every holder keeps at least the time it had left when the primary
        // wrote the record, whatever this clock says: a replica whose clock ran ahead would otherwise see the
        // leases as expired and, once promoted, grant them again (found by the fault suite's clock nemesis).
        // A record read late (catching up) only keeps its holders longer. The journal keeps the primary's bytes.
        let skew = crate::clock::wall_ms() - wall;
        crate::locks::records::shift_deadline(&mut args, skew);
        let wall = wall + skew;
        if db >= guard.as_ref().map_or(0, |g| g.dbs.len()) {
            failure = Some(format!("record {lsn}: database {db} does not exist here (databases differ)"));
            break;
        }
        match replayer.try_apply(shared, &mut guard, db, &args, wall) {
            Ok(reply) if reply.is_error() => {
                tracing::warn!("replicated record {lsn} ({}) answered {:?}", String::from_utf8_lossy(&args[0]), reply);
            }
            Ok(_) => {}
            Err(e) => {
                failure = Some(format!("record {lsn}: cannot apply '{}': {e:?}", String::from_utf8_lossy(&args[0])));
                break;
            }
        }
        if guard.is_none() {
            guard = Some(shared.store.lock());
        }
        // The primary's record is what goes into this node's log, not what replaying it staged.
        guard.as_mut().expect("locked").log.clear();
    }
    let store = guard.as_mut().expect("locked");
    store.set_expiry(Expiry::Hidden);
    if let Some(f) = failure {
        // Records before the bad one were applied but not journaled: the next sync must not trust this history.
        shared.replication.forget_history();
        return Err(format!("damaged stream: {f}; this replica will sync again from a snapshot"));
    }
    let open = shared.journal.append_replicated(store, bytes, first, last);
    drop(guard);
    // Replicas acknowledge each fsync as soon as it is done: under `always` this worker's group commit fsyncs the
    // batch when it goes idle; otherwise the writer is woken to write it now.
    shared.aof.committed(open);
    shared.aof.write_soon();
    Ok(())
}
