//! The lock engine: leases, semaphores, fencing tokens and waiters.
//!
//! Lock state lives in the keyspace as [`Data::Lease`](crate::keyspace::Data) and
//! [`Data::Semaphore`](crate::keyspace::Data) values, so TYPE, DEL, TTL and friends see lock keys like any other.
//! This module holds the rules ([`engine`]) and what is not per key: the token sequence ([`tokens`]) and, per key,
//! the queue of waiting clients. The lock values themselves belong to the keyspace (`keyspace::lock_values`).

pub mod tokens;

pub mod engine;
pub mod records;
pub mod replay;

use std::collections::{BTreeSet, HashMap, VecDeque};

use ruvio_protocol::Value;
use tokio::sync::oneshot;

use crate::keyspace::CompactBytes;
use tokens::TokenIssuer;

/// What a waiting client asked for; it is granted exactly what the same command would get at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Lease,
    Semaphore { limit: u32 },
}

/// A client blocked in `LEASE ... WAIT` or `SEMAPHORE ... WAIT`.
#[derive(Debug)]
pub struct Waiter {
    pub id: u64,
    pub want: Want,
    pub ttl_ms: u64,
    /// Closed when the client gave up (timeout, disconnect): such a waiter is skipped, never granted.
    pub reply: oneshot::Sender<Value>,
    /// Who is waiting, remembered with the grant (LOCKS); `None` for callers that are not client connections.
    pub who: Option<Grantee>,
    /// When it started waiting (monotonic ms), for the wait-time histogram.
    pub since: u64,
}

/// The client a token was granted to, as its connection was at grant time: what LOCKS shows beside each holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grantee {
    pub client_id: u64,
    /// CLIENT SETNAME's name (empty: none).
    pub name: bytes::Bytes,
    pub addr: String,
}

/// A grant this node made to a client: which lock, to whom, when (Unix ms).
#[derive(Debug)]
pub struct Grant {
    pub db: usize,
    pub key: CompactBytes,
    pub who: Grantee,
    pub wall_ms: i64,
}

/// What happened to a holder, for the /locks page's recent events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Granted,
    Released,
    Expired,
    /// DEL or UNLINK removed the lock from under its holder.
    Deleted,
}

impl EventKind {
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Granted => "granted",
            EventKind::Released => "released",
            EventKind::Expired => "expired",
            EventKind::Deleted => "deleted",
        }
    }
}

/// One grant or loss, kept in [`LockState::recent`].
#[derive(Debug, Clone)]
pub struct LockEvent {
    /// Unix ms.
    pub wall_ms: i64,
    pub db: usize,
    pub key: bytes::Bytes,
    pub kind: &'static str,
    pub token: i64,
    pub what: EventKind,
    /// Whom this node granted the token to, when it did.
    pub who: Option<Grantee>,
}

/// How many recent grants and losses the /locks page can show: a fixed ring, so lock traffic cannot grow it.
pub const RECENT_EVENTS: usize = 64;

/// Counters for INFO's `locks` section.
#[derive(Debug, Default, Clone)]
pub struct LockStats {
    pub grants: u64,
    pub renewals: u64,
    pub releases: u64,
    /// Holders whose TTL ran out while they held the lock.
    pub expirations: u64,
    pub waits: u64,
    /// Waits that ended without a grant (timeout or the client left).
    pub wait_timeouts: u64,
    /// The same events by kind (index [`Want::kind_index`]: 0 lease, 1 semaphore), for the metrics endpoint.
    pub by_kind: [KindCounts; 2],
    /// How long granted waiters waited, ms: counts per bucket of [`WAIT_BUCKETS_MS`] (the last is +Inf), and the sum.
    pub wait_ms_buckets: [u64; WAIT_BUCKETS_MS.len() + 1],
    pub wait_ms_sum: u64,
}

/// Upper bounds (ms) of the lock wait-time histogram.
pub const WAIT_BUCKETS_MS: [u64; 10] = [1, 5, 10, 50, 100, 500, 1000, 5000, 10_000, 60_000];

