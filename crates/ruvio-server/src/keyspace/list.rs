//! List values (LPUSH and friends), packed as Redis's quicklist packs them: a deque of chunks, each a byte buffer of
//! up to [`CHUNK_BYTES`] (Redis's default `list-max-listpack-size -2`, 8 KB nodes) holding its elements back to back.
//! A 12-byte element costs 13 bytes (Redis's listpack: 14), where a slot per element cost 16 and doubling wasted more.
//! `OBJECT ENCODING` says `quicklist`, as Redis 7.0 does for every list.
//!
//! Inside a chunk, elements are separated by one boundary each, and the boundary between two elements holds their
//! lengths XORed (the first holds the first length, the last the last): walking from either end, the length known so
//! far turns the next boundary into the next length, so the chunk is read from both ends with one byte per element
//! (listpack stores each length twice for the same reason). A boundary is 1 byte below 128, else 2 bytes with the
//! top bit set in both, so it reads the same from the left and from the right:
//!
//! ```text
//! [len0] e0 [len0^len1] e1 ... [len(k-2)^len(k-1)] e(k-1) [len(k-1)]
//! ```
//!
//! Each chunk keeps its live bytes between `start` and `end` of its buffer with free room on either side, so pushes
//! and pops at both ends of the list are O(1) amortised (the buffer grows to exactly what it holds while small, as a
//! small list's should, then by doubling up to CHUNK_BYTES, and shrinks when mostly empty). Elements longer than
//! [`PACKED_ELEMENT_MAX`] are a chunk of their own, stored as they are (their length is their buffer's), which keeps
//! every boundary within 2 bytes and every chunk within 8 KB whatever proto-max-bulk-len allows. Index-based reads walk
//! the chunks by their counts from the nearer end, then inside one chunk; changes in the middle (LSET, LINSERT, LREM)
//! rebuild the one chunk they touch, as Redis moves a listpack's bytes.

use std::collections::VecDeque;

/// Most bytes one packed chunk holds, boundaries included: 8 KB less the allocator's 8-byte header, so that a
/// full chunk takes exactly two pages of heap (an 8192-byte buffer took 8208 bytes, and a freed 16 KB read buffer
/// then held one chunk and an 8192-byte hole where two now fit: docs/benchmarks.md, "The 1M list's RSS"). Redis's
/// 8 KB listpack likewise counts its own 7-byte header and terminator.
pub const CHUNK_BYTES: usize = 8192 - 8;
/// Longer elements get a chunk of their own.
pub const PACKED_ELEMENT_MAX: usize = 4096;
/// Up to this many bytes a chunk's buffer grows to exactly what it holds (small lists are many); beyond, by doubling.
const EXACT_UP_TO: usize = 256;

// A boundary's value is below 2 * PACKED_ELEMENT_MAX, so 14 bits (2 bytes) always hold it.
const _: () = assert!(2 * PACKED_ELEMENT_MAX <= 1 << 14 && CHUNK_BYTES <= u16::MAX as usize);

fn width(v: usize) -> usize {
    if v < 0x80 {
        1
    } else {
        2
    }
}

/// Writes boundary `v` at `at`; returns its width.
fn put(buf: &mut [u8], at: usize, v: usize) -> usize {
    if v < 0x80 {
        buf[at] = v as u8;
        1
    } else {
        buf[at] = 0x80 | (v >> 7) as u8;
        buf[at + 1] = 0x80 | (v & 0x7f) as u8;
        2
    }
}

/// The boundary starting at `at`: (value, width).
fn read_fwd(buf: &[u8], at: usize) -> (usize, usize) {
    let b = buf[at] as usize;
    if b < 0x80 {
        (b, 1)
    } else {
        (((b & 0x7f) << 7) | (buf[at + 1] as usize & 0x7f), 2)
    }
}

/// The boundary ending just before `end`: (value, width).
fn read_back(buf: &[u8], end: usize) -> (usize, usize) {
    let b = buf[end - 1] as usize;
    if b < 0x80 {
        (b, 1)
    } else {
        (((buf[end - 2] as usize & 0x7f) << 7) | (b & 0x7f), 2)
    }
}

