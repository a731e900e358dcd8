//! Listening, admission (maxclients, protected mode), background tasks and graceful shutdown.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::client::ClientInfo;
use crate::connection::Connection;
use crate::shared::{Shared, Stats};
use crate::workers::Workers;

const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Ruvio you may adopt one of the following solutions: 1) Disable protected mode by sending the command 'CONFIG SET protected-mode no' from the loopback interface. 2) Set a password with 'CONFIG SET requirepass <password>' or the `requirepass` config option. 3) Start the server with '--protected-mode no'.\r\n";

/// Binds every configured address. `-::1`-style entries (a leading '-') are optional: failing to bind them is not
/// an error, as in Redis.
pub async fn bind(shared: &Arc<Shared>) -> std::io::Result<Vec<TcpListener>> {
    let (binds, port) = {
        let c = shared.config.read();
        (c.bind.clone(), c.port)
    };
    let mut listeners = Vec::new();
    let mut port = port;
    for b in binds {
        let (optional, addr) = match b.strip_prefix('-') {
            Some(a) => (true, a.to_string()),
            None => (false, b.clone()),
        };
        let ip: IpAddr = if addr == "*" { "0.0.0.0".parse().unwrap() } else {
            addr.parse().map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("bad bind address {addr}")))?
        };
        match TcpListener::bind(SocketAddr::new(ip, port)).await {
            Ok(l) => {
                // With port 0 (tests), every further address uses the port the first one got.
                port = l.local_addr()?.port();
                listeners.push(l);
            }
            Err(e) if optional => tracing::info!("skipping optional bind address {addr}: {e}"),
            Err(e) => return Err(std::io::Error::new(e.kind(), format!("could not bind {addr}:{port}: {e}"))),
        }
    }
    shared.bound_port.store(port as u64, std::sync::atomic::Ordering::Relaxed);
    Ok(listeners)
}

/// File descriptors kept for everything but client sockets (Redis keeps 32): standard streams, listeners, the log,
/// manifest and token files, compaction's temporary files, and each I/O thread's event loop (about 4 each).
pub fn reserved_fds(io_threads: usize) -> u64 {
    32 + 4 * io_threads as u64
}

/// Makes room in `RLIMIT_NOFILE` for `maxclients` connections, as Redis's adjustOpenFilesLimit: raises the soft limit
/// (and the hard one when the process may) if it is too low. Returns how many clients the limit allows (`maxclients`
/// when there is room, fewer when the limit could not be raised enough) and, then, why it could not; an error when
/// not even one client fits.
pub fn fit_fd_limit(maxclients: usize, io_threads: usize) -> Result<(usize, Option<String>), String> {
    let reserved = reserved_fds(io_threads);
    let needed = maxclients as u64 + reserved;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read or write the local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        let e = std::io::Error::last_os_error();
        let n = 1024u64.saturating_sub(reserved).max(1) as usize;
        return Ok((n.min(maxclients), Some(format!("unable to obtain the current NOFILE limit ({e}), assuming 1024"))));
    }
    let (old, hard) = (lim.rlim_cur as u64, lim.rlim_max as u64);
    if old >= needed {
        return Ok((maxclients, None));
    }
    let set = |cur: u64, max: u64| {
        let l = libc::rlimit { rlim_cur: cur as libc::rlim_t, rlim_max: max as libc::rlim_t };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    };
    // The soft limit may go up to the hard one; past it only with privilege (and never past fs.nr_open).
    let err = match set(needed, hard.max(needed)) {
        Ok(()) => {
            tracing::info!("Increased maximum number of open files to {needed} (it was originally set to {old}).");
            return Ok((maxclients, None));
        }
        Err(e) => e,
    };
    let best = if hard > old && set(hard, hard).is_ok() { hard } else { old };
    let possible = best.saturating_sub(reserved);
    if possible < 1 {
        return Err(format!(
            "Your current 'ulimit -n' of {best} is not enough for the server to start. Please increase your open file limit to at least {needed}. Exiting."
        ));
    }
    Ok(((possible as usize).min(maxclients), Some(format!("Server can't set maximum open files to {needed} because of OS error: {err}."))))
}

/// Start-up: fits `maxclients` to the open files limit (raising the limit if allowed), lowering it with a warning
/// when the limit is too low, as Redis does.
pub fn adjust_maxclients(config: &mut crate::Config) -> Result<(), String> {
    let requested = config.maxclients;
    let (possible, why) = fit_fd_limit(requested, config.io_threads)?;
    if possible < requested {
        let reserved = reserved_fds(config.io_threads);
        tracing::warn!("You requested maxclients of {requested} requiring at least {} max file descriptors.", requested as u64 + reserved);
        if let Some(why) = why {
            tracing::warn!("{why}");
        }
        tracing::warn!(
            "Current maximum open files is {}. maxclients has been reduced to {possible} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
            possible as u64 + reserved
        );
        config.maxclients = possible;
    }
    Ok(())
}

