use bytes::Bytes;

/// The protocol version a connection speaks; chosen with `HELLO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

/// One RESP value. RESP3-only types are written in their RESP2 form on RESP2 connections
/// (maps and sets as flat arrays, doubles and verbatim strings as bulk strings, booleans as integers).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `+OK`
    Simple(Bytes),
    /// `-ERR ...`: the whole line, error code first.
    Error(Bytes),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`
    Bulk(Bytes),
    /// `*n`
    Array(Vec<Value>),
    /// The null bulk string: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// The null array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    /// `%n` (RESP2: a flat array of 2n items).
    Map(Vec<(Value, Value)>),
    /// `~n` (RESP2: an array).
    Set(Vec<Value>),
    /// `,1.5` (RESP2: a bulk string).
    Double(f64),
    /// `#t` / `#f` (RESP2: `:1` / `:0`).
    Boolean(bool),
    /// `=len\r\ntxt:...` (RESP2: a bulk string without the format prefix).
    Verbatim { format: [u8; 3], text: Bytes },
    /// `(123...` (RESP2: a bulk string).
    BigNumber(Bytes),
    /// `>n`: out-of-band data such as pub/sub messages (RESP2: an array).
    Push(Vec<Value>),
    /// `|n`: attributes that precede a value; only ever received, never sent by the server.
    Attribute { attributes: Vec<(Value, Value)>, data: Box<Value> },
    /// An array of bulk strings already in its wire form (the server's large read replies, such as LRANGE's, built
    /// straight from packed data); never produced by the decoder, which reads such a reply as an `Array` of `Bulk`.
    Bulks(BulkArray),
}

/// An array of bulk strings kept in its wire form, `*n\r\n` then `$len\r\n<bytes>\r\n` per element, which RESP2 and
/// RESP3 spell alike. A reply of many short strings copied out of packed storage costs one buffer this way, where an
/// `Array` of `Bulk`s costs a value per element (and a reference count on a shared buffer, or an allocation, each)
/// that is built, encoded and dropped under the server's store lock. The wire form is only ever written by
/// [`BulkArray::new`], so reading it back ([`BulkArray::iter`]) trusts it.
#[derive(Clone, PartialEq, Eq)]
pub struct BulkArray {
    wire: Vec<u8>,
    len: usize,
}

fn put_count(buf: &mut Vec<u8>, prefix: u8, n: usize) {
    buf.push(prefix);
    if n < 10 {
        buf.push(b'0' + n as u8);
    } else {
        buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }
    buf.extend_from_slice(b"\r\n");
}

impl BulkArray {
    /// The array of `items`, written in one pass (the header from the iterator's length; should the iterator
    /// yield a different number of items, the header is rewritten to match what it yielded).
    pub fn new<'a, I: ExactSizeIterator<Item = &'a [u8]>>(items: I) -> BulkArray {
        let n = items.len();
        // Enough for n short strings; a longer one reserves what it needs.
        let mut wire = Vec::with_capacity(24 + n.saturating_mul(16).min(1 << 20));
        put_count(&mut wire, b'*', n);
        let mut len = 0;
        for e in items {
            wire.reserve(e.len() + 25);
            put_count(&mut wire, b'$', e.len());
            wire.extend_from_slice(e);
            wire.extend_from_slice(b"\r\n");
            len += 1;
        }
        if len != n {
            let body = wire.split_off(wire.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1));
            wire.clear();
            put_count(&mut wire, b'*', len);
            wire.extend_from_slice(&body);
        }
        BulkArray { wire, len }
    }

    /// How many elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole array as it goes on the wire, in either protocol version.
    pub fn wire(&self) -> &[u8] {
        &self.wire
    }

    /// The elements, in order.
    pub fn iter(&self) -> BulkArrayIter<'_> {
        let at = self.wire.iter().position(|&c| c == b'\n').map_or(self.wire.len(), |i| i + 1);
        BulkArrayIter { wire: &self.wire, at, left: self.len }
    }

    /// The same array as an `Array` of `Bulk`s.
    pub fn to_values(&self) -> Vec<Value> {
        self.iter().map(|e| Value::Bulk(Bytes::copy_from_slice(e))).collect()
    }
}

/// The elements of a [`BulkArray`].
pub struct BulkArrayIter<'a> {
    wire: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Iterator for BulkArrayIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // `$<digits>\r\n<len bytes>\r\n`, as `BulkArray::new` wrote it.
        let mut at = self.at + 1;
        let mut len = 0;
        while self.wire[at] != b'\r' {
            len = len * 10 + (self.wire[at] - b'0') as usize;
            at += 1;
        }
        at += 2;
        self.at = at + len + 2;
        Some(&self.wire[at..at + len])
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for BulkArrayIter<'_> {}

impl std::fmt::Debug for BulkArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(Bytes::copy_from_slice)).finish()
    }
}

impl Value {
    pub fn ok() -> Value {
        Value::Simple(Bytes::from_static(b"OK"))
    }
    pub fn simple(s: &'static str) -> Value {
        Value::Simple(Bytes::from_static(s.as_bytes()))
    }
    pub fn simple_owned(s: String) -> Value {
        Value::Simple(Bytes::from(s))
    }
    /// An error reply; `text` starts with the error code (`ERR ...`, `WRONGTYPE ...`).
    pub fn error(text: impl Into<String>) -> Value {
        Value::Error(Bytes::from(text.into()))
    }
    pub fn bulk(b: impl Into<Bytes>) -> Value {
        Value::Bulk(b.into())
    }
    pub fn bulk_str(s: &str) -> Value {
        Value::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }
    pub fn is_error(&self) -> bool {
        matches!(self, Value::Error(_))
    }
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil | Value::NilArray)
    }
    /// The error code (first word) of an error reply.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            // Only the code need be UTF-8: the rest may quote a client's bytes as they came.
            Value::Error(e) => std::str::from_utf8(e.split(|&c| c == b' ').next()?).ok(),
            _ => None,
        }
    }
    /// The bytes of a string-like value (simple, bulk, verbatim, big number).
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Simple(b) | Value::Bulk(b) | Value::BigNumber(b) => Some(b),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }
    /// An integer, also from a string holding one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Integer(i) => Some(*i),
            Value::Boolean(b) => Some(*b as i64),
            other => std::str::from_utf8(other.as_bytes()?).ok()?.parse().ok(),
        }
    }
}

// Replies are moved and collected by the value (EXEC's array, a script's results): the wire-form array must not
// make every value bigger.
const _: () = assert!(std::mem::size_of::<Value>() <= 40);
