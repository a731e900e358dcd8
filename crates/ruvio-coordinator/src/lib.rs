//! `ruvio coordinator`: watches groups of Ruvio (or redis-server) nodes, fails a dead primary over to a replica
//! under the durability rule (see `decide`), agrees on every decision through openraft, and answers the Sentinel
//! protocol so that existing Redis clients discover the primary with no change.
//!
//! - [`config`]: sentinel.conf directives plus `coordinator-peers` and `sentinel durability-replicas`;
//! - [`state`]: the replicated state (epoch, primary, replicas, D and n, promises, last failover);
//! - [`raft`]: openraft storage (JSON files in `dir`) and the peer network (RESP on the coordinator port);
//! - [`peers`]: pinging the other coordinators (`s_down` in SENTINEL SENTINELS);
//! - [`monitor`]: probing the nodes, subjective/objective down, discovery, failover, re-pointing;
//! - [`server`]: the RESP front (PING, HELLO, AUTH, ROLE, INFO, SENTINEL ..., pub/sub).

pub mod config;
pub mod decide;
pub mod metrics;
pub mod monitor;
pub mod node;
pub mod peers;
pub mod raft;
pub mod server;
pub mod state;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use openraft::BasicNode;
use tokio::sync::broadcast;

pub use config::{Config, GroupConfig};

use crate::raft::{LogStore, Network, Raft, StateMachine};
use crate::state::{Command, Event, Response};

const PROPOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything a coordinator's tasks share.
pub struct Coordinator {
    pub cfg: Config,
    pub node_id: u64,
    /// The consensus members, sorted; node id = index + 1.
    pub members: Vec<String>,
    pub raft: Raft,
    pub sm: StateMachine,
    pub events: broadcast::Sender<Event>,
    pub run_id: String,
    pub started: Instant,
    pub health: Mutex<HashMap<String, monitor::Health>>,
    /// Per group, what only the leader knows (objective down, the last attempt's outcome).
    pub runtime: Mutex<HashMap<String, monitor::GroupRuntime>>,
    pub failover_locks: HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    pub connected_clients: std::sync::atomic::AtomicUsize,
    /// The other coordinators, as this one's pings see them (peers.rs).
    pub peers: Mutex<HashMap<String, peers::PeerHealth>>,
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Coordinator {
    pub fn group_cfg(&self, name: &str) -> Option<&GroupConfig> {
        self.cfg.groups.iter().find(|g| g.name == name)
    }

    /// The agreed state, plus configured groups the leader has not recorded yet (answered from the configuration,
    /// as Sentinel does right after start).
    pub fn cluster_view(&self) -> state::ClusterState {
        let mut c = self.sm.cluster();
        for g in &self.cfg.groups {
            c.groups.entry(g.name.clone()).or_insert_with(|| state::Group {
                name: g.name.clone(),
                primary: format!("{}:{}", g.ip, g.port),
                durability_n: g.durability_replicas,
                ..Default::default()
            });
        }
        c
    }

    /// This node's raft role, term and the leader's id.
    pub fn raft_status(&self) -> (openraft::ServerState, u64, Option<u64>) {
        let m = self.raft.metrics();
        let m = m.borrow();
        (m.state, m.current_term, m.current_leader)
    }

    pub fn is_leader(&self) -> bool {
        let (state, _, leader) = self.raft_status();
        state == openraft::ServerState::Leader && leader == Some(self.node_id)
    }

    pub fn leader_addr(&self) -> Option<String> {
        let (_, _, leader) = self.raft_status();
        leader.and_then(|id| self.members.get(id as usize - 1).cloned())
    }

    /// Commits a command through raft: directly when this node leads, else through the leader.
    pub async fn propose(&self, cmd: Command) -> Result<Response, String> {
        if self.is_leader() {
            return self.write_local(cmd).await;
        }
        let leader = self.leader_addr().ok_or("no consensus leader (a majority of coordinators must be up)")?;
        let body = serde_json::to_vec(&cmd).map_err(|e| e.to_string())?;
        let mut c = node::Conn::connect(&leader, self.cfg.peer_auth(), Duration::from_secs(2))
            .await
            .map_err(|e| format!("forwarding to the leader {leader}: {e}"))?;
        let v = c
            .cmd(&[b"COORDINATOR".as_slice(), b"PROPOSE", &body], Duration::from_secs(10))
            .await
            .map_err(|e| format!("forwarding to the leader {leader}: {e}"))?;
        if v.is_error() {
            return Err(node::text(&v));
        }
        serde_json::from_slice(v.as_bytes().unwrap_or_default()).map_err(|e| e.to_string())
    }

    /// `client_write` on this node (the leader), bounded: a leader cut off from the majority cannot commit.
    pub async fn write_local(&self, cmd: Command) -> Result<Response, String> {
        match tokio::time::timeout(PROPOSE_TIMEOUT, self.raft.client_write(cmd)).await {
            Ok(Ok(r)) => Ok(r.data),
            Ok(Err(e)) => Err(format!("consensus: {e}")),
            Err(_) => Err(format!("NOQUORUM not committed within {PROPOSE_TIMEOUT:?}: a majority of coordinators is not reachable")),
        }
    }

    pub fn publish(&self, channel: &'static str, message: String) {
        tracing::info!("{channel} {message}");
        let _ = self.events.send(Event { channel, message });
    }
}

/// Starts a coordinator and runs it until the process ends.
pub async fn run(cfg: Config) -> Result<(), String> {
    let (members, node_id) = cfg.members()?;
    std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("creating {}: {e}", cfg.dir.display()))?;
    let run_id = load_run_id(&cfg.dir)?;
    let (events, _) = broadcast::channel(1024);
    let log = LogStore::open(&cfg.dir).map_err(|e| format!("opening the raft log: {e}"))?;
    let sm = StateMachine::open(&cfg.dir, events.clone()).map_err(|e| format!("opening the state: {e}"))?;
    let rcfg = Arc::new(raft::raft_config().validate().map_err(|e| e.to_string())?);
    let network = Network { auth: cfg.sentinel_pass.clone().map(|p| (cfg.sentinel_user.clone(), p)) };
    let raft = Raft::new(node_id, rcfg, network, log, sm.clone()).await.map_err(|e| format!("starting raft: {e}"))?;

