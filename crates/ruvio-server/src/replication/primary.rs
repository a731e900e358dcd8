//! The primary's side of one replica link: after `PSYNC` the client connection is handed over here.
//!
//! 1. Resume or full sync: a replica of this history (same replication id) whose next LSN the backlog still holds
//!    gets `+CONTINUE <replid> <epoch>` and the records from there. Otherwise `+FULLRESYNC <replid> <lsn> <epoch>`,
//!    then `$<size>` and a snapshot of LSN `lsn` (written like a compaction snapshot: clients are not stalled, memory
//!    is bounded), then the records from `lsn + 1`. The journal cursor is opened at the snapshot's instant.
//! 2. The stream: the journal's bytes as they are committed. A replica that falls behind the backlog
//!    (`repl-backlog-size`) is disconnected; it reconnects and takes a new snapshot.
//! 3. Acknowledgements: `REPLCONF ACK <received> FACK <fsynced>` from the replica go to the journal's durability
//!    tracking at once, which answers the durable writes waiting for them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ruvio_protocol::{RequestLimits, RequestParser};
use ruvio_tls::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};

use crate::client::Handover;
use crate::journal::{ConsumerId, ReadError};
use crate::shared::Shared;

/// `repl-timeout`: a replica that sent no acknowledgement, or took no part of its snapshot, for this long is
/// disconnected (Redis's name; default 60 s).
fn repl_timeout(shared: &Shared) -> Duration {
    Duration::from_secs(shared.config.read().repl_timeout)
}

/// Serves one replica until the link breaks, this node stops being a primary, or the server shuts down.
pub async fn serve(shared: Arc<Shared>, stream: Stream, req: Handover) {
    let ip = stream.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    // From the first replica on, every write is journaled (as Redis creates its backlog then), appendonly or not.
    shared.store.lock().log_enabled = true;
    let id = shared.replication.add_downstream(ip.clone(), req.port, req.aof);
    shared.journal.reader_started();
    let result = stream_to(&shared, stream, &req, id).await;
    shared.journal.reader_stopped();
    shared.replication.remove_downstream(id);
    shared.journal.durability.replica_gone(id);
    match result {
        Ok(()) => tracing::info!("replica {ip}:{} disconnected", req.port),
        Err(e) => tracing::warn!("replica {ip}:{} lost: {e}", req.port),
    }
}

async fn stream_to(shared: &Arc<Shared>, stream: Stream, req: &Handover, id: u64) -> Result<(), String> {
    let _ = stream.tcp().set_nodelay(true);
    let generation = shared.replication.generation();
    let epoch = shared.store.lock().locks.tokens.epoch();
    // Plain TCP or TLS alike (a replica with `tls-replication yes` came in on the TLS port).
    let (mut rd, mut wr) = tokio::io::split(stream);
    if req.epoch > epoch {
        // The replica has seen a later failover than this node: this node is a stale primary.
        let msg = format!("-ERR this primary is at epoch {epoch}, older than the replica's {}\r\n", req.epoch);
        let _ = wr.write_all(msg.as_bytes()).await;
        let _ = wr.flush().await;
        return Err(format!("refused: the replica is at epoch {}, this primary at {epoch}", req.epoch));
    }
    let replid = shared.replication.replid();
    let resumed = shared.replication.continues(&req.replid, req.next_lsn).then(|| shared.journal.subscribe(req.next_lsn, false).ok()).flatten();
    // What the replica holds once the sync is done: the LSN before its next one, or the snapshot's.
    let mut holds = req.next_lsn.saturating_sub(1);
    let cursor = match resumed {
        Some(c) => {
            shared.replication.partial_syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!("replica {}: resuming from LSN {}", req.port, req.next_lsn);
            wr.write_all(format!("+CONTINUE {replid} {epoch}\r\n").as_bytes()).await.map_err(|e| e.to_string())?;
            wr.flush().await.map_err(|e| e.to_string())?;
            c
        }
        None => {
            let (cursor, lsn) = full_sync(shared, &mut wr, id, &replid, epoch).await?;
            holds = lsn;
            cursor
        }
    };
    // The silence clock (repl-timeout) starts with the stream, not with a snapshot that took long to make or send.
    shared.replication.update_downstream(id, |d| {
        d.state = "online";
        d.last_ack = Instant::now();
    });
    let result = stream_records(shared, &mut rd, &mut wr, cursor, id, generation, req.aof, holds).await;
    shared.journal.unsubscribe(cursor);
    result
}

