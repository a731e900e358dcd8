//! Hash values (HSET and friends), in two encodings as in Redis:
//!
//! - **packed** (`OBJECT ENCODING` says `listpack`): every field and value one after the other in one allocation
//!   (sized in classes, `packed::alloc_size`), each as a LEB128 length and its bytes. A lookup is a linear scan, which for the small hashes this
//!   encoding is for (up to `hash-max-listpack-entries` fields, none longer than `hash-max-listpack-value` bytes)
//!   is as fast as hashing and costs 2 bytes of overhead per field and value.
//! - **table** (`hashtable`): the pairs in a vector, indexed by a hash table of `u32` positions (the layout of
//!   `indexmap`, with 4-byte indexes and no stored hashes). Positions give HRANDFIELD O(1) random access and HSCAN a
//!   cursor that survives growth: see [`HashValue::scan`].
//!
//! A hash starts packed and turns into a table, for good, when a write would break either limit (Redis does the
//! same; a snapshot load re-packs what fits). The whole value is one thin pointer (8 bytes), so a key's slot in the
//! keyspace does not grow: `keyspace/packed.rs`, shared with sorted sets, keeps the packed allocation or the boxed
//! table behind it.

use std::fmt;

use super::packed::{put_str, read_str, same_bytes, str_len, PackedOr, View, MAX_PACKED};
use super::indexed::IndexedTable;
use super::CompactBytes;

/// When a packed hash becomes a table (`hash-max-listpack-entries`, `hash-max-listpack-value`).
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

impl Limits {
    fn fits(&self, field: &[u8], value: &[u8]) -> bool {
        field.len() <= self.max_value && value.len() <= self.max_value
    }
}

// ----- the packed encoding (keyspace/packed.rs) -----

fn encode_pair(field: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(str_len(field) + str_len(value));
    put_str(&mut out, field);
    put_str(&mut out, value);
    out
}

/// Iterates the pairs of packed contents.
pub struct PackIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let f = read_str(self.buf, &mut self.pos);
        let v = read_str(self.buf, &mut self.pos);
        Some((f, v))
    }
}

/// Where a field sits in packed contents: the pair's byte range and the value's.
struct Found {
    start: usize,
    value_start: usize,
    end: usize,
}

fn pack_find(buf: &[u8], field: &[u8]) -> Option<Found> {
    let mut pos = 0;
    while pos < buf.len() {
        let start = pos;
        let f = read_str(buf, &mut pos);
        let value_start = pos;
        read_str(buf, &mut pos);
        if same_bytes(f, field) {
            return Some(Found { start, value_start, end: pos });
        }
    }
    None
}

// ----- the table encoding -----

/// The pairs in insertion order, indexed (see `keyspace/indexed.rs`).
type Table = IndexedTable<(CompactBytes, CompactBytes)>;

/// Sets `field` in a table; true when it is new.
fn table_set(t: &mut Table, field: &[u8], value: &[u8]) -> bool {
    match t.position(field) {
        Some(i) => {
            t.get_mut(i).1 = CompactBytes::new(value);
            false
        }
        None => {
            t.push_new((CompactBytes::new(field), CompactBytes::new(value)));
            true
        }
    }
}

// ----- the value -----

/// A hash value; see the module documentation.
pub struct HashValue {
    inner: PackedOr<Table>,
}

impl Default for HashValue {
    fn default() -> Self {
        Self::new()
    }
}

impl HashValue {
    /// An empty packed hash.
    pub fn new() -> Self {
        Self::alloc_pack(&[], 0)
    }

    fn alloc_pack(content: &[u8], count: usize) -> Self {
        HashValue { inner: PackedOr::pack(content, count) }
    }

    fn from_table(t: Table) -> Self {
        HashValue { inner: PackedOr::big(t) }
    }

    fn is_table(&self) -> bool {
        self.inner.is_big()
    }

