//! Helpers for tests that run a cluster of `ruvio` processes and coordinators: a child process killed on drop
//! (resumed first if it was paused), one-shot commands, and INFO fields.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ruvio_protocol::Value;

use super::{bulk, free_port, temp_dir, Conn};

const WAIT: Duration = Duration::from_secs(60);

/// A `ruvio` (node or coordinator) process and its log file; killed (after SIGCONT) when dropped.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    /// Waits for a SIGSTOP or SIGCONT to take effect (`signal_pid`): a replica paused without waiting could still
    /// acknowledge the next write (seen in CI on a loaded machine: a durable LEASE granted "after" the pause).
    pub fn signal(&self, sig: i32) {
        super::signal_pid(self.pid(), sig);
    }
    pub fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(libc::SIGCONT);
            self.kill9();
        }
    }
}

/// One command on a fresh connection to `port` (None when unreachable or it does not answer within 5 s).
pub fn cmd(port: u16, args: &[&str]) -> Option<Value> {
    let mut c = Conn::try_connect(port).ok()?;
    c.set_timeout(Duration::from_secs(5));
    c.try_cmd(args).ok()
}

/// A bulk reply as text (INFO), empty when there is none.
pub fn text(port: u16, args: &[&str]) -> String {
    cmd(port, args).and_then(|v| bulk(&v)).unwrap_or_default()
}

/// The value of `name:` in an INFO text.
pub fn line(t: &str, name: &str) -> Option<String> {
    t.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|s| s.trim().to_string()))
}

pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ruvio nodes (appendonly, appendfsync always) and three coordinators (quorum 2, down-after 1000 ms); a `None`
/// process was killed.
pub struct Cluster {
    pub dir: PathBuf,
    pub nodes: Vec<(u16, Option<Proc>)>,
    pub coords: Vec<(u16, Option<Proc>)>,
}

/// A Ruvio node on `port` in `dir`/node-<port> (appendonly, appendfsync always), a replica of `primary` if given.
pub fn node(dir: &Path, port: u16, primary: Option<u16>) -> Proc {
    let d = dir.join(format!("node-{port}"));
    std::fs::create_dir_all(&d).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_ruvio"));
    c.args(["--port", &port.to_string(), "--dir", d.to_str().unwrap(), "--appendonly", "yes", "--appendfsync", "always"]);
    c.args(["--coordinator-pass", super::COORD_PASS]);
    if let Some(p) = primary {
        c.args(["--replicaof", &format!("127.0.0.1 {p}")]);
    }
    let log = d.join("log");
    let child = c.stdout(Stdio::null()).stderr(std::fs::File::options().create(true).append(true).open(&log).unwrap()).spawn().unwrap();
    let p = Proc { child, log };
    wait_for(&format!("node {port} up"), || cmd(port, &["PING"]).is_some());
    p
}

impl Cluster {
    /// A primary, `replicas` replicas, three coordinators with `durability-replicas n`; returns once every
    /// coordinator counts every replica in the durability set.
    pub fn start(name: &str, replicas: usize, n: usize) -> Cluster {
        Self::start_with(name, replicas, n, 1000)
    }

    /// [`Cluster::start`] with the coordinators' `down-after-milliseconds`.
    pub fn start_with(name: &str, replicas: usize, n: usize, down_after_ms: u64) -> Cluster {
        let dir = temp_dir(name);
        let p0 = free_port();
        let mut nodes = vec![(p0, Some(node(&dir, p0, None)))];
        for _ in 0..replicas {
            let p = free_port();
            nodes.push((p, Some(node(&dir, p, Some(p0)))));
        }
        let cports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let peers: Vec<String> = cports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let mut coords = Vec::new();
        for &cp in &cports {
            let d = dir.join(format!("coordinator-{cp}"));
            std::fs::create_dir_all(&d).unwrap();
            let conf = d.join("coordinator.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {cp}\nbind 127.0.0.1\ndir {}\ncoordinator-peers {}\nsentinel monitor mymaster 127.0.0.1 {p0} 2\nsentinel down-after-milliseconds mymaster {down_after_ms}\nsentinel failover-timeout mymaster 10000\nsentinel durability-replicas mymaster {n}\n{}",
                    d.display(),
                    peers.join(" "),
                    super::coordinator_auth_conf("mymaster", true)
                ),
            )
            .unwrap();
            let log = d.join("log");
            let child = Command::new(env!("CARGO_BIN_EXE_ruvio"))
                .args(["coordinator", "--config", conf.to_str().unwrap()])
                // The coordinator's default log filter, as an operator gets it (coordinator_logs.rs checks it).
                .env_remove("RUST_LOG")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            coords.push((cp, Some(Proc { child, log })));
        }
        let c = Cluster { dir, nodes, coords };
        let want: Vec<String> = c.nodes[1..].iter().map(|(p, _)| format!("127.0.0.1:{p}")).collect();
        wait_for("every coordinator counts every replica in the durability set", || {
            c.coords.iter().all(|(cp, _)| {
                let g = line(&text(*cp, &["INFO", "coordinator"]), "group0").unwrap_or_default();
                let set = g.split("durability_set=").nth(1).unwrap_or("").split(',').next().unwrap_or("").to_string();
                want.iter().all(|w| set.split(';').any(|s| s == w))
            })
        });
        // ... and the primary counts them (the coordinators' write lease names D to it).
        if n > 0 {
            wait_for("the primary counts every replica for durable writes", || {
                text(p0, &["INFO", "replication"]).matches("durable=1").count() == want.len()
            });
        }
        c
    }

    pub fn coord_ports(&self) -> Vec<u16> {
        self.coords.iter().filter(|(_, p)| p.is_some()).map(|(p, _)| *p).collect()
    }

    pub fn node_mut(&mut self, port: u16) -> &mut Option<Proc> {
        &mut self.nodes.iter_mut().find(|(p, _)| *p == port).unwrap().1
    }

    pub fn logs(&self) -> String {
        let mut s = String::new();
        for (p, c) in self.coords.iter().chain(self.nodes.iter()) {
            if let Some(c) = c {
                s.push_str(&format!("---- {p}\n{}\n", c.log()));
            }
        }
        s
    }

    /// The group's epoch as a coordinator reports it.
    pub fn epoch(&self) -> u64 {
        let ports = self.coord_ports();
        let g = line(&text(ports[0], &["INFO", "coordinator"]), "group0").unwrap_or_default();
        g.split("epoch=").nth(1).and_then(|s| s.split(',').next()).and_then(|s| s.parse().ok()).unwrap_or(0)
    }
}
