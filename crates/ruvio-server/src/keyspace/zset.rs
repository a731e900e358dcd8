//! Sorted-set values (ZADD and friends).
//!
//! Two layouts, chosen as Redis chooses its encodings (and reported by `OBJECT ENCODING` under Redis 7.0's names):
//!
//! - `listpack` while the set is small (at most `zset-max-listpack-entries` members, none longer than
//!   `zset-max-listpack-value` bytes): the entries packed one after the other in one allocation
//!   (`packed::alloc_size`), in order by (score, member), each a compact score (an integer in as few bytes as it
//!   needs, one byte for 0 to 246; other doubles in 8) and the member with a LEB128 length: "member:3" with score
//!   3 takes 10 bytes, where Redis's listpack takes 12. Every lookup, rank or range start is a scan (at most the
//!   limit, 128 entries by default), as in Redis. The allocation is shared machinery with small hashes
//!   (`keyspace/packed.rs`), and the whole value is one thin pointer, so a key's slot holds it without another box.
//! - `skiplist` from the first write that breaks either limit on (one-way until the value is reloaded or copied
//!   into a new key, as in Redis): an order-statistic tree plus a hash index. The tree is a treap whose nodes live in
//!   one arena (`u32` links, each node counting the nodes below it), so a rank, the member at a rank, and the start
//!   of a score or lexicographic range are all O(log n) (Redis gets the same from its skiplist's spans). The index
//!   is a hash table of node numbers keyed by member, so each member is stored once. A node keeps its number for as
//!   long as its member is in the set (a freed node goes on a free list and is reused), which is what ZSCAN's cursor
//!   walks: a member present for a whole scan is returned, unless the set shrinks to a quarter of its arena
//!   meanwhile (the arena is then rebuilt smaller, renumbering the nodes: memory is given back rather than kept for
//!   a scan).
//!
//! A treap's shape depends on node priorities; here a node's priority is a hash of its number, so no random state
//! is kept and the expected depth is O(log n) whatever the insertion order (members never choose their numbers).

use std::cmp::Ordering;

use hashbrown::HashTable;

use super::packed::{put_str, read_str, same_bytes, str_len, PackedOr, View, MAX_PACKED};
use super::indexed::hash_of;
use super::CompactBytes;

/// A score in the tree's order. NaN never gets in (every command refuses it), so the partial order is total;
/// -0 and 0 compare equal as in Redis.
#[derive(Debug, Clone, Copy)]
pub struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// The set's order: by score, ties by member bytes.
fn order(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    Score(s1).cmp(&Score(s2)).then_with(|| m1.cmp(m2))
}

/// When a small sorted set stops being reported as `listpack` (`zset-max-listpack-entries`, `-value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_entries: usize,
    pub max_value: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_entries: 128, max_value: 64 }
    }
}

// ----- the order-statistic treap -----

const NIL: u32 = u32::MAX;

/// What a walk down the tree reads at each level: the score (members are compared only on a tie) and the links.
/// Members live apart, in `Tree::members`, so a node is 32 bytes, two to a cache line and never across two:
/// ZADD at 100k members spent half its time in the walk's cache misses, each node costing one or two lines
/// when its member sat beside it (docs/benchmarks.md, "Sorted-set nodes apart from their members").
#[derive(Debug, Clone)]
#[repr(C, align(32))]
struct Node {
    score: f64,
    left: u32,
    right: u32,
    /// Nodes in this subtree, this one included; 0 marks a free node (whose `left` links the free list).
    size: u32,
    /// The member's hash (`hash_of`), in bytes the alignment leaves spare: a removal finds the member's index entry
    /// without loading the member first, so the two cache misses overlap instead of following one another (ZPOPMIN
    /// on a large set spent most of its time there), and the index grows without reading any member.
    hash: u64,
}

