//! What the small-collection encodings share (hashes and sorted sets, Redis's `listpack` ones): a value that is one
//! thin pointer (8 bytes, so a keyspace slot does not grow) to either a packed allocation (a header, then the
//! entries' bytes one after the other, in an allocation of the size class that holds them, see `alloc_size`) or a
//! boxed large-form value.
//! The low bit of the pointer tells them apart (clear: packed; set: boxed, whose alignment leaves that bit free).
//!
//! The layout of the entries is the owner's (hash.rs, zset.rs); the LEB128 lengths and length-prefixed strings they
//! both use are here.

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::marker::PhantomData;
use std::ptr::NonNull;

/// Header of a packed allocation: content length in bytes, number of entries (both u32).
pub const PACK_HEADER: usize = 8;
const PACK_ALIGN: usize = 4;

/// Packed contents never grow past this (the header's u32 length); an owner converts to its large form before
/// (limits set to huge values through CONFIG SET could otherwise ask for more).
pub const MAX_PACKED: usize = 1 << 30;

/// Bytes allocated for a packed value with `content` bytes of entries: the header and contents rounded up to a
/// size class. Up to 248 bytes the classes are the sizes glibc's malloc gives anyway (its chunks hold 8 bytes less
/// than a multiple of 16), so small values cost nothing extra; above, they step by an eighth of the power of two
/// below (at most 12.5% spare, as jemalloc's classes step, which is Redis's allocator). A value that gains and
/// loses an entry over and over (a sliding window's sorted set) then reallocates only when it crosses a step, where
/// an exact size made every change a realloc, often a move.
fn alloc_size(content: usize) -> usize {
    let exact = PACK_HEADER + content;
    if exact <= 248 {
        return ((exact + 8 + 15) & !15) - 8;
    }
    let step = (1usize << (usize::BITS - 1 - (exact - 1).leading_zeros())) / 8;
    exact.div_ceil(step) * step
}

fn pack_layout(content: usize) -> Layout {
    Layout::from_size_align(alloc_size(content), PACK_ALIGN).expect("packed value too large")
}

pub fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

pub fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends `s` with its LEB128 length in front.
pub fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_varint(out, s.len());
    out.extend_from_slice(s);
}

/// Bytes `put_str` writes for `s`.
pub fn str_len(s: &[u8]) -> usize {
    varint_len(s.len()) + s.len()
}

/// Reads one length-prefixed string at `*pos`. The contents are written only by the owners, so they are well
/// formed; a bad length would be a bug, and panics rather than read out of bounds.
#[inline]
pub fn read_str<'a>(buf: &'a [u8], pos: &mut usize) -> &'a [u8] {
    // Nearly every length fits in one byte; scans read one per entry, so that case stays a load and a test.
    // (`pos` is not handed to the long case by reference, so a scan's loop keeps it in a register.)
    let first = buf[*pos];
    let (n, at) = if first < 0x80 { (first as usize, *pos + 1) } else { read_long_len(buf, *pos) };
    let s = &buf[at..at + n];
    *pos = at + n;
    s
}

/// A LEB128 length of two bytes or more (strings of 128 bytes and longer) at `at`: the length and where the string
/// starts.
#[cold]
fn read_long_len(buf: &[u8], mut at: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[at];
        at += 1;
        n |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return (n, at);
        }
        shift += 7;
    }
}

/// `a == b` for the short strings packed entries hold, compared where they usually differ first: a scan for a
/// member compares it with every entry of the same length, and members that share a prefix (`user:1041`,
/// timestamps) differ near their end, so the last eight bytes decide most comparisons without a call to memcmp.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    if n >= 8 {
        let tail = |s: &[u8]| u64::from_ne_bytes(s[n - 8..].try_into().expect("8 bytes"));
        if tail(a) != tail(b) {
            return false;
        }
    }
    a == b
}

const BIG_TAG: usize = 1;

/// A packed allocation or a `Box<T>`, in one pointer; see the module documentation.
pub struct PackedOr<T> {
    ptr: NonNull<u8>,
    _owns: PhantomData<Box<T>>,
}

// SAFETY: PackedOr owns its allocation (packed bytes or a boxed T) exclusively, like a Box<T>.
unsafe impl<T: Send> Send for PackedOr<T> {}
unsafe impl<T: Sync> Sync for PackedOr<T> {}

