//! List values (LPUSH and friends): a ring buffer of elements, O(1) at both ends and for LINDEX/LSET.
//! `OBJECT ENCODING` says `quicklist`, as Redis 7.0 does for every list.

use std::collections::VecDeque;

use super::CompactBytes;

pub type ListValue = VecDeque<CompactBytes>;

/// Bytes held, roughly (MEMORY USAGE).
pub fn heap_size(l: &ListValue) -> usize {
    l.iter().map(|e| e.heap_size() + 16).sum()
}
