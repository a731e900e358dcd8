//! Applying the lock engine's records (`records.rs`) when the log is replayed (start-up, a replica's stream).
//! Applying a record never issues a token; it records the token with `TokenIssuer::observe`, so a server that
//! replayed the log only issues larger tokens.

use super::engine::on_lock_removed;
use super::Want;
use crate::clock;
use crate::keyspace::{CompactBytes, Data, Entry, Holder, Lease, Semaphore};
use crate::store::Store;

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
            on_lock_removed(store, db, key, &e, now);
        }
    } else {
        let expire_at = if deadline_wall_ms == 0 { 0 } else { clock::wall_to_mono(deadline_wall_ms) };
        store.dbs[db].insert(key, Entry { data: Data::Str(CompactBytes::new(value)), expire_at });
    }
}
