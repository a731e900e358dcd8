//! The lock engine: leases, semaphores, fencing tokens and waiters.
//!
//! Lock state lives in the keyspace as [`Data::Lease`](crate::keyspace::Data) and
//! [`Data::Semaphore`](crate::keyspace::Data) values, so TYPE, DEL, TTL and friends see lock keys like any other.
//! This module holds what is not per key: the token sequence ([`tokens`]) and, per key, the queue of waiting
//! clients.

pub mod tokens;

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

pub mod engine;

use std::collections::HashMap;

use crate::keyspace::CompactBytes;
use tokens::TokenIssuer;

/// Counters for INFO's `locks` section.
#[derive(Debug, Default, Clone)]
pub struct LockStats {
    pub grants: u64,
    pub renewals: u64,
    pub releases: u64,
    /// Holders whose TTL ran out while they held the lock.
    pub expirations: u64,
    pub waits: u64,
    pub wait_timeouts: u64,
}

/// Lock bookkeeping that is not stored in keys.
#[derive(Debug)]
pub struct LockState {
    pub tokens: TokenIssuer,
    /// Per database: the highest token each key has seen through IFGT. Kept when the key's value is deleted or
    /// expires (see docs/fencing.md); cleared by FLUSHDB/FLUSHALL.
    fences: Vec<HashMap<CompactBytes, i64>>,
    pub stats: LockStats,
}

impl Default for LockState {
    fn default() -> Self {
        LockState { tokens: TokenIssuer::new(0), fences: Vec::new(), stats: LockStats::default() }
    }
}

impl LockState {
    pub fn fences_mut(&mut self, db: usize) -> &mut HashMap<CompactBytes, i64> {
        if self.fences.len() <= db {
            self.fences.resize_with(db + 1, HashMap::new);
        }
        &mut self.fences[db]
    }
}
