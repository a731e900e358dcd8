//! Consensus between coordinators: openraft (storage v2) with a log and a state machine persisted as small JSON
//! files in the coordinator's dir, and a network that sends raft RPCs as `COORDINATOR RAFT <kind> <json>` over the
//! coordinators' own RESP port.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{Cursor, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest, VoteResponse};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, LogState, RaftLogReader, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta, StorageError, StoredMembership, Vote,
};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::node::Conn;
use crate::state::{ClusterState, Command, Event, Response};

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Command,
        R = Response,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Raft = openraft::Raft<TypeConfig>;
type SErr = StorageError<u64>;

fn io_err(verb: ErrorVerb, e: std::io::Error) -> SErr {
    StorageError::from_io_error(ErrorSubject::Store, verb, e)
}

/// Writes `value` as JSON to `path` durably: temp file, fsync, rename, fsync of the folder.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let data = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> std::io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| std::io::Error::other(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Log storage

#[derive(Default, Serialize, Deserialize)]
struct LogData {
    vote: Option<Vote<u64>>,
    committed: Option<LogId<u64>>,
    last_purged: Option<LogId<u64>>,
    log: BTreeMap<u64, Entry<TypeConfig>>,
}

#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogData>>,
    path: PathBuf,
}

impl LogStore {
    pub fn open(dir: &Path) -> std::io::Result<LogStore> {
        let path = dir.join("raft-log.json");
        let data = read_json(&path)?.unwrap_or_default();
        Ok(LogStore { inner: Arc::new(Mutex::new(data)), path })
    }

