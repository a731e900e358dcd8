//! Addresses, and the servers that guard cases with `"server": "own"` start, pause and stop.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// `host:port`.
#[derive(Debug, Clone)]
pub struct Addr {
    pub host: String,
    pub port: u16,
}

pub fn parse_addr(s: &str) -> Result<Addr, String> {
    let (host, port) = s.rsplit_once(':').ok_or_else(|| format!("RUVIO_ADDR={s:?} is not host:port"))?;
    let port = port.parse().map_err(|_| format!("RUVIO_ADDR={s:?}: bad port"))?;
    Ok(Addr { host: host.to_string(), port })
}

/// A `ruvio` process of one guard case: its own port and data folder; SIGCONT then killed when dropped.
pub struct OwnServer {
    pub addr: Addr,
    child: Child,
    _dir: tempfile::TempDir,
}

impl OwnServer {
    pub fn start(bin: &Path) -> Result<OwnServer, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        // A free port, released just before the server binds it; another process taking it in between makes the
        // start fail (reported), it cannot make the case talk to the wrong server since the PID is checked below.
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| format!("free port: {e}"))?.port();
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--dir"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut server = OwnServer { addr: Addr { host: "127.0.0.1".to_string(), port }, child, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("the case's server exited at start-up: {status}"));
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                let mut c = ruvio_client::Client::connect("127.0.0.1", port).map_err(|e| e.to_string())?;
                if c.ping().is_ok() {
                    return Ok(server);
                }
            }
            if Instant::now() > deadline {
                return Err("the case's server did not answer PING within 30 s".to_string());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: libc::c_int) -> Result<(), String> {
        // SAFETY: kill(2) on our own child's PID, which has not been reaped (the child is waited for only in Drop).
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("kill({sig}) failed: {}", std::io::Error::last_os_error()))
        }
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