/// The node's heap priority: a fixed hash of its number (splitmix64's finaliser).
fn priority(id: u32) -> u64 {
    let mut x = (id as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[derive(Debug, Clone)]
struct Tree {
    nodes: Vec<Node>,
    /// Node `i`'s member is `members[i]` (empty for a free node).
    members: Vec<CompactBytes>,
    root: u32,
    free: u32,
    len: usize,
    /// member -> node number.
    index: HashTable<u32>,
}

impl Tree {
    fn new() -> Self {
        Tree { nodes: Vec::new(), members: Vec::new(), root: NIL, free: NIL, len: 0, index: HashTable::new() }
    }

    fn size(&self, t: u32) -> usize {
        if t == NIL { 0 } else { self.nodes[t as usize].size as usize }
    }

    fn update(&mut self, t: u32) {
        let n = &self.nodes[t as usize];
        let s = 1 + self.size(n.left) + self.size(n.right);
        self.nodes[t as usize].size = s as u32;
    }

    fn find(&self, member: &[u8]) -> Option<u32> {
        let members = &self.members;
        self.index.find(hash_of(member), |&i| &*members[i as usize] == member).copied()
    }

    /// First stage of a batch prefetch (`Db::prefetch_members`): the node `member` may be at (the tag match is
    /// taken without comparing: only a hint), its member and its node on their way to the cache.
    fn prefetch_slot(&self, member: &[u8]) -> Option<u32> {
        let &i = self.index.find(hash_of(member), |_| true)?;
        if let (Some(m), Some(node)) = (self.members.get(i as usize), self.nodes.get(i as usize)) {
            super::prefetch(m as *const CompactBytes as *const u8);
            super::prefetch(node as *const Node as *const u8);
        }
        Some(i)
    }

    /// Second stage: start loading the bytes of node `i`'s member.
    fn prefetch_member_bytes(&self, i: u32) {
        if let Some(p) = self.members.get(i as usize).and_then(|m| m.heap_ptr()) {
            super::prefetch(p);
        }
    }

    fn member(&self, id: u32) -> &[u8] {
        &self.members[id as usize]
    }

    /// How node `a` orders against node `b` (by number: no member is copied to compare).
    fn cmp_ids(&self, a: u32, b: u32) -> Ordering {
        let (x, y) = (self.nodes[a as usize].score, self.nodes[b as usize].score);
        // Only a tie reads the members (another line each).
        Score(x).cmp(&Score(y)).then_with(|| self.member(a).cmp(self.member(b)))
    }

    /// Splits subtree `t` into the nodes ordered before node `id` and the rest.
    fn split(&mut self, t: u32, id: u32) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.cmp_ids(id, t) == Ordering::Greater {
            let (l, r) = self.split(self.nodes[t as usize].right, id);
            self.nodes[t as usize].right = l;
            self.update(t);
            (t, r)
        } else {
            let (l, r) = self.split(self.nodes[t as usize].left, id);
            self.nodes[t as usize].left = r;
            self.update(t);
            (l, t)
        }
    }

    /// Joins two subtrees, every node of `a` ordered before every node of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if priority(a) > priority(b) {
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.update(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.update(b);
            b
        }
    }

    /// Links the detached node `id` into the tree rooted at `root`; returns the new root. A loop rather than
    /// recursion (ZADD's hot path): down from the root while the nodes outrank `id` in priority, each subtree passed
    /// through growing by the one node; where `id` outranks the next, that subtree is split around it.
    fn link(&mut self, root: u32, id: u32) -> u32 {
        let pid = priority(id);
        let (mut parent, mut went_left, mut t) = (NIL, false, root);
        while t != NIL && pid <= priority(t) {
            self.nodes[t as usize].size += 1;
            parent = t;
            went_left = self.cmp_ids(id, t) == Ordering::Less;
            let n = &self.nodes[t as usize];
            t = if went_left { n.left } else { n.right };
        }
        let (l, r) = self.split(t, id);
        let n = &mut self.nodes[id as usize];
        n.left = l;
        n.right = r;
        self.update(id);
        self.set_child(parent, went_left, id, root)
    }

    /// Points `parent`'s left (or right) link at `child`; with no parent, `child` is the root. Returns the root.
    fn set_child(&mut self, parent: u32, left: bool, child: u32, root: u32) -> u32 {
        if parent == NIL {
            return child;
        }
        let p = &mut self.nodes[parent as usize];
        if left {
            p.left = child;
        } else {
            p.right = child;
        }
        root
    }

    /// Takes node `id` (at its current key) out of the tree rooted at `root`; returns the new root. Down from the
    /// root to it, each subtree passed through shrinking by the one node; its children merged take its place.
    fn unlink(&mut self, root: u32, id: u32) -> u32 {
        let (mut parent, mut went_left, mut t) = (NIL, false, root);
        while t != id {
            debug_assert!(t != NIL, "the node is in the tree");
            self.nodes[t as usize].size -= 1;
            parent = t;
            went_left = self.cmp_ids(id, t) == Ordering::Less;
            let n = &self.nodes[t as usize];
            t = if went_left { n.left } else { n.right };
        }
        let n = &self.nodes[id as usize];
        let merged = self.merge(n.left, n.right);
        self.set_child(parent, went_left, merged, root)
    }

    /// Takes the first (or last) node out of the tree rooted at `root` by following links only, without comparing
    /// members (the ZPOPMIN/ZPOPMAX path); returns the new root and the node taken.
    fn unlink_end(&mut self, root: u32, last: bool) -> (u32, u32) {
        let (mut parent, mut t) = (NIL, root);
        loop {
            let n = &self.nodes[t as usize];
            let inner = if last { n.right } else { n.left };
            if inner == NIL {
                break;
            }
            self.nodes[t as usize].size -= 1;
            parent = t;
            t = inner;
        }
        let n = &self.nodes[t as usize];
        let outer = if last { n.left } else { n.right };
        (self.set_child(parent, !last, outer, root), t)
    }

    fn attach(&mut self, id: u32) {
        let n = &mut self.nodes[id as usize];
        n.left = NIL;
        n.right = NIL;
        n.size = 1;
        self.root = self.link(self.root, id);
    }

    fn detach(&mut self, id: u32) {
        self.root = self.unlink(self.root, id);
    }

    /// Adds a member not in the set.
    fn insert_new(&mut self, member: &[u8], score: f64) {
        let hash = hash_of(member);
        let node = Node { score, left: NIL, right: NIL, size: 1, hash };
        let id = if self.free != NIL {
            let id = self.free;
            self.free = self.nodes[id as usize].left;
            self.nodes[id as usize] = node;
            self.members[id as usize] = CompactBytes::new(member);
            id
        } else {
            let id = u32::try_from(self.nodes.len()).ok().filter(|&i| i != NIL).expect("a sorted set holds fewer than 2^32 - 1 members");
            self.nodes.push(node);
            self.members.push(CompactBytes::new(member));
            id
        };
        let nodes = &self.nodes;
        self.index.insert_unique(hash, id, |&j| nodes[j as usize].hash);
        self.attach(id);
        self.len += 1;
    }

    fn set_score(&mut self, id: u32, score: f64) {
        self.detach(id);
        self.nodes[id as usize].score = score;
        self.attach(id);
    }

    fn remove_node(&mut self, id: u32) -> (CompactBytes, f64) {
        self.detach(id);
        self.free_node(id)
    }

    /// The first or last node, taken out of the tree and freed.
    fn pop_end(&mut self, last: bool) -> (CompactBytes, f64) {
        let (root, id) = self.unlink_end(self.root, last);
        self.root = root;
        self.free_node(id)
    }

    /// Drops a detached node from the index and puts it on the free list.
    fn free_node(&mut self, id: u32) -> (CompactBytes, f64) {
        let member_hash = self.nodes[id as usize].hash;
        self.index.find_entry(member_hash, |&j| j == id).expect("every node is indexed").remove();
        let member = std::mem::replace(&mut self.members[id as usize], CompactBytes::new(b""));
        let n = &mut self.nodes[id as usize];
        let score = n.score;
        n.size = 0;
        n.left = self.free;
        self.free = id;
        self.len -= 1;
        if self.nodes.len() >= 64 && self.len * 4 < self.nodes.len() {
            self.compact();
        }
        (member, score)
    }

    /// Rebuilds the arena without its free nodes once three quarters are free, so a set that shrank gives its memory
    /// back (amortised O(1) per removal). Node numbers change: a ZSCAN running across this may miss members.
    ///
    /// The members get new numbers in their order, so the treap (a heap on the numbers' fixed priorities, a search
    /// tree on the order) is built in one pass with a stack of its right spine, as a Cartesian tree is, instead of
    /// member by member: ZPOPMIN draining a large set rebuilt a third of it that way, link by link, the largest part
    /// of the pop's cost.
    fn compact(&mut self) {
        let mut old = std::mem::replace(self, Tree::new());
        let n = old.len;
        self.nodes.reserve_exact(n * 2);
        self.members.reserve_exact(n * 2);
        self.index = HashTable::with_capacity(n);
        let mut walk = old.cursor(0, true);
        let in_order: Vec<u32> = std::iter::from_fn(|| old.walk_next(&mut walk, true)).collect();
        debug_assert_eq!(in_order.len(), n);
        // The right spine so far; a node is final (its size known) when it leaves the spine.
        let mut spine: Vec<u32> = Vec::new();
        for (id, &x) in (0u32..).zip(&in_order) {
            let Node { score, hash, .. } = old.nodes[x as usize];
            self.members.push(std::mem::replace(&mut old.members[x as usize], CompactBytes::new(b"")));
            self.nodes.push(Node { score, left: NIL, right: NIL, size: 1, hash });
            let nodes = &self.nodes;
            self.index.insert_unique(hash, id, |&j| nodes[j as usize].hash);
            let mut below = NIL;
            while let Some(&top) = spine.last().filter(|&&top| priority(top) < priority(id)) {
                spine.pop();
                self.update(top);
                below = top;
            }
            self.nodes[id as usize].left = below;
            if let Some(&top) = spine.last() {
                self.nodes[top as usize].right = id;
            }
            spine.push(id);
        }
        while let Some(top) = spine.pop() {
            self.update(top);
            self.root = top;
        }
        self.len = n;
    }

    /// How many nodes come before the first one for which `before` is false (`before` must be true for a prefix
    /// of the order and false after it).
    fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        let (mut t, mut r) = (self.root, 0);
        while t != NIL {
            let n = &self.nodes[t as usize];
            if before(n.score, self.member(t)) {
                r += self.size(n.left) + 1;
                t = n.right;
            } else {
                t = n.left;
            }
        }
        r
    }

    /// The node at 0-based rank `k` (< len), with the path to it as an in-order cursor: the ancestors still to be
    /// visited after it (forward) or before it (backward).
    fn cursor(&self, mut k: usize, forward: bool) -> Vec<u32> {
        let mut stack = Vec::with_capacity(48);
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            let ls = self.size(n.left);
            match k.cmp(&ls) {
                Ordering::Less => {
                    if forward {
                        stack.push(t);
                    }
                    t = n.left;
                }
                Ordering::Equal => {
                    stack.push(t);
                    break;
                }
                Ordering::Greater => {
                    if !forward {
                        stack.push(t);
                    }
                    k -= ls + 1;
                    t = n.right;
                }
            }
        }
        stack
    }

    /// The next node of an in-order walk whose pending ancestors are on `stack` (as [`Tree::cursor`] leaves them),
    /// forward or backward; leaves the stack ready for the one after.
    fn walk_next(&self, stack: &mut Vec<u32>, forward: bool) -> Option<u32> {
        let id = stack.pop()?;
        let n = &self.nodes[id as usize];
        let mut t = if forward { n.right } else { n.left };
        while t != NIL {
            stack.push(t);
            let c = &self.nodes[t as usize];
            t = if forward { c.left } else { c.right };
        }
        Some(id)
    }

    fn select(&self, mut k: usize) -> u32 {
        let mut t = self.root;
        loop {
            let n = &self.nodes[t as usize];
            let ls = self.size(n.left);
            match k.cmp(&ls) {
                Ordering::Less => t = n.left,
                Ordering::Equal => return t,
                Ordering::Greater => {
                    k -= ls + 1;
                    t = n.right;
                }
            }
        }
    }

    fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.members.capacity() * std::mem::size_of::<CompactBytes>()
            + self.index.allocation_size()
            + self.members.iter().map(|m| m.heap_size()).sum::<usize>()
    }
}