/// Lock events of one kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct KindCounts {
    pub grants: u64,
    pub renewals: u64,
    pub releases: u64,
    pub waits: u64,
}

impl Want {
    /// 0 for a lease, 1 for a semaphore (`LockStats::by_kind`).
    pub fn kind_index(self) -> usize {
        match self {
            Want::Lease => 0,
            Want::Semaphore { .. } => 1,
        }
    }
}

impl LockStats {
    /// A waiter was granted after waiting `ms`.
    pub fn observe_wait(&mut self, ms: u64) {
        let i = WAIT_BUCKETS_MS.iter().position(|b| ms <= *b).unwrap_or(WAIT_BUCKETS_MS.len());
        self.wait_ms_buckets[i] += 1;
        self.wait_ms_sum += ms;
    }
}

/// Lock bookkeeping that is not stored in keys.
#[derive(Debug)]
pub struct LockState {
    pub tokens: TokenIssuer,
    /// Per database: the highest token each key has seen through IFGT. Kept when the key's value is deleted or
    /// expires (see docs/fencing.md); cleared by FLUSHDB/FLUSHALL.
    fences: Vec<HashMap<CompactBytes, i64>>,
    pub stats: LockStats,
    /// Per database: waiting clients per key, in arrival order.
    waiters: Vec<HashMap<CompactBytes, VecDeque<Waiter>>>,
    next_waiter_id: u64,
    /// Every holder deadline (monotonic ms) the lock timer must act on. Entries may be stale (released, renewed,
    /// deleted); the timer re-checks the key, so only a missing entry would be a bug.
    pub timers: BTreeSet<(u64, usize, CompactBytes)>,
    /// Set when a deadline earlier than every other was added: the timer task must be woken to sleep less.
    pub wake_timer: bool,
    /// Keys whose lock went away or lost a holder while clients wait on them; served once the write that caused it
    /// is in the log, so a grant is always logged after the write that made room for it.
    pub pending: Vec<(usize, CompactBytes)>,
    /// The engine's changes as the records that replay them (`records.rs`), in the order made; `Store::settle`
    /// logs them, as it logs the keyspace's expiries.
    pub changes: Vec<LockChange>,
    /// Per token: the client this node granted it to and when (LOCKS). Not logged nor replicated (a replica or a
    /// restarted server shows no identity for holders it did not grant); entries whose holder is gone are pruned
    /// once the map doubles (`engine::note_grant`), so it stays within twice the live holders (or 1024).
    pub grants: HashMap<i64, Grant>,
    pub grants_prune_at: usize,
    /// The last [`RECENT_EVENTS`] grants and losses (release, expiry, DEL) this node made, newest last (the /locks page).
    /// Not logged nor replicated: a replica shows only what it applied itself.
    pub recent: VecDeque<LockEvent>,
}

/// One change the lock engine made: its record, database and instant (Unix ms).
#[derive(Debug)]
pub struct LockChange {
    pub db: usize,
    pub record: Vec<bytes::Bytes>,
    pub wall_ms: i64,
}

impl Default for LockState {
    fn default() -> Self {
        LockState {
            tokens: TokenIssuer::new(0),
            fences: Vec::new(),
            stats: LockStats::default(),
            waiters: Vec::new(),
            next_waiter_id: 1,
            timers: BTreeSet::new(),
            wake_timer: false,
            pending: Vec::new(),
            changes: Vec::new(),
            grants: HashMap::new(),
            grants_prune_at: 1024,
            recent: VecDeque::with_capacity(RECENT_EVENTS),
        }
    }
}

impl LockState {
    /// Remembers a grant or a loss for the /locks page (a bounded ring); a loss names whom the token was granted to.
    pub fn note_event(&mut self, db: usize, key: &[u8], kind: &'static str, token: i64, what: EventKind) {
        if self.recent.len() == RECENT_EVENTS {
            self.recent.pop_front();
        }
        let who = self.grants.get(&token).filter(|g| g.db == db && &*g.key == key).map(|g| g.who.clone());
        self.recent.push_back(LockEvent { wall_ms: crate::clock::wall_ms(), db, key: bytes::Bytes::copy_from_slice(key), kind, token, what, who });
    }

