//! The client side: parses any RESP2/RESP3 reply, bounded by [`DecodeLimits`].

use bytes::Bytes;
use thiserror::Error;

use crate::value::Value;

/// Bounds on what a reply may announce, checked before anything is reserved for it.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    pub max_bulk_len: usize,
    pub max_elements: usize,
    pub max_depth: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits { max_bulk_len: 512 * 1024 * 1024, max_elements: i32::MAX as usize, max_depth: 64 }
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("invalid RESP: {0}")]
    Invalid(&'static str),
    #[error("unknown RESP type byte {0:#04x}")]
    UnknownType(u8),
    #[error("RESP value exceeds a limit: {0}")]
    TooLarge(&'static str),
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    limits: DecodeLimits,
}

type Step<T> = Result<Option<T>, DecodeError>;

impl<'a> Cursor<'a> {
    fn line(&mut self) -> Step<&'a [u8]> {
        let rest = &self.buf[self.pos..];
        match rest.windows(2).position(|w| w == b"\r\n") {
            Some(end) => {
                self.pos += end + 2;
                Ok(Some(&rest[..end]))
            }
            None => Ok(None),
        }
    }

    fn int_line(&mut self) -> Step<i64> {
        let Some(line) = self.line()? else { return Ok(None) };
        let s = std::str::from_utf8(line).map_err(|_| DecodeError::Invalid("non-ASCII integer"))?;
        s.parse().map(Some).map_err(|_| DecodeError::Invalid("bad integer"))
    }

    fn count(&mut self) -> Step<Option<usize>> {
        let Some(n) = self.int_line()? else { return Ok(None) };
        if n < 0 {
            return Ok(Some(None));
        }
        if n as u64 > self.limits.max_elements as u64 {
            return Err(DecodeError::TooLarge("aggregate length"));
        }
        Ok(Some(Some(n as usize)))
    }

    fn blob(&mut self) -> Step<Option<Bytes>> {
        let Some(n) = self.int_line()? else { return Ok(None) };
        if n < 0 {
            return Ok(Some(None));
        }
        if n as u64 > self.limits.max_bulk_len as u64 {
            return Err(DecodeError::TooLarge("bulk length"));
        }
        let n = n as usize;
        if self.buf.len() - self.pos < n + 2 {
            return Ok(None);
        }
        let data = Bytes::copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n + 2;
        Ok(Some(Some(data)))
    }

    fn items(&mut self, n: usize, depth: usize) -> Step<Vec<Value>> {
        let mut out = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let Some(v) = self.value(depth + 1)? else { return Ok(None) };
            out.push(v);
        }
        Ok(Some(out))
    }

    fn pairs(&mut self, n: usize, depth: usize) -> Step<Vec<(Value, Value)>> {
        let mut out = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let Some(k) = self.value(depth + 1)? else { return Ok(None) };
            let Some(v) = self.value(depth + 1)? else { return Ok(None) };
            out.push((k, v));
        }
        Ok(Some(out))
    }

    fn value(&mut self, depth: usize) -> Step<Value> {
        if depth > self.limits.max_depth {
            return Err(DecodeError::TooLarge("nesting depth"));
        }
        let Some(&kind) = self.buf.get(self.pos) else { return Ok(None) };
        self.pos += 1;
        macro_rules! need {
            ($e:expr) => {
                match $e? {
                    Some(v) => v,
                    None => return Ok(None),
                }
            };
        }
        Ok(Some(match kind {
            b'+' => Value::Simple(Bytes::copy_from_slice(need!(self.line()))),
            b'-' => Value::Error(Bytes::copy_from_slice(need!(self.line()))),
            b':' => Value::Integer(need!(self.int_line())),
            b'$' => need!(self.blob()).map_or(Value::Nil, Value::Bulk),
            b'*' => match need!(self.count()) {
                None => Value::NilArray,
                Some(n) => Value::Array(need!(self.items(n, depth))),
            },
            b'~' => {
                let n = need!(self.count()).ok_or(DecodeError::Invalid("negative set length"))?;
                Value::Set(need!(self.items(n, depth)))
            }
            b'>' => {
                let n = need!(self.count()).ok_or(DecodeError::Invalid("negative push length"))?;
                Value::Push(need!(self.items(n, depth)))
            }
            b'%' => {
                let n = need!(self.count()).ok_or(DecodeError::Invalid("negative map length"))?;
                Value::Map(need!(self.pairs(n, depth)))
            }
            b'|' => {
                let n = need!(self.count()).ok_or(DecodeError::Invalid("negative attribute length"))?;
                let attributes = need!(self.pairs(n, depth));
                let data = need!(self.value(depth + 1));
                Value::Attribute { attributes, data: Box::new(data) }
            }
            b'_' => {
                need!(self.line());
                Value::Nil
            }
            b'#' => match need!(self.line()) {
                b"t" => Value::Boolean(true),
                b"f" => Value::Boolean(false),
                _ => return Err(DecodeError::Invalid("bad boolean")),
            },
            b',' => {
                let line = need!(self.line());
                let s = std::str::from_utf8(line).map_err(|_| DecodeError::Invalid("bad double"))?;
                Value::Double(match s {
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    _ => s.parse().map_err(|_| DecodeError::Invalid("bad double"))?,
                })
            }
            b'(' => Value::BigNumber(Bytes::copy_from_slice(need!(self.line()))),
            b'=' => {
                let data = need!(self.blob()).ok_or(DecodeError::Invalid("null verbatim string"))?;
                if data.len() < 4 || data[3] != b':' {
                    return Err(DecodeError::Invalid("verbatim string without format"));
                }
                Value::Verbatim { format: [data[0], data[1], data[2]], text: data.slice(4..) }
            }
            b'!' => Value::Error(need!(self.blob()).ok_or(DecodeError::Invalid("null blob error"))?),
            other => return Err(DecodeError::UnknownType(other)),
        }))
    }
}

/// Parses one value from the front of `buf`. Returns the value and how many bytes it used, or `Ok(None)` when
/// `buf` does not yet hold a whole value.
pub fn decode_value(buf: &[u8], limits: DecodeLimits) -> Result<Option<(Value, usize)>, DecodeError> {
    let mut c = Cursor { buf, pos: 0, limits };
    Ok(c.value(0)?.map(|v| (v, c.pos)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode, Protocol};
    use bytes::BytesMut;

    #[test]
    fn roundtrip_resp3() {
        let v = Value::Map(vec![
            (Value::bulk_str("a"), Value::Array(vec![Value::Integer(-5), Value::Nil, Value::Double(2.5)])),
            (Value::simple("b"), Value::Set(vec![Value::Boolean(true)])),
            (Value::bulk_str("c"), Value::Verbatim { format: *b"txt", text: Bytes::from_static(b"x\r\ny") }),
        ]);
        let mut buf = BytesMut::new();
        encode(&v, Protocol::Resp3, &mut buf);
        let (got, used) = decode_value(&buf, DecodeLimits::default()).unwrap().unwrap();
        assert_eq!(used, buf.len());
        assert_eq!(got, v);
        for cut in 0..buf.len() {
            assert!(decode_value(&buf[..cut], DecodeLimits::default()).unwrap().is_none());
        }
    }

    #[test]
    fn limits_are_checked() {
        let l = DecodeLimits { max_bulk_len: 10, max_elements: 10, max_depth: 3 };
        assert!(decode_value(b"$11\r\n", l).is_err());
        assert!(decode_value(b"*11\r\n", l).is_err());
        assert!(decode_value(b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", l).is_err());
    }
}