// ----- the packed encoding -----
//
// Each entry is its score, then its member as a length-prefixed string (`packed::put_str`), in the set's order. The
// score's first byte says how it is stored: most scores are integers (ranks, counters, timestamps), kept in as few
// bytes as they need, as a listpack keeps them:
//
//   0x00..=0xF6  the integer itself (0 to 246): one byte
//   0xF7         any other double: its 8 bytes (little-endian bits)
//   0xF8..=0xFF  an integer in the next 1..=8 bytes (the tag minus 0xF7), two's complement, little-endian
//
// An integer is any score that converts to an i64 and back to the same bits (so -0, NaN and inf take 8 bytes;
// -0 never gets in anyway: insertion stores it as 0, as Redis does).

const SMALL_INT_MAX: u8 = 0xF6;
const TAG_DOUBLE: u8 = 0xF7;

fn as_int(s: f64) -> Option<i64> {
    let n = s as i64;
    ((n as f64).to_bits() == s.to_bits()).then_some(n)
}

/// Bytes an integer needs in two's complement (1..=8).
fn int_bytes(n: i64) -> usize {
    (1..8).find(|&k| {
        let shift = 64 - 8 * k as u32;
        (n << shift) >> shift == n
    })
    .unwrap_or(8)
}

fn score_len(s: f64) -> usize {
    match as_int(s) {
        Some(n) if (0..=SMALL_INT_MAX as i64).contains(&n) => 1,
        Some(n) => 1 + int_bytes(n),
        None => 9,
    }
}

/// Writes `s` at the start of `out` (at least `score_len(s)` bytes); returns the bytes written.
fn write_score(out: &mut [u8], s: f64) -> usize {
    match as_int(s) {
        Some(n) if (0..=SMALL_INT_MAX as i64).contains(&n) => {
            out[0] = n as u8;
            1
        }
        Some(n) => {
            let k = int_bytes(n);
            out[0] = TAG_DOUBLE + k as u8;
            out[1..=k].copy_from_slice(&n.to_le_bytes()[..k]);
            1 + k
        }
        None => {
            out[0] = TAG_DOUBLE;
            out[1..9].copy_from_slice(&s.to_bits().to_le_bytes());
            9
        }
    }
}

fn put_score(out: &mut Vec<u8>, s: f64) {
    let mut b = [0u8; 9];
    let k = write_score(&mut b, s);
    out.extend_from_slice(&b[..k]);
}

/// Reads the score at `*pos` (contents written by `put_score` only: well formed, or a bug that panics).
#[inline]
fn read_score(buf: &[u8], pos: &mut usize) -> f64 {
    let t = buf[*pos];
    *pos += 1;
    match t {
        0..=SMALL_INT_MAX => t as f64,
        TAG_DOUBLE => {
            let bits = u64::from_le_bytes(buf[*pos..*pos + 8].try_into().expect("8 bytes"));
            *pos += 8;
            f64::from_bits(bits)
        }
        _ => {
            let k = (t - TAG_DOUBLE) as usize;
            // Eight bytes in one load where the contents go on that far (nearly always: a member follows), of which
            // the shifts keep the score's k; copying exactly k bytes would be a call to memcpy per entry scanned.
            let raw = match buf.get(*pos..*pos + 8) {
                Some(eight) => u64::from_le_bytes(eight.try_into().expect("8 bytes")),
                None => {
                    let mut b = [0u8; 8];
                    b[..k].copy_from_slice(&buf[*pos..*pos + k]);
                    u64::from_le_bytes(b)
                }
            };
            *pos += k;
            let shift = 64 - 8 * k as u32;
            (((raw << shift) as i64) >> shift) as f64
        }
    }
}

/// Bytes of a packed score by its first byte, so skipping one is a single load: one for a small integer, 9 for
/// `TAG_DOUBLE`, 1 + k for an integer of k bytes.
const SCORE_BYTES: [u8; 256] = {
    let mut t = [1u8; 256];
    let mut tag = TAG_DOUBLE as usize;
    while tag < 256 {
        t[tag] = if tag == TAG_DOUBLE as usize { 9 } else { (1 + tag - TAG_DOUBLE as usize) as u8 };
        tag += 1;
    }
    t
};

