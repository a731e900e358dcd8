//! The methods the blocking [`Client`](crate::Client) and the async `aio::Client` share, written once.
//!
//! As redis-rs generates its `Commands` and `AsyncCommands` from one list, [`client_methods!`] holds the one
//! text of every method that differs between the two clients only by `async` and `.await`; each client module
//! invokes it. Names in it resolve where it is invoked, so `Client`, `LockGuard`, `Instant` and the
//! connection are that module's. What really differs stays in each client: opening and checking the
//! connection, sending on it (the async client marks a request in flight) and pausing between retries.

use std::time::Duration;

/// The pause between reconnect attempts of a retried `RENEW` or `RELEASE`.
pub(crate) const RECONNECT_PAUSE: Duration = Duration::from_millis(50);
/// How long one Sentinel-protocol server may take to answer before the next one is asked.
pub(crate) const SENTINEL_ATTEMPT: Duration = Duration::from_millis(1000);
/// How long one attempt to reach the primary a lookup named may take before looking up again.
pub(crate) const DISCOVERY_ATTEMPT: Duration = Duration::from_millis(1500);
/// How long a command refused with `-NOREPLICAS` is sent again (within the command timeout): right after a failover
/// the new primary's replicas are still re-attaching, and the refusal means nothing ran.
pub(crate) const NOREPLICAS_PATIENCE: Duration = Duration::from_millis(3000);

