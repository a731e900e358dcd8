//! Where connections go: a fixed address, or the primary that Sentinel-protocol servers (`ruvio coordinator`s or
//! redis-sentinels) name.
//!
//! Every connection (the first one, each reconnect, a lock guard's renewal connection) asks the [`Connector`]
//! for addresses, and tells it when the node it reached turned out to be the wrong one (`-READONLY`: a replica)
//! or unreachable. The Sentinel connector then forgets the primary it knew, and the next connection asks the
//! coordinators again (`SENTINEL get-master-addr-by-name`); callers of [`Client`](crate::Client) see no
//! difference.

use std::fmt::Debug;
use std::sync::Mutex;

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
    /// When the primary must be looked up first: the Sentinel-protocol servers to ask, and the group's name.
    fn lookup(&self) -> Option<(Vec<Endpoint>, String)> {
        None
    }
    /// The primary a lookup found.
    fn learned(&self, _primary: Endpoint) {}
    /// True when addresses come from a lookup: a new connection checks that the node is a primary (`ROLE`), and
    /// opening one keeps looking up until its deadline (a failover in progress).
    fn discovers(&self) -> bool {
        false
    }
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

/// The primary of a group, as Sentinel-protocol servers name it; looked up again after any hint.
#[derive(Debug)]
pub(crate) struct SentinelConnector {
    pub sentinels: Vec<Endpoint>,
    pub master_name: String,
    pub primary: Mutex<Option<Endpoint>>,
}

impl Connector for SentinelConnector {
    fn endpoints(&self) -> Vec<Endpoint> {
        self.primary.lock().unwrap().clone().into_iter().collect()
    }

    fn rediscover(&self, _hint: Hint) {
        *self.primary.lock().unwrap() = None;
    }

    fn lookup(&self) -> Option<(Vec<Endpoint>, String)> {
        self.primary.lock().unwrap().is_none().then(|| (self.sentinels.clone(), self.master_name.clone()))
    }

    fn learned(&self, primary: Endpoint) {
        *self.primary.lock().unwrap() = Some(primary);
    }

    fn discovers(&self) -> bool {
        true
    }
}
