//! The write log: every write, in execution order, as deterministic records with log sequence numbers (LSNs).
//!
//! Commands stage their records in `Store::log` while they hold the store lock; [`Journal::commit`] (also under
//! the store lock, so LSN order is execution order) numbers them and encodes each one once, in the framing of the
//! log file (`journal::format`: length, CRC, LSN, wall time, db), into the **backlog**. Consumers read the
//! backlog from their own cursors and never see each other: persistence writes the bytes to the append-only file,
//! a replication link sends the same bytes to a replica. A consumer that *holds* records (persistence) keeps
//! them until it has read them; otherwise the backlog keeps the newest `repl-backlog-size` bytes, and a consumer
//! that fell behind that learns it ([`ReadError::Lagged`]) and must start over from a snapshot, as a Redis replica
//! does when PSYNC cannot continue.
//!
//! [`Durability`] tracks, per LSN, what made it durable: the local fsync (published by persistence) and the
//! fsync acknowledgements of replicas; a connection that needs a write durable waits for both.

mod durability;
pub mod format;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

use format::{encode_command, encode_record, RecordKind, RECORD_HEADER_LEN};
use crate::store::Store;

pub use durability::{Counted, Durability, Need};

/// The open segment is sealed once it holds this much, so the backlog can drop old records in pieces even when
/// no consumer reads (a node whose replicas are all away).
const SEGMENT_BYTES: usize = 64 * 1024;

/// Records, encoded and framed, with consecutive LSNs `first_lsn..=last_lsn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub first_lsn: u64,
    pub last_lsn: u64,
    pub bytes: Bytes,
}

/// A consumer's handle, from [`Journal::subscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerId(usize);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The records this consumer needs next were dropped from the backlog; the oldest one kept is `oldest`.
    Lagged { oldest: u64 },
}

struct Consumer {
    /// The LSN this consumer reads next.
    next_lsn: u64,
    /// Records are kept until this consumer has read them, whatever the backlog's size.
    holds: bool,
}

struct Backlog {
    sealed: VecDeque<Segment>,
    sealed_bytes: usize,
    /// Records committed since the last seal; their LSNs start at `open_first`.
    open: Vec<u8>,
    open_first: u64,
    next_lsn: u64,
    /// `repl-backlog-size`: how many bytes of recent records stay for consumers that do not hold them.
    limit: usize,
    consumers: Vec<Option<Consumer>>,
}

impl Backlog {
    fn oldest(&self) -> u64 {
        match self.sealed.front() {
            Some(s) => s.first_lsn,
            None if !self.open.is_empty() => self.open_first,
            None => self.next_lsn,
        }
    }

    fn seal(&mut self) {
        if self.open.is_empty() {
            return;
        }
        let bytes = Bytes::from(std::mem::take(&mut self.open));
        self.sealed_bytes += bytes.len();
        self.sealed.push_back(Segment { first_lsn: self.open_first, last_lsn: self.next_lsn - 1, bytes });
        self.open_first = self.next_lsn;
    }

    /// Drops the oldest segments no holding consumer still needs, keeping at least `limit` bytes.
    fn trim(&mut self) {
        while let Some(front) = self.sealed.front() {
            let needed = self.consumers.iter().flatten().any(|c| c.holds && c.next_lsn <= front.last_lsn);
            let left = self.sealed_bytes - front.bytes.len() + self.open.len();
            if needed || left < self.limit {
                return;
            }
            self.sealed_bytes -= front.bytes.len();
            self.sealed.pop_front();
        }
    }
}

pub struct Journal {
    backlog: Mutex<Backlog>,
    /// LSN of the last record committed.
    last_lsn: AtomicU64,
    /// Wakes consumers that wait for records in async code (replication links) after each commit that added any.
    appended: tokio::sync::Notify,
    async_readers: AtomicUsize,
    pub durability: Durability,
}

impl Journal {
    pub fn new(backlog_limit: usize) -> Self {
        Journal {
            backlog: Mutex::new(Backlog {
                sealed: VecDeque::new(),
                sealed_bytes: 0,
                open: Vec::new(),
                open_first: 1,
                next_lsn: 1,
                limit: backlog_limit,
                consumers: Vec::new(),
            }),
            last_lsn: AtomicU64::new(0),
            appended: tokio::sync::Notify::new(),
            async_readers: AtomicUsize::new(0),
            durability: Durability::default(),
        }
    }

