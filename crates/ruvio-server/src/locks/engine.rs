//! The lock rules: grant, renew, release, expiry, fences and waking waiters.
//!
//! Every function here runs under the store lock and takes `now` (monotonic ms) from its caller, so the property
//! test can drive it with a fake clock. Each function that changes lock state reports the change as the
//! deterministic record that replays it (`LockState::changes`, see [`super::records`]); `Store::settle` logs those
//! after whatever the keyspace expired on the way, so neither the engine nor the command handlers write records.

use ruvio_protocol::Value;

use super::records;
use super::{Grant, Grantee, Want, Waiter};
use crate::keyspace::{Holder, Lease, Semaphore};
use crate::errors::{no_token_reservation, semaphore_limit_mismatch, ERR_WRONGTYPE};
use crate::keyspace::{CompactBytes, Data, Entry};
use crate::store::Store;


#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    WrongType,
    /// SEMAPHORE asked for a limit other than the one in force while the semaphore has holders.
    LimitMismatch { current: u32, asked: u32 },
    /// Persistence could not extend the token reservation on disk, so no token may be issued.
    NoToken(String),
}

impl LockError {
    pub fn reply(&self) -> Value {
        match self {
            LockError::WrongType => Value::error(ERR_WRONGTYPE),
            LockError::LimitMismatch { current, asked } => semaphore_limit_mismatch(*current, *asked),
            LockError::NoToken(why) => no_token_reservation(why),
        }
    }
}

/// Reports a change as the record that replays it (`Store::settle` logs it); built only when something consumes
/// the log.
fn report(store: &mut Store, db: usize, record: impl FnOnce() -> Vec<bytes::Bytes>) {
    if store.log_enabled {
        let wall_ms = store.wall_now();
        store.locks.changes.push(crate::locks::LockChange { db, record: record(), wall_ms });
    }
}

/// Expires `key` if it is due (whole key, or single semaphore slots) and logs what went, so that whatever the
/// caller logs next comes after it in the log.
fn settle_key(store: &mut Store, db: usize, key: &[u8], now: u64) {
    store.dbs[db].get(key, now);
    prune_semaphore(store, db, key, now);
    store.settle();
}

/// Removes semaphore slots whose own TTL ran out. The key itself expires with its last holder (its deadline is
/// the latest holder's), through the keyspace's own expiry.
fn prune_semaphore(store: &mut Store, db: usize, key: &[u8], now: u64) {
    if store.replica {
        // A replica's slots end with its primary's records: a LOCKDROP logged here would take an LSN of its own
        // (LOCKINFO on a replica did that). Reads there leave ended slots out instead.
        return;
    }
    let (expired, whole_key) = match store.dbs[db].peek(key) {
        Some(Entry { data: Data::Semaphore(sem), expire_at }) => {
            let expired: Vec<i64> = sem.holders.iter().filter(|h| h.deadline <= now).map(|h| h.token).collect();
            let whole = *expire_at <= now || expired.len() == sem.holders.len();
            (expired, whole)
        }
        _ => return,
    };
    if expired.is_empty() {
        return;
    }
    if whole_key {
        // The whole key goes: Store::settle logs one DEL and counts one expiration; count the other slots here.
        store.locks.stats.expirations += expired.len() as u64 - 1;
        if store.dbs[db].get(key, now).is_some() {
            // Deadline inconsistent with the holders (cannot happen through the commands): the key is made due, so
            // the keyspace expires it like any other key and `settle_key` logs that one DEL.
            store.dbs[db].set_expire(key, now, now);
            store.dbs[db].get(key, now);
        }
        return;
    }
    store.dbs[db].update_semaphore(key, now, |sem| sem.holders.retain(|h| h.deadline > now));
    for token in expired {
        store.locks.stats.expirations += 1;
        store.locks.note_event(db, key, "semaphore", token, crate::locks::EventKind::Expired);
        report(store, db, || records::lockdrop(key, token));
    }
    store.locks.pending.push((db, CompactBytes::new(key)));
}

fn next_token(store: &mut Store) -> Result<i64, LockError> {
    store.locks.tokens.try_next(crate::clock::wall_ms()).map_err(LockError::NoToken)
}

