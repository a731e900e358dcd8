//! The lock commands' arguments, typed: one struct per command (`docs/commands.md`, section "Locks").
//!
//! The client builds a struct and sends it ([`LockCommand::to_args`], [`LockCommand::encode`]); the server reads
//! one from a request ([`LockCommand::parse`]), answering the argument errors with the texts below, checked in
//! the order the server has always checked them. Parsing checks what the arguments say, not what the keyspace
//! holds: `WRONGTYPE`, the semaphore's fixed limit and `MISCONF` are the lock engine's answers.
//!
//! ```
//! use bytes::Bytes;
//! use ruvio_protocol::lock_args::{Lease, LockCommand};
//!
//! let lease = Lease { key: Bytes::from("job"), ttl_ms: 30_000, wait_ms: Some(5_000) };
//! let args = lease.to_args(); // LEASE job 30000 WAIT 5000
//! assert_eq!(Lease::parse(&args), Ok(lease));
//!
//! let bad: Vec<Bytes> = ["LEASE", "job", "0"].into_iter().map(Bytes::from).collect();
//! let err = Lease::parse(&bad).unwrap_err();
//! assert_eq!(err.to_string(), "ERR invalid ttl_ms: must be between 1 and 2592000000 (30 days)");
//! ```

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use thiserror::Error;

use crate::{encode_command, Value};

/// The longest `ttl_ms` and `WAIT` timeout: 30 days, in milliseconds.
pub const MAX_TTL_MS: u64 = 30 * 24 * 3600 * 1000;
/// The largest semaphore limit.
pub const MAX_LIMIT: u64 = 100_000;
/// The largest `PX` of `IFGT`, so that adding it to a clock reading cannot overflow.
pub const MAX_PX_MS: u64 = i64::MAX as u64 / 2;

/// An argument error of a lock command. `to_string()` (and the [`Value`] it converts into) is the exact error
/// reply of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LockArgError {
    /// Too few or too many arguments; carries the command's name in lower case.
    #[error("ERR wrong number of arguments for '{0}' command")]
    Arity(&'static str),
    /// A token, ttl, limit or `PX` value that is not a 64-bit integer, or a token that is not positive.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// An unknown option, or an option without its value.
    #[error("ERR syntax error")]
    Syntax,
    /// `ttl_ms` outside 1..=[`MAX_TTL_MS`].
    #[error("ERR invalid ttl_ms: must be between 1 and 2592000000 (30 days)")]
    Ttl,
    /// A semaphore limit outside 1..=[`MAX_LIMIT`].
    #[error("ERR invalid limit: must be between 1 and 100000")]
    Limit,
    /// A `WAIT` timeout that is not an integer.
    #[error("ERR timeout is not an integer or out of range")]
    WaitNotInteger,
    /// A negative `WAIT` timeout.
    #[error("ERR timeout is negative")]
    WaitNegative,
    /// A `WAIT` timeout above [`MAX_TTL_MS`].
    #[error("ERR timeout is out of range")]
    WaitOutOfRange,
    /// An `IFGT ... PX` below 1 or above [`MAX_PX_MS`].
    #[error("ERR invalid expire time in 'ifgt' command")]
    IfgtExpire,
}

impl From<LockArgError> for Value {
    fn from(e: LockArgError) -> Value {
        Value::error(e.to_string())
    }
}

/// A lock command that the client encodes and the server parses.
pub trait LockCommand: Sized {
    /// The command's name, as the client sends it.
    const NAME: &'static str;

    /// Reads the command from a request's arguments, its name first (`args[0]` is not looked at: dispatch chose
    /// the command by it). Errors come in the order the server checks them.
    fn parse(args: &[Bytes]) -> Result<Self, LockArgError>;

    /// The request's arguments, the name first.
    fn to_args(&self) -> Vec<Bytes>;

    /// Appends the request, in RESP, to `out`.
    fn encode(&self, out: &mut BytesMut) {
        encode_command(&self.to_args(), out);
    }
}

/// `LEASE key ttl_ms [WAIT timeout_ms]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lock's key.
    pub key: Bytes,
    /// How long the grant lasts, in milliseconds (1..=[`MAX_TTL_MS`] once parsed).
    pub ttl_ms: u64,
    /// `WAIT timeout_ms`: how long to queue for a taken lock; `Some(0)` waits without a limit.
    pub wait_ms: Option<u64>,
}

