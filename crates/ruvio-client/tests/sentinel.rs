//! `ClientBuilder::sentinel`: the client finds the primary through three real `ruvio coordinator`s, follows a
//! failover (kill -9 of the primary), and never sends a LEASE again after an ambiguous failure.
//!
//! Set-up: a Ruvio primary and two replicas (`appendonly yes`, `appendfsync always`), three coordinators
//! (`durability-replicas 1`, down-after 1000 ms), and a client with `durability_replicas(1)`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ruvio_client::{Client, ClientBuilder, Value};

const WAIT: Duration = Duration::from_secs(60);

struct Proc(Child);

impl Proc {
    fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.0.id() as i32, sig) };
    }
    fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.signal(libc::SIGCONT);
            self.kill9();
        }
    }
}


/// The secret the nodes give their built-in `coordinator` user (coordinator-pass), which the coordinators log in with.
const COORD_PASS: &str = "test-coordinator-secret";

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A command on a fresh plain connection to `port` (None when unreachable).
fn ask(port: u16, args: &[&str]) -> Option<Value> {
    let mut c = Client::builder("127.0.0.1", port).connect_timeout(Duration::from_secs(2)).command_timeout(Some(Duration::from_secs(5))).connect().ok()?;
    c.command(args).ok()
}

fn text(port: u16, args: &[&str]) -> String {
    match ask(port, args) {
        Some(Value::Bulk(b)) => String::from_utf8_lossy(&b).into_owned(),
        Some(Value::Verbatim { text, .. }) => String::from_utf8_lossy(&text).into_owned(),
        _ => String::new(),
    }
}

fn line(t: &str, name: &str) -> Option<String> {
    t.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|s| s.trim().to_string()))
}

struct Group {
    _dir: tempfile::TempDir,
    nodes: Vec<(u16, Proc)>,
    coords: Vec<u16>,
    _coord_procs: Vec<Proc>,
}

fn spawn(dir: &Path, name: &str, args: &[String]) -> Proc {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    Proc(Command::new(common::ruvio_binary()).args(args).stdout(Stdio::null()).stderr(log).spawn().expect("spawning ruvio"))
}

fn start_group() -> Group {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let mut nodes = Vec::new();
    for (i, &p) in ports.iter().enumerate() {
        let d: PathBuf = dir.path().join(format!("node-{p}"));
        std::fs::create_dir_all(&d).unwrap();
        // coordinator-pass: the built-in `coordinator` user the coordinators log in as (coordination commands).
        let mut args: Vec<String> = ["--port", &p.to_string(), "--dir", d.to_str().unwrap(), "--appendonly", "yes", "--appendfsync", "always", "--coordinator-pass", COORD_PASS].iter().map(|s| s.to_string()).collect();
        if i > 0 {
            args.extend(["--replicaof".to_string(), format!("127.0.0.1 {}", ports[0])]);
        }
        nodes.push((p, spawn(dir.path(), &format!("node-{p}"), &args)));
        wait_for("node up", || ask(p, &["PING"]).is_some());
    }
    let coords: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let peers: Vec<String> = coords.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut procs = Vec::new();
    for &c in &coords {
        let d = dir.path().join(format!("coordinator-{c}"));
        std::fs::create_dir_all(&d).unwrap();
        let conf = d.join("coordinator.conf");
        std::fs::write(
            &conf,
            format!(
                "port {c}\nbind 127.0.0.1\ndir {}\ncoordinator-peers {}\nsentinel monitor mymaster 127.0.0.1 {} 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel durability-replicas mymaster 1\nsentinel auth-user mymaster coordinator\nsentinel auth-pass mymaster {COORD_PASS}\nsentinel sentinel-user coordinators\nsentinel sentinel-pass test-peer-secret\n",
                d.display(),
                peers.join(" "),
                ports[0]
            ),
        )
        .unwrap();
        procs.push(spawn(dir.path(), &format!("coordinator-{c}"), &["coordinator".into(), "--config".into(), conf.to_str().unwrap().into()]));
    }
    let want = [format!("127.0.0.1:{}", ports[1]), format!("127.0.0.1:{}", ports[2])];
    wait_for("both replicas in every coordinator's durability set", || {
        coords.iter().all(|c| {
            let g = line(&text(*c, &["INFO", "coordinator"]), "group0").unwrap_or_default();
            let set = g.split("durability_set=").nth(1).unwrap_or("").split(',').next().unwrap_or("").to_string();
            want.iter().all(|w| set.split(';').any(|s| s == w))
        })
    });
    Group { _dir: dir, nodes, coords, _coord_procs: procs }
}