/// Checks whether `want` can be granted on `key` right now and, if so, grants it (without logging).
fn try_grant(store: &mut Store, db: usize, key: &[u8], want: Want, ttl_ms: u64, now: u64) -> Result<Option<(i64, u64)>, LockError> {
    let deadline = now + ttl_ms;
    let current = match store.dbs[db].get(key, now).map(|e| &e.data) {
        None => None,
        Some(Data::Lease(_)) => Some(Want::Lease),
        Some(Data::Semaphore(s)) => {
            if let Want::Semaphore { limit } = want {
                if s.limit != limit {
                    return Err(LockError::LimitMismatch { current: s.limit, asked: limit });
                }
                if s.holders.len() >= limit as usize {
                    return Ok(None);
                }
            }
            Some(Want::Semaphore { limit: s.limit })
        }
        Some(Data::Str(_) | Data::Hash(_) | Data::List(_) | Data::Set(_) | Data::ZSet(_)) => return Err(LockError::WrongType),
    };
    let token = match (current, want) {
        (None, _) => {
            let token = next_token(store)?;
            let data = match want {
                Want::Lease => Data::Lease(Box::new(Lease { token })),
                Want::Semaphore { limit } => Data::Semaphore(Box::new(Semaphore { limit, holders: vec![Holder { token, deadline }] })),
            };
            store.dbs[db].insert(key, Entry { data, expire_at: deadline });
            token
        }
        (Some(Want::Lease), Want::Lease) => return Ok(None),
        (Some(Want::Semaphore { .. }), Want::Semaphore { .. }) => {
            let token = next_token(store)?;
            store.dbs[db].update_semaphore(key, now, |sem| sem.holders.push(Holder { token, deadline }));
            extend_deadline(store, db, key, deadline, now);
            token
        }
        _ => return Err(LockError::WrongType),
    };
    store.locks.arm(deadline, db, key);
    Ok(Some((token, deadline)))
}

/// Drops the timer entry for `deadline` unless another holder of `key` still has that deadline.
fn disarm_unused(store: &mut Store, db: usize, key: &[u8], deadline: u64) {
    let in_use = match store.dbs[db].peek(key) {
        Some(Entry { data: Data::Lease(_), expire_at }) => *expire_at == deadline,
        Some(Entry { data: Data::Semaphore(s), .. }) => s.holders.iter().any(|h| h.deadline == deadline),
        _ => false,
    };
    if !in_use {
        store.locks.disarm(deadline, db, key);
    }
}

/// The key's deadline is its latest holder's.
fn extend_deadline(store: &mut Store, db: usize, key: &[u8], deadline: u64, now: u64) {
    let current = store.dbs[db].peek(key).map_or(0, |e| e.expire_at);
    if deadline > current {
        store.dbs[db].set_expire(key, deadline, now);
    }
}

/// Sets the semaphore key's deadline to its latest holder's, or removes the key when no holder is left.
fn refresh_semaphore_deadline(store: &mut Store, db: usize, key: &[u8], now: u64) {
    let latest = match store.dbs[db].peek(key) {
        Some(Entry { data: Data::Semaphore(sem), .. }) => sem.holders.iter().map(|h| h.deadline).max(),
        _ => return,
    };
    match latest {
        Some(d) => {
            store.dbs[db].set_expire(key, d, now);
        }
        None => {
            store.dbs[db].remove(key, now);
        }
    }
}

/// Takes back a grant whose receiver vanished between the check and the send. Nothing was logged for it.
fn undo_grant(store: &mut Store, db: usize, key: &[u8], token: i64, now: u64) {
    match store.dbs[db].peek(key).map(|e| &e.data) {
        Some(Data::Lease(l)) if l.token == token => {
            store.dbs[db].remove(key, now);
        }
        Some(Data::Semaphore(_)) => {
            store.dbs[db].update_semaphore(key, now, |sem| sem.holders.retain(|h| h.token != token));
            refresh_semaphore_deadline(store, db, key, now);
        }
        _ => {}
    }
}

fn log_grant(store: &mut Store, db: usize, key: &[u8], want: Want, token: i64, deadline: u64) {
    store.locks.stats.grants += 1;
    store.locks.stats.by_kind[want.kind_index()].grants += 1;
    let kind = if want == Want::Lease { "lease" } else { "semaphore" };
    store.locks.note_event(db, key, kind, token, crate::locks::EventKind::Granted);
    report(store, db, || records::lockset(key, want, token, deadline));
}

