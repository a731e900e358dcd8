//! `ruvio coordinator` against real processes on 127.0.0.1: Debian's redis-server as primary and replicas (Ruvio
//! has no replication yet), one or three coordinators. Every wait is a bounded loop on a condition.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bulk, free_port, temp_dir, Conn};
use ruvio_protocol::Value;

const WAIT: Duration = Duration::from_secs(60);

fn redis_server_bin() -> String {
    let p = "/usr/bin/redis-server";
    assert!(Path::new(p).exists(), "redis-server is required for the coordinator tests (apt-get install redis-server)");
    p.to_string()
}

struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn kill9(&mut self) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill9();
        }
    }
}

/// A redis-server on `port`, data in `dir`, optionally a replica of `primary`.
fn redis(dir: &Path, port: u16, primary: Option<u16>) -> Proc {
    let d = dir.join(format!("redis-{port}"));
    std::fs::create_dir_all(&d).unwrap();
    let log = d.join("log");
    let mut cmd = Command::new(redis_server_bin());
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir", d.to_str().unwrap(), "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"]);
    if let Some(p) = primary {
        cmd.args(["--replicaof", "127.0.0.1", &p.to_string()]);
    }
    let child = cmd.stdout(std::fs::File::create(&log).unwrap()).stderr(Stdio::null()).spawn().expect("spawning redis-server");
    let p = Proc { child, log };
    wait_for(&format!("redis-server {port} up"), || Conn::try_connect(port).ok().and_then(|mut c| c.try_cmd(&["PING"]).ok()).is_some());
    p
}

struct Coordinators {
    dir: PathBuf,
    ports: Vec<u16>,
    procs: Vec<Option<Proc>>,
    conf: String,
}

impl Coordinators {
    /// `n` coordinators monitoring `mymaster` at `primary` with `quorum`.
    fn start(dir: &Path, n: usize, primary: u16, quorum: usize) -> Coordinators {
        Self::start_with(dir, n, primary, quorum, "")
    }

    fn start_with(dir: &Path, n: usize, primary: u16, quorum: usize, extra: &str) -> Coordinators {
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let peers: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let conf = format!(
            "bind 127.0.0.1\ncoordinator-peers {}\nsentinel monitor mymaster 127.0.0.1 {primary} {quorum}\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\nsentinel parallel-syncs mymaster 1\n{}{extra}",
            peers.join(" "),
            // redis-server nodes: no `coordinator` user there, only the coordinators' own login.
            common::coordinator_auth_conf("mymaster", false)
        );
        let mut c = Coordinators { dir: dir.to_path_buf(), ports, procs: Vec::new(), conf };
        for i in 0..n {
            let p = c.spawn(i);
            c.procs.push(Some(p));
        }
        for i in 0..n {
            let port = c.ports[i];
            wait_for(&format!("coordinator {port} answers"), || Conn::try_connect(port).ok().and_then(|mut c| c.try_cmd(&["PING"]).ok()).is_some());
        }
        c
    }

