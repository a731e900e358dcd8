#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod args;
mod client;
mod cmd;
mod connection;
mod endpoint;
mod error;
mod from_value;
mod guard;
mod lock_commands;
mod lock_info;
mod lock_options;
mod methods;
mod options;
mod pipeline;
mod renewal;
mod reply_buffer;
#[cfg(feature = "tls")]
mod tls;

#[cfg(feature = "tokio")]
pub mod aio;

pub use args::{ToArg, TokenArg};
pub use client::Client;
pub use cmd::{cmd, Cmd};
pub use error::{Error, ErrorKind, Result};
pub use from_value::FromValue;
pub use guard::{LockGuard, LossSignal};
pub use lock_info::{ListedHolder, ListedLock, LockHolder, LockInfo, LockKind, LocksPage};
pub use lock_options::{LockOptions, LossReason};
pub use options::{ClientBuilder, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT};
pub use pipeline::{pipe, Pipeline};
pub use ruvio_protocol::{Protocol, Value};
#[cfg(feature = "tls")]
pub use tls::{TlsBuilder, TlsConfig};
/// The rustls this crate uses (feature `tls`), for [`TlsConfig::from_rustls`].
#[cfg(feature = "tls")]
pub use ruvio_tls::rustls;

/// A fencing token: a positive signed 64-bit integer that grows with every grant of the server.
pub type Token = i64;
