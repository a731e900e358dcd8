//! Replication: a primary streams its write log to replicas; each replica applies the records through the same
//! execution path as the start-up loader, persists them with its own log, and acknowledges the LSNs it received
//! and fsynced as soon as they change (docs/replication.md).
//!
//! - [`primary`]: serves one replica on a connection that sent `PSYNC` (full sync from a snapshot, or a resume from
//!   the journal's backlog), then streams the journal's records and reads the replica's acknowledgements.
//! - [`replica`]: the link to the primary (`REPLICAOF host port`): handshake, snapshot loading, applying the stream.
//!
//! The stream is the journal's own bytes: each record framed with its length, CRC, LSN and wall time, exactly as
//! in the append-only file, so a replica checks every record (checksum, no LSN skipped or repeated) and a replica's
//! LSNs are its primary's.

pub mod durable;
pub mod lease;
pub mod primary;
pub mod replica;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::journal::Durability;

/// The primary a replica follows, and how its link is doing.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub host: String,
    pub port: u16,
    /// `connect`, `connecting`, `sync`, `connected` (Redis's names in ROLE).
    pub state: &'static str,
    pub last_io: Option<Instant>,
    pub sync_in_progress: bool,
}

/// A replica connected to this primary.
#[derive(Debug, Clone)]
pub struct Downstream {
    pub id: u64,
    pub ip: String,
    pub port: u16,
    /// `wait_bgsave`, `send_bulk`, `online`.
    pub state: &'static str,
    /// LSNs the replica reported received and fsynced.
    pub received: u64,
    pub fsynced: u64,
    /// The replica persists what it applies (appendonly yes): only those count for WAITAOF.
    pub aof: bool,
    pub last_ack: Instant,
}

impl Downstream {
    /// host:port, as INFO shows it and the coordinators name it.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

#[derive(Default)]
struct State {
    upstream: Option<Upstream>,
    downstream: Vec<Downstream>,
}

pub struct Replication {
    state: Mutex<State>,
    /// The data folder, where the replication id and the promised epoch are kept (`replication.state`).
    dir: Mutex<Option<std::path::PathBuf>>,
    /// The highest failover epoch this node promised (REPLICATION PROMISE): it follows no primary of an older one.
    promised: AtomicU64,
    /// True while this node is a replica (read on every client write: refused with -READONLY).
    replica: AtomicBool,
    /// This node's replication id: the history its LSNs belong to. A new one at every promotion and full sync.
    replid: Mutex<String>,
    /// The replication id was taken from a primary (a sync): this node holds that history but must not add to
    /// it. Kept on disk, so a replica restarted as a primary begins a history of its own (`start_up`).
    adopted: AtomicBool,
    /// The history this node continued when it was promoted, and its last LSN then: replicas of that history up to
    /// that LSN resume here instead of taking a snapshot (Redis's replid2 / second_repl_offset).
    previous: Mutex<Option<(String, u64)>>,
    /// Bumped whenever the role changes, so a link to an old primary notices it must stop.
    generation: AtomicU64,
    /// Signalled when this node starts following a primary: the link task (`replica::supervise`) starts a link.
    pub(crate) link_wanted: tokio::sync::Notify,
    next_link: AtomicU64,
    /// `min-replicas-to-write` and `min-replicas-max-lag` (seconds), copied from the config so a write checks them
    /// without taking the config lock.
    min_replicas: AtomicU64,
    min_replicas_max_lag: AtomicU64,
    /// Full and partial (resumed) syncs served since start (INFO).
    pub full_syncs: AtomicU64,
    pub partial_syncs: AtomicU64,
    /// The coordinators' write lease: durable writes are answered only while it holds (once required).
    pub lease: lease::WriteLease,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            state: Mutex::new(State::default()),
            dir: Mutex::new(None),
            previous: Mutex::new(None),
            promised: AtomicU64::new(0),
            replica: AtomicBool::new(false),
            replid: Mutex::new(new_replid()),
            adopted: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            link_wanted: tokio::sync::Notify::new(),
            next_link: AtomicU64::new(1),
            min_replicas: AtomicU64::new(0),
            min_replicas_max_lag: AtomicU64::new(10),
            full_syncs: AtomicU64::new(0),
            partial_syncs: AtomicU64::new(0),
            lease: lease::WriteLease::default(),
        }
    }
}

