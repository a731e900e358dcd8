//! A byte string that keeps short contents inline: most keys and many values are short, and storing them beside
//! the hash-table entry instead of in a separate allocation is what keeps a million keys small.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};

const INLINE: usize = 22;

#[derive(Clone)]
pub enum CompactBytes {
    Inline { len: u8, data: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl CompactBytes {
    pub fn new(b: &[u8]) -> Self {
        if b.len() <= INLINE {
            let mut data = [0u8; INLINE];
            data[..b.len()].copy_from_slice(b);
            CompactBytes::Inline { len: b.len() as u8, data }
        } else {
            CompactBytes::Heap(b.into())
        }
    }

    pub fn from_vec(v: Vec<u8>) -> Self {
        if v.len() <= INLINE {
            Self::new(&v)
        } else {
            CompactBytes::Heap(v.into_boxed_slice())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            CompactBytes::Inline { len, data } => &data[..*len as usize],
            CompactBytes::Heap(b) => b,
        }
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes this value owns beyond its own size, for memory accounting.
    pub fn heap_size(&self) -> usize {
        match self {
            CompactBytes::Inline { .. } => 0,
            CompactBytes::Heap(b) => b.len(),
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
        assert_eq!(std::mem::size_of::<CompactBytes>(), 24);
        let short = CompactBytes::new(b"key:000001");
        assert!(matches!(short, CompactBytes::Inline { .. }));
        assert_eq!(&*short, b"key:000001");
        let long = CompactBytes::new(&[7u8; 100]);
        assert!(matches!(long, CompactBytes::Heap(_)));
        assert_eq!(long.len(), 100);
    }
}
