//! MONITOR (as in Redis 7.0): every command a client or a script runs is shown to the monitoring clients as one
//! simple-string line, `+<unix seconds>.<micros> [<db> <addr>|lua] "arg" ...`, after it ran (so a transaction reads
//! MULTI, its commands, EXEC), except the scripting commands (flag `MONITOR_FIRST`), shown before the commands their
//! script runs. Commands refused before they run (unknown, arity, NOAUTH, ACL) and admin commands are not shown;
//! arguments a handler marks (`Ctx::redact`: passwords of AUTH and HELLO AUTH) are shown as `(redacted)`.
//!
//! A monitor's lines go through its outbox, bounded like a subscriber's: `client-output-buffer-limit normal` when
//! it is set (Redis counts a monitor as a normal client), else the `pubsub` class's limit, so a monitor that does not
//! keep up is disconnected instead of growing the server's memory (Redis's normal class is unlimited by default).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::client::ClientInfo;
use crate::config::OutputLimit;

#[derive(Default)]
pub struct Monitors {
    clients: Mutex<Vec<Arc<ClientInfo>>>,
    /// `clients.len()`, read without the lock on every command.
    count: AtomicUsize,
    /// Monitors disconnected for going over their output limit (INFO's client_output_buffer_limit_disconnections).
    pub disconnects: std::sync::atomic::AtomicU64,
}

impl Monitors {
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Adds `client` (once).
    pub fn add(&self, client: &Arc<ClientInfo>) {
        let mut c = self.clients.lock();
        if !c.iter().any(|m| m.id == client.id) {
            c.push(client.clone());
            client.monitor.store(true, Ordering::Relaxed);
        }
        self.count.store(c.len(), Ordering::Relaxed);
    }

    /// Removes the client (it left, or RESET).
    pub fn remove(&self, client: &ClientInfo) {
        if !client.monitor.swap(false, Ordering::Relaxed) {
            return;
        }
        let mut c = self.clients.lock();
        c.retain(|m| m.id != client.id);
        self.count.store(c.len(), Ordering::Relaxed);
    }

    /// Shows one command to every monitor; `origin` is the client's address, or `None` for a script's command.
    pub fn feed(&self, limit: &OutputLimit, db: usize, origin: Option<&str>, args: &[Bytes], redacted: &[usize]) {
        let line = Bytes::from(format_line(crate::clock::wall_us(), db, origin, args, redacted));
        let clients = self.clients.lock();
        for m in clients.iter() {
            if !m.is_killed() && !m.outbox.push(line.clone(), limit) {
                tracing::warn!(client = m.id, "closing a MONITOR client that went over its output buffer limit");
                self.disconnects.fetch_add(1, Ordering::Relaxed);
                m.kill();
            }
        }
    }
}

/// The output limit a monitor gets: the normal class when configured, else the pubsub class.
pub fn limit(c: &crate::config::Config) -> OutputLimit {
    let n = c.output_normal;
    if n.hard > 0 || n.soft > 0 {
        n
    } else {
        c.output_pubsub
    }
}

/// One monitor line, RESP simple string included (`+...\r\n`). Arguments are quoted as Redis's `sdscatrepr` does,
/// so CR and LF never reach the line.
pub fn format_line(wall_us: i64, db: usize, origin: Option<&str>, args: &[Bytes], redacted: &[usize]) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + args.iter().map(|a| a.len() + 3).sum::<usize>());
    out.extend_from_slice(format!("+{}.{:06} [{} {}]", wall_us.div_euclid(1_000_000), wall_us.rem_euclid(1_000_000), db, origin.unwrap_or("lua")).as_bytes());
    for (i, a) in args.iter().enumerate() {
        out.push(b' ');
        if redacted.contains(&i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            repr(&mut out, a);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Redis's `sdscatrepr`: a double-quoted string with `\\ \" \n \r \t \a \b` escaped and other non-printable bytes as
/// `\xHH`.
fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            c if c.is_ascii_graphic() || c == b' ' => out.push(c),
            c => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_quoted_as_redis_does() {
        let args = [Bytes::from("set"), Bytes::from("k\r\n\"x\\"), Bytes::from(vec![0u8, 200])];
        let line = format_line(1_700_000_000_000_123, 0, Some("127.0.0.1:5000"), &args, &[]);
        assert_eq!(String::from_utf8(line).unwrap(), "+1700000000.000123 [0 127.0.0.1:5000] \"set\" \"k\\r\\n\\\"x\\\\\" \"\\x00\\xc8\"\r\n");
        let line = format_line(5_000_001, 3, None, &[Bytes::from("auth"), Bytes::from("pw")], &[1]);
        assert_eq!(String::from_utf8(line).unwrap(), "+5.000001 [3 lua] \"auth\" \"(redacted)\"\r\n");
    }
}
