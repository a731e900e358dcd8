//! Where connections go. Today a fixed address; later the coordinator, which names the current primary.
//!
//! Every connection (the first one, each reconnect, a lock guard's renewal connection) asks the [`Connector`]
//! for addresses, and tells it when the node it reached turned out to be the wrong one (`-READONLY`: a replica)
//! or unreachable. A coordinator-backed connector will re-ask the coordinator on those hints; callers of
//! [`Client`](crate::Client) see no difference, so discovery slots in without changing the public API.

use std::fmt::Debug;

/// A host and port to try, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub host: String,
    pub port: u16,
}

/// Why a connection asks its connector to look again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hint {
    /// The node answered `-READONLY`: it is a replica now.
    ReadOnly,
    /// The node could not be reached or dropped the connection.
    Unreachable,
}

/// Names the node that should get the next connection.
pub(crate) trait Connector: Send + Sync + Debug {
    /// Addresses to try for the next connection, best first.
    fn endpoints(&self) -> Vec<Endpoint>;
    /// A hint that the last answer of [`Connector::endpoints`] may be stale.
    fn rediscover(&self, hint: Hint);
}

/// One address given by the user, always the same.
#[derive(Debug)]
pub(crate) struct FixedEndpoint(pub Endpoint);

impl Connector for FixedEndpoint {
    fn endpoints(&self) -> Vec<Endpoint> {
        vec![self.0.clone()]
    }

    fn rediscover(&self, _hint: Hint) {
        // A fixed address has nothing to look up; reconnecting to it is all that can be done.
    }
}
