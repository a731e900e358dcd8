//! Starts real `ruvio` server processes for the tests: a free loopback port, a temporary data folder,
//! and control over the process (pause with SIGSTOP, resume, restart).

#![allow(dead_code)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// The `ruvio` binary of this workspace, built once per test run so it is never stale.
pub fn ruvio_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let workspace = manifest.parent().and_then(Path::parent).expect("crates/ruvio-client is two levels down");
        let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace.join("target"));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "ruvio"])
            .current_dir(workspace)
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .expect("running cargo build -p ruvio");
        assert!(status.success(), "cargo build -p ruvio failed");
        let binary = target.join("debug").join("ruvio");
        assert!(binary.exists(), "no ruvio binary at {}", binary.display());
        binary
    })
}

// One helper for both crates' tests (a port handed out twice made a test flaky).
#[path = "../../../ruvio/tests/common/ports.rs"]
mod ports;
pub use ports::free_port;

/// A loopback TCP port that is bound but not listening, so connecting to it is refused, and that no other
/// test can take while the returned socket lives.
pub fn refusing_port() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::FromRawFd;
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket()");
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len), 0, "bind()");
        let mut len = len;
        assert_eq!(libc::getsockname(fd, &mut addr as *mut _ as *mut libc::sockaddr, &mut len), 0);
        (owned, u16::from_be(addr.sin_port))
    }
}

/// A running `ruvio` process; killed on drop.
pub struct Server {
    pub port: u16,
    extra: Vec<String>,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Debian's redis-server instead of ruvio: for behaviour Ruvio will show only with replication (a replica
    /// answering `-READONLY`), checked against the real thing today.
    redis: bool,
}

impl Server {
    /// A server on a free loopback port.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// A server with extra flags, such as `["--requirepass", "pw"]`.
    pub fn start_with(extra: &[&str]) -> Server {
        Server::launch(extra.iter().map(|s| s.to_string()).collect(), false)
    }

    /// A redis-server (installed by scripts/test.sh; a missing one fails the test, it never skips it).
    pub fn start_redis(extra: &[&str]) -> Server {
        let mut extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        extra.extend(["--save", "", "--appendonly", "no"].map(String::from));
        Server::launch(extra, true)
    }

    fn launch(extra: Vec<String>, redis: bool) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut server = Server { port: 0, extra, dir, child: None, redis };
        // A port found free can be taken before the server binds it; try a few.
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start {}", if redis { "redis-server" } else { "ruvio" });
    }

    fn spawn(&mut self) -> bool {
        let log = std::fs::File::create(self.dir.path().join("server.log")).unwrap();
        let program = if self.redis { Path::new("redis-server") } else { ruvio_binary() };
        let child = Command::new(program)
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", program.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                eprintln!("ruvio exited early ({status}): {}", self.log());
                self.child = None;
                return false;
            }
            if let Ok(mut probe) = TcpStream::connect(("127.0.0.1", self.port)) {
                // Listening is not enough: a server still loading its data answers -LOADING (a busy machine can
                // take longer than the 200 ms after which clients are let in). And it must be this one: the port
                // was free when chosen, but another test's server restarting on it may hold it, while ours fails
                // to bind and exits (seen once: the probe reached the other one, which then went away).
                let pid = self.child.as_ref().unwrap().id();
                if !answers_loading(&mut probe) && !is_other_process(&mut probe, pid) {
                    return true;
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("ruvio did not start listening within 10 s: {}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn pid(&self) -> libc::pid_t {
        self.child.as_ref().expect("server running").id() as libc::pid_t
    }

    /// Freezes the process (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        assert_eq!(unsafe { libc::kill(self.pid(), libc::SIGSTOP) }, 0);
        self.wait_for_state(true);
    }

    /// Signals are delivered asynchronously: wait until the kernel reports the process (un)stopped.
    fn wait_for_state(&self, stopped: bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
            // The state is the first field after the parenthesised command name.
            let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()).unwrap_or("");
            if (state == "T" || state == "t") == stopped {
                return;
            }
            assert!(Instant::now() < deadline, "process state stayed {state:?}");
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Lets a paused process run again (SIGCONT).
    pub fn resume(&self) {
        assert_eq!(unsafe { libc::kill(self.pid(), libc::SIGCONT) }, 0);
        self.wait_for_state(false);
    }

    /// Kills the process.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL also ends a stopped process; no SIGCONT first, which would let it answer once more.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the process and starts a new one on the same port and data folder.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn() {
            assert!(Instant::now() < deadline, "could not restart ruvio on port {}", self.port);
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Client options for this server with short timeouts, so failures show up fast.
    pub fn builder(&self) -> ruvio_client::ClientBuilder {
        ruvio_client::Client::builder("127.0.0.1", self.port)
            .connect_timeout(Duration::from_secs(2))
            .command_timeout(Some(Duration::from_secs(2)))
    }

    pub fn client(&self) -> ruvio_client::Client {
        self.builder().connect().expect("connecting to the test server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether the server on `probe` says (INFO's `process_id`) it is a process other than `pid`. A reply that says
/// nothing is taken as ours: an error such as -NOAUTH on a server with a password, or bytes that are no reply at all
/// (`answers_loading` reads only the start of its PING's answer, so the rest of a long error comes first). A probe
/// that breaks before a whole reply is taken as not ours yet (the caller probes again).
fn is_other_process(probe: &mut TcpStream, pid: u32) -> bool {
    use ruvio_protocol::{decode_value, DecodeLimits, Value};
    use std::io::{Read, Write};
    if probe.write_all(b"INFO server\r\n").is_err() {
        return true;
    }
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    let text = loop {
        match decode_value(&reply, DecodeLimits::default()) {
            Ok(Some((Value::Bulk(text), _))) => break text,
            Ok(Some(_)) => return false,
            Ok(None) => {}
            Err(_) => return false,
        }
        match probe.read(&mut chunk) {
            Ok(0) | Err(_) => return true,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
        }
    };
    let said = String::from_utf8_lossy(&text).lines().find_map(|l| l.strip_prefix("process_id:")).and_then(|v| v.trim().parse::<u32>().ok());
    said.is_some_and(|said| said != pid)
}

/// Whether a PING on `probe` is answered with -LOADING (any other answer, or none, means the server is past loading).
fn answers_loading(probe: &mut TcpStream) -> bool {
    use std::io::{Read, Write};
    let _ = probe.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reply = [0u8; 8];
    probe.write_all(b"PING\r\n").is_ok() && probe.read(&mut reply).is_ok_and(|n| reply[..n].starts_with(b"-LOADING"))
}
