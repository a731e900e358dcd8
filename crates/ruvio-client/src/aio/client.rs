//! The async client: the blocking client's methods as `async fn`s.

use std::time::Duration;

use tokio::time::Instant;

use bytes::BytesMut;
use ruvio_protocol::{Protocol, Value};

use crate::args::{ToArg, TokenArg};
use crate::cmd::Cmd;
use super::connection::Connection;
use super::guard::LockGuard;
use crate::endpoint::Hint;
use crate::error::{Error, Result};
use crate::from_value::FromValue;
use crate::lock_commands as lc;
use crate::methods::{client_methods, RECONNECT_PAUSE};
use crate::lock_info::{ListedLock, LockInfo, LocksPage};
use crate::lock_options::{LockOptions, Schedule};
use crate::options::ClientBuilder;
use crate::pipeline::Pipeline;
use crate::Token;

/// An async connection to a Ruvio (or any Redis-protocol) server; see the blocking
/// [`Client`](crate::Client) for reconnects, retries, timeouts and `-READONLY` handling, which work the same.
///
/// Methods take `&mut self`: one command at a time. Share one between tasks behind a `tokio::sync::Mutex`, or
/// open one per task.
#[derive(Debug)]
pub struct Client {
    pub(crate) opts: ClientBuilder,
    conn: Option<Connection>,
    /// Set by a lock guard's renewal task: no call may outlive the lock's local deadline.
    pub(crate) hard_deadline: Option<Instant>,
    /// True while a request is on the wire; still true at the next call if the caller dropped the previous
    /// call's future mid-way, whose reply would then be read as the answer to the next command.
    in_flight: bool,
}

impl Client {
    /// Connects to `host:port` with the default options (see [`ClientBuilder::new`]).
    pub async fn connect(host: impl Into<String>, port: u16) -> Result<Client> {
        ClientBuilder::new(host, port).connect_async().await
    }

    /// Options for `host:port`, to adjust before [`ClientBuilder::connect_async`].
    pub fn builder(host: impl Into<String>, port: u16) -> ClientBuilder {
        ClientBuilder::new(host, port)
    }

    /// A client that connects on first use.
    pub(crate) fn lazy(opts: ClientBuilder) -> Client {
        Client { opts, conn: None, hard_deadline: None, in_flight: false }
    }

    async fn connection(&mut self) -> Result<()> {
        let stale = match &self.conn {
            Some(c) => self.in_flight || c.closed_by_peer().await,
            None => false,
        };
        if stale {
            self.conn = None;
        }
        self.in_flight = false;
        if self.conn.is_none() {
            let deadline = self.capped(Instant::now() + self.opts.connect_timeout);
            self.conn = Some(Connection::open(&self.opts, deadline).await?);
        }
        Ok(())
    }

    /// Sends `bytes` on the open connection and reads `count` replies, marked in flight meanwhile.
    async fn exchange(&mut self, bytes: &[u8], count: usize, deadline: Option<Instant>) -> Result<Vec<Value>> {
        let conn = self.conn.as_mut().expect("connected above");
        self.in_flight = true;
        let result = conn.request(bytes, count, deadline).await;
        self.in_flight = false;
        result
    }

    async fn pause(pause: Duration) {
        tokio::time::sleep(pause).await;
    }
}

client_methods!(async await);
