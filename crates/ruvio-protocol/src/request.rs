//! The server side: turns bytes from a client into commands (arrays of arguments).
//!
//! The parser is incremental (it keeps the arguments already read when a request arrives in pieces, so a large
//! request is scanned once) and bounded: every count and length read off the wire is checked against
//! [`RequestLimits`] before anything is reserved for it, and at most [`PREALLOC_ARGS`] argument slots are allocated
//! up front whatever count the client announced.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

/// Longest header line (`*N`, `$N`) or inline request, as in Redis (`PROTO_INLINE_MAX_SIZE`).
pub const MAX_INLINE: usize = 64 * 1024;
/// Argument slots reserved before they arrive, whatever count the client announced.
pub const PREALLOC_ARGS: usize = 1024;

/// Arguments a request may have before the connection authenticated (when a password is set).
pub const UNAUTHENTICATED_MAX_ARGS: usize = 10;
/// Longest bulk string before the connection authenticated.
pub const UNAUTHENTICATED_MAX_BULK: usize = 16 * 1024;

/// Limits a request must respect.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Largest bulk string (`proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Largest argument count in one multibulk request.
    pub max_args: usize,
    /// The connection has not authenticated yet: the much smaller `UNAUTHENTICATED_*` limits apply too
    /// (many unauthenticated connections announcing huge requests must not exhaust memory).
    pub unauthenticated: bool,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits { max_bulk_len: 512 * 1024 * 1024, max_args: i32::MAX as usize, unauthenticated: false }
    }
}

/// A malformed request. The texts are Redis's; the server replies with `-ERR <text>` and closes the connection.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    #[error("Protocol error: expected '$', got '{}'", *.0 as char)]
    ExpectedDollar(u8),
    #[error("Protocol error: too big mbulk count string")]
    TooBigMultibulkCount,
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    #[error("Protocol error: too big inline request")]
    TooBigInline,
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
}

#[derive(Debug, Default)]
enum State {
    #[default]
    Idle,
    /// Inside a multibulk request: `remaining` arguments still to come, `bulk_len` set once a `$N` header was read.
    Multibulk { remaining: usize, args: Vec<Bytes>, bulk_len: Option<usize> },
}

/// Incremental parser for client requests; one per connection.
#[derive(Debug, Default)]
pub struct RequestParser {
    state: State,
    /// Bytes of arguments already taken out of the buffer for the request in progress.
    partial_bytes: usize,
    /// The vector that held the arguments of the last large request that arrived in pieces, kept for the next one.
    /// Without it, a load of large commands split across reads (RPUSH of 1000 elements: a 32 KB vector each) frees
    /// one mid-sized block per command while the values it carries are being stored: glibc then carves the freed
    /// block into the values' allocations (a list's 8 KB chunks) and puts the next vector above them, leaving a
    /// remainder too small for anything but more vectors, so the heap grows by holes (docs/benchmarks.md, "The 1M
    /// list's RSS"). Only vectors of [`RECYCLE_MIN_ARGS`] to [`PREALLOC_ARGS`] slots are kept (at most 32 KB).
    spare: Vec<Bytes>,
}

/// Argument vectors smaller than this many slots are not kept for reuse: the allocator's per-thread caches already
/// serve such small blocks quickly and in place.
const RECYCLE_MIN_ARGS: usize = 64;

fn find_crlf(buf: &[u8]) -> Option<usize> {
    // Header lines (`*3`, `$5`) are a few bytes long: a plain scan of the first bytes finds their '\r' sooner than
    // setting up memchr's vector search, which takes over beyond them (the first '\r' either way).
    let head = buf.len().min(24);
    let first_cr = match buf[..head].iter().position(|&c| c == b'\r') {
        Some(i) => Some(i),
        None => memchr::memchr(b'\r', &buf[head..]).map(|i| i + head),
    };
    first_cr.and_then(|i| (buf.get(i + 1) == Some(&b'\n')).then_some(i)).or_else(|| {
        // Rare: a bare '\r' before the real terminator; fall back to a full scan.
        buf.windows(2).position(|w| w == b"\r\n")
    })
}

