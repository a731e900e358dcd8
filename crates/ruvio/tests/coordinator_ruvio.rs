//! `ruvio coordinator` over Ruvio nodes (needs the server's replication, issue 13): the durability rule end to end
//! with `sentinel durability-replicas 1` and two replicas (R = 2, so both must promise).

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bulk, free_port, temp_dir, Conn};
use ruvio_protocol::Value;

const WAIT: Duration = Duration::from_secs(60);

struct Proc(Child);

impl Proc {
    fn kill9(&mut self) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.kill9();
        }
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

fn text(port: u16, args: &[&str]) -> String {
    cmd(port, args).and_then(|v| bulk(&v)).unwrap_or_default()
}

fn line(t: &str, name: &str) -> Option<String> {
    t.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|s| s.trim().to_string()))
}

fn node(dir: &Path, port: u16, primary: Option<u16>) -> Proc {
    let d = dir.join(format!("node-{port}"));
    std::fs::create_dir_all(&d).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_ruvio"));
    c.args(["--port", &port.to_string(), "--dir", d.to_str().unwrap(), "--appendonly", "yes", "--appendfsync", "always"]);
    c.args(["--coordinator-pass", common::COORD_PASS]);
    if let Some(p) = primary {
        c.args(["--replicaof", &format!("127.0.0.1 {p}")]);
    }
    let child = c.stdout(Stdio::null()).stderr(std::fs::File::options().create(true).append(true).open(d.join("log")).unwrap()).spawn().unwrap();
    let p = Proc(child);
    wait_for(&format!("node {port} up"), || cmd(port, &["PING"]).is_some());
    p
}

fn master_port(coord: u16) -> Option<u16> {
    match cmd(coord, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"])? {
        Value::Array(v) if v.len() == 2 => bulk(&v[1])?.parse().ok(),
        _ => None,
    }
}

#[test]
fn durable_failover_waits_for_promises_then_promotes_a_replica_with_every_durable_write() {
    let dir = temp_dir("coord-ruvio");
    let (p0, p1, p2, cp) = (free_port(), free_port(), free_port(), free_port());
    let mut n0 = node(&dir, p0, None);
    let _n1 = node(&dir, p1, Some(p0));
    let mut n2 = node(&dir, p2, Some(p0));
    let cdir = dir.join("coordinator");
    std::fs::create_dir_all(&cdir).unwrap();
    let conf = cdir.join("c.conf");
    std::fs::write(
        &conf,
        format!("port {cp}\ndir {}\nsentinel monitor mymaster 127.0.0.1 {p0} 1\nsentinel down-after-milliseconds mymaster 1000\nsentinel durability-replicas mymaster 1\n{}", cdir.display(), common::coordinator_auth_conf("mymaster", true)),
    )
    .unwrap();
    let _co = Proc(
        Command::new(env!("CARGO_BIN_EXE_ruvio"))
            .args(["coordinator", "--config", conf.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(cdir.join("log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("coordinator up", || cmd(cp, &["PING"]).is_some());
    wait_for("both replicas in the durability set", || {
        let g = line(&text(cp, &["INFO", "coordinator"]), "group0").unwrap_or_default();
        g.contains(&format!("127.0.0.1:{p1}")) && g.contains(&format!("127.0.0.1:{p2}"))
    });
    wait_for("the primary counts both replicas for durable writes", || {
        text(p0, &["INFO", "replication"]).matches("durable=1").count() == 2
    });
    // A durable write: answered once a replica has it on disk.
    let mut c = Conn::connect(p0);
    assert!(common::is_ok(&c.cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"])));
    assert!(common::is_ok(&c.cmd(&["SET", "durable", "1"])));

    // Primary and one replica die: one promise of the two needed, so no promotion, and the reason shows.
    n0.kill9();
    n2.kill9();
    wait_for("the waiting reason", || {
        line(&text(cp, &["INFO", "coordinator"]), "group0_waiting").is_some_and(|w| w.contains("only 1 of 2"))
    });
    assert_eq!(master_port(cp), Some(p0));
    assert!(text(p1, &["INFO", "replication"]).contains("role:slave"));

    // The replica comes back: both promise, one is promoted, in the new epoch, with the durable write.
    let _n2 = node(&dir, p2, Some(p0));
    wait_for("failover once both promised", || master_port(cp).is_some_and(|p| p != p0));
    let new = master_port(cp).unwrap();
    let info = text(cp, &["INFO", "coordinator"]);
    let g = line(&info, "group0").unwrap();
    let epoch: u64 = g.split("epoch=").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
    assert!(line(&info, "group0_last_failover_note").unwrap().contains("2 of 2 durability replicas promised"));
    let ninfo = text(new, &["INFO", "replication"]);
    assert!(ninfo.contains("role:master"));
    assert_eq!(line(&ninfo, "ruvio_epoch").unwrap().parse::<u64>().unwrap(), epoch);
    assert_eq!(cmd(new, &["GET", "durable"]).and_then(|v| bulk(&v)).as_deref(), Some("1"));
    let other = if new == p1 { p2 } else { p1 };
    wait_for("the other replica follows the new primary", || line(&text(other, &["INFO", "replication"]), "master_port").is_some_and(|p| p == new.to_string()));
}