/// `RENEW key token ttl_ms`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renew {
    /// The lock's key.
    pub key: Bytes,
    /// The holder's fencing token (positive once parsed).
    pub token: i64,
    /// The new deadline, in milliseconds from now (1..=[`MAX_TTL_MS`] once parsed).
    pub ttl_ms: u64,
}

/// `RELEASE key token`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// The lock's key.
    pub key: Bytes,
    /// The holder's fencing token (positive once parsed).
    pub token: i64,
}

/// `SEMAPHORE key limit ttl_ms [WAIT timeout_ms]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semaphore {
    /// The semaphore's key.
    pub key: Bytes,
    /// How many holders at once (1..=[`MAX_LIMIT`] once parsed, so it fits a `u32`).
    pub limit: u64,
    /// How long the slot lasts, in milliseconds (1..=[`MAX_TTL_MS`] once parsed).
    pub ttl_ms: u64,
    /// `WAIT timeout_ms`: how long to queue for a slot; `Some(0)` waits without a limit.
    pub wait_ms: Option<u64>,
}

/// `IFGT key token value [PX milliseconds]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ifgt {
    /// The key written.
    pub key: Bytes,
    /// The writer's fencing token (positive once parsed).
    pub token: i64,
    /// The string value.
    pub value: Bytes,
    /// `PX milliseconds`: the value's time to live (1..=[`MAX_PX_MS`] once parsed); `None`: no expiry.
    pub px_ms: Option<u64>,
}

/// `LOCKINFO key`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The lock's key.
    pub key: Bytes,
}

impl Lease {
    /// How long the server queues the caller for a taken lock: `None` not at all, `Some(None)` without a limit.
    pub fn wait(&self) -> Option<Option<Duration>> {
        wait_duration(self.wait_ms)
    }
}

impl Semaphore {
    /// How long the server queues the caller for a slot: `None` not at all, `Some(None)` without a limit.
    pub fn wait(&self) -> Option<Option<Duration>> {
        wait_duration(self.wait_ms)
    }
}

fn wait_duration(wait_ms: Option<u64>) -> Option<Option<Duration>> {
    wait_ms.map(|ms| (ms > 0).then(|| Duration::from_millis(ms)))
}