/// One chunk: packed elements in `buf[start..end]`, or (`big`) one element that is the whole of `buf`.
#[derive(Clone)]
struct Chunk {
    buf: Box<[u8]>,
    start: u16,
    end: u16,
    count: u16,
    big: bool,
}

impl Chunk {
    fn new() -> Chunk {
        Chunk { buf: Box::default(), start: 0, end: 0, count: 0, big: false }
    }

    fn with_capacity(cap: usize) -> Chunk {
        Chunk { buf: vec![0; cap].into_boxed_slice(), ..Chunk::new() }
    }

    fn big(e: &[u8]) -> Chunk {
        Chunk { buf: e.into(), start: 0, end: 0, count: 1, big: true }
    }

    fn count(&self) -> usize {
        self.count as usize
    }

    fn live(&self) -> usize {
        if self.big {
            self.buf.len()
        } else {
            (self.end - self.start) as usize
        }
    }

    fn iter(&self) -> ChunkIter<'_> {
        ChunkIter { buf: &self.buf, front: self.start as usize, prev: 0, back: self.end as usize, next: 0, left: self.count(), big: self.big }
    }

    fn get(&self, i: usize) -> &[u8] {
        let n = self.count();
        let e = if i < n / 2 { self.iter().nth(i) } else { self.iter().nth_back(n - 1 - i) };
        e.expect("index inside the chunk")
    }

    /// Makes room for `extra` more bytes at the back (or front) of the live bytes; the caller checked that the live
    /// bytes then stay within CHUNK_BYTES. False: a full-size buffer with little room left, where the list starts a
    /// new chunk instead (moving 8 KB for each push of a queue that pushes at one end and pops at the other would be
    /// O(chunk) per push).
    fn make_room(&mut self, extra: usize, at_back: bool) -> bool {
        let (start, end, cap) = (self.start as usize, self.end as usize, self.buf.len());
        if (at_back && cap - end >= extra) || (!at_back && start >= extra) {
            return true;
        }
        let live = end - start;
        let want = live + extra;
        // Moving the live bytes within the buffer is worth it when a quarter of it is still free afterwards: at
        // least cap/4 bytes of pushes before the next move.
        let cap = if want <= cap && cap - want >= cap / 4 {
            cap
        } else if cap >= CHUNK_BYTES {
            return false;
        } else if want <= EXACT_UP_TO {
            want
        } else {
            (cap * 2).clamp(want, CHUNK_BYTES)
        };
        self.relocate(cap, if at_back { 0 } else { cap - live });
        true
    }

    /// Moves the live bytes to offset `at` of a buffer of `cap` bytes (a new one unless `cap` is the current size).
    fn relocate(&mut self, cap: usize, at: usize) {
        let (start, end) = (self.start as usize, self.end as usize);
        if cap == self.buf.len() {
            self.buf.copy_within(start..end, at);
        } else {
            let mut buf = vec![0u8; cap].into_boxed_slice();
            buf[at..at + end - start].copy_from_slice(&self.buf[start..end]);
            self.buf = buf;
        }
        self.start = at as u16;
        self.end = (at + end - start) as u16;
    }

    /// Gives back a buffer left mostly empty by pops (halving thresholds keep this amortised O(1)).
    fn maybe_shrink(&mut self) {
        let (live, cap) = (self.live(), self.buf.len());
        if cap > EXACT_UP_TO && live * 4 < cap {
            let new_cap = (live * 2).max(EXACT_UP_TO);
            self.relocate(new_cap, (new_cap - live) / 2);
        }
    }

    /// Exactly the room the live bytes take (chunks built in one go).
    fn fit(&mut self) {
        if !self.big && self.buf.len() != self.live() {
            self.relocate(self.live(), 0);
        }
    }

    /// Appends `e` if it fits in this chunk (false: the list starts a new chunk).
    fn try_push_back(&mut self, e: &[u8]) -> bool {
        if self.big || e.len() > PACKED_ELEMENT_MAX {
            return false;
        }
        let n = e.len();
        // The last boundary holds the last length; it is replaced by (last ^ n), then come e and n.
        let (last, tw) = if self.count == 0 { (0, 0) } else { read_back(&self.buf, self.end as usize) };
        let add = width(last ^ n) + n + width(n);
        if self.live() - tw + add > CHUNK_BYTES {
            return false;
        }
        if !self.make_room(add - tw.min(add), true) {
            return false;
        }
        let mut at = self.end as usize - tw;
        at += put(&mut self.buf, at, last ^ n);
        self.buf[at..at + n].copy_from_slice(e);
        at += n;
        at += put(&mut self.buf, at, n);
        self.end = at as u16;
        self.count += 1;
        true
    }

    /// Prepends `e` if it fits in this chunk.
    fn try_push_front(&mut self, e: &[u8]) -> bool {
        if self.big || e.len() > PACKED_ELEMENT_MAX {
            return false;
        }
        let n = e.len();
        let (first, hw) = if self.count == 0 { (0, 0) } else { read_fwd(&self.buf, self.start as usize) };
        let add = width(n) + n + width(n ^ first);
        if self.live() - hw + add > CHUNK_BYTES {
            return false;
        }
        if !self.make_room(add - hw.min(add), false) {
            return false;
        }
        let start = self.start as usize + hw - add;
        let mut at = start + put(&mut self.buf, start, n);
        self.buf[at..at + n].copy_from_slice(e);
        at += n;
        put(&mut self.buf, at, n ^ first);
        self.start = start as u16;
        if self.count == 0 {
            self.end = (at + width(n)) as u16;
        }
        self.count += 1;
        true
    }

    /// Removes the last element; returns it if `keep` (else an empty vector: LTRIM copies nothing).
    fn pop_back(&mut self, keep: bool) -> Vec<u8> {
        if self.big {
            self.count = 0;
            return std::mem::take(&mut self.buf).into_vec();
        }
        let end = self.end as usize;
        let (l, tw) = read_back(&self.buf, end);
        let e_start = end - tw - l;
        let e = if keep { self.buf[e_start..end - tw].to_vec() } else { Vec::new() };
        if self.count == 1 {
            self.end = self.start;
        } else {
            // The boundary before e held (prev ^ l); it becomes the new last boundary, prev. It never outgrows the
            // bytes freed (prev takes 2 bytes only when (prev ^ l) or l is at least 128).
            let (v, bw) = read_back(&self.buf, e_start);
            let at = e_start - bw;
            self.end = (at + put(&mut self.buf, at, v ^ l)) as u16;
        }
        self.count -= 1;
        if self.count > 0 {
            self.maybe_shrink();
        }
        e
    }

    fn pop_front(&mut self, keep: bool) -> Vec<u8> {
        if self.big {
            self.count = 0;
            return std::mem::take(&mut self.buf).into_vec();
        }
        let start = self.start as usize;
        let (l, hw) = read_fwd(&self.buf, start);
        let e_end = start + hw + l;
        let e = if keep { self.buf[start + hw..e_end].to_vec() } else { Vec::new() };
        if self.count == 1 {
            self.start = self.end;
        } else {
            let (v, bw) = read_fwd(&self.buf, e_end);
            let next = v ^ l;
            let at = e_end + bw - width(next);
            put(&mut self.buf, at, next);
            self.start = at as u16;
        }
        self.count -= 1;
        if self.count > 0 {
            self.maybe_shrink();
        }
        e
    }
}