/// LEASE / SEMAPHORE without waiting: the new token, `None` when the lock is taken (or others queue for it).
pub fn acquire(store: &mut Store, db: usize, key: &[u8], want: Want, ttl_ms: u64, now: u64) -> Result<Option<i64>, LockError> {
    settle_key(store, db, key, now);
    serve_key(store, db, key, now);
    // A caller never overtakes clients already waiting; after serve_key a live waiter means the lock is full.
    if store.locks.live_waiters(db, key) > 0 {
        // Still report a type or limit error rather than a plain "busy".
        return match (store.dbs[db].peek(key).map(|e| &e.data), want) {
            (Some(Data::Semaphore(s)), Want::Semaphore { limit }) if s.limit != limit => {
                Err(LockError::LimitMismatch { current: s.limit, asked: limit })
            }
            (Some(Data::Lease(_)), Want::Lease) | (Some(Data::Semaphore(_)), Want::Semaphore { .. }) | (None, _) => Ok(None),
            _ => Err(LockError::WrongType),
        };
    }
    let granted = try_grant(store, db, key, want, ttl_ms, now)?;
    if let Some((token, deadline)) = granted {
        log_grant(store, db, key, want, token, deadline);
    }
    Ok(granted.map(|(t, _)| t))
}

/// Queues a waiter for `key`; returns its id (for [`cancel_waiter`]).
pub fn enqueue_waiter(store: &mut Store, db: usize, key: &[u8], want: Want, ttl_ms: u64, reply: tokio::sync::oneshot::Sender<Value>) -> u64 {
    enqueue_waiter_as(store, db, key, want, ttl_ms, reply, None)
}

/// [`enqueue_waiter`] for a client whose identity is remembered with the grant it gets (LOCKS).
pub fn enqueue_waiter_as(
    store: &mut Store,
    db: usize,
    key: &[u8],
    want: Want,
    ttl_ms: u64,
    reply: tokio::sync::oneshot::Sender<Value>,
    who: Option<Grantee>,
) -> u64 {
    let id = store.locks.next_waiter_id();
    store.locks.stats.waits += 1;
    store.locks.stats.by_kind[want.kind_index()].waits += 1;
    let since = crate::clock::mono_ms();
    store.locks.waiters_mut(db).entry(CompactBytes::new(key)).or_default().push_back(Waiter { id, want, ttl_ms, reply, who, since });
    id
}

/// Whether `token` still holds `key`.
fn holds(store: &Store, db: usize, key: &[u8], token: i64) -> bool {
    match store.dbs.get(db).and_then(|d| d.peek(key)).map(|e| &e.data) {
        Some(Data::Lease(l)) => l.token == token,
        Some(Data::Semaphore(s)) => s.holders.iter().any(|h| h.token == token),
        _ => false,
    }
}

/// Remembers who was granted `token` on `key` (LOCKS). When the map has doubled since the last pass, entries
/// whose token no longer holds its key are dropped, so the map stays proportional to the live holders at an
/// amortised O(1) per grant, with no hook in every path that ends a holder.
pub fn note_grant(store: &mut Store, db: usize, key: &[u8], token: i64, who: Grantee) {
    let grant = Grant { db, key: CompactBytes::new(key), who, wall_ms: crate::clock::wall_ms() };
    // The grant event was noted before its client was known (log_grant): name it now.
    if let Some(ev) = store.locks.recent.iter_mut().rev().find(|e| e.token == token && e.what == crate::locks::EventKind::Granted) {
        ev.who = Some(grant.who.clone());
    }
    store.locks.grants.insert(token, grant);
    if store.locks.grants.len() >= store.locks.grants_prune_at {
        let mut grants = std::mem::take(&mut store.locks.grants);
        grants.retain(|t, g| holds(store, g.db, &g.key, *t));
        store.locks.grants_prune_at = (grants.len() * 2).max(1024);
        store.locks.grants = grants;
    }
}