    fn view(&self) -> View<'_, Table> {
        self.inner.view()
    }

    fn table_mut(&mut self) -> Option<&mut Table> {
        self.inner.big_mut()
    }

    fn pack_splice(&mut self, start: usize, end: usize, insert: &[u8], delta: isize) {
        self.inner.splice(start, end, insert, delta)
    }

    /// Turns a packed hash into a table, keeping its order.
    fn convert(&mut self) {
        let View::Pack { buf, count } = self.view() else { return };
        let mut t = Table::with_capacity(count + 1);
        for (f, v) in (PackIter { buf, pos: 0 }) {
            table_set(&mut t, f, v);
        }
        *self = HashValue::from_table(t);
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match self.view() {
            View::Pack { count, .. } => count,
            View::Big(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `listpack` or `hashtable`, as Redis's OBJECT ENCODING names them.
    pub fn encoding(&self) -> &'static str {
        if self.is_table() { "hashtable" } else { "listpack" }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self.view() {
            View::Pack { buf, .. } => pack_find(buf, field).map(|f| {
                let mut pos = f.value_start;
                read_str(buf, &mut pos)
            }),
            View::Big(t) => t.position(field).map(|i| &*t.items()[i].1),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; true when the field is new. Converts to a table first when the result would break
    /// `limits`.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        if let View::Pack { buf, count } = self.view() {
            let (found, len) = (pack_find(buf, field), buf.len());
            let grows = found.is_none();
            let too_big = len + str_len(field) + str_len(value) > MAX_PACKED;
            if !limits.fits(field, value) || (grows && count + 1 > limits.max_entries) || too_big {
                self.convert();
            } else {
                let pair = encode_pair(field, value);
                match found {
                    Some(f) => self.pack_splice(f.start, f.end, &pair, 0),
                    None => self.pack_splice(len, len, &pair, 1),
                }
                return grows;
            }
        }
        table_set(self.table_mut().expect("converted above"), field, value)
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        if let View::Pack { buf, .. } = self.view() {
            return match pack_find(buf, field) {
                Some(f) => {
                    self.pack_splice(f.start, f.end, &[], -1);
                    true
                }
                None => false,
            };
        }
        self.table_mut().expect("a table").remove(field).is_some()
    }

    /// The pairs, in the hash's order (insertion order, except that a removal from a table moves its last pair
    /// into the hole).
    pub fn iter(&self) -> Iter<'_> {
        match self.view() {
            View::Pack { buf, .. } => Iter::Pack(PackIter { buf, pos: 0 }),
            View::Big(t) => Iter::Table(t.items().iter()),
        }
    }

    /// The pair at position `i` (O(1) for a table, a scan for a packed hash). `i < len()`.
    pub fn nth(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self.view() {
            View::Big(t) => t.items().get(i).map(|(f, v)| (&**f, &**v)),
            View::Pack { .. } => self.iter().nth(i),
        }
    }

    /// One HSCAN step from `cursor`: calls `f` on up to `count` pairs (a packed hash: all of them) and returns the
    /// next cursor, 0 when done.
    ///
    /// A table is walked by position from the end down: the cursor is the number of positions not visited yet.
    /// New pairs are appended (above the cursor: a pass may miss them, as Redis allows), and a removal moves the
    /// last pair down into the hole, so a pair only ever moves from a visited position or towards unvisited ones:
    /// a pair present for the whole pass is returned at least once, Redis's guarantee.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match self.view() {
            View::Pack { .. } => {
                self.iter().for_each(|(k, v)| f(k, v));
                0
            }
            View::Big(t) => {
                let len = t.len() as u64;
                let mut next = if cursor == 0 { len } else { cursor.min(len) };
                let mut n = 0;
                while next > 0 && n < count.max(1) {
                    next -= 1;
                    let (k, v) = &t.items()[next as usize];
                    f(k, v);
                    n += 1;
                }
                next
            }
        }
    }

    /// Re-encodes for `limits`: packed if everything fits, else a table (a snapshot load and a restored value use
    /// this, as Redis re-encodes what it loads).
    pub fn fit(self, limits: &Limits) -> Self {
        let packable = self.len() <= limits.max_entries && self.iter().all(|(f, v)| limits.fits(f, v));
        match (packable, self.is_table()) {
            (true, true) => {
                let mut content = Vec::new();
                for (f, v) in self.iter() {
                    content.extend_from_slice(&encode_pair(f, v));
                }
                Self::alloc_pack(&content, self.len())
            }
            (false, false) => {
                let mut s = self;
                s.convert();
                s
            }
            _ => self,
        }
    }

    /// First stage of a batch prefetch (see `Db::prefetch_members`): for a table, the position `field` may be at,
    /// its pair on its way to the cache.
    pub(super) fn prefetch_slot(&self, field: &[u8]) -> Option<u32> {
        let View::Big(t) = self.view() else { return None };
        t.prefetch_slot(field)
    }

    /// Second stage: start loading the field's bytes of the pair at `i`.
    pub(super) fn prefetch_field_bytes(&self, i: u32) {
        if let View::Big(t) = self.view() {
            t.prefetch_key_bytes(i);
        }
    }

    /// Bytes this value owns on the heap, for memory accounting.
    pub fn heap_size(&self) -> usize {
        match self.view() {
            View::Pack { buf, .. } => super::packed::PACK_HEADER + buf.len(),
            View::Big(t) => std::mem::size_of::<Table>() + t.heap_size(),
        }
    }
}

