//! Connection options and the builder that carries them.

use std::sync::Arc;
use std::time::Duration;

use ruvio_protocol::Protocol;

use crate::cmd::Cmd;
use crate::endpoint::{Connector, Endpoint, FixedEndpoint, SentinelConnector};
use crate::error::Result;
use crate::Client;

/// The connect timeout used unless [`ClientBuilder::connect_timeout`] says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The command timeout used unless [`ClientBuilder::command_timeout`] says otherwise.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Options for a connection, set step by step:
///
/// ```no_run
/// use std::time::Duration;
/// use ruvio_client::{Client, Protocol};
///
/// let mut db = Client::builder("127.0.0.1", 6379)
///     .password("s3cret")
///     .db(2)
///     .client_name("billing-worker")
///     .connect_timeout(Duration::from_secs(1))
///     .command_timeout(Some(Duration::from_secs(2)))
///     .protocol(Protocol::Resp3)
///     .connect()?;
/// # Ok::<(), ruvio_client::Error>(())
/// ```
///
/// The same options serve every connection made from them: reconnects after a failure and the renewal
/// connection of a [`LockGuard`](crate::LockGuard).
#[derive(Clone)]
pub struct ClientBuilder {
    pub(crate) connector: Arc<dyn Connector>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: u32,
    pub(crate) client_name: Option<String>,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Option<Duration>,
    pub(crate) protocol: Protocol,
    pub(crate) sentinel_password: Option<String>,
    pub(crate) durability_replicas: Option<u32>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<crate::TlsConfig>,
}