    let listeners = server::bind(&cfg).await?;
    let failover_locks = cfg.groups.iter().map(|g| (g.name.clone(), Arc::new(tokio::sync::Mutex::new(())))).collect();
    let co = Arc::new(Coordinator {
        node_id,
        members: members.clone(),
        raft: raft.clone(),
        sm,
        events,
        run_id,
        started: Instant::now(),
        health: Mutex::new(HashMap::new()),
        runtime: Mutex::new(HashMap::new()),
        failover_locks,
        connected_clients: Default::default(),
        peers: Mutex::new(HashMap::new()),
        cfg,
    });
    tracing::info!(
        "coordinator {} (node {node_id} of {}) listening on port {}, data in {}",
        co.cfg.self_addr(),
        members.len(),
        co.cfg.port,
        co.cfg.dir.display()
    );
    for l in listeners {
        tokio::spawn(server::accept_loop(co.clone(), l));
    }
    metrics::start(co.clone()).await?;
    // A fresh node proposes the configured membership; on a node that already has state this is refused, harmlessly.
    if !raft.is_initialized().await.map_err(|e| e.to_string())? {
        let nodes: BTreeMap<u64, BasicNode> =
            members.iter().enumerate().map(|(i, a)| (i as u64 + 1, BasicNode { addr: a.clone() })).collect();
        if let Err(e) = raft.initialize(nodes).await {
            tracing::debug!("raft initialize: {e}");
        }
    }
    tokio::spawn(monitor::health_loop(co.clone()));
    peers::start(&co);
    monitor::leader_loop(co).await;
    Ok(())
}

fn load_run_id(dir: &std::path::Path) -> Result<String, String> {
    let p = dir.join("run-id");
    if let Ok(s) = std::fs::read_to_string(&p) {
        let s = s.trim().to_string();
        if s.len() == 40 {
            return Ok(s);
        }
    }
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let id: String = (0..40).map(|_| format!("{:x}", rng.gen_range(0..16u8))).collect();
    std::fs::write(&p, &id).map_err(|e| format!("writing {}: {e}", p.display()))?;
    Ok(id)
}
