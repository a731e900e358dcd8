//! The keyspace: databases of binary-safe keys with optional deadlines.
//!
//! Each database is split into [`SEGMENTS`] hash tables by a slice of the key's hash. That keeps every table small
//! (growing one never moves a million entries at once, so no latency spike), gives SCAN a cursor that stays valid
//! while keys come and go (the cursor is a segment number; segments never move), and lets active expiry walk the
//! database a piece at a time.
//!
//! Expiry is checked on every access (a key past its deadline is never returned) and by [`Db::active_expire`].
//! Every removal caused by expiry is reported through [`Db::take_events`] so the store can log it and wake lock
//! waiters.

pub mod bytes;
pub mod glob;
pub mod hash;
mod indexed;
pub mod list;
pub mod packed;
pub mod lock_values;
pub mod set;
pub mod zset;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hashbrown::HashTable;

pub use self::bytes::CompactBytes;
pub use self::lock_values::{Holder, Lease, Semaphore};
pub use self::hash::HashValue;
pub use self::list::ListValue;
pub use self::set::SetValue;
pub use self::zset::ZSetValue;

pub const SEGMENTS: usize = 1024;

/// The encoding limits of sets and sorted sets (what OBJECT ENCODING reports), from the config.
#[derive(Debug, Clone, Copy, Default)]
pub struct CollectionLimits {
    pub set: set::Limits,
    pub zset: zset::Limits,
}

/// What a key holds.
#[derive(Debug, Clone)]
pub enum Data {
    Str(CompactBytes),
    Lease(Box<Lease>),
    Semaphore(Box<Semaphore>),
    /// HSET and friends (`keyspace/hash.rs`).
    Hash(HashValue),
    /// LPUSH and friends (`keyspace/list.rs`); boxed so a slot stays 40 bytes.
    List(Box<ListValue>),
    /// SADD and friends (`keyspace/set.rs`).
    Set(Box<SetValue>),
    /// ZADD and friends (`keyspace/zset.rs`); one thin pointer like a hash, so not boxed again.
    ZSet(ZSetValue),
}

