use bytes::{BufMut, BytesMut};

use crate::value::{Protocol, Value};

fn put_len(buf: &mut BytesMut, prefix: u8, len: usize) {
    buf.put_u8(prefix);
    buf.put_slice(itoa::Buffer::new().format(len).as_bytes());
    buf.put_slice(b"\r\n");
}

/// Appends a one-line reply (`+`, `-`, `(`). Such a line ends at the first CR or LF, so one inside the text would
/// end it early and let the rest be read as a reply of its own (reply injection through an echoed argument). As
/// Redis does, every CR and LF becomes a space: no caller can put a line break into the stream.
fn put_line(buf: &mut BytesMut, prefix: u8, text: &[u8]) {
    buf.put_u8(prefix);
    let mut rest = text;
    while let Some(at) = rest.iter().position(|&c| c == b'\r' || c == b'\n') {
        buf.put_slice(&rest[..at]);
        buf.put_u8(b' ');
        rest = &rest[at + 1..];
    }
    buf.put_slice(rest);
    buf.put_slice(b"\r\n");
}

fn put_bulk(buf: &mut BytesMut, data: &[u8]) {
    put_len(buf, b'$', data.len());
    buf.put_slice(data);
    buf.put_slice(b"\r\n");
}

/// Formats a double as Redis does: `inf`, `-inf`, `nan`, otherwise the shortest form that reads back exactly.
pub(crate) fn format_double(d: f64) -> String {
    if d.is_nan() {
        "nan".into()
    } else if d.is_infinite() {
        if d > 0.0 { "inf".into() } else { "-inf".into() }
    } else if d == d.trunc() && d.abs() < 1e17 {
        format!("{}", d as i64)
    } else {
        ryu::Buffer::new().format(d).to_string()
    }
}

/// Appends `value` to `buf` in the given protocol version.
pub fn encode(value: &Value, proto: Protocol, buf: &mut BytesMut) {
    let resp3 = proto == Protocol::Resp3;
    match value {
        Value::Simple(s) => put_line(buf, b'+', s),
        // Redis's addReplyErrorFormat trims CR and LF off the end of an error text (an echoed argument's) before the
        // ones inside become spaces.
        Value::Error(e) => put_line(buf, b'-', &e[..e.iter().rposition(|&c| c != b'\r' && c != b'\n').map_or(0, |i| i + 1)]),
        Value::Integer(i) => {
            buf.put_u8(b':');
            buf.put_slice(itoa::Buffer::new().format(*i).as_bytes());
            buf.put_slice(b"\r\n");
        }
        Value::Bulk(b) => put_bulk(buf, b),
        Value::Nil if resp3 => buf.put_slice(b"_\r\n"),
        Value::Nil => buf.put_slice(b"$-1\r\n"),
        Value::NilArray if resp3 => buf.put_slice(b"_\r\n"),
        Value::NilArray => buf.put_slice(b"*-1\r\n"),
        Value::Array(items) => {
            put_len(buf, b'*', items.len());
            items.iter().for_each(|v| encode(v, proto, buf));
        }
        Value::Set(items) => {
            put_len(buf, if resp3 { b'~' } else { b'*' }, items.len());
            items.iter().for_each(|v| encode(v, proto, buf));
        }
        Value::Push(items) => {
            put_len(buf, if resp3 { b'>' } else { b'*' }, items.len());
            items.iter().for_each(|v| encode(v, proto, buf));
        }
        Value::Map(pairs) => {
            if resp3 {
                put_len(buf, b'%', pairs.len());
            } else {
                put_len(buf, b'*', pairs.len() * 2);
            }
            for (k, v) in pairs {
                encode(k, proto, buf);
                encode(v, proto, buf);
            }
        }
        Value::Attribute { attributes, data } => {
            // Attributes are out-of-band in RESP3 and have no RESP2 form: RESP2 peers get the data only.
            if resp3 {
                put_len(buf, b'|', attributes.len());
                for (k, v) in attributes {
                    encode(k, proto, buf);
                    encode(v, proto, buf);
                }
            }
            encode(data, proto, buf);
        }
        Value::Double(d) => {
            let text = format_double(*d);
            if resp3 {
                buf.put_u8(b',');
                buf.put_slice(text.as_bytes());
                buf.put_slice(b"\r\n");
            } else {
                put_bulk(buf, text.as_bytes());
            }
        }
        Value::Boolean(b) => {
            if resp3 {
                buf.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
            } else {
                buf.put_slice(if *b { b":1\r\n" } else { b":0\r\n" });
            }
        }
        Value::Verbatim { format, text } => {
            if resp3 {
                put_len(buf, b'=', text.len() + 4);
                buf.put_slice(format);
                buf.put_u8(b':');
                buf.put_slice(text);
                buf.put_slice(b"\r\n");
            } else {
                put_bulk(buf, text);
            }
        }
        Value::BigNumber(n) => {
            if resp3 {
                put_line(buf, b'(', n);
            } else {
                put_bulk(buf, n);
            }
        }
        // Already in wire form; an array of bulk strings is the same in both versions.
        Value::Bulks(b) => buf.put_slice(b.wire()),
    }
}