    fn spawn(&self, i: usize) -> Proc {
        let port = self.ports[i];
        let d = self.dir.join(format!("coordinator-{port}"));
        std::fs::create_dir_all(&d).unwrap();
        let conf = d.join("coordinator.conf");
        std::fs::write(&conf, format!("port {port}\ndir {}\n{}", d.display(), self.conf)).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ruvio"))
            .args(["coordinator", "--config", conf.to_str().unwrap()])
            .env("RUST_LOG", "info,openraft=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::options().create(true).append(true).open(d.join("log")).unwrap())
            .spawn()
            .expect("spawning ruvio coordinator");
        Proc { child, log: d.join("log") }
    }

    fn restart(&mut self, i: usize) {
        let p = self.spawn(i);
        self.procs[i] = Some(p);
        let port = self.ports[i];
        wait_for(&format!("coordinator {port} answers"), || Conn::try_connect(port).ok().and_then(|mut c| c.try_cmd(&["PING"]).ok()).is_some());
    }

    fn kill9(&mut self, i: usize) {
        if let Some(mut p) = self.procs[i].take() {
            p.kill9();
        }
    }

    fn logs(&self) -> String {
        self.procs.iter().flatten().map(|p| p.log()).collect::<Vec<_>>().join("\n----\n")
    }

    fn alive(&self) -> Vec<usize> {
        (0..self.ports.len()).filter(|i| self.procs[*i].is_some()).collect()
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cmd(port: u16, args: &[&str]) -> Option<Value> {
    let mut c = Conn::try_connect(port).ok()?;
    c.set_timeout(Duration::from_secs(20));
    c.try_cmd(args).ok()
}

fn master_addr(coord: u16) -> Option<(String, u16)> {
    match cmd(coord, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"])? {
        Value::Array(v) if v.len() == 2 => Some((bulk(&v[0])?, bulk(&v[1])?.parse().ok()?)),
        _ => None,
    }
}

/// A flat field/value array as pairs.
fn fields(v: &Value) -> Vec<(String, String)> {
    let items = match v {
        Value::Array(a) => a.clone(),
        Value::Map(m) => m.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect(),
        other => panic!("not a field list: {other:?}"),
    };
    items.chunks(2).map(|c| (bulk(&c[0]).unwrap_or_default(), bulk(&c[1]).unwrap_or_default())).collect()
}

fn field(v: &Value, name: &str) -> Option<String> {
    fields(v).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn replica_ports(coord: u16) -> Vec<u16> {
    match cmd(coord, &["SENTINEL", "REPLICAS", "mymaster"]) {
        Some(Value::Array(list)) => {
            let mut v: Vec<u16> = list.iter().filter_map(|r| field(r, "port")?.parse().ok()).collect();
            v.sort();
            v
        }
        _ => Vec::new(),
    }
}

/// `ROLE` of a redis-server: ("master", None) or ("slave", Some(primary port)).
fn role(port: u16) -> Option<(String, Option<u16>)> {
    match cmd(port, &["ROLE"])? {
        Value::Array(v) => {
            let r = bulk(&v[0])?;
            let p = if r == "slave" { v.get(2).and_then(|p| p.as_i64()).map(|p| p as u16) } else { None };
            Some((r, p))
        }
        _ => None,
    }
}

fn info_field(coord: u16, name: &str) -> Option<String> {
    let t = bulk(&cmd(coord, &["INFO", "coordinator"])?)?;
    t.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|s| s.trim().to_string()))
}

/// A subscriber to `+switch-master` on a coordinator.
fn subscribe_switch(coord: u16) -> Conn {
    let mut c = Conn::connect(coord);
    c.set_timeout(WAIT);
    let v = c.cmd(&["SUBSCRIBE", "+switch-master"]);
    assert!(matches!(&v, Value::Array(a) if bulk(&a[0]).as_deref() == Some("subscribe")), "{v:?}");
    c
}

fn expect_switch(sub: &mut Conn, old: u16, new: u16) {
    let v = sub.read_reply().expect("a +switch-master message");
    let Value::Array(a) = v else { panic!("{v:?}") };
    assert_eq!(bulk(&a[0]).as_deref(), Some("message"));
    assert_eq!(bulk(&a[1]).as_deref(), Some("+switch-master"));
    assert_eq!(bulk(&a[2]).unwrap(), format!("mymaster 127.0.0.1 {old} 127.0.0.1 {new}"));
}

struct Group {
    ports: [u16; 3],
    nodes: Vec<Option<Proc>>,
}

fn start_group(dir: &Path) -> Group {
    let ports = [free_port(), free_port(), free_port()];
    let p = redis(dir, ports[0], None);
    let r1 = redis(dir, ports[1], Some(ports[0]));
    let r2 = redis(dir, ports[2], Some(ports[0]));
    // The replicas must have finished their first sync: a replica still in it is not a candidate (as in Sentinel).
    let mut c = Conn::connect(ports[0]);
    assert!(common::is_ok(&c.cmd(&["SET", "synced", "1"])));
    wait_for("both replicas synced", || c.cmd(&["WAIT", "2", "1000"]) == Value::Integer(2));
    Group { ports, nodes: vec![Some(p), Some(r1), Some(r2)] }
}

/// Kill -9 of the primary, failover, the others re-pointed, the old primary restarted becomes a replica.
fn kill_primary_and_check_failover(dir: &Path, g: &mut Group, co: &Coordinators, subs: &mut [Conn]) -> u16 {
    let old = g.ports[0];
    g.nodes[0].as_mut().unwrap().kill9();
    let alive = co.alive();
    let new = {
        let start = Instant::now();
        loop {
            if let Some((_, p)) = master_addr(co.ports[alive[0]]) {
                if p != old {
                    break p;
                }
            }
            assert!(start.elapsed() < WAIT, "no failover within {WAIT:?}; logs:\n{}", co.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(g.ports[1..].contains(&new), "promoted a node that was not a replica: {new}");
    for i in &alive {
        wait_for("every live coordinator names the new primary", || master_addr(co.ports[*i]).is_some_and(|(_, p)| p == new));
    }
    for s in subs.iter_mut() {
        expect_switch(s, old, new);
    }
    assert_eq!(role(new).unwrap().0, "master");
    let other = *g.ports[1..].iter().find(|p| **p != new).unwrap();
    wait_for("the other replica follows the new primary", || role(other) == Some(("slave".into(), Some(new))));
    // The old primary comes back (empty, as a primary) and is turned into a replica of the new one.
    g.nodes[0] = Some(redis(dir, old, None));
    wait_for("the old primary becomes a replica of the new one", || role(old) == Some(("slave".into(), Some(new))));
    let reps = replica_ports(co.ports[alive[0]]);
    assert!(reps.contains(&old) && reps.contains(&other) && !reps.contains(&new), "replicas after failover: {reps:?}");
    new
}

#[test]
fn one_coordinator_discovers_fails_over_and_keeps_state_across_restart() {
    let dir = temp_dir("coord-one");
    let mut g = start_group(&dir);
    let mut co = Coordinators::start(&dir, 1, g.ports[0], 1);
    let c = co.ports[0];

    // Discovery and the Sentinel reply shapes clients read.
    assert_eq!(master_addr(c), Some(("127.0.0.1".into(), g.ports[0])));
    let mut want = vec![g.ports[1], g.ports[2]];
    want.sort();
    wait_for("both replicas discovered", || replica_ports(c) == want);
    let masters = cmd(c, &["SENTINEL", "MASTERS"]).unwrap();
    let Value::Array(list) = &masters else { panic!("{masters:?}") };
    assert_eq!(list.len(), 1);
    assert_eq!(field(&list[0], "name").as_deref(), Some("mymaster"));
    assert_eq!(field(&list[0], "flags").as_deref(), Some("master"));
    assert_eq!(field(&list[0], "num-other-sentinels").as_deref(), Some("0"));
    assert_eq!(field(&list[0], "num-slaves").as_deref(), Some("2"));
    assert_eq!(field(&list[0], "quorum").as_deref(), Some("1"));
    let role_reply = cmd(c, &["ROLE"]).unwrap();
    assert_eq!(role_reply, Value::Array(vec![Value::bulk_str("sentinel"), Value::Array(vec![Value::bulk_str("mymaster")])]));
    assert!(matches!(cmd(c, &["SENTINEL", "MASTER", "nosuch"]), Some(Value::Error(_))));
    assert_eq!(cmd(c, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nosuch"]), Some(Value::NilArray));
    let ck = cmd(c, &["SENTINEL", "CKQUORUM", "mymaster"]).unwrap();
    assert!(matches!(&ck, Value::Simple(s) if s.starts_with(b"OK 1 usable")), "{ck:?}");

    let mut subs = vec![subscribe_switch(c)];
    let new = kill_primary_and_check_failover(&dir, &mut g, &co, &mut subs);
    assert_eq!(info_field(c, "group0").unwrap(), format!("name=mymaster,primary=127.0.0.1:{new},epoch=1,durability_replicas=0,durability_set=,failover=none"));

    // Restart: the agreed state (new primary, epoch, last failover) comes back from the data folder.
    co.kill9(0);
    co.restart(0);
    assert_eq!(master_addr(c), Some(("127.0.0.1".into(), new)));
    assert!(info_field(c, "group0").unwrap().contains("epoch=1"));
    assert!(info_field(c, "group0_last_failover").unwrap().contains(&format!("to=127.0.0.1:{new}")));
    wait_for("the restarted coordinator leads again", || info_field(c, "raft_role").as_deref() == Some("Leader"));
}

#[test]
fn three_coordinators_fail_over_after_the_raft_leader_dies() {
    let dir = temp_dir("coord-three");
    let mut g = start_group(&dir);
    let mut co = Coordinators::start(&dir, 3, g.ports[0], 2);
    let mut want = vec![g.ports[1], g.ports[2]];
    want.sort();
    for p in co.ports.clone() {
        wait_for("every coordinator knows both replicas", || replica_ports(p) == want);
        let m = cmd(p, &["SENTINEL", "MASTER", "mymaster"]).unwrap();
        assert_eq!(field(&m, "num-other-sentinels").as_deref(), Some("2"));
        let s = cmd(p, &["SENTINEL", "SENTINELS", "mymaster"]).unwrap();
        assert!(matches!(&s, Value::Array(a) if a.len() == 2), "{s:?}");
    }
    // Kill the raft leader while it monitors.
    let mut leader = String::new();
    wait_for("a raft leader", || {
        leader = info_field(co.ports[0], "raft_leader").unwrap_or_default();
        !leader.is_empty()
    });
    let li = co.ports.iter().position(|p| leader.ends_with(&format!(":{p}"))).expect("leader is a member");
    co.kill9(li);
    let mut subs: Vec<Conn> = co.alive().iter().map(|i| subscribe_switch(co.ports[*i])).collect();
    kill_primary_and_check_failover(&dir, &mut g, &co, &mut subs);
    let ck = cmd(co.ports[co.alive()[0]], &["SENTINEL", "CKQUORUM", "mymaster"]).unwrap();
    assert!(matches!(&ck, Value::Simple(s) if s.starts_with(b"OK 2 usable")), "{ck:?}");
}

#[test]
fn one_coordinator_of_three_cannot_fail_over() {
    let dir = temp_dir("coord-lone");
    let mut g = start_group(&dir);
    // Quorum 1: the lone coordinator's own view would be enough to call the primary down; consensus still stops it.
    let mut co = Coordinators::start(&dir, 3, g.ports[0], 1);
    let mut want = vec![g.ports[1], g.ports[2]];
    want.sort();
    let c = co.ports[2];
    wait_for("replicas discovered", || replica_ports(c) == want);
    co.kill9(0);
    co.kill9(1);
    g.nodes[0].as_mut().unwrap().kill9();
    wait_for("the lone coordinator sees the primary down", || {
        cmd(c, &["SENTINEL", "MASTER", "mymaster"]).and_then(|m| field(&m, "flags")).is_some_and(|f| f.contains("s_down"))
    });
    let f = cmd(c, &["SENTINEL", "FAILOVER", "mymaster"]).unwrap();
    assert!(matches!(&f, Value::Error(e) if e.starts_with(b"NOQUORUM")), "{f:?}");
    let ck = cmd(c, &["SENTINEL", "CKQUORUM", "mymaster"]).unwrap();
    assert!(matches!(&ck, Value::Error(e) if e.starts_with(b"NOQUORUM")), "{ck:?}");
    // Give it well over down-after (and several election timeouts): nothing may be promoted.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(master_addr(c), Some(("127.0.0.1".into(), g.ports[0])));
    assert_eq!(role(g.ports[1]).unwrap().0, "slave");
    assert_eq!(role(g.ports[2]).unwrap().0, "slave");
    // Nothing was committed: the epoch is still 0 and no failover is recorded.
    assert!(info_field(c, "group0").unwrap().contains("epoch=0"), "{:?}", info_field(c, "group0"));
    assert_eq!(info_field(c, "group0_last_failover"), None);
    // One peer back makes a majority: now it fails over.
    co.restart(1);
    wait_for("failover once a majority is back", || master_addr(c).is_some_and(|(_, p)| p != g.ports[0]));
}

#[test]
fn paused_primary_is_failed_over_then_demoted_and_a_manual_failover_goes_through_a_follower() {
    let dir = temp_dir("coord-pause");
    let g = start_group(&dir);
    let co = Coordinators::start(&dir, 3, g.ports[0], 2);
    let mut want = vec![g.ports[1], g.ports[2]];
    want.sort();
    for p in co.ports.clone() {
        wait_for("every coordinator knows both replicas", || replica_ports(p) == want);
    }
    let old = g.ports[0];
    // A client of the primary, connected before the pause: it must be disconnected when the node is demoted.
    let mut client = Conn::connect(old);
    assert!(common::is_ok(&client.cmd(&["SET", "k", "v"])));
    // Both replicas have it (their first sync is over).
    wait_for("both replicas acknowledged", || client.cmd(&["WAIT", "2", "1000"]) == Value::Integer(2));
    let mut sub = subscribe_switch(co.ports[0]);
    let pid = g.nodes[0].as_ref().unwrap().child.id() as i32;
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let start = Instant::now();
    let new = loop {
        if let Some((_, p)) = master_addr(co.ports[0]) {
            if p != old {
                break p;
            }
        }
        if start.elapsed() > WAIT {
            unsafe { libc::kill(pid, libc::SIGCONT) };
            panic!("no failover of a paused primary; logs:\n{}", co.logs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    expect_switch(&mut sub, old, new);
    unsafe { libc::kill(pid, libc::SIGCONT) };
    wait_for("the paused primary, resumed, becomes a replica of the new one", || role(old) == Some(("slave".into(), Some(new))));
    wait_for("its old clients are disconnected", || client.try_cmd(&["PING"]).is_err());
    assert_eq!(cmd(new, &["GET", "k"]).and_then(|v| bulk(&v)).as_deref(), Some("v"));

    // Manual failover asked on a coordinator that is not the raft leader (forwarded to it).
    let leader = info_field(co.ports[0], "raft_leader").unwrap();
    let follower = *co.ports.iter().find(|p| !leader.ends_with(&format!(":{p}"))).unwrap();
    wait_for("the demoted node caught up", || {
        cmd(co.ports[0], &["SENTINEL", "REPLICAS", "mymaster"]).is_some_and(|v| match v {
            Value::Array(list) => list.iter().all(|r| field(r, "master-link-status").as_deref() == Some("ok")),
            _ => false,
        })
    });
    assert!(common::is_ok(&cmd(new, &["SET", "before-switch", "1"]).unwrap()));
    let r = cmd(follower, &["SENTINEL", "FAILOVER", "mymaster"]).unwrap();
    assert!(common::is_ok(&r), "{r:?}; logs:\n{}", co.logs());
    let third = master_addr(follower).unwrap().1;
    assert_ne!(third, new);
    expect_switch(&mut sub, new, third);
    assert_eq!(cmd(third, &["GET", "before-switch"]).and_then(|v| bulk(&v)).as_deref(), Some("1"));
    wait_for("the previous primary follows the new one", || role(new) == Some(("slave".into(), Some(third))));
    assert!(info_field(follower, "group0").unwrap().contains("epoch=2"));
}

#[test]
fn durability_rule_without_promises_waits_visibly_and_force_overrides() {
    let dir = temp_dir("coord-wait");
    let mut g = start_group(&dir);
    // n = 1 on redis-server nodes: no REPLICATION PROMISE possible, so the rule can never be met.
    let co = Coordinators::start_with(&dir, 1, g.ports[0], 1, "sentinel durability-replicas mymaster 1\n");
    let c = co.ports[0];
    let mut want = vec![g.ports[1], g.ports[2]];
    want.sort();
    wait_for("replicas discovered", || replica_ports(c) == want);
    let m = cmd(c, &["SENTINEL", "MASTER", "mymaster"]).unwrap();
    assert_eq!(field(&m, "durability-replicas").as_deref(), Some("1"));
    let old = g.ports[0];
    g.nodes[0].as_mut().unwrap().kill9();
    let mut reason = String::new();
    wait_for("the reason for not promoting is visible", || {
        reason = cmd(c, &["SENTINEL", "MASTER", "mymaster"]).and_then(|m| field(&m, "failover-waiting-reason")).unwrap_or_default();
        !reason.is_empty()
    });
    assert!(reason.contains("durability-replicas 1") && reason.contains("redis-server"), "{reason}");
    assert!(info_field(c, "group0_waiting").is_some_and(|w| w == reason));
    assert_eq!(master_addr(c), Some(("127.0.0.1".into(), old)));
    assert_eq!(role(g.ports[1]).unwrap().0, "slave");
    assert_eq!(role(g.ports[2]).unwrap().0, "slave");
    let r = cmd(c, &["SENTINEL", "FAILOVER", "mymaster"]).unwrap();
    assert!(matches!(&r, Value::Error(e) if String::from_utf8_lossy(e).contains("redis-server")), "{r:?}");
    // The operator forces it: promoted, and what may be lost is recorded.
    let r = cmd(c, &["SENTINEL", "FAILOVER", "mymaster", "FORCE"]).unwrap();
    assert!(common::is_ok(&r), "{r:?}; logs:\n{}", co.logs());
    let new = master_addr(c).unwrap().1;
    assert!(g.ports[1..].contains(&new));
    let m = cmd(c, &["SENTINEL", "MASTER", "mymaster"]).unwrap();
    let note = field(&m, "last-failover-note").unwrap_or_default();
    assert!(note.contains("FORCED") && note.contains("lost"), "{note}");
    assert!(field(&m, "last-failover").unwrap_or_default().contains("FORCED"));
    assert_eq!(field(&m, "failover-waiting-reason"), None);
}