/// The pairs of a hash, either encoding.
pub enum Iter<'a> {
    Pack(PackIter<'a>),
    Table(std::slice::Iter<'a, (CompactBytes, CompactBytes)>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(p) => p.next(),
            Iter::Table(t) => t.next().map(|(f, v)| (&**f, &**v)),
        }
    }
}

impl Clone for HashValue {
    fn clone(&self) -> Self {
        HashValue { inner: self.inner.clone() }
    }
}

impl fmt::Debug for HashValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter().map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v)))).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn contents(h: &HashValue) -> BTreeMap<Vec<u8>, Vec<u8>> {
        h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn one_pointer_wide() {
        assert_eq!(std::mem::size_of::<HashValue>(), 8);
    }

    #[test]
    fn packed_set_get_remove_keep_order() {
        let l = Limits::default();
        let mut h = HashValue::new();
        assert!(h.is_empty());
        assert!(h.set(b"a", b"1", &l));
        assert!(h.set(b"b", b"22", &l));
        assert!(h.set(b"c", b"", &l));
        assert!(!h.set(b"b", b"a longer value than before", &l));
        assert!(!h.set(b"a", b"", &l));
        assert_eq!(h.get(b"b"), Some(&b"a longer value than before"[..]));
        assert_eq!(h.get(b"a"), Some(&b""[..]));
        assert_eq!(h.get(b"zz"), None);
        assert_eq!(h.len(), 3);
        let order: Vec<&[u8]> = h.iter().map(|(f, _)| f).collect();
        assert_eq!(order, vec![&b"a"[..], b"b", b"c"]);
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        assert_eq!(h.len(), 2);
        assert_eq!(h.encoding(), "listpack");
        let c = h.clone();
        assert_eq!(contents(&c), contents(&h));
        assert!(h.remove(b"a") && h.remove(b"c"));
        assert!(h.is_empty());
        assert_eq!(h.heap_size(), super::super::packed::PACK_HEADER);
    }