/// Writes the shared methods into `impl Client` of the invoking module: `client_methods!()` for the blocking
/// client, `client_methods!(async await)` for the async one, where each `$(.$aw)?` becomes `.await`.
///
/// The invoking module provides `Client::lazy`, `connection()` (open or reuse the connection),
/// `exchange(bytes, count, deadline)` (one request on it) and `pause(duration)`.
macro_rules! client_methods {
    ($($async:ident $aw:ident)?) => {
        impl Client {
            pub(crate) $($async)? fn with_options(opts: ClientBuilder) -> Result<Client> {
                let mut client = Client::lazy(opts);
                client.connection()$(.$aw)??;
                Ok(client)
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

            /// Sends `bytes`, reads `count` replies; `extra` lengthens the command timeout for commands that wait on
            /// the server.
            $($async)? fn round_trip(&mut self, bytes: &[u8], count: usize, extra: Duration) -> Result<Vec<Value>> {
                self.connection()$(.$aw)??;
                let deadline = self.opts.command_timeout.map(|t| self.capped(Instant::now() + t + extra)).or(self.hard_deadline);
                match self.exchange(bytes, count, deadline)$(.$aw)? {
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
                            // A paused primary times out rather than dropping the connection: look again either way.
                            self.opts.connector.rediscover(Hint::Unreachable);
                        }
                        Err(e)
                    }
                }
            }

            /// Sends one command. A `-NOREPLICAS` refusal (the server ran nothing: too few replicas streaming, as
            /// for a moment after a failover) is sent again every `RECONNECT_PAUSE` for up to
            /// `NOREPLICAS_PATIENCE`, within the command timeout; safe for every command, LEASE included.
            $($async)? fn call(&mut self, cmd: &Cmd, extra: Duration) -> Result<Value> {
                let mut out = BytesMut::new();
                cmd.write_to(&mut out);
                let started = Instant::now();
                let mut until = started + $crate::methods::NOREPLICAS_PATIENCE;
                if let Some(t) = self.opts.command_timeout {
                    until = until.min(started + t);
                }
                let until = self.capped(until);
                loop {
                    let reply = self.round_trip(&out, 1, extra)$(.$aw)??.pop().expect("one reply was read");
                    if reply.error_code() != Some("NOREPLICAS") || Instant::now() + RECONNECT_PAUSE >= until {
                        return Ok(reply);
                    }
                    Self::pause(RECONNECT_PAUSE)$(.$aw)?;
                }
            }

            /// Sends `cmd` and converts its reply into `T`.
            pub $($async)? fn query<T: FromValue>(&mut self, cmd: &Cmd) -> Result<T> {
                T::from_value(self.call(cmd, Duration::ZERO)$(.$aw)??)
            }

            /// Sends a pipeline and converts its replies (see [`Pipeline`]).
            pub $($async)? fn query_pipeline<T: FromValue>(&mut self, pipeline: &Pipeline) -> Result<T> {
                if pipeline.is_empty() {
                    return T::from_value(Value::Array(Vec::new()));
                }
                let (bytes, count) = pipeline.encode();
                let replies = self.round_trip(&bytes, count, Duration::ZERO)$(.$aw)??;
                T::from_value(pipeline.assemble(replies)?)
            }

            /// Sends any command given as its parts, name first, and returns the raw reply, error replies included
            /// (as [`Value::Error`]): `db.command(&["SET", "k", "v"])`.
            pub $($async)? fn command<A: ToArg>(&mut self, parts: &[A]) -> Result<Value> {
                let (name, rest) = parts.split_first().ok_or_else(|| Error::type_error("a command needs a name"))?;
                let cmd = Cmd::from_parts(name.to_arg(), rest.iter().map(|a| a.to_arg()));
                self.call(&cmd, Duration::ZERO)$(.$aw)?
            }

            /// `PING`: checks that the server answers.
            pub $($async)? fn ping(&mut self) -> Result<()> {
                self.query(&Cmd::new("PING"))$(.$aw)?
            }

            /// `GET key`: the value, or `None` when the key does not exist.
            pub $($async)? fn get<T: FromValue>(&mut self, key: impl ToArg) -> Result<Option<T>> {
                self.query(&Cmd::new("GET").arg(key))$(.$aw)?
            }

            /// `SET key value`.
            pub $($async)? fn set(&mut self, key: impl ToArg, value: impl ToArg) -> Result<()> {
                self.query(&Cmd::new("SET").arg(key).arg(value))$(.$aw)?
            }

            /// `SET key value PX ttl_ms`: sets a value that expires after `ttl_ms` milliseconds.
            pub $($async)? fn set_px(&mut self, key: impl ToArg, value: impl ToArg, ttl_ms: u64) -> Result<()> {
                self.query(&Cmd::new("SET").arg(key).arg(value).arg("PX").arg(ttl_ms))$(.$aw)?
            }

            /// `DEL key`: how many keys were removed (0 or 1).
            pub $($async)? fn del(&mut self, key: impl ToArg) -> Result<i64> {
                self.query(&Cmd::new("DEL").arg(key))$(.$aw)?
            }

            /// `EXISTS key`.
            pub $($async)? fn exists(&mut self, key: impl ToArg) -> Result<bool> {
                self.query(&Cmd::new("EXISTS").arg(key))$(.$aw)?
            }

            /// `INCRBY key by`: the new value.
            pub $($async)? fn incr(&mut self, key: impl ToArg, by: i64) -> Result<i64> {
                self.query(&Cmd::new("INCRBY").arg(key).arg(by))$(.$aw)?
            }

            /// `LEASE key ttl_ms`: takes the lock if it is free. `Some(token)`: you hold it until `ttl_ms` from now (or
            /// [`Client::renew`] / [`Client::release`]); `None`: someone else holds it.
            ///
            /// Never retried automatically: if the connection fails after the command was sent, the lock may have been
            /// granted with a token nobody will ever see; it then stays taken until its TTL passes. A retry would only
            /// find it taken (by the lost grant) and answer `None`, so the error is the honest answer.
            pub $($async)? fn lease(&mut self, key: impl ToArg, ttl_ms: u64) -> Result<Option<Token>> {
                self.query(&lc::lease(key, ttl_ms, None))$(.$aw)?
            }

            /// `LEASE key ttl_ms WAIT timeout_ms`: like [`Client::lease`], but waits up to `wait_ms` in the server's
            /// queue for the lock to become free. The command timeout is extended by `wait_ms` for this call.
            ///
            /// `wait_ms = 0` asks the server to wait without a limit; the command timeout still ends the call on this
            /// side (with a timeout error, after which the grant may or may not have happened), unless it was turned
            /// off with `set_command_timeout(None)`.
            pub $($async)? fn lease_wait(&mut self, key: impl ToArg, ttl_ms: u64, wait_ms: u64) -> Result<Option<Token>> {
                FromValue::from_value(self.call(&lc::lease(key, ttl_ms, Some(wait_ms)), Duration::from_millis(wait_ms))$(.$aw)??)
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
            pub $($async)? fn renew(&mut self, key: impl ToArg, token: impl TokenArg, ttl_ms: u64) -> Result<i64> {
                self.query_retrying(&lc::renew(key, token, ttl_ms)?)$(.$aw)?
            }

            /// `RELEASE key token`: frees the lock, or this token's semaphore slot. `1`: released; `0`: the token no
            /// longer holds it, nothing changed (a stale worker cannot free a lock that now belongs to someone else).
            ///
            /// Sent again when the connection drops or is refused, as [`Client::renew`] is:
            /// releasing is idempotent for a given token and cannot free another holder's grant. A retried release
            /// may answer `0` when the first attempt had already released.
            pub $($async)? fn release(&mut self, key: impl ToArg, token: impl TokenArg) -> Result<i64> {
                self.query_retrying(&lc::release(key, token)?)$(.$aw)?
            }

            /// `SEMAPHORE key limit ttl_ms`: takes one of `limit` slots. `Some(token)`: a slot, with its own TTL and
            /// token; `None`: all slots are taken. Never retried automatically, for the reason given at
            /// [`Client::lease`].
            pub $($async)? fn semaphore(&mut self, key: impl ToArg, limit: u64, ttl_ms: u64) -> Result<Option<Token>> {
                self.query(&lc::semaphore(key, limit, ttl_ms, None))$(.$aw)?
            }

            /// `SEMAPHORE key limit ttl_ms WAIT timeout_ms`: like [`Client::semaphore`], waiting up to `wait_ms` for a
            /// slot.
            pub $($async)? fn semaphore_wait(&mut self, key: impl ToArg, limit: u64, ttl_ms: u64, wait_ms: u64) -> Result<Option<Token>> {
                FromValue::from_value(self.call(&lc::semaphore(key, limit, ttl_ms, Some(wait_ms)), Duration::from_millis(wait_ms))$(.$aw)??)
            }

            /// `IFGT key token value`: a fenced write. Sets `key` to `value` unless a higher token has written `key`
            /// before (the same token may write again). `1`: written; `0`: a newer holder already wrote, nothing
            /// changed.
            pub $($async)? fn ifgt(&mut self, key: impl ToArg, token: impl TokenArg, value: impl ToArg) -> Result<i64> {
                self.query(&lc::ifgt(key, token, value, None)?)$(.$aw)?
            }

            /// `IFGT key token value PX ms`: like [`Client::ifgt`], the value expiring after `px_ms` milliseconds.
            pub $($async)? fn ifgt_px(&mut self, key: impl ToArg, token: impl TokenArg, value: impl ToArg, px_ms: u64) -> Result<i64> {
                self.query(&lc::ifgt(key, token, value, Some(px_ms))?)$(.$aw)?
            }

            /// `LOCKINFO key`: the lock's kind, limit, holders and waiters; `None` when nobody holds it.
            pub $($async)? fn lock_info(&mut self, key: impl ToArg) -> Result<Option<LockInfo>> {
                self.query(&lc::lock_info(key))$(.$aw)?
            }

            /// `LOCKS cursor [MATCH pattern] [COUNT n]`: one page of the database's locks with their holders'
            /// tokens, grant times and clients; continue with the returned cursor until it is 0 (as SCAN).
            pub $($async)? fn locks(&mut self, cursor: u64, pattern: Option<&str>, count: Option<u64>) -> Result<LocksPage> {
                self.query(&lc::locks(cursor, pattern, count))$(.$aw)?
            }

            /// Every lock (matching `pattern`), iterating `LOCKS` to the end.
            pub $($async)? fn locks_all(&mut self, pattern: Option<&str>) -> Result<Vec<ListedLock>> {
                let mut out = Vec::new();
                let mut cursor = 0;
                loop {
                    let page = self.locks(cursor, pattern, Some(100))$(.$aw)??;
                    out.extend(page.locks);
                    if page.cursor == 0 {
                        return Ok(out);
                    }
                    cursor = page.cursor;
                }
            }

            /// Takes the lock `key` (`LEASE`, waiting if `options` say so) and returns a guard that renews it in the
            /// background and signals its loss; `None` when someone else holds it (or, after waiting, when the grant
            /// had already run out by the time it arrived). See [`LockGuard`].
            pub $($async)? fn acquire(&mut self, key: &str, options: LockOptions) -> Result<Option<LockGuard>> {
                let sent = Instant::now();
                let token = match options.wait {
                    Some(w) if !w.is_zero() => self.lease_wait(key, options.ttl_ms(), w.as_millis().max(1) as u64)$(.$aw)??,
                    _ => self.lease(key, options.ttl_ms())$(.$aw)??,
                };
                self.guard(key, token, options, sent)$(.$aw)?
            }

            /// Takes one of `limit` slots of the semaphore `key` and returns a guard for it, as [`Client::acquire`]
            /// does for a lock; `None` when all slots are taken.
            pub $($async)? fn acquire_semaphore(&mut self, key: &str, limit: u64, options: LockOptions) -> Result<Option<LockGuard>> {
                let sent = Instant::now();
                let token = match options.wait {
                    Some(w) if !w.is_zero() => self.semaphore_wait(key, limit, options.ttl_ms(), w.as_millis().max(1) as u64)$(.$aw)??,
                    _ => self.semaphore(key, limit, options.ttl_ms())$(.$aw)??,
                };
                self.guard(key, token, options, sent)$(.$aw)?
            }

            /// Starts the guard for a grant requested at `sent`. A grant that waited long in the queue is renewed
            /// first, since its deadline is only known to be after `sent + ttl`; if that renewal answers 0 the grant
            /// has already ended and there is nothing to guard.
            $($async)? fn guard(&mut self, key: &str, token: Option<Token>, options: LockOptions, sent: Instant) -> Result<Option<LockGuard>> {
                let Some(token) = token else { return Ok(None) };
                let mut schedule = Schedule::new(options, sent.into());
                if schedule.needs_confirmation(std::time::Instant::now()) {
                    let renew_sent = std::time::Instant::now();
                    let ttl_ms = schedule.renewal_ttl_ms(renew_sent);
                    if self.renew(key, token, ttl_ms)$(.$aw)?? != 1 {
                        return Ok(None);
                    }
                    schedule.renewed(renew_sent, ttl_ms);
                }
                match LockGuard::start(self.opts.clone(), key, token, schedule) {
                    Ok(guard) => Ok(Some(guard)),
                    Err(e) => {
                        // Without a guard nobody would renew or release it; free it now rather than at the TTL.
                        let _ = self.release(key, token)$(.$aw)?;
                        Err(e)
                    }
                }
            }

            /// Sends a command that is safe to repeat, and sends it again on a fresh connection while the network
            /// fails (dropped or refused connections: a restarting server does both for a moment) until the command
            /// timeout, counted from the first attempt, runs out. A timeout ends it: the server is not answering.
            $($async)? fn query_retrying<T: FromValue>(&mut self, cmd: &Cmd) -> Result<T> {
                let until = self.opts.command_timeout.map(|t| self.capped(Instant::now() + t)).or(self.hard_deadline);
                loop {
                    match self.call(cmd, Duration::ZERO)$(.$aw)? {
                        Err(e) if e.is_io_error() && !e.is_timeout() && until.is_some_and(|u| Instant::now() + RECONNECT_PAUSE < u) => {
                            Self::pause(RECONNECT_PAUSE)$(.$aw)?;
                        }
                        other => return T::from_value(other?),
                    }
                }
            }
        }
    };
}