    /// A lock key went away (expired, deleted, flushed): its waiters are served once the write that removed it is
    /// in the log (see `engine::after_command`).
    pub fn key_gone(&mut self, db: usize, key: &[u8]) {
        if self.has_waiters(db, key) {
            self.pending.push((db, CompactBytes::new(key)));
        }
    }

    /// Removes every waiter of every key (oldest first per key).
    pub fn take_all_waiters(&mut self) -> Vec<Waiter> {
        self.waiters.iter_mut().flat_map(|m| m.drain().flat_map(|(_, q)| q)).collect()
    }

    /// Every database's fences (index = database), for snapshots.
    pub fn fences(&self) -> &[HashMap<CompactBytes, i64>] {
        &self.fences
    }

    pub fn fences_mut(&mut self, db: usize) -> &mut HashMap<CompactBytes, i64> {
        if self.fences.len() <= db {
            self.fences.resize_with(db + 1, HashMap::new);
        }
        &mut self.fences[db]
    }

    pub fn fence(&self, db: usize, key: &[u8]) -> Option<i64> {
        self.fences.get(db).and_then(|f| f.get(key).copied())
    }

    pub fn waiters_mut(&mut self, db: usize) -> &mut HashMap<CompactBytes, VecDeque<Waiter>> {
        if self.waiters.len() <= db {
            self.waiters.resize_with(db + 1, HashMap::new);
        }
        &mut self.waiters[db]
    }

    /// Waiters of `key` whose clients are still there.
    pub fn live_waiters(&self, db: usize, key: &[u8]) -> usize {
        if !self.any_waiters() {
            return 0;
        }
        self.waiters.get(db).and_then(|w| w.get(key)).map_or(0, |q| q.iter().filter(|w| !w.reply.is_closed()).count())
    }

    pub fn total_live_waiters(&self) -> usize {
        self.waiters.iter().flat_map(|m| m.values()).flatten().filter(|w| !w.reply.is_closed()).count()
    }

    pub fn any_waiters(&self) -> bool {
        self.waiters.iter().any(|m| !m.is_empty())
    }

    pub fn has_waiters(&self, db: usize, key: &[u8]) -> bool {
        self.waiters.get(db).is_some_and(|w| w.contains_key(key))
    }

    pub fn next_waiter_id(&mut self) -> u64 {
        self.next_waiter_id += 1;
        self.next_waiter_id
    }

    /// Schedules the lock timer for `deadline`.
    pub fn arm(&mut self, deadline: u64, db: usize, key: &[u8]) {
        if self.timers.first().is_none_or(|first| deadline < first.0) {
            self.wake_timer = true;
        }
        self.timers.insert((deadline, db, CompactBytes::new(key)));
    }

    /// Forgets a deadline that no longer applies (renewed or released), so the timer set does not grow with renewals.
    pub fn disarm(&mut self, deadline: u64, db: usize, key: &[u8]) {
        self.timers.remove(&(deadline, db, CompactBytes::new(key)));
    }

    /// SWAPDB `a` `b`: deadlines follow their keys to the other index; waiters stay on the index they selected (as
    /// clients do) and are served against what it holds now (a lock that moved away frees their key).
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        let swapped = |d: usize| if d == a { b } else if d == b { a } else { d };
        self.timers = std::mem::take(&mut self.timers).into_iter().map(|(t, d, k)| (t, swapped(d), k)).collect();
        for d in [a, b] {
            let keys: Vec<CompactBytes> = self.waiters.get(d).map(|w| w.keys().cloned().collect()).unwrap_or_default();
            self.pending.extend(keys.into_iter().map(|k| (d, k)));
        }
    }

    /// Forgets every deadline of database `db` (FLUSHDB/FLUSHALL removed all its locks).
    pub fn disarm_db(&mut self, db: usize) {
        self.timers.retain(|t| t.1 != db);
    }
}