/// A read-only view of either form.
pub enum View<'a, T> {
    Pack { buf: &'a [u8], count: usize },
    Big(&'a T),
}

impl<T> PackedOr<T> {
    /// A packed value holding `content` (`count` entries).
    pub fn pack(content: &[u8], count: usize) -> Self {
        let len = u32::try_from(content.len()).expect("packed value over 4 GB");
        let layout = pack_layout(content.len());
        // SAFETY: the layout is non-zero sized (header); we write the header and exactly `len` bytes inside it.
        unsafe {
            let p = alloc(layout);
            let Some(ptr) = NonNull::new(p) else { handle_alloc_error(layout) };
            (p as *mut u32).write(len);
            (p as *mut u32).add(1).write(count as u32);
            std::ptr::copy_nonoverlapping(content.as_ptr(), p.add(PACK_HEADER), content.len());
            PackedOr { ptr, _owns: PhantomData }
        }
    }

    /// The large form.
    pub fn big(value: T) -> Self {
        const { assert!(std::mem::align_of::<T>() >= 2, "the tag bit needs an aligned box") };
        let raw = Box::into_raw(Box::new(value)) as *mut u8;
        let tagged = (raw as usize | BIG_TAG) as *mut u8;
        PackedOr { ptr: NonNull::new(tagged).expect("a box is never null"), _owns: PhantomData }
    }

    pub fn is_big(&self) -> bool {
        self.ptr.as_ptr() as usize & BIG_TAG != 0
    }

    fn big_ptr(&self) -> *mut T {
        (self.ptr.as_ptr() as usize & !BIG_TAG) as *mut T
    }

    /// (content length, count) of a packed value.
    fn header(&self) -> (usize, usize) {
        debug_assert!(!self.is_big());
        // SAFETY: a packed allocation starts with two u32s written in `pack`/`splice`; 4-aligned.
        unsafe {
            let p = self.ptr.as_ptr() as *const u32;
            (p.read() as usize, p.add(1).read() as usize)
        }
    }

    #[inline]
    pub fn view(&self) -> View<'_, T> {
        if self.is_big() {
            // SAFETY: the tag says this is a Box<T> we own; shared borrow tied to &self.
            View::Big(unsafe { &*self.big_ptr() })
        } else {
            let (len, count) = self.header();
            // SAFETY: `len` content bytes follow the header (see `pack`).
            let buf = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(PACK_HEADER), len) };
            View::Pack { buf, count }
        }
    }

    pub fn big_mut(&mut self) -> Option<&mut T> {
        // SAFETY: as in `view`, with the exclusive borrow of self.
        self.is_big().then(|| unsafe { &mut *self.big_ptr() })
    }

    /// Replaces bytes `start..end` of a packed value's contents with `insert`, changing its count by `delta`;
    /// reallocates when the new size is in another size class ([`alloc_size`]: small collections are many, and
    /// more spare room in each would add up).
    pub fn splice(&mut self, start: usize, end: usize, insert: &[u8], delta: isize) {
        self.splice_with(start, end, insert.len(), delta, |hole| hole.copy_from_slice(insert))
    }

    /// [`PackedOr::splice`] with the new bytes written by `fill` straight into their place (`insert_len` of them),
    /// so an owner encoding an entry needs no buffer of its own.
    pub fn splice_with(&mut self, start: usize, end: usize, insert_len: usize, delta: isize, fill: impl FnOnce(&mut [u8])) {
        let (len, count) = self.header();
        assert!(start <= end && end <= len, "splice within the contents");
        let new_len = len - (end - start) + insert_len;
        let new_count = (count as isize + delta) as usize;
        let tail = len - end;
        u32::try_from(new_len).expect("packed value over 4 GB");
        // SAFETY: every copy stays inside the allocation of the size it was (re)allocated with; `realloc` keeps the
        // contents up to the smaller size, and the tail is moved before shrinking / after growing.
        unsafe {
            let mut p = self.ptr.as_ptr();
            let (old_layout, new_size) = (pack_layout(len), alloc_size(new_len));
            let reallocate = new_size != old_layout.size();
            if new_len > len {
                if reallocate {
                    p = realloc(p, old_layout, new_size);
                    if p.is_null() {
                        handle_alloc_error(pack_layout(new_len));
                    }
                }
                let data = p.add(PACK_HEADER);
                std::ptr::copy(data.add(end), data.add(start + insert_len), tail);
                fill(std::slice::from_raw_parts_mut(data.add(start), insert_len));
            } else {
                let data = p.add(PACK_HEADER);
                // The hole is filled before the tail moves down over what it replaced: the tail starts at or after
                // the hole's end (new_len <= len), so neither overwrites the other.
                fill(std::slice::from_raw_parts_mut(data.add(start), insert_len));
                std::ptr::copy(data.add(end), data.add(start + insert_len), tail);
                if reallocate {
                    p = realloc(p, old_layout, new_size);
                    if p.is_null() {
                        handle_alloc_error(pack_layout(new_len));
                    }
                }
            }
            (p as *mut u32).write(new_len as u32);
            (p as *mut u32).add(1).write(new_count as u32);
            self.ptr = NonNull::new_unchecked(p);
        }
    }

    /// Heap bytes of the packed form (header and spare room included); `None` for the large form.
    pub fn packed_size(&self) -> Option<usize> {
        (!self.is_big()).then(|| alloc_size(self.header().0))
    }
}