/// Appends a command (an array of bulk strings), as a client sends it.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A], buf: &mut BytesMut) {
    put_len(buf, b'*', args.len());
    for a in args {
        put_bulk(buf, a.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn enc(v: &Value, p: Protocol) -> Vec<u8> {
        let mut b = BytesMut::new();
        encode(v, p, &mut b);
        b.to_vec()
    }

    #[test]
    fn resp2_degrades_resp3_types() {
        let map = Value::Map(vec![(Value::bulk_str("save"), Value::bulk_str(""))]);
        assert_eq!(enc(&map, Protocol::Resp2), b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
        assert_eq!(enc(&map, Protocol::Resp3), b"%1\r\n$4\r\nsave\r\n$0\r\n\r\n");
        assert_eq!(enc(&Value::Nil, Protocol::Resp2), b"$-1\r\n");
        assert_eq!(enc(&Value::NilArray, Protocol::Resp2), b"*-1\r\n");
        assert_eq!(enc(&Value::Nil, Protocol::Resp3), b"_\r\n");
        assert_eq!(enc(&Value::Boolean(true), Protocol::Resp2), b":1\r\n");
        assert_eq!(enc(&Value::Double(1.5), Protocol::Resp3), b",1.5\r\n");
        assert_eq!(enc(&Value::Double(3.0), Protocol::Resp2), b"$1\r\n3\r\n");
        let v = Value::Verbatim { format: *b"txt", text: Bytes::from_static(b"hi") };
        assert_eq!(enc(&v, Protocol::Resp3), b"=6\r\ntxt:hi\r\n");
        assert_eq!(enc(&v, Protocol::Resp2), b"$2\r\nhi\r\n");
    }

    #[test]
    fn one_line_replies_never_carry_a_line_break() {
        let forged = Bytes::from_static(b"ERR unknown command 'hi'\r\n$10\r\nuser=admin\r\n'");
        for p in [Protocol::Resp2, Protocol::Resp3] {
            assert_eq!(
                enc(&Value::Error(forged.clone()), p),
                b"-ERR unknown command 'hi'  $10  user=admin  '\r\n"
            );
            assert_eq!(enc(&Value::Simple(Bytes::from_static(b"a\nb\rc")), p), b"+a b c\r\n");
            // An error's trailing CR/LF is trimmed (Redis's addReplyErrorFormat); a simple string's is not.
            assert_eq!(enc(&Value::Error(Bytes::from_static(b"ERR Unsupported option \xfe\r\nb\r\n")), p), b"-ERR Unsupported option \xfe  b\r\n");
            assert_eq!(enc(&Value::Simple(Bytes::from_static(b"a\r")), p), b"+a \r\n");
        }
        assert_eq!(enc(&Value::BigNumber(Bytes::from_static(b"1\r\n2")), Protocol::Resp3), b"(1  2\r\n");
    }

    /// An iterator that claims a length it does not have.
    struct Lying<I>(I, usize);
    impl<I: Iterator> Iterator for Lying<I> {
        type Item = I::Item;
        fn next(&mut self) -> Option<I::Item> {
            self.0.next()
        }
        fn size_hint(&self) -> (usize, Option<usize>) {
            (self.1, Some(self.1))
        }
    }
    impl<I: Iterator> ExactSizeIterator for Lying<I> {}

    proptest::proptest! {
        /// A `BulkArray` is byte for byte the `Array` of `Bulk`s it stands for, in both versions, and reads back
        /// the elements it was built from.
        #[test]
        fn bulk_array_is_an_array_of_bulks(items in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 0..30), big in 0usize..3) {
            let mut items = items;
            // A few long ones, so lengths of several digits are read back too.
            items.extend((0..big).map(|i| vec![b'\r'; 10_000 + i]));
            let b = crate::BulkArray::new(items.iter().map(|e| &e[..]));
            // An iterator whose length is wrong still gives a well-formed array of what it yielded.
            let short = crate::BulkArray::new(Lying(items.iter().map(|e| &e[..]), items.len() + 11));
            let plain = Value::Array(items.iter().map(|e| Value::Bulk(Bytes::copy_from_slice(e))).collect());
            for p in [Protocol::Resp2, Protocol::Resp3] {
                proptest::prop_assert_eq!(enc(&Value::Bulks(b.clone()), p), enc(&plain, p));
            }
            proptest::prop_assert_eq!(enc(&Value::Bulks(short), Protocol::Resp2), enc(&plain, Protocol::Resp2));
            proptest::prop_assert_eq!(b.len(), items.len());
            proptest::prop_assert_eq!(b.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), items);
            proptest::prop_assert_eq!(Value::Array(b.to_values()), plain);
        }
    }

    #[test]
    fn doubles_format_like_redis() {
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(-f64::INFINITY), "-inf");
        assert_eq!(format_double(10.5), "10.5");
        assert_eq!(format_double(5.0e3), "5000");
    }
}
