//! `ruvio lock NAME --ttl 30s [--wait 10s] -- COMMAND...`: runs COMMAND while holding the lease NAME, as
//! `etcdctl lock` and `consul lock` do. The lease is renewed in the background by the Rust client's lock guard; the
//! fencing token is in `RUVIO_FENCING_TOKEN`. If the lease is lost (a renewal refused, or no renewal succeeded before
//! the deadline) the command gets SIGTERM, then SIGKILL after `--kill-after`, and `ruvio lock` exits with
//! [`EXIT_LOST`]. Exit codes: docs/commands.md, "ruvio lock".

use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use ruvio_client::{Client, LockOptions};

/// The lock is held by someone else (and `--wait` ran out, or was not given).
pub const EXIT_NOT_ACQUIRED: u8 = 3;
/// The lock was lost while the command ran; the command was signalled.
pub const EXIT_LOST: u8 = 4;
/// The server could not be reached or answered an error.
pub const EXIT_SERVER: u8 = 5;
/// The command could not be started.
pub const EXIT_NO_COMMAND: u8 = 127;

#[derive(Args, Clone)]
#[command(disable_help_flag = true)]
pub struct LockArgs {
    /// Server host (as redis-cli's -h).
    #[arg(short = 'h', long = "host", default_value = "127.0.0.1")]
    host: String,
    /// Server port.
    #[arg(short = 'p', long = "port", default_value_t = 6379)]
    port: u16,
    /// Password (AUTH).
    #[arg(short = 'a', long = "pass")]
    password: Option<String>,
    /// User name for AUTH (with -a).
    #[arg(long = "user")]
    user: Option<String>,
    /// Lease TTL: 30s, 500ms, 2m (a bare number is seconds). Renewed about every third of it.
    #[arg(long, value_parser = parse_duration)]
    ttl: Duration,
    /// Wait up to this long in the server's fair queue when the lock is taken (default: do not wait).
    #[arg(long, value_parser = parse_duration)]
    wait: Option<Duration>,
    /// After SIGTERM, how long the command has to exit before SIGKILL.
    #[arg(long = "kill-after", value_parser = parse_duration, default_value = "10s")]
    kill_after: Duration,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// The lock (key) name.
    name: String,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<String>,
}

/// `30s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("'{s}' is not a duration (30s, 500ms, 2m)"))?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(format!("'{s}' is not a duration (30s, 500ms, 2m)")),
    };
    ms.filter(|ms| *ms > 0).map(Duration::from_millis).ok_or_else(|| format!("'{s}' must be above 0"))
}

/// The signal `ruvio lock` itself received (SIGTERM, SIGINT, SIGHUP), passed on to the command.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    RECEIVED.store(sig, Ordering::SeqCst);
}

fn err(code: u8, msg: String) -> ExitCode {
    eprintln!("ruvio lock: {msg}");
    ExitCode::from(code)
}

pub fn run(a: &LockArgs) -> ExitCode {
    let mut builder = Client::builder(a.host.clone(), a.port);
    if let Some(p) = &a.password {
        builder = builder.password(p.clone());
    }
    if let Some(u) = &a.user {
        builder = builder.username(u.clone());
    }
    let mut db = match builder.connect() {
        Ok(db) => db,
        Err(e) => return err(EXIT_SERVER, format!("cannot connect to {}:{}: {e}", a.host, a.port)),
    };
    let mut options = LockOptions::new(a.ttl);
    if let Some(w) = a.wait {
        options = options.wait(w);
    }
    let guard = match db.acquire(&a.name, options) {
        Ok(Some(g)) => g,
        Ok(None) => return err(EXIT_NOT_ACQUIRED, format!("'{}' is held by someone else", a.name)),
        Err(e) => return err(EXIT_SERVER, format!("taking '{}': {e}", a.name)),
    };
    let token = guard.token();
    // Our own SIGTERM/SIGINT/SIGHUP go to the command (which then ends, and the lock is released); dying at once
    // would leave the command running without its lock.
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only stores into an atomic.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
    // The command gets a process group of its own, and signals go to the whole group: a shell's children (`sh -c
    // 'work & wait'`) must stop too when the lock is lost, not keep working without it.
    use std::os::unix::process::CommandExt;
    let mut child = match Command::new(&a.command[0])
        .args(&a.command[1..])
        .env("RUVIO_FENCING_TOKEN", token.to_string())
        .env("RUVIO_LOCK_NAME", &a.name)
        .process_group(0)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            let _ = guard.release();
            return err(EXIT_NO_COMMAND, format!("cannot run {}: {e}", a.command[0]));
        }
    };
    let pid = child.id() as libc::pid_t;
    let lost = guard.loss_signal();
    let mut forwarded = 0;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return err(EXIT_SERVER, format!("waiting for the command: {e}")),
        }
        let sig = RECEIVED.load(Ordering::SeqCst);
        if sig != 0 && sig != forwarded {
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-pid, sig) };
            forwarded = sig;
        }
        if let Some(reason) = lost.wait_timeout(Duration::from_millis(50)) {
            eprintln!("ruvio lock: lost '{}' (token {token}, {reason:?}): stopping the command (SIGTERM)", a.name);
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-pid, libc::SIGTERM) };
            let deadline = Instant::now() + a.kill_after;
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() >= deadline {
                    eprintln!("ruvio lock: the command did not exit within {:?} of SIGTERM: SIGKILL", a.kill_after);
                    // SAFETY: signalling our own child's process group.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // What the command started and left behind in its group goes too.
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            return ExitCode::from(EXIT_LOST);
        }
    };
    if let Err(e) = guard.release() {
        eprintln!("ruvio lock: releasing '{}': {e} (it ends with its TTL)", a.name);
    }
    // The command's own status; killed by a signal: 128 + signal, as shells report it.
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code as u8),
        (None, Some(sig)) => ExitCode::from(128u8.saturating_add(sig as u8)),
        _ => ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }
}
