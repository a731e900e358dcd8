//! A byte string that keeps short contents inline: most keys and many values are short, and storing them beside
//! the hash-table entry instead of in a separate allocation is what keeps a million keys small.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ptr::NonNull;

const INLINE: usize = 14;

/// A heap byte string behind a thin (8-byte) pointer: the length lives in the allocation, in front of the bytes.
/// Half the size of `Box<[u8]>`, which matters in every hash-table slot.
pub struct ThinBytes {
    ptr: NonNull<u8>,
}

// SAFETY: ThinBytes owns its allocation exclusively, like Box<[u8]>.
unsafe impl Send for ThinBytes {}
unsafe impl Sync for ThinBytes {}

const HEADER: usize = std::mem::size_of::<u32>();

impl ThinBytes {
    fn layout(len: usize) -> Layout {
        Layout::from_size_align(HEADER + len, HEADER).expect("byte string too large")
    }

    pub fn new(b: &[u8]) -> Self {
        // Values are bounded by proto-max-bulk-len (512 MB by default, never near 4 GB).
        let len = u32::try_from(b.len()).expect("byte string over 4 GB");
        let layout = Self::layout(b.len());
        // SAFETY: layout has non-zero size (HEADER > 0); we write the header and exactly `len` bytes inside it.
        unsafe {
            let p = alloc(layout);
            let Some(ptr) = NonNull::new(p) else { handle_alloc_error(layout) };
            (p as *mut u32).write(len);
            std::ptr::copy_nonoverlapping(b.as_ptr(), p.add(HEADER), b.len());
            ThinBytes { ptr }
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the allocation starts with the length written in `new`, followed by that many bytes.
        unsafe {
            let len = (self.ptr.as_ptr() as *const u32).read() as usize;
            std::slice::from_raw_parts(self.ptr.as_ptr().add(HEADER), len)
        }
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        let len = self.as_slice().len();
        // SAFETY: allocated in `new` with this exact layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(len)) }
    }
}

impl Clone for ThinBytes {
    fn clone(&self) -> Self {
        ThinBytes::new(self.as_slice())
    }
}

/// Up to 14 bytes inline, longer on the heap behind a thin pointer; 16 bytes either way. A string that APPEND or
/// SETRANGE changes becomes `Growing`: a vector with spare room, so repeated appends cost what they add instead of
/// a copy of the whole value each time (Redis's SDS does the same).
#[derive(Clone)]
pub enum CompactBytes {
    Inline { len: u8, data: [u8; INLINE] },
    Heap(ThinBytes),
    Growing(Box<Vec<u8>>),
}

/// Up to this size a growing string doubles its room; beyond it, it grows by this much at a time (as Redis's
/// SDS_MAX_PREALLOC), so a large value never reserves as much again as it holds.
const MAX_PREALLOC: usize = 1024 * 1024;

impl CompactBytes {
    pub fn new(b: &[u8]) -> Self {
        if b.len() <= INLINE {
            let mut data = [0u8; INLINE];
            data[..b.len()].copy_from_slice(b);
            CompactBytes::Inline { len: b.len() as u8, data }
        } else {
            CompactBytes::Heap(ThinBytes::new(b))
        }
    }

    pub fn from_vec(v: Vec<u8>) -> Self {
        Self::new(&v)
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            CompactBytes::Inline { len, data } => &data[..*len as usize],
            CompactBytes::Heap(b) => b.as_slice(),
            CompactBytes::Growing(v) => v,
        }
    }

    /// The bytes as a growable vector, converting (one copy) the first time.
    fn growing(&mut self) -> &mut Vec<u8> {
        if !matches!(self, CompactBytes::Growing(_)) {
            *self = CompactBytes::Growing(Box::new(self.as_slice().to_vec()));
        }
        match self {
            CompactBytes::Growing(v) => v,
            _ => unreachable!(),
        }
    }

    /// Makes room for a length of `needed`, amortised: doubling while small, then [`MAX_PREALLOC`] at a time.
    fn reserve_for(v: &mut Vec<u8>, needed: usize) {
        if needed > v.capacity() {
            let room = if needed < MAX_PREALLOC { needed * 2 } else { needed + MAX_PREALLOC };
            v.reserve_exact(room - v.len());
        }
    }

    /// APPEND: adds `extra` at the end, in place.
    pub fn append(&mut self, extra: &[u8]) {
        let v = self.growing();
        Self::reserve_for(v, v.len() + extra.len());
        v.extend_from_slice(extra);
    }

    /// SETRANGE: writes `patch` at `offset`, padding with zero bytes when the string is shorter, in place.
    pub fn set_range(&mut self, offset: usize, patch: &[u8]) {
        let v = self.growing();
        let end = offset + patch.len();
        if v.len() < end {
            Self::reserve_for(v, end);
            v.resize(end, 0);
        }
        v[offset..end].copy_from_slice(patch);
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the bytes live when they are not inline (for a prefetch hint; never read through it).
    pub fn heap_ptr(&self) -> Option<*const u8> {
        match self {
            CompactBytes::Inline { .. } => None,
            CompactBytes::Heap(b) => Some(b.ptr.as_ptr()),
            CompactBytes::Growing(v) => Some(v.as_ptr()),
        }
    }

    /// Heap bytes this value owns beyond its own size, for memory accounting.
    pub fn heap_size(&self) -> usize {
        match self {
            CompactBytes::Inline { .. } => 0,
            CompactBytes::Heap(b) => HEADER + b.as_slice().len(),
            CompactBytes::Growing(v) => std::mem::size_of::<Vec<u8>>() + v.capacity(),
        }
    }
}

impl std::ops::Deref for CompactBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for CompactBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for CompactBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl Eq for CompactBytes {}

impl Hash for CompactBytes {
    // Must hash exactly like `[u8]` so lookups by `&[u8]` find entries.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialOrd for CompactBytes {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for CompactBytes {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl fmt::Debug for CompactBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap() {
        assert_eq!(std::mem::size_of::<CompactBytes>(), 16);
        let short = CompactBytes::new(b"key:000001");
        assert!(matches!(short, CompactBytes::Inline { .. }));
        assert_eq!(&*short, b"key:000001");
        let long = CompactBytes::new(&[7u8; 100]);
        assert!(matches!(long, CompactBytes::Heap(_)));
        assert_eq!(long.len(), 100);
        let copy = long.clone();
        drop(long);
        assert_eq!(&*copy, &[7u8; 100][..]);
        assert_eq!(&*CompactBytes::new(b""), b"");
        assert_eq!(&*CompactBytes::new(&[1u8; 15]), &[1u8; 15][..]);
    }

    #[test]
    fn append_and_set_range_grow_in_place_with_amortised_room() {
        let mut s = CompactBytes::new(b"abc");
        s.append(b"def");
        assert_eq!(&*s, b"abcdef");
        s.set_range(8, b"xy");
        assert_eq!(&*s, b"abcdef\0\0xy");
        s.set_range(1, b"B");
        assert_eq!(&*s, b"aBcdef\0\0xy");
        // A million one-byte appends reallocate only a few dozen times.
        let mut big = CompactBytes::new(&[]);
        let mut moves = 0;
        let mut last = None;
        for _ in 0..1_000_000 {
            big.append(b"z");
            if big.heap_ptr() != last {
                moves += 1;
                last = big.heap_ptr();
            }
        }
        assert_eq!(big.len(), 1_000_000);
        assert!(moves < 40, "{moves} reallocations");
        assert_eq!(big.clone().as_slice(), big.as_slice());
    }
}