/// The elements of one chunk, from either end.
#[derive(Clone)]
struct ChunkIter<'a> {
    buf: &'a [u8],
    front: usize, // next boundary read from the front, and the length before it
    prev: usize,
    back: usize, // end of the next boundary read from the back, and the length after it
    next: usize,
    left: usize,
    big: bool,
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if self.big {
            return Some(self.buf);
        }
        let (v, w) = read_fwd(self.buf, self.front);
        let len = v ^ self.prev;
        let at = self.front + w;
        self.front = at + len;
        self.prev = len;
        Some(&self.buf[at..at + len])
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for ChunkIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if self.big {
            return Some(self.buf);
        }
        let (v, w) = read_back(self.buf, self.back);
        let len = v ^ self.next;
        let end = self.back - w;
        self.back = end - len;
        self.next = len;
        Some(&self.buf[end - len..end])
    }
}

impl ExactSizeIterator for ChunkIter<'_> {}

/// A run of a list's elements ([`ListValue::range`]): the chunk being read, then the ones after it.
#[derive(Clone)]
pub struct Range<'a> {
    chunks: std::collections::vec_deque::Iter<'a, Chunk>,
    cur: ChunkIter<'a>,
    left: usize,
}

impl<'a> Iterator for Range<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        loop {
            if let Some(e) = self.cur.next() {
                self.left -= 1;
                return Some(e);
            }
            self.cur = self.chunks.next()?.iter();
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Range<'_> {}

