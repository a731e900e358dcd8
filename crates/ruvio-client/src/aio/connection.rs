//! One async TCP connection: open it within a deadline, send requests, read their replies within a deadline.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use ruvio_protocol::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

use crate::endpoint::{Endpoint, Hint};
use crate::error::{Error, ErrorKind, Result};
use crate::methods::{connection_methods, unresolved};
use crate::options::ClientBuilder;
use crate::reply_buffer::ReplyBuffer;

pub(crate) struct Connection {
    stream: Transport,
    replies: ReplyBuffer,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("peer", &tcp(&self.stream).peer_addr().ok()).finish_non_exhaustive()
    }
}

/// Plain TCP, or (feature `tls`) either plain or TLS.
#[cfg(feature = "tls")]
type Transport = ruvio_tls::Stream;
#[cfg(not(feature = "tls"))]
type Transport = TcpStream;

#[cfg(feature = "tls")]
fn tcp(s: &Transport) -> &TcpStream {
    s.tcp()
}
#[cfg(not(feature = "tls"))]
fn tcp(s: &Transport) -> &TcpStream {
    s
}

impl Connection {
    async fn addresses(endpoint: &Endpoint, deadline: Instant) -> Result<Vec<SocketAddr>> {
        match timeout_at(deadline, tokio::net::lookup_host((endpoint.host.as_str(), endpoint.port))).await {
            Err(_) => Err(Error::timeout("connect (name lookup)")),
            Ok(Err(e)) => Err(unresolved(&endpoint.host, e)),
            Ok(Ok(addrs)) => Ok(addrs.collect()),
        }
    }

    /// The TCP connect, then (with TLS options) the TLS handshake, both before `deadline`.
    async fn dial(host: &str, addr: SocketAddr, opts: &ClientBuilder, deadline: Instant) -> Result<Transport> {
        let tcp = match timeout_at(deadline, TcpStream::connect(addr)).await {
            Err(_) => Err(Error::timeout("connect")),
            Ok(result) => result.map_err(Error::io),
        }?;
        tcp.set_nodelay(true).map_err(Error::io)?;
        #[cfg(feature = "tls")]
        {
            let Some(tls) = &opts.tls else { return Ok(ruvio_tls::Stream::Plain(tcp)) };
            let limit = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()).ok_or_else(|| Error::timeout("connect (TLS handshake)"))?;
            ruvio_tls::connect(tls.config.clone(), tls.name_for(host), tcp, limit).await.map_err(|e| match e.kind() {
                std::io::ErrorKind::TimedOut => Error::timeout("connect (TLS handshake)"),
                std::io::ErrorKind::InvalidInput => Error::new(ErrorKind::InvalidConfig, e.to_string()),
                _ => Error::new(ErrorKind::Io, format!("TLS handshake: {e}")),
            })
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = (host, opts);
            Ok(tcp)
        }
    }

    async fn nap(d: Duration) {
        tokio::time::sleep(d).await;
    }

    /// Sends `bytes` and reads `count` replies, giving up at `deadline` (`None`: wait as long as it takes).
    pub async fn request(&mut self, bytes: &[u8], count: usize, deadline: Option<Instant>) -> Result<Vec<Value>> {
        let work = self.exchange(bytes, count);
        match deadline {
            Some(d) => timeout_at(d, work).await.map_err(|_| Error::timeout("command"))?,
            None => work.await,
        }
    }

    async fn exchange(&mut self, bytes: &[u8], count: usize) -> Result<Vec<Value>> {
        self.stream.write_all(bytes).await.map_err(Error::io)?;
        // TLS keeps what the socket did not take in its own buffer until flushed (a no-op for TCP).
        self.stream.flush().await.map_err(Error::io)?;
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            if let Some(v) = self.replies.next()? {
                out.push(v);
                continue;
            }
            let spare = self.replies.spare();
            let n = match self.stream.read(spare).await {
                Ok(0) => Err(Error::dropped()),
                Ok(n) => Ok(n),
                Err(e) => Err(Error::io(e)),
            };
            self.replies.filled(*n.as_ref().unwrap_or(&0));
            n?;
        }
        Ok(out)
    }

    /// True when the server has closed this connection while it sat idle; see the blocking
    /// connection's `closed_by_peer`.
    pub async fn closed_by_peer(&self) -> bool {
        let mut probe = [0u8; 1];
        // Polled once: data or EOF already known to the reactor answer at once, an idle socket is pending.
        match tokio::time::timeout(Duration::ZERO, tcp(&self.stream).peek(&mut probe)).await {
            Err(_) => false,
            Ok(Ok(0)) => true,
            Ok(Ok(_)) => false,
            Ok(Err(_)) => true,
        }
    }
}

connection_methods!(async await);
