//! Helpers for tests that run a cluster of `ruvio` processes and coordinators: a child process killed on drop
//! (resumed first if it was paused), one-shot commands, and INFO fields.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use ruvio_protocol::Value;

use super::{bulk, Conn};

/// A `ruvio` (node or coordinator) process and its log file; killed (after SIGCONT) when dropped.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.pid(), sig) };
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
