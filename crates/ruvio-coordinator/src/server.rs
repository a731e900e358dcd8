//! The coordinator's RESP front: what Sentinel clients send (PING, HELLO, AUTH, ROLE, INFO, SENTINEL ..., pub/sub),
//! plus `COORDINATOR ...` for the other coordinators (raft RPCs, IS-DOWN, PROPOSE).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ruvio_protocol::{encode, Protocol, RequestLimits, RequestParser, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

use crate::config::Config;
use crate::monitor::{self, Health};
use crate::node::Conn;
use crate::state::{Command, Event, Group};
use crate::{now_ms, Coordinator};

pub async fn bind(cfg: &Config) -> Result<Vec<TcpListener>, String> {
    let mut out = Vec::new();
    for b in &cfg.bind {
        let b = b.trim_start_matches('-');
        let addr = if b.contains(':') { format!("[{b}]:{}", cfg.port) } else { format!("{b}:{}", cfg.port) };
        out.push(TcpListener::bind(&addr).await.map_err(|e| format!("listening on {addr}: {e}"))?);
    }
    Ok(out)
}

/// Redis's protected-mode refusal (its first sentences, then what to change on a coordinator).
pub const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to this coordinator you may adopt one of the following solutions: 1) Set a password with 'requirepass <password>' in its configuration (clients then send AUTH). 2) Bind it to chosen addresses ('bind') instead of every interface. 3) Set 'protected-mode no' in its configuration. Other coordinators may connect by logging in first with sentinel-user/sentinel-pass.\r\n";

fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

