//! Set values (SADD and friends): an insertion-ordered hash set (`keyspace/indexed.rs`, shared with large
//! hashes), whose positions give SPOP and SRANDMEMBER O(1) random picks and SSCAN a position cursor.
//!
//! `OBJECT ENCODING` reports Redis 7.0's names: `intset` while every member is a 64-bit integer in canonical form
//! and there are at most `set-max-intset-entries` of them, `hashtable` from the first write that breaks that on (one
//! way, as in Redis, until the value is reloaded or copied). An `intset` lists its members in numeric order, as
//! Redis's sorted array of integers does (clients and Redis's own tests read SMEMBERS of small integer sets).

use super::indexed::IndexedTable;
use super::CompactBytes;

/// `set-max-intset-entries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_intset_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_intset_entries: 512 }
    }
}

#[derive(Clone, Default)]
pub struct SetValue {
    members: IndexedTable<CompactBytes>,
    /// Not an intset any more.
    big: bool,
}

/// The integer a member stands for when it is written the way Redis's intset would keep it.
pub fn as_int(m: &[u8]) -> Option<i64> {
    crate::commands::parse_i64(m)
}

impl SetValue {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.members.len()
    }
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
    pub fn contains(&self, m: &[u8]) -> bool {
        self.members.position(m).is_some()
    }
    pub fn encoding(&self) -> &'static str {
        if self.big { "hashtable" } else { "intset" }
    }
    pub fn refit(&mut self, limits: &Limits) {
        self.big = self.members.len() > limits.max_intset_entries || self.iter().any(|m| as_int(m).is_none());
    }
    /// True if `m` was added.
    pub fn insert(&mut self, m: &[u8], limits: &Limits) -> bool {
        if self.contains(m) {
            return false;
        }
        self.members.push_new(CompactBytes::new(m));
        if !self.big && (self.members.len() > limits.max_intset_entries || as_int(m).is_none()) {
            self.big = true;
        }
        true
    }
    pub fn remove(&mut self, m: &[u8]) -> bool {
        self.members.remove(m).is_some()
    }
    pub fn nth(&self, i: usize) -> Option<&CompactBytes> {
        self.members.items().get(i)
    }
    pub fn swap_remove_index(&mut self, i: usize) -> Option<CompactBytes> {
        (i < self.len()).then(|| self.members.swap_remove_index(i))
    }
    /// Every member, in numeric order while the set is an intset.
    pub fn members(&self) -> Vec<&[u8]> {
        let mut v: Vec<&[u8]> = self.iter().collect();
        if !self.big {
            v.sort_by_key(|m| as_int(m).unwrap_or(0));
        }
        v
    }
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.members.items().iter().map(|m| m.as_slice())
    }
    pub fn heap_size(&self) -> usize {
        self.members.heap_size()
    }
    /// First stage of a batch prefetch (see `Db::prefetch_members`): the position `m` may be at, its slot on its
    /// way to the cache.
    pub(super) fn prefetch_slot(&self, m: &[u8]) -> Option<u32> {
        self.members.prefetch_slot(m)
    }
    /// Second stage: start loading the bytes of the member at `i`.
    pub(super) fn prefetch_member_bytes(&self, i: u32) {
        self.members.prefetch_key_bytes(i)
    }
}

impl std::fmt::Debug for SetValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter().map(String::from_utf8_lossy)).finish()
    }
}
