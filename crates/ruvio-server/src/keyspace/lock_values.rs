//! The lock values a key can hold. The keyspace stores them like strings (TYPE, DEL, TTL, SCAN and snapshots treat
//! lock keys like any other); the rules that change them are the lock engine's (`crate::locks::engine`).

/// A single-holder lock. The key's own deadline is the lease's deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub token: i64,
}

/// One holder of a semaphore slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    pub token: i64,
    /// Monotonic deadline in ms.
    pub deadline: u64,
}

/// An N-holder lock; each holder has its own token and deadline. The key's deadline is the latest holder's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semaphore {
    pub limit: u32,
    pub holders: Vec<Holder>,
}