    /// At start-up, before anything is committed: the loaded data ends at `last_lsn`, which is durable locally.
    pub fn start_after(&self, last_lsn: u64) {
        let mut b = self.backlog.lock();
        assert!(b.sealed.is_empty() && b.open.is_empty(), "the journal already has records");
        b.next_lsn = last_lsn + 1;
        b.open_first = last_lsn + 1;
        for c in b.consumers.iter_mut().flatten() {
            c.next_lsn = last_lsn + 1;
        }
        self.last_lsn.store(last_lsn, Ordering::Release);
        self.durability.publish_local(last_lsn);
    }

    pub fn last_lsn(&self) -> u64 {
        self.last_lsn.load(Ordering::Acquire)
    }

    pub fn set_backlog_limit(&self, bytes: usize) {
        let mut b = self.backlog.lock();
        b.limit = bytes;
        b.trim();
    }

    /// Bytes the backlog holds now.
    pub fn backlog_bytes(&self) -> usize {
        let b = self.backlog.lock();
        b.sealed_bytes + b.open.len()
    }

    /// The oldest LSN the backlog still holds (the last LSN + 1 when it holds none).
    pub fn oldest_lsn(&self) -> u64 {
        self.backlog.lock().oldest()
    }

    /// Numbers the records staged in `store.log` and appends them to the backlog. Call under the store lock (the
    /// `&mut Store` says so): the order of LSNs is the order the writes ran in. Returns the last LSN and how many
    /// bytes have been committed since the backlog last handed records to a consumer.
    pub fn commit(&self, store: &mut Store) -> (u64, usize) {
        if store.log.is_empty() {
            return (self.last_lsn(), 0);
        }
        let mut b = self.backlog.lock();
        if b.open.is_empty() {
            b.open_first = b.next_lsn;
        }
        for rec in store.log.drain(..) {
            let lsn = b.next_lsn;
            b.next_lsn += 1;
            encode_record(&mut b.open, lsn, rec.wall_ms, rec.db as u32, RecordKind::Command, |o| encode_command(o, &rec.args));
        }
        let last = b.next_lsn - 1;
        (last, self.appended_up_to(b, last))
    }

    /// After records up to `last` were added to the open segment: seals it when it is full, publishes `last`, wakes
    /// the async consumers. Returns the open segment's size.
    fn appended_up_to(&self, mut b: parking_lot::MutexGuard<'_, Backlog>, last: u64) -> usize {
        let open = b.open.len();
        if open >= SEGMENT_BYTES {
            b.seal();
            b.trim();
        }
        drop(b);
        self.last_lsn.store(last, Ordering::Release);
        if self.async_readers.load(Ordering::Relaxed) > 0 {
            self.appended.notify_waiters();
        }
        open
    }

    /// A replica's commit: records its primary already numbered and framed (`first_lsn..=last_lsn`, checked by the
    /// caller), appended as they are, so this node's LSNs are its primary's. Under the store lock.
    pub fn append_replicated(&self, _store: &mut Store, bytes: &[u8], first_lsn: u64, last_lsn: u64) -> usize {
        let mut b = self.backlog.lock();
        assert_eq!(first_lsn, b.next_lsn, "replicated records out of order");
        if b.open.is_empty() {
            b.open_first = first_lsn;
        }
        b.open.extend_from_slice(bytes);
        b.next_lsn = last_lsn + 1;
        self.appended_up_to(b, last_lsn)
    }

    /// A replica loaded its primary's snapshot of LSN `lsn`: its own history is replaced, the next record is
    /// `lsn + 1`, every consumer continues there and the snapshot counts as durable when `durable`.
    pub fn reset_after(&self, lsn: u64, durable: bool) {
        let mut b = self.backlog.lock();
        b.sealed.clear();
        b.sealed_bytes = 0;
        b.open.clear();
        b.next_lsn = lsn + 1;
        b.open_first = lsn + 1;
        for c in b.consumers.iter_mut().flatten() {
            c.next_lsn = lsn + 1;
        }
        self.last_lsn.store(lsn, Ordering::Release);
        self.durability.reset_local(if durable { lsn } else { 0 });
    }

    /// Ends the open segment, so the next commit starts a new one (persistence starts a new log file there).
    pub fn seal(&self) {
        self.backlog.lock().seal();
    }

