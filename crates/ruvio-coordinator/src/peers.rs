//! The other coordinators, watched as Sentinel watches its peer sentinels: each is PINGed (about once a second,
//! more often when down-after-milliseconds is shorter); one that has not answered for down-after-milliseconds is
//! subjectively down: `s_down` in `SENTINEL SENTINELS <group>`, and one `+sdown sentinel ...` line (and one
//! `-sdown` when it answers again) per change, never a line per failed ping. Raft has its own view of its peers;
//! this one is for operators and Sentinel clients.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ruvio_protocol::Value;

use crate::node::Conn;
use crate::Coordinator;

/// What this coordinator knows about one peer coordinator.
#[derive(Debug, Clone)]
pub struct PeerHealth {
    pub created: Instant,
    pub last_ping_sent: Option<Instant>,
    pub last_ok: Option<Instant>,
    pub last_reply: Option<Instant>,
    /// No connection to it now.
    pub disconnected: bool,
    pub sdown: bool,
    pub sdown_since: Option<Instant>,
}

impl PeerHealth {
    fn new() -> PeerHealth {
        PeerHealth { created: Instant::now(), last_ping_sent: None, last_ok: None, last_reply: None, disconnected: true, sdown: false, sdown_since: None }
    }
}

/// The down-after time for peers: the shortest of the groups' (a peer is one coordinator for every group), 30 s
/// without groups (Sentinel's default).
pub fn down_after(co: &Coordinator) -> Duration {
    Duration::from_millis(co.cfg.groups.iter().map(|g| g.down_after_ms).min().unwrap_or(30_000))
}

/// Starts one ping task per peer.
pub fn start(co: &Arc<Coordinator>) {
    let me = co.cfg.self_addr();
    for peer in co.members.iter().filter(|p| **p != me) {
        co.peers.lock().unwrap().insert(peer.clone(), PeerHealth::new());
        tokio::spawn(ping_loop(co.clone(), peer.clone()));
    }
}

async fn ping_loop(co: Arc<Coordinator>, peer: String) {
    let after = down_after(&co);
    // Several pings per down-after period, so one lost ping never makes a peer look down; at most one a second.
    let period = (after / 3).clamp(Duration::from_millis(100), Duration::from_secs(1));
    // A slow answer still counts as long as it comes within down-after (as the node probes do): under load a reply
    // may take longer than the ping period without the peer being down.
    let limit = after.max(Duration::from_millis(500));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut conn: Option<Conn> = None;
    loop {
        tick.tick().await;
        let sent = Instant::now();
        if conn.is_none() {
            conn = Conn::connect(&peer, co.cfg.peer_auth(), limit).await.ok();
        }
        let reply = match conn.as_mut() {
            Some(c) => c.cmd(&["PING"], limit).await.ok(),
            None => None,
        };
        if reply.is_none() {
            conn = None;
        }
        let ok = matches!(reply, Some(Value::Simple(_)));
        let change = {
            let mut peers = co.peers.lock().unwrap();
            let Some(h) = peers.get_mut(&peer) else { return };
            h.last_ping_sent = Some(sent);
            h.disconnected = conn.is_none();
            if reply.is_some() {
                h.last_reply = Some(Instant::now());
            }
            if ok {
                h.last_ok = Some(Instant::now());
            }
            let down = h.last_ok.unwrap_or(h.created).elapsed() > after;
            if down != h.sdown {
                h.sdown = down;
                h.sdown_since = down.then(Instant::now);
                Some(if down { "+sdown" } else { "-sdown" })
            } else {
                None
            }
        };
        if let Some(ch) = change {
            let (ip, port) = peer.rsplit_once(':').unwrap_or((&peer, "0"));
            let groups: Vec<String> = co.cfg.groups.iter().map(|g| format!("{} {} {}", g.name, g.ip, g.port)).collect();
            // Sentinel's text: `+sdown sentinel <id> <ip> <port> @ <master> <ip> <port>`, one per master it
            // watches with that sentinel; the coordinators watch every group together, so one line names them all.
            co.publish(ch, format!("sentinel {peer} {ip} {port} @ {}", if groups.is_empty() { "-".to_string() } else { groups.join(", ") }));
        }
    }
}