pub(crate) use client_methods;

/// The error of a host name that does not resolve.
pub(crate) fn unresolved(host: &str, e: std::io::Error) -> crate::error::Error {
    crate::error::Error::new(crate::error::ErrorKind::InvalidConfig, format!("cannot resolve {host}: {e}"))
}

/// Writes `open` and `set_up` into `impl Connection` of the invoking module, as [`client_methods!`] does for
/// the clients. The module provides `addresses(endpoint, deadline)` (the name lookup; only a timeout ends the
/// attempt, other failures move on to the next endpoint) and `dial(host, addr, opts, deadline)` (the TCP connect, and the
/// TLS handshake when the options ask for TLS).
macro_rules! connection_methods {
    ($($async:ident $aw:ident)?) => {
        impl Connection {
            /// Connects to the first endpoint that answers and runs the handshake, all before `deadline`. With a
            /// Sentinel-protocol lookup (`ClientBuilder::sentinel`) it looks the primary up first, and tries again
            /// (every `RECONNECT_PAUSE`) until `deadline`: nothing was sent to a node yet, so that is always safe.
            pub $($async)? fn open(opts: &ClientBuilder, deadline: Instant) -> Result<Connection> {
                loop {
                    let attempt = if opts.connector.discovers() {
                        deadline.min(Instant::now() + $crate::methods::DISCOVERY_ATTEMPT)
                    } else {
                        deadline
                    };
                    let e = match Self::open_once(opts, attempt)$(.$aw)? {
                        Ok(c) => return Ok(c),
                        Err(e) => e,
                    };
                    opts.connector.rediscover(Hint::Unreachable);
                    if !opts.connector.discovers() || e.is_server_error() || Instant::now() + $crate::methods::RECONNECT_PAUSE >= deadline {
                        return Err(e);
                    }
                    Self::nap($crate::methods::RECONNECT_PAUSE)$(.$aw)?;
                }
            }

            $($async)? fn open_once(opts: &ClientBuilder, deadline: Instant) -> Result<Connection> {
                if let Some((sentinels, name)) = opts.connector.lookup() {
                    let primary = Self::ask_sentinels(opts, &sentinels, &name, deadline)$(.$aw)??;
                    opts.connector.learned(primary);
                }
                let mut last = Error::new(ErrorKind::InvalidConfig, "no address to connect to");
                for endpoint in opts.connector.endpoints() {
                    let addrs = match Self::addresses(&endpoint, deadline)$(.$aw)? {
                        Ok(a) => a,
                        Err(e) if e.is_timeout() => return Err(e),
                        Err(e) => {
                            last = e;
                            continue;
                        }
                    };
                    for addr in addrs {
                        let attempt = match Self::dial(&endpoint.host, addr, opts, deadline)$(.$aw)? {
                            Ok(stream) => Connection::set_up(stream, opts, deadline)$(.$aw)?,
                            Err(e) => Err(e),
                        };
                        match attempt {
                            Ok(c) => return Ok(c),
                            Err(e) if e.is_server_error() => return Err(e),
                            Err(e) => last = e,
                        }
                    }
                }
                Err(last)
            }

            /// Asks the Sentinel-protocol servers, one after the other, where the primary of `name` is.
            $($async)? fn ask_sentinels(opts: &ClientBuilder, sentinels: &[Endpoint], name: &str, deadline: Instant) -> Result<Endpoint> {
                let mut last = Error::new(ErrorKind::InvalidConfig, "no Sentinel-protocol server given");
                for s in sentinels {
                    let limit = deadline.min(Instant::now() + $crate::methods::SENTINEL_ATTEMPT);
                    let addrs = match Self::addresses(s, limit)$(.$aw)? {
                        Ok(a) => a,
                        Err(e) => {
                            last = e;
                            continue;
                        }
                    };
                    for addr in addrs {
                        let stream = match Self::dial(&s.host, addr, opts, limit)$(.$aw)? {
                            Ok(stream) => stream,
                            Err(e) => {
                                last = e;
                                continue;
                            }
                        };
                        let mut conn = Connection { stream, replies: ReplyBuffer::default() };
                        let mut out = BytesMut::new();
                        let mut count = 1;
                        if let Some(pw) = &opts.sentinel_password {
                            $crate::cmd::Cmd::new("AUTH").arg(pw).write_to(&mut out);
                            count += 1;
                        }
                        $crate::cmd::Cmd::new("SENTINEL").arg("get-master-addr-by-name").arg(name).write_to(&mut out);
                        match conn.request(&out, count, Some(limit))$(.$aw)? {
                            Ok(mut replies) => {
                                if let Some(Value::Error(t)) = replies.iter().find(|r| r.is_error()) {
                                    last = Error::server(t);
                                } else if let Some(Value::Array(v)) = replies.pop() {
                                    let text = |v: &Value| v.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned());
                                    if let (Some(host), Some(Ok(port))) = (text(&v[0]), v.get(1).and_then(text).map(|p| p.parse::<u16>())) {
                                        return Ok(Endpoint { host, port });
                                    }
                                    last = Error::new(ErrorKind::Protocol, "unexpected reply to SENTINEL get-master-addr-by-name");
                                } else {
                                    last = Error::new(ErrorKind::Io, format!("{}:{} does not know the master '{name}'", s.host, s.port));
                                }
                            }
                            Err(e) => last = e,
                        }
                        break;
                    }
                }
                Err(last)
            }

            $($async)? fn set_up(stream: Transport, opts: &ClientBuilder, deadline: Instant) -> Result<Connection> {
                let mut conn = Connection { stream, replies: ReplyBuffer::default() };
                let mut handshake = opts.handshake();
                // A node named by a lookup must still be a primary (it may have been demoted since).
                let check_role = opts.connector.discovers();
                if check_role {
                    handshake.push($crate::cmd::Cmd::new("ROLE"));
                }
                if handshake.is_empty() {
                    return Ok(conn);
                }
                let mut out = BytesMut::new();
                for c in &handshake {
                    c.write_to(&mut out);
                }
                let replies = conn.request(&out, handshake.len(), Some(deadline))$(.$aw)?.map_err(|e| match e.kind() {
                    ErrorKind::Timeout => Error::timeout("connect (handshake)"),
                    _ => e,
                })?;
                // Every handshake step must succeed: a wrong password or database must not leave a half-set-up link.
                if let Some(Value::Error(text)) = replies.iter().find(|r| r.is_error()) {
                    return Err(Error::server(text));
                }
                if check_role {
                    let master = matches!(replies.last(), Some(Value::Array(v)) if v.first().and_then(|r| r.as_bytes()) == Some(&b"master"[..]));
                    if !master {
                        return Err(Error::new(ErrorKind::Io, "the node the coordinators named is not a primary (ROLE): looking again"));
                    }
                }
                Ok(conn)
            }
        }
    };
}

pub(crate) use connection_methods;
