//! Monitoring (every coordinator) and acting (the raft leader only).
//!
//! Every coordinator probes each node of each group with `INFO replication` and keeps its subjective view
//! (`s_down` after down-after-milliseconds without a valid reply). The leader asks the other coordinators for their
//! view (`COORDINATOR IS-DOWN`): when at least `quorum` coordinators see the primary down, it is objectively down
//! and the leader fails it over, recording each step through raft. The leader also records replicas discovered from
//! the primary and re-points replicas (and a demoted primary that came back) at the recorded primary.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ruvio_protocol::Value;

use crate::decide::{decide, Candidate, Decision, Promise};
use crate::node::{parse_info, text, Conn, ReplInfo};
use crate::state::{instance_desc, Command, Group};
use crate::{now_ms, Coordinator, GroupConfig};

/// What this coordinator knows about one node.
#[derive(Debug, Clone)]
pub struct Health {
    pub group: String,
    pub created: Instant,
    pub last_ping_sent: Option<Instant>,
    pub last_ok: Option<Instant>,
    pub last_reply: Option<Instant>,
    pub info: Option<ReplInfo>,
    pub info_at: Option<Instant>,
    pub sdown: bool,
    pub sdown_since: Option<Instant>,
    pub last_reconf: Option<Instant>,
    pub task: Option<Arc<tokio::task::AbortHandle>>,
}

impl Health {
    fn new(group: &str) -> Health {
        Health {
            group: group.to_string(),
            created: Instant::now(),
            last_ping_sent: None,
            last_ok: None,
            last_reply: None,
            info: None,
            info_at: None,
            sdown: false,
            sdown_since: None,
            last_reconf: None,
            task: None,
        }
    }

    /// No valid reply for longer than `down_after`, now (the health loop sets `sdown` from this on its next tick).
    pub fn down_now(&self, down_after: Duration) -> bool {
        self.sdown || self.last_ok.unwrap_or(self.created).elapsed() > down_after
    }

    /// Fresh INFO (newer than `max_age`) from a node that is not subjectively down.
    pub fn fresh_info(&self, max_age: Duration) -> Option<&ReplInfo> {
        if self.sdown {
            return None;
        }
        match (self.info.as_ref(), self.info_at) {
            (Some(i), Some(t)) if t.elapsed() <= max_age => Some(i),
            _ => None,
        }
    }
}

/// The leader's per-group runtime view.
#[derive(Debug, Clone, Default)]
pub struct GroupRuntime {
    pub odown: bool,
    /// The primary the objective-down flag is about.
    pub odown_primary: String,
    pub odown_since: Option<Instant>,
    pub next_attempt: Option<Instant>,
    pub failover_running: bool,
    /// (raft term, epoch) of this leader's last attempt that ended waiting without promoting anyone.
    pub reusable_epoch: Option<(u64, u64)>,
    /// Primary LSN seen when a replica first appeared: it joins D once its fsynced LSN reaches it.
    pub durable_targets: HashMap<String, u64>,
}

/// How often the health loop re-evaluates subjective down, and how often the leader loop runs.
const HEALTH_TICK: Duration = Duration::from_millis(20);
const LEADER_TICK: Duration = Duration::from_millis(50);

pub fn probe_interval(g: &GroupConfig) -> Duration {
    Duration::from_millis((g.down_after_ms / 4).clamp(100, 1000))
}

fn info_max_age(g: &GroupConfig) -> Duration {
    probe_interval(g) * 3 + Duration::from_millis(500)
}

/// The nodes a group consists of: primary, replicas, and the primary a failover in progress moves away from.
pub fn instances(g: &Group) -> Vec<String> {
    let mut v = vec![g.primary.clone()];
    for r in &g.replicas {
        if !v.contains(r) {
            v.push(r.clone());
        }
    }
    if let Some(f) = &g.failover {
        if !v.contains(&f.from) {
            v.push(f.from.clone());
        }
    }
    v
}