/// Chunks holding `elems` in order, each full but the last, each buffer exactly its size; `hint`: about how many
/// bytes they take (the first buffer starts that big, so rebuilding a small chunk does not take 8 KB).
fn pack<'e>(elems: impl Iterator<Item = &'e [u8]>, hint: usize) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut cur = Chunk::new();
    let flush = |cur: &mut Chunk, out: &mut Vec<Chunk>| {
        if cur.count > 0 {
            cur.fit();
            out.push(std::mem::replace(cur, Chunk::new()));
        }
    };
    for e in elems {
        if e.len() > PACKED_ELEMENT_MAX {
            flush(&mut cur, &mut out);
            out.push(Chunk::big(e));
            continue;
        }
        if cur.count == 0 {
            cur = Chunk::with_capacity(if out.is_empty() { hint.clamp(1, CHUNK_BYTES) } else { CHUNK_BYTES });
        }
        if !cur.try_push_back(e) {
            flush(&mut cur, &mut out);
            cur = Chunk::with_capacity(CHUNK_BYTES);
            let fitted = cur.try_push_back(e);
            debug_assert!(fitted);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// A list: see the module comment.
#[derive(Clone, Default)]
pub struct ListValue {
    chunks: VecDeque<Chunk>,
    len: usize,
}

impl ListValue {
    pub fn new() -> ListValue {
        ListValue::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push_back(&mut self, e: &[u8]) {
        self.len += 1;
        if let Some(c) = self.chunks.back_mut() {
            if c.try_push_back(e) {
                return;
            }
        }
        let c = if e.len() > PACKED_ELEMENT_MAX {
            Chunk::big(e)
        } else {
            let mut c = self.new_chunk(true);
            let fitted = c.try_push_back(e);
            debug_assert!(fitted);
            c
        };
        self.reserve_first();
        self.chunks.push_back(c);
    }

    pub fn push_front(&mut self, e: &[u8]) {
        self.len += 1;
        if let Some(c) = self.chunks.front_mut() {
            if c.try_push_front(e) {
                return;
            }
        }
        let c = if e.len() > PACKED_ELEMENT_MAX {
            Chunk::big(e)
        } else {
            let mut c = self.new_chunk(false);
            let fitted = c.try_push_front(e);
            debug_assert!(fitted);
            c
        };
        self.reserve_first();
        self.chunks.push_front(c);
    }

    fn reserve_first(&mut self) {
        if self.chunks.capacity() == 0 {
            // VecDeque's first push would take room for 4 chunks: a small list has one.
            self.chunks.reserve_exact(1);
        }
    }

    /// The chunk a push starts when the end chunk is full. It grows from nothing while the list is small; next to a
    /// packed chunk at least half full, it is a full-size buffer at once (its free room on the side pushed to): a
    /// long list skips the copies and the short-lived buffers of growing each chunk by doubling.
    fn new_chunk(&self, at_back: bool) -> Chunk {
        let end = if at_back { self.chunks.back() } else { self.chunks.front() };
        if !end.is_some_and(|c| !c.big && c.live() >= CHUNK_BYTES / 2) {
            return Chunk::new();
        }
        let mut c = Chunk::with_capacity(CHUNK_BYTES);
        if !at_back {
            c.start = CHUNK_BYTES as u16;
            c.end = CHUNK_BYTES as u16;
        }
        c
    }

    /// Pushes `elems` one by one at the back (or the front: the last pushed ends up first, as LPUSH a b c gives
    /// c b a). Into an empty list they are packed at once, in buffers of exactly their size, instead of growing one
    /// allocation per element.
    pub fn push_all<E: AsRef<[u8]>>(&mut self, elems: &[E], at_back: bool) {
        if self.is_empty() {
            let hint = elems.iter().map(|e| e.as_ref().len() + 2).sum();
            let chunks = if at_back { pack(elems.iter().map(|e| e.as_ref()), hint) } else { pack(elems.iter().rev().map(|e| e.as_ref()), hint) };
            self.len = elems.len();
            self.chunks = VecDeque::with_capacity(chunks.len());
            self.chunks.extend(chunks);
            return;
        }
        for e in elems {
            if at_back {
                self.push_back(e.as_ref());
            } else {
                self.push_front(e.as_ref());
            }
        }
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        self.pop_back_keeping(true)
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        self.pop_front_keeping(true)
    }

    fn pop_back_keeping(&mut self, keep: bool) -> Option<Vec<u8>> {
        let c = self.chunks.back_mut()?;
        let e = c.pop_back(keep);
        if c.count == 0 {
            self.chunks.pop_back();
        }
        self.len -= 1;
        Some(e)
    }

    fn pop_front_keeping(&mut self, keep: bool) -> Option<Vec<u8>> {
        let c = self.chunks.front_mut()?;
        let e = c.pop_front(keep);
        if c.count == 0 {
            self.chunks.pop_front();
        }
        self.len -= 1;
        Some(e)
    }

    /// The chunk holding position `i` (< len) and the position inside it, walking from the nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        debug_assert!(i < self.len);
        if i < self.len / 2 {
            let mut i = i;
            for (ci, c) in self.chunks.iter().enumerate() {
                if i < c.count() {
                    return (ci, i);
                }
                i -= c.count();
            }
        } else {
            let mut j = self.len - 1 - i;
            for (ci, c) in self.chunks.iter().enumerate().rev() {
                if j < c.count() {
                    return (ci, c.count() - 1 - j);
                }
                j -= c.count();
            }
        }
        unreachable!("the chunks' counts add up to len")
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        (i < self.len).then(|| {
            let (ci, off) = self.locate(i);
            self.chunks[ci].get(off)
        })
    }

    /// All elements, head first (double-ended: `.rev()` walks from the tail).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + Clone + '_ {
        self.chunks.iter().flat_map(Chunk::iter)
    }

    /// Elements `a..=b` (both inside the list), reached from the nearer end. Its exact length lets LRANGE write
    /// the reply's header before walking it once.
    pub fn range(&self, a: usize, b: usize) -> Range<'_> {
        debug_assert!(a <= b && b < self.len);
        let (ci, off) = self.locate(a);
        let mut chunks = self.chunks.range(ci..);
        let mut cur = chunks.next().expect("a is inside the list").iter();
        if off > 0 {
            cur.nth(off - 1);
        }
        Range { chunks, cur, left: b - a + 1 }
    }

    /// Replaces chunk `ci` by the chunks `f` builds from its elements (empty: the chunk goes), then merges small
    /// neighbours so that changes in the middle do not leave the list in many near-empty chunks.
    fn rebuild(&mut self, ci: usize, f: impl FnOnce(&Chunk) -> Vec<Chunk>) {
        let new = f(&self.chunks[ci]);
        let n = self.replace(ci, new);
        let last = (ci + n).min(self.chunks.len());
        // Pairs around the rebuilt ones, right to left so indices stay valid.
        for at in (ci.saturating_sub(1)..last).rev() {
            self.merge_pair(at);
        }
    }

    /// Puts `new` where chunk `ci` was; answers how many chunks that is.
    fn replace(&mut self, ci: usize, new: Vec<Chunk>) -> usize {
        let n = new.len();
        self.chunks.remove(ci);
        for (k, c) in new.into_iter().enumerate() {
            self.chunks.insert(ci + k, c);
        }
        n
    }

    /// Merges chunks `at` and `at + 1` when both are packed and together fill at most half a chunk.
    fn merge_pair(&mut self, at: usize) {
        let (Some(a), Some(b)) = (self.chunks.get(at), self.chunks.get(at + 1)) else { return };
        if a.big || b.big || a.live() + b.live() > CHUNK_BYTES / 2 {
            return;
        }
        let merged = pack(a.iter().chain(b.iter()), a.live() + b.live());
        debug_assert_eq!(merged.len(), 1);
        self.chunks.remove(at + 1);
        self.chunks[at] = merged.into_iter().next().expect("two non-empty chunks");
    }

    /// Sets element `i` (< len).
    pub fn set(&mut self, i: usize, e: &[u8]) {
        let (ci, off) = self.locate(i);
        self.rebuild(ci, |c| pack(c.iter().enumerate().map(|(j, x)| if j == off { e } else { x }), c.live() + e.len() + 4));
    }

    /// Inserts `e` before position `i` (<= len).
    pub fn insert(&mut self, i: usize, e: &[u8]) {
        if i == 0 {
            return self.push_front(e);
        }
        if i >= self.len {
            return self.push_back(e);
        }
        let (ci, off) = self.locate(i);
        self.len += 1;
        self.rebuild(ci, |c| pack(c.iter().take(off).chain(std::iter::once(e)).chain(c.iter().skip(off)), c.live() + e.len() + 4));
    }

    /// Removes element `i` (< len).
    pub fn remove(&mut self, i: usize) {
        let (ci, off) = self.locate(i);
        self.len -= 1;
        self.rebuild(ci, |c| pack(c.iter().enumerate().filter(|&(j, _)| j != off).map(|(_, x)| x), c.live()));
    }

    /// LREM: removes up to `limit` elements equal to `target`, the first ones (or the last ones with `from_back`);
    /// answers how many. Only chunks holding a match are rebuilt.
    pub fn remove_matching(&mut self, target: &[u8], limit: usize, from_back: bool) -> usize {
        let mut removed = 0;
        // Forward: ci is the next chunk to look at; backward: one past it.
        let mut ci = if from_back { self.chunks.len() } else { 0 };
        while removed < limit && if from_back { ci > 0 } else { ci < self.chunks.len() } {
            if from_back {
                ci -= 1;
            }
            let c = &self.chunks[ci];
            let total = c.iter().filter(|x| *x == target).count();
            let take = total.min(limit - removed);
            if take == 0 {
                ci += usize::from(!from_back);
                continue;
            }
            // The matches this chunk gives up: its first ones going forward, its last ones going backward.
            let keep_first = if from_back { total - take } else { 0 };
            let mut seen = 0;
            let new = pack(
                c.iter().filter(|x| {
                    if *x != target {
                        return true;
                    }
                    seen += 1;
                    seen <= keep_first || seen > keep_first + take
                }),
                c.live(),
            );
            let n = self.replace(ci, new);
            removed += take;
            self.len -= take;
            if !from_back {
                ci += n;
            }
        }
        if removed > 0 {
            for at in (0..self.chunks.len().saturating_sub(1)).rev() {
                self.merge_pair(at);
            }
        }
        removed
    }

    /// LTRIM: keeps elements `a..=b` (both inside the list): whole chunks go at once, the rest is popped (O(1)
    /// each, nothing copied out), so capping a list with LPUSH + LTRIM costs what the push added.
    pub fn trim(&mut self, a: usize, b: usize) {
        debug_assert!(a <= b && b < self.len);
        let mut drop_back = self.len - 1 - b;
        let mut drop_front = a;
        while drop_back > 0 {
            let n = self.chunks.back().expect("elements left").count();
            if n <= drop_back {
                drop_back -= n;
                self.len -= n;
                self.chunks.pop_back();
            } else {
                self.pop_back_keeping(false);
                drop_back -= 1;
            }
        }
        while drop_front > 0 {
            let n = self.chunks.front().expect("elements left").count();
            if n <= drop_front {
                drop_front -= n;
                self.len -= n;
                self.chunks.pop_front();
            } else {
                self.pop_front_keeping(false);
                drop_front -= 1;
            }
        }
    }

    pub fn clear(&mut self) {
        *self = ListValue::new();
    }

    /// Appends every element of `other` (snapshot records that continue a list).
    pub fn append(&mut self, other: &ListValue) {
        for e in other.iter() {
            self.push_back(e);
        }
    }

    /// Bytes held, roughly (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Chunk>() + self.chunks.iter().map(|c| c.buf.len()).sum::<usize>()
    }
}