/// Reads an integer as Redis does: 64-bit, decimal, no `+`, no leading zeros, no `-0`, no spaces.
pub fn parse_integer(b: &[u8]) -> Option<i64> {
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    let leading_zero = digits.first() == Some(&b'0') && (digits.len() > 1 || digits.len() < b.len());
    if digits.is_empty() || leading_zero || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// A fencing token argument: a positive 64-bit integer.
pub fn parse_token(b: &[u8]) -> Result<i64, LockArgError> {
    match parse_integer(b) {
        Some(t) if t > 0 => Ok(t),
        _ => Err(LockArgError::NotInteger),
    }
}

fn parse_ttl(b: &[u8]) -> Result<u64, LockArgError> {
    let ttl = parse_integer(b).ok_or(LockArgError::NotInteger)?;
    u64::try_from(ttl).ok().filter(|t| (1..=MAX_TTL_MS).contains(t)).ok_or(LockArgError::Ttl)
}

/// `[WAIT timeout_ms]` after the fixed arguments.
fn parse_wait(rest: &[Bytes]) -> Result<Option<u64>, LockArgError> {
    match rest {
        [] => Ok(None),
        [opt, ms] if opt.eq_ignore_ascii_case(b"wait") => {
            let ms = parse_integer(ms).ok_or(LockArgError::WaitNotInteger)?;
            let ms = u64::try_from(ms).map_err(|_| LockArgError::WaitNegative)?;
            if ms > MAX_TTL_MS {
                return Err(LockArgError::WaitOutOfRange);
            }
            Ok(Some(ms))
        }
        _ => Err(LockArgError::Syntax),
    }
}

/// `[PX milliseconds]` after IFGT's fixed arguments.
fn parse_px(rest: &[Bytes]) -> Result<Option<u64>, LockArgError> {
    match rest {
        [] => Ok(None),
        [opt, ms] if opt.eq_ignore_ascii_case(b"px") => {
            let ms = parse_integer(ms).ok_or(LockArgError::NotInteger)?;
            u64::try_from(ms).ok().filter(|ms| (1..=MAX_PX_MS).contains(ms)).map(Some).ok_or(LockArgError::IfgtExpire)
        }
        _ => Err(LockArgError::Syntax),
    }
}

/// The arguments after the name when their count is `fixed`, or at least `fixed` when `more` is allowed (for
/// the options).
fn counted<'a>(args: &'a [Bytes], name: &'static str, fixed: usize, more: bool) -> Result<&'a [Bytes], LockArgError> {
    match args.get(1..) {
        Some(rest) if rest.len() == fixed || (more && rest.len() > fixed) => Ok(rest),
        _ => Err(LockArgError::Arity(name)),
    }
}

fn int(n: impl itoa::Integer) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

fn name(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

/// `args`, followed by `WAIT ms` or `PX ms` when the option is given.
fn with_option(mut args: Vec<Bytes>, option: &'static str, ms: Option<u64>) -> Vec<Bytes> {
    if let Some(ms) = ms {
        args.extend([name(option), int(ms)]);
    }
    args
}

impl LockCommand for Lease {
    const NAME: &'static str = "LEASE";

    fn parse(args: &[Bytes]) -> Result<Self, LockArgError> {
        let rest = counted(args, "lease", 2, true)?;
        let ttl_ms = parse_ttl(&rest[1])?;
        Ok(Lease { key: rest[0].clone(), ttl_ms, wait_ms: parse_wait(&rest[2..])? })
    }

    fn to_args(&self) -> Vec<Bytes> {
        with_option(vec![name(Self::NAME), self.key.clone(), int(self.ttl_ms)], "WAIT", self.wait_ms)
    }
}

impl LockCommand for Renew {
    const NAME: &'static str = "RENEW";

    fn parse(args: &[Bytes]) -> Result<Self, LockArgError> {
        let rest = counted(args, "renew", 3, false)?;
        let token = parse_token(&rest[1])?;
        Ok(Renew { key: rest[0].clone(), token, ttl_ms: parse_ttl(&rest[2])? })
    }

    fn to_args(&self) -> Vec<Bytes> {
        vec![name(Self::NAME), self.key.clone(), int(self.token), int(self.ttl_ms)]
    }
}

impl LockCommand for Release {
    const NAME: &'static str = "RELEASE";

    fn parse(args: &[Bytes]) -> Result<Self, LockArgError> {
        let rest = counted(args, "release", 2, false)?;
        Ok(Release { key: rest[0].clone(), token: parse_token(&rest[1])? })
    }

    fn to_args(&self) -> Vec<Bytes> {
        vec![name(Self::NAME), self.key.clone(), int(self.token)]
    }
}

impl LockCommand for Semaphore {
    const NAME: &'static str = "SEMAPHORE";

    fn parse(args: &[Bytes]) -> Result<Self, LockArgError> {
        let rest = counted(args, "semaphore", 3, true)?;
        let limit = parse_integer(&rest[1]).ok_or(LockArgError::NotInteger)?;
        let limit = u64::try_from(limit).ok().filter(|l| (1..=MAX_LIMIT).contains(l)).ok_or(LockArgError::Limit)?;
        let ttl_ms = parse_ttl(&rest[2])?;
        Ok(Semaphore { key: rest[0].clone(), limit, ttl_ms, wait_ms: parse_wait(&rest[3..])? })
    }

    fn to_args(&self) -> Vec<Bytes> {
        with_option(vec![name(Self::NAME), self.key.clone(), int(self.limit), int(self.ttl_ms)], "WAIT", self.wait_ms)
    }
}

impl LockCommand for Ifgt {
    const NAME: &'static str = "IFGT";

    fn parse(args: &[Bytes]) -> Result<Self, LockArgError> {
        let rest = counted(args, "ifgt", 3, true)?;
        let token = parse_token(&rest[1])?;
        Ok(Ifgt { key: rest[0].clone(), token, value: rest[2].clone(), px_ms: parse_px(&rest[3..])? })
    }

    fn to_args(&self) -> Vec<Bytes> {
        with_option(vec![name(Self::NAME), self.key.clone(), int(self.token), self.value.clone()], "PX", self.px_ms)
    }
}

impl LockCommand for LockInfo {
    const NAME: &'static str = "LOCKINFO";

    fn parse(args: &[Bytes]) -> Result<Self, LockArgError> {
        let rest = counted(args, "lockinfo", 1, false)?;
        Ok(LockInfo { key: rest[0].clone() })
    }

    fn to_args(&self) -> Vec<Bytes> {
        vec![name(Self::NAME), self.key.clone()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    /// The error text a request gets, as the server sends it.
    fn error<C: LockCommand + std::fmt::Debug>(words: &[&str]) -> String {
        let Value::Error(text) = Value::from(C::parse(&args(words)).unwrap_err()) else { unreachable!() };
        String::from_utf8(text.to_vec()).unwrap()
    }

    const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
    const TTL: &str = "ERR invalid ttl_ms: must be between 1 and 2592000000 (30 days)";
    const LIMIT: &str = "ERR invalid limit: must be between 1 and 100000";
    const SYNTAX: &str = "ERR syntax error";

    #[test]
    fn integers_are_read_as_redis_reads_them() {
        for ok in ["0", "1", "-1", "42", "9223372036854775807", "-9223372036854775808"] {
            assert_eq!(parse_integer(ok.as_bytes()), Some(ok.parse().unwrap()), "{ok}");
        }
        for bad in ["", "+1", "01", "-0", "-01", "00", "1 ", " 1", "1.0", "-", "9223372036854775808", "1e3", "x"] {
            assert_eq!(parse_integer(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn lease_round_trips_and_reads_its_wait_option() {
        for lease in [
            Lease { key: Bytes::from("job"), ttl_ms: 30_000, wait_ms: None },
            Lease { key: Bytes::from("job"), ttl_ms: 1, wait_ms: Some(0) },
            Lease { key: Bytes::from("job"), ttl_ms: MAX_TTL_MS, wait_ms: Some(MAX_TTL_MS) },
        ] {
            assert_eq!(Lease::parse(&lease.to_args()).as_ref(), Ok(&lease));
        }
        assert_eq!(Lease { key: Bytes::new(), ttl_ms: 1, wait_ms: Some(0) }.wait(), Some(None), "WAIT 0: no limit");
        assert_eq!(Lease { key: Bytes::new(), ttl_ms: 1, wait_ms: Some(5) }.wait(), Some(Some(Duration::from_millis(5))));
        assert_eq!(Lease { key: Bytes::new(), ttl_ms: 1, wait_ms: None }.wait(), None);
        let parsed = Lease::parse(&args(&["lease", "k", "10", "wait", "7"])).unwrap();
        assert_eq!(parsed.wait_ms, Some(7), "the option is case-insensitive");
    }

    #[test]
    fn lease_errors_are_the_servers() {
        assert_eq!(error::<Lease>(&["LEASE", "k"]), "ERR wrong number of arguments for 'lease' command");
        assert_eq!(error::<Lease>(&["LEASE", "k", "abc"]), NOT_INTEGER);
        assert_eq!(error::<Lease>(&["LEASE", "k", "0"]), TTL);
        assert_eq!(error::<Lease>(&["LEASE", "k", "-5"]), TTL);
        assert_eq!(error::<Lease>(&["LEASE", "k", "2592000001"]), TTL);
        assert_eq!(error::<Lease>(&["LEASE", "k", "0", "WAIT", "x"]), TTL, "the ttl is checked first");
        assert_eq!(error::<Lease>(&["LEASE", "k", "10", "WAIT", "x"]), "ERR timeout is not an integer or out of range");
        assert_eq!(error::<Lease>(&["LEASE", "k", "10", "WAIT", "-1"]), "ERR timeout is negative");
        assert_eq!(error::<Lease>(&["LEASE", "k", "10", "WAIT", "2592000001"]), "ERR timeout is out of range");
        assert_eq!(error::<Lease>(&["LEASE", "k", "10", "WAIT"]), SYNTAX);
        assert_eq!(error::<Lease>(&["LEASE", "k", "10", "NOWAIT", "5"]), SYNTAX);
        assert_eq!(error::<Lease>(&["LEASE", "k", "10", "WAIT", "5", "WAIT", "5"]), SYNTAX);
    }

    #[test]
    fn renew_and_release_errors_are_the_servers() {
        let renew = Renew { key: Bytes::from("k"), token: 7, ttl_ms: 100 };
        assert_eq!(Renew::parse(&renew.to_args()), Ok(renew));
        assert_eq!(error::<Renew>(&["RENEW", "k", "7"]), "ERR wrong number of arguments for 'renew' command");
        assert_eq!(error::<Renew>(&["RENEW", "k", "7", "100", "x"]), "ERR wrong number of arguments for 'renew' command");
        assert_eq!(error::<Renew>(&["RENEW", "k", "0", "100"]), NOT_INTEGER, "tokens are positive");
        assert_eq!(error::<Renew>(&["RENEW", "k", "-7", "100"]), NOT_INTEGER);
        assert_eq!(error::<Renew>(&["RENEW", "k", "x", "0"]), NOT_INTEGER, "the token is checked before the ttl");
        assert_eq!(error::<Renew>(&["RENEW", "k", "7", "0"]), TTL);
        assert_eq!(error::<Renew>(&["RENEW", "k", "7", "1.5"]), NOT_INTEGER);

        let release = Release { key: Bytes::from("k"), token: i64::MAX };
        assert_eq!(Release::parse(&release.to_args()), Ok(release));
        assert_eq!(error::<Release>(&["RELEASE", "k"]), "ERR wrong number of arguments for 'release' command");
        assert_eq!(error::<Release>(&["RELEASE", "k", "18446744073709551615"]), NOT_INTEGER);
        assert_eq!(error::<Release>(&["RELEASE", "k", "+7"]), NOT_INTEGER);
    }

    #[test]
    fn semaphore_errors_are_the_servers() {
        let sem = Semaphore { key: Bytes::from("s"), limit: MAX_LIMIT, ttl_ms: 10, wait_ms: Some(3) };
        assert_eq!(Semaphore::parse(&sem.to_args()).as_ref(), Ok(&sem));
        assert_eq!(sem.wait(), Some(Some(Duration::from_millis(3))));
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "1"]), "ERR wrong number of arguments for 'semaphore' command");
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "x", "0"]), NOT_INTEGER, "the limit is checked first");
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "0", "0"]), LIMIT);
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "100001", "10"]), LIMIT);
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "-1", "10"]), LIMIT);
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "2", "0", "WAIT", "x"]), TTL);
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "2", "x"]), NOT_INTEGER);
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "2", "10", "WAIT", "-3"]), "ERR timeout is negative");
        assert_eq!(error::<Semaphore>(&["SEMAPHORE", "s", "2", "10", "PX", "3"]), SYNTAX);
    }

    #[test]
    fn ifgt_errors_are_the_servers() {
        for ifgt in [
            Ifgt { key: Bytes::from("r"), token: 5, value: Bytes::from("v"), px_ms: None },
            Ifgt { key: Bytes::from("r"), token: 5, value: Bytes::from(""), px_ms: Some(MAX_PX_MS) },
        ] {
            assert_eq!(Ifgt::parse(&ifgt.to_args()).as_ref(), Ok(&ifgt));
        }
        assert_eq!(error::<Ifgt>(&["IFGT", "r", "5"]), "ERR wrong number of arguments for 'ifgt' command");
        assert_eq!(error::<Ifgt>(&["IFGT", "r", "0", "v", "PX", "0"]), NOT_INTEGER, "the token is checked first");
        assert_eq!(error::<Ifgt>(&["IFGT", "r", "5", "v", "PX", "0"]), "ERR invalid expire time in 'ifgt' command");
        assert_eq!(error::<Ifgt>(&["IFGT", "r", "5", "v", "px", "-1"]), "ERR invalid expire time in 'ifgt' command");
        assert_eq!(error::<Ifgt>(&["IFGT", "r", "5", "v", "PX", "4611686018427387904"]), "ERR invalid expire time in 'ifgt' command");
        assert_eq!(error::<Ifgt>(&["IFGT", "r", "5", "v", "PX", "soon"]), NOT_INTEGER);
        assert_eq!(error::<Ifgt>(&["IFGT", "r", "5", "v", "EX", "10"]), SYNTAX);
        assert_eq!(error::<Ifgt>(&["IFGT", "r", "5", "v", "PX"]), SYNTAX);
    }

    #[test]
    fn lockinfo_takes_one_key() {
        let info = LockInfo { key: Bytes::from("k") };
        assert_eq!(info.to_args(), args(&["LOCKINFO", "k"]));
        assert_eq!(LockInfo::parse(&info.to_args()), Ok(info));
        assert_eq!(error::<LockInfo>(&["LOCKINFO"]), "ERR wrong number of arguments for 'lockinfo' command");
        assert_eq!(error::<LockInfo>(&["LOCKINFO", "a", "b"]), "ERR wrong number of arguments for 'lockinfo' command");
    }

    #[test]
    fn requests_are_encoded_as_sent_before() {
        let mut out = BytesMut::new();
        Ifgt { key: Bytes::from("r"), token: 12, value: Bytes::from("v"), px_ms: Some(60_000) }.encode(&mut out);
        assert_eq!(&out[..], b"*6\r\n$4\r\nIFGT\r\n$1\r\nr\r\n$2\r\n12\r\n$1\r\nv\r\n$2\r\nPX\r\n$5\r\n60000\r\n");
        let negative = Renew { key: Bytes::from("k"), token: -3, ttl_ms: 0 }.to_args();
        assert_eq!(negative, args(&["RENEW", "k", "-3", "0"]), "the client sends what it is given; the server judges");
    }
}
