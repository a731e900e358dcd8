//! One blocking TCP connection: open it (within a deadline), send requests, read their replies (within a
//! deadline).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Instant;

use bytes::BytesMut;
use ruvio_protocol::Value;

use crate::endpoint::{Endpoint, Hint};
use crate::error::{Error, ErrorKind, Result};
use crate::methods::{connection_methods, unresolved};
use crate::options::ClientBuilder;
use crate::reply_buffer::ReplyBuffer;

#[derive(Debug)]
pub(crate) struct Connection {
    stream: Transport,
    replies: ReplyBuffer,
}

/// Plain TCP, or TLS over it (feature `tls`, [`ClientBuilder::tls`]).
pub(crate) enum Transport {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<ruvio_tls::rustls::StreamOwned<ruvio_tls::rustls::ClientConnection, TcpStream>>),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Plain(s) => f.debug_tuple("Plain").field(s).finish(),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => f.debug_tuple("Tls").field(&s.sock).finish(),
        }
    }
}

impl Transport {
    fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            #[cfg(feature = "tls")]
            Transport::Tls(s) => &s.sock,
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.flush(),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => s.flush(),
        }
    }
}

/// The time left until `deadline`, or a timeout error when none is left (a zero timeout would mean "forever"
/// to the socket calls).
fn remaining(deadline: Instant, what: &str) -> Result<std::time::Duration> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(Error::timeout(what)),
    }
}

impl Connection {
    fn addresses(endpoint: &Endpoint, _deadline: Instant) -> Result<Vec<SocketAddr>> {
        let addrs = (endpoint.host.as_str(), endpoint.port).to_socket_addrs().map_err(|e| unresolved(&endpoint.host, e))?;
        Ok(addrs.collect())
    }

    /// The TCP connect, then (with TLS options) the TLS handshake, both before `deadline`.
    fn dial(host: &str, addr: SocketAddr, opts: &ClientBuilder, deadline: Instant) -> Result<Transport> {
        let tcp = remaining(deadline, "connect").and_then(|t| TcpStream::connect_timeout(&addr, t).map_err(Error::io))?;
        tcp.set_nodelay(true).map_err(Error::io)?;
        #[cfg(feature = "tls")]
        if let Some(tls) = &opts.tls {
            return Self::secure(tcp, host, tls, deadline);
        }
        let _ = (host, opts);
        Ok(Transport::Plain(tcp))
    }

    #[cfg(feature = "tls")]
    fn secure(mut tcp: TcpStream, host: &str, tls: &crate::TlsConfig, deadline: Instant) -> Result<Transport> {
        use ruvio_tls::rustls::ClientConnection;
        let name = ruvio_tls::server_name(tls.name_for(host)).map_err(|e| Error::new(ErrorKind::InvalidConfig, e))?;
        let mut conn = ClientConnection::new(tls.config.clone(), name).map_err(|e| Error::new(ErrorKind::Io, format!("TLS: {e}")))?;
        // The handshake now, within the connect deadline, so that a refused certificate is a connect error.
        while conn.is_handshaking() {
            let left = remaining(deadline, "connect (TLS handshake)")?;
            tcp.set_read_timeout(Some(left)).map_err(Error::io)?;
            tcp.set_write_timeout(Some(left)).map_err(Error::io)?;
            conn.complete_io(&mut tcp).map_err(|e| match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::timeout("connect (TLS handshake)"),
                _ => Error::new(ErrorKind::Io, format!("TLS handshake: {e}")),
            })?;
        }
        Ok(Transport::Tls(Box::new(ruvio_tls::rustls::StreamOwned::new(conn, tcp))))
    }

    fn nap(d: std::time::Duration) {
        std::thread::sleep(d);
    }

    /// Sends `bytes` and reads `count` replies, giving up at `deadline` (`None`: wait as long as it takes).
    pub fn request(&mut self, bytes: &[u8], count: usize, deadline: Option<Instant>) -> Result<Vec<Value>> {
        self.stream.tcp().set_write_timeout(deadline.map(|d| remaining(d, "command")).transpose()?).map_err(Error::io)?;
        self.stream.write_all(bytes).map_err(Error::io)?;
        // TLS keeps what the socket did not take in its own buffer until flushed (a no-op for TCP).
        self.stream.flush().map_err(Error::io)?;
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            if let Some(v) = self.replies.next()? {
                out.push(v);
                continue;
            }
            self.stream.tcp().set_read_timeout(deadline.map(|d| remaining(d, "command")).transpose()?).map_err(Error::io)?;
            let spare = self.replies.spare();
            let n = match self.stream.read(spare) {
                Ok(0) => Err(Error::dropped()),
                Ok(n) => Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
                Err(e) => Err(Error::io(e)),
            };
            self.replies.filled(*n.as_ref().unwrap_or(&0));
            n?;
        }
        Ok(out)
    }

    /// True when the server has closed this connection while it sat idle (it restarted, or timed the client
    /// out). Checked before each request, because then nothing was sent yet and reconnecting is safe even for
    /// commands that must not be repeated.
    pub fn closed_by_peer(&self) -> bool {
        let tcp = self.stream.tcp();
        if tcp.set_nonblocking(true).is_err() {
            return true;
        }
        let mut probe = [0u8; 1];
        let closed = match tcp.peek(&mut probe) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        };
        closed || tcp.set_nonblocking(false).is_err()
    }
}

connection_methods!();
