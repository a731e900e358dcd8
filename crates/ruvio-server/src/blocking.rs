//! A reply that has to wait: LEASE ... WAIT, a script run off the I/O thread, a durable write waiting for its
//! acknowledgements. The connection waits for it without holding any lock.

use std::time::Duration;

use ruvio_protocol::Value;

use crate::store::Store;

/// A command that has to wait returns a placeholder reply and this (`Ctx::block` for a handler); the connection then
/// waits for `rx` (or the timeout) without holding any lock.
pub struct Block {
    pub rx: tokio::sync::oneshot::Receiver<Value>,
    pub timeout: Option<Duration>,
    /// Runs under the store lock when the wait ends without a value (timeout or shutdown): withdraws the waiter.
    pub cancel: Box<dyn FnOnce(&mut Store) + Send>,
    /// Runs under the store lock when a value arrived but the client is gone (it disconnected or was killed while
    /// waiting), with that value: gives back what was granted to nobody.
    pub abandon: Option<Box<dyn FnOnce(&mut Store, Value) + Send>>,
    /// The reply when the wait times out.
    pub timeout_reply: Value,
}
