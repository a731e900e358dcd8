//! Several commands sent in one write, optionally wrapped in MULTI/EXEC.

use bytes::BytesMut;
use ruvio_protocol::Value;

use crate::args::ToArg;
use crate::cmd::Cmd;
use crate::error::{Error, ErrorKind, Result};
use crate::from_value::FromValue;
use crate::Client;

/// Starts an empty pipeline.
pub fn pipe() -> Pipeline {
    Pipeline::new()
}

/// Commands sent together and answered together: one round trip instead of one per command.
///
/// The replies come back as one array, one element per command not marked with [`Pipeline::ignore`], so they
/// convert into a tuple or a `Vec`:
///
/// ```no_run
/// use ruvio_client::{pipe, Client};
///
/// let mut db = Client::connect("127.0.0.1", 6379)?;
/// let (a, b): (i64, Option<String>) = pipe()
///     .cmd("SET").arg("a").arg(1).ignore()
///     .cmd("INCR").arg("a")
///     .cmd("GET").arg("missing")
///     .query(&mut db)?;
/// assert_eq!((a, b), (2, None));
/// # Ok::<(), ruvio_client::Error>(())
/// ```
///
/// With [`Pipeline::atomic`] the commands run as a MULTI/EXEC transaction: all or nothing, nothing from other
/// clients in between. A transaction that a `WATCH` aborted answers nil, so read it as `Option<...>`. In a
/// plain pipeline an error reply to one command does not stop the others; converting to `Vec<Value>` shows
/// every command's own reply, converting to anything else returns the first error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pipeline {
    cmds: Vec<Cmd>,
    ignored: Vec<bool>,
    atomic: bool,
}

impl Pipeline {
    /// An empty, non-atomic pipeline.
    pub fn new() -> Pipeline {
        Pipeline::default()
    }

    /// Wraps the commands in MULTI/EXEC.
    pub fn atomic(mut self) -> Pipeline {
        self.atomic = true;
        self
    }

    /// Adds a command named `name`; the following [`Pipeline::arg`] calls add to it.
    pub fn cmd(self, name: &str) -> Pipeline {
        self.add_command(Cmd::new(name))
    }

    /// Adds a command built elsewhere.
    pub fn add_command(mut self, cmd: Cmd) -> Pipeline {
        self.cmds.push(cmd);
        self.ignored.push(false);
        self
    }

    /// Appends an argument to the last command.
    ///
    /// # Panics
    /// When the pipeline has no command yet.
    pub fn arg(mut self, a: impl ToArg) -> Pipeline {
        let last = self.cmds.pop().expect("Pipeline::arg needs a command first: call cmd()");
        self.cmds.push(last.arg(a));
        self
    }

    /// Leaves the last command's reply out of the result (it must still succeed in an atomic pipeline, where
    /// EXEC reports it).
    pub fn ignore(mut self) -> Pipeline {
        if let Some(last) = self.ignored.last_mut() {
            *last = true;
        }
        self
    }

    /// How many commands were added.
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// True when no command was added.
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// Sends the pipeline on a blocking connection and converts the replies.
    pub fn query<T: FromValue>(&self, client: &mut Client) -> Result<T> {
        client.query_pipeline(self)
    }

    /// Sends the pipeline on an async connection and converts the replies.
    #[cfg(feature = "tokio")]
    pub async fn query_async<T: FromValue>(&self, client: &mut crate::aio::Client) -> Result<T> {
        client.query_pipeline(self).await
    }

    /// The bytes to send and how many replies will answer them.
    pub(crate) fn encode(&self) -> (BytesMut, usize) {
        let mut out = BytesMut::new();
        if self.atomic {
            Cmd::new("MULTI").write_to(&mut out);
        }
        for c in &self.cmds {
            c.write_to(&mut out);
        }
        if self.atomic {
            Cmd::new("EXEC").write_to(&mut out);
            (out, self.cmds.len() + 2)
        } else {
            (out, self.cmds.len())
        }
    }

    /// Turns the raw replies (as many as [`Pipeline::encode`] announced) into the array the caller converts.
    pub(crate) fn assemble(&self, mut replies: Vec<Value>) -> Result<Value> {
        if !self.atomic {
            return self.keep(replies);
        }
        let exec = replies.pop().ok_or_else(|| Error::new(ErrorKind::Protocol, "missing EXEC reply"))?;
        // A command refused at queueing time (syntax, unknown command) aborts the transaction; EXEC says
        // EXECABORT, but the queueing error says why.
        if let Value::Error(text) = &exec {
            let cause = replies.iter().skip(1).find(|r| r.is_error());
            return Err(match cause {
                Some(Value::Error(c)) => Error::server(c),
                _ => Error::server(text),
            });
        }
        if let Some(Value::Error(text)) = replies.first() {
            return Err(Error::server(text));
        }
        match exec {
            Value::Nil | Value::NilArray => Ok(Value::NilArray),
            Value::Array(results) if results.len() == self.cmds.len() => self.keep(results),
            other => Err(Error::new(ErrorKind::Protocol, format!("unexpected EXEC reply {other:?}"))),
        }
    }

    /// The replies of the commands not ignored; an ignored command's error is still reported.
    fn keep(&self, replies: Vec<Value>) -> Result<Value> {
        let mut kept = Vec::with_capacity(replies.len());
        for (reply, ignored) in replies.into_iter().zip(&self.ignored) {
            match (reply, ignored) {
                (Value::Error(text), true) => return Err(Error::server(&text)),
                (_, true) => {}
                (reply, false) => kept.push(reply),
            }
        }
        Ok(Value::Array(kept))
    }
}
