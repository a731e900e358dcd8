//! The blocking client.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use ruvio_protocol::{Protocol, Value};

use crate::args::{ToArg, TokenArg};
use crate::cmd::Cmd;
use crate::connection::Connection;
use crate::endpoint::Hint;
use crate::error::{Error, Result};
use crate::from_value::FromValue;
use crate::guard::LockGuard;
use crate::lock_commands as lc;
use crate::methods::{client_methods, RECONNECT_PAUSE};
use crate::lock_info::{ListedLock, LockInfo, LocksPage};
use crate::lock_options::{LockOptions, Schedule};
use crate::options::ClientBuilder;
use crate::pipeline::Pipeline;
use crate::Token;

/// A blocking connection to a Ruvio (or any Redis-protocol) server.
///
/// Methods take `&mut self`: one command at a time, replies in order. For concurrency open one `Client` per
/// thread, or use the async `aio::Client` (cargo feature `tokio`).
///
/// **Reconnecting.** When the connection breaks (timeout, reset, server restart), the failed call returns the
/// error and the next call opens a new connection with the same options. Before each command the client also
/// checks whether the server has closed the idle connection; if so it reconnects first, which is safe because
/// nothing was sent yet. A command whose fate is unknown (sent, then the connection failed) is never sent
/// again automatically, except `RENEW` and `RELEASE`: see [`Client::renew`].
///
/// **Failover.** A `-READONLY` reply means the node has become a replica; the client drops that connection so
/// that the next call connects to wherever the current primary is.
#[derive(Debug)]
pub struct Client {
    pub(crate) opts: ClientBuilder,
    conn: Option<Connection>,
    /// Set by a lock guard's renewal thread: no call may outlive the lock's local deadline.
    pub(crate) hard_deadline: Option<Instant>,
}

impl Client {
    /// Connects to `host:port` with the default options (see [`ClientBuilder::new`]).
    pub fn connect(host: impl Into<String>, port: u16) -> Result<Client> {
        ClientBuilder::new(host, port).connect()
    }

    /// Options for `host:port`, to adjust before [`ClientBuilder::connect`].
    pub fn builder(host: impl Into<String>, port: u16) -> ClientBuilder {
        ClientBuilder::new(host, port)
    }

    /// A client that connects on first use.
    pub(crate) fn lazy(opts: ClientBuilder) -> Client {
        Client { opts, conn: None, hard_deadline: None }
    }

    fn connection(&mut self) -> Result<()> {
        if self.conn.as_ref().is_some_and(|c| c.closed_by_peer()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let deadline = self.capped(Instant::now() + self.opts.connect_timeout);
            self.conn = Some(Connection::open(&self.opts, deadline)?);
        }
        Ok(())
    }

    /// Sends `bytes` on the open connection and reads `count` replies.
    fn exchange(&mut self, bytes: &[u8], count: usize, deadline: Option<Instant>) -> Result<Vec<Value>> {
        self.conn.as_mut().expect("connected above").request(bytes, count, deadline)
    }

    fn pause(pause: Duration) {
        std::thread::sleep(pause);
    }
}

client_methods!();