/// Skips the score at `*pos` without decoding it (member lookups compare members only).
#[inline]
fn skip_score(buf: &[u8], pos: &mut usize) {
    *pos += SCORE_BYTES[buf[*pos] as usize] as usize;
}

/// Writes `score` and `member` as one entry into `out`, which is exactly `score_len + str_len` bytes.
fn write_entry(out: &mut [u8], score: f64, member: &[u8]) {
    let mut i = write_score(out, score);
    let mut n = member.len();
    while n >= 0x80 {
        out[i] = (n as u8 & 0x7f) | 0x80;
        n >>= 7;
        i += 1;
    }
    out[i] = n as u8;
    out[i + 1..].copy_from_slice(member);
}

#[inline]
fn read_entry<'a>(buf: &'a [u8], pos: &mut usize) -> (&'a [u8], f64) {
    let s = read_score(buf, pos);
    (read_str(buf, pos), s)
}


/// Where a member sits in packed contents.
struct Found {
    rank: usize,
    start: usize,
    end: usize,
    score: f64,
}

fn pack_find(buf: &[u8], member: &[u8]) -> Option<Found> {
    scan_for_member(buf, member).ok()
}

/// Looks for `member` comparing members only (scores are skipped, not decoded, and a member of another length costs
/// one comparison). Not there: the offset of the last entry, if any.
fn scan_for_member(buf: &[u8], member: &[u8]) -> Result<Found, Option<usize>> {
    // Each entry's place depends on the bytes of the one before, so the loop waits out every cache miss in turn;
    // asking for the contents' lines first lets those misses overlap (at most the first 4 KiB: a typical small set
    // whole, without flooding the cache for a larger one or one whose member is found early).
    for line in buf[..buf.len().min(4096)].chunks(64).skip(1) {
        super::prefetch(line.as_ptr());
    }
    let (mut pos, mut rank, mut last) = (0, 0, None);
    while pos < buf.len() {
        let start = pos;
        skip_score(buf, &mut pos);
        if same_bytes(read_str(buf, &mut pos), member) {
            let score = read_score(buf, &mut start.clone());
            return Ok(Found { rank, start, end: pos, score });
        }
        last = Some(start);
        rank += 1;
    }
    Err(last)
}

/// Where a member is in packed contents (its entry's bounds and score), and where an entry for it with a given
/// score belongs among the others (the offset of the first other entry ordered after it, or the end).
#[derive(Debug, Clone, Copy, PartialEq)]
struct PackPlace {
    found: Option<(usize, usize, f64)>,
    at: usize,
}

/// Finds a [`PackPlace`]: first the member, by the cheap member-only scan; a new member ordered after the last entry
/// (a sliding window's or a timeline's next entry, the common ZADD) then needs nothing more. Otherwise a second scan
/// decodes scores up to the entry's place.
fn pack_place(buf: &[u8], member: &[u8], score: f64) -> PackPlace {
    let found = match scan_for_member(buf, member) {
        Ok(f) => Some((f.start, f.end, f.score)),
        Err(None) => None,
        Err(Some(last)) => {
            let (m, s) = read_entry(buf, &mut last.clone());
            if order(s, m, score, member) == Ordering::Less {
                return PackPlace { found: None, at: buf.len() };
            }
            None
        }
    };
    PackPlace { found, at: pack_place_by_order(buf, member, score) }
}

/// Offset of the first entry other than `member`'s that is ordered after `(score, member)` (the end if none).
fn pack_place_by_order(buf: &[u8], member: &[u8], score: f64) -> usize {
    let mut pos = 0;
    while pos < buf.len() {
        let start = pos;
        let (m, s) = read_entry(buf, &mut pos);
        // Greater than (score, member) with the same member bytes means the member's own entry (a higher score).
        if order(s, m, score, member) == Ordering::Greater && !same_bytes(m, member) {
            return start;
        }
    }
    buf.len()
}

/// Byte offset of the entry at rank `k` (the contents' length when `k` is the count or beyond).
fn pack_offset(buf: &[u8], k: usize) -> usize {
    let mut pos = 0;
    for _ in 0..k {
        if pos >= buf.len() {
            break;
        }
        read_entry(buf, &mut pos);
    }
    pos
}

/// The entries of packed contents, from a byte offset on.
struct PackIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        (self.pos < self.buf.len()).then(|| read_entry(self.buf, &mut self.pos))
    }
}

/// Members in order (or reverse order) from a starting rank.
pub struct Iter<'a> {
    repr: IterRepr<'a>,
}

enum IterRepr<'a> {
    Pack(PackIter<'a>),
    /// Entries have no back links: the offsets of those to visit, last first.
    PackBack { buf: &'a [u8], offsets: Vec<u32> },
    Tree { tree: &'a Tree, stack: Vec<u32>, forward: bool },
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.repr {
            IterRepr::Pack(it) => it.next(),
            IterRepr::PackBack { buf, offsets } => {
                let mut pos = offsets.pop()? as usize;
                Some(read_entry(buf, &mut pos))
            }
            IterRepr::Tree { tree, stack, forward } => {
                let tree: &'a Tree = tree;
                let id = tree.walk_next(stack, *forward)?;
                Some((tree.member(id), tree.nodes[id as usize].score))
            }
        }
    }
}

/// The score as a set stores it: -0 as 0, as Redis does.
fn stored_score(score: f64) -> f64 {
    if score == 0.0 { 0.0 } else { score }
}

/// What [`ZSetValue::place`] found: the member's current score and, in the packed layout, where its entry goes
/// (with the contents' length and count then, so a placement for other contents is recognised and not used).
#[derive(Debug)]
pub struct Placement {
    current: Option<f64>,
    score_bits: u64,
    pack: Option<(PackPlace, usize, usize)>,
}

impl Placement {
    /// The member's score when placed (`None`: not in the set).
    pub fn current(&self) -> Option<f64> {
        self.current
    }
}

// ----- the value -----

/// A sorted set: packed entries or a boxed tree behind one thin pointer (`keyspace/packed.rs`), so a key's slot
/// holds it without another box.
pub struct ZSetValue {
    inner: PackedOr<Tree>,
}

impl Default for ZSetValue {
    fn default() -> Self {
        ZSetValue { inner: PackedOr::pack(&[], 0) }
    }
}

impl Clone for ZSetValue {
    fn clone(&self) -> Self {
        ZSetValue { inner: self.inner.clone() }
    }
}

impl std::fmt::Debug for ZSetValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(|(m, s)| (String::from_utf8_lossy(m), s))).finish()
    }
}