    #[test]
    fn converts_on_either_limit_and_stays_converted() {
        let l = Limits { max_entries: 4, max_value: 8 };
        let mut h = HashValue::new();
        for i in 0..4 {
            h.set(format!("f{i}").as_bytes(), b"v", &l);
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f0", b"changed", &l);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f4", b"v", &l);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), 5);
        assert_eq!(h.get(b"f0"), Some(&b"changed"[..]));
        for i in 0..5 {
            h.remove(format!("f{i}").as_bytes());
        }
        assert!(h.is_empty());
        assert_eq!(h.encoding(), "hashtable");
        let mut long = HashValue::new();
        long.set(b"x", b"123456789", &l);
        assert_eq!(long.encoding(), "hashtable");
        let mut long_field = HashValue::new();
        long_field.set(b"123456789", b"x", &l);
        assert_eq!(long_field.encoding(), "hashtable");
        // Re-fitting after a load packs what fits again.
        long.set(b"x", b"short", &l);
        let packed = long.fit(&l);
        assert_eq!(packed.encoding(), "listpack");
        assert_eq!(packed.get(b"x"), Some(&b"short"[..]));
        let zero = Limits { max_entries: 0, max_value: 64 };
        let mut t = HashValue::new();
        t.set(b"a", b"b", &zero);
        assert_eq!(t.encoding(), "hashtable");
    }

    #[test]
    fn large_lengths_use_multi_byte_prefixes() {
        let l = Limits { max_entries: 128, max_value: 100_000 };
        let mut h = HashValue::new();
        let big = vec![7u8; 70_000];
        h.set(b"big", &big, &l);
        h.set(&[1u8; 200], b"x", &l);
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.get(b"big").unwrap(), &big[..]);
        assert_eq!(h.get(&[1u8; 200]), Some(&b"x"[..]));
        h.set(b"big", b"small", &l);
        assert_eq!(h.get(b"big"), Some(&b"small"[..]));
    }

    #[test]
    fn matches_a_model_under_random_operations() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for limits in [Limits { max_entries: 16, max_value: 6 }, Limits::default(), Limits { max_entries: 0, max_value: 0 }] {
            let mut h = HashValue::new();
            let mut model = BTreeMap::new();
            for _ in 0..20_000 {
                let f = format!("f{}", rng.gen_range(0..40)).into_bytes();
                if rng.gen_bool(0.6) {
                    let v = "x".repeat(rng.gen_range(0..9)).into_bytes();
                    assert_eq!(h.set(&f, &v, &limits), model.insert(f, v).is_none());
                } else {
                    assert_eq!(h.remove(&f), model.remove(&f).is_some());
                }
                assert_eq!(h.len(), model.len());
            }
            assert_eq!(contents(&h), model);
            for (f, v) in &model {
                assert_eq!(h.get(f), Some(&v[..]));
            }
            assert_eq!(contents(&h.clone()), model);
            assert_eq!(contents(&h.clone().fit(&Limits::default())), model);
        }
    }

    #[test]
    fn batch_prefetch_of_fields_is_only_a_hint() {
        use crate::keyspace::{Data, Db, Entry};
        let l = Limits { max_entries: 2, max_value: 64 };
        let mut big = HashValue::new();
        for i in 0..100 {
            big.set(format!("field-with-a-long-name:{i}").as_bytes(), b"v", &l);
        }
        let mut small = HashValue::new();
        small.set(b"a", b"1", &l);
        let mut db = Db::new();
        db.insert(b"big", Entry::new(Data::Hash(big)));
        db.insert(b"small", Entry::new(Data::Hash(small)));
        db.insert(b"s", Entry::new(Data::Str(CompactBytes::new(b"x"))));
        let names: Vec<String> = (0..300).map(|i| format!("field-with-a-long-name:{}", i % 150)).collect();
        let batch = names.iter().map(|n| (&b"big"[..], n.as_bytes())).chain([(&b"small"[..], &b"a"[..]), (&b"s"[..], &b"f"[..]), (&b"none"[..], &b"f"[..])]);
        db.prefetch_members(batch);
        let Some(Entry { data: Data::Hash(h), .. }) = db.peek(b"big") else { panic!() };
        assert_eq!(h.len(), 100);
        assert_eq!(h.get(b"field-with-a-long-name:7"), Some(&b"v"[..]));
        assert_eq!(db.len(), 3);
    }

    #[test]
    fn table_scan_returns_every_stable_pair_despite_removals() {
        let l = Limits { max_entries: 0, max_value: 64 };
        let mut h = HashValue::new();
        for i in 0..1000 {
            h.set(format!("stable{i}").as_bytes(), b"v", &l);
            h.set(format!("churn{i}").as_bytes(), b"v", &l);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = h.scan(cursor, 7, |f, _| {
                seen.insert(f.to_vec());
            });
            for j in 0..5 {
                h.remove(format!("churn{}", round * 5 + j).as_bytes());
                h.set(format!("new{round}-{j}").as_bytes(), b"v", &l);
            }
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            assert!(seen.contains(format!("stable{i}").as_bytes()), "stable{i} missed");
        }
    }
}