/// Sends a snapshot; returns the cursor the stream continues from and the snapshot's LSN.
async fn full_sync(shared: &Arc<Shared>, wr: &mut WriteHalf<Stream>, id: u64, replid: &str, epoch: u16) -> Result<(ConsumerId, u64), String> {
    shared.replication.full_syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = shared.config.read().dir.clone();
    let path = dir.join(format!("replica-sync-{id}.tmp"));
    let (sh, p) = (shared.clone(), path.clone());
    let started = Instant::now();
    let snap = tokio::task::spawn_blocking(move || {
        let mut cursor = None;
        let r = crate::persistence::rewrite::snapshot_to(&sh, &p, |s, lsn| cursor = Some(s.journal.subscribe(lsn + 1, false)));
        r.map(|(lsn, size)| (lsn, size, cursor))
    })
    .await
    .map_err(|e| e.to_string())?;
    let (lsn, size, cursor) = snap?;
    let cursor = cursor.expect("set at the snapshot's instant").map_err(|e| format!("{e:?}"))?;
    tracing::info!("replica {id}: full sync, snapshot of LSN {lsn} ({size} bytes) written in {:?}", started.elapsed());
    shared.replication.update_downstream(id, |d| d.state = "send_bulk");
    // A peer that asked for a snapshot and does not read it must not hold the file (or this task) for ever: every
    // part of the transfer must go within repl-timeout (Redis bounds its bulk transfer the same way), and the file
    // is unlinked as soon as it is open, so its space goes with the transfer however that ends.
    let timeout = repl_timeout(shared);
    let stalled = || std::io::Error::new(std::io::ErrorKind::TimedOut, format!("the replica took no part of the snapshot for {} s (repl-timeout)", timeout.as_secs()));
    let mut shutdown = shared.shutdown.subscribe();
    let send = async {
        let mut f = tokio::fs::File::open(&path).await?;
        let _ = tokio::fs::remove_file(&path).await;
        let header = format!("+FULLRESYNC {replid} {lsn} {epoch}\r\n${size}\r\n");
        tokio::time::timeout(timeout, wr.write_all(header.as_bytes())).await.map_err(|_| stalled())??;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = f.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            tokio::time::timeout(timeout, wr.write_all(&chunk[..n])).await.map_err(|_| stalled())??;
        }
        tokio::time::timeout(timeout, wr.flush()).await.map_err(|_| stalled())?
    };
    let sent = tokio::select! {
        r = send => r,
        _ = shutdown.wait_for(|s| *s) => Err(std::io::Error::other("shutting down")),
    };
    // Already gone unless opening it failed.
    let _ = tokio::fs::remove_file(&path).await;
    if let Err(e) = sent {
        shared.journal.unsubscribe(cursor);
        return Err(format!("sending the snapshot: {e}"));
    }
    Ok((cursor, lsn))
}

async fn stream_records(
    shared: &Arc<Shared>,
    rd: &mut ReadHalf<Stream>,
    wr: &mut WriteHalf<Stream>,
    cursor: ConsumerId,
    id: u64,
    generation: u64,
    aof: bool,
    holds: u64,
) -> Result<(), String> {
    // The last LSN sent on this link: a replica cannot have received (let alone fsynced) anything beyond it.
    let mut sent = holds;
    let mut shutdown = shared.shutdown.subscribe();
    let mut inbuf = BytesMut::with_capacity(1024);
    let mut parser = RequestParser::new();
    let limits = RequestLimits { max_bulk_len: 1024, max_args: 16, unauthenticated: false };
    loop {
        let notified = shared.journal.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        match shared.journal.read(cursor) {
            Ok(segments) => {
                let any = !segments.is_empty();
                for seg in segments {
                    wr.write_all(&seg.bytes).await.map_err(|e| format!("writing the stream: {e}"))?;
                    sent = sent.max(seg.last_lsn);
                }
                if any {
                    // Out of TLS's buffer onto the socket (a no-op for TCP).
                    wr.flush().await.map_err(|e| format!("writing the stream: {e}"))?;
                }
            }
            Err(ReadError::Lagged { oldest }) => {
                return Err(format!("the replica fell behind the backlog (it holds LSN {oldest} on); it must sync again"));
            }
        }
        tokio::select! {
            _ = &mut notified => {}
            read = rd.read_buf(&mut inbuf) => {
                match read {
                    Ok(0) => return Err("the replica closed the link".into()),
                    Ok(_) => {}
                    Err(e) => return Err(format!("reading acknowledgements: {e}")),
                }
                while let Some(args) = parser.parse(&mut inbuf, &limits).map_err(|e| format!("bad acknowledgement: {e}"))? {
                    if let Some((received, fsynced)) = parse_ack(&args) {
                        if received > sent || fsynced > sent {
                            // Acknowledging what was never sent is not a replica's mistake but a forgery (something
                            // posing as a replica to make durable writes look acknowledged): nothing it says counts.
                            return Err(format!(
                                "acknowledged LSN {} but only {sent} was sent on this link: dropped (not a genuine replica?)",
                                received.max(fsynced)
                            ));
                        }
                        shared.replication.update_downstream(id, |d| {
                            d.received = d.received.max(received);
                            d.fsynced = d.fsynced.max(fsynced);
                            d.last_ack = Instant::now();
                        });
                        let durable = shared.replication.counts_for_durability(id);
                        shared.journal.durability.publish_replica(id, received, aof.then_some(fsynced), durable);
                    }
                }
            }
            _ = shutdown.wait_for(|s| *s) => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        // Replicas acknowledge at least once a second: one silent for a minute is gone (Redis's repl-timeout).
        let silent = shared.replication.downstream().iter().find(|d| d.id == id).map(|d| d.last_ack.elapsed());
        let timeout = repl_timeout(shared);
        if silent.is_some_and(|s| s > timeout) {
            return Err(format!("no acknowledgement for {} s", timeout.as_secs()));
        }
        if shared.replication.generation() != generation {
            return Ok(());
        }
    }
}

/// `REPLCONF ACK <received> [FACK <fsynced>]`.
fn parse_ack(args: &[bytes::Bytes]) -> Option<(u64, u64)> {
    let num = |b: &bytes::Bytes| std::str::from_utf8(b).ok()?.parse::<u64>().ok();
    if args.len() < 3 || !args[0].eq_ignore_ascii_case(b"REPLCONF") || !args[1].eq_ignore_ascii_case(b"ACK") {
        return None;
    }
    let received = num(&args[2])?;
    let fsynced = if args.len() >= 5 && args[3].eq_ignore_ascii_case(b"FACK") { num(&args[4])? } else { 0 };
    Some((received, fsynced))
}