/// Withdraws a waiter (timeout, disconnect). True if it was still waiting.
pub fn cancel_waiter(store: &mut Store, db: usize, key: &[u8], id: u64) -> bool {
    let waiters = store.locks.waiters_mut(db);
    let Some(q) = waiters.get_mut(key) else { return false };
    let before = q.len();
    q.retain(|w| w.id != id);
    let removed = q.len() < before;
    if q.is_empty() {
        waiters.remove(key);
    }
    if removed {
        store.locks.stats.wait_timeouts += 1;
        // The withdrawn waiter may have been the head that could not be served (e.g. a lease waiter on a
        // semaphore with free slots): look at the queue again.
        store.locks.pending.push((db, CompactBytes::new(key)));
    }
    removed
}

/// Grants `key` to its waiters, in order, as far as the lock allows. Waiters whose client is gone are dropped;
/// a waiter whose request became invalid (the key changed kind or limit) gets that error, as the same command
/// would now.
pub fn serve_key(store: &mut Store, db: usize, key: &[u8], now: u64) {
    if !store.locks.any_waiters() {
        return;
    }
    loop {
        let Some(q) = store.locks.waiters_mut(db).get_mut(key) else { return };
        let Some(waiter) = q.pop_front() else {
            store.locks.waiters_mut(db).remove(key);
            return;
        };
        if waiter.reply.is_closed() {
            continue;
        }
        match try_grant(store, db, key, waiter.want, waiter.ttl_ms, now) {
            Err(e) => {
                let _ = waiter.reply.send(e.reply());
            }
            Ok(None) => {
                store.locks.waiters_mut(db).entry(CompactBytes::new(key)).or_default().push_front(waiter);
                return;
            }
            Ok(Some((token, deadline))) => match waiter.reply.send(Value::Integer(token)) {
                Ok(()) => {
                    log_grant(store, db, key, waiter.want, token, deadline);
                    store.locks.stats.observe_wait(now.saturating_sub(waiter.since));
                    if let Some(who) = waiter.who {
                        note_grant(store, db, key, token, who);
                    }
                }
                Err(_) => undo_grant(store, db, key, token, now),
            },
        }
    }
}

/// Serves every key that lost its lock or a holder since the last call.
pub fn serve_pending(store: &mut Store, now: u64) {
    while !store.locks.pending.is_empty() {
        let mut keys = std::mem::take(&mut store.locks.pending);
        keys.sort();
        keys.dedup();
        for (db, key) in keys {
            serve_key(store, db, &key, now);
        }
    }
}

/// Runs after every command, once its write is in the log: grants to waiters the command made room for. True when
/// the command set a deadline earlier than any other, so the lock timer must be woken (the caller owns the task:
/// see `Shared::after_command`).
pub fn after_command(store: &mut Store, now: u64) -> bool {
    if !store.locks.pending.is_empty() {
        serve_pending(store, now);
    }
    std::mem::take(&mut store.locks.wake_timer)
}

/// Answers every waiting client with `error` (this node became a replica: lock waiters exist only on a primary).
pub fn fail_all_waiters(store: &mut Store, error: &str) {
    for waiter in store.locks.take_all_waiters() {
        let _ = waiter.reply.send(Value::error(error));
    }
}

/// After any write: keys of the command that have waiters are looked at again, so a lock replaced by another
/// value (SET over a lease) answers its waiters (WRONGTYPE) instead of leaving them queued.
pub fn recheck_waiters<'k>(store: &mut Store, db: usize, keys: impl Iterator<Item = &'k [u8]>) {
    if !store.locks.any_waiters() {
        return;
    }
    for key in keys {
        if store.locks.has_waiters(db, key) {
            store.locks.pending.push((db, CompactBytes::new(key)));
        }
    }
}

/// Called when a lock key disappeared (expired, deleted, flushed): its waiters are served after the write that
/// removed it has been logged (see [`after_command`]).
pub fn on_lock_gone(store: &mut Store, db: usize, key: &[u8], _now: u64) {
    store.locks.key_gone(db, key);
}

/// Called when a command removed the lock `gone` from `key` before its deadlines (DEL, an IFGT write over it): its
/// timer entries go too, so a million LEASE + DEL cycles leave nothing behind; then as [`on_lock_gone`].
pub fn on_lock_removed(store: &mut Store, db: usize, key: &[u8], gone: &Entry, now: u64) {
    match &gone.data {
        Data::Lease(_) => store.locks.disarm(gone.expire_at, db, key),
        Data::Semaphore(sem) => sem.holders.iter().for_each(|h| store.locks.disarm(h.deadline, db, key)),
        Data::Str(_) | Data::Hash(_) | Data::List(_) | Data::Set(_) | Data::ZSet(_) => return,
    }
    on_lock_gone(store, db, key, now);
}