async fn probe_loop(co: Arc<Coordinator>, addr: String, gc: GroupConfig) {
    let interval = probe_interval(&gc);
    let reply_limit = Duration::from_millis(gc.down_after_ms.max(500));
    let mut conn: Option<Conn> = None;
    // A node that refuses this coordinator (wrong password, no `coordinator-pass`) is logged, at most twice a minute.
    let mut last_refusal_log: Option<Instant> = None;
    let mut log_refusal = |what: String| {
        if last_refusal_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(30)) {
            last_refusal_log = Some(Instant::now());
            tracing::warn!("{what}");
        }
    };
    loop {
        if conn.is_none() {
            conn = match Conn::connect(&addr, gc.node_auth(), reply_limit).await {
                Ok(c) => Some(c),
                Err(e) => {
                    if e.to_string().contains("AUTH refused") {
                        log_refusal(format!("{}: {e} (check `sentinel auth-user` / `sentinel auth-pass` for {})", addr, gc.name));
                    }
                    None
                }
            };
        }
        if let Some(c) = conn.as_mut() {
            if let Some(h) = co.health.lock().unwrap().get_mut(&addr) {
                h.last_ping_sent = Some(Instant::now());
            }
            match c.cmd(&["INFO", "replication"], reply_limit).await {
                Ok(v) if !v.is_error() => {
                    let info = parse_info(&text(&v));
                    let now = Instant::now();
                    let lease = write_lease(&co, &addr, &gc, &info);
                    if let Some(h) = co.health.lock().unwrap().get_mut(&addr) {
                        h.last_ok = Some(now);
                        h.last_reply = Some(now);
                        h.info = Some(info);
                        h.info_at = Some(now);
                    }
                    if let Some(args) = lease {
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        match c.cmd(&args, reply_limit).await {
                            Ok(v) if v.is_error() => {
                                let t = text(&v);
                                if t.starts_with("NOPERM") || t.starts_with("NOAUTH") {
                                    log_refusal(format!(
                                        "{addr} refused the write lease: {t} (the node needs `coordinator-pass <secret>`, this coordinator `sentinel auth-user {} coordinator` and `sentinel auth-pass {} <secret>`)",
                                        gc.name, gc.name
                                    ));
                                } else {
                                    tracing::debug!("{addr} refused the write lease: {t}");
                                }
                            }
                            Ok(_) => {}
                            Err(_) => conn = None,
                        }
                    }
                }
                Ok(v) => {
                    // LOADING / MASTERDOWN / BUSY count as alive (Sentinel accepts them); anything else does not.
                    let t = text(&v);
                    let alive = ["LOADING", "MASTERDOWN", "BUSY"].iter().any(|p| t.starts_with(p));
                    if let Some(h) = co.health.lock().unwrap().get_mut(&addr) {
                        h.last_reply = Some(Instant::now());
                        if alive {
                            h.last_ok = Some(Instant::now());
                        }
                    }
                }
                Err(_) => conn = None,
            }
        }
        tokio::time::sleep(interval).await;
    }
}

/// How long a write lease lasts: half of down-after (a failover begins no earlier than down-after after the
/// primary's last reply, so the old primary's leases have run out by then), and at least two probe intervals.
pub fn lease_ms(g: &GroupConfig) -> u64 {
    let interval = probe_interval(g).as_millis() as u64;
    (g.down_after_ms / 2).max(interval * 2).min(g.down_after_ms.max(1))
}

/// `REPLICATION LEASE <epoch> <ms> <this coordinator> <coordinators> [DURABLE <D>...]` for the Ruvio primary this
/// coordinator's agreed state names, while no failover away from it is under way (docs/coordinator.md, "The write
/// lease").
fn write_lease(co: &Coordinator, addr: &str, gc: &GroupConfig, info: &ReplInfo) -> Option<Vec<String>> {
    if !info.is_master || info.ruvio.is_none() {
        return None;
    }
    let cluster = co.sm.cluster();
    let g = cluster.groups.get(&gc.name)?;
    if g.primary != addr || g.failover.is_some() {
        return None;
    }
    Some(lease_args(co, g, gc))
}

fn lease_args(co: &Coordinator, g: &Group, gc: &GroupConfig) -> Vec<String> {
    let mut args = vec![
        "REPLICATION".into(),
        "LEASE".into(),
        g.epoch.to_string(),
        lease_ms(gc).to_string(),
        co.node_id.to_string(),
        co.members.len().to_string(),
    ];
    // With a durability level, the primary counts for durable writes only the replicas of D (the rule's arithmetic
    // holds only for acknowledgements from D).
    if g.durability_n >= 1 {
        args.push("DURABLE".into());
        args.extend(g.durability_set.iter().cloned());
    }
    args
}

