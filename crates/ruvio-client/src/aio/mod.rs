//! The async client, on tokio (cargo feature `tokio`): the same methods as the blocking
//! [`Client`](crate::Client), as `async fn`s.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ruvio_client::Error> {
//! use ruvio_client::aio::Client;
//!
//! let mut db = Client::connect("127.0.0.1", 6379).await?;
//! if let Some(token) = db.lease("job:nightly-report", 30_000).await? {
//!     db.release("job:nightly-report", token).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! Timeouts, reconnects, retries and `-READONLY` handling are those of the blocking client. Dropping a call's
//! future mid-way (for example in `tokio::select!`) leaves the connection in an unknown state, so the client
//! closes it and the next call reconnects.

mod client;
mod connection;
mod guard;

pub use client::Client;
pub use guard::LockGuard;
