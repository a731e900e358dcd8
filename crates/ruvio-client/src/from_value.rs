//! Turning a reply [`Value`] into the Rust type the caller asked for.

use std::collections::HashMap;
use std::hash::Hash;

use bytes::Bytes;
use ruvio_protocol::Value;

use crate::error::{Error, Result};

/// A type a reply can be converted into, as in `client.cmd("GET").arg("k").query::<Option<String>>()`.
///
/// An error reply converts to `Err` (its [`Error::code`] set) for every type except [`Value`] itself, which keeps
/// it, so a pipeline read as `Vec<Value>` shows each command's own error. A nil reply converts only to
/// `Option<T>` (as `None`), `()` and [`Value`].
pub trait FromValue: Sized {
    /// Converts one reply.
    fn from_value(v: Value) -> Result<Self>;

    /// Lets `Vec<u8>` read a string reply as its bytes while other `Vec<T>` read arrays; only `u8` overrides
    /// it.
    #[doc(hidden)]
    fn vec_from_string(_bytes: &Bytes) -> Option<Vec<Self>> {
        None
    }
}

fn unexpected<T>(v: &Value, wanted: &str) -> Result<T> {
    if let Value::Error(text) = v {
        return Err(Error::server(text));
    }
    Err(Error::type_error(format!("cannot read {v:?} as {wanted}")))
}

/// Strips what only decorates a value (RESP3 attributes) and unpacks an array kept in wire form.
fn plain(v: Value) -> Value {
    match v {
        Value::Attribute { data, .. } => plain(*data),
        Value::Bulks(b) => Value::Array(b.to_values()),
        other => other,
    }
}

impl FromValue for Value {
    fn from_value(v: Value) -> Result<Self> {
        Ok(v)
    }
}

impl FromValue for () {
    fn from_value(v: Value) -> Result<Self> {
        match plain(v) {
            Value::Error(text) => Err(Error::server(&text)),
            _ => Ok(()),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: Value) -> Result<Self> {
        match plain(v) {
            Value::Nil | Value::NilArray => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: Value) -> Result<Self> {
                let v = plain(v);
                match v.as_i64().and_then(|i| <$t>::try_from(i).ok()) {
                    Some(i) => Ok(i),
                    None => unexpected(&v, stringify!($t)),
                }
            }
        }
    )*};
}
integer!(i64, i32, u32, usize, u16);

impl FromValue for u8 {
    fn from_value(v: Value) -> Result<Self> {
        let v = plain(v);
        match v.as_i64().and_then(|i| u8::try_from(i).ok()) {
            Some(i) => Ok(i),
            None => unexpected(&v, "u8"),
        }
    }

    fn vec_from_string(bytes: &Bytes) -> Option<Vec<u8>> {
        Some(bytes.to_vec())
    }
}

impl FromValue for u64 {
    fn from_value(v: Value) -> Result<Self> {
        let v = plain(v);
        if let Some(i) = v.as_i64() {
            if let Ok(u) = u64::try_from(i) {
                return Ok(u);
            }
        }
        // Values above i64::MAX only arrive as strings or big numbers.
        match v.as_bytes().and_then(|b| std::str::from_utf8(b).ok()).and_then(|s| s.parse().ok()) {
            Some(u) => Ok(u),
            None => unexpected(&v, "u64"),
        }
    }
}

impl FromValue for bool {
    fn from_value(v: Value) -> Result<Self> {
        match plain(v) {
            Value::Boolean(b) => Ok(b),
            Value::Integer(i) => Ok(i != 0),
            Value::Simple(s) if &s[..] == b"OK" => Ok(true),
            other => match other.as_i64() {
                Some(i) => Ok(i != 0),
                None => unexpected(&other, "bool"),
            },
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: Value) -> Result<Self> {
        match plain(v) {
            Value::Double(d) => Ok(d),
            Value::Integer(i) => Ok(i as f64),
            other => match other.as_bytes().and_then(|b| std::str::from_utf8(b).ok()).and_then(|s| s.parse().ok()) {
                Some(d) => Ok(d),
                None => unexpected(&other, "f64"),
            },
        }
    }
}

impl FromValue for Bytes {
    fn from_value(v: Value) -> Result<Self> {
        match plain(v) {
            Value::Simple(b) | Value::Bulk(b) | Value::BigNumber(b) => Ok(b),
            Value::Verbatim { text, .. } => Ok(text),
            Value::Integer(i) => Ok(Bytes::from(i.to_string())),
            Value::Double(d) => Ok(Bytes::from(d.to_string())),
            other => unexpected(&other, "bytes"),
        }
    }
}

impl FromValue for String {
    fn from_value(v: Value) -> Result<Self> {
        let b = Bytes::from_value(v)?;
        String::from_utf8(b.to_vec()).map_err(|_| Error::type_error("reply is not UTF-8"))
    }
}

/// The elements of any aggregate; a RESP3 map gives its keys and values in turn, as RESP2 sends it.
pub(crate) fn elements(v: Value) -> Result<Vec<Value>> {
    match plain(v) {
        Value::Array(items) | Value::Set(items) | Value::Push(items) => Ok(items),
        Value::Map(pairs) => Ok(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()),
        other => unexpected(&other, "an array"),
    }
}

/// The pairs of a RESP3 map, or of a RESP2 flat array of keys and values.
pub(crate) fn pairs(v: Value) -> Result<Vec<(Value, Value)>> {
    match plain(v) {
        Value::Map(pairs) => Ok(pairs),
        other => {
            let items = elements(other)?;
            if items.len() % 2 != 0 {
                return Err(Error::type_error("a map needs an even number of elements"));
            }
            let mut it = items.into_iter();
            let mut out = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            Ok(out)
        }
    }
}

impl<T: FromValue> FromValue for Vec<T> {
    fn from_value(v: Value) -> Result<Self> {
        let v = plain(v);
        if let Some(bytes) = v.as_bytes() {
            if let Some(vec) = T::vec_from_string(&Bytes::copy_from_slice(bytes)) {
                return Ok(vec);
            }
        }
        elements(v)?.into_iter().map(T::from_value).collect()
    }
}

impl<K: FromValue + Eq + Hash, V: FromValue> FromValue for HashMap<K, V> {
    fn from_value(v: Value) -> Result<Self> {
        pairs(v)?.into_iter().map(|(k, v)| Ok((K::from_value(k)?, V::from_value(v)?))).collect()
    }
}

macro_rules! tuple {
    ($n:expr; $($t:ident),+) => {
        impl<$($t: FromValue),+> FromValue for ($($t,)+) {
            fn from_value(v: Value) -> Result<Self> {
                let items = elements(v)?;
                if items.len() != $n {
                    return Err(Error::type_error(format!("expected {} elements, got {}", $n, items.len())));
                }
                let mut it = items.into_iter();
                Ok(($($t::from_value(it.next().expect("length checked"))?,)+))
            }
        }
    };
}
tuple!(1; A);
tuple!(2; A, B);
tuple!(3; A, B, C);
tuple!(4; A, B, C, D);