/// Every coordinator: keeps one probe task per node, computes subjective down, publishes +sdown/-sdown.
pub async fn health_loop(co: Arc<Coordinator>) {
    // A short tick: subjective down is noticed within 20 ms of down-after-milliseconds (failover speed).
    let mut tick = tokio::time::interval(HEALTH_TICK);
    loop {
        tick.tick().await;
        let cluster = co.sm.cluster();
        let mut wanted: HashMap<String, (String, GroupConfig, String)> = HashMap::new();
        for (name, g) in &cluster.groups {
            let Some(gc) = co.group_cfg(name) else { continue };
            for a in instances(g) {
                wanted.insert(a, (name.clone(), gc.clone(), g.primary.clone()));
            }
        }
        let mut events = Vec::new();
        {
            let mut health = co.health.lock().unwrap();
            health.retain(|a, h| {
                let keep = wanted.contains_key(a);
                if !keep {
                    if let Some(t) = &h.task {
                        t.abort();
                    }
                }
                keep
            });
            for (a, (name, gc, primary)) in &wanted {
                let h = health.entry(a.clone()).or_insert_with(|| Health::new(name));
                if h.task.is_none() {
                    let jh = tokio::spawn(probe_loop(co.clone(), a.clone(), gc.clone()));
                    h.task = Some(Arc::new(jh.abort_handle()));
                }
                let since = h.last_ok.unwrap_or(h.created);
                let down = since.elapsed() > Duration::from_millis(gc.down_after_ms);
                let kind = if a == primary { "master" } else { "slave" };
                if down && !h.sdown {
                    h.sdown = true;
                    h.sdown_since = Some(Instant::now());
                    events.push(("+sdown", instance_desc(kind, a, name, primary)));
                } else if !down && h.sdown {
                    h.sdown = false;
                    h.sdown_since = None;
                    events.push(("-sdown", instance_desc(kind, a, name, primary)));
                }
            }
        }
        for (ch, m) in events {
            co.publish(ch, m);
        }
    }
}

/// Asks every other coordinator whether it sees `addr` down; returns how many coordinators (this one included) do.
async fn count_down_votes(co: &Arc<Coordinator>, addr: &str) -> usize {
    let me = co.cfg.self_addr();
    let mut tasks = Vec::new();
    for peer in co.members.iter().filter(|p| **p != me) {
        let peer = peer.clone();
        let addr = addr.to_string();
        let auth = co.cfg.sentinel_pass.clone().map(|p| (co.cfg.sentinel_user.clone(), p));
        tasks.push(tokio::spawn(async move {
            let lim = Duration::from_millis(800);
            let Ok(mut c) = Conn::connect(&peer, auth.as_ref().map(|(u, p)| (u.as_deref(), p.as_str())), lim).await else { return false };
            matches!(c.cmd(&["COORDINATOR", "IS-DOWN", &addr], lim).await, Ok(Value::Integer(1)))
        }));
    }
    let mut n = 1;
    for t in tasks {
        if t.await.unwrap_or(false) {
            n += 1;
        }
    }
    n
}

fn split(addr: &str) -> (String, String) {
    let (h, p) = addr.rsplit_once(':').unwrap_or((addr, "0"));
    (h.to_string(), p.to_string())
}

async fn node_cmd(addr: &str, gc: &GroupConfig, args: &[&str], limit: Duration) -> Result<Value, String> {
    let mut c = Conn::connect(addr, gc.node_auth(), limit).await.map_err(|e| format!("{addr}: {e}"))?;
    let v = c.cmd(args, limit).await.map_err(|e| format!("{addr}: {e}"))?;
    if v.is_error() {
        return Err(format!("{addr} answered {}", text(&v)));
    }
    Ok(v)
}

async fn fetch_info(addr: &str, gc: &GroupConfig) -> Option<ReplInfo> {
    let v = node_cmd(addr, gc, &["INFO", "replication"], Duration::from_secs(1)).await.ok()?;
    Some(parse_info(&text(&v)))
}

/// `REPLICAOF host port [EPOCH e]` (the epoch only on Ruvio nodes).
async fn replicaof(addr: &str, gc: &GroupConfig, primary: &str, epoch: Option<u64>) -> Result<(), String> {
    let (h, p) = split(primary);
    let e = epoch.map(|e| e.to_string());
    let mut args = vec!["REPLICAOF", h.as_str(), p.as_str()];
    if let Some(e) = &e {
        args.extend(["EPOCH", e.as_str()]);
    }
    node_cmd(addr, gc, &args, Duration::from_secs(2)).await.map(|_| ())
}

fn is_ruvio_group(co: &Coordinator, g: &Group) -> bool {
    let health = co.health.lock().unwrap();
    instances(g).iter().any(|a| health.get(a).and_then(|h| h.info.as_ref()).is_some_and(|i| i.ruvio.is_some()))
}

/// The leader's loop: discovery, objective down, failover, re-pointing.
pub async fn leader_loop(co: Arc<Coordinator>) {
    let mut tick = tokio::time::interval(LEADER_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !co.is_leader() {
            co.runtime.lock().unwrap().clear();
            continue;
        }
        let cluster = co.sm.cluster();
        for gc in co.cfg.groups.clone() {
            let Some(g) = cluster.groups.get(&gc.name).cloned() else {
                let primary = format!("{}:{}", gc.ip, gc.port);
                let cmd = Command::AddGroup { name: gc.name.clone(), primary, durability_n: gc.durability_replicas };
                if let Err(e) = co.propose(cmd).await {
                    tracing::warn!("recording group {}: {e}", gc.name);
                }
                continue;
            };
            if g.durability_n != gc.durability_replicas {
                let cmd = Command::AddGroup { name: gc.name.clone(), primary: g.primary.clone(), durability_n: gc.durability_replicas };
                let _ = co.propose(cmd).await;
            }
            if let Err(e) = leader_group_tick(&co, &gc, &g).await {
                tracing::warn!("{}: {e}", gc.name);
            }
        }
    }
}