    fn persist(&self, d: &LogData) -> std::io::Result<()> {
        write_json_atomic(&self.path, d)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(&mut self, range: RB) -> Result<Vec<Entry<TypeConfig>>, SErr> {
        let d = self.inner.lock().unwrap();
        Ok(d.log.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, SErr> {
        let d = self.inner.lock().unwrap();
        let last = d.log.values().next_back().map(|e| e.log_id).or(d.last_purged);
        Ok(LogState { last_purged_log_id: d.last_purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), SErr> {
        let mut d = self.inner.lock().unwrap();
        d.vote = Some(*vote);
        self.persist(&d).map_err(|e| io_err(ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, SErr> {
        Ok(self.inner.lock().unwrap().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), SErr> {
        // Kept in memory and written with the next append or vote: persisting it is optional in openraft (a restart
        // that reads an older value re-learns the rest from the leader, and the state machine is persisted on each
        // apply), and an fsync here sat on every commit's path (failover speed).
        self.inner.lock().unwrap().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, SErr> {
        Ok(self.inner.lock().unwrap().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let res = {
            let mut d = self.inner.lock().unwrap();
            for e in entries {
                d.log.insert(e.log_id.index, e);
            }
            self.persist(&d)
        };
        match res {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                callback.log_io_completed(Err(e));
                Err(io_err(ErrorVerb::Write, std::io::Error::other(msg)))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), SErr> {
        let mut d = self.inner.lock().unwrap();
        let _ = d.log.split_off(&log_id.index);
        self.persist(&d).map_err(|e| io_err(ErrorVerb::Write, e))
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), SErr> {
        let mut d = self.inner.lock().unwrap();
        d.last_purged = Some(log_id);
        let keep = d.log.split_off(&(log_id.index + 1));
        d.log = keep;
        self.persist(&d).map_err(|e| io_err(ErrorVerb::Write, e))
    }
}

// ---------------------------------------------------------------------------------------------------------------
// State machine

#[derive(Default, Clone, Serialize, Deserialize)]
pub struct SmData {
    pub last_applied: Option<LogId<u64>>,
    pub membership: StoredMembership<u64, BasicNode>,
    pub state: ClusterState,
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, BasicNode>,
    data: Vec<u8>,
}

/// The applied state, shared with the coordinator's command handlers and monitor.
#[derive(Clone)]
pub struct StateMachine {
    pub data: Arc<Mutex<SmData>>,
    snapshot: Arc<Mutex<Option<StoredSnapshot>>>,
    dir: PathBuf,
    events: broadcast::Sender<Event>,
}

impl StateMachine {
    pub fn open(dir: &Path, events: broadcast::Sender<Event>) -> std::io::Result<StateMachine> {
        let data: SmData = read_json(&dir.join("state.json"))?.unwrap_or_default();
        let snapshot: Option<StoredSnapshot> = read_json(&dir.join("snapshot.json"))?;
        Ok(StateMachine {
            data: Arc::new(Mutex::new(data)),
            snapshot: Arc::new(Mutex::new(snapshot)),
            dir: dir.to_path_buf(),
            events,
        })
    }

    pub fn cluster(&self) -> ClusterState {
        self.data.lock().unwrap().state.clone()
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, SErr> {
        let (bytes, meta) = {
            let d = self.data.lock().unwrap();
            let bytes = serde_json::to_vec(&*d).map_err(|e| io_err(ErrorVerb::Read, std::io::Error::other(e)))?;
            let id = format!("{}-{}", d.last_applied.map_or(0, |l| l.leader_id.term), d.last_applied.map_or(0, |l| l.index));
            (bytes, SnapshotMeta { last_log_id: d.last_applied, last_membership: d.membership.clone(), snapshot_id: id })
        };
        let stored = StoredSnapshot { meta: meta.clone(), data: bytes.clone() };
        write_json_atomic(&self.dir.join("snapshot.json"), &stored).map_err(|e| io_err(ErrorVerb::Write, e))?;
        *self.snapshot.lock().unwrap() = Some(stored);
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), SErr> {
        let d = self.data.lock().unwrap();
        Ok((d.last_applied, d.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        let mut events = Vec::new();
        let snapshot = {
            let mut d = self.data.lock().unwrap();
            for e in entries {
                d.last_applied = Some(e.log_id);
                match e.payload {
                    EntryPayload::Blank => out.push(Response::default()),
                    EntryPayload::Normal(cmd) => {
                        let r = d.state.apply(&cmd, &mut events);
                        out.push(r);
                    }
                    EntryPayload::Membership(m) => {
                        d.membership = StoredMembership::new(Some(e.log_id), m);
                        out.push(Response::default());
                    }
                }
            }
            d.clone()
        };
        write_json_atomic(&self.dir.join("state.json"), &snapshot).map_err(|e| io_err(ErrorVerb::Write, e))?;
        for ev in events {
            tracing::info!("{} {}", ev.channel, ev.message);
            let _ = self.events.send(ev);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, SErr> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta<u64, BasicNode>, snapshot: Box<Cursor<Vec<u8>>>) -> Result<(), SErr> {
        let bytes = snapshot.into_inner();
        let mut new: SmData = serde_json::from_slice(&bytes).map_err(|e| io_err(ErrorVerb::Read, std::io::Error::other(e)))?;
        new.last_applied = meta.last_log_id;
        new.membership = meta.last_membership.clone();
        write_json_atomic(&self.dir.join("state.json"), &new).map_err(|e| io_err(ErrorVerb::Write, e))?;
        let stored = StoredSnapshot { meta: meta.clone(), data: bytes };
        write_json_atomic(&self.dir.join("snapshot.json"), &stored).map_err(|e| io_err(ErrorVerb::Write, e))?;
        *self.data.lock().unwrap() = new;
        *self.snapshot.lock().unwrap() = Some(stored);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, SErr> {
        let s = self.snapshot.lock().unwrap();
        Ok(s.as_ref().map(|s| Snapshot { meta: s.meta.clone(), snapshot: Box::new(Cursor::new(s.data.clone())) }))
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Network: raft RPCs as RESP commands to the peer's coordinator port.

pub struct Network {
    /// How this coordinator logs in to its peers (sentinel-user, sentinel-pass).
    pub auth: Option<(Option<String>, String)>,
}

pub struct PeerClient {
    target: u64,
    addr: String,
    auth: Option<(Option<String>, String)>,
    conn: Option<Conn>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> PeerClient {
        PeerClient { target, addr: node.addr.clone(), auth: self.auth.clone(), conn: None }
    }
}

impl PeerClient {
    async fn call<Req: Serialize, Resp: for<'de> Deserialize<'de>, E: std::error::Error + for<'de> Deserialize<'de>>(
        &mut self,
        kind: &str,
        req: &Req,
        limit: Duration,
    ) -> Result<Resp, RPCError<u64, BasicNode, RaftError<u64, E>>> {
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let limit = limit.max(Duration::from_millis(200));
        if self.conn.is_none() {
            let c = Conn::connect(&self.addr, self.auth.as_ref().map(|(u, p)| (u.as_deref(), p.as_str())), limit).await.map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
            self.conn = Some(c);
        }
        let conn = self.conn.as_mut().unwrap();
        let args: [&[u8]; 4] = [b"COORDINATOR", b"RAFT", kind.as_bytes(), &body];
        let reply = match conn.cmd(&args, limit).await {
            Ok(v) => v,
            Err(e) => {
                self.conn = None;
                return Err(RPCError::Unreachable(Unreachable::new(&e)));
            }
        };
        if reply.is_error() {
            let e = std::io::Error::other(crate::node::text(&reply));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let bytes = reply.as_bytes().unwrap_or_default();
        let res: Result<Resp, RaftError<u64, E>> =
            serde_json::from_slice(bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        res.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.call("APPEND", &rpc, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        self.call("SNAPSHOT", &rpc, option.hard_ttl()).await
    }

    async fn vote(&mut self, rpc: VoteRequest<u64>, option: RPCOption) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.call("VOTE", &rpc, option.hard_ttl()).await
    }
}

/// Serves one `COORDINATOR RAFT <kind> <json>` request on this node; the reply is the JSON of the raft result.
pub async fn serve_rpc(raft: &Raft, kind: &str, body: &[u8]) -> Result<Vec<u8>, String> {
    let enc = |r: serde_json::Result<Vec<u8>>| r.map_err(|e| e.to_string());
    match kind.to_ascii_uppercase().as_str() {
        "APPEND" => {
            let req: AppendEntriesRequest<TypeConfig> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
            enc(serde_json::to_vec(&raft.append_entries(req).await))
        }
        "VOTE" => {
            let req: VoteRequest<u64> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
            enc(serde_json::to_vec(&raft.vote(req).await))
        }
        "SNAPSHOT" => {
            let req: InstallSnapshotRequest<TypeConfig> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
            enc(serde_json::to_vec(&raft.install_snapshot(req).await))
        }
        other => Err(format!("unknown raft rpc '{other}'")),
    }
}

pub fn raft_config() -> openraft::Config {
    openraft::Config {
        cluster_name: "ruvio-coordinator".into(),
        // Generous for a loaded 2-core machine: a leader that misses heartbeats would cause needless elections.
        heartbeat_interval: 150,
        election_timeout_min: 700,
        election_timeout_max: 1400,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(500),
        max_in_snapshot_log_to_keep: 100,
        ..Default::default()
    }
}