/// What a client past `maxclients` gets before its connection is closed.
const MAXCLIENTS_REACHED: &[u8] = b"-ERR max number of clients reached\r\n";

/// True when `maxclients` connections are open (one lock at a time).
fn at_capacity(shared: &Shared) -> bool {
    let max = shared.config.read().maxclients;
    shared.clients.lock().len() >= max
}

/// Accepts connections on `listener` until shutdown and hands each to an I/O worker.
pub async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, workers: Arc<Workers>) {
    let mut shutdown = shared.shutdown.subscribe();
    // Accept failures (out of file descriptors, mostly) are logged once, then summed up at most once a minute.
    let mut failures_since_log = 0u64;
    let mut last_failure_log: Option<std::time::Instant> = None;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.wait_for(|s| *s) => return,
        };
        match accepted {
            Ok((stream, _peer)) if at_capacity(&shared) => {
                // Full: answered and closed right here, so a flood of extra connections holds no descriptors.
                Stats::add(&shared.stats.connections_received, 1);
                Stats::add(&shared.stats.rejected_connections, 1);
                let _ = stream.try_write(MAXCLIENTS_REACHED);
            }
            Ok((stream, peer)) => {
                // The socket moves to the worker's runtime: re-registered there, it is polled by that thread only.
                let std_stream = match stream.into_std() {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!("could not hand over a connection: {e}");
                        continue;
                    }
                };
                let shared = shared.clone();
                workers.next().spawn(async move {
                    match TcpStream::from_std(std_stream) {
                        Ok(stream) => admit(&shared, stream, peer).await,
                        Err(e) => tracing::warn!("could not adopt a connection: {e}"),
                    }
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning, and do not flood the log.
                failures_since_log += 1;
                if last_failure_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                    if failures_since_log > 1 {
                        tracing::warn!("accepting client connections failed {failures_since_log} times in the last minute; last error: {e}");
                    } else {
                        tracing::warn!("accepting a client connection failed: {e} (further failures are summed up once a minute)");
                    }
                    failures_since_log = 0;
                    last_failure_log = Some(std::time::Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// `tcp-keepalive N`, as Redis does it: probes after N idle seconds, then every N/3 seconds, three unanswered probes
/// and the connection is dead. A client that vanished (power loss, cut network) is noticed, and its lock waits and
/// subscriptions go with it, instead of lingering until the next write to it.
pub(crate) fn set_keepalive(stream: &TcpStream, secs: u64) {
    let idle = Duration::from_secs(secs);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval(Duration::from_secs((secs / 3).max(1)))
        .with_retries(3);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive) {
        tracing::debug!("could not enable TCP keepalive: {e}");
    }
}

async fn admit(shared: &Arc<Shared>, mut stream: TcpStream, peer: SocketAddr) {
    Stats::add(&shared.stats.connections_received, 1);
    let _ = stream.set_nodelay(true);
    let (maxclients, protected, has_password, keepalive) = {
        let c = shared.config.read();
        (c.maxclients, c.protected_mode, c.requirepass.is_some(), c.tcp_keepalive)
    };
    if keepalive > 0 {
        set_keepalive(&stream, keepalive);
    }
    if protected && !has_password && !peer.ip().is_loopback() && !is_mapped_loopback(peer.ip()) {
        Stats::add(&shared.stats.rejected_connections, 1);
        let _ = stream.write_all(PROTECTED_MODE_DENIED.as_bytes()).await;
        return;
    }
    let id = shared.next_client_id();
    let laddr = stream.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let info = Arc::new(ClientInfo::new(id, peer.to_string(), laddr));
    let admitted = {
        let mut clients = shared.clients.lock();
        let room = clients.len() < maxclients;
        if room {
            clients.insert(id, info.clone());
        }
        room
    };
    if !admitted {
        Stats::add(&shared.stats.rejected_connections, 1);
        let _ = stream.write_all(MAXCLIENTS_REACHED).await;
        return;
    }
    Connection::new(shared.clone(), stream, info).run().await;
}

fn is_mapped_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        IpAddr::V4(_) => false,
    }
}

/// Removes expired keys without waiting for reads, `hz` times a second, a bounded slice of the keyspace each time.
pub async fn active_expiry(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let hz = shared.config.read().hz.max(1);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(1000 / hz)) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let now = crate::clock::mono_ms();
        // Bounded wait: a long script holds the store lock, and this runtime also accepts connections.
        let Some(mut store) = shared.store.try_lock_for(Duration::from_millis(10)) else { continue };
        store.now = now;
        let mut removed = 0;
        for db in 0..store.dbs.len() {
            removed += store.dbs[db].active_expire(now, 16);
        }
        if removed > 0 {
            store.settle_expired();
            shared.after_command(&mut store, now);
        }
    }
}

/// Waits for SIGINT or SIGTERM, then asks everything to stop.
pub async fn signals(shared: Arc<Shared>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        tokio::select! {
            _ = term.recv() => tracing::info!("received SIGTERM, shutting down"),
            _ = int.recv() => tracing::info!("received SIGINT, shutting down"),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    shared.request_shutdown();
}
