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
            Value::Error(e) => std::str::from_utf8(e).ok()?.split(' ').next(),
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
