//! An abandoned durable failover must not leave a replica refusing the primary that survived it
//! (docs/faults.md, finding 2; docs/coordinator.md, "An abandoned failover").
//!
//! Ruvio nodes (`appendonly yes`, `appendfsync always`): a primary P and two replicas A and B; three
//! `ruvio coordinator`s (quorum 2, down-after-milliseconds 1000, `durability-replicas 1`, so R = 2 and both replicas
//! must promise before a promotion). B is paused (SIGSTOP), so it can promise nothing; then P is paused longer than
//! down-after. The leader raises the epoch, gets A's promise, lacks B's and correctly does not promote. P is resumed
//! (SIGCONT) while B is still paused: P is still the group's primary, and A, which promised the attempt's epoch, must
//! stream from it again (before the fix it refused P for good: "this primary is at epoch e, older than the
//! replica's e+1"), so durable writes succeed through A alone, with tokens above every earlier one. Then B is
//! resumed and both replicas stream from P; finally P is killed and the failover that follows keeps every
//! acknowledged durable grant, with larger tokens again.
//!
//! The binary is `$RUVIO_BIN` when set (it must exist), else the one cargo built.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{cmd, line, text, Proc};
use common::{bulk, free_port, temp_dir, Conn};
use ruvio_protocol::Value;

const WAIT: Duration = Duration::from_secs(60);
/// Long enough that every grant of the test is still held when it is checked.
const TTL: &str = "300000";

fn bin() -> String {
    match std::env::var("RUVIO_BIN") {
        Ok(b) => {
            assert!(Path::new(&b).is_file(), "RUVIO_BIN={b} is not a file");
            b
        }
        Err(_) => env!("CARGO_BIN_EXE_ruvio").to_string(),
    }
}


fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > limit {
            eprintln!("timed out after {limit:?} waiting for: {what}");
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

fn num(t: &str, name: &str) -> u64 {
    line(t, name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// A `k=v` field of a comma-separated INFO value (`group0:name=...,epoch=3,...`).
fn field(v: &str, k: &str) -> Option<String> {
    v.split(',').find_map(|kv| kv.strip_prefix(&format!("{k}=")).map(str::to_string))
}

/// The failover epoch a token carries (docs/fencing.md: the 10 bits below the sign bit).
fn epoch_of(token: i64) -> u64 {
    (token >> 53) as u64
}

fn node(dir: &Path, port: u16, primary: Option<u16>) -> Proc {
    let d = dir.join(format!("node-{port}"));
    std::fs::create_dir_all(&d).unwrap();
    let mut c = Command::new(bin());
    c.args(["--port", &port.to_string(), "--dir", d.to_str().unwrap(), "--appendonly", "yes", "--appendfsync", "always"]);
    c.args(["--coordinator-pass", common::COORD_PASS]);
    if let Some(p) = primary {
        c.args(["--replicaof", &format!("127.0.0.1 {p}")]);
    }
    let log = d.join("log");
    let child = c.stdout(Stdio::null()).stderr(std::fs::File::options().create(true).append(true).open(&log).unwrap()).spawn().unwrap();
    let p = Proc { child, log };
    assert!(wait_until(&format!("node {port} up"), WAIT, || cmd(port, &["PING"]).is_some()));
    p
}

fn coordinator(dir: &Path, cp: u16, peers: &[String], primary: u16) -> Proc {
    let d = dir.join(format!("coordinator-{cp}"));
    std::fs::create_dir_all(&d).unwrap();
    let conf = d.join("coordinator.conf");
    std::fs::write(
        &conf,
        format!(
            "port {cp}\nbind 127.0.0.1\ndir {}\ncoordinator-peers {}\nsentinel monitor mymaster 127.0.0.1 {primary} 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\nsentinel durability-replicas mymaster 1\n{}",
            d.display(),
            peers.join(" "),
            common::coordinator_auth_conf("mymaster", true)
        ),
    )
    .unwrap();
    let log = d.join("log");
    let child = Command::new(bin())
        .args(["coordinator", "--config", conf.to_str().unwrap()])
        .env("RUST_LOG", "info,openraft=warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Proc { child, log }
}

/// `group0:` of a coordinator's INFO coordinator.
fn group(cp: u16) -> String {
    line(&text(cp, &["INFO", "coordinator"]), "group0").unwrap_or_default()
}

fn primary_named_by(cp: u16) -> Option<u16> {
    match cmd(cp, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"])? {
        Value::Array(v) if v.len() == 2 => bulk(&v[1])?.parse().ok(),
        _ => None,
    }
}

/// The token holding `key` on `port`, from LOCKINFO (RESP2 flat arrays).
fn holder_token(port: u16, key: &str) -> Option<i64> {
    let Some(Value::Array(f)) = cmd(port, &["LOCKINFO", key]) else { return None };
    let i = f.iter().position(|v| bulk(v).as_deref() == Some("holders"))?;
    let Value::Array(holders) = &f[i + 1] else { return None };
    let Value::Array(h) = holders.first()? else { return None };
    let j = h.iter().position(|v| bulk(v).as_deref() == Some("token"))?;
    match h[j + 1] {
        Value::Integer(t) => Some(t),
        _ => None,
    }
}

/// Grants taken so far: (key, token), in the order they were acknowledged.
struct Grants {
    all: Vec<(String, i64)>,
    seq: usize,
}

impl Grants {
    /// One durable lease (`CLIENT DURABILITY REPLICAS 1`) on `port`, on a fresh key; tries fresh keys again after a
    /// refusal (an error means the lease was not granted) until one is acknowledged or `limit` passes. The token
    /// must be larger than every token acknowledged before.
    fn take(&mut self, port: u16, limit: Duration) -> Result<i64, String> {
        let start = Instant::now();
        let mut errors = Vec::new();
        while start.elapsed() < limit {
            self.seq += 1;
            let key = format!("af:{}", self.seq);
            let mut c = match Conn::try_connect(port) {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("connect: {e}"));
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            };
            c.set_timeout(Duration::from_secs(15));
            if !c.try_cmd(&["CLIENT", "DURABILITY", "REPLICAS", "1"]).is_ok_and(|v| common::is_ok(&v)) {
                errors.push("CLIENT DURABILITY refused".into());
                continue;
            }
            match c.try_cmd(&["LEASE", &key, TTL]) {
                Ok(Value::Integer(t)) => {
                    let max = self.all.iter().map(|(_, t)| *t).max().unwrap_or(0);
                    assert!(t > max, "token {t} of {key} is not larger than the earlier token {max}");
                    self.all.push((key, t));
                    return Ok(t);
                }
                other => errors.push(format!("LEASE {key}: {other:?}")),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let n = errors.len();
        Err(format!("no durable lease acknowledged by {port} within {limit:?} ({n} attempts; last: {:?})", &errors[n.saturating_sub(3)..]))
    }

    /// The grants not held on `port` with their token.
    fn missing_on(&self, port: u16) -> Vec<(String, i64, Option<i64>)> {
        self.all.iter().filter_map(|(k, t)| {
            let held = holder_token(port, k);
            (held != Some(*t)).then(|| (k.clone(), *t, held))
        }).collect()
    }
}

/// `port` follows `primary` with its link up.
fn streams_from(port: u16, primary: u16) -> bool {
    let i = text(port, &["INFO", "replication"]);
    line(&i, "role").as_deref() == Some("slave")
        && line(&i, "master_port").as_deref() == Some(&primary.to_string())
        && line(&i, "master_link_status").as_deref() == Some("up")
}

/// `primary` lists `replica` as an online replica.
fn online_at(primary: u16, replica: u16) -> bool {
    let i = text(primary, &["INFO", "replication"]);
    i.lines().any(|l| l.starts_with("slave") && l.contains(&format!("port={replica},")) && l.contains("state=online"))
}

fn leader(cports: &[u16]) -> Option<usize> {
    cports.iter().position(|&cp| line(&text(cp, &["INFO", "coordinator"]), "raft_role").as_deref() == Some("Leader"))
}

#[test]
fn an_abandoned_durable_failover_leaves_no_replica_refusing_the_surviving_primary() {
    run("abandoned-failover", Fault::Pause);
}

/// The same, with the raft leader that abandoned the attempt killed before the primary comes back: the next leader
/// (which did not allocate that epoch) re-adopts the primary.
#[test]
fn an_abandoned_durable_failover_is_resolved_by_the_next_raft_leader() {
    run("abandoned-failover-leader", Fault::PauseAndKillLeader);
}

/// The primary killed (kill -9) instead of paused, and restarted on its data folder as a primary: it comes back at
/// its persisted epoch, and is re-adopted the same way.
#[test]
fn a_primary_restarted_after_an_abandoned_durable_failover_is_followed_again() {
    run("abandoned-failover-kill", Fault::KillAndRestart);
}

#[derive(PartialEq)]
enum Fault {
    Pause,
    PauseAndKillLeader,
    KillAndRestart,
}

fn run(name: &str, fault: Fault) {
    let kill_leader = fault == Fault::PauseAndKillLeader;
    let dir = temp_dir(name);
    let (p, a, b) = (free_port(), free_port(), free_port());
    let mut np = node(&dir, p, None);
    let na = node(&dir, a, Some(p));
    let nb = node(&dir, b, Some(p));
    let cports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers: Vec<String> = cports.iter().map(|c| format!("127.0.0.1:{c}")).collect();
    let mut coords: Vec<(u16, Proc)> = cports.iter().map(|&cp| (cp, coordinator(&dir, cp, &peers, p))).collect();
    let logs = |coords: &[(u16, Proc)], extra: &[(&str, &Proc)]| {
        let mut s = String::new();
        for (cp, c) in coords {
            s.push_str(&format!("---- coordinator {cp}\n{}\n", c.log()));
        }
        for (n, c) in extra {
            s.push_str(&format!("---- {n}\n{}\n", c.log()));
        }
        s
    };
    let (sa, sb) = (format!("127.0.0.1:{a}"), format!("127.0.0.1:{b}"));
    assert!(
        wait_until("every coordinator counts both replicas in the durability set", WAIT, || cports.iter().all(|&cp| {
            let set = field(&group(cp), "durability_set").unwrap_or_default();
            set.split(';').any(|s| s == sa) && set.split(';').any(|s| s == sb)
        })),
        "{}",
        logs(&coords, &[])
    );
    let e0: u64 = field(&group(cports[0]), "epoch").unwrap().parse().unwrap();

    // Durable grants while everything is up, and one acknowledged by A alone (B paused).
    let mut grants = Grants { all: Vec::new(), seq: 0 };
    for _ in 0..3 {
        let t = grants.take(p, Duration::from_secs(20)).unwrap();
        assert_eq!(epoch_of(t), e0, "tokens carry the group's epoch");
    }
    nb.signal(libc::SIGSTOP);
    grants.take(p, Duration::from_secs(20)).unwrap();

    // P paused past down-after (or killed): the leader raises the epoch and gets A's promise only; R = 2, n = 1
    // needs both.
    if fault == Fault::KillAndRestart {
        np.kill9();
    } else {
        np.signal(libc::SIGSTOP);
    }
    assert!(
        wait_until("the failover waits for B's promise", WAIT, || cports.iter().any(|&cp| {
            line(&text(cp, &["INFO", "coordinator"]), "group0_waiting").is_some_and(|w| w.contains("only 1 of 2"))
        })),
        "{}",
        logs(&coords, &[])
    );
    let promised = num(&text(a, &["INFO", "replication"]), "ruvio_promised_epoch");
    assert!(promised > e0, "A promised the attempt's epoch ({promised} > {e0})");
    assert!(cports.iter().all(|&cp| primary_named_by(cp) == Some(p)), "nobody was promoted");

    // P comes back, B still paused: A must stream from P again, and durable writes go through A alone. (In the
    // second variant the leader that allocated the attempt's epoch is killed just before: the next leader, elected
    // while P is already back, did not allocate it.)
    let mut cports = cports.clone();
    if kill_leader {
        let l = leader(&cports).expect("a raft leader");
        coords.remove(l).1.kill9();
        cports.remove(l);
    }
    if fault == Fault::KillAndRestart {
        np = node(&dir, p, None);
    } else {
        np.signal(libc::SIGCONT);
    }
    let back = Instant::now();
    if kill_leader {
        assert!(wait_until("a new raft leader", WAIT, || leader(&cports).is_some()), "{}", logs(&coords, &[]));
    }
    let a_follows = wait_until("A (which promised) streams from the surviving primary again", Duration::from_secs(40), || {
        streams_from(a, p) && online_at(p, a)
    });
    assert!(
        a_follows,
        "A never streamed from P again after the abandoned failover (A's INFO: {}).\n{}",
        text(a, &["INFO", "replication"]),
        logs(&coords, &[("A", &na), ("P", &np)])
    );
    eprintln!("A streams from P again {} ms after P resumed", back.elapsed().as_millis());
    assert!(cports.iter().all(|&cp| primary_named_by(cp) == Some(p)), "P is still the primary");
    let pinfo = text(p, &["INFO", "replication"]);
    let pe = num(&pinfo, "ruvio_epoch");
    assert!(pe >= promised, "P moved to an epoch at least the promised one ({pe} >= {promised})");
    assert!(
        wait_until("every coordinator records P at P's epoch, with no failover in progress", WAIT, || cports.iter().all(|&cp| {
            let g = group(cp);
            field(&g, "epoch").and_then(|e| e.parse::<u64>().ok()) == Some(pe) && field(&g, "failover").as_deref() == Some("none")
        })),
        "{}",
        logs(&coords, &[])
    );
    let t = grants.take(p, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}\n{}", logs(&coords, &[("A", &na), ("P", &np)])));
    assert_eq!(epoch_of(t), pe, "P's new tokens carry its new epoch");

    // B resumes: both replicas stream from P; durable writes go on, tokens keep growing.
    nb.signal(libc::SIGCONT);
    assert!(
        wait_until("both replicas stream from P", WAIT, || streams_from(a, p) && streams_from(b, p) && online_at(p, a) && online_at(p, b)),
        "A: {}\nB: {}\n{}",
        text(a, &["INFO", "replication"]),
        text(b, &["INFO", "replication"]),
        logs(&coords, &[("A", &na), ("B", &nb), ("P", &np)])
    );
    for _ in 0..3 {
        let t = grants.take(p, Duration::from_secs(20)).unwrap();
        assert_eq!(epoch_of(t), pe);
    }
    let missing = grants.missing_on(p);
    assert!(missing.is_empty(), "acknowledged durable grants not held on P: {missing:?}");
    let p_lsn = num(&text(p, &["INFO", "replication"]), "master_repl_offset");
    for r in [a, b] {
        assert!(wait_until("the replica caught up", WAIT, || num(&text(r, &["INFO", "replication"]), "slave_repl_offset") >= p_lsn));
        let missing = grants.missing_on(r);
        assert!(missing.is_empty(), "acknowledged durable grants not held on replica {r}: {missing:?}");
    }

    let pinfo = text(p, &["INFO", "replication"]);
    eprintln!("P served {} full and {} partial syncs", num(&pinfo, "full_syncs"), num(&pinfo, "partial_syncs"));

    // A real failover afterwards: P killed; the new primary holds every acknowledged grant, with larger tokens
    // in a larger epoch.
    np.kill9();
    let mut new = 0;
    assert!(
        wait_until("the coordinators name a new primary", WAIT, || {
            new = cports.iter().find_map(|&cp| primary_named_by(cp).filter(|n| *n != p)).unwrap_or(0);
            new != 0
        }),
        "{}",
        logs(&coords, &[("A", &na), ("B", &nb)])
    );
    let missing = grants.missing_on(new);
    assert!(missing.is_empty(), "acknowledged durable grants lost in the failover: {missing:?}");
    let t = grants.take(new, Duration::from_secs(30)).unwrap();
    let e2 = num(&text(new, &["INFO", "replication"]), "ruvio_epoch");
    assert!(e2 > pe, "the failover's epoch {e2} is above the re-adopted primary's {pe}");
    assert_eq!(epoch_of(t), e2);
    let masters: Vec<u16> = [a, b].into_iter().filter(|&n| line(&text(n, &["INFO", "replication"]), "role").as_deref() == Some("master")).collect();
    assert_eq!(masters, vec![new], "one primary");
    eprintln!("epochs: start {e0}, attempt {promised}, re-adopted primary {pe}, after the failover {e2}; {} grants", grants.all.len());
    drop(coords);
    let _ = std::fs::remove_dir_all(&dir);
}