impl Group {
    fn builder(&self) -> ClientBuilder {
        ClientBuilder::sentinel(self.coords.iter().map(|p| ("127.0.0.1", *p)), "mymaster")
            .durability_replicas(1)
            .connect_timeout(Duration::from_secs(30))
            .command_timeout(Some(Duration::from_secs(3)))
    }

    fn primary(&self) -> Option<u16> {
        for c in &self.coords {
            if let Some(Value::Array(v)) = ask(*c, &["SENTINEL", "get-master-addr-by-name", "mymaster"]) {
                if let Some(Value::Bulk(p)) = v.get(1) {
                    return std::str::from_utf8(p).ok()?.parse().ok();
                }
            }
        }
        None
    }
}

/// The token holding `key` on `port`.
fn holder(port: u16, key: &str) -> Option<i64> {
    let mut c = Client::connect("127.0.0.1", port).ok()?;
    c.lock_info(key).ok()??.holders.first().map(|h| h.token)
}

#[test]
fn finds_the_primary_follows_a_failover_and_never_repeats_an_ambiguous_lease() {
    let mut g = start_group();
    let old = g.nodes[0].0;
    let mut db = g.builder().connect().expect("connect through the coordinators");
    let role: Value = db.command(&["ROLE"]).unwrap();
    assert!(matches!(&role, Value::Array(v) if v.first() == Some(&Value::Bulk("master".into()))), "connected to the primary: {role:?}");
    let before = db.lease("sentinel:before", 60_000).unwrap().expect("granted");
    assert_eq!(holder(old, "sentinel:before"), Some(before));

    // A LEASE in flight when the primary stops answering: an error (timeout), not a grant somewhere else.
    g.nodes[0].1.signal(libc::SIGSTOP);
    let ambiguous = db.lease("sentinel:ambiguous", 60_000);
    let e = ambiguous.expect_err("a LEASE sent to a paused primary must fail, not be sent again elsewhere");
    assert!(e.is_timeout(), "{e}");
    g.nodes[0].1.kill9();

    // The next call looks the primary up again and waits out the failover (nothing was sent yet).
    let after = db.lease("sentinel:after", 60_000).expect("a LEASE after the failover").expect("granted");
    let new = g.primary().unwrap();
    assert_ne!(new, old);
    assert!(after > before, "token after the failover ({after}) larger than before ({before})");
    // The durable grant made before the failover is held on the new primary with its token; the ambiguous one
    // was never sent to it (the paused primary died without replicating it, or it replicated: either way never a
    // second LEASE from this client).
    assert_eq!(holder(new, "sentinel:before"), Some(before));
    assert_eq!(holder(new, "sentinel:after"), Some(after));
    let info: Value = db.command(&["CLIENT", "DURABILITY"]).unwrap();
    assert_eq!(info, Value::Array(vec![Value::Bulk("replicas".into()), Value::Integer(1)]), "durability re-sent on the new connection");
}

#[cfg(feature = "tokio")]
#[test]
fn async_client_follows_a_failover() {
    let mut g = start_group();
    let old = g.nodes[0].0;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let builder = g.builder();
    let mut db = rt.block_on(builder.connect_async()).expect("connect through the coordinators");
    let before = rt.block_on(db.lease("async:before", 60_000)).unwrap().expect("granted");
    g.nodes[0].1.kill9();
    // The dropped connection is noticed before the next command is sent, so the LEASE goes to the new primary.
    let after = rt.block_on(db.lease("async:after", 60_000)).expect("a LEASE after the failover").expect("granted");
    let new = g.primary().unwrap();
    assert_ne!(new, old);
    assert!(after > before);
    assert_eq!(holder(new, "async:before"), Some(before));
}

#[test]
fn no_coordinator_answers_is_an_error_within_the_connect_timeout() {
    let (_a, p1) = common::refusing_port();
    let (_b, p2) = common::refusing_port();
    let started = Instant::now();
    let e = ClientBuilder::sentinel([("127.0.0.1", p1), ("127.0.0.1", p2)], "mymaster")
        .connect_timeout(Duration::from_millis(500))
        .connect()
        .expect_err("nothing to connect to");
    assert!(e.is_io_error(), "{e}");
    assert!(started.elapsed() < Duration::from_secs(20), "bounded by the connect timeout");
}
