//! Sorted-set values (ZADD and friends).
//!
//! Members and scores live twice: in an insertion-ordered map (member -> score; O(1) lookups, and positions for
//! ZRANDMEMBER's random picks and ZSCAN's cursor) and in a B-tree ordered by (score, member), which gives ranges by
//! score or by member in order. Rank operations walk the tree from one end (O(rank)), which is fine for the sizes
//! leaderboards and lock queues use; a skiplist with span counts (Redis's layout) would make them O(log n).
//!
//! `OBJECT ENCODING` reports Redis 7.0's names: `listpack` while the set is small (at most `zset-max-listpack-entries`
//! members, none longer than `zset-max-listpack-value` bytes), `skiplist` from the first write that breaks either
//! limit on; as in Redis the switch is one-way until the value is reloaded or copied into a new key.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use indexmap::IndexMap;

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

#[derive(Debug, Clone, Default)]
pub struct ZSetValue {
    map: IndexMap<CompactBytes, f64, ahash::RandomState>,
    tree: BTreeSet<(Score, CompactBytes)>,
    big: bool,
}

impl ZSetValue {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.map.get(member).copied()
    }
    pub fn encoding(&self) -> &'static str {
        if self.big { "skiplist" } else { "listpack" }
    }
    /// Reports the encoding the limits call for now (a copy or a reload starts small again).
    pub fn refit(&mut self, limits: &Limits) {
        self.big = self.map.len() > limits.max_entries || self.map.keys().any(|m| m.len() > limits.max_value);
    }

    /// Sets `member`'s score; returns the old one.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: &Limits) -> Option<f64> {
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(old) = self.map.get_mut(member) {
            let prev = *old;
            if prev != score || prev.to_bits() != score.to_bits() {
                *old = score;
                let key = CompactBytes::new(member);
                self.tree.remove(&(Score(prev), key.clone()));
                self.tree.insert((Score(score), key));
            }
            return Some(prev);
        }
        let key = CompactBytes::new(member);
        self.map.insert(key.clone(), score);
        self.tree.insert((Score(score), key));
        if !self.big && (self.map.len() > limits.max_entries || member.len() > limits.max_value) {
            self.big = true;
        }
        None
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (key, score) = self.map.swap_remove_entry(member)?;
        self.tree.remove(&(Score(score), key));
        Some(score)
    }

    /// 0-based rank from the lowest score.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        Some(self.tree.range(..(Score(score), CompactBytes::new(member))).count())
    }

    /// In score order (ties by member).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        self.tree.iter().map(|(s, m)| (m.as_slice(), s.0))
    }

    /// From the first member with score >= `min` on, in order.
    pub fn iter_from_score(&self, min: f64) -> impl Iterator<Item = (&[u8], f64)> {
        self.tree.range((Score(min), CompactBytes::new(b""))..).map(|(s, m)| (m.as_slice(), s.0))
    }

    /// Down from the last member with score <= `max`.
    pub fn iter_rev_from_score(&self, max: f64) -> impl Iterator<Item = (&[u8], f64)> {
        // Every member with score <= max sorts before (next score above max, ""); walk backwards from there.
        self.tree.iter().rev().skip_while(move |(s, _)| s.0 > max).map(|(s, m)| (m.as_slice(), s.0))
    }

    /// The i-th member in insertion order (random picks, ZSCAN).
    pub fn nth(&self, i: usize) -> Option<(&[u8], f64)> {
        self.map.get_index(i).map(|(k, v)| (k.as_slice(), *v))
    }

    pub fn pop_first(&mut self) -> Option<(CompactBytes, f64)> {
        let (s, m) = self.tree.pop_first()?;
        self.map.swap_remove(m.as_slice());
        Some((m, s.0))
    }
    pub fn pop_last(&mut self) -> Option<(CompactBytes, f64)> {
        let (s, m) = self.tree.pop_last()?;
        self.map.swap_remove(m.as_slice());
        Some((m, s.0))
    }

    /// Bytes held, roughly (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        self.map.keys().map(|k| k.heap_size() * 2 + 64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_rank_and_update() {
        let l = Limits::default();
        let mut z = ZSetValue::new();
        assert_eq!(z.insert(b"b", 2.0, &l), None);
        assert_eq!(z.insert(b"a", 2.0, &l), None);
        assert_eq!(z.insert(b"c", 1.0, &l), None);
        let order: Vec<&[u8]> = z.iter().map(|(m, _)| m).collect();
        assert_eq!(order, vec![&b"c"[..], b"a", b"b"]);
        assert_eq!(z.rank(b"b"), Some(2));
        assert_eq!(z.insert(b"c", 3.0, &l), Some(1.0));
        assert_eq!(z.rank(b"c"), Some(2));
        assert_eq!(z.iter_from_score(2.5).count(), 1);
        assert_eq!(z.iter_rev_from_score(2.0).count(), 2);
        assert_eq!(z.remove(b"a"), Some(2.0));
        assert_eq!(z.len(), 2);
        assert_eq!(z.pop_first().map(|(m, _)| m.to_vec()), Some(b"b".to_vec()));
    }
}