async fn leader_group_tick(co: &Arc<Coordinator>, gc: &GroupConfig, g: &Group) -> Result<(), String> {
    let max_age = info_max_age(gc);
    let (primary_down, primary_info) = {
        let health = co.health.lock().unwrap();
        match health.get(&g.primary) {
            Some(h) => (h.sdown, h.fresh_info(max_age).cloned()),
            None => (false, None),
        }
    };

    // Discovery: replicas the primary reports; replicas that caught up join D.
    if let Some(pi) = primary_info.as_ref().filter(|i| i.is_master) {
        let seen: Vec<String> = pi.slaves.iter().map(|s| s.addr()).collect();
        let new: Vec<String> = seen.iter().filter(|a| !g.replicas.contains(a) && **a != g.primary).cloned().collect();
        let mut durable = Vec::new();
        if g.durability_n > 0 {
            if let Some(rf) = pi.ruvio {
                let mut rt = co.runtime.lock().unwrap();
                let rt = rt.entry(g.name.clone()).or_default();
                for s in &pi.slaves {
                    let a = s.addr();
                    if g.durability_set.contains(&a) {
                        continue;
                    }
                    let target = *rt.durable_targets.entry(a.clone()).or_insert(rf.lsn);
                    if s.state == "online" && s.fsynced_lsn.is_some_and(|f| f >= target) {
                        durable.push(a);
                    }
                }
            }
        }
        if !new.is_empty() || !durable.is_empty() {
            co.propose(Command::AddReplicas { name: g.name.clone(), replicas: new, durable }).await?;
        }
    }

    // Objective down.
    let odown = if primary_down { count_down_votes(co, &g.primary).await >= gc.quorum } else { false };
    let (was_odown, due) = {
        let mut rt = co.runtime.lock().unwrap();
        let rt = rt.entry(g.name.clone()).or_default();
        let was = rt.odown && rt.odown_primary == g.primary;
        rt.odown = odown;
        rt.odown_primary = g.primary.clone();
        if odown && !was {
            rt.odown_since = Some(Instant::now());
        }
        if !odown {
            rt.odown_since = None;
        }
        (was, rt.next_attempt.is_none_or(|t| Instant::now() >= t))
    };
    if odown != was_odown {
        let ch = if odown { "+odown" } else { "-odown" };
        co.publish(ch, format!("{} #quorum {}", instance_desc("master", &g.primary, &g.name, &g.primary), gc.quorum));
    }
    if odown && due {
        match failover(co, &g.name, false, "odown").await {
            Ok(m) => tracing::info!("{}: {m}", g.name),
            Err(e) => {
                tracing::warn!("{}: failover not done: {e}", g.name);
                let mut rt = co.runtime.lock().unwrap();
                rt.entry(g.name.clone()).or_default().next_attempt = Some(Instant::now() + Duration::from_secs(1));
            }
        }
        return Ok(());
    }

    // Re-pointing, only while the recorded primary is up and a primary.
    if primary_down || !primary_info.as_ref().is_some_and(|i| i.is_master) {
        return Ok(());
    }
    let ruvio = primary_info.as_ref().is_some_and(|i| i.ruvio.is_some());
    if ruvio {
        // An abandoned failover first: a replica that promised its epoch refuses this primary until it moves above.
        match readopt(co, gc, g).await {
            Ok(false) => {}
            // Acted (or tried): re-point on the next tick, with the group's new epoch.
            Ok(true) => return Ok(()),
            Err(e) => {
                tracing::warn!("{}: re-adopting the primary {}: {e}", g.name, g.primary);
                return Ok(());
            }
        }
    }
    let mut todo = Vec::new();
    {
        let mut health = co.health.lock().unwrap();
        for a in instances(g).into_iter().filter(|a| *a != g.primary) {
            let Some(h) = health.get_mut(&a) else { continue };
            if h.last_reconf.is_some_and(|t| t.elapsed() < Duration::from_secs(2)) {
                continue;
            }
            let Some(info) = h.fresh_info(max_age) else { continue };
            if info.is_master {
                todo.push((a.clone(), true));
            } else if info.master_addr() != g.primary {
                todo.push((a.clone(), false));
            } else {
                continue;
            }
            h.last_reconf = Some(Instant::now());
        }
    }
    for (a, demote) in todo {
        let epoch = if ruvio { Some(g.epoch) } else { None };
        match replicaof(&a, gc, &g.primary, epoch).await {
            Ok(()) => {
                if demote {
                    // Its clients must rediscover the primary: disconnect them, as Sentinel does.
                    let _ = node_cmd(&a, gc, &["CLIENT", "KILL", "TYPE", "normal"], Duration::from_secs(2)).await;
                    let _ = node_cmd(&a, gc, &["CLIENT", "KILL", "TYPE", "pubsub"], Duration::from_secs(2)).await;
                    co.publish("+convert-to-slave", instance_desc("slave", &a, &g.name, &g.primary));
                } else {
                    co.publish("+slave-reconf-sent", instance_desc("slave", &a, &g.name, &g.primary));
                }
            }
            Err(e) => tracing::warn!("{}: re-pointing {a} at {}: {e}", g.name, g.primary),
        }
    }
    Ok(())
}