/// RENEW: moves the deadline of the holder with `token` to `now + ttl_ms`. False when `token` does not hold `key`
/// (an expired lease is never revived).
pub fn renew(store: &mut Store, db: usize, key: &[u8], token: i64, ttl_ms: u64, now: u64) -> Result<bool, LockError> {
    settle_key(store, db, key, now);
    let deadline = now + ttl_ms;
    let (want, old) = match store.dbs[db].peek(key) {
        None => return Ok(false),
        Some(Entry { data: Data::Lease(l), expire_at }) if l.token == token => (Want::Lease, *expire_at),
        Some(Entry { data: Data::Lease(_), .. }) => return Ok(false),
        Some(Entry { data: Data::Semaphore(s), .. }) => match s.holders.iter().find(|h| h.token == token) {
            Some(h) => (Want::Semaphore { limit: s.limit }, h.deadline),
            None => return Ok(false),
        },
        Some(_) => return Err(LockError::WrongType),
    };
    match want {
        Want::Lease => {
            store.dbs[db].set_expire(key, deadline, now);
        }
        Want::Semaphore { .. } => {
            store.dbs[db].update_semaphore(key, now, |s| s.holders.iter_mut().filter(|h| h.token == token).for_each(|h| h.deadline = deadline));
            refresh_semaphore_deadline(store, db, key, now);
        }
    }
    disarm_unused(store, db, key, old);
    store.locks.arm(deadline, db, key);
    store.locks.stats.renewals += 1;
    store.locks.stats.by_kind[want.kind_index()].renewals += 1;
    report(store, db, || records::lockset(key, want, token, deadline));
    Ok(true)
}

/// RELEASE: frees what `token` holds on `key` (the lease, or its semaphore slot). False when it holds nothing.
pub fn release(store: &mut Store, db: usize, key: &[u8], token: i64, now: u64) -> Result<bool, LockError> {
    settle_key(store, db, key, now);
    let (is_lease, deadline) = match store.dbs[db].peek(key) {
        None => return Ok(false),
        Some(Entry { data: Data::Lease(l), expire_at }) if l.token == token => (true, *expire_at),
        Some(Entry { data: Data::Lease(_), .. }) => return Ok(false),
        Some(Entry { data: Data::Semaphore(s), .. }) => match s.holders.iter().find(|h| h.token == token) {
            Some(h) => (false, h.deadline),
            None => return Ok(false),
        },
        Some(_) => return Err(LockError::WrongType),
    };
    if is_lease {
        store.dbs[db].remove(key, now);
    } else {
        store.dbs[db].update_semaphore(key, now, |s| s.holders.retain(|h| h.token != token));
        refresh_semaphore_deadline(store, db, key, now);
    }
    disarm_unused(store, db, key, deadline);
    store.locks.stats.releases += 1;
    store.locks.stats.by_kind[if is_lease { 0 } else { 1 }].releases += 1;
    store.locks.note_event(db, key, if is_lease { "lease" } else { "semaphore" }, token, crate::locks::EventKind::Released);
    report(store, db, || records::lockdrop(key, token));
    serve_key(store, db, key, now);
    Ok(true)
}

/// What the lock timer does at a deadline: removes holders whose time is up and serves their waiters. Returns the
/// next deadline to wake up for.
pub fn expire_due(store: &mut Store, now: u64) -> Option<u64> {
    let mut due = Vec::new();
    while let Some(first) = store.locks.timers.first() {
        if first.0 > now {
            break;
        }
        let (_, db, key) = store.locks.timers.pop_first().expect("checked above");
        due.push((db, key));
    }
    due.sort();
    due.dedup();
    for (db, key) in due {
        if db < store.dbs.len() {
            settle_key(store, db, &key, now);
        }
    }
    serve_pending(store, now);
    store.locks.wake_timer = false;
    store.locks.timers.first().map(|t| t.0)
}