    /// A new consumer that reads from `from_lsn` on. `holds`: records stay until it has read them (persistence);
    /// otherwise it must keep up with the backlog. Fails when the backlog no longer has `from_lsn`.
    pub fn subscribe(&self, from_lsn: u64, holds: bool) -> Result<ConsumerId, ReadError> {
        let mut b = self.backlog.lock();
        let oldest = b.oldest();
        if from_lsn < oldest || from_lsn > b.next_lsn {
            return Err(ReadError::Lagged { oldest });
        }
        let consumer = Consumer { next_lsn: from_lsn, holds };
        let id = match b.consumers.iter().position(Option::is_none) {
            Some(i) => {
                b.consumers[i] = Some(consumer);
                i
            }
            None => {
                b.consumers.push(Some(consumer));
                b.consumers.len() - 1
            }
        };
        Ok(ConsumerId(id))
    }

    pub fn unsubscribe(&self, id: ConsumerId) {
        let mut b = self.backlog.lock();
        if let Some(slot) = b.consumers.get_mut(id.0) {
            *slot = None;
        }
        b.trim();
    }

    /// Everything committed that this consumer has not read yet, oldest first, and the cursor moves past it.
    pub fn read(&self, id: ConsumerId) -> Result<Vec<Segment>, ReadError> {
        let mut b = self.backlog.lock();
        let oldest = b.oldest();
        let next_lsn = b.next_lsn;
        let from = b.consumers[id.0].as_ref().expect("a subscribed consumer").next_lsn;
        if from < oldest {
            return Err(ReadError::Lagged { oldest });
        }
        if from == next_lsn {
            return Ok(Vec::new());
        }
        b.seal();
        let mut out = Vec::new();
        for seg in b.sealed.iter().filter(|s| s.last_lsn >= from) {
            out.push(if seg.first_lsn < from { skip_to(seg, from) } else { seg.clone() });
        }
        b.consumers[id.0].as_mut().expect("a subscribed consumer").next_lsn = next_lsn;
        b.trim();
        Ok(out)
    }

    /// The LSN this consumer reads next.
    pub fn position(&self, id: ConsumerId) -> u64 {
        self.backlog.lock().consumers[id.0].as_ref().map_or(0, |c| c.next_lsn)
    }

