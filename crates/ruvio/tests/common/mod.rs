//! Helpers for tests that run the real `ruvio` binary: start/kill/restart a server on a data folder, and a small
//! blocking RESP client.

#![allow(dead_code)]

pub mod cluster;
mod ports;

pub use ports::free_port;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ruvio_protocol::{decode_value, encode_command, DecodeLimits, Value};


pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ruvio-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub struct Server {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
    pub stderr_path: PathBuf,
}

/// Starts `ruvio` on `dir` with extra `--name value` flags; waits until it accepts commands (past loading).
pub fn start(dir: &Path, extra: &[&str]) -> Server {
    let s = spawn(dir, extra);
    s.wait_ready(Duration::from_secs(60));
    s
}

/// Starts `ruvio` without waiting.
pub fn spawn(dir: &Path, extra: &[&str]) -> Server {
    spawn_on(free_port(), dir, extra)
}

/// Starts `ruvio` on `port` (a restart on the port it had) and waits until it accepts commands.
pub fn start_on(port: u16, dir: &Path, extra: &[&str]) -> Server {
    let s = spawn_on(port, dir, extra);
    s.wait_ready(Duration::from_secs(60));
    s
}

/// Starts `ruvio` on `port` without waiting.
pub fn spawn_on(port: u16, dir: &Path, extra: &[&str]) -> Server {
    let stderr_path = dir.join(format!("stderr-{port}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_ruvio"))
        .args(["--port", &port.to_string(), "--dir", dir.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("spawning ruvio");
    Server { child, port, dir: dir.to_path_buf(), stderr_path }
}

impl Server {
    pub fn wait_ready(&self, limit: Duration) {
        let start = Instant::now();
        loop {
            if let Ok(mut c) = Conn::try_connect(self.port) {
                if let Ok(v) = c.try_cmd(&["GET", "__ready_probe__"]) {
                    if !matches!(&v, Value::Error(e) if e.starts_with(b"LOADING")) {
                        return;
                    }
                }
            }
            assert!(start.elapsed() < limit, "server did not become ready; stderr: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(self.port)
    }

    pub fn kill9(&mut self) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }

    pub fn stop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn info_field(&self, field: &str) -> String {
        self.info_in("persistence", field)
    }

    /// A field of one INFO section.
    pub fn info_in(&self, section: &str, field: &str) -> String {
        let v = self.conn().cmd(&["INFO", section]);
        let text = String::from_utf8_lossy(v.as_bytes().unwrap_or(b"")).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|s| s.trim().to_string()))
            .unwrap_or_else(|| panic!("no {field} in INFO: {text}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill9();
        }
    }
}

/// The secret the tests' Ruvio nodes give the built-in `coordinator` user (`coordinator-pass`): only that user
/// may run the coordination commands (REPLICATION LEASE/PROMISE, REPLICAOF ... EPOCH).
pub const COORD_PASS: &str = "test-coordinator-secret";
/// How the tests' coordinators log in to each other (`sentinel sentinel-user` / `sentinel sentinel-pass`).
pub const PEER_USER: &str = "coordinators";
pub const PEER_PASS: &str = "test-peer-secret";

/// Coordinator config lines: the peers' login, and for a group of Ruvio nodes the `coordinator` user's.
pub fn coordinator_auth_conf(group: &str, ruvio_nodes: bool) -> String {
    let mut s = format!("sentinel sentinel-user {PEER_USER}\nsentinel sentinel-pass {PEER_PASS}\n");
    if ruvio_nodes {
        s.push_str(&format!("sentinel auth-user {group} coordinator\nsentinel auth-pass {group} {COORD_PASS}\n"));
    }
    s
}

pub struct Conn {
    stream: TcpStream,
    buf: BytesMut,
}

impl Conn {
    pub fn try_connect(port: u16) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, buf: BytesMut::new() })
    }

    pub fn connect(port: u16) -> Conn {
        Self::try_connect(port).expect("connecting")
    }

    /// A connection logged in as the built-in `coordinator` user (nodes started with `--coordinator-pass`).
    pub fn as_coordinator(port: u16) -> Conn {
        let mut c = Self::connect(port);
        assert!(is_ok(&c.cmd(&["AUTH", "coordinator", COORD_PASS])), "AUTH coordinator on {port}");
        c
    }

    pub fn send(&mut self, args: &[&str]) -> std::io::Result<()> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.stream.write_all(&out)
    }

    /// Sends a command whose arguments may be any bytes (not only UTF-8).
    pub fn send_bin<A: AsRef<[u8]>>(&mut self, args: &[A]) -> std::io::Result<()> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.stream.write_all(&out)
    }

    pub fn read_reply(&mut self) -> std::io::Result<Value> {
        loop {
            if let Some((v, n)) = decode_value(&self.buf, DecodeLimits::default()).map_err(|e| std::io::Error::other(e.to_string()))? {
                let _ = self.buf.split_to(n);
                return Ok(v);
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn try_cmd(&mut self, args: &[&str]) -> std::io::Result<Value> {
        self.send(args)?;
        self.read_reply()
    }

    pub fn cmd(&mut self, args: &[&str]) -> Value {
        self.try_cmd(args).expect("command")
    }

    pub fn set_timeout(&self, t: Duration) {
        self.stream.set_read_timeout(Some(t)).unwrap();
    }
}

pub fn is_ok(v: &Value) -> bool {
    matches!(v, Value::Simple(s) if &s[..] == b"OK")
}

pub fn bulk(v: &Value) -> Option<String> {
    v.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned())
}

/// The log files of a data folder, oldest first (by generation).
pub fn incr_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "incr")).collect();
    v.sort_by_key(|p| p.file_name().unwrap().to_string_lossy().split('.').nth(2).and_then(|g| g.parse::<u64>().ok()).unwrap_or(0));
    v
}

/// The replication offset a node reports (INFO replication `ruvio_lsn`).
pub fn lsn(s: &Server) -> u64 {
    s.info_in("replication", "ruvio_lsn").parse().unwrap()
}

/// Waits (up to 60 s) until the replica's link is up and it has applied everything the primary logged.
pub fn caught_up(primary: &Server, replica: &Server) {
    let start = Instant::now();
    loop {
        let link = replica.info_in("replication", "master_link_status");
        if link == "up" && lsn(replica) == lsn(primary) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "replica did not catch up: primary LSN {}, replica LSN {}, link {link}; replica stderr: {}", lsn(primary), lsn(replica), replica.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends SIGSTOP/SIGCONT and waits until the kernel reports the process stopped/running (signals are delivered
/// asynchronously: a replica could otherwise still acknowledge a write "after" it was paused).
pub fn signal(s: &Server, sig: i32) {
    signal_pid(s.child.id() as i32, sig);
}

/// [`signal`] for a child known by its pid; other signals than SIGSTOP/SIGCONT are sent without waiting.
pub fn signal_pid(pid: i32, sig: i32) {
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(pid, sig) };
    if sig != libc::SIGSTOP && sig != libc::SIGCONT {
        return;
    }
    let stopped = sig == libc::SIGSTOP;
    let start = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()).unwrap_or("").to_string();
        if (state == "T" || state == "t") == stopped {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "process state stayed {state:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
