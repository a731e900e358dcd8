//! The lock commands as [`Cmd`]s, built once for both the blocking and the async client.

use crate::args::{ToArg, TokenArg};
use crate::cmd::Cmd;

pub(crate) fn lease(key: impl ToArg, ttl_ms: u64, wait_ms: Option<u64>) -> Cmd {
    let cmd = Cmd::new("LEASE").arg(key).arg(ttl_ms);
    match wait_ms {
        Some(w) => cmd.arg("WAIT").arg(w),
        None => cmd,
    }
}

pub(crate) fn renew(key: impl ToArg, token: impl TokenArg, ttl_ms: u64) -> Cmd {
    Cmd::new("RENEW").arg(key).arg(token).arg(ttl_ms)
}

pub(crate) fn release(key: impl ToArg, token: impl TokenArg) -> Cmd {
    Cmd::new("RELEASE").arg(key).arg(token)
}

pub(crate) fn semaphore(key: impl ToArg, limit: u64, ttl_ms: u64, wait_ms: Option<u64>) -> Cmd {
    let cmd = Cmd::new("SEMAPHORE").arg(key).arg(limit).arg(ttl_ms);
    match wait_ms {
        Some(w) => cmd.arg("WAIT").arg(w),
        None => cmd,
    }
}

pub(crate) fn ifgt(key: impl ToArg, token: impl TokenArg, value: impl ToArg, px_ms: Option<u64>) -> Cmd {
    let cmd = Cmd::new("IFGT").arg(key).arg(token).arg(value);
    match px_ms {
        Some(px) => cmd.arg("PX").arg(px),
        None => cmd,
    }
}

pub(crate) fn lock_info(key: impl ToArg) -> Cmd {
    Cmd::new("LOCKINFO").arg(key)
}