/// The file in the data folder holding the replication id, the promised epoch and whether a write lease is
/// required.
pub const STATE_FILE: &str = "replication.state";

/// 40 hex characters, like Redis's replication ids.
pub fn new_replid() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..40).map(|_| format!("{:x}", rng.gen_range(0..16u8))).collect()
}

impl Replication {
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Acquire)
    }

    pub fn replid(&self) -> String {
        self.replid.lock().clone()
    }

    /// This replica now holds its primary's history `id` (a resume or a full sync); kept on disk, so a restarted
    /// node can resume its replication where its data ends instead of taking a new snapshot.
    pub fn adopt_history(&self, id: String) {
        self.set_replid(id, true);
    }

    /// This node's data can no longer be trusted to match any primary's history up to its last LSN (a damaged
    /// stream, a record of its own): a new, unshared id, so its next sync starts from a snapshot.
    pub fn forget_history(&self) {
        self.set_replid(new_replid(), false);
    }

    fn set_replid(&self, id: String, adopted: bool) {
        *self.replid.lock() = id;
        self.adopted.store(adopted, Ordering::Release);
        self.save();
    }

    /// A promotion: a new history begins after `last_lsn`; the old one stays resumable up to there.
    pub fn begin_history(&self, last_lsn: u64) {
        let old = self.replid();
        *self.previous.lock() = Some((old, last_lsn));
        self.set_replid(new_replid(), false);
    }

    /// At start-up, after loading (data up to `last_lsn`) and before anything can write: a node that held its
    /// primary's history and now starts as a primary begins a history of its own, as a promotion does. Without
    /// it, its own first records (expiry DELs at start-up, say) would take LSNs its old primary gave to other
    /// records, and if it follows that primary again it would resume past them (a hole: docs/faults.md).
    pub fn start_up(&self, follows: bool, last_lsn: u64) {
        if !follows && self.adopted.load(Ordering::Acquire) {
            tracing::info!("this node was a replica and starts as a primary: it begins a new replication history after LSN {last_lsn}");
            self.begin_history(last_lsn);
        }
    }

    /// Whether a replica of history `replid` that needs `next_lsn` next can continue this node's history.
    pub fn continues(&self, replid: &str, next_lsn: u64) -> bool {
        *self.replid.lock() == replid || self.previous.lock().as_ref().is_some_and(|(id, until)| id == replid && next_lsn <= until + 1)
    }

    pub fn previous(&self) -> Option<(String, u64)> {
        self.previous.lock().clone()
    }

    pub fn promised_epoch(&self) -> u64 {
        self.promised.load(Ordering::Acquire)
    }

    /// Promises never to follow a primary of an epoch older than `epoch` (durably, before it returns). Refused
    /// for an epoch older than one already promised.
    pub fn promise(&self, epoch: u64) -> Result<(), u64> {
        let before = self.promised.fetch_max(epoch, Ordering::AcqRel);
        if epoch < before {
            return Err(before);
        }
        if epoch > before {
            self.save();
        }
        Ok(())
    }

    /// REPLICATION PROMISE WITHDRAW: lowers the promise to `to` (the node's own epoch), durably; returns the
    /// promise it replaces.
    pub fn withdraw_promise(&self, to: u64) -> u64 {
        let before = self.promised.swap(to, Ordering::AcqRel);
        self.save();
        before
    }

    /// At start-up: where the state lives, and what it says.
    pub fn load(&self, dir: &std::path::Path) -> Result<(), String> {
        *self.dir.lock() = Some(dir.to_path_buf());
        let path = dir.join(STATE_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A first start: the history begun now is named on disk, so a restart continues it.
                self.save();
                return Ok(());
            }
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        };
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("replid", id)) if id.len() == 40 => *self.replid.lock() = id.to_string(),
                Some(("history", "adopted")) => self.adopted.store(true, Ordering::Release),
                Some(("promised-epoch", e)) => {
                    let e = e.parse().map_err(|_| format!("{}: bad promised-epoch", path.display()))?;
                    self.promised.store(e, Ordering::Release);
                }
                Some(("write-lease", "required")) => {
                    self.lease.set_required(true);
                }
                _ => return Err(format!("{}: unexpected line '{line}'", path.display())),
            }
        }
        Ok(())
    }

    fn save(&self) {
        let Some(dir) = self.dir.lock().clone() else { return };
        let mut text = format!("replid {}\npromised-epoch {}\n", self.replid.lock(), self.promised_epoch());
        // Written only when set, like the lease line below.
        if self.adopted.load(Ordering::Acquire) {
            text.push_str("history adopted\n");
        }
        // Written only when set, so a node that was never leased keeps a file older versions read.
        if self.lease.required() {
            text.push_str("write-lease required\n");
        }
        let tmp = dir.join(format!("{STATE_FILE}.tmp"));
        let written = (|| {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, dir.join(STATE_FILE))?;
            crate::persistence::sync_dir(&dir)
        })();
        if let Err(e) = written {
            tracing::warn!("could not save {}: {e}", dir.join(STATE_FILE).display());
        }
    }

    /// Coordinator `id` of `coordinators` leases this primary for `ms`, naming durability set `durable` (the
    /// first lease makes the lease required, on disk before this returns). Then re-counts which replicas' fsyncs
    /// count for durable writes.
    pub fn grant_lease(&self, id: u64, coordinators: usize, ms: u64, durable: Option<Vec<String>>, durability: &Durability) {
        let (newly_required, recovered) = self.lease.grant(id, coordinators, ms, durable);
        if newly_required {
            self.save();
            tracing::info!("write lease received from coordinator {id} of {coordinators}: durable writes now need a majority of the coordinators");
        }
        if recovered {
            tracing::info!("write lease valid again (coordinator {id} of {coordinators} renewed it): durable writes are answered again");
        }
        self.recount_durable(durability);
    }

    /// Whether replica link `id`'s fsyncs count for durable writes (replication/lease.rs).
    pub fn counts_for_durability(&self, id: u64) -> bool {
        let addr = self.state.lock().downstream.iter().find(|d| d.id == id).map(Downstream::addr);
        addr.is_some_and(|a| self.lease.counts(&a))
    }

    fn recount_durable(&self, durability: &Durability) {
        for d in self.downstream() {
            durability.set_durable(d.id, self.lease.counts(&d.addr()));
        }
    }

    /// An operator took over: durable writes no longer need the coordinators' lease, and every replica counts.
    pub fn stop_requiring_lease(&self, durability: &Durability) {
        if self.lease.set_required(false) {
            self.save();
            tracing::warn!("write lease no longer required: durable writes are answered without the coordinators");
        }
        self.recount_durable(durability);
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Becomes a replica of `host:port` (or follows a new primary) under a new generation, and asks for a link.
    pub(crate) fn follow(&self, host: String, port: u16) {
        let mut s = self.state.lock();
        s.upstream = Some(Upstream { host, port, state: "connect", last_io: None, sync_in_progress: false });
        self.replica.store(true, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.lease.drop_leases();
        self.link_wanted.notify_one();
    }

    /// Stops following (REPLICAOF NO ONE). The caller raises the epoch and starts a new history.
    pub(crate) fn stop_following(&self) {
        let mut s = self.state.lock();
        s.upstream = None;
        self.replica.store(false, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    pub fn upstream(&self) -> Option<Upstream> {
        self.state.lock().upstream.clone()
    }

    /// Updates the link's state, if `generation` is still the current one.
    pub(crate) fn link_update(&self, generation: u64, f: impl FnOnce(&mut Upstream)) {
        if self.generation() != generation {
            return;
        }
        if let Some(u) = self.state.lock().upstream.as_mut() {
            f(u);
        }
    }

    pub(crate) fn add_downstream(&self, ip: String, port: u16, aof: bool) -> u64 {
        let id = self.next_link.fetch_add(1, Ordering::Relaxed);
        let d = Downstream { id, ip, port, state: "wait_bgsave", received: 0, fsynced: 0, aof, last_ack: Instant::now() };
        self.state.lock().downstream.push(d);
        id
    }

    pub(crate) fn update_downstream(&self, id: u64, f: impl FnOnce(&mut Downstream)) {
        if let Some(d) = self.state.lock().downstream.iter_mut().find(|d| d.id == id) {
            f(d);
        }
    }

    pub(crate) fn remove_downstream(&self, id: u64) {
        self.state.lock().downstream.retain(|d| d.id != id);
    }

    pub fn downstream(&self) -> Vec<Downstream> {
        self.state.lock().downstream.clone()
    }

    pub fn set_min_replicas(&self, n: u64, max_lag_s: u64) {
        self.min_replicas.store(n, Ordering::Release);
        self.min_replicas_max_lag.store(max_lag_s, Ordering::Release);
    }

    /// `min-replicas-to-write`: false when fewer replicas than required acknowledged within the allowed lag.
    pub fn enough_good_replicas(&self) -> bool {
        let n = self.min_replicas.load(Ordering::Acquire);
        if n == 0 {
            return true;
        }
        let lag = std::time::Duration::from_secs(self.min_replicas_max_lag.load(Ordering::Acquire));
        let good = self.state.lock().downstream.iter().filter(|d| d.state == "online" && d.last_ack.elapsed() <= lag).count();
        good as u64 >= n
    }

    /// Replicas streaming now (state `online`).
    pub fn online_replicas(&self) -> usize {
        self.state.lock().downstream.iter().filter(|d| d.state == "online").count()
    }

    /// Replicas streaming now whose fsyncs count for durable writes.
    pub fn online_durable_replicas(&self) -> usize {
        self.downstream().iter().filter(|d| d.state == "online" && self.lease.counts(&d.addr())).count()
    }
}

/// What INFO `# Replication` reports besides the replication state itself.
pub struct InfoFigures {
    /// The failover epoch the tokens carry.
    pub epoch: u16,
    /// The last LSN fsynced here (0 when this node keeps no log).
    pub fsynced: u64,
    /// `repl-backlog-size`.
    pub backlog_size: u64,
}

/// INFO `# Replication`: Redis's fields (offsets are LSNs), then Ruvio's own.
pub fn info_section(r: &Replication, journal: &crate::journal::Journal, figures: InfoFigures, out: &mut String) {
    use std::fmt::Write;
    let InfoFigures { epoch, fsynced, backlog_size } = figures;
    let last = journal.last_lsn();
    match r.upstream() {
        Some(u) => {
            let up = u.state == "connected";
            let io = u.last_io.map_or(-1, |t| t.elapsed().as_secs() as i64);
            let _ = write!(
                out,
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{io}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{last}\r\nslave_repl_offset:{last}\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\n",
                u.host,
                u.port,
                if up { "up" } else { "down" },
                u.sync_in_progress as u8,
            );
        }
        None => {
            let replicas = r.downstream();
            let _ = write!(out, "role:master\r\nconnected_slaves:{}\r\n", replicas.len());
            for (i, d) in replicas.iter().enumerate() {
                let lag_ms = d.last_ack.elapsed().as_millis();
                let _ = write!(
                    out,
                    "slave{i}:ip={},port={},state={},offset={},lag={},fsynced_lsn={},lag_ms={lag_ms},aof={},durable={}\r\n",
                    d.ip,
                    d.port,
                    d.state,
                    d.received,
                    lag_ms / 1000,
                    d.fsynced,
                    d.aof as u8,
                    (d.aof && r.lease.counts(&d.addr())) as u8
                );
            }
            out.push_str("master_failover_state:no-failover\r\n");
        }
    }
    let backlog = journal.backlog_bytes();
    let promised = r.promised_epoch();
    let (replid2, second) = match r.previous() {
        Some((id, until)) => (id, (until + 1) as i64),
        None => ("0".repeat(40), -1),
    };
    let _ = write!(
        out,
        "master_replid:{}\r\nmaster_replid2:{replid2}\r\nmaster_repl_offset:{last}\r\nsecond_repl_offset:{second}\r\nrepl_backlog_active:1\r\nrepl_backlog_size:{backlog_size}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{backlog}\r\nruvio_epoch:{epoch}\r\nruvio_promised_epoch:{promised}\r\nruvio_lsn:{last}\r\nruvio_fsynced_lsn:{fsynced}\r\nfull_syncs:{}\r\npartial_syncs:{}\r\n",
        r.replid(),
        journal.oldest_lsn(),
        r.full_syncs.load(Ordering::Relaxed),
        r.partial_syncs.load(Ordering::Relaxed),
    );
    let lease = r.lease.status();
    let _ = write!(
        out,
        "ruvio_write_lease:{}\r\nruvio_write_lease_coordinators:{}/{}\r\n",
        match (lease.required, lease.valid) {
            (false, _) => "not-required",
            (true, true) => "valid",
            (true, false) => "expired",
        },
        lease.holders,
        lease.needed,
    );
}
