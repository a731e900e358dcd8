//! The write-log records of the lock engine, and how a replay applies them.
//!
//! Lock commands are not replayable as received: LEASE issues a token from the clock, and TTLs are relative. So
//! every lock write is logged as one of these internal commands, with the token explicit and the deadline as
//! absolute wall-clock ms (Unix epoch):
//!
//! - `LOCKSET key lease 1 token deadline_wall_ms`: `key` is a lease held by `token` until the deadline (a grant or
//!   a RENEW).
//! - `LOCKSET key semaphore limit token deadline_wall_ms`: `token` holds a slot of the semaphore `key` (limit
//!   `limit`) until the deadline; an existing slot with that token is updated (RENEW).
//! - `LOCKDROP key token`: `token` no longer holds `key` (RELEASE, or one semaphore slot that expired). A lease or
//!   semaphore whose last holder goes is removed. Whole-key expiry is logged as `DEL key`, like any expired key.
//! - `FENCESET key token value deadline_wall_ms`: IFGT succeeded: the fence of `key` is at least `token` and
//!   `key` holds the string `value` (deadline 0 = none; a deadline already past removes the key).
//!
//! Applying a record never issues a token; it records the token with `TokenIssuer::observe`, so a server that
//! replayed the log only issues larger tokens.

use bytes::Bytes;

use super::Want;
use crate::keyspace::{Holder, Lease, Semaphore};
use crate::clock;
use crate::keyspace::{CompactBytes, Data, Entry};
use crate::store::Store;

fn num(n: i64) -> Bytes {
    Bytes::from(n.to_string())
}

pub fn lockset(key: &[u8], want: Want, token: i64, deadline: u64) -> Vec<Bytes> {
    let (kind, limit): (&'static [u8], u32) = match want {
        Want::Lease => (b"lease", 1),
        Want::Semaphore { limit } => (b"semaphore", limit),
    };
    vec![
        Bytes::from_static(b"LOCKSET"),
        Bytes::copy_from_slice(key),
        Bytes::from_static(kind),
        num(limit as i64),
        num(token),
        num(clock::mono_to_wall(deadline)),
    ]
}

pub fn lockdrop(key: &[u8], token: i64) -> Vec<Bytes> {
    vec![Bytes::from_static(b"LOCKDROP"), Bytes::copy_from_slice(key), num(token)]
}

pub fn fenceset(key: &[u8], token: i64, value: &[u8], deadline: u64) -> Vec<Bytes> {
    let wall = if deadline == 0 { 0 } else { clock::mono_to_wall(deadline) };
    vec![Bytes::from_static(b"FENCESET"), Bytes::copy_from_slice(key), num(token), Bytes::copy_from_slice(value), num(wall)]
}

/// Applies `LOCKSET`. The caller has checked `token > 0`, `limit >= 1` (1 for a lease).
pub fn apply_lockset(store: &mut Store, db: usize, key: &[u8], want: Want, token: i64, deadline_wall_ms: i64, now: u64) {
    store.locks.tokens.observe(token);
    let deadline = clock::wall_to_mono(deadline_wall_ms).max(1);
    let holder = Holder { token, deadline };
    let existing = match store.dbs[db].get(key, now) {
        Some(Entry { data: Data::Semaphore(_), expire_at }) => Some(*expire_at),
        _ => None,
    };
    match (want, existing) {
        (Want::Semaphore { limit }, Some(key_deadline)) => {
            // In place, and a new holder (its token is above every other) without a scan: replaying N grants must
            // cost N steps, not N^2 (a restart with 50k holders took seconds).
            let latest = store.dbs[db]
                .update_semaphore(key, now, |sem| {
                    sem.limit = limit;
                    if sem.holders.last().is_none_or(|h| h.token < token) {
                        sem.holders.push(holder);
                        return key_deadline.max(deadline);
                    }
                    match sem.holders.iter_mut().find(|h| h.token == token) {
                        Some(h) => h.deadline = deadline,
                        None => sem.holders.push(holder),
                    }
                    sem.holders.iter().map(|h| h.deadline).max().unwrap_or(deadline)
                })
                .expect("a live semaphore, found above");
            store.dbs[db].set_expire(key, latest, now);
        }
        (Want::Semaphore { limit }, None) => {
            let sem = Semaphore { limit, holders: vec![holder] };
            store.dbs[db].insert(key, Entry { data: Data::Semaphore(Box::new(sem)), expire_at: deadline });
        }
        (Want::Lease, _) => {
            store.dbs[db].insert(key, Entry { data: Data::Lease(Box::new(Lease { token })), expire_at: deadline });
        }
    }
    store.locks.arm(deadline, db, key);
}

/// Applies `LOCKDROP`.
pub fn apply_lockdrop(store: &mut Store, db: usize, key: &[u8], token: i64, now: u64) {
    // None: the key stays as it is; Some(None): the key goes; Some(Some(d)): the semaphore's deadline becomes d.
    let change: Option<Option<u64>> = match store.dbs[db].peek(key).map(|e| &e.data) {
        Some(Data::Lease(l)) if l.token == token => Some(None),
        Some(Data::Semaphore(_)) => store.dbs[db].update_semaphore(key, now, |s| {
            s.holders.retain(|h| h.token != token);
            s.holders.iter().map(|h| h.deadline).max()
        }),
        _ => None,
    };
    match change {
        Some(Some(latest)) => {
            store.dbs[db].set_expire(key, latest, now);
        }
        Some(None) => {
            store.dbs[db].remove(key, now);
        }
        None => {}
    }
    store.locks.pending.push((db, CompactBytes::new(key)));
}

/// Applies `FENCESET`.
pub fn apply_fenceset(store: &mut Store, db: usize, key: &[u8], token: i64, value: &[u8], deadline_wall_ms: i64, now: u64) {
    let fences = store.locks.fences_mut(db);
    let fence = fences.entry(CompactBytes::new(key)).or_insert(token);
    *fence = (*fence).max(token);
    if deadline_wall_ms != 0 && deadline_wall_ms <= clock::wall_ms() {
        if let Some(e) = store.dbs[db].remove(key, now) {
            super::engine::on_lock_removed(store, db, key, &e, now);
        }
    } else {
        let expire_at = if deadline_wall_ms == 0 { 0 } else { clock::wall_to_mono(deadline_wall_ms) };
        store.dbs[db].insert(key, Entry { data: Data::Str(CompactBytes::new(value)), expire_at });
    }
}