impl PartialEq for ListValue {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for ListValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(String::from_utf8_lossy)).finish()
    }
}

/// Bytes held, roughly (MEMORY USAGE).
pub fn heap_size(l: &ListValue) -> usize {
    l.heap_size()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl ListValue {
        /// The layout's invariants: no empty chunk, counts adding up, chunks within bounds, big chunks only for big
        /// elements, and each chunk reading the same from both ends.
        fn check(&self) {
            assert_eq!(self.chunks.iter().map(Chunk::count).sum::<usize>(), self.len);
            for c in &self.chunks {
                assert!(c.count > 0, "an empty chunk stays");
                if c.big {
                    assert!(c.count == 1 && c.buf.len() > PACKED_ELEMENT_MAX);
                } else {
                    assert!(c.buf.len() <= CHUNK_BYTES && c.live() <= CHUNK_BYTES);
                    let fwd: Vec<&[u8]> = c.iter().collect();
                    let mut back: Vec<&[u8]> = c.iter().rev().collect();
                    back.reverse();
                    assert_eq!(fwd, back);
                    assert!(fwd.iter().all(|e| e.len() <= PACKED_ELEMENT_MAX));
                }
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushBack(usize, u8),
        PushFront(usize, u8),
        // Many elements of one size at once: lists of many chunks within few operations.
        PushMany(bool, usize, usize),
        PopBack,
        PopFront,
        Index(usize),
        Set(usize, usize, u8),
        Insert(usize, usize, u8),
        Remove(usize),
        Rem(u8, i8),
        Trim(usize, usize),
        Range(usize, usize),
    }

    /// Element sizes from empty to past a chunk, mostly small; the tag makes elements tell apart (and repeat, for
    /// LREM).
    fn size() -> impl Strategy<Value = usize> {
        prop_oneof![
            8 => 0usize..20,
            3 => 100usize..200,
            1 => 120usize..140,
            1 => 4090usize..4100,
            1 => 8000usize..9000,
        ]
    }

    fn elem(size: usize, tag: u8) -> Vec<u8> {
        let mut e = vec![b'a' + tag % 4; size];
        if let Some(b) = e.first_mut() {
            *b = b'0' + tag % 4;
        }
        e
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (size(), any::<u8>()).prop_map(|(s, t)| Op::PushBack(s, t)),
            4 => (size(), any::<u8>()).prop_map(|(s, t)| Op::PushFront(s, t)),
            1 => (any::<bool>(), 1usize..1500, prop_oneof![Just(0usize), Just(12), Just(130), Just(700)]).prop_map(|(b, n, s)| Op::PushMany(b, n, s)),
            3 => Just(Op::PopBack),
            3 => Just(Op::PopFront),
            2 => any::<usize>().prop_map(Op::Index),
            2 => (any::<usize>(), size(), any::<u8>()).prop_map(|(i, s, t)| Op::Set(i, s, t)),
            2 => (any::<usize>(), size(), any::<u8>()).prop_map(|(i, s, t)| Op::Insert(i, s, t)),
            2 => any::<usize>().prop_map(Op::Remove),
            1 => (any::<u8>(), -3i8..3).prop_map(|(t, c)| Op::Rem(t, c)),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Trim(a, b)),
            2 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Range(a, b)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
        // Against a VecDeque<Vec<u8>> model: every answer, the length, both iteration directions and the layout's
        // invariants after each operation.
        #[test]
        fn behaves_like_a_deque_of_byte_strings(ops in proptest::collection::vec(op(), 1..80)) {
            let mut l = ListValue::new();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                let len = m.len();
                match op {
                    Op::PushBack(s, t) => { let e = elem(s, t); l.push_back(&e); m.push_back(e); }
                    Op::PushFront(s, t) => { let e = elem(s, t); l.push_front(&e); m.push_front(e); }
                    Op::PushMany(back, n, s) => {
                        // Through push_all (packed at once into an empty list), and the model one by one.
                        let es: Vec<Vec<u8>> = (0..n).map(|i| elem(s, i as u8)).collect();
                        l.push_all(&es, back);
                        for e in es {
                            if back { m.push_back(e); } else { m.push_front(e); }
                        }
                    }
                    Op::PopBack => prop_assert_eq!(l.pop_back(), m.pop_back()),
                    Op::PopFront => prop_assert_eq!(l.pop_front(), m.pop_front()),
                    Op::Index(i) => {
                        let i = if len == 0 { i % 2 } else { i % (len + 1) };
                        prop_assert_eq!(l.get(i), m.get(i).map(|e| &e[..]));
                    }
                    Op::Set(i, s, t) if len > 0 => { let e = elem(s, t); l.set(i % len, &e); m[i % len] = e; }
                    Op::Insert(i, s, t) => { let e = elem(s, t); let i = i % (len + 1); l.insert(i, &e); m.insert(i, e); }
                    Op::Remove(i) if len > 0 => { l.remove(i % len); m.remove(i % len); }
                    Op::Rem(t, count) => {
                        // Targets that are present: the one-byte-tagged short elements (and the empty one).
                        let target = if t % 5 == 0 { Vec::new() } else { elem((t % 3) as usize + 1, t) };
                        let limit = if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
                        let mut want = 0;
                        if count >= 0 {
                            let mut i = 0;
                            while i < m.len() && want < limit {
                                if m[i] == target { m.remove(i); want += 1; } else { i += 1; }
                            }
                        } else {
                            let mut i = m.len();
                            while i > 0 && want < limit {
                                i -= 1;
                                if m[i] == target { m.remove(i); want += 1; }
                            }
                        }
                        prop_assert_eq!(l.remove_matching(&target, limit, count < 0), want);
                    }
                    Op::Trim(a, b) if len > 0 => {
                        let (a, b) = (a % len, b % len);
                        let (a, b) = (a.min(b), a.max(b));
                        l.trim(a, b);
                        m.truncate(b + 1);
                        m.drain(..a);
                    }
                    Op::Range(a, b) if len > 0 => {
                        let (a, b) = (a % len, b % len);
                        let (a, b) = (a.min(b), a.max(b));
                        let got: Vec<&[u8]> = l.range(a, b).collect();
                        let want: Vec<&[u8]> = m.range(a..=b).map(|e| &e[..]).collect();
                        prop_assert_eq!(got, want);
                    }
                    _ => {}
                }
                prop_assert_eq!(l.len(), m.len());
                l.check();
            }
            prop_assert!(l.iter().eq(m.iter().map(|e| &e[..])));
            prop_assert!(l.iter().rev().eq(m.iter().rev().map(|e| &e[..])));
            let copy = l.clone();
            prop_assert_eq!(&copy, &l);
        }
    }

    #[test]
    fn small_elements_cost_one_byte_each_beyond_their_bytes() {
        let mut l = ListValue::new();
        for i in 0..100_000 {
            l.push_back(format!("value:{i:06}").as_bytes());
        }
        l.check();
        let bytes: usize = l.chunks.iter().map(|c| c.buf.len()).sum();
        // 12 bytes + 1 boundary each, chunks nearly full (the last one may still have doubling room).
        assert!(bytes <= 100_000 * 13 + 2 * CHUNK_BYTES, "{bytes}");
        assert!(l.chunks.len() <= 100_000 * 13 / (CHUNK_BYTES - 16) + 2, "{}", l.chunks.len());
        // A queue that never holds much keeps its one chunk small.
        let mut q = ListValue::new();
        for i in 0..10_000 {
            q.push_front(format!("job:{i}").as_bytes());
            if i >= 5 {
                q.pop_back();
            }
        }
        assert_eq!(q.len(), 5);
        assert_eq!(q.chunks.len(), 1);
        assert!(q.chunks[0].buf.len() <= EXACT_UP_TO, "{}", q.chunks[0].buf.len());
    }
}