/// Runs one failover of `name` (the leader only). `manual`: SENTINEL FAILOVER (no objective down needed; a
/// reachable primary is paused and the chosen replica catches up first).
pub async fn failover(co: &Arc<Coordinator>, name: &str, force: bool, reason: &str) -> Result<String, String> {
    // A leader cut off from the majority cannot commit anything: say so before anything else.
    match tokio::time::timeout(Duration::from_secs(2), co.raft.ensure_linearizable()).await {
        Ok(Ok(_)) => {}
        _ => return Err("NOQUORUM this coordinator cannot reach a majority of coordinators: no failover".into()),
    }
    let lock = co.failover_locks.get(name).cloned().ok_or_else(|| format!("no such master '{name}'"))?;
    // An automatic attempt skips when another runs; an operator's waits for it (bounded).
    let _guard = if reason == "manual" {
        tokio::time::timeout(Duration::from_secs(15), lock.lock_owned()).await.map_err(|_| "INPROG Failover already in progress".to_string())?
    } else {
        lock.try_lock_owned().map_err(|_| "INPROG Failover already in progress".to_string())?
    };
    let gc = co.group_cfg(name).cloned().ok_or_else(|| format!("no such master '{name}'"))?;
    let g = co.sm.cluster().groups.get(name).cloned().ok_or_else(|| format!("no such master '{name}'"))?;
    let started = Instant::now();
    let manual = reason == "manual";
    let max_age = info_max_age(&gc);
    let ruvio = is_ruvio_group(co, &g);

    // Candidates, from this coordinator's probes.
    let (cands, min_epoch, primary_up, max_node_epoch, max_promised) = {
        let health = co.health.lock().unwrap();
        let mut min_epoch = 0;
        let (mut max_node_epoch, mut max_promised) = (0, 0);
        let mut cands = Vec::new();
        let primary_down_ms = health.get(&g.primary).and_then(|h| h.sdown_since).map_or(0, |t| t.elapsed().as_millis() as u64 + gc.down_after_ms);
        for a in instances(&g) {
            let h = health.get(&a);
            if let Some(rf) = h.and_then(|h| h.info.as_ref()).and_then(|i| i.ruvio) {
                min_epoch = min_epoch.max(rf.epoch.max(rf.promised_epoch) + 1);
                max_node_epoch = max_node_epoch.max(rf.epoch);
                max_promised = max_promised.max(rf.promised_epoch);
            }
            if a == g.primary {
                continue;
            }
            let info = h.and_then(|h| h.fresh_info(max_age));
            // As Sentinel: not a replica in the middle of a full sync, nor one whose link has been down much longer
            // than the primary has been (10 x down-after beyond the primary's own down time), nor priority 0.
            let link_ok = |i: &ReplInfo| match i.link_down_since_secs {
                _ if i.link_up => true,
                Some(s) if s >= 0 => (s as u64) * 1000 <= primary_down_ms + gc.down_after_ms * 10,
                Some(_) => false,
                None => true,
            };
            let reachable = info.is_some_and(|i| !i.is_master && i.slave_priority != 0 && !i.sync_in_progress && link_ok(i));
            let offset = info.map_or(0, |i| i.ruvio.map_or(i.offset, |r| r.lsn));
            cands.push(Candidate { addr: a, reachable, offset, promise: None });
        }
        let primary_up = health.get(&g.primary).and_then(|h| h.fresh_info(max_age)).is_some_and(|i| i.is_master);
        (cands, min_epoch, primary_up, max_node_epoch, max_promised)
    };
    if !cands.iter().any(|c| c.reachable) {
        let why = "no reachable replica to promote (replicas down, still in their first sync, or with priority 0)".to_string();
        set_waiting(co, &g, &why).await;
        co.publish("-failover-abort-no-good-slave", instance_desc("master", &g.primary, name, &g.primary));
        return Err(format!("NOGOODSLAVE {why}"));
    }
    if g.durability_n > 0 && !ruvio && !force {
        let why = format!(
            "durability-replicas {} needs Ruvio nodes (REPLICATION PROMISE); these nodes are redis-server: waiting (FORCE to promote anyway)",
            g.durability_n
        );
        set_waiting(co, &g, &why).await;
        return Err(why);
    }

    // 1. Raise the epoch through consensus. A retry after this leader's own attempt ended waiting for promises
    //    (nothing was promoted) reuses that epoch while the raft term is the same: no other leader can have used it,
    //    and the epoch space (10 bits in the server's tokens: 1023 failovers) is not spent at one per second while waiting.
    let (_, term, _) = co.raft_status();
    let reusable = co.runtime.lock().unwrap().get(name).and_then(|r| r.reusable_epoch);
    let epoch = match (reusable, &g.failover) {
        (Some((t, e)), Some(f)) if t == term && f.epoch == e && f.from == g.primary && e > max_node_epoch && e >= max_promised => e,
        _ => {
            let r = co
                .propose(Command::BeginFailover { name: name.into(), from: g.primary.clone(), min_epoch, reason: reason.into(), now_ms: now_ms() })
                .await?;
            if !r.ok {
                return Err(r.message);
            }
            r.epoch
        }
    };
    co.runtime.lock().unwrap().entry(name.to_string()).or_default().reusable_epoch = None;
    co.publish("+try-failover", instance_desc("master", &g.primary, name, &g.primary));
    co.publish("+elected-leader", instance_desc("master", &g.primary, name, &g.primary));
    co.publish("+failover-state-select-slave", instance_desc("master", &g.primary, name, &g.primary));

    // 2. Promises from D (n >= 1).
    let mut cands = cands;
    if g.durability_n > 0 && ruvio {
        let mut tasks = Vec::new();
        for c in cands.iter().filter(|c| g.durability_set.contains(&c.addr)) {
            let (a, gc2) = (c.addr.clone(), gc.clone());
            tasks.push(tokio::spawn(async move {
                let e = epoch.to_string();
                let v = node_cmd(&a, &gc2, &["REPLICATION", "PROMISE", &e], Duration::from_secs(2)).await;
                (a, v)
            }));
        }
        // The promises are recorded through raft concurrently (one commit round for all), before the decision.
        let mut records = Vec::new();
        for t in tasks {
            let Ok((a, v)) = t.await else { continue };
            match v {
                Ok(Value::Array(items)) if items.len() >= 3 => {
                    let n = |i: usize| items[i].as_i64().unwrap_or(0).max(0) as u64;
                    let p = Promise { promised_epoch: n(0), lsn: n(1), fsynced_lsn: n(2) };
                    let (co2, cmd) = (co.clone(), Command::RecordPromise { name: name.into(), replica: a.clone(), epoch: p.promised_epoch });
                    records.push(tokio::spawn(async move { co2.propose(cmd).await }));
                    if let Some(c) = cands.iter_mut().find(|c| c.addr == a) {
                        c.promise = Some(p);
                        c.reachable = true;
                    }
                }
                Ok(other) => tracing::warn!("{name}: unexpected PROMISE reply from {a}: {other:?}"),
                Err(e) => tracing::warn!("{name}: no promise from {a}: {e}"),
            }
        }
        for r in records {
            let _ = r.await;
        }
    }

    // 3. Decide.
    let n = if ruvio { g.durability_n } else { 0 };
    let (to, note) = match decide(n, epoch, &g.durability_set, &cands, force) {
        Decision::Promote { addr, note } => (addr, note),
        Decision::Wait { reason: why } => {
            co.runtime.lock().unwrap().entry(name.to_string()).or_default().reusable_epoch = Some((term, epoch));
            tracing::warn!("{name}: not promoting at epoch {epoch}: {why}");
            set_waiting(co, &g, &why).await;
            co.publish("-failover-abort-not-enough-promises", format!("{} {why}", instance_desc("master", &g.primary, name, &g.primary)));
            return Err(format!("NOGOODSLAVE {why}"));
        }
    };
    let note = if force && g.durability_n > 0 && !ruvio {
        format!("FORCED by the operator with durability-replicas {} on redis-server nodes (no promises, the old primary was not fenced): writes not received by {to} are lost; {note}", g.durability_n)
    } else {
        note
    };
    tracing::info!("{name}: epoch {epoch}: promoting {to}: {note}");
    co.publish("+selected-slave", instance_desc("slave", &to, name, &g.primary));

    // Manual switchover with a live primary: pause its writers and let the chosen replica catch up.
    let paused = manual && primary_up && pause_and_catch_up(&g.primary, &to, &gc).await;

    // 4. Promote.
    co.publish("+failover-state-send-slaveof-noone", instance_desc("slave", &to, name, &g.primary));
    let e = epoch.to_string();
    let promote: Vec<&str> = if ruvio { vec!["REPLICAOF", "NO", "ONE", "EPOCH", &e] } else { vec!["REPLICAOF", "NO", "ONE"] };
    if let Err(err) = node_cmd(&to, &gc, &promote, Duration::from_secs(2)).await {
        if paused {
            let _ = node_cmd(&g.primary, &gc, &["CLIENT", "UNPAUSE"], Duration::from_secs(1)).await;
        }
        return Err(format!("promoting {to}: {err}"));
    }
    let deadline = Instant::now() + Duration::from_millis(gc.failover_timeout_ms.clamp(2000, 30_000));
    loop {
        if fetch_info(&to, &gc).await.is_some_and(|i| i.is_master) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("{to} did not report role master after REPLICAOF NO ONE"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    co.publish("+promoted-slave", instance_desc("slave", &to, name, &g.primary));

    // 5. Record the new primary (publishes +switch-master on every coordinator as it applies).
    co.publish("+failover-state-reconf-slaves", instance_desc("master", &g.primary, name, &g.primary));
    let r = co
        .propose(Command::FinishFailover { name: name.into(), epoch, to: to.clone(), forced: force, note: note.clone(), now_ms: now_ms() })
        .await?;
    if !r.ok {
        return Err(r.message);
    }

    // The leader's own lease, before any replica is pointed at the new primary: from the start it counts only D's
    // acknowledgements for durable writes (the other coordinators' leases follow with their next probe).
    if ruvio {
        if let Some(g) = co.sm.cluster().groups.get(name) {
            let args = lease_args(co, g, &gc);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Err(e) = node_cmd(&to, &gc, &args, Duration::from_secs(1)).await {
                tracing::warn!("{name}: leasing the new primary {to}: {e}");
            }
        }
    }

    // 6. Point the others at it (the leader loop keeps doing so for nodes that are down now).
    for c in cands.iter().filter(|c| c.addr != to && c.reachable) {
        match replicaof(&c.addr, &gc, &to, ruvio.then_some(epoch)).await {
            Ok(()) => co.publish("+slave-reconf-sent", instance_desc("slave", &c.addr, name, &to)),
            Err(e) => tracing::warn!("{name}: re-pointing {}: {e}", c.addr),
        }
    }
    if primary_up {
        if replicaof(&g.primary, &gc, &to, ruvio.then_some(epoch)).await.is_ok() {
            let _ = node_cmd(&g.primary, &gc, &["CLIENT", "KILL", "TYPE", "normal"], Duration::from_secs(2)).await;
            let _ = node_cmd(&g.primary, &gc, &["CLIENT", "KILL", "TYPE", "pubsub"], Duration::from_secs(2)).await;
            co.publish("+convert-to-slave", instance_desc("slave", &g.primary, name, &to));
        }
        if paused {
            let _ = node_cmd(&g.primary, &gc, &["CLIENT", "UNPAUSE"], Duration::from_secs(1)).await;
        }
    }
    let mut rt = co.runtime.lock().unwrap();
    let rt = rt.entry(name.to_string()).or_default();
    rt.next_attempt = None;
    rt.durable_targets.clear();
    Ok(format!("failed over from {} to {to} at epoch {epoch} in {} ms ({note})", g.primary, started.elapsed().as_millis()))
}

/// The recorded primary is back (up, role master, not objectively down) after a failover away from it was
/// abandoned: the agreed state still holds that failover, or a node promised an epoch above the primary's. A replica
/// that promised refuses this primary's stream for as long as the primary stays at its older epoch, so the group
/// would run without it until the next failover (docs/faults.md, finding 2). The leader (under the group's failover
/// lock, so never during an attempt of its own) records through raft that the primary stays, at an epoch of its own
/// (`AdoptPrimary`, refused if anything changed meanwhile), and only then moves the primary to it with
/// `REPLICAOF NO ONE EPOCH e` (on a primary, that raises its epoch; its replicas reconnect and resume). The epoch is
/// the abandoned attempt's only when this leader allocated it in this raft term and its last attempt at it ended
/// waiting for promises, so no node was ever promoted at it (the rule that lets a retry reuse an epoch); otherwise a
/// fresh one above every epoch allocated and every epoch or promise a node reported. Either way no other node ever
/// issues tokens in that epoch, and the primary's tokens continue above its old ones. Also moves a primary whose
/// epoch is below the group's recorded one (a re-adoption whose last step did not reach it). Returns whether it
/// acted.
async fn readopt(co: &Arc<Coordinator>, gc: &GroupConfig, g: &Group) -> Result<bool, String> {
    // The highest epoch and promise the group's nodes reported (last probes).
    let observed = |g: &Group| {
        let health = co.health.lock().unwrap();
        instances(g)
            .iter()
            .filter_map(|a| health.get(a)?.info.as_ref()?.ruvio)
            .fold((0, 0), |(e, p), r| (e.max(r.epoch), p.max(r.promised_epoch)))
    };
    let abandoned = |g: &Group, primary_epoch: u64, max_promised: u64| g.failover.is_some() || max_promised > primary_epoch.max(g.epoch);
    let probed = {
        let health = co.health.lock().unwrap();
        health.get(&g.primary).and_then(|h| h.info.as_ref()?.ruvio).map_or(0, |r| r.epoch)
    };
    if !abandoned(g, probed, observed(g).1) && probed >= g.epoch {
        return Ok(false);
    }
    // Never while a failover runs (automatic or SENTINEL FAILOVER): it owns the failover in progress.
    let Some(lock) = co.failover_locks.get(&g.name).cloned() else { return Ok(false) };
    let Ok(_guard) = lock.try_lock_owned() else { return Ok(false) };
    let Some(g) = co.sm.cluster().groups.get(&g.name).cloned() else { return Ok(false) };
    // The primary's epoch now, not as last probed (a probe older than the last move would move it again).
    let info = fetch_info(&g.primary, gc).await.ok_or_else(|| format!("{} did not answer INFO", g.primary))?;
    let Some(rf) = info.ruvio.filter(|_| info.is_master) else { return Err(format!("{} is no longer a Ruvio primary", g.primary)) };
    let (max_node_epoch, max_promised) = observed(&g);
    let max_node_epoch = max_node_epoch.max(rf.epoch);
    let adopt = abandoned(&g, rf.epoch, max_promised);
    let target = if adopt {
        let (_, term, _) = co.raft_status();
        let reusable = co.runtime.lock().unwrap().get(&g.name).and_then(|r| r.reusable_epoch);
        let abandon = g.failover.as_ref().map(|f| f.epoch);
        let reuse = matches!((reusable, abandon), (Some((t, e)), Some(a))
            if t == term && e == a && a > g.epoch && a > max_node_epoch && a >= max_promised);
        let cmd = Command::AdoptPrimary {
            name: g.name.clone(),
            primary: g.primary.clone(),
            abandon,
            reuse,
            min_epoch: max_node_epoch.max(max_promised) + 1,
        };
        let r = co.propose(cmd).await?;
        if !r.ok {
            return Err(r.message);
        }
        co.runtime.lock().unwrap().entry(g.name.clone()).or_default().reusable_epoch = None;
        tracing::warn!(
            "{}: the primary {} is back and the failover{} did not finish: it stays the primary, at epoch {} (group epoch was {}, its own {}; {}), so the replicas that promised follow it again",
            g.name,
            g.primary,
            abandon.map_or(String::new(), |e| format!(" attempt at epoch {e}")),
            r.epoch,
            g.epoch,
            rf.epoch,
            if reuse { "the abandoned attempt's epoch, at which nobody was promoted" } else { "a fresh epoch" }
        );
        r.epoch
    } else {
        g.epoch
    };
    if rf.epoch < target {
        let e = target.to_string();
        node_cmd(&g.primary, gc, &["REPLICAOF", "NO", "ONE", "EPOCH", &e], Duration::from_secs(2)).await?;
        tracing::info!("{}: the primary {} moved from epoch {} to {target}", g.name, g.primary, rf.epoch);
        return Ok(true);
    }
    Ok(adopt)
}

/// Records why a failover does not promote (only when the reason changed, so waiting does not grow the log).
async fn set_waiting(co: &Arc<Coordinator>, g: &Group, why: &str) {
    if g.waiting_reason.as_deref() != Some(why) {
        if let Err(e) = co.propose(Command::SetWaiting { name: g.name.clone(), reason: Some(why.to_string()) }).await {
            tracing::warn!("{}: recording the waiting reason: {e}", g.name);
        }
    }
}

/// Pauses writes on the old primary and waits (bounded) until `to` has its offset. Returns whether it paused.
async fn pause_and_catch_up(primary: &str, to: &str, gc: &GroupConfig) -> bool {
    let ms = gc.failover_timeout_ms.clamp(2000, 30_000).to_string();
    if node_cmd(primary, gc, &["CLIENT", "PAUSE", &ms, "WRITE"], Duration::from_secs(1)).await.is_err() {
        return false;
    }
    let Some(target) = fetch_info(primary, gc).await.map(|i| i.ruvio.map_or(i.offset, |r| r.lsn)) else { return true };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if fetch_info(to, gc).await.is_some_and(|i| i.ruvio.map_or(i.offset, |r| r.lsn) >= target) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}