/// Parses a header number as strictly as Redis's `string2ll`: an optional '-', then digits without leading zeros;
/// no '+', no spaces.
fn parse_int(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if digits.is_empty() || digits.len() > 19 || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    // Accumulated as a negative number so that i64::MIN, whose magnitude has no positive i64, parses too.
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_sub((d - b'0') as i64)?;
    }
    if negative {
        // Redis's string2ll takes no "-0".
        (n != 0).then_some(n)
    } else {
        n.checked_neg()
    }
}

/// Most arguments a request may have to be taken by [`take_whole_request`] (lock commands, and most others, have
/// fewer); longer requests go the general way.
const WHOLE_REQUEST_ARGS: usize = 8;

/// A header number of the form the fast path takes (`1`-`9` then digits, at most 18 of them, then `\r\n`) starting
/// at `at`: the number and where the line after it starts. `None` for anything else (a sign, a leading zero, no
/// terminator yet), which the general path then reads with Redis's rules and errors.
#[inline(always)]
fn plain_header_number(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    let first = *buf.get(at)?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut n = (first - b'0') as usize;
    let mut i = at + 1;
    loop {
        match *buf.get(i)? {
            d @ b'0'..=b'9' if i - at < 18 => n = n * 10 + (d - b'0') as usize,
            b'\r' if *buf.get(i + 1)? == b'\n' => return Some((n, i + 2)),
            _ => return None,
        }
        i += 1;
    }
}

/// The common case of a pipeline: a whole multibulk request of at most [`WHOLE_REQUEST_ARGS`] arguments already
/// in `buf`, with plain headers and within `limits`. Its layout is read first without taking anything, then its
/// arguments are taken off `buf` and appended to `out`: the count of arguments. `None` (nothing taken) for anything
/// else, which the general path handles, with its errors and partial requests; what this path takes it would have
/// taken the same way. (It took the parser from 532 to 325 instructions per pipelined SPOP.)
fn take_whole_request(buf: &mut BytesMut, limits: &RequestLimits, out: &mut Vec<Bytes>) -> Option<usize> {
    let bytes = &buf[..];
    if bytes.first() != Some(&b'*') {
        return None;
    }
    let (count, mut at) = plain_header_number(bytes, 1)?;
    if count > WHOLE_REQUEST_ARGS || count > limits.max_args || (limits.unauthenticated && count > UNAUTHENTICATED_MAX_ARGS) {
        return None;
    }
    let max_bulk = if limits.unauthenticated { limits.max_bulk_len.min(UNAUTHENTICATED_MAX_BULK) } else { limits.max_bulk_len };
    // (header length, argument length) of each argument.
    let mut layout = [(0usize, 0usize); WHOLE_REQUEST_ARGS];
    let header_start = at;
    for slot in layout.iter_mut().take(count) {
        if bytes.get(at) != Some(&b'$') {
            return None;
        }
        let (len, data) = plain_header_number(bytes, at + 1).or_else(|| {
            // `$0`: an empty argument.
            (bytes.get(at + 1..at + 4) == Some(b"0\r\n")).then_some((0, at + 4))
        })?;
        // The argument and the two bytes after it (skipped unread, as Redis and the general path do).
        if len > max_bulk || bytes.len() < data + len + 2 {
            return None;
        }
        *slot = (data - at, len);
        at = data + len + 2;
    }
    out.reserve(count);
    buf.advance(header_start);
    for &(header, len) in &layout[..count] {
        buf.advance(header);
        out.push(buf.split_to(len).freeze());
        buf.advance(2);
    }
    Some(count)
}

