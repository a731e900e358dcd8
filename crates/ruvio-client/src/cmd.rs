//! One command, built argument by argument, for anything the typed methods do not cover.

use bytes::{Bytes, BytesMut};
use ruvio_protocol::encode_command;
use ruvio_protocol::lock_args::LockCommand;

use crate::args::ToArg;
use crate::error::Result;
use crate::from_value::FromValue;
use crate::Client;

/// Starts a command: `cmd("SET").arg("k").arg(1).query::<()>(&mut client)`.
pub fn cmd(name: &str) -> Cmd {
    Cmd::new(name)
}

/// A command with its arguments, not yet sent.
///
/// ```no_run
/// use ruvio_client::{cmd, Client};
///
/// let mut db = Client::connect("127.0.0.1", 6379)?;
/// cmd("SET").arg("visits").arg(0).query::<()>(&mut db)?;
/// let n: i64 = cmd("INCRBY").arg("visits").arg(5).query(&mut db)?;
/// assert_eq!(n, 5);
/// # Ok::<(), ruvio_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    args: Vec<Bytes>,
}

impl Cmd {
    /// A command named `name`, without arguments yet.
    pub fn new(name: &str) -> Cmd {
        Cmd { args: vec![Bytes::copy_from_slice(name.as_bytes())] }
    }

    /// A lock command from its typed arguments.
    pub(crate) fn lock(command: &impl LockCommand) -> Cmd {
        Cmd { args: command.to_args() }
    }

    pub(crate) fn from_parts(name: Bytes, rest: impl Iterator<Item = Bytes>) -> Cmd {
        Cmd { args: std::iter::once(name).chain(rest).collect() }
    }

    /// Appends one argument.
    pub fn arg(mut self, a: impl ToArg) -> Cmd {
        self.args.push(a.to_arg());
        self
    }

    /// Appends each item as one argument.
    pub fn args<A: ToArg>(mut self, items: impl IntoIterator<Item = A>) -> Cmd {
        self.args.extend(items.into_iter().map(|a| a.to_arg()));
        self
    }

    /// The name followed by the arguments, as sent.
    pub fn parts(&self) -> &[Bytes] {
        &self.args
    }

    pub(crate) fn write_to(&self, out: &mut BytesMut) {
        encode_command(&self.args, out);
    }

    /// Sends the command on a blocking connection and converts the reply.
    pub fn query<T: FromValue>(&self, client: &mut Client) -> Result<T> {
        client.query(self)
    }

    /// Sends the command on an async connection and converts the reply.
    #[cfg(feature = "tokio")]
    pub async fn query_async<T: FromValue>(&self, client: &mut crate::aio::Client) -> Result<T> {
        client.query(self).await
    }
}
