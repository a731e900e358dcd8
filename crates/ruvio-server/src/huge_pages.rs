//! The global allocator of the `ruvio` binary: the system allocator, except that large blocks (a big sorted set's
//! tree, a big set's or hash's item vector, a large keyspace table) are placed on transparent huge pages.
//!
//! Why: a ZADD into a sorted set of 100k members walks about 20 tree levels twice, each a random node of a vector
//! of megabytes. On 4 KiB pages nearly every level is a TLB miss on top of its cache miss, and on a VM whose kernel
//! entries flush the TLB (page-table isolation without PCID, as on the VM this was measured on) nothing survives
//! from one read of the socket to the next. On 2 MiB pages the whole tree takes a couple of TLB entries: 3-14% less
//! server CPU per ZADD in paired runs (docs/benchmarks.md, "Huge pages for the big collections").
//!
//! How: Debian leaves transparent huge pages to `madvise`. A block of at least [`FROM`] bytes is its own anonymous
//! mapping, whole huge pages aligned to one, advised with `MADV_HUGEPAGE` before anything touches it (pages already
//! touched stay small, which is why such a block never grows through the system allocator's `realloc`: it moves to
//! a fresh mapping). A fresh mapping is zero already, so zeroed large blocks stay lazy, as `calloc`'s are.
//! Everything smaller goes to the system allocator unchanged. The cost: a system call per large allocation, up to
//! one partly used huge page at the end of each large block, and, where memory is fragmented, the kernel may
//! compact it when such a page is first touched. Redis turns huge pages off for itself because its `fork`
//! snapshots would copy them on write; Ruvio never forks.

use std::alloc::{GlobalAlloc, Layout, System};

const HUGE_PAGE: usize = 2 << 20;

/// Blocks from this size on are placed on huge pages (a 100k-member sorted set's member vector is 3 MiB).
pub const FROM: usize = HUGE_PAGE;

/// The system allocator with large blocks on transparent huge pages (see the module's documentation).
pub struct HugePagesForLargeBlocks;

/// The size a block is really mapped with when it is large: whole huge pages. A pure function of the caller's
/// layout, so allocation, reallocation and deallocation always agree on which blocks are mappings and how long.
#[inline]
fn large(layout: Layout) -> Option<usize> {
    if !cfg!(target_os = "linux") || layout.size() < FROM || layout.align() > HUGE_PAGE {
        return None;
    }
    layout.size().checked_next_multiple_of(HUGE_PAGE)
}

/// A fresh anonymous mapping of `size` bytes (whole huge pages) starting on a huge page, advised for huge pages;
/// null when the system has no memory for it.
#[cfg(target_os = "linux")]
fn map_large(size: usize) -> *mut u8 {
    let Some(span) = size.checked_add(HUGE_PAGE) else { return std::ptr::null_mut() };
    // SAFETY: a new private anonymous mapping; nothing else refers to it. Only its unaligned ends are unmapped.
    unsafe {
        let raw = libc::mmap(std::ptr::null_mut(), span, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        if raw == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE);
        if aligned > start {
            libc::munmap(raw, aligned - start);
        }
        let tail = start + span - (aligned + size);
        if tail > 0 {
            libc::munmap((aligned + size) as *mut libc::c_void, tail);
        }
        // A kernel without transparent huge pages answers EINVAL: the block is simply on small pages.
        libc::madvise(aligned as *mut libc::c_void, size, libc::MADV_HUGEPAGE);
        aligned as *mut u8
    }
}

#[cfg(not(target_os = "linux"))]
fn map_large(_size: usize) -> *mut u8 {
    unreachable!("large() is None off Linux")
}

/// Gives back a mapping made by [`map_large`].
fn unmap_large(ptr: *mut u8, size: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: `ptr` and `size` are exactly a mapping `map_large` made, which its owner has just given up.
    unsafe {
        libc::munmap(ptr.cast(), size);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, size);
}

// SAFETY: a large block is a mapping of `large(layout)` bytes, made and unmapped here; any other block comes from
// `System` and goes back to it with the caller's layout. `large` depends only on the layout, which the caller must
// pass unchanged to `dealloc` and `realloc`, so each block is always returned the way it was made.
unsafe impl GlobalAlloc for HugePagesForLargeBlocks {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match large(layout) {
            None => unsafe { System.alloc(layout) },
            Some(size) => map_large(size),
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match large(layout) {
            None => unsafe { System.alloc_zeroed(layout) },
            // A fresh anonymous mapping reads as zeros.
            Some(size) => map_large(size),
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match large(layout) {
            None => unsafe { System.dealloc(ptr, layout) },
            Some(size) => unmap_large(ptr, size),
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees that `new_size`, rounded up to the alignment, fits in an isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (large(layout), large(new_layout)) {
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            // Still the same whole huge pages: nothing to move.
            (Some(old), Some(new)) if old == new => ptr,
            _ => {
                let fresh = unsafe { self.alloc(new_layout) };
                if !fresh.is_null() {
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, fresh, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                fresh
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_blocks_keep_their_layout_and_large_ones_take_whole_aligned_huge_pages() {
        assert_eq!(large(Layout::from_size_align(FROM - 1, 8).unwrap()), None);
        assert_eq!(large(Layout::from_size_align(FROM, 8).unwrap()), Some(FROM));
        assert_eq!(large(Layout::from_size_align(FROM + 1, 16).unwrap()), Some(FROM + HUGE_PAGE));
        assert_eq!(large(Layout::from_size_align(FROM, 2 * HUGE_PAGE).unwrap()), None, "an alignment above a huge page is the system's");
    }

    #[test]
    fn blocks_keep_their_contents_across_growth_and_shrinking_through_the_threshold() {
        let a = HugePagesForLargeBlocks;
        unsafe {
            let layout = Layout::from_size_align(1000, 8).unwrap();
            let p = a.alloc(layout);
            assert!(!p.is_null());
            for i in 0..1000 {
                *p.add(i) = (i % 251) as u8;
            }
            // small -> large -> larger (same pages) -> larger (new pages) -> small again
            let mut size = 1000;
            let mut p = p;
            for new_size in [FROM + 10, FROM + 20, 3 * FROM, 500] {
                let q = a.realloc(p, Layout::from_size_align(size, 8).unwrap(), new_size);
                assert!(!q.is_null());
                if new_size >= FROM {
                    assert_eq!(q as usize % HUGE_PAGE, 0, "a large block starts on a huge page");
                }
                for i in 0..size.min(new_size).min(1000) {
                    assert_eq!(*q.add(i), (i % 251) as u8, "byte {i} kept when growing {size} -> {new_size}");
                }
                p = q;
                size = new_size;
            }
            a.dealloc(p, Layout::from_size_align(size, 8).unwrap());

            // A large block given back and a zeroed one asked for: it reads as zeros, whatever was there before.
            let l = Layout::from_size_align(FROM + 3, 8).unwrap();
            let d = a.alloc(l);
            std::ptr::write_bytes(d, 0xAB, FROM + 3);
            a.dealloc(d, l);
            let z = a.alloc_zeroed(l);
            assert!((0..FROM + 3).step_by(4093).all(|i| *z.add(i) == 0));
            a.dealloc(z, l);
        }
    }
}