impl ZSetValue {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        match self.inner.view() {
            View::Pack { count, .. } => count,
            View::Big(t) => t.len,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self.inner.view() {
            View::Pack { buf, .. } => pack_find(buf, member).map(|f| f.score),
            View::Big(t) => t.find(member).map(|id| t.nodes[id as usize].score),
        }
    }
    /// First stage of a batch prefetch (see `Db::prefetch_members`); nothing for a packed set.
    pub(super) fn prefetch_slot(&self, member: &[u8]) -> Option<u32> {
        match self.inner.view() {
            View::Big(t) => t.prefetch_slot(member),
            View::Pack { .. } => None,
        }
    }
    /// Second stage: start loading the bytes of the member at node `i`.
    pub(super) fn prefetch_member_bytes(&self, i: u32) {
        if let View::Big(t) = self.inner.view() {
            t.prefetch_member_bytes(i);
        }
    }
    /// True in the packed (`listpack`) layout.
    pub fn is_packed(&self) -> bool {
        !self.inner.is_big()
    }
    pub fn encoding(&self) -> &'static str {
        if self.is_packed() { "listpack" } else { "skiplist" }
    }

    fn fits(limits: &Limits, len: usize, longest: usize) -> bool {
        len <= limits.max_entries && longest <= limits.max_value
    }

    /// Takes the layout the limits call for now (a copy or a reload starts small again).
    pub fn refit(&mut self, limits: &Limits) {
        let longest = self.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        let small = Self::fits(limits, self.len(), longest);
        if small && !self.is_packed() {
            let mut content = Vec::new();
            for (m, s) in self.iter() {
                put_score(&mut content, s);
                put_str(&mut content, m);
            }
            if content.len() <= MAX_PACKED {
                self.inner = PackedOr::pack(&content, self.len());
            }
        } else if !small {
            self.grow();
        }
    }

    /// Moves a packed set into the tree layout.
    fn grow(&mut self) {
        let View::Pack { buf, count } = self.inner.view() else { return };
        let mut t = Tree::new();
        t.nodes.reserve(count + 1);
        t.members.reserve(count + 1);
        for (m, s) in (PackIter { buf, pos: 0 }) {
            t.insert_new(m, s);
        }
        self.inner = PackedOr::big(t);
    }

    /// Sets `member`'s score; returns the old one.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: &Limits) -> Option<f64> {
        let score = stored_score(score);
        let place = match self.inner.view() {
            View::Pack { buf, .. } => Some(pack_place(buf, member, score)),
            View::Big(_) => None,
        };
        self.insert_at(place, member, score, limits)
    }

    /// `member`'s score, and where an entry for it with `score` goes: ZADD decides from the score whether to write,
    /// then writes with [`insert_placed`](Self::insert_placed) without scanning a packed set's entries again.
    pub fn place(&self, member: &[u8], score: f64) -> Placement {
        let score = stored_score(score);
        match self.inner.view() {
            View::Pack { buf, count } => {
                let pack = pack_place(buf, member, score);
                Placement { current: pack.found.map(|f| f.2), score_bits: score.to_bits(), pack: Some((pack, buf.len(), count)) }
            }
            View::Big(t) => Placement { current: t.find(member).map(|id| t.nodes[id as usize].score), score_bits: score.to_bits(), pack: None },
        }
    }

    /// [`insert`](Self::insert) with what [`place`](Self::place) found on this set, which nothing has changed since.
    /// A placement made for another score, or for contents of another size, is not used (the scan is done again).
    pub fn insert_placed(&mut self, placement: Placement, member: &[u8], score: f64, limits: &Limits) -> Option<f64> {
        let score = stored_score(score);
        let place = match (placement.pack, self.inner.view()) {
            (Some((pack, len, count)), View::Pack { buf, count: now }) if (len, count) == (buf.len(), now) && placement.score_bits == score.to_bits() => {
                debug_assert_eq!(pack, pack_place(buf, member, score), "placement made on other contents");
                Some(pack)
            }
            (_, View::Pack { buf, .. }) => Some(pack_place(buf, member, score)),
            (_, View::Big(_)) => None,
        };
        self.insert_at(place, member, score, limits)
    }

    /// Sets `member`'s score (already as stored) given its place in the packed contents (`None`: in the tree).
    fn insert_at(&mut self, place: Option<PackPlace>, member: &[u8], score: f64, limits: &Limits) -> Option<f64> {
        if let (Some(PackPlace { found, at }), View::Pack { buf, count }) = (place, self.inner.view()) {
            let len = buf.len();
            let entry_len = score_len(score) + str_len(member);
            match found {
                Some((start, end, prev)) => {
                    if prev.to_bits() != score.to_bits() {
                        let fill = |hole: &mut [u8]| write_entry(hole, score, member);
                        if at == end {
                            // Its place in the order does not change: rewrite the entry where it is.
                            self.inner.splice_with(start, end, entry_len, 0, fill);
                        } else if at < start {
                            self.inner.splice(start, end, &[], 0);
                            self.inner.splice_with(at, at, entry_len, 0, fill);
                        } else {
                            self.inner.splice_with(at, at, entry_len, 0, fill);
                            self.inner.splice(start, end, &[], 0);
                        }
                    }
                    return Some(prev);
                }
                None if count < limits.max_entries && member.len() <= limits.max_value && len + entry_len <= MAX_PACKED => {
                    self.inner.splice_with(at, at, entry_len, 1, |hole| write_entry(hole, score, member));
                    return None;
                }
                None => self.grow(),
            }
        }
        let t = self.inner.big_mut().expect("grown above");
        if let Some(id) = t.find(member) {
            let prev = t.nodes[id as usize].score;
            if prev.to_bits() != score.to_bits() {
                t.set_score(id, score);
            }
            return Some(prev);
        }
        t.insert_new(member, score);
        None
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        if let View::Pack { buf, .. } = self.inner.view() {
            let f = pack_find(buf, member)?;
            self.inner.splice(f.start, f.end, &[], -1);
            return Some(f.score);
        }
        let t = self.inner.big_mut().expect("not packed");
        let id = t.find(member)?;
        Some(t.remove_node(id).1)
    }

    /// Removes the members of ranks `start..end` (clamped to the set); returns how many went. Packed: one splice.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if start >= end {
            return 0;
        }
        if let View::Pack { buf, .. } = self.inner.view() {
            let a = pack_offset(buf, start);
            let mut b = a;
            for _ in start..end {
                read_entry(buf, &mut b);
            }
            self.inner.splice(a, b, &[], -((end - start) as isize));
            return end - start;
        }
        let t = self.inner.big_mut().expect("not packed");
        for _ in start..end {
            let id = t.select(start);
            t.remove_node(id);
        }
        end - start
    }

    /// 0-based rank from the lowest score.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        if let View::Pack { buf, .. } = self.inner.view() {
            return pack_find(buf, member).map(|f| f.rank);
        }
        let score = self.score(member)?;
        Some(self.count_before(|s, m| order(s, m, score, member) == Ordering::Less))
    }

    /// How many members come before the first one for which `before(score, member)` is false; `before` must hold
    /// for a prefix of the order only (e.g. "score below x"). O(log n) in the tree, a scan of the packed entries.
    pub fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match self.inner.view() {
            View::Pack { buf, .. } => (PackIter { buf, pos: 0 }).take_while(|&(m, s)| before(s, m)).count(),
            View::Big(t) => t.count_before(before),
        }
    }

    /// Members in order from rank `start` on (O(log n) to start, then O(1) per member on average).
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        let repr = match self.inner.view() {
            View::Pack { buf, .. } => IterRepr::Pack(PackIter { buf, pos: pack_offset(buf, start) }),
            View::Big(t) => IterRepr::Tree { tree: t, stack: if start < t.len { t.cursor(start, true) } else { Vec::new() }, forward: true },
        };
        Iter { repr }
    }

    /// Members in reverse order from rank `start` (counted from the lowest score) down to rank 0.
    pub fn iter_down_from(&self, start: usize) -> Iter<'_> {
        let repr = match self.inner.view() {
            View::Pack { buf, count } => {
                let n = start.saturating_add(1).min(count);
                let mut offsets = Vec::with_capacity(n);
                let mut pos = 0;
                for _ in 0..n {
                    offsets.push(pos as u32);
                    read_entry(buf, &mut pos);
                }
                IterRepr::PackBack { buf, offsets }
            }
            View::Big(t) => {
                let start = start.min(t.len.wrapping_sub(1));
                IterRepr::Tree { tree: t, stack: if t.len > 0 { t.cursor(start, false) } else { Vec::new() }, forward: false }
            }
        };
        Iter { repr }
    }

    /// In score order (ties by member).
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// The member at rank `i` in score order (random picks). O(log n) in the tree, a scan of the packed entries.
    pub fn nth(&self, i: usize) -> Option<(&[u8], f64)> {
        match self.inner.view() {
            View::Pack { .. } => self.iter_from(i).next(),
            View::Big(t) if i < t.len => {
                let id = t.select(i);
                Some((t.member(id), t.nodes[id as usize].score))
            }
            View::Big(_) => None,
        }
    }

    /// Positions ZSCAN's cursor walks: in the tree layout node numbers (stable while a member stays), some free.
    /// (A packed set is scanned whole with [`ZSetValue::iter`].)
    pub fn slots(&self) -> usize {
        match self.inner.view() {
            View::Pack { count, .. } => count,
            View::Big(t) => t.nodes.len(),
        }
    }

    /// The member at scan position `i`, if one is there.
    pub fn slot(&self, i: usize) -> Option<(&[u8], f64)> {
        match self.inner.view() {
            View::Pack { .. } => self.nth(i),
            View::Big(t) => t.nodes.get(i).filter(|n| n.size > 0).map(|n| (t.member(i as u32), n.score)),
        }
    }

    fn pop_at(&mut self, last: bool) -> Option<(CompactBytes, f64)> {
        if let View::Pack { buf, count } = self.inner.view() {
            if count == 0 {
                return None;
            }
            let start = if last { pack_offset(buf, count - 1) } else { 0 };
            let mut end = start;
            let (m, s) = read_entry(buf, &mut end);
            let m = CompactBytes::new(m);
            self.inner.splice(start, end, &[], -1);
            return Some((m, s));
        }
        let t = self.inner.big_mut().expect("not packed");
        if t.len == 0 {
            return None;
        }
        Some(t.pop_end(last))
    }

    pub fn pop_first(&mut self) -> Option<(CompactBytes, f64)> {
        self.pop_at(false)
    }
    pub fn pop_last(&mut self) -> Option<(CompactBytes, f64)> {
        self.pop_at(true)
    }

    /// Bytes held on the heap, roughly (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match self.inner.view() {
            View::Pack { .. } => self.inner.packed_size().expect("packed"),
            View::Big(t) => std::mem::size_of::<Tree>() + t.heap_size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn order_rank_and_update() {
        for limits in [Limits::default(), Limits { max_entries: 0, max_value: 0 }] {
            let l = &limits;
            let mut z = ZSetValue::new();
            assert_eq!(z.insert(b"b", 2.0, l), None);
            assert_eq!(z.insert(b"a", 2.0, l), None);
            assert_eq!(z.insert(b"c", 1.0, l), None);
            let order: Vec<&[u8]> = z.iter().map(|(m, _)| m).collect();
            assert_eq!(order, vec![&b"c"[..], b"a", b"b"]);
            assert_eq!(z.rank(b"b"), Some(2));
            assert_eq!(z.insert(b"c", 3.0, l), Some(1.0));
            assert_eq!(z.rank(b"c"), Some(2));
            assert_eq!(z.count_before(|s, _| s < 2.5), 2);
            assert_eq!(z.iter_down_from(1).count(), 2);
            assert_eq!(z.remove(b"a"), Some(2.0));
            assert_eq!(z.len(), 2);
            assert_eq!(z.pop_first().map(|(m, _)| m.to_vec()), Some(b"b".to_vec()));
        }
    }

    #[test]
    fn encoding_switches_once_and_refits() {
        let l = Limits { max_entries: 2, max_value: 4 };
        let mut z = ZSetValue::new();
        z.insert(b"a", 1.0, &l);
        z.insert(b"b", 1.0, &l);
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"c", 1.0, &l);
        assert_eq!(z.encoding(), "skiplist");
        z.remove(b"c");
        assert_eq!(z.encoding(), "skiplist", "one-way, as Redis");
        z.refit(&l);
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"longer", 1.0, &l);
        assert_eq!(z.encoding(), "skiplist");
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Insert member, score, and how: 0 `insert`, 1 `place` then `insert_placed`, 2 the same with a placement
        /// made for another score (which must not be used).
        Insert(u8, f64, u8),
        Remove(u8),
        RemoveRanks(usize, usize),
        PopFirst,
        PopLast,
        Refit,
    }

    /// Scores of every packed form (one-byte integers and their edges, multi-byte and negative integers, the
    /// largest ones, fractions, infinities, -0) with ties among them.
    fn score() -> impl Strategy<Value = f64> {
        prop_oneof![
            3 => (-5i8..5).prop_map(|s| s as f64 / 2.0),
            2 => proptest::sample::select(vec![
                f64::NEG_INFINITY, f64::INFINITY, -0.0, 246.0, 247.0, 255.0, 256.0, -128.0, -129.0, 32767.0,
                1_733_400_000_123.0, -1_733_400_000_123.0, 9007199254740993.0, 9.223372036854775807e18,
                -9.223372036854775808e18, 1e300, -1e-300, 0.1, f64::MAX, f64::MIN_POSITIVE,
            ]),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..60, score(), 0u8..3).prop_map(|(m, s, how)| Op::Insert(m, s, how)),
            2 => (0u8..60).prop_map(Op::Remove),
            1 => (0usize..12, 0usize..12).prop_map(|(a, n)| Op::RemoveRanks(a, a + n)),
            1 => Just(Op::PopFirst),
            1 => Just(Op::PopLast),
            1 => Just(Op::Refit),
        ]
    }

    #[test]
    fn packed_scores_round_trip_bit_exact() {
        let edge = [0.0, 1.0, 246.0, 247.0, -1.0, 127.0, 128.0, -129.0, 65535.0, 1e15, -1e15, 2f64.powi(53), 2f64.powi(63), -2f64.powi(63)];
        let other = [0.5, -0.0, f64::INFINITY, f64::NEG_INFINITY, 1e300, 2f64.powi(64), 0.1, f64::MIN_POSITIVE];
        for s in edge.iter().chain(&other) {
            let mut out = Vec::new();
            put_score(&mut out, *s);
            assert_eq!(out.len(), score_len(*s), "{s}");
            let mut pos = 0;
            assert_eq!(read_score(&out, &mut pos).to_bits(), s.to_bits(), "{s}");
            assert_eq!(pos, out.len());
            // Followed by a member, as in a set: an integer score is then read with one 8-byte load.
            let end = out.len();
            out.extend_from_slice(&[0xA5; 8]);
            let mut pos = 0;
            assert_eq!(read_score(&out, &mut pos).to_bits(), s.to_bits(), "{s} followed by other bytes");
            assert_eq!(pos, end);
            let mut skipped = 0;
            skip_score(&out, &mut skipped);
            assert_eq!(skipped, end, "{s} skipped");
        }
        assert_eq!(score_len(246.0), 1);
        assert_eq!(score_len(247.0), 3, "247 needs two bytes in two's complement");
        assert_eq!(score_len(127.0), 1);
        assert_eq!(score_len(-128.0), 2);
        assert_eq!(score_len(-1.0), 2);
        assert_eq!(score_len(1_733_400_000_123.0), 7, "a millisecond timestamp");
        assert_eq!(score_len(0.5), 9);
        // The bench's small sets: 10 bytes an entry ("member:3", score 3), 8 bytes of header, in the 120 bytes of
        // the 128-byte chunk glibc's malloc gives for them (`packed::alloc_size`).
        let mut z = ZSetValue::new();
        for i in 0..10 {
            z.insert(format!("member:{i}").as_bytes(), i as f64, &Limits::default());
        }
        assert_eq!((z.encoding(), z.heap_size()), ("listpack", 120));
        assert_eq!(std::mem::size_of::<ZSetValue>(), 8);
    }

    fn name(m: u8) -> Vec<u8> {
        // Some members longer than the inline size, so heap-held members are moved and freed too.
        if m % 7 == 0 { format!("a-long-member-name-{m:03}").into_bytes() } else { format!("m{m:02}").into_bytes() }
    }

    proptest! {
        // Against a model (a sorted vector of (score, member)): every operation's answer, then the order, every
        // rank, every member at a rank, range starts, and both iteration directions from every start, in both
        // layouts (limits that keep the set packed, and limits that switch it to the tree at once or midway, by
        // entry count or by a member's length), with the layout itself checked after every operation: packed until
        // a new member would break a limit, then the tree until a refit finds everything fits again.
        #[test]
        fn behaves_like_a_sorted_vector(
            ops in proptest::collection::vec(op(), 1..160),
            max_entries in prop_oneof![Just(0usize), Just(8), Just(128)],
            max_value in prop_oneof![Just(3usize), Just(64)],
        ) {
            let limits = Limits { max_entries, max_value };
            let mut z = ZSetValue::new();
            let mut model: Vec<(f64, Vec<u8>)> = Vec::new();
            let mut big = false;
            for op in ops {
                match op {
                    Op::Insert(m, s, how) => {
                        let m = name(m);
                        let s = if s == 0.0 { 0.0 } else { s };
                        let prev = model.iter().position(|(_, x)| *x == m).map(|i| model.remove(i).0);
                        if prev.is_none() && (model.len() >= max_entries || m.len() > max_value) {
                            big = true;
                        }
                        model.push((s, m.clone()));
                        let got = match how {
                            0 => z.insert(&m, s, &limits),
                            _ => {
                                let placed_for = if how == 1 { s } else { -s + 1.5 };
                                let placement = z.place(&m, placed_for);
                                prop_assert_eq!(placement.current().map(f64::to_bits), prev.map(f64::to_bits));
                                z.insert_placed(placement, &m, s, &limits)
                            }
                        };
                        prop_assert_eq!(got.map(f64::to_bits), prev.map(f64::to_bits));
                    }
                    Op::Remove(m) => {
                        let m = name(m);
                        let prev = model.iter().position(|(_, x)| *x == m).map(|i| model.remove(i).0);
                        prop_assert_eq!(z.remove(&m), prev);
                    }
                    Op::RemoveRanks(a, b) => {
                        let (a2, b2) = (a.min(model.len()), b.min(model.len()));
                        model.drain(a2..b2);
                        prop_assert_eq!(z.remove_ranks(a, b), b2 - a2);
                    }
                    Op::PopFirst | Op::PopLast => {
                        model.sort_by(|a, b| order(a.0, &a.1, b.0, &b.1));
                        let want = if matches!(op, Op::PopFirst) { (!model.is_empty()).then(|| model.remove(0)) } else { model.pop() };
                        let got = if matches!(op, Op::PopFirst) { z.pop_first() } else { z.pop_last() };
                        prop_assert_eq!(got.map(|(m, s)| (s, m.to_vec())), want);
                    }
                    Op::Refit => {
                        z.refit(&limits);
                        big = !(model.len() <= max_entries && model.iter().all(|(_, m)| m.len() <= max_value));
                    }
                }
                model.sort_by(|a, b| order(a.0, &a.1, b.0, &b.1));
                prop_assert_eq!(z.len(), model.len());
                prop_assert_eq!(z.encoding(), if big { "skiplist" } else { "listpack" });
            }
            let all: Vec<(f64, Vec<u8>)> = z.iter().map(|(m, s)| (s, m.to_vec())).collect();
            prop_assert_eq!(&all, &model);
            // Scores come back bit for bit (prop_assert_eq on f64 would let -0 pass for 0).
            let bits = |v: &[(f64, Vec<u8>)]| v.iter().map(|(s, _)| s.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&all), bits(&model));
            let copy = z.clone();
            prop_assert_eq!(copy.iter().map(|(m, s)| (s, m.to_vec())).collect::<Vec<_>>(), all.clone());
            for (r, (s, m)) in model.iter().enumerate() {
                prop_assert_eq!(z.rank(m), Some(r));
                prop_assert_eq!(z.score(m), Some(*s));
                prop_assert_eq!(z.nth(r).map(|(m, s)| (s, m.to_vec())), Some((*s, m.clone())));
                let fwd: Vec<(f64, Vec<u8>)> = z.iter_from(r).map(|(m, s)| (s, m.to_vec())).collect();
                prop_assert_eq!(&fwd[..], &model[r..]);
                let back: Vec<(f64, Vec<u8>)> = z.iter_down_from(r).map(|(m, s)| (s, m.to_vec())).collect();
                let mut want = model[..=r].to_vec();
                want.reverse();
                prop_assert_eq!(back, want);
            }
            prop_assert_eq!(z.nth(model.len()), None);
            prop_assert_eq!(z.iter_from(model.len()).count(), 0);
            for bound in -6..6 {
                let b = bound as f64 / 2.0;
                prop_assert_eq!(z.count_before(|s, _| s < b), model.iter().filter(|(s, _)| *s < b).count());
                prop_assert_eq!(z.count_before(|s, _| s <= b), model.iter().filter(|(s, _)| *s <= b).count());
            }
            // ZSCAN's positions hold every member exactly once.
            let mut scanned: Vec<(f64, Vec<u8>)> = (0..z.slots()).filter_map(|i| z.slot(i)).map(|(m, s)| (s, m.to_vec())).collect();
            scanned.sort_by(|a, b| order(a.0, &a.1, b.0, &b.1));
            prop_assert_eq!(scanned, model);
        }
    }

    #[test]
    fn a_set_that_shrinks_gives_its_arena_back() {
        let l = Limits::default();
        let mut z = ZSetValue::new();
        for i in 0..1000u32 {
            z.insert(format!("member-number-{i:04}").as_bytes(), (i % 10) as f64, &l);
        }
        assert_eq!(z.slots(), 1000);
        for i in (0..1000u32).filter(|i| i % 10 != 3) {
            assert_eq!(z.remove(format!("member-number-{i:04}").as_bytes()), Some((i % 10) as f64));
        }
        assert!(z.slots() <= 400, "arena of {} slots for {} members", z.slots(), z.len());
        let want: Vec<Vec<u8>> = (0..100u32).map(|k| format!("member-number-{:04}", k * 10 + 3).into_bytes()).collect();
        assert_eq!(z.iter().map(|(m, _)| m.to_vec()).collect::<Vec<_>>(), want);
        assert_eq!(z.rank(b"member-number-0503"), Some(50));
        assert_eq!((0..z.slots()).filter(|&i| z.slot(i).is_some()).count(), 100);
    }

    /// The tree's structure: in order by (score, member), each node's priority at least its children's, each size
    /// its subtree's, every node indexed under its member and keeping that member's hash. Returns the members in order.
    fn check_treap(t: &Tree) -> Vec<Vec<u8>> {
        fn walk(t: &Tree, n: u32, out: &mut Vec<u32>) -> u32 {
            if n == NIL {
                return 0;
            }
            let node = &t.nodes[n as usize];
            assert_eq!(node.hash, hash_of(t.member(n)), "the hash kept in node {n}");
            for child in [node.left, node.right] {
                assert!(child == NIL || priority(child) <= priority(n), "heap order at node {n}");
            }
            let left = walk(t, node.left, out);
            out.push(n);
            let size = left + 1 + walk(t, node.right, out);
            assert_eq!(node.size, size, "size of node {n}");
            size
        }
        let mut ids = Vec::new();
        assert_eq!(walk(t, t.root, &mut ids) as usize, t.len);
        assert!(ids.windows(2).all(|w| t.cmp_ids(w[0], w[1]) == Ordering::Less), "search order");
        assert!(ids.iter().all(|&id| t.find(t.member(id)) == Some(id)), "index");
        assert_eq!(t.index.len(), t.len);
        ids.iter().map(|&id| t.member(id).to_vec()).collect()
    }

    #[test]
    fn draining_a_large_set_rebuilds_a_valid_treap_at_each_compaction() {
        let l = Limits::default();
        let mut z = ZSetValue::new();
        // Ties on the score (members decide) and distinct scores, inserted out of order.
        let name = |i: u32| format!("m{:05}", (i * 7919) % 20_000).into_bytes();
        for i in 0..20_000u32 {
            z.insert(&name(i), ((i * 7919) % 20_000 / 3) as f64, &l);
        }
        let (mut compactions, mut slots) = (0, z.slots());
        let mut popped = Vec::new();
        while z.len() > 10 {
            popped.push(z.pop_first().expect("not empty").0.to_vec());
            if z.len() % 3 == 0 {
                z.pop_last();
            }
            if z.slots() != slots {
                compactions += 1;
                let View::Big(t) = z.inner.view() else { panic!("still the tree layout") };
                let members = check_treap(t);
                assert_eq!(members, z.iter().map(|(m, _)| m.to_vec()).collect::<Vec<_>>());
                // The rebuilt tree goes on working: an insert, a rank, a removal.
                z.insert(b"zzz-late", -1.0, &l);
                assert_eq!(z.rank(b"zzz-late"), Some(0));
                assert_eq!(z.remove(b"zzz-late"), Some(-1.0));
                slots = z.slots();
            }
        }
        assert!(compactions >= 3, "{compactions} compactions");
        assert!(popped.windows(2).all(|w| w[0] < w[1]), "pops in order");
        let View::Big(t) = z.inner.view() else { panic!("still the tree layout") };
        check_treap(t);
    }

    #[test]
    fn tree_nodes_fill_half_a_cache_line_each() {
        // What ZADD's walk down the tree reads per level; its member is elsewhere (see `Node`).
        assert_eq!(std::mem::size_of::<Node>(), 32);
        assert_eq!(std::mem::align_of::<Node>(), 32);
    }

    #[test]
    fn ranks_of_a_large_set_are_logarithmic_in_depth() {
        let l = Limits::default();
        let mut z = ZSetValue::new();
        for i in 0..100_000u32 {
            z.insert(format!("m{i}").as_bytes(), i as f64, &l);
        }
        assert_eq!(z.rank(b"m99999"), Some(99_999));
        assert_eq!(z.nth(54_321).map(|(m, _)| m.to_vec()), Some(b"m54321".to_vec()));
        let View::Big(t) = z.inner.view() else { panic!("large set in the tree layout") };
        fn depth(t: &Tree, n: u32) -> usize {
            if n == NIL { 0 } else { 1 + depth(t, t.nodes[n as usize].left).max(depth(t, t.nodes[n as usize].right)) }
        }
        // A balanced treap of 100k nodes is about 40 deep; a degenerate one would be 100k.
        assert!(depth(t, t.root) < 100, "depth {}", depth(t, t.root));
    }
}