impl<T> Drop for PackedOr<T> {
    fn drop(&mut self) {
        if self.is_big() {
            // SAFETY: made by Box::into_raw in `big`, dropped once.
            unsafe { drop(Box::from_raw(self.big_ptr())) }
        } else {
            let (len, _) = self.header();
            // SAFETY: allocated in `pack`/`splice` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), pack_layout(len)) }
        }
    }
}

impl<T: Clone> Clone for PackedOr<T> {
    fn clone(&self) -> Self {
        match self.view() {
            View::Pack { buf, count } => Self::pack(buf, count),
            View::Big(t) => Self::big(t.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_with_multi_byte_lengths() {
        let mut out = Vec::new();
        let long = vec![9u8; 70_000];
        for s in [&b""[..], b"abc", &[1u8; 127], &[2u8; 128], &long] {
            let before = out.len();
            put_str(&mut out, s);
            assert_eq!(out.len() - before, str_len(s));
        }
        let mut pos = 0;
        for want in [&b""[..], b"abc", &[1u8; 127], &[2u8; 128], &long] {
            assert_eq!(read_str(&out, &mut pos), want);
        }
        assert_eq!(pos, out.len());
    }

    #[test]
    fn size_classes_cover_the_contents_with_at_most_an_eighth_spare() {
        // Up to 248 bytes: what glibc hands out for the exact request anyway (16-byte steps, 8 bytes of header).
        assert_eq!([alloc_size(0), alloc_size(8), alloc_size(9), alloc_size(100), alloc_size(240)], [8, 24, 24, 120, 248]);
        let mut last = 0;
        for content in 0..100_000 {
            let size = alloc_size(content);
            let exact = PACK_HEADER + content;
            assert!(size >= exact && size >= last, "{content}: {size}");
            assert!(exact <= 248 || (size - exact) * 8 <= exact, "{content}: {size} has more than an eighth spare");
            last = size;
        }
        // A value that grows and shrinks by one entry within a class keeps its allocation.
        assert_eq!(alloc_size(1700), alloc_size(1726));
    }

    #[test]
    fn splice_grows_shrinks_and_keeps_the_tail() {
        let mut p: PackedOr<u64> = PackedOr::pack(b"abcdef", 6);
        p.splice(2, 4, b"XYZW", 2);
        p.splice(0, 1, b"", -1);
        p.splice(7, 7, b"!", 1);
        let View::Pack { buf, count } = p.view() else { panic!("packed") };
        assert_eq!((buf, count), (&b"bXYZWef!"[..], 8));
        assert_eq!(p.packed_size(), Some(alloc_size(8)));
        let c = p.clone();
        assert!(matches!(c.view(), View::Pack { buf: b"bXYZWef!", count: 8 }));
        let mut b: PackedOr<u64> = PackedOr::big(7);
        assert!(b.is_big() && b.packed_size().is_none());
        *b.big_mut().unwrap() += 1;
        assert!(matches!(b.clone().view(), View::Big(8)));
        assert_eq!(std::mem::size_of::<PackedOr<u64>>(), 8);
    }
}