impl RequestParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes held for the request in progress, buffered input included: what `client-query-buffer-limit` bounds.
    pub fn pending_bytes(&self, buf: &BytesMut) -> usize {
        self.partial_bytes + buf.len()
    }

    /// Drops the kept argument vector (a connection going idle holds no more than its buffers).
    #[inline]
    pub fn release_spare(&mut self) {
        if self.spare.capacity() != 0 {
            self.spare = Vec::new();
        }
    }

    /// True while a request has been started but not completed.
    pub fn in_request(&self) -> bool {
        matches!(self.state, State::Multibulk { .. })
    }

    /// Takes one complete request off the front of `buf`, or `Ok(None)` when more bytes are needed.
    /// Empty requests (`*0`, blank inline lines) are skipped.
    pub fn parse(&mut self, buf: &mut BytesMut, limits: &RequestLimits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let mut args = Vec::new();
        Ok(self.parse_into(buf, limits, &mut args)?.map(|_| args))
    }

    /// [`RequestParser::parse`] appending the request's arguments to `out` (which may hold earlier requests):
    /// `Ok(Some(n))` when one complete request of `n` arguments was appended. The server parses a whole read's
    /// pipeline into one vector this way, without a vector per command. While a request is incomplete its
    /// arguments so far are kept here, not in `out`; on an error `out` is left as it was.
    pub fn parse_into(&mut self, buf: &mut BytesMut, limits: &RequestLimits, out: &mut Vec<Bytes>) -> Result<Option<usize>, ProtocolError> {
        loop {
            if let State::Idle = self.state {
                let Some(&first) = buf.first() else { return Ok(None) };
                if first != b'*' {
                    match self.parse_inline(buf)? {
                        Some(args) if args.is_empty() => continue,
                        Some(args) => {
                            let n = args.len();
                            out.extend(args);
                            return Ok(Some(n));
                        }
                        None => return Ok(None),
                    }
                }
                if let Some(n) = take_whole_request(buf, limits, out) {
                    return Ok(Some(n));
                }
                let Some(end) = find_crlf(buf) else {
                    if buf.len() > MAX_INLINE {
                        return Err(ProtocolError::TooBigMultibulkCount);
                    }
                    return Ok(None);
                };
                let count = parse_int(&buf[1..end]).ok_or(ProtocolError::InvalidMultibulkLength)?;
                if count > limits.max_args as i64 {
                    return Err(ProtocolError::InvalidMultibulkLength);
                }
                if limits.unauthenticated && count > UNAUTHENTICATED_MAX_ARGS as i64 {
                    return Err(ProtocolError::UnauthenticatedMultibulkLength);
                }
                buf.advance(end + 2);
                if count <= 0 {
                    continue;
                }
                // (An empty vector allocates nothing: it is only filled when the request arrives in pieces.)
                self.state = State::Multibulk { remaining: count as usize, args: Vec::new(), bulk_len: None };
                self.partial_bytes = 0;
            }
            let spare = &mut self.spare;
            let State::Multibulk { remaining, args, bulk_len } = &mut self.state else { unreachable!() };
            // Arguments of this request read earlier go first (moved back here when it is complete).
            let start = out.len();
            out.reserve((*remaining).min(PREALLOC_ARGS));
            out.append(args);
            // Incomplete: what was read of this request stays with the parser.
            let total = out.len() - start + *remaining;
            let keep = |out: &mut Vec<Bytes>, args: &mut Vec<Bytes>, spare: &mut Vec<Bytes>| {
                if args.capacity() == 0 {
                    let want = total.min(PREALLOC_ARGS);
                    if want >= RECYCLE_MIN_ARGS && spare.capacity() >= want {
                        *args = std::mem::take(spare);
                    } else {
                        args.reserve(want);
                    }
                }
                args.extend(out.drain(start..));
            };
            while *remaining > 0 {
                let len = match *bulk_len {
                    Some(len) => len,
                    None => {
                        let Some(&first) = buf.first() else {
                            keep(out, args, spare);
                            return Ok(None);
                        };
                        let Some(end) = find_crlf(buf) else {
                            if buf.len() > MAX_INLINE {
                                out.truncate(start);
                                return Err(ProtocolError::TooBigBulkCount);
                            }
                            keep(out, args, spare);
                            return Ok(None);
                        };
                        let header = (|| {
                            if first != b'$' {
                                return Err(ProtocolError::ExpectedDollar(first));
                            }
                            let len = parse_int(&buf[1..end]).ok_or(ProtocolError::InvalidBulkLength)?;
                            if len < 0 || len as u64 > limits.max_bulk_len as u64 {
                                return Err(ProtocolError::InvalidBulkLength);
                            }
                            if limits.unauthenticated && len as usize > UNAUTHENTICATED_MAX_BULK {
                                return Err(ProtocolError::UnauthenticatedBulkLength);
                            }
                            Ok(len as usize)
                        })();
                        let len = match header {
                            Ok(len) => len,
                            Err(e) => {
                                out.truncate(start);
                                return Err(e);
                            }
                        };
                        buf.advance(end + 2);
                        *bulk_len = Some(len);
                        len
                    }
                };
                // `len` was bounded by max_bulk_len above, so `len + 2` cannot overflow.
                if buf.len() < len + 2 {
                    // Make room for what is missing, at most 1 MiB at a time: a client that announces a large bulk
                    // and sends nothing holds no more memory than the bytes it actually sent.
                    buf.reserve((len + 2 - buf.len()).min(1 << 20));
                    keep(out, args, spare);
                    return Ok(None);
                }
                let arg = buf.split_to(len).freeze();
                buf.advance(2);
                // Each argument also costs its handle, so a flood of empty arguments counts against the limit too.
                self.partial_bytes += len + std::mem::size_of::<Bytes>();
                out.push(arg);
                *bulk_len = None;
                *remaining -= 1;
            }
            if let State::Multibulk { args, .. } = std::mem::replace(&mut self.state, State::Idle) {
                // Emptied into `out` above; its slots carry the next large request that arrives in pieces.
                let cap = args.capacity();
                if (RECYCLE_MIN_ARGS..=PREALLOC_ARGS).contains(&cap) && cap > self.spare.capacity() {
                    self.spare = args;
                }
            }
            self.partial_bytes = 0;
            return Ok(Some(out.len() - start));
        }
    }

    fn parse_inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let Some(nl) = memchr::memchr(b'\n', buf) else {
            if buf.len() > MAX_INLINE {
                return Err(ProtocolError::TooBigInline);
            }
            return Ok(None);
        };
        if nl > MAX_INLINE {
            return Err(ProtocolError::TooBigInline);
        }
        let line = buf.split_to(nl + 1);
        let mut line = &line[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        split_inline_args(line).map(Some)
    }
}

fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Splits an inline request into arguments like Redis's `sdssplitargs`: whitespace separates, `"..."` takes
/// backslash escapes (`\n`, `\xHH`, ...), `'...'` takes `\'` only; a closing quote must be followed by a space.
fn split_inline_args(line: &[u8]) -> Result<Vec<Bytes>, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Ok(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex_value(line[i + 2]), hex_value(line[i + 3])) {
                        cur.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    cur.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                    i += 1;
                }
            } else if in_sq {
                if i >= n {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    cur.push(b'\'');
                    i += 2;
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                    i += 1;
                }
            } else {
                if i >= n || line[i].is_ascii_whitespace() {
                    break;
                }
                match line[i] {
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
                i += 1;
            }
        }
        args.push(Bytes::from(cur));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `*n` then `n` bulk strings `<prefix><i>`.
    fn request(n: usize, prefix: &str) -> Vec<u8> {
        let mut r = format!("*{n}\r\n").into_bytes();
        for i in 0..n {
            let a = format!("{prefix}{i}");
            r.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        r
    }

    /// Feeds `whole` in two halves; the request's argument count once complete.
    fn parse_in_two(p: &mut RequestParser, whole: &[u8], out: &mut Vec<Bytes>) -> usize {
        let l = RequestLimits::default();
        let mut buf = BytesMut::from(&whole[..whole.len() / 2]);
        assert_eq!(p.parse_into(&mut buf, &l, out).unwrap(), None);
        buf.extend_from_slice(&whole[whole.len() / 2..]);
        p.parse_into(&mut buf, &l, out).unwrap().expect("complete")
    }

    #[test]
    fn a_large_request_in_pieces_reuses_the_argument_vector_of_the_last_one() {
        let mut p = RequestParser::new();
        let mut out = Vec::new();
        assert_eq!(parse_in_two(&mut p, &request(100, "a"), &mut out), 100);
        let kept = p.spare.capacity();
        assert!(kept >= 100, "the finished request's vector is kept");
        // The next large request in pieces holds it while in progress, and gives it back when complete.
        out.clear();
        let second = request(80, "b");
        let mut buf = BytesMut::from(&second[..second.len() / 2]);
        assert_eq!(p.parse_into(&mut buf, &RequestLimits::default(), &mut out).unwrap(), None);
        assert_eq!(p.spare.capacity(), 0, "taken by the request in progress");
        buf.extend_from_slice(&second[second.len() / 2..]);
        assert_eq!(p.parse_into(&mut buf, &RequestLimits::default(), &mut out).unwrap(), Some(80));
        assert_eq!((&out[0][..], &out[79][..]), (&b"b0"[..], &b"b79"[..]));
        assert_eq!(p.spare.capacity(), kept, "given back");
        // A small request in pieces neither takes it nor replaces it.
        out.clear();
        assert_eq!(parse_in_two(&mut p, &request(3, "c"), &mut out), 3);
        assert_eq!(p.spare.capacity(), kept);
        // An idle connection drops it.
        p.release_spare();
        assert_eq!(p.spare.capacity(), 0);
        out.clear();
        assert_eq!(parse_in_two(&mut p, &request(100, "e"), &mut out), 100);
        assert_eq!(out[99], Bytes::from("e99"));
    }

    fn parse_all(input: &[u8], limits: RequestLimits) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(args) = p.parse(&mut buf, &limits)? {
            out.push(args);
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_inline_and_pipelined() {
        let got = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\na\r\nPING\r\n\r\nSET k \"v 1\"\r\n", RequestLimits::default()).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], vec![Bytes::from("GET"), Bytes::from("a")]);
        assert_eq!(got[1], vec![Bytes::from("PING")]);
        assert_eq!(got[2], vec![Bytes::from("SET"), Bytes::from("k"), Bytes::from("v 1")]);
    }

    #[test]
    fn byte_by_byte_equals_whole() {
        let input = b"*3\r\n$3\r\nSET\r\n$5\r\nk\r\n\0x\r\n$0\r\n\r\n";
        let mut p = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = None;
        for b in input.iter() {
            buf.extend_from_slice(&[*b]);
            if let Some(args) = p.parse(&mut buf, &RequestLimits::default()).unwrap() {
                got = Some(args);
            }
        }
        assert_eq!(got.unwrap()[1], Bytes::from_static(b"k\r\n\0x"));
    }

    #[test]
    fn parse_into_appends_requests_and_keeps_a_partial_one_apart() {
        let l = RequestLimits::default();
        let mut p = RequestParser::new();
        let mut out = vec![Bytes::from("earlier")];
        let mut buf = BytesMut::from(&b"*2\r\n$4\r\nLPOP\r\n$1\r\nk\r\nPING\r\n*3\r\n$4\r\nSADD\r\n$1\r\ns\r\n$2\r\nm"[..]);
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap(), Some(2));
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap(), Some(1));
        // The third request is incomplete: nothing of it in `out` yet.
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap(), None);
        assert_eq!(out, vec![Bytes::from("earlier"), Bytes::from("LPOP"), Bytes::from("k"), Bytes::from("PING")]);
        buf.extend_from_slice(b"1\r\n*1\r\n$3\r\nGET");
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap(), Some(3));
        assert_eq!(out[4..], [Bytes::from("SADD"), Bytes::from("s"), Bytes::from("m1")]);
        // A malformed request after a partial one leaves `out` as it was.
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap(), None);
        buf.extend_from_slice(b"\r\n*1\r\n$3\r\nGET\r\n*2\r\n$3\r\nGET\r\nx");
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap(), Some(1));
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap(), Some(1));
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap(), None);
        buf.extend_from_slice(b"\r\n");
        let before = out.clone();
        assert_eq!(p.parse_into(&mut buf, &l, &mut out).unwrap_err(), ProtocolError::ExpectedDollar(b'x'));
        assert_eq!(out, before);
    }

    #[test]
    fn redis_error_texts() {
        let l = RequestLimits::default();
        assert_eq!(parse_all(b"*abc\r\n", l).unwrap_err().to_string(), "Protocol error: invalid multibulk length");
        assert_eq!(parse_all(b"*1\r\n$abc\r\n", l).unwrap_err().to_string(), "Protocol error: invalid bulk length");
        assert_eq!(parse_all(b"*1\r\nfoo\r\n", l).unwrap_err().to_string(), "Protocol error: expected '$', got 'f'");
        assert_eq!(parse_all(b"*3000000000\r\n", l).unwrap_err(), ProtocolError::InvalidMultibulkLength);
        assert_eq!(parse_all(b"set \"a\"b\r\n", l).unwrap_err(), ProtocolError::UnbalancedQuotes);
        let strict = RequestLimits { unauthenticated: true, ..RequestLimits::default() };
        assert_eq!(parse_all(b"*11\r\n", strict).unwrap_err(), ProtocolError::UnauthenticatedMultibulkLength);
        assert_eq!(parse_all(b"*1\r\n$16385\r\n", strict).unwrap_err(), ProtocolError::UnauthenticatedBulkLength);
        assert_eq!(parse_all(b"*+1\r\n", l).unwrap_err(), ProtocolError::InvalidMultibulkLength);
        assert_eq!(parse_all(b"*1\r\n$+4\r\n", l).unwrap_err(), ProtocolError::InvalidBulkLength);
        assert_eq!(parse_all(b"*1\r\n$ 4\r\n", l).unwrap_err(), ProtocolError::InvalidBulkLength);
        let long = vec![b'a'; MAX_INLINE + 10];
        assert_eq!(parse_all(&long, l).unwrap_err(), ProtocolError::TooBigInline);
        let mut long_hdr = b"*".to_vec();
        long_hdr.extend(vec![b'1'; MAX_INLINE + 10]);
        assert_eq!(parse_all(&long_hdr, l).unwrap_err(), ProtocolError::TooBigMultibulkCount);
    }

    #[test]
    fn huge_announced_count_allocates_little() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*2000000000\r\n"[..]);
        assert!(p.parse(&mut buf, &RequestLimits::default()).unwrap().is_none());
        let State::Multibulk { args, .. } = &p.state else { panic!() };
        assert!(args.capacity() <= PREALLOC_ARGS);
    }

    #[test]
    fn inline_escapes() {
        let got = parse_all(b"set k \"a\\x41\\n\" 'it\\'s'\n", RequestLimits::default()).unwrap();
        assert_eq!(got[0][2], Bytes::from_static(b"aA\n"));
        assert_eq!(got[0][3], Bytes::from_static(b"it's"));
    }

    #[test]
    fn header_numbers_parse_like_redis_string2ll() {
        for (text, want) in [
            (&b"0"[..], Some(0)),
            (b"7", Some(7)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-9223372036854775809", None),
            (b"12345678901234567890", None),
            (b"", None),
            (b"-", None),
            (b"-0", None),
            (b"01", None),
            (b"+1", None),
            (b" 1", None),
            (b"1a", None),
        ] {
            assert_eq!(parse_int(text), want, "{:?}", String::from_utf8_lossy(text));
        }
    }

    proptest::proptest! {
        #[test]
        fn header_numbers_agree_with_the_standard_parser(n in proptest::num::i64::ANY) {
            let text = n.to_string();
            proptest::prop_assert_eq!(parse_int(text.as_bytes()), (n != 0 || !text.starts_with('-')).then_some(n));
        }

        #[test]
        fn never_panics_on_garbage(data in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse_all(&data, RequestLimits { max_bulk_len: 1024, max_args: 64, unauthenticated: false });
        }

        #[test]
        fn roundtrips_any_command(args in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 1..8), split in 0usize..400) {
            let mut wire = BytesMut::new();
            crate::encode_command(&args, &mut wire);
            let split = split.min(wire.len());
            let mut p = RequestParser::new();
            let mut buf = BytesMut::from(&wire[..split]);
            let first = p.parse(&mut buf, &RequestLimits::default()).unwrap();
            let got = match first {
                Some(got) => got,
                None => {
                    buf.extend_from_slice(&wire[split..]);
                    p.parse(&mut buf, &RequestLimits::default()).unwrap().unwrap()
                }
            };
            let got: Vec<Vec<u8>> = got.iter().map(|b| b.to_vec()).collect();
            proptest::prop_assert_eq!(got, args);
        }

        /// Requests that arrive whole (taken by `take_whole_request`) and the same bytes arriving one at a time
        /// (read by the general path alone: a request is never whole before its first line has been taken) give
        /// the same requests and the same error, for inputs made of the pieces headers are made of.
        #[test]
        fn whole_requests_read_as_the_general_path_reads_them(
            pieces in proptest::collection::vec(proptest::sample::select(vec![
                "*", "$", "0", "1", "2", "3", "9", "10", "-", "+", " ", "\r\n", "\r", "\n", "a", "abc", "*2\r\n", "$1\r\n",
                "*1\r\n$4\r\nPING\r\n", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", "*9\r\n", "$17\r\n",
                "*8\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n",
                "*2\r\n$5\r\nhello\r\n$20\r\n01234567890123456789\r\n", "$00\r\n", "*01\r\n",
            ]), 0..24),
            unauthenticated in proptest::bool::ANY,
            max_bulk_len in 3usize..30,
        ) {
            let wire: Vec<u8> = pieces.concat().into_bytes();
            let limits = RequestLimits { max_bulk_len, max_args: 6, unauthenticated };
            let read_all = |chunk: usize| {
                let (mut p, mut buf, mut got) = (RequestParser::new(), BytesMut::new(), Vec::new());
                for piece in wire.chunks(chunk) {
                    buf.extend_from_slice(piece);
                    loop {
                        match p.parse(&mut buf, &limits) {
                            Ok(Some(args)) => got.push(Ok(args)),
                            Ok(None) => break,
                            Err(e) => {
                                got.push(Err(e));
                                return got;
                            }
                        }
                    }
                }
                got
            };
            proptest::prop_assert_eq!(read_all(wire.len().max(1)), read_all(1));
        }
    }

    #[test]
    fn whole_requests_are_taken_at_once_and_others_left_to_the_general_path() {
        let l = RequestLimits::default();
        let mut out = Vec::new();
        let mut buf = BytesMut::from(&b"*2\r\n$4\r\nSPOP\r\n$0\r\n\r\n*1\r\n$4\r\nPI"[..]);
        assert_eq!(take_whole_request(&mut buf, &l, &mut out), Some(2));
        assert_eq!(out, [Bytes::from("SPOP"), Bytes::new()]);
        assert_eq!(&buf[..], b"*1\r\n$4\r\nPI", "the incomplete request is left as it was");
        assert_eq!(take_whole_request(&mut buf, &l, &mut out), None);
        assert_eq!(&buf[..], b"*1\r\n$4\r\nPI");
        for other in [&b"*9\r\n"[..], b"*01\r\n", b"*-1\r\n", b"*1\r\n$-1\r\n", b"*1\r\n+OK\r\n", b"*1\r\n$3\r\nab"] {
            let mut buf = BytesMut::from(other);
            assert_eq!(take_whole_request(&mut buf, &l, &mut out), None, "{:?}", String::from_utf8_lossy(other));
            assert_eq!(&buf[..], other);
        }
        let strict = RequestLimits { unauthenticated: true, ..l };
        let long = format!("*1\r\n${}\r\n{}\r\n", UNAUTHENTICATED_MAX_BULK + 1, "x".repeat(UNAUTHENTICATED_MAX_BULK + 1));
        assert_eq!(take_whole_request(&mut BytesMut::from(long.as_bytes()), &strict, &mut out), None);
        assert_eq!(take_whole_request(&mut BytesMut::from(long.as_bytes()), &l, &mut out), Some(1));
    }
}
