//! An insertion-ordered hash table of byte-string keys, the large encoding of hashes (items: field-value pairs) and
//! sets (items: members): the items in a vector, indexed by a hash table of `u32` positions (the layout of
//! `indexmap`, with 4-byte indexes and no stored hashes). Positions give O(1) random picks (SPOP, SRANDMEMBER,
//! HRANDFIELD) and scan cursors that survive growth. A removal moves the last item into the hole.
//!
//! A lookup in a large table is a chain of cache misses (the control bytes, the index slot, the item, the key's
//! bytes), so a batch of commands on one large value first starts loading every one of them
//! ([`IndexedTable::prefetch_slot`] and [`IndexedTable::prefetch_key_bytes`], called by `Db::prefetch_members`).

use hashbrown::HashTable;

use super::CompactBytes;

/// An item of the table: its key, and the heap bytes it owns (for memory accounting).
pub trait Keyed {
    fn key(&self) -> &CompactBytes;
    fn heap_size(&self) -> usize;
}

impl Keyed for CompactBytes {
    fn key(&self) -> &CompactBytes {
        self
    }
    fn heap_size(&self) -> usize {
        CompactBytes::heap_size(self)
    }
}

/// A hash's field and value.
impl Keyed for (CompactBytes, CompactBytes) {
    fn key(&self) -> &CompactBytes {
        &self.0
    }
    fn heap_size(&self) -> usize {
        self.0.heap_size() + self.1.heap_size()
    }
}

/// The hasher of the member indexes (these tables', and the sorted sets'): one per process, random.
fn hasher() -> &'static ahash::RandomState {
    static H: std::sync::OnceLock<ahash::RandomState> = std::sync::OnceLock::new();
    H.get_or_init(ahash::RandomState::new)
}

pub(super) fn hash_of(b: &[u8]) -> u64 {
    hasher().hash_one(b)
}

#[derive(Clone)]
pub struct IndexedTable<T> {
    items: Vec<T>,
    index: HashTable<u32>,
}

impl<T> Default for IndexedTable<T> {
    fn default() -> Self {
        IndexedTable { items: Vec::new(), index: HashTable::new() }
    }
}

impl<T: Keyed> IndexedTable<T> {
    pub fn with_capacity(n: usize) -> Self {
        IndexedTable { items: Vec::with_capacity(n), index: HashTable::with_capacity(n) }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items in table order.
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// The item at `i`, to change in place: its key must stay the same (the index is not told).
    pub fn get_mut(&mut self, i: usize) -> &mut T {
        &mut self.items[i]
    }

    /// The position of the item with `key`.
    pub fn position(&self, key: &[u8]) -> Option<usize> {
        let items = &self.items;
        self.index.find(hash_of(key), |&i| &**items[i as usize].key() == key).map(|&i| i as usize)
    }

    /// Appends `item`, whose key must not be in the table yet.
    pub fn push_new(&mut self, item: T) {
        let i = u32::try_from(self.items.len()).expect("a table holds at most 2^32 - 1 items");
        let h = hash_of(item.key());
        self.items.push(item);
        let items = &self.items;
        self.index.insert_unique(h, i, |&j| hash_of(items[j as usize].key()));
    }

    /// Removes the item with `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<T> {
        let i = self.position(key)?;
        Some(self.swap_remove_index(i))
    }

    /// Removes the item at `i` (`i < len()`); the last item takes its place.
    pub fn swap_remove_index(&mut self, i: usize) -> T {
        let items = &self.items;
        let h = hash_of(items[i].key());
        let Ok(entry) = self.index.find_entry(h, |&j| j as usize == i) else { unreachable!("every item is indexed") };
        entry.remove();
        let last = self.items.len() - 1;
        let item = self.items.swap_remove(i);
        if i != last {
            // The last item moved into the hole: point its index entry there.
            let moved = hash_of(self.items[i].key());
            let slot = self.index.find_mut(moved, |&j| j as usize == last).expect("every item is indexed");
            *slot = i as u32;
        }
        if self.items.len() < self.items.capacity() / 4 {
            self.items.shrink_to(self.items.len() * 2);
            let items = &self.items;
            self.index.shrink_to(items.len(), |&j| hash_of(items[j as usize].key()));
        }
        item
    }

    pub fn heap_size(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<T>()
            + self.index.allocation_size()
            + self.items.iter().map(Keyed::heap_size).sum::<usize>()
    }

    /// First stage of a batch prefetch: finds the slot whose tag matches `key` (without comparing: only a hint),
    /// starts loading its item and returns its position.
    pub fn prefetch_slot(&self, key: &[u8]) -> Option<u32> {
        let &i = self.index.find(hash_of(key), |_| true)?;
        if let Some(item) = self.items.get(i as usize) {
            super::prefetch(item as *const T as *const u8);
        }
        Some(i)
    }

    /// Second stage: the item at `i` has arrived (or is on its way); start loading its key's bytes.
    pub fn prefetch_key_bytes(&self, i: u32) {
        if let Some(p) = self.items.get(i as usize).and_then(|item| item.key().heap_ptr()) {
            super::prefetch(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn keys(t: &IndexedTable<CompactBytes>) -> BTreeSet<Vec<u8>> {
        t.items().iter().map(|k| k.to_vec()).collect()
    }

    #[test]
    fn matches_a_model_and_finds_every_item_after_removals() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut t = IndexedTable::<CompactBytes>::default();
        let mut model = BTreeSet::new();
        for step in 0..20_000 {
            let k = format!("member-{}", rng.gen_range(0..600)).into_bytes();
            match rng.gen_range(0..4) {
                0 if !t.is_empty() => {
                    let i = rng.gen_range(0..t.len());
                    let gone = t.swap_remove_index(i);
                    assert!(model.remove(&gone.to_vec()));
                }
                1 => assert_eq!(t.remove(&k).is_some(), model.remove(&k)),
                _ => {
                    if t.position(&k).is_none() {
                        t.push_new(CompactBytes::new(&k));
                        model.insert(k);
                    }
                }
            }
            if step % 1000 == 0 {
                assert_eq!(keys(&t), model);
                for (i, item) in t.items().iter().enumerate() {
                    assert_eq!(t.position(item), Some(i));
                }
            }
        }
        assert_eq!(keys(&t), model);
        // Emptied, the table gives its room back.
        for k in model {
            t.remove(&k).expect("present");
        }
        assert!(t.is_empty());
        assert!(t.heap_size() < 1024, "{}", t.heap_size());
    }

    #[test]
    fn a_prefetch_is_only_a_hint() {
        let mut t = IndexedTable::<CompactBytes>::default();
        for i in 0..100 {
            t.push_new(CompactBytes::new(format!("a long member name number {i}").as_bytes()));
        }
        for i in 0..200 {
            let k = format!("a long member name number {i}");
            if let Some(p) = t.prefetch_slot(k.as_bytes()) {
                t.prefetch_key_bytes(p);
            }
        }
        assert_eq!(t.position(b"a long member name number 42"), Some(42));
        assert_eq!(t.position(b"a long member name number 142"), None);
    }
}