pub async fn accept_loop(co: Arc<Coordinator>, l: TcpListener) {
    loop {
        match l.accept().await {
            Ok((mut s, addr)) => {
                let co = co.clone();
                let protected = co.cfg.protected() && !is_loopback(addr.ip());
                if protected && co.cfg.sentinel_pass.is_none() {
                    // No way to be let in: refused at once, as Redis does.
                    tokio::spawn(async move {
                        let _ = s.write_all(PROTECTED_MODE_DENIED.as_bytes()).await;
                    });
                    continue;
                }
                tokio::spawn(async move {
                    co.connected_clients.fetch_add(1, Ordering::Relaxed);
                    let mut session = Session::new(co.clone());
                    session.protected = protected;
                    let _ = session.run(s).await;
                    co.connected_clients.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Err(e) => {
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

struct Session {
    co: Arc<Coordinator>,
    proto: Protocol,
    authed: bool,
    /// Logged in as the other coordinators do (sentinel-user / sentinel-pass): may send `COORDINATOR ...`.
    peer: bool,
    /// A client from another host while protected mode applies: only a coordinator's login (AUTH or HELLO AUTH
    /// with sentinel-user/sentinel-pass) is accepted; anything else gets the DENIED text and the connection ends.
    protected: bool,
    name: Option<String>,
    channels: Vec<String>,
    patterns: Vec<String>,
    events: Option<broadcast::Receiver<Event>>,
    quit: bool,
}

/// Password comparison whose time does not depend on how much of a guess was right.
fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn bulk(s: impl AsRef<str>) -> Value {
    Value::bulk_str(s.as_ref())
}

fn err(s: impl Into<String>) -> Value {
    Value::error(s)
}

/// Glob matching as Redis's PSUBSCRIBE does (`*`, `?`, `[...]`, `\`).
pub fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|i| glob(&p[1..], &s[i..])),
        Some(b'?') => !s.is_empty() && glob(&p[1..], &s[1..]),
        Some(b'[') => {
            let Some(c) = s.first() else { return false };
            let Some(end) = p.iter().skip(1).position(|&b| b == b']').map(|i| i + 1) else { return p[0] == *c && glob(&p[1..], &s[1..]) };
            let set = &p[1..end];
            let (neg, set) = if set.first() == Some(&b'^') { (true, &set[1..]) } else { (false, set) };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    hit |= set[i] <= *c && *c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == *c;
                    i += 1;
                }
            }
            hit != neg && glob(&p[end + 1..], &s[1..])
        }
        Some(b'\\') if p.len() > 1 => !s.is_empty() && p[1] == s[0] && glob(&p[2..], &s[1..]),
        Some(&c) => !s.is_empty() && c == s[0] && glob(&p[1..], &s[1..]),
    }
}

impl Session {
    fn new(co: Arc<Coordinator>) -> Session {
        let authed = co.cfg.requirepass.is_none();
        Session { co, proto: Protocol::Resp2, authed, peer: false, protected: false, name: None, channels: Vec::new(), patterns: Vec::new(), events: None, quit: false }
    }

    async fn run(mut self, mut s: TcpStream) -> std::io::Result<()> {
        s.set_nodelay(true)?;
        let mut parser = RequestParser::new();
        let limits = RequestLimits::default();
        let mut inbuf = BytesMut::with_capacity(16 * 1024);
        let mut out = BytesMut::new();
        loop {
            let subscribed = self.events.is_some();
            tokio::select! {
                r = s.read_buf(&mut inbuf) => {
                    if r? == 0 {
                        return Ok(());
                    }
                    loop {
                        let req = match parser.parse(&mut inbuf, &limits) {
                            Ok(Some(r)) => r,
                            Ok(None) => break,
                            Err(e) => {
                                encode(&err(format!("ERR Protocol error: {e}")), self.proto, &mut out);
                                s.write_all(&out).await?;
                                return Ok(());
                            }
                        };
                        if req.is_empty() {
                            continue;
                        }
                        let replies = self.handle(req).await;
                        for v in replies {
                            encode(&v, self.proto, &mut out);
                        }
                        if self.quit {
                            break;
                        }
                    }
                    s.write_all(&out).await?;
                    out.clear();
                    if self.quit {
                        return Ok(());
                    }
                }
                ev = async { self.events.as_mut().unwrap().recv().await }, if subscribed => {
                    match ev {
                        Ok(ev) => {
                            for v in self.deliver(&ev) {
                                encode(&v, self.proto, &mut out);
                            }
                            s.write_all(&out).await?;
                            out.clear();
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return Ok(()),
                    }
                }
            }
        }
    }

    fn push(&self, items: Vec<Value>) -> Value {
        if self.proto == Protocol::Resp3 {
            Value::Push(items)
        } else {
            Value::Array(items)
        }
    }

    fn deliver(&self, ev: &Event) -> Vec<Value> {
        let mut out = Vec::new();
        if self.channels.iter().any(|c| c == ev.channel) {
            out.push(self.push(vec![bulk("message"), bulk(ev.channel), bulk(&ev.message)]));
        }
        for p in &self.patterns {
            if glob(p.as_bytes(), ev.channel.as_bytes()) {
                out.push(self.push(vec![bulk("pmessage"), bulk(p), bulk(ev.channel), bulk(&ev.message)]));
            }
        }
        out
    }

    fn subs(&self) -> i64 {
        (self.channels.len() + self.patterns.len()) as i64
    }

    async fn handle(&mut self, req: Vec<Bytes>) -> Vec<Value> {
        let args: Vec<String> = req.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect();
        let cmd = args[0].to_ascii_uppercase();
        if self.protected && !self.peer && !matches!(cmd.as_str(), "AUTH" | "HELLO") {
            self.quit = true;
            return vec![err(PROTECTED_MODE_DENIED.trim_start_matches('-').trim_end())];
        }
        if !self.authed && !matches!(cmd.as_str(), "AUTH" | "HELLO" | "QUIT") {
            return vec![err("NOAUTH Authentication required.")];
        }
        if self.events.is_some()
            && self.proto == Protocol::Resp2
            && !matches!(cmd.as_str(), "SUBSCRIBE" | "PSUBSCRIBE" | "UNSUBSCRIBE" | "PUNSUBSCRIBE" | "PING" | "QUIT" | "RESET")
        {
            return vec![err(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                args[0].to_lowercase()
            ))];
        }
        let one = |v: Value| vec![v];
        match cmd.as_str() {
            "PING" => {
                if self.events.is_some() && self.proto == Protocol::Resp2 {
                    return one(Value::Array(vec![bulk("pong"), bulk(args.get(1).map_or("", |s| s.as_str()))]));
                }
                one(match req.get(1) {
                    Some(m) => Value::bulk(m.clone()),
                    None => Value::simple("PONG"),
                })
            }
            "ECHO" if args.len() == 2 => one(Value::bulk(req[1].clone())),
            "QUIT" => {
                self.quit = true;
                one(Value::ok())
            }
            "AUTH" => one(self.auth(&args[1..])),
            "HELLO" => one(self.hello(&args[1..])),
            "CLIENT" => one(self.client(&args[1..])),
            "COMMAND" => one(Value::Array(Vec::new())),
            "ROLE" => {
                let names = self.co.cfg.groups.iter().map(|g| bulk(&g.name)).collect();
                one(Value::Array(vec![bulk("sentinel"), Value::Array(names)]))
            }
            "INFO" => one(Value::Verbatim { format: *b"txt", text: Bytes::from(self.info(args.get(1).map(|s| s.as_str()))) }),
            "SENTINEL" if args.len() >= 2 => one(self.sentinel(&args[1..]).await),
            // Raft messages, proposals and IS-DOWN come only from coordinators that logged in as one: a client that
            // could send them could make any address the primary.
            "COORDINATOR" if !self.peer => one(err("NOPERM COORDINATOR commands are accepted only from coordinators logged in with sentinel-user/sentinel-pass")),
            "COORDINATOR" if args.len() >= 2 => one(self.coordinator(&args[1..], &req[1..]).await),
            "SUBSCRIBE" | "PSUBSCRIBE" if args.len() >= 2 => {
                if self.events.is_none() {
                    self.events = Some(self.co.events.subscribe());
                }
                let pattern = cmd == "PSUBSCRIBE";
                let mut out = Vec::new();
                for a in &args[1..] {
                    let list = if pattern { &mut self.patterns } else { &mut self.channels };
                    if !list.contains(a) {
                        list.push(a.clone());
                    }
                    let kind = if pattern { "psubscribe" } else { "subscribe" };
                    out.push(self.push(vec![bulk(kind), bulk(a), Value::Integer(self.subs())]));
                }
                out
            }
            "UNSUBSCRIBE" | "PUNSUBSCRIBE" => {
                let pattern = cmd == "PUNSUBSCRIBE";
                let kind = if pattern { "punsubscribe" } else { "unsubscribe" };
                let names: Vec<String> = if args.len() > 1 {
                    args[1..].to_vec()
                } else if pattern {
                    self.patterns.clone()
                } else {
                    self.channels.clone()
                };
                let mut out = Vec::new();
                if names.is_empty() {
                    out.push(self.push(vec![bulk(kind), Value::Nil, Value::Integer(self.subs())]));
                }
                for n in names {
                    if pattern {
                        self.patterns.retain(|p| *p != n);
                    } else {
                        self.channels.retain(|p| *p != n);
                    }
                    out.push(self.push(vec![bulk(kind), bulk(&n), Value::Integer(self.subs())]));
                }
                if self.subs() == 0 {
                    self.events = None;
                }
                out
            }
            "SHUTDOWN" => {
                tracing::warn!("SHUTDOWN asked by a client: exiting");
                std::process::exit(0);
            }
            _ => one(err(format!(
                "ERR unknown command '{}', with args beginning with: {}",
                args[0],
                args[1..].iter().take(3).map(|a| format!("'{a}' ")).collect::<String>()
            ))),
        }
    }

    /// A client password (`requirepass`, the default user's) or the coordinators' own login (`sentinel-user` /
    /// `sentinel-pass`), which also makes this session a peer.
    fn check_pass(&mut self, user: Option<&str>, pass: &str) -> bool {
        let cfg = &self.co.cfg;
        if let (Some(u), Some(su), Some(sp)) = (user, cfg.sentinel_user.as_deref(), cfg.sentinel_pass.as_deref()) {
            if u == su && ct_eq(pass, sp) {
                self.peer = true;
                return true;
            }
        }
        user.is_none_or(|u| u == "default") && cfg.requirepass.as_deref().is_some_and(|p| ct_eq(p, pass))
    }

    fn auth(&mut self, a: &[String]) -> Value {
        let (user, pass) = match a.len() {
            1 => (None, a[0].as_str()),
            2 => (Some(a[0].as_str()), a[1].as_str()),
            _ => return err("ERR wrong number of arguments for 'auth' command"),
        };
        if self.co.cfg.requirepass.is_none() && (user.is_none() || self.co.cfg.sentinel_pass.is_none()) {
            return err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        }
        if self.check_pass(user, pass) {
            self.authed = true;
            Value::ok()
        } else {
            err("WRONGPASS invalid username-password pair or user is disabled.")
        }
    }

    fn hello(&mut self, a: &[String]) -> Value {
        let mut i = 0;
        let mut proto = self.proto;
        if let Some(v) = a.first() {
            match v.as_str() {
                "2" => proto = Protocol::Resp2,
                "3" => proto = Protocol::Resp3,
                _ => return err("NOPROTO unsupported protocol version"),
            }
            i = 1;
        }
        while i < a.len() {
            match a[i].to_ascii_uppercase().as_str() {
                "AUTH" if i + 2 < a.len() => {
                    let (u, p) = (a[i + 1].clone(), a[i + 2].clone());
                    if !self.check_pass(Some(&u), &p) {
                        return err("WRONGPASS invalid username-password pair or user is disabled.");
                    }
                    self.authed = true;
                    i += 3;
                }
                "SETNAME" if i + 1 < a.len() => {
                    self.name = Some(a[i + 1].clone());
                    i += 2;
                }
                _ => return err(format!("ERR Syntax error in HELLO option '{}'", a[i])),
            }
        }
        if !self.authed {
            return err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        }
        self.proto = proto;
        Value::Map(vec![
            (bulk("server"), bulk("redis")),
            (bulk("version"), bulk("7.0.0")),
            (bulk("proto"), Value::Integer(if proto == Protocol::Resp3 { 3 } else { 2 })),
            (bulk("id"), Value::Integer(1)),
            (bulk("mode"), bulk("sentinel")),
            (bulk("role"), bulk("sentinel")),
            (bulk("modules"), Value::Array(Vec::new())),
        ])
    }

    fn client(&mut self, a: &[String]) -> Value {
        match a.first().map(|s| s.to_ascii_uppercase()).as_deref() {
            Some("SETNAME") if a.len() == 2 => {
                self.name = Some(a[1].clone());
                Value::ok()
            }
            Some("GETNAME") => self.name.as_ref().map_or(Value::Nil, bulk),
            Some("SETINFO") => Value::ok(),
            Some("ID") => Value::Integer(1),
            _ => err("ERR unknown subcommand or wrong number of arguments for 'CLIENT'"),
        }
    }

    // -- INFO -------------------------------------------------------------------------------------------------

    fn info(&self, section: Option<&str>) -> String {
        let co = &self.co;
        let want = |s: &str| section.is_none_or(|x| x.eq_ignore_ascii_case(s) || x.eq_ignore_ascii_case("all") || x.eq_ignore_ascii_case("everything") || x.eq_ignore_ascii_case("default"));
        let mut o = String::new();
        if want("server") {
            let _ = write!(
                o,
                "# Server\r\nredis_version:7.0.0\r\nruvio_version:{}\r\nredis_mode:sentinel\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nexecutable:ruvio coordinator\r\n\r\n",
                env!("CARGO_PKG_VERSION"),
                std::process::id(),
                co.run_id,
                co.cfg.port,
                co.started.elapsed().as_secs()
            );
        }
        if want("clients") {
            let _ = write!(o, "# Clients\r\nconnected_clients:{}\r\n\r\n", co.connected_clients.load(Ordering::Relaxed));
        }
        let cluster = co.cluster_view();
        if want("sentinel") {
            let _ = write!(
                o,
                "# Sentinel\r\nsentinel_masters:{}\r\nsentinel_tilt:0\r\nsentinel_tilt_since_seconds:-1\r\nsentinel_running_scripts:0\r\nsentinel_scripts_queue_length:0\r\nsentinel_simulate_failure_flags:0\r\n",
                cluster.groups.len()
            );
            for (i, g) in cluster.groups.values().enumerate() {
                let down = self.flags_for(g, &g.primary, true).contains("down");
                let _ = write!(
                    o,
                    "master{i}:name={},status={},address={},slaves={},sentinels={}\r\n",
                    g.name,
                    if down { "sdown" } else { "ok" },
                    g.primary,
                    g.replicas.len(),
                    co.members.len()
                );
            }
            o.push_str("\r\n");
        }
        if want("coordinator") {
            let (state, term, leader) = co.raft_status();
            let _ = write!(
                o,
                "# Coordinator\r\nraft_node_id:{}\r\nraft_role:{:?}\r\nraft_term:{}\r\nraft_leader:{}\r\nraft_members:{}\r\n",
                co.node_id,
                state,
                term,
                leader.and_then(|l| co.members.get(l as usize - 1).cloned()).unwrap_or_default(),
                co.members.join(",")
            );
            let health = co.health.lock().unwrap();
            for (i, g) in cluster.groups.values().enumerate() {
                let _ = write!(
                    o,
                    "group{i}:name={},primary={},epoch={},durability_replicas={},durability_set={},failover={}\r\n",
                    g.name,
                    g.primary,
                    g.epoch,
                    g.durability_n,
                    g.durability_set.join(";"),
                    g.failover.as_ref().map_or("none".to_string(), |f| format!("epoch-{}-from-{}", f.epoch, f.from))
                );
                if let Some(w) = &g.waiting_reason {
                    let _ = write!(o, "group{i}_waiting:{w}\r\n");
                }
                if let Some(f) = &g.last_failover {
                    let _ = write!(
                        o,
                        "group{i}_last_failover:epoch={},from={},to={},reason={},at_ms={},took_ms={},forced={}\r\ngroup{i}_last_failover_note:{}\r\n",
                        f.epoch,
                        f.from,
                        f.to,
                        f.reason,
                        f.ended_ms,
                        f.ended_ms.saturating_sub(f.started_ms),
                        f.forced as u8,
                        f.note
                    );
                }
                for (j, r) in g.replicas.iter().enumerate() {
                    let h = health.get(r);
                    let info = h.and_then(|h| h.info.as_ref());
                    let _ = write!(
                        o,
                        "group{i}_replica{j}:addr={r},state={},offset={},fsynced_lsn={},durable={},promised_epoch={}\r\n",
                        match h {
                            Some(h) if h.sdown => "down",
                            Some(_) if info.is_some_and(|i| i.is_master) => "master",
                            Some(_) if info.is_some_and(|i| i.link_up) => "online",
                            Some(_) if info.is_some() => "link-down",
                            _ => "unknown",
                        },
                        info.map_or(0, |i| i.offset),
                        info.and_then(|i| i.ruvio).map_or("-".to_string(), |r| r.fsynced_lsn.to_string()),
                        g.durability_set.contains(r) as u8,
                        g.promises.get(r).copied().unwrap_or(0)
                    );
                }
            }
            o.push_str("\r\n");
        }
        o
    }

    // -- SENTINEL ---------------------------------------------------------------------------------------------

    fn flags_for(&self, g: &Group, addr: &str, is_primary: bool) -> String {
        let mut f = vec![if is_primary { "master" } else { "slave" }];
        let health = self.co.health.lock().unwrap();
        if let Some(h) = health.get(addr) {
            if h.sdown {
                f.push("s_down");
            }
            if h.last_ok.is_none() {
                f.push("disconnected");
            }
        }
        drop(health);
        if is_primary {
            let rt = self.co.runtime.lock().unwrap();
            if rt.get(&g.name).is_some_and(|r| r.odown) {
                f.push("o_down");
            }
            if g.failover.is_some() {
                f.push("failover_in_progress");
            }
        }
        f.join(",")
    }

    fn map(&self, pairs: Vec<(&str, String)>) -> Value {
        Value::Map(pairs.into_iter().map(|(k, v)| (bulk(k), bulk(v))).collect())
    }

    fn common_fields(&self, addr: &str, h: Option<&Health>) -> Vec<(&'static str, String)> {
        let (ip, port) = addr.rsplit_once(':').unwrap_or((addr, "0"));
        let ms = |t: Option<Instant>| t.map_or("0".to_string(), |t| t.elapsed().as_millis().to_string());
        let info = h.and_then(|h| h.info.as_ref());
        vec![
            ("name", addr.to_string()),
            ("ip", ip.to_string()),
            ("port", port.to_string()),
            ("runid", info.map(|i| i.run_id.clone()).unwrap_or_default()),
            ("link-pending-commands", "0".into()),
            ("link-refcount", "1".into()),
            ("last-ping-sent", h.map_or("0".into(), |h| if h.last_reply >= h.last_ping_sent { "0".into() } else { ms(h.last_ping_sent) })),
            ("last-ok-ping-reply", ms(h.and_then(|h| h.last_ok))),
            ("last-ping-reply", ms(h.and_then(|h| h.last_reply))),
            ("info-refresh", ms(h.and_then(|h| h.info_at))),
            ("role-reported", if info.is_some_and(|i| !i.is_master) { "slave".into() } else { "master".into() }),
            ("role-reported-time", ms(h.map(|h| h.created))),
        ]
    }

    fn master_value(&self, g: &Group) -> Value {
        let co = &self.co;
        let gc = co.group_cfg(&g.name);
        let h = co.health.lock().unwrap().get(&g.primary).cloned();
        let mut f = self.common_fields(&g.primary, h.as_ref());
        f[0].1 = g.name.clone();
        f.insert(4, ("flags", self.flags_for(g, &g.primary, true)));
        if let Some(h) = &h {
            if let Some(t) = h.sdown_since {
                f.push(("s-down-time", t.elapsed().as_millis().to_string()));
            }
        }
        if let Some(t) = co.runtime.lock().unwrap().get(&g.name).and_then(|r| r.odown_since) {
            f.push(("o-down-time", t.elapsed().as_millis().to_string()));
        }
        f.extend([
            ("down-after-milliseconds", gc.map_or(0, |c| c.down_after_ms).to_string()),
            ("config-epoch", g.epoch.to_string()),
            ("num-slaves", g.replicas.len().to_string()),
            ("num-other-sentinels", (co.members.len() - 1).to_string()),
            ("quorum", gc.map_or(0, |c| c.quorum).to_string()),
            ("failover-timeout", gc.map_or(0, |c| c.failover_timeout_ms).to_string()),
            ("parallel-syncs", gc.map_or(1, |c| c.parallel_syncs).to_string()),
            ("durability-replicas", g.durability_n.to_string()),
            ("durability-set", g.durability_set.join(",")),
        ]);
        if let Some(fo) = &g.failover {
            f.push(("failover-state", "select_slave".into()));
            f.push(("failover-epoch", fo.epoch.to_string()));
        }
        if let Some(w) = &g.waiting_reason {
            f.push(("failover-waiting-reason", w.clone()));
        }
        if let Some(l) = &g.last_failover {
            f.push(("last-failover", format!("epoch {} from {} to {} ({}, {} ms{})", l.epoch, l.from, l.to, l.reason, l.ended_ms.saturating_sub(l.started_ms), if l.forced { ", FORCED" } else { "" })));
            f.push(("last-failover-note", l.note.clone()));
        }
        self.map(f)
    }

    fn replica_value(&self, g: &Group, addr: &str) -> Value {
        let h = self.co.health.lock().unwrap().get(addr).cloned();
        let mut f = self.common_fields(addr, h.as_ref());
        f.insert(4, ("flags", self.flags_for(g, addr, false)));
        let info = h.as_ref().and_then(|h| h.info.clone());
        let gc = self.co.group_cfg(&g.name);
        let (mh, mp) = info.as_ref().map_or((String::new(), 0), |i| (i.master_host.clone(), i.master_port));
        f.extend([
            ("down-after-milliseconds", gc.map_or(0, |c| c.down_after_ms).to_string()),
            ("master-link-down-time", "0".into()),
            ("master-link-status", if info.as_ref().is_some_and(|i| i.link_up) { "ok".into() } else { "err".into() }),
            ("master-host", if mh.is_empty() { "?".into() } else { mh }),
            ("master-port", mp.to_string()),
            ("slave-priority", info.as_ref().map_or(100, |i| i.slave_priority).to_string()),
            ("slave-repl-offset", info.as_ref().map_or(0, |i| i.offset).to_string()),
            ("replica-announced", "1".into()),
            ("durable", (g.durability_set.iter().any(|d| d == addr) as u8).to_string()),
        ]);
        if let Some(r) = info.as_ref().and_then(|i| i.ruvio) {
            f.push(("ruvio-epoch", r.epoch.to_string()));
            f.push(("ruvio-fsynced-lsn", r.fsynced_lsn.to_string()));
        }
        self.map(f)
    }

    fn sentinel_value(&self, addr: &str, down_after_ms: u64) -> Value {
        let (ip, port) = addr.rsplit_once(':').unwrap_or((addr, "0"));
        let (_, term, leader) = self.co.raft_status();
        let is_leader = leader.and_then(|l| self.co.members.get(l as usize - 1)).is_some_and(|a| a == addr);
        let h = self.co.peers.lock().unwrap().get(addr).cloned();
        let ago = |t: Option<std::time::Instant>| t.map_or("0".to_string(), |t| t.elapsed().as_millis().to_string());
        // Sentinel's flag order: s_down first, the role, then the link state. Down is judged with this group's
        // down-after-milliseconds, as Sentinel does per master.
        let down = h.as_ref().is_some_and(|h| h.last_ok.unwrap_or(h.created).elapsed() > Duration::from_millis(down_after_ms));
        let mut flags = Vec::new();
        if down {
            flags.push("s_down");
        }
        flags.push("sentinel");
        if h.as_ref().is_some_and(|h| h.disconnected) {
            flags.push("disconnected");
        }
        let mut f = vec![
            ("name", addr.to_string()),
            ("ip", ip.to_string()),
            ("port", port.to_string()),
            ("runid", addr.to_string()),
            ("flags", flags.join(",")),
            ("link-pending-commands", "0".into()),
            ("link-refcount", "1".into()),
            ("last-ping-sent", if h.as_ref().is_some_and(|h| h.last_ok < h.last_ping_sent) { ago(h.as_ref().and_then(|h| h.last_ping_sent)) } else { "0".into() }),
            ("last-ok-ping-reply", ago(h.as_ref().and_then(|h| h.last_ok))),
            ("last-ping-reply", ago(h.as_ref().and_then(|h| h.last_reply))),
        ];
        if let Some(t) = h.as_ref().and_then(|h| h.sdown_since).filter(|_| down) {
            f.push(("s-down-time", t.elapsed().as_millis().to_string()));
        }
        f.extend([
            ("down-after-milliseconds", down_after_ms.to_string()),
            ("last-hello-message", "0".into()),
            ("voted-leader", if is_leader { addr.to_string() } else { "?".into() }),
            ("voted-leader-epoch", term.to_string()),
        ]);
        self.map(f)
    }

    async fn sentinel(&mut self, a: &[String]) -> Value {
        let sub = a[0].to_ascii_uppercase();
        let cluster = self.co.cluster_view();
        let group = |n: Option<&String>| n.and_then(|n| cluster.groups.get(n));
        let no_such = || err("ERR No such master with that name");
        match sub.as_str() {
            "GET-MASTER-ADDR-BY-NAME" if a.len() == 2 => match group(a.get(1)) {
                Some(g) => {
                    let (ip, port) = g.primary.rsplit_once(':').unwrap_or((&g.primary, "0"));
                    Value::Array(vec![bulk(ip), bulk(port)])
                }
                None => Value::NilArray,
            },
            "MASTERS" => Value::Array(cluster.groups.values().map(|g| self.master_value(g)).collect()),
            "MASTER" if a.len() == 2 => group(a.get(1)).map_or_else(no_such, |g| self.master_value(g)),
            "REPLICAS" | "SLAVES" if a.len() == 2 => match group(a.get(1)) {
                Some(g) => Value::Array(g.replicas.iter().map(|r| self.replica_value(g, r)).collect()),
                None => no_such(),
            },
            "SENTINELS" if a.len() == 2 => match group(a.get(1)) {
                Some(g) => {
                    let me = self.co.cfg.self_addr();
                    let down_after = self.co.group_cfg(&g.name).map_or(30_000, |c| c.down_after_ms);
                    Value::Array(self.co.members.iter().filter(|m| **m != me).map(|m| self.sentinel_value(m, down_after)).collect())
                }
                None => no_such(),
            },
            "MYID" => bulk(&self.co.run_id),
            "CKQUORUM" if a.len() == 2 => {
                let Some(gc) = self.co.group_cfg(&a[1]).cloned() else { return no_such() };
                let usable = self.usable_coordinators().await;
                let total = self.co.members.len();
                let majority = total / 2 + 1;
                if usable < gc.quorum {
                    err(format!("NOQUORUM {usable} usable coordinators. Not enough available coordinators to reach the specified quorum for this master"))
                } else if usable < majority {
                    err(format!("NOQUORUM {usable} usable coordinators. Not enough available coordinators to reach the majority and authorize a failover"))
                } else {
                    Value::simple_owned(format!("OK {usable} usable Sentinels. Quorum and failover authorization can be reached"))
                }
            }
            "FAILOVER" if a.len() == 2 || (a.len() == 3 && a[2].eq_ignore_ascii_case("FORCE")) => {
                if group(a.get(1)).is_none() {
                    return no_such();
                }
                let force = a.len() == 3;
                if self.co.is_leader() {
                    return match monitor::failover(&self.co, &a[1], force, "manual").await {
                        Ok(m) => {
                            tracing::info!("{}: {m}", a[1]);
                            Value::ok()
                        }
                        Err(e) if e.starts_with("INPROG") || e.starts_with("NOGOODSLAVE") || e.starts_with("NOQUORUM") => err(e),
                        Err(e) => err(format!("ERR {e}")),
                    };
                }
                let Some(leader) = self.co.leader_addr() else {
                    return err("NOQUORUM no consensus leader: a failover needs a majority of coordinators");
                };
                let mut args: Vec<&str> = vec!["SENTINEL", "FAILOVER", &a[1]];
                if force {
                    args.push("FORCE");
                }
                match Conn::connect(&leader, self.co.cfg.peer_auth(), Duration::from_secs(2)).await {
                    Ok(mut c) => c.cmd(&args, Duration::from_secs(60)).await.unwrap_or_else(|e| err(format!("ERR forwarding to the leader {leader}: {e}"))),
                    Err(e) => err(format!("NOQUORUM the consensus leader {leader} is unreachable ({e}): a failover needs a majority of coordinators")),
                }
            }
            "RESET" if a.len() == 2 => {
                let mut n = 0;
                for name in cluster.groups.keys() {
                    if glob(a[1].as_bytes(), name.as_bytes()) {
                        match self.co.propose(Command::Reset { name: name.clone() }).await {
                            Ok(_) => n += 1,
                            Err(e) => return err(format!("ERR {e}")),
                        }
                    }
                }
                Value::Integer(n)
            }
            "IS-MASTER-DOWN-BY-ADDR" if a.len() == 5 => {
                let addr = format!("{}:{}", a[1], a[2]);
                let down = self.co.health.lock().unwrap().get(&addr).is_some_and(|h| h.sdown);
                Value::Array(vec![Value::Integer(down as i64), bulk("*"), Value::Integer(0)])
            }
            "PENDING-SCRIPTS" => Value::Array(Vec::new()),
            "FLUSHCONFIG" => Value::ok(),
            _ => err(format!("ERR Unknown sentinel subcommand or wrong number of arguments for '{}'", a[0])),
        }
    }

    async fn usable_coordinators(&self) -> usize {
        let me = self.co.cfg.self_addr();
        let mut n = 1;
        for p in self.co.members.iter().filter(|p| **p != me) {
            if let Ok(mut c) = Conn::connect(p, self.co.cfg.peer_auth(), Duration::from_millis(800)).await {
                if matches!(c.cmd(&["PING"], Duration::from_millis(800)).await, Ok(Value::Simple(_))) {
                    n += 1;
                }
            }
        }
        n
    }

    // -- COORDINATOR (between coordinators) -------------------------------------------------------------------

    async fn coordinator(&mut self, a: &[String], raw: &[Bytes]) -> Value {
        match a[0].to_ascii_uppercase().as_str() {
            "RAFT" if raw.len() == 3 => match crate::raft::serve_rpc(&self.co.raft, &a[1], &raw[2]).await {
                Ok(b) => Value::bulk(b),
                Err(e) => err(format!("ERR raft rpc: {e}")),
            },
            "IS-DOWN" if a.len() == 2 => {
                // Judged at the moment of the question (not at the health loop's last tick).
                let health = self.co.health.lock().unwrap();
                let down = health.get(&a[1]).is_some_and(|h| {
                    let after = self.co.group_cfg(&h.group).map_or(u64::MAX, |g| g.down_after_ms);
                    h.down_now(Duration::from_millis(after))
                });
                Value::Integer(down as i64)
            }
            "PROPOSE" if raw.len() == 2 => {
                let cmd: Command = match serde_json::from_slice(&raw[1]) {
                    Ok(c) => c,
                    Err(e) => return err(format!("ERR bad proposal: {e}")),
                };
                if !self.co.is_leader() {
                    return err("ERR not the consensus leader");
                }
                match self.co.write_local(cmd).await {
                    Ok(r) => Value::bulk(serde_json::to_vec(&r).unwrap_or_default()),
                    Err(e) => err(format!("ERR {e}")),
                }
            }
            "STATE" => Value::bulk(serde_json::to_vec(&self.co.sm.cluster()).unwrap_or_default()),
            "NOW" => Value::Integer(now_ms() as i64),
            _ => err("ERR unknown COORDINATOR subcommand"),
        }
    }
}
