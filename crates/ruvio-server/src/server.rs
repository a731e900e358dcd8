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

async fn admit(shared: &Arc<Shared>, mut stream: TcpStream, peer: SocketAddr) {
    Stats::add(&shared.stats.connections_received, 1);
    let _ = stream.set_nodelay(true);
    let (maxclients, protected, has_password, keepalive) = {
        let c = shared.config.read();
        (c.maxclients, c.protected_mode, !shared.acl.default_is_open(), c.tcp_keepalive)
    };
    if keepalive > 0 {
        crate::os::set_keepalive(&stream, keepalive);
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
