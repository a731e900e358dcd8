//! The lock commands as [`Cmd`]s, built from `ruvio_protocol::lock_args` (the argument types the server parses)
//! once for both the blocking and the async client.

use ruvio_protocol::lock_args::{self, LockArgError};

use crate::args::{ToArg, TokenArg};
use crate::cmd::Cmd;
use crate::error::{Error, Result};

/// A token argument as the integer it must be. One that is not a 64-bit integer (a `u64` above `i64::MAX`) is
/// refused here with the error the server would answer, since no server can have issued it.
fn token(token: impl TokenArg) -> Result<i64> {
    token.token_value().ok_or_else(|| Error::server(LockArgError::NotInteger.to_string().as_bytes()))
}

pub(crate) fn lease(key: impl ToArg, ttl_ms: u64, wait_ms: Option<u64>) -> Cmd {
    Cmd::lock(&lock_args::Lease { key: key.to_arg(), ttl_ms, wait_ms })
}

pub(crate) fn renew(key: impl ToArg, token_arg: impl TokenArg, ttl_ms: u64) -> Result<Cmd> {
    Ok(Cmd::lock(&lock_args::Renew { key: key.to_arg(), token: token(token_arg)?, ttl_ms }))
}

pub(crate) fn release(key: impl ToArg, token_arg: impl TokenArg) -> Result<Cmd> {
    Ok(Cmd::lock(&lock_args::Release { key: key.to_arg(), token: token(token_arg)? }))
}

pub(crate) fn semaphore(key: impl ToArg, limit: u64, ttl_ms: u64, wait_ms: Option<u64>) -> Cmd {
    Cmd::lock(&lock_args::Semaphore { key: key.to_arg(), limit, ttl_ms, wait_ms })
}

pub(crate) fn ifgt(key: impl ToArg, token_arg: impl TokenArg, value: impl ToArg, px_ms: Option<u64>) -> Result<Cmd> {
    Ok(Cmd::lock(&lock_args::Ifgt { key: key.to_arg(), token: token(token_arg)?, value: value.to_arg(), px_ms }))
}

pub(crate) fn lock_info(key: impl ToArg) -> Cmd {
    Cmd::lock(&lock_args::LockInfo { key: key.to_arg() })
}

/// `LOCKS cursor [MATCH pattern] [COUNT n]` (not a typed lock command of `lock_args`: it takes no key).
pub(crate) fn locks(cursor: u64, pattern: Option<&str>, count: Option<u64>) -> Cmd {
    let mut c = Cmd::new("LOCKS").arg(cursor);
    if let Some(p) = pattern {
        c = c.arg("MATCH").arg(p);
    }
    if let Some(n) = count {
        c = c.arg("COUNT").arg(n);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn words(cmd: &Cmd) -> Vec<&[u8]> {
        cmd.parts().iter().map(|b| &b[..]).collect()
    }

    #[test]
    fn commands_are_sent_as_documented() {
        assert_eq!(words(&lease("k", 30_000, None)), [&b"LEASE"[..], b"k", b"30000"]);
        assert_eq!(words(&lease("k", 30_000, Some(0))), [&b"LEASE"[..], b"k", b"30000", b"WAIT", b"0"]);
        assert_eq!(words(&renew("k", 7u64, 10).unwrap()), [&b"RENEW"[..], b"k", b"7", b"10"]);
        assert_eq!(words(&release("k", -7i64).unwrap()), [&b"RELEASE"[..], b"k", b"-7"]);
        assert_eq!(words(&semaphore("s", 3, 10, Some(5))), [&b"SEMAPHORE"[..], b"s", b"3", b"10", b"WAIT", b"5"]);
        assert_eq!(words(&ifgt("r", 9i64, "v", Some(60)).unwrap()), [&b"IFGT"[..], b"r", b"9", b"v", b"PX", b"60"]);
        assert_eq!(words(&lock_info("k")), [&b"LOCKINFO"[..], b"k"]);
        assert_eq!(words(&locks(0, None, None)), [&b"LOCKS"[..], b"0"]);
        assert_eq!(words(&locks(7, Some("job:*"), Some(100))), [&b"LOCKS"[..], b"7", b"MATCH", b"job:*", b"COUNT", b"100"]);
    }

    #[test]
    fn a_token_that_is_no_integer_gets_the_servers_answer() {
        let err = release("k", u64::MAX).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Server);
        assert_eq!(err.detail(), "ERR value is not an integer or out of range");
        assert_eq!(err.code(), Some("ERR"));
    }
}
