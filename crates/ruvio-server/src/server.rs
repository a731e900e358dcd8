//! Listening, admission (maxclients, protected mode), background tasks and graceful shutdown.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use ruvio_tls::Stream;

use crate::client::ClientInfo;
use crate::connection::Connection;
use crate::shared::{Shared, Stats};
use crate::workers::Workers;

const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Ruvio you may adopt one of the following solutions: 1) Disable protected mode by sending the command 'CONFIG SET protected-mode no' from the loopback interface. 2) Set a password with 'CONFIG SET requirepass <password>' or the `requirepass` config option. 3) Start the server with '--protected-mode no'.\r\n";

/// A listening socket: the plain port (`port`) or the TLS port (`tls-port`).
pub struct Listener {
    pub tcp: TcpListener,
    pub tls: bool,
}

/// Redis's words when neither port is set.
const NOWHERE: &str = "Configured to not listen anywhere, exiting.";

/// Binds every configured address, on `port` (unless 0: as in Redis, `port 0` means no plain TCP) and on
/// `tls-port` (unless 0). `-::1`-style entries (a leading '-') are optional: failing to bind them is not an error,
/// as in Redis.
pub async fn bind(shared: &Arc<Shared>) -> std::io::Result<Vec<Listener>> {
    let (binds, port, tls_port) = {
        let c = shared.config.read();
        (c.bind.clone(), c.port, c.tls_port)
    };
    if port == 0 && tls_port == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, NOWHERE));
    }
    let mut listeners = Vec::new();
    for (port, tls) in [(port, false), (tls_port, true)] {
        if port == 0 {
            continue;
        }
        for b in &binds {
            let (optional, addr) = match b.strip_prefix('-') {
                Some(a) => (true, a.to_string()),
                None => (false, b.clone()),
            };
            let ip: IpAddr = if addr == "*" { "0.0.0.0".parse().unwrap() } else {
                addr.parse().map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("bad bind address {addr}")))?
            };
            match TcpListener::bind(SocketAddr::new(ip, port)).await {
                Ok(l) => listeners.push(Listener { tcp: l, tls }),
                Err(e) if optional => tracing::info!("skipping optional bind address {addr}: {e}"),
                Err(e) => return Err(std::io::Error::new(e.kind(), format!("could not bind {addr}:{port}: {e}"))),
            }
        }
        let bound = if tls { &shared.bound_tls_port } else { &shared.bound_port };
        bound.store(port as u64, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(listeners)
}

/// What a client past `maxclients` gets before its connection is closed.
const MAXCLIENTS_REACHED: &[u8] = b"-ERR max number of clients reached\r\n";

/// True when `maxclients` connections are open or in their TLS handshake (one lock at a time).
fn at_capacity(shared: &Shared) -> bool {
    let max = shared.config.read().maxclients;
    let handshaking = shared.tls_handshakes.load(std::sync::atomic::Ordering::Relaxed) as usize;
    shared.clients.lock().len() + handshaking >= max
}

/// Accepts connections on `listener` until shutdown and hands each to an I/O worker (which does the TLS
/// handshake, if any: the accepting task never waits for a client).
pub async fn accept_loop(shared: Arc<Shared>, listener: Listener, workers: Arc<Workers>) {
    let Listener { tcp: listener, tls } = listener;
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
                if tls {
                    shared.tls_handshakes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                workers.next().spawn(async move {
                    match TcpStream::from_std(std_stream) {
                        Ok(stream) if tls => {
                            let stream = handshake(&shared, stream, peer).await;
                            shared.tls_handshakes.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                            if let Some(stream) = stream {
                                admit(&shared, stream, peer).await;
                            }
                        }
                        Ok(stream) => admit(&shared, Stream::Plain(stream), peer).await,
                        Err(e) => {
                            if tls {
                                shared.tls_handshakes.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            tracing::warn!("could not adopt a connection: {e}");
                        }
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

/// The TLS handshake of a connection on the TLS port, on the connection's own I/O worker: other clients of that
/// worker are served meanwhile, and `tls-handshake-timeout` bounds a peer that sends nothing. A peer that is not
/// speaking TLS (a plain RESP client on the TLS port) fails at its first bytes and is closed at once.
async fn handshake(shared: &Arc<Shared>, tcp: TcpStream, peer: SocketAddr) -> Option<Stream> {
    Stats::add(&shared.stats.connections_received, 1);
    let _ = tcp.set_nodelay(true);
    let acceptor = shared.tls.read().clone()?;
    let limit = Duration::from_millis(shared.config.read().tls_handshake_timeout);
    match ruvio_tls::accept(&acceptor, tcp, limit).await {
        Ok(s) => Some(s),
        Err(e) => {
            Stats::add(&shared.stats.rejected_connections, 1);
            tracing::info!("TLS handshake with {peer} failed: {e}");
            None
        }
    }
}

async fn admit(shared: &Arc<Shared>, mut stream: Stream, peer: SocketAddr) {
    if !stream.is_tls() {
        // Counted by the handshake for TLS connections.
        Stats::add(&shared.stats.connections_received, 1);
        let _ = stream.tcp().set_nodelay(true);
    }
    let (maxclients, protected, has_password, keepalive) = {
        let c = shared.config.read();
        (c.maxclients, c.protected_mode, !shared.acl.default_is_open(), c.tcp_keepalive)
    };
    if keepalive > 0 {
        crate::os::set_keepalive(stream.tcp(), keepalive);
    }
    if protected && !has_password && !peer.ip().is_loopback() && !is_mapped_loopback(peer.ip()) {
        Stats::add(&shared.stats.rejected_connections, 1);
        let _ = stream.write_all(PROTECTED_MODE_DENIED.as_bytes()).await;
        let _ = stream.flush().await;
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
        let _ = stream.flush().await;
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