/// Written without the password, so that logging a client or its options cannot leak it.
impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("endpoints", &self.connector)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("db", &self.db)
            .field("client_name", &self.client_name)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("protocol", &self.protocol)
            .field("durability_replicas", &self.durability_replicas)
            .field("tls", &self.tls_enabled())
            .field("sentinel_password", &self.sentinel_password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl ClientBuilder {
    /// Options for the server at `host:port`, with the defaults: no password, database 0, no name, RESP2,
    /// [`DEFAULT_CONNECT_TIMEOUT`] and [`DEFAULT_COMMAND_TIMEOUT`].
    pub fn new(host: impl Into<String>, port: u16) -> ClientBuilder {
        ClientBuilder {
            connector: Arc::new(FixedEndpoint(Endpoint { host: host.into(), port })),
            username: None,
            password: None,
            db: 0,
            client_name: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: Some(DEFAULT_COMMAND_TIMEOUT),
            protocol: Protocol::Resp2,
            sentinel_password: None,
            durability_replicas: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Options for the primary of the group `master_name`, found through Sentinel-protocol servers: `ruvio
    /// coordinator`s (or redis-sentinels). Each new connection asks them, one after the other,
    /// `SENTINEL get-master-addr-by-name master_name`, connects to the node named and checks with `ROLE` that it
    /// is a primary. The address is kept for the following reconnects and forgotten after a `-READONLY` reply or
    /// a failed connection, so that a failover is followed. Opening a connection keeps asking (every 50 ms) until
    /// the connect timeout passes, which rides out a failover in progress; nothing is sent to a node before that,
    /// so this is safe for every command. A command that was sent when its connection failed is still never
    /// repeated (see [`Client`]).
    ///
    /// ```no_run
    /// use ruvio_client::ClientBuilder;
    ///
    /// let coordinators = [("127.0.0.1", 26379), ("127.0.0.1", 26380), ("127.0.0.1", 26381)];
    /// let mut db = ClientBuilder::sentinel(coordinators, "mymaster").connect()?;
    /// let token = db.lease("job:nightly-report", 30_000)?;
    /// # Ok::<(), ruvio_client::Error>(())
    /// ```
    pub fn sentinel<H: Into<String>>(sentinels: impl IntoIterator<Item = (H, u16)>, master_name: impl Into<String>) -> ClientBuilder {
        let mut b = ClientBuilder::new("", 0);
        b.connector = Arc::new(SentinelConnector {
            sentinels: sentinels.into_iter().map(|(h, p)| Endpoint { host: h.into(), port: p }).collect(),
            master_name: master_name.into(),
            primary: Default::default(),
        });
        b
    }

    /// The password the Sentinel-protocol servers ask for (`AUTH`), when it differs from the nodes' (none by
    /// default). Only used with [`ClientBuilder::sentinel`].
    pub fn sentinel_password(mut self, password: impl Into<String>) -> Self {
        self.sentinel_password = Some(password.into());
        self
    }

    /// The password to authenticate with (`AUTH`, or `HELLO ... AUTH` on RESP3).
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// The user name to authenticate as; without one the server's `default` user is meant. Only used together
    /// with [`ClientBuilder::password`].
    pub fn username(mut self, username: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self
    }

    /// The database to `SELECT` after connecting (default 0).
    pub fn db(mut self, db: u32) -> Self {
        self.db = db;
        self
    }

    /// The connection name (`CLIENT SETNAME`), shown by `CLIENT LIST`.
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// How long opening a connection may take in all: the TCP connect plus the handshake (`HELLO`, `AUTH`,
    /// `SELECT`). A server that accepts but does not answer (paused, overloaded) fails within this time.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one command (or one pipeline) may wait for its reply; `None` waits forever, which lets a paused
    /// server hang the caller and is not recommended. The waiting forms of `LEASE` and `SEMAPHORE` get their
    /// wait time on top of this.
    pub fn command_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// The protocol version: RESP2 (the default, understood by every Redis-protocol server) or RESP3 (negotiated
    /// with `HELLO 3`; replies keep their maps, doubles and booleans).
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Sends `CLIENT DURABILITY REPLICAS n` on every connection (each reconnect included): every write, lock
    /// grants included, is answered once `n` replicas hold it on disk (Ruvio only; see docs/replication.md). A
    /// failover by `ruvio coordinator` keeps every write answered this way.
    pub fn durability_replicas(mut self, n: u32) -> Self {
        self.durability_replicas = Some(n);
        self
    }

    /// Connects with TLS (feature `tls`): to the server's `tls-port`, trusting and presenting what `tls` says.
    /// With [`ClientBuilder::sentinel`] the coordinators are reached over TLS too (their `tls-port`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: crate::TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    fn tls_enabled(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// Opens a blocking connection with these options.
    pub fn connect(self) -> Result<Client> {
        Client::with_options(self)
    }

    /// Opens an async connection with these options.
    #[cfg(feature = "tokio")]
    pub async fn connect_async(self) -> Result<crate::aio::Client> {
        crate::aio::Client::with_options(self).await
    }

    /// The commands that set a new connection up, in order, each answered by one reply.
    pub(crate) fn handshake(&self) -> Vec<Cmd> {
        let mut cmds = Vec::new();
        let user = self.username.clone().unwrap_or_else(|| "default".to_string());
        match self.protocol {
            Protocol::Resp3 => {
                let mut hello = Cmd::new("HELLO").arg("3");
                if let Some(pw) = &self.password {
                    hello = hello.arg("AUTH").arg(&user).arg(pw);
                }
                if let Some(name) = &self.client_name {
                    hello = hello.arg("SETNAME").arg(name);
                }
                cmds.push(hello);
            }
            Protocol::Resp2 => {
                if let Some(pw) = &self.password {
                    // The one-argument form also works on servers that predate users (Redis < 6).
                    cmds.push(match &self.username {
                        Some(u) => Cmd::new("AUTH").arg(u).arg(pw),
                        None => Cmd::new("AUTH").arg(pw),
                    });
                }
                if let Some(name) = &self.client_name {
                    cmds.push(Cmd::new("CLIENT").arg("SETNAME").arg(name));
                }
            }
        }
        if self.db != 0 {
            cmds.push(Cmd::new("SELECT").arg(self.db));
        }
        if let Some(n) = self.durability_replicas {
            cmds.push(Cmd::new("CLIENT").arg("DURABILITY").arg("REPLICAS").arg(n));
        }
        cmds
    }
}
