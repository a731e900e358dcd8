//! Everything commands read and write under the one store lock: the databases, the lock engine's state and the
//! write log buffer. Commands see a consistent state because they run while holding this lock; MULTI/EXEC and
//! multi-key commands are atomic for the same reason.

use bytes::Bytes;

use crate::keyspace::{CompactBytes, Db};
use crate::locks::LockState;

/// One write, as it goes to the append-only log (and later to replicas): the database it applies to and a
/// command that replays it deterministically (relative times already turned into absolute ones).
#[derive(Debug, Clone)]
pub struct LogRecord {
    pub db: usize,
    pub args: Vec<Bytes>,
    /// The instant the write ran (Unix ms): a replay runs it at this instant again, so whatever it decided by time
    /// (an expired key, a holder whose TTL ran out) comes out the same.
    pub wall_ms: i64,
}

/// What a client blocked on keys (BLPOP, BLMOVE, BZPOPMIN, ...) does when one of them gets data.
#[derive(Debug, Clone)]
pub enum WaitOp {
    /// BLPOP/BRPOP (`count` None) and BLMPOP (`count` Some): pop from the `right` end or the left.
    ListPop { right: bool, count: Option<usize> },
    /// BLMOVE and BRPOPLPUSH: move one element to `dst`.
    ListMove { dst: Bytes, from_right: bool, to_right: bool },
    /// BZPOPMIN/BZPOPMAX (`count` None) and BZMPOP (`count` Some).
    ZPop { max: bool, count: Option<usize> },
}

/// A client blocked on keys, served first come first served per key (`commands/blocking_family.rs`).
pub struct KeyWaiter {
    pub db: usize,
    pub keys: Vec<Bytes>,
    pub op: WaitOp,
    pub resp3: bool,
    pub tx: tokio::sync::oneshot::Sender<ruvio_protocol::Value>,
    /// On a durable connection (`CLIENT DURABILITY REPLICAS n`): n, and where to note that a pop made for it was
    /// logged, so the connection holds the reply back until n replicas have it, like any durable write.
    pub durable: Option<(usize, std::sync::Arc<crate::client::ClientInfo>)>,
}

/// Clients blocked on keys, and keys that may have data for them since the last look.
#[derive(Default)]
pub struct KeyWaiters {
    pub by_id: std::collections::HashMap<u64, KeyWaiter>,
    /// (db, key) -> waiter ids in arrival order.
    pub queues: std::collections::HashMap<(usize, Bytes), std::collections::VecDeque<u64>>,
    /// Keys written since the waiters were last served, to look at after the command (or transaction, or script).
    pub ready: Vec<(usize, Bytes)>,
    pub next_id: u64,
}

impl KeyWaiters {
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
    pub fn add(&mut self, w: KeyWaiter) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        for k in &w.keys {
            self.queues.entry((w.db, k.clone())).or_default().push_back(id);
        }
        self.by_id.insert(id, w);
        id
    }
    /// Withdraws a waiter (served, timed out or gone).
    pub fn remove(&mut self, id: u64) -> Option<KeyWaiter> {
        let w = self.by_id.remove(&id)?;
        for k in &w.keys {
            let slot = (w.db, k.clone());
            if let Some(q) = self.queues.get_mut(&slot) {
                q.retain(|x| *x != id);
                if q.is_empty() {
                    self.queues.remove(&slot);
                }
            }
        }
        Some(w)
    }
    /// Notes that every key waited for in database `db` may have changed (SWAPDB replaced the whole database).
    pub fn touched_db(&mut self, db: usize) {
        let keys: Vec<(usize, Bytes)> = self.queues.keys().filter(|(d, _)| *d == db).cloned().collect();
        self.ready.extend(keys);
    }
    /// Notes that `key` was written, if anyone waits for it.
    pub fn touched(&mut self, db: usize, key: &[u8]) {
        if !self.queues.is_empty() && self.queues.contains_key(&(db, Bytes::copy_from_slice(key))) {
            self.ready.push((db, Bytes::copy_from_slice(key)));
        }
    }
}

pub struct Store {
    pub dbs: Vec<Db>,
    pub locks: LockState,
    /// Writes not yet taken by persistence, in execution order.
    pub log: Vec<LogRecord>,
    /// Whether anything consumes `log` (persistence, replication). When nothing does, records are not kept:
    /// an unconsumed log would grow without bound.
    pub log_enabled: bool,
    /// The instant (monotonic ms) of the command or event running now, set by whoever runs it ([`Store::set_now`]);
    /// the records it logs carry it. 0: not set (the wall clock is read instead).
    now: u64,
    /// `now` as Unix ms, converted once when `now` is set (not per record: the conversion reads both clocks).
    now_wall: i64,
    /// This node is a replica: its primary's records decide every change, expiries and lock ends included.
    pub replica: bool,
    /// Keys removed because their deadline passed, found on access, by active expiry or by the lock timer
    /// (INFO `expired_keys`).
    pub expired_keys: u64,
    /// Clients blocked on list and sorted-set keys.
    pub waiters: KeyWaiters,
    /// Keys expired since the last look, kept only while keyspace notifications of expiries are on (Some).
    pub expired_notices: Option<Vec<(usize, CompactBytes)>>,
    /// What every database of `dbs` counts together (changes, pending expiry events).
    totals: std::sync::Arc<crate::keyspace::Totals>,
}