/// IFGT: writes `value` (with an optional monotonic deadline, 0 = none) unless `key` has seen a higher token.
pub fn fence_write(store: &mut Store, db: usize, key: &[u8], token: i64, value: &[u8], deadline: u64, now: u64) -> Result<bool, LockError> {
    settle_key(store, db, key, now);
    if store.dbs[db].peek(key).is_some_and(|e| e.data.is_lock()) {
        return Err(LockError::WrongType);
    }
    if store.locks.fence(db, key).is_some_and(|f| token < f) {
        return Ok(false);
    }
    store.locks.fences_mut(db).insert(CompactBytes::new(key), token);
    store.dbs[db].insert(key, Entry { data: Data::Str(CompactBytes::new(value)), expire_at: deadline });
    report(store, db, || records::fenceset(key, token, value, deadline));
    Ok(true)
}

/// One holder as LOCKINFO shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderInfo {
    pub token: i64,
    pub remaining_ms: u64,
}

/// LOCKINFO: the lock at `key`, or `None` when there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub kind: &'static str,
    pub limit: u32,
    pub holders: Vec<HolderInfo>,
    pub waiters: usize,
}

pub fn info(store: &mut Store, db: usize, key: &[u8], now: u64) -> Result<Option<LockInfo>, LockError> {
    settle_key(store, db, key, now);
    peek_info(store, db, key, now)
}

/// [`info`] without settling the key first (nothing is logged): holders whose time is up are left out. For readers
/// outside a command (the /locks page), which must not stage records no command will commit.
pub fn peek_info(store: &Store, db: usize, key: &[u8], now: u64) -> Result<Option<LockInfo>, LockError> {
    let waiters = store.locks.live_waiters(db, key);
    Ok(match store.dbs[db].peek(key) {
        None => None,
        Some(Entry { expire_at, .. }) if *expire_at != 0 && *expire_at <= now => None,
        Some(Entry { data: Data::Lease(l), expire_at }) => Some(LockInfo {
            kind: "lease",
            limit: 1,
            holders: vec![HolderInfo { token: l.token, remaining_ms: expire_at.saturating_sub(now) }],
            waiters,
        }),
        Some(Entry { data: Data::Semaphore(s), .. }) => Some(LockInfo {
            kind: "semaphore",
            limit: s.limit,
            // A replica keeps ended slots until its primary's records drop them; they are not shown.
            holders: s.holders.iter().filter(|h| h.deadline > now).map(|h| HolderInfo { token: h.token, remaining_ms: h.deadline - now }).collect(),
            waiters,
        }),
        Some(_) => return Err(LockError::WrongType),
    })
}

/// When `token` was granted (Unix ms) and to whom, as LOCKS and the /locks page show it. Without a grant of this
/// node (a replica, or granted before a restart) the time is the token's own clock field, which is the grant's
/// wall-clock ms (or slightly ahead under load), and the client is unknown.
pub fn holder_grant<'s>(store: &'s Store, db: usize, key: &[u8], token: i64) -> (i64, Option<&'s crate::locks::Grantee>) {
    let grant = store.locks.grants.get(&token).filter(|g| g.db == db && &*g.key == key);
    (grant.map_or_else(|| crate::locks::tokens::issued_wall_ms(token), |g| g.wall_ms), grant.map(|g| &g.who))
}

/// INFO `# Locks`.
pub fn info_section(store: &mut Store, out: &mut String) {
    use std::fmt::Write;
    let (mut leases, mut semaphores, mut holders) = (0usize, 0usize, 0usize);
    for db in &store.dbs {
        let c = db.lock_counts();
        leases += c.leases;
        semaphores += c.semaphores;
        holders += c.holders;
    }
    let waiters = store.locks.total_live_waiters();
    let s = &store.locks.stats;
    let _ = write!(
        out,
        "lock_grants:{}\r\nlock_renewals:{}\r\nlock_releases:{}\r\nlock_expirations:{}\r\nlock_waits:{}\r\nlock_wait_timeouts:{}\r\nlock_lease_keys:{leases}\r\nlock_semaphore_keys:{semaphores}\r\nlock_holders:{holders}\r\nlock_waiters:{waiters}\r\nlock_timers:{}\r\nlock_last_token:{}\r\n",
        s.grants,
        s.renewals,
        s.releases,
        s.expirations,
        s.waits,
        s.wait_timeouts,
        store.locks.timers.len(),
        store.locks.tokens.last()
    );
}
