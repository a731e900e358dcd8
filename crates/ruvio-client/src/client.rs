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
use crate::lock_info::LockInfo;
use crate::lock_options::{LockOptions, Schedule};
use crate::options::ClientBuilder;
use crate::pipeline::Pipeline;
use crate::Token;

/// The pause between reconnect attempts of a retried `RENEW` or `RELEASE`.
const RECONNECT_PAUSE: Duration = Duration::from_millis(50);

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

    pub(crate) fn with_options(opts: ClientBuilder) -> Result<Client> {
        let mut client = Client::lazy(opts);
        client.connection()?;
        Ok(client)
    }

    /// A client that connects on first use.
    pub(crate) fn lazy(opts: ClientBuilder) -> Client {
        Client { opts, conn: None, hard_deadline: None }
    }

    /// The options this client connects with, e.g. to open a second client like it.
    pub fn options(&self) -> &ClientBuilder {
        &self.opts
    }

    /// The protocol version the connection speaks.
    pub fn protocol(&self) -> Protocol {
        self.opts.protocol
    }

    /// Changes the command timeout for the following calls (`None`: no limit).
    pub fn set_command_timeout(&mut self, timeout: Option<Duration>) {
        self.opts.command_timeout = timeout;
    }

    /// The current command timeout.
    pub fn command_timeout(&self) -> Option<Duration> {
        self.opts.command_timeout
    }

    /// True while a connection is open (it may still turn out to be broken on the next call).
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// Closes the connection now; the next call opens a new one.
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    fn capped(&self, deadline: Instant) -> Instant {
        self.hard_deadline.map_or(deadline, |h| h.min(deadline))
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

    /// Sends `bytes`, reads `count` replies; `extra` lengthens the command timeout for commands that wait on
    /// the server.
    fn round_trip(&mut self, bytes: &[u8], count: usize, extra: Duration) -> Result<Vec<Value>> {
        self.connection()?;
        let deadline = self.opts.command_timeout.map(|t| self.capped(Instant::now() + t + extra)).or(self.hard_deadline);
        let conn = self.conn.as_mut().expect("connected above");
        match conn.request(bytes, count, deadline) {
            Ok(replies) => {
                if replies.iter().any(|r| r.error_code() == Some("READONLY")) {
                    self.conn = None;
                    self.opts.connector.rediscover(Hint::ReadOnly);
                }
                Ok(replies)
            }
            Err(e) => {
                if e.breaks_connection() {
                    self.conn = None;
                    if e.is_connection_dropped() {
                        self.opts.connector.rediscover(Hint::Unreachable);
                    }
                }
                Err(e)
            }
        }
    }

    fn call(&mut self, cmd: &Cmd, extra: Duration) -> Result<Value> {
        let mut out = BytesMut::new();
        cmd.write_to(&mut out);
        Ok(self.round_trip(&out, 1, extra)?.pop().expect("one reply was read"))
    }

    /// Sends `cmd` and converts its reply into `T`.
    pub fn query<T: FromValue>(&mut self, cmd: &Cmd) -> Result<T> {
        T::from_value(self.call(cmd, Duration::ZERO)?)
    }

    /// Sends a pipeline and converts its replies (see [`Pipeline`]).
    pub fn query_pipeline<T: FromValue>(&mut self, pipeline: &Pipeline) -> Result<T> {
        if pipeline.is_empty() {
            return T::from_value(Value::Array(Vec::new()));
        }
        let (bytes, count) = pipeline.encode();
        let replies = self.round_trip(&bytes, count, Duration::ZERO)?;
        T::from_value(pipeline.assemble(replies)?)
    }

    /// Sends any command given as its parts, name first, and returns the raw reply, error replies included
    /// (as [`Value::Error`]): `db.command(&["SET", "k", "v"])`.
    pub fn command<A: ToArg>(&mut self, parts: &[A]) -> Result<Value> {
        let (name, rest) = parts.split_first().ok_or_else(|| Error::type_error("a command needs a name"))?;
        let cmd = Cmd::from_parts(name.to_arg(), rest.iter().map(|a| a.to_arg()));
        self.call(&cmd, Duration::ZERO)
    }

    /// `PING`: checks that the server answers.
    pub fn ping(&mut self) -> Result<()> {
        self.query(&Cmd::new("PING"))
    }

    /// `GET key`: the value, or `None` when the key does not exist.
    pub fn get<T: FromValue>(&mut self, key: impl ToArg) -> Result<Option<T>> {
        self.query(&Cmd::new("GET").arg(key))
    }

    /// `SET key value`.
    pub fn set(&mut self, key: impl ToArg, value: impl ToArg) -> Result<()> {
        self.query(&Cmd::new("SET").arg(key).arg(value))
    }

    /// `SET key value PX ttl_ms`: sets a value that expires after `ttl_ms` milliseconds.
    pub fn set_px(&mut self, key: impl ToArg, value: impl ToArg, ttl_ms: u64) -> Result<()> {
        self.query(&Cmd::new("SET").arg(key).arg(value).arg("PX").arg(ttl_ms))
    }

    /// `DEL key`: how many keys were removed (0 or 1).
    pub fn del(&mut self, key: impl ToArg) -> Result<i64> {
        self.query(&Cmd::new("DEL").arg(key))
    }

    /// `EXISTS key`.
    pub fn exists(&mut self, key: impl ToArg) -> Result<bool> {
        self.query(&Cmd::new("EXISTS").arg(key))
    }

    /// `INCRBY key by`: the new value.
    pub fn incr(&mut self, key: impl ToArg, by: i64) -> Result<i64> {
        self.query(&Cmd::new("INCRBY").arg(key).arg(by))
    }

    /// `LEASE key ttl_ms`: takes the lock if it is free. `Some(token)`: you hold it until `ttl_ms` from now (or
    /// [`Client::renew`] / [`Client::release`]); `None`: someone else holds it.
    ///
    /// Never retried automatically: if the connection fails after the command was sent, the lock may have been
    /// granted with a token nobody will ever see; it then stays taken until its TTL passes. A retry would only
    /// find it taken (by the lost grant) and answer `None`, so the error is the honest answer.
    pub fn lease(&mut self, key: impl ToArg, ttl_ms: u64) -> Result<Option<Token>> {
        self.query(&lc::lease(key, ttl_ms, None))
    }

    /// `LEASE key ttl_ms WAIT timeout_ms`: like [`Client::lease`], but waits up to `wait_ms` in the server's
    /// queue for the lock to become free. The command timeout is extended by `wait_ms` for this call.
    ///
    /// `wait_ms = 0` asks the server to wait without a limit; the command timeout still ends the call on this
    /// side (with a timeout error, after which the grant may or may not have happened), unless it was turned
    /// off with `set_command_timeout(None)`.
    pub fn lease_wait(&mut self, key: impl ToArg, ttl_ms: u64, wait_ms: u64) -> Result<Option<Token>> {
        FromValue::from_value(self.call(&lc::lease(key, ttl_ms, Some(wait_ms)), Duration::from_millis(wait_ms))?)
    }

    /// `RENEW key token ttl_ms`: moves the deadline to `ttl_ms` from now if `token` still holds the lock (or the
    /// semaphore slot). `1`: renewed; `0`: the token no longer holds it (it expired or was released), and
    /// nothing changed. A renewal never takes back an expired lock.
    ///
    /// Sent again on a fresh connection when the connection drops or is refused, for as long as the command
    /// timeout allows (a restarting server does both for a moment): renewing twice with the same token only
    /// sets the same deadline again, and a RENEW that arrives after the grant ended answers 0, it never takes
    /// the lock back. A timeout is not retried: the server is not answering, and the command timeout has been
    /// spent.
    pub fn renew(&mut self, key: impl ToArg, token: impl TokenArg, ttl_ms: u64) -> Result<i64> {
        self.query_retrying(&lc::renew(key, token, ttl_ms))
    }

    /// `RELEASE key token`: frees the lock, or this token's semaphore slot. `1`: released; `0`: the token no
    /// longer holds it, nothing changed (a stale worker cannot free a lock that now belongs to someone else).
    ///
    /// Sent again when the connection drops or is refused, as [`Client::renew`] is:
    /// releasing is idempotent for a given token and cannot free another holder's grant. A retried release
    /// may answer `0` when the first attempt had already released.
    pub fn release(&mut self, key: impl ToArg, token: impl TokenArg) -> Result<i64> {
        self.query_retrying(&lc::release(key, token))
    }

    /// `SEMAPHORE key limit ttl_ms`: takes one of `limit` slots. `Some(token)`: a slot, with its own TTL and
    /// token; `None`: all slots are taken. Never retried automatically, for the reason given at
    /// [`Client::lease`].
    pub fn semaphore(&mut self, key: impl ToArg, limit: u64, ttl_ms: u64) -> Result<Option<Token>> {
        self.query(&lc::semaphore(key, limit, ttl_ms, None))
    }

    /// `SEMAPHORE key limit ttl_ms WAIT timeout_ms`: like [`Client::semaphore`], waiting up to `wait_ms` for a
    /// slot.
    pub fn semaphore_wait(&mut self, key: impl ToArg, limit: u64, ttl_ms: u64, wait_ms: u64) -> Result<Option<Token>> {
        FromValue::from_value(self.call(&lc::semaphore(key, limit, ttl_ms, Some(wait_ms)), Duration::from_millis(wait_ms))?)
    }

    /// `IFGT key token value`: a fenced write. Sets `key` to `value` unless a higher token has written `key`
    /// before (the same token may write again). `1`: written; `0`: a newer holder already wrote, nothing
    /// changed.
    pub fn ifgt(&mut self, key: impl ToArg, token: impl TokenArg, value: impl ToArg) -> Result<i64> {
        self.query(&lc::ifgt(key, token, value, None))
    }

    /// `IFGT key token value PX ms`: like [`Client::ifgt`], the value expiring after `px_ms` milliseconds.
    pub fn ifgt_px(&mut self, key: impl ToArg, token: impl TokenArg, value: impl ToArg, px_ms: u64) -> Result<i64> {
        self.query(&lc::ifgt(key, token, value, Some(px_ms)))
    }

    /// `LOCKINFO key`: the lock's kind, limit, holders and waiters; `None` when nobody holds it.
    pub fn lock_info(&mut self, key: impl ToArg) -> Result<Option<LockInfo>> {
        self.query(&lc::lock_info(key))
    }

    /// Takes the lock `key` (`LEASE`, waiting if `options` say so) and returns a guard that renews it in the
    /// background and signals its loss; `None` when someone else holds it (or, after waiting, when the grant
    /// had already run out by the time it arrived). See [`LockGuard`].
    pub fn acquire(&mut self, key: &str, options: LockOptions) -> Result<Option<LockGuard>> {
        let sent = Instant::now();
        let token = match options.wait {
            Some(w) if !w.is_zero() => self.lease_wait(key, options.ttl_ms(), w.as_millis().max(1) as u64)?,
            _ => self.lease(key, options.ttl_ms())?,
        };
        self.guard(key, token, options, sent)
    }

    /// Takes one of `limit` slots of the semaphore `key` and returns a guard for it, as [`Client::acquire`]
    /// does for a lock; `None` when all slots are taken.
    pub fn acquire_semaphore(&mut self, key: &str, limit: u64, options: LockOptions) -> Result<Option<LockGuard>> {
        let sent = Instant::now();
        let token = match options.wait {
            Some(w) if !w.is_zero() => self.semaphore_wait(key, limit, options.ttl_ms(), w.as_millis().max(1) as u64)?,
            _ => self.semaphore(key, limit, options.ttl_ms())?,
        };
        self.guard(key, token, options, sent)
    }

    /// Starts the guard for a grant requested at `sent`. A grant that waited long in the queue is renewed
    /// first, since its deadline is only known to be after `sent + ttl`; if that renewal answers 0 the grant
    /// has already ended and there is nothing to guard.
    fn guard(&mut self, key: &str, token: Option<Token>, options: LockOptions, sent: Instant) -> Result<Option<LockGuard>> {
        let Some(token) = token else { return Ok(None) };
        let mut schedule = Schedule::new(options, sent);
        if schedule.needs_confirmation(Instant::now()) {
            let renew_sent = Instant::now();
            let ttl_ms = schedule.renewal_ttl_ms(renew_sent);
            if self.renew(key, token, ttl_ms)? != 1 {
                return Ok(None);
            }
            schedule.renewed(renew_sent, ttl_ms);
        }
        LockGuard::start(self.opts.clone(), key, token, schedule).map(Some).inspect_err(|_| {
            // Without a guard nobody would renew or release it; free it now rather than at the TTL.
            let _ = self.release(key, token);
        })
    }

    /// Sends a command that is safe to repeat, and sends it again on a fresh connection while the network
    /// fails (dropped or refused connections: a restarting server does both for a moment) until the command
    /// timeout, counted from the first attempt, runs out. A timeout ends it: the server is not answering.
    fn query_retrying<T: FromValue>(&mut self, cmd: &Cmd) -> Result<T> {
        let until = self.opts.command_timeout.map(|t| self.capped(Instant::now() + t)).or(self.hard_deadline);
        loop {
            match self.call(cmd, Duration::ZERO) {
                Err(e) if e.is_io_error() && !e.is_timeout() && until.is_some_and(|u| Instant::now() + RECONNECT_PAUSE < u) => {
                    std::thread::sleep(RECONNECT_PAUSE);
                }
                other => return T::from_value(other?),
            }
        }
    }
}