    /// A future that completes at the next commit that adds records (async consumers: `enable()` it before reading,
    /// so a commit in between is not missed). Register with [`Journal::reader_started`] first.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.appended.notified()
    }

    /// Tells commits that an async consumer may be waiting in [`Journal::appended`]; undo with `reader_stopped`.
    pub fn reader_started(&self) {
        self.async_readers.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reader_stopped(&self) {
        self.async_readers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The part of `seg` from LSN `from` on (a consumer that started in the middle of a segment).
fn skip_to(seg: &Segment, from: u64) -> Segment {
    let mut at = 0;
    let mut lsn = seg.first_lsn;
    while lsn < from {
        let len = u32::from_le_bytes(seg.bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        at += RECORD_HEADER_LEN + len;
        lsn += 1;
    }
    Segment { first_lsn: from, last_lsn: seg.last_lsn, bytes: seg.bytes.slice(at..) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::format::RecordReader;

    fn commit(j: &Journal, store: &mut Store, n: usize, size: usize) -> u64 {
        for i in 0..n {
            store.log(0, vec![Bytes::from_static(b"SET"), Bytes::from(format!("k{i}")), Bytes::from(vec![b'v'; size])]);
        }
        j.commit(store).0
    }

    fn store() -> Store {
        let mut s = Store::new(1);
        s.log_enabled = true;
        s
    }

    /// The LSNs in `segs`, read back through the file format's reader (checks framing and CRCs too).
    fn lsns(segs: &[Segment]) -> Vec<u64> {
        let mut out = Vec::new();
        for seg in segs {
            let mut file = crate::journal::format::FileHeader {
                kind: crate::journal::format::FileKind::Log,
                lsn: seg.first_lsn,
                created_wall_ms: 0,
            }
            .encode()
            .to_vec();
            file.extend_from_slice(&seg.bytes);
            let len = file.len() as u64;
            let mut r = RecordReader::new(&file[..], len).unwrap();
            let mut expect = seg.first_lsn;
            while let Some(rec) = r.next_record().unwrap() {
                assert_eq!(rec.lsn, expect);
                out.push(rec.lsn);
                expect += 1;
            }
            assert_eq!(expect, seg.last_lsn + 1);
        }
        out
    }

    #[test]
    fn lsns_follow_commit_order_from_the_loaded_end() {
        let j = Journal::new(1 << 20);
        j.start_after(41);
        let mut s = store();
        let c = j.subscribe(42, true).unwrap();
        assert_eq!(commit(&j, &mut s, 3, 1), 44);
        assert_eq!(commit(&j, &mut s, 2, 1), 46);
        assert_eq!(lsns(&j.read(c).unwrap()), (42..=46).collect::<Vec<_>>());
        assert!(j.read(c).unwrap().is_empty());
        assert_eq!(j.durability.local(), 41);
    }

    #[test]
    fn two_consumers_at_different_speeds_see_the_same_records() {
        let j = Journal::new(1 << 20);
        let mut s = store();
        let fast = j.subscribe(1, true).unwrap();
        let slow = j.subscribe(1, false).unwrap();
        let mut fast_seen = Vec::new();
        let mut slow_seen = Vec::new();
        for round in 0..50 {
            commit(&j, &mut s, 1 + round % 7, 10);
            fast_seen.extend(lsns(&j.read(fast).unwrap()));
            if round % 5 == 4 {
                slow_seen.extend(lsns(&j.read(slow).unwrap()));
            }
        }
        slow_seen.extend(lsns(&j.read(slow).unwrap()));
        let all: Vec<u64> = (1..=j.last_lsn()).collect();
        assert_eq!(fast_seen, all);
        assert_eq!(slow_seen, all);
        // Identical bytes too: both read the one encoding.
        let late = j.subscribe(10, false).unwrap();
        assert_eq!(lsns(&j.read(late).unwrap()), (10..=j.last_lsn()).collect::<Vec<_>>());
    }

    #[test]
    fn the_backlog_keeps_its_size_and_a_consumer_that_fell_behind_is_told() {
        let limit = 200 * 1024;
        let j = Journal::new(limit);
        let mut s = store();
        let slow = j.subscribe(1, false).unwrap();
        for _ in 0..100 {
            commit(&j, &mut s, 10, 1000);
        }
        // ~1 MB committed: the backlog kept at least the limit and at most the limit plus one segment.
        let kept = j.backlog_bytes();
        assert!(kept >= limit && kept <= limit + 2 * SEGMENT_BYTES, "kept {kept}");
        let oldest = j.oldest_lsn();
        assert!(oldest > 1);
        assert_eq!(j.read(slow), Err(ReadError::Lagged { oldest }));
        assert_eq!(j.subscribe(1, false), Err(ReadError::Lagged { oldest }));
        // A consumer starting at the oldest kept record reads all that is left, in order.
        let fresh = j.subscribe(oldest, false).unwrap();
        assert_eq!(lsns(&j.read(fresh).unwrap()), (oldest..=j.last_lsn()).collect::<Vec<_>>());
    }

    #[test]
    fn a_holding_consumer_keeps_records_beyond_the_limit_until_it_reads_them() {
        let j = Journal::new(16 * 1024);
        let mut s = store();
        let holder = j.subscribe(1, true).unwrap();
        for _ in 0..50 {
            commit(&j, &mut s, 10, 1000);
        }
        assert!(j.backlog_bytes() > 400 * 1024);
        assert_eq!(j.oldest_lsn(), 1);
        assert_eq!(lsns(&j.read(holder).unwrap()), (1..=500).collect::<Vec<_>>());
        assert!(j.backlog_bytes() < 16 * 1024 + 2 * SEGMENT_BYTES, "{}", j.backlog_bytes());
        // Gone with its holder: the backlog shrinks to its limit again.
        for _ in 0..50 {
            commit(&j, &mut s, 10, 1000);
        }
        j.unsubscribe(holder);
        assert!(j.backlog_bytes() < 16 * 1024 + 2 * SEGMENT_BYTES);
    }

    #[test]
    fn a_write_that_is_not_staged_takes_no_lsn() {
        let j = Journal::new(1024);
        let mut s = store();
        assert_eq!(j.commit(&mut s), (0, 0));
        assert_eq!(commit(&j, &mut s, 1, 1), 1);
        assert_eq!(j.commit(&mut s).0, 1);
    }
}