impl Data {
    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Data::Str(_) => "string",
            Data::Lease(_) => "lease",
            Data::Semaphore(_) => "semaphore",
            Data::Hash(_) => "hash",
            Data::List(_) => "list",
            Data::Set(_) => "set",
            Data::ZSet(_) => "zset",
        }
    }
    pub fn is_lock(&self) -> bool {
        matches!(self, Data::Lease(_) | Data::Semaphore(_))
    }

    /// A lock's kind and its holders' tokens; `None` for other values.
    pub fn lock_holders(&self) -> Option<(&'static str, Vec<i64>)> {
        match self {
            Data::Lease(l) => Some(("lease", vec![l.token])),
            Data::Semaphore(s) => Some(("semaphore", s.holders.iter().map(|h| h.token).collect())),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub data: Data,
    /// Monotonic deadline in ms (see [`crate::clock`]); 0 means none.
    pub expire_at: u64,
}

impl Entry {
    pub fn new(data: Data) -> Self {
        Entry { data, expire_at: 0 }
    }
    pub fn is_expired(&self, now: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now
    }
}

/// Something the store must follow up on after the keyspace removed a key by itself.
#[derive(Debug)]
pub struct ExpiredKey {
    pub key: CompactBytes,
    pub was_lock: bool,
    /// For a lock: its kind and the tokens that held it (the /locks page's recent losses).
    pub lock_holders: Option<(&'static str, Vec<i64>)>,
}

/// A WATCH registration: set when the watched key is modified.
#[derive(Debug, Default)]
pub struct WatchFlag(AtomicBool);

impl WatchFlag {
    pub fn is_dirty(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
    pub fn mark(&self) {
        self.0.store(true, Ordering::Release)
    }
}

#[derive(Default)]
struct Segment {
    table: HashTable<(CompactBytes, Entry)>,
    volatile: usize,
}

/// A snapshot being written one segment at a time (see `persistence::rewrite`): before a key in a segment not yet
/// written changes, its entry as of the snapshot's start is kept here, so the snapshot shows a single instant
/// although clients keep writing between segments.
#[derive(Default)]
struct Capture {
    /// Segments below this one are written already; changes to them no longer matter to the snapshot.
    next_segment: usize,
    /// Per segment: key -> its entry at the snapshot's start (`None`: it did not exist then).
    saved: hashbrown::HashMap<usize, hashbrown::HashMap<CompactBytes, Option<Entry>>>,
    /// FLUSHDB/SWAPDB happened meanwhile: copying everything would cost a full copy, so the snapshot gives up.
    broken: bool,
}

/// How many lock keys and holders a database holds, kept as keys change so INFO never walks the keyspace.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LockCounts {
    pub leases: usize,
    pub semaphores: usize,
    /// Lease holders (one per lease) plus semaphore holders.
    pub holders: usize,
}

impl LockCounts {
    /// What one value adds to the counts: (lease keys, semaphore keys, holders).
    fn of(data: &Data) -> (usize, usize, usize) {
        match data {
            Data::Str(_) | Data::Hash(_) | Data::List(_) | Data::Set(_) | Data::ZSet(_) => (0, 0, 0),
            Data::Lease(_) => (1, 0, 1),
            Data::Semaphore(sem) => (0, 1, sem.holders.len()),
        }
    }
    fn add(&mut self, data: &Data) {
        let (l, s, h) = Self::of(data);
        self.leases += l;
        self.semaphores += s;
        self.holders += h;
    }
    fn sub(&mut self, data: &Data) {
        let (l, s, h) = Self::of(data);
        self.leases -= l;
        self.semaphores -= s;
        self.holders -= h;
    }
}

pub struct Db {
    segments: Box<[Segment]>,
    len: usize,
    volatile: usize,
    locks: LockCounts,
    /// Changes made through the mutators below (expiry excluded: the store logs it as DEL on its own). A write
    /// command is logged when this moved, so no handler counts its own changes and none can forget to.
    changes: u64,
    /// The same counts for every database of a store together, and whether any has events: what the store asks
    /// after every command, read without visiting each database.
    totals: Arc<Totals>,
    /// Next segment active expiry looks at.
    expire_cursor: usize,
    watched: hashbrown::HashMap<CompactBytes, Vec<Arc<WatchFlag>>>,
    events: Vec<ExpiredKey>,
    capture: Option<Box<Capture>>,
    expiry: Expiry,
}

/// What the databases of one store count together ([`Db::share_totals`]).
#[derive(Default, Debug)]
pub struct Totals {
    /// Every change of every database (the sum of [`Db::changes`]).
    changes: AtomicU64,
    /// Some database may hold expiry events not taken yet (set when one is added; cleared by the store before it
    /// takes them all).
    events: AtomicBool,
}

impl Totals {
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// True (and cleared) when some database may have events to take.
    pub fn take_events_flag(&self) -> bool {
        // (Under the store lock: a load and a store, no atomic exchange.)
        let set = self.events.load(Ordering::Relaxed);
        if set {
            self.events.store(false, Ordering::Relaxed);
        }
        set
    }
}

/// [`Db::count_changes`] on the two fields, for callers holding a segment borrowed.
fn count_changes(changes: &mut u64, totals: &Totals, n: u64) {
    *changes += n;
    totals.changes.store(totals.changes.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// Who removes keys whose deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// This database does (on access and actively), and each removal becomes an event the write log records.
    Active,
    /// A replica's database serving reads: an expired key reads as absent but stays until the primary's DEL arrives,
    /// so a primary that extended it in time (EXPIRE, PERSIST) is never contradicted.
    Hidden,
    /// A replica applying its primary's records: deadlines are ignored, the primary's order of DELs decides.
    Ignored,
}

fn hasher() -> &'static ahash::RandomState {
    static H: std::sync::OnceLock<ahash::RandomState> = std::sync::OnceLock::new();
    H.get_or_init(ahash::RandomState::new)
}

fn hash_key(key: &[u8]) -> u64 {
    hasher().hash_one(key)
}

/// Segment from bits 32..42: hashbrown uses the low bits for the bucket and the top 7 for its tag, so this slice
/// is independent of both.
fn segment_of(hash: u64) -> usize {
    ((hash >> 32) as usize) & (SEGMENTS - 1)
}

/// A hint to the CPU to start loading the cache line at `p`; never faults, whatever `p` is.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it does not access memory architecturally and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Keeps the segment's and the database's counts of keys with a deadline right when one key gains or loses one.
fn count_volatile(segment: &mut usize, total: &mut usize, was: bool, is: bool) {
    match (was, is) {
        (false, true) => {
            *segment += 1;
            *total += 1;
        }
        (true, false) => {
            *segment -= 1;
            *total -= 1;
        }
        _ => {}
    }
}

impl Default for Db {
    fn default() -> Self {
        Self::new()
    }
}

impl Db {
    pub fn new() -> Self {
        Db {
            segments: (0..SEGMENTS).map(|_| Segment::default()).collect(),
            len: 0,
            volatile: 0,
            locks: LockCounts::default(),
            changes: 0,
            totals: Arc::default(),
            expire_cursor: 0,
            watched: Default::default(),
            events: Vec::new(),
            capture: None,
            expiry: Expiry::Active,
        }
    }

    pub fn set_expiry(&mut self, expiry: Expiry) {
        self.expiry = expiry;
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Keys with a deadline.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }
    /// Counts `n` changes here and in the store's totals. (A plain load and store: every database is changed
    /// only under the store lock, which orders them; no atomic read-modify-write per change.)
    fn count_changes(&mut self, n: u64) {
        count_changes(&mut self.changes, &self.totals, n);
    }

    /// Makes this database count into `totals`, shared with the other databases of its store.
    pub fn share_totals(&mut self, totals: Arc<Totals>) {
        totals.changes.fetch_add(self.changes, Ordering::Relaxed);
        if !self.events.is_empty() {
            totals.events.store(true, Ordering::Relaxed);
        }
        self.totals = totals;
    }

    /// How many changes the mutators made so far (see the field).
    pub fn changes(&self) -> u64 {
        self.changes
    }
    /// Lock keys and holders, counted as they change.
    pub fn lock_counts(&self) -> LockCounts {
        self.locks
    }

    fn find_index(&self, key: &[u8]) -> (u64, usize) {
        let h = hash_key(key);
        (h, segment_of(h))
    }

    /// Keeps the entry at `key` for a snapshot in progress, before it changes (see [`Capture`]).
    fn before_change(&mut self, h: u64, s: usize, key: &[u8]) {
        let Some(cap) = self.capture.as_deref_mut() else { return };
        if s < cap.next_segment {
            return;
        }
        let saved = cap.saved.entry(s).or_default();
        if saved.contains_key(key) {
            return;
        }
        let current = self.segments[s].table.find(h, |e| &*e.0 == key).map(|e| e.1.clone());
        saved.insert(CompactBytes::new(key), current);
    }

    /// Removes `key` if it is past its deadline; true if it did.
    fn expire_if_due(&mut self, key: &[u8], now: u64) -> bool {
        if self.expiry != Expiry::Active {
            return false;
        }
        let (h, s) = self.find_index(key);
        self.expire_if_due_at(h, s, key, now)
    }

    /// [`Db::expire_if_due`] for a key already hashed (`find_index`): the callers that go on to look the key up
    /// hash it once.
    fn expire_if_due_at(&mut self, h: u64, s: usize, key: &[u8], now: u64) -> bool {
        if self.expiry != Expiry::Active {
            return false;
        }
        if self.segments[s].volatile == 0 {
            return false; // nothing in this segment has a deadline: no need to look the key up
        }
        if self.capture.is_some() {
            if !self.segments[s].table.find(h, |e| &*e.0 == key).is_some_and(|e| e.1.is_expired(now)) {
                return false;
            }
            self.before_change(h, s, key);
        }
        let seg = &mut self.segments[s];
        let Ok(occ) = seg.table.find_entry(h, |e| &*e.0 == key) else { return false };
        if !occ.get().1.is_expired(now) {
            return false;
        }
        let ((k, entry), _) = occ.remove();
        seg.volatile -= 1;
        self.volatile -= 1;
        self.len -= 1;
        self.locks.sub(&entry.data);
        self.touch(&k);
        self.totals.events.store(true, Ordering::Relaxed);
        self.events.push(ExpiredKey { key: k, was_lock: entry.data.is_lock(), lock_holders: entry.data.lock_holders() });
        true
    }

    /// Brings the table slots and bytes of the keys a pipelined batch is about to use into the CPU cache. Done one
    /// command at a time, each lookup waits for up to three dependent cache misses (control bytes, slot, key bytes);
    /// here every stage is started for all keys before any is needed, so the misses overlap. Only a hint: a wrong
    /// guess (another key with the same 7-bit tag) costs a useless prefetch, nothing else.
    pub fn prefetch<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        const MAX: usize = 128;
        let mut slots: [Option<&(CompactBytes, Entry)>; MAX] = [None; MAX];
        let mut filled = 0;
        let mut previous: Option<&[u8]> = None;
        // Stage 1: each probe reads only its control bytes (the tag match is accepted without looking at the
        // slot), so nothing depends on an earlier miss; the slot itself is prefetched. A key repeated from the
        // command before (a transaction's commands on one key) is not hashed again.
        for key in keys {
            if filled == MAX {
                break;
            }
            if previous == Some(key) {
                continue;
            }
            previous = Some(key);
            let (h, s) = self.find_index(key);
            if let Some(slot) = self.segments[s].table.find(h, |_| true) {
                prefetch(slot as *const (CompactBytes, Entry) as *const u8);
                slots[filled] = Some(slot);
                filled += 1;
            }
        }
        // Stage 2: the slots have arrived (or are on their way); prefetch what they point to.
        for &(k, e) in slots[..filled].iter().flatten() {
            if let Some(p) = k.heap_ptr() {
                prefetch(p);
            }
            match &e.data {
                Data::Str(v) => {
                    if let Some(p) = v.heap_ptr() {
                        prefetch(p)
                    }
                }
                Data::Lease(l) => prefetch(&**l as *const Lease as *const u8),
                Data::Semaphore(sem) => prefetch(&**sem as *const Semaphore as *const u8),
                Data::Hash(_) | Data::List(_) | Data::Set(_) | Data::ZSet(_) => {}
            }
        }
    }

    /// A batch's member lookups in large hashes, sets and sorted sets (HGET key field, SADD key member, ZADD key
    /// score member, ...): each is a chain of cache misses, so all of them are started before any runs, in two
    /// stages as in [`Db::prefetch`]. `pairs` gives (key, field or member); a key that holds anything else (or a
    /// small value, scanned in place) is skipped.
    pub fn prefetch_members<'k>(&self, pairs: impl Iterator<Item = (&'k [u8], &'k [u8])>) {
        const MAX: usize = 128;
        enum Found<'a> {
            Hash(&'a HashValue, u32),
            Set(&'a SetValue, u32),
            ZSet(&'a ZSetValue, u32),
        }
        let mut found: Vec<Found> = Vec::new();
        let mut last: Option<(&[u8], Option<&Data>)> = None;
        for (key, member) in pairs.take(MAX) {
            // Batches usually hit one value: look the key up once per run of it.
            let data = match last {
                Some((k, d)) if k == key => d,
                _ => {
                    let d = self.peek(key).map(|e| &e.data);
                    last = Some((key, d));
                    d
                }
            };
            match data {
                Some(Data::Hash(h)) => found.extend(h.prefetch_slot(member).map(|i| Found::Hash(h, i))),
                Some(Data::Set(s)) => found.extend(s.prefetch_slot(member).map(|i| Found::Set(s, i))),
                Some(Data::ZSet(z)) => found.extend(z.prefetch_slot(member).map(|i| Found::ZSet(z, i))),
                _ => {}
            }
        }
        for f in found {
            match f {
                Found::Hash(h, i) => h.prefetch_field_bytes(i),
                Found::Set(s, i) => s.prefetch_member_bytes(i),
                Found::ZSet(z, i) => z.prefetch_member_bytes(i),
            }
        }
    }

    /// The live entry at `key`.
    pub fn get(&mut self, key: &[u8], now: u64) -> Option<&Entry> {
        let (h, s) = self.find_index(key);
        self.expire_if_due_at(h, s, key, now);
        let hidden = self.expiry == Expiry::Hidden;
        self.segments[s].table.find(h, |e| &*e.0 == key).map(|e| &e.1).filter(|e| !(hidden && e.is_expired(now)))
    }

    /// The entry at `key` without expiring it (it may be past its deadline); for inspection only.
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        let (h, s) = self.find_index(key);
        self.segments[s].table.find(h, |e| &*e.0 == key).map(|e| &e.1)
    }

    /// The live value at `key`, to change in place. Marks the key modified for WATCH; deadlines change only
    /// through [`Db::set_expire`].
    pub fn get_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Data> {
        let (h, s) = self.find_index(key);
        self.expire_if_due_at(h, s, key, now);
        self.touch(key);
        self.before_change(h, s, key);
        let found = self.segments[s].table.find_mut(h, |e| &*e.0 == key).map(|e| &mut e.1.data);
        // Handed out to be changed: counted as a change.
        count_changes(&mut self.changes, &self.totals, found.is_some() as u64);
        found
    }

    /// Reads or changes the live value at `key` in place with one hash of the key (a collection write: the type
    /// check and the change in one lookup). `f` gets the value (`None` when missing) and says whether it changed
    /// it; only then is the key marked as [`Db::get_mut`] marks it (WATCH, the change count), so a write that
    /// changed nothing (SADD of members already there) is neither logged nor seen by WATCH. A snapshot in
    /// progress keeps the entry first either way (keeping an unchanged entry is harmless).
    pub fn modify<R>(&mut self, key: &[u8], now: u64, f: impl FnOnce(Option<&mut Data>) -> (R, bool)) -> R {
        let (h, s) = self.find_index(key);
        self.expire_if_due_at(h, s, key, now);
        self.before_change(h, s, key);
        let (out, changed) = f(self.segments[s].table.find_mut(h, |e| &*e.0 == key).map(|e| &mut e.1.data));
        if changed {
            self.touch(key);
            self.count_changes(1);
        }
        out
    }

    /// Changes the semaphore at `key` in place (its holders), keeping the holder count right; None when `key` holds
    /// no live semaphore. The lock engine changes holders only through here.
    pub fn update_semaphore<R>(&mut self, key: &[u8], now: u64, f: impl FnOnce(&mut Semaphore) -> R) -> Option<R> {
        let Some(Data::Semaphore(sem)) = self.get_mut(key, now) else { return None };
        let before = sem.holders.len();
        let out = f(sem);
        let after = sem.holders.len();
        self.locks.holders = self.locks.holders + after - before;
        Some(out)
    }

    pub fn exists(&mut self, key: &[u8], now: u64) -> bool {
        self.get(key, now).is_some()
    }

    /// Stores `entry` at `key`, replacing (and returning) what was there, live or not.
    pub fn insert(&mut self, key: &[u8], entry: Entry) -> Option<Entry> {
        self.touch(key);
        let (h, s) = self.find_index(key);
        self.before_change(h, s, key);
        let seg = &mut self.segments[s];
        let new_volatile = entry.expire_at != 0;
        self.locks.add(&entry.data);
        count_changes(&mut self.changes, &self.totals, 1);
        let old = match seg.table.find_mut(h, |e| &*e.0 == key) {
            Some(slot) => Some(std::mem::replace(&mut slot.1, entry)),
            None => {
                seg.table.insert_unique(h, (CompactBytes::new(key), entry), |e| hash_key(&e.0));
                self.len += 1;
                None
            }
        };
        if let Some(o) = &old {
            self.locks.sub(&o.data);
        }
        let old_volatile = old.as_ref().is_some_and(|o| o.expire_at != 0);
        count_volatile(&mut seg.volatile, &mut self.volatile, old_volatile, new_volatile);
        old
    }

    /// Plain `SET key value` (no deadline) in one hash and, for a live key, one probe: the hot path of the most
    /// common write. Refuses (false, nothing changed) when `key` holds a live lock.
    pub fn set_plain(&mut self, key: &[u8], value: &[u8], now: u64) -> bool {
        let (h, s) = self.find_index(key);
        let seg = &mut self.segments[s];
        if let Some(slot) = seg.table.find_mut(h, |e| &*e.0 == key) {
            if !slot.1.is_expired(now) {
                if slot.1.data.is_lock() {
                    return false;
                }
                let had_deadline = slot.1.expire_at != 0;
                slot.1 = Entry::new(Data::Str(CompactBytes::new(value)));
                count_volatile(&mut seg.volatile, &mut self.volatile, had_deadline, false);
                self.count_changes(1);
                self.touch(key);
                return true;
            }
        }
        // Missing, or dead: a dead entry goes through expiry first so it is logged and its waiters are woken.
        self.expire_if_due(key, now);
        self.insert(key, Entry::new(Data::Str(CompactBytes::new(value))));
        true
    }

    /// Removes `key`; returns the live entry that was there.
    pub fn remove(&mut self, key: &[u8], now: u64) -> Option<Entry> {
        let (h, s) = self.find_index(key);
        self.expire_if_due_at(h, s, key, now);
        self.before_change(h, s, key);
        let seg = &mut self.segments[s];
        let Ok(occ) = seg.table.find_entry(h, |e| &*e.0 == key) else { return None };
        let ((_, entry), _) = occ.remove();
        self.locks.sub(&entry.data);
        count_changes(&mut self.changes, &self.totals, 1);
        if entry.expire_at != 0 {
            seg.volatile -= 1;
            self.volatile -= 1;
        }
        self.len -= 1;
        self.touch(key);
        Some(entry)
    }

    /// Sets (or with 0 clears) the deadline of a live key; false if there is no such key.
    pub fn set_expire(&mut self, key: &[u8], expire_at: u64, now: u64) -> bool {
        let (h, s) = self.find_index(key);
        self.expire_if_due_at(h, s, key, now);
        self.touch(key);
        self.before_change(h, s, key);
        let seg = &mut self.segments[s];
        let Some(slot) = seg.table.find_mut(h, |e| &*e.0 == key) else { return false };
        let was = slot.1.expire_at != 0;
        slot.1.expire_at = expire_at;
        count_volatile(&mut seg.volatile, &mut self.volatile, was, expire_at != 0);
        self.count_changes(1);
        true
    }

    /// Removes every key. Watchers of keys that existed are told.
    pub fn clear(&mut self) {
        if !self.watched.is_empty() {
            let keys: Vec<CompactBytes> =
                self.watched.keys().filter(|k| self.peek(k).is_some()).cloned().collect();
            keys.iter().for_each(|k| self.touch(k));
        }
        if let Some(cap) = self.capture.as_deref_mut() {
            cap.broken = true;
        }
        self.segments.iter_mut().for_each(|s| *s = Segment::default());
        self.len = 0;
        self.volatile = 0;
        self.locks = LockCounts::default();
        self.count_changes(1);
    }

    /// Every key, live or not yet removed, with its entry; for snapshots and lock bookkeeping.
    pub fn iter(&self) -> impl Iterator<Item = (&CompactBytes, &Entry)> {
        self.segments.iter().flat_map(|s| s.table.iter().map(|(k, e)| (k, e)))
    }

    /// One step of SCAN: visits whole segments from `cursor` until `count` keys were collected (or `10 * count`
    /// segments were visited). Returns the next cursor (0 when done) and the live keys that `filter` accepts.
    /// A key present for the whole iteration is returned exactly once per full pass.
    pub fn scan(&self, cursor: u64, count: usize, now: u64, mut filter: impl FnMut(&[u8], &Entry) -> bool) -> (u64, Vec<CompactBytes>) {
        let mut seg = cursor as usize;
        let mut out = Vec::new();
        let mut visited = 0;
        let count = count.max(1);
        while seg < SEGMENTS && out.len() < count && visited < count.saturating_mul(10) {
            for (k, e) in self.segments[seg].table.iter() {
                if !e.is_expired(now) && filter(k, e) {
                    out.push(k.clone());
                }
            }
            seg += 1;
            visited += 1;
        }
        (if seg >= SEGMENTS { 0 } else { seg as u64 }, out)
    }

    /// A uniformly chosen segment's random live key; tries a bounded number of times.
    pub fn random_key(&self, now: u64) -> Option<CompactBytes> {
        use rand::Rng;
        if self.len == 0 {
            return None;
        }
        let mut rng = rand::thread_rng();
        for _ in 0..(SEGMENTS * 4) {
            let seg = &self.segments[rng.gen_range(0..SEGMENTS)];
            if seg.table.is_empty() {
                continue;
            }
            let n = rng.gen_range(0..seg.table.len());
            if let Some((k, e)) = seg.table.iter().nth(n) {
                if !e.is_expired(now) {
                    return Some(k.clone());
                }
            }
        }
        self.iter().find(|(_, e)| !e.is_expired(now)).map(|(k, _)| k.clone())
    }

    /// Removes expired keys from up to `max_segments` segments that hold volatile keys; returns how many went.
    pub fn active_expire(&mut self, now: u64, max_segments: usize) -> usize {
        if self.volatile == 0 || self.expiry != Expiry::Active {
            return 0;
        }
        let mut removed = 0;
        let mut looked = 0;
        let mut steps = 0;
        while looked < max_segments && steps < SEGMENTS {
            let s = self.expire_cursor;
            self.expire_cursor = (self.expire_cursor + 1) % SEGMENTS;
            steps += 1;
            if self.segments[s].volatile == 0 {
                continue;
            }
            looked += 1;
            let mut gone = Vec::new();
            let seg = &mut self.segments[s];
            let locks = &mut self.locks;
            let mut saved = match self.capture.as_deref_mut() {
                Some(cap) if s >= cap.next_segment => Some(cap.saved.entry(s).or_default()),
                _ => None,
            };
            seg.table.retain(|(k, e)| {
                if e.is_expired(now) {
                    if let Some(saved) = saved.as_mut() {
                        saved.entry(k.clone()).or_insert_with(|| Some(e.clone()));
                    }
                    gone.push(ExpiredKey { key: k.clone(), was_lock: e.data.is_lock(), lock_holders: e.data.lock_holders() });
                    locks.sub(&e.data);
                    false
                } else {
                    true
                }
            });
            seg.volatile -= gone.len();
            self.volatile -= gone.len();
            self.len -= gone.len();
            removed += gone.len();
            for g in &gone {
                self.touch(&g.key);
            }
            if !gone.is_empty() {
                self.totals.events.store(true, Ordering::Relaxed);
            }
            self.events.extend(gone);
        }
        removed
    }

    /// Keys this database removed by itself (expiry) since the last call.
    pub fn take_events(&mut self) -> Vec<ExpiredKey> {
        std::mem::take(&mut self.events)
    }

    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    // ----- snapshots -----

    /// Starts a snapshot of this database as it is now; [`Db::capture_segment`] then visits it a segment at a time.
    pub fn begin_capture(&mut self) {
        self.capture = Some(Box::default());
    }

    /// Ends (or abandons) the snapshot, dropping whatever it kept.
    pub fn end_capture(&mut self) {
        self.capture = None;
    }

    /// False when FLUSHDB/FLUSHALL/SWAPDB ran since [`Db::begin_capture`]: the snapshot must start over.
    pub fn capture_intact(&self) -> bool {
        self.capture.as_ref().is_some_and(|c| !c.broken)
    }

    /// Visits segment `seg` (segments must be visited in order, from 0) as it was when the capture began, including
    /// entries past their deadline that were not removed yet. Later changes to this segment are no longer kept.
    pub fn capture_segment(&mut self, seg: usize, mut f: impl FnMut(&[u8], &Entry)) {
        let Some(cap) = self.capture.as_deref_mut() else { return };
        debug_assert_eq!(cap.next_segment, seg);
        let saved = cap.saved.remove(&seg).unwrap_or_default();
        cap.next_segment = seg + 1;
        for (k, e) in self.segments[seg].table.iter() {
            match saved.get(k.as_slice()) {
                Some(Some(old)) => f(k, old),
                Some(None) => {}
                None => f(k, e),
            }
        }
        // Keys that existed at the start and are gone now.
        let (h_of, table) = (|k: &[u8]| hash_key(k), &self.segments[seg].table);
        for (k, old) in saved.iter() {
            if let Some(old) = old {
                if table.find(h_of(k), |e| e.0 == *k).is_none() {
                    f(k, old);
                }
            }
        }
    }

    // ----- WATCH -----

    pub fn watch(&mut self, key: &[u8], flag: Arc<WatchFlag>) {
        self.watched.entry(CompactBytes::new(key)).or_default().push(flag);
    }

    pub fn unwatch(&mut self, key: &[u8], flag: &Arc<WatchFlag>) {
        if let Some(v) = self.watched.get_mut(key) {
            v.retain(|f| !Arc::ptr_eq(f, flag));
            if v.is_empty() {
                self.watched.remove(key);
            }
        }
    }

    /// Marks `key` modified for every client watching it.
    pub fn touch(&self, key: &[u8]) {
        if self.watched.is_empty() {
            return;
        }
        if let Some(flags) = self.watched.get(key) {
            flags.iter().for_each(|f| f.mark());
        }
    }

    /// Marks every watched key modified (SWAPDB, FLUSHALL of another database's view).
    pub fn touch_all_watched(&self) {
        self.watched.values().flatten().for_each(|f| f.mark());
    }

    /// Exchanges contents with `other`, keeping each side's watchers (SWAPDB semantics).
    pub fn swap_contents(&mut self, other: &mut Db) {
        for cap in [self.capture.as_deref_mut(), other.capture.as_deref_mut()].into_iter().flatten() {
            cap.broken = true;
        }
        std::mem::swap(&mut self.segments, &mut other.segments);
        std::mem::swap(&mut self.len, &mut other.len);
        std::mem::swap(&mut self.volatile, &mut other.volatile);
        std::mem::swap(&mut self.locks, &mut other.locks);
        self.count_changes(1);
        other.count_changes(1);
        self.touch_all_watched();
        other.touch_all_watched();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Entry {
        Entry::new(Data::Str(CompactBytes::new(v.as_bytes())))
    }

    #[test]
    fn member_prefetch_of_sets_and_sorted_sets_is_only_a_hint() {
        let (set_limits, zset_limits) = (set::Limits::default(), zset::Limits::default());
        let mut big_set = SetValue::new();
        let mut big_zset = ZSetValue::new();
        for i in 0..1000 {
            let m = format!("a member name longer than inline {i}");
            big_set.insert(m.as_bytes(), &set_limits);
            big_zset.insert(m.as_bytes(), i as f64, &zset_limits);
        }
        let mut small_zset = ZSetValue::new();
        small_zset.insert(b"m", 1.0, &zset_limits);
        let mut db = Db::new();
        db.insert(b"set", Entry::new(Data::Set(Box::new(big_set))));
        db.insert(b"zset", Entry::new(Data::ZSet(big_zset)));
        db.insert(b"small", Entry::new(Data::ZSet(small_zset)));
        db.insert(b"str", s("x"));
        let names: Vec<String> = (0..300).map(|i| format!("a member name longer than inline {}", i * 7)).collect();
        let pairs = names.iter().flat_map(|n| [(&b"set"[..], n.as_bytes()), (&b"zset"[..], n.as_bytes())]);
        db.prefetch_members(pairs.chain([(&b"small"[..], &b"m"[..]), (&b"str"[..], &b"m"[..]), (&b"none"[..], &b"m"[..])]));
        let Some(Entry { data: Data::Set(set), .. }) = db.peek(b"set") else { panic!() };
        assert_eq!(set.len(), 1000);
        assert!(set.contains(b"a member name longer than inline 994"));
        assert!(!set.contains(b"a member name longer than inline 1001"));
        let Some(Entry { data: Data::ZSet(z), .. }) = db.peek(b"zset") else { panic!() };
        assert_eq!(z.score(b"a member name longer than inline 994"), Some(994.0));
        assert_eq!(db.len(), 4);
    }

    #[test]
    fn expiry_on_access_and_active() {
        let mut db = Db::new();
        db.insert(b"a", s("1"));
        db.insert(b"b", s("2"));
        db.set_expire(b"a", 100, 50);
        db.set_expire(b"b", 100, 50);
        assert!(db.get(b"a", 99).is_some());
        assert!(db.get(b"a", 100).is_none());
        assert_eq!(db.len(), 1);
        assert_eq!(db.active_expire(200, SEGMENTS), 1);
        assert_eq!(db.len(), 0);
        assert_eq!(db.volatile_len(), 0);
        assert_eq!(db.take_events().len(), 2);
    }

    #[test]
    fn scan_sees_stable_keys_despite_churn() {
        let mut db = Db::new();
        for i in 0..5000 {
            db.insert(format!("stable:{i}").as_bytes(), s("x"));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            let (next, keys) = db.scan(cursor, 10, 1, |_, _| true);
            seen.extend(keys.into_iter().map(|k| k.to_vec()));
            for j in 0..50 {
                db.insert(format!("churn:{round}:{j}").as_bytes(), s("y"));
                db.remove(format!("churn:{}:{j}", round.max(1) - 1).as_bytes(), 1);
            }
            round += 1;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for i in 0..5000 {
            assert!(seen.contains(format!("stable:{i}").as_bytes()));
        }
    }

    #[test]
    fn prefetch_is_only_a_hint() {
        let mut db = Db::new();
        db.prefetch([&b"missing"[..]].into_iter());
        let long = vec![b'k'; 100];
        db.insert(b"short", s("v"));
        db.insert(&long, s(&"x".repeat(100)));
        db.set_expire(b"short", 10, 1);
        let many: Vec<Vec<u8>> = (0..300).map(|i| format!("k{i}").into_bytes()).collect();
        db.prefetch([&b"short"[..], &long, b"missing", b""].into_iter().chain(many.iter().map(|k| &k[..])));
        // Nothing changed: not the values, not the deadlines (an expired key is not removed by a prefetch).
        assert_eq!(db.len(), 2);
        assert_eq!(db.peek(&long).map(|e| e.data.type_name()), Some("string"));
        assert!(db.get(b"short", 11).is_none());
    }

    #[test]
    fn watch_flags_fire_on_change_and_expiry() {
        let mut db = Db::new();
        let f = Arc::new(WatchFlag::default());
        db.insert(b"k", s("v"));
        db.set_expire(b"k", 10, 1);
        db.watch(b"k", f.clone());
        assert!(!f.is_dirty());
        db.get(b"k", 11);
        assert!(f.is_dirty());
    }
}
#[cfg(test)]
mod size_guard {
    use super::*;

    /// Slot size decides the memory of a large keyspace (bench/redis_compare.sh); keep it from growing unnoticed.
    #[test]
    fn table_slot_stays_small() {
        assert_eq!(std::mem::size_of::<Data>(), 16);
        assert_eq!(std::mem::size_of::<(CompactBytes, Entry)>(), 40);
    }
}
