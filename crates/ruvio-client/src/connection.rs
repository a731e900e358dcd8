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
    stream: TcpStream,
    replies: ReplyBuffer,
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

    fn dial(addr: SocketAddr, deadline: Instant) -> Result<TcpStream> {
        remaining(deadline, "connect").and_then(|t| TcpStream::connect_timeout(&addr, t).map_err(Error::io))
    }

    fn nap(d: std::time::Duration) {
        std::thread::sleep(d);
    }

    /// Sends `bytes` and reads `count` replies, giving up at `deadline` (`None`: wait as long as it takes).
    pub fn request(&mut self, bytes: &[u8], count: usize, deadline: Option<Instant>) -> Result<Vec<Value>> {
        self.stream.set_write_timeout(deadline.map(|d| remaining(d, "command")).transpose()?).map_err(Error::io)?;
        self.stream.write_all(bytes).map_err(Error::io)?;
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            if let Some(v) = self.replies.next()? {
                out.push(v);
                continue;
            }
            self.stream.set_read_timeout(deadline.map(|d| remaining(d, "command")).transpose()?).map_err(Error::io)?;
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
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut probe = [0u8; 1];
        let closed = match self.stream.peek(&mut probe) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        };
        closed || self.stream.set_nonblocking(false).is_err()
    }
}

connection_methods!();