impl Store {
    pub fn new(databases: usize) -> Self {
        // The databases count their changes and events together, so the store reads them without visiting each.
        let totals = std::sync::Arc::new(crate::keyspace::Totals::default());
        let dbs = (0..databases)
            .map(|_| {
                let mut db = Db::new();
                db.share_totals(totals.clone());
                db
            })
            .collect();
        Store { dbs, totals, locks: LockState::default(), log: Vec::new(), log_enabled: false, now: 0, now_wall: 0, replica: false, expired_keys: 0, waiters: KeyWaiters::default(), expired_notices: None }
    }

    /// Who removes expired keys in every database (see [`crate::keyspace::Expiry`]).
    pub fn set_expiry(&mut self, expiry: crate::keyspace::Expiry) {
        for db in &mut self.dbs {
            db.set_expiry(expiry);
        }
    }

    /// Changes made to the data so far, counted by the keyspace's mutators (INFO `rdb_changes_since_last_save`; a
    /// write command is logged when it moved this).
    pub fn changes(&self) -> u64 {
        // The sum of every database's count, kept as they count (it ran after every write command, twice).
        self.totals.changes()
    }

    /// The instant of the command or event about to run (monotonic ms): what it logs carries it.
    pub fn set_now(&mut self, now: u64) {
        if self.now != now {
            self.now = now;
            self.now_wall = crate::clock::mono_to_wall(now);
        }
    }

    /// Appends a record to the write log.
    pub fn log(&mut self, db: usize, args: Vec<Bytes>) {
        if self.log_enabled {
            let wall_ms = self.wall_now();
            self.log.push(LogRecord { db, args, wall_ms });
        }
    }

    /// The instant what is logged now carries (Unix ms): the running command's or event's.
    pub fn wall_now(&self) -> i64 {
        if self.now == 0 {
            crate::clock::wall_ms()
        } else {
            self.now_wall
        }
    }

    /// Makes the records staged from `start` on replay all or none (a transaction's or a script's effects): wrapped
    /// in MULTI ... EXEC when there is more than one, with a SELECT record where they move between databases. The
    /// MULTI and EXEC records carry the first record's database: queued commands run in the database EXEC runs in.
    pub fn wrap_atomic(&mut self, start: usize) {
        if self.log.len() <= start + 1 {
            return;
        }
        let records: Vec<LogRecord> = self.log.drain(start..).collect();
        let (first_db, wall_ms) = (records[0].db, records[0].wall_ms);
        self.log.push(LogRecord { db: first_db, args: vec![Bytes::from_static(b"MULTI")], wall_ms });
        let mut current = first_db;
        for r in records {
            if r.db != current {
                self.log.push(LogRecord { db: r.db, args: vec![Bytes::from_static(b"SELECT"), Bytes::from(r.db.to_string())], wall_ms: r.wall_ms });
                current = r.db;
            }
            self.log.push(r);
        }
        self.log.push(LogRecord { db: first_db, args: vec![Bytes::from_static(b"EXEC")], wall_ms });
    }

    /// [`Store::settle`] when the lock engine reported changes not logged yet: cheap enough for every command and
    /// batch (no pass over the databases otherwise). A key that expired meanwhile without a lock change is logged
    /// by the next full settle, before anything else touches it.
    pub fn settle_lock_changes(&mut self) {
        if !self.locks.changes.is_empty() {
            self.settle();
        }
    }

    /// Logs what the mutators reported: a DEL for each key the keyspace removed by itself (so a replayed log and
    /// replicas agree; waiters of lock keys that went away are woken), then the lock engine's changes in the order
    /// it made them. Expiries first is their true order: the engine settles a key before it changes it, and a key
    /// it just changed cannot expire in the same instant. With `commands::call` (a write command that changed
    /// something), the one place records come from; it runs after every command, lock-timer round and wake-up.
    pub fn settle(&mut self) {
        // Runs after every command: nothing to do is the common case, found without taking anything apart.
        if self.totals.take_events_flag() {
            self.settle_expired();
        }
        if !self.locks.changes.is_empty() {
            for c in std::mem::take(&mut self.locks.changes) {
                if self.log_enabled {
                    self.log.push(LogRecord { db: c.db, args: c.record, wall_ms: c.wall_ms });
                }
            }
        }
    }

    /// [`Store::settle`]'s part for the keys the keyspace removed by itself.
    fn settle_expired(&mut self) {
        for db in 0..self.dbs.len() {
            if !self.dbs[db].has_events() {
                continue;
            }
            for ev in self.dbs[db].take_events() {
                self.expired_keys += 1;
                if let Some(n) = self.expired_notices.as_mut() {
                    n.push((db, ev.key.clone()));
                }
                self.log(db, vec![Bytes::from_static(b"DEL"), Bytes::copy_from_slice(&ev.key)]);
                if ev.was_lock {
                    self.locks.stats.expirations += 1;
                    self.locks.key_gone(db, &ev.key);
                    if let Some((kind, tokens)) = &ev.lock_holders {
                        for t in tokens {
                            self.locks.note_event(db, &ev.key, kind, *t, crate::locks::EventKind::Expired);
                        }
                    }
                }
            }
        }
    }

    /// Removes every key of one database (FLUSHDB) or all of them (FLUSHALL), waking lock waiters.
    pub fn flush(&mut self, db: Option<usize>) {
        let range = match db {
            Some(d) => d..d + 1,
            None => 0..self.dbs.len(),
        };
        for d in range {
            let lock_keys: Vec<CompactBytes> =
                self.dbs[d].iter().filter(|(_, e)| e.data.is_lock()).map(|(k, _)| k.clone()).collect();
            self.dbs[d].clear();
            self.locks.fences_mut(d).clear();
            self.locks.disarm_db(d);
            for k in lock_keys {
                self.locks.key_gone(d, &k);
            }
        }
    }
}
