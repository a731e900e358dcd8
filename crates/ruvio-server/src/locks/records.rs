//! The write-log records of the lock engine (how a replay applies them: `replay.rs`).
//!
//! Lock commands are not replayable as received: LEASE issues a token from the clock, and TTLs are relative. So
//! every lock write is logged as one of these internal commands, with the token explicit and the deadline as
//! absolute wall-clock ms (Unix epoch):
//!
//! - `LOCKSET key lease 1 token deadline_wall_ms`: `key` is a lease held by `token` until the deadline (a grant or
//!   a RENEW).
//! - `LOCKSET key semaphore limit token deadline_wall_ms`: `token` holds a slot of the semaphore `key` (limit
//!   `limit`) until the deadline; an existing slot with that token is updated (RENEW).
//! - `LOCKDROP key token`: `token` no longer holds `key` (RELEASE, or one semaphore slot that expired). A lease or
//!   semaphore whose last holder goes is removed. Whole-key expiry is logged as `DEL key`, like any expired key.
//! - `FENCESET key token value deadline_wall_ms`: IFGT succeeded: the fence of `key` is at least `token` and
//!   `key` holds the string `value` (deadline 0 = none; a deadline already past removes the key).

use bytes::Bytes;

use super::Want;
use crate::clock;

fn num(n: i64) -> Bytes {
    Bytes::from(n.to_string())
}

pub fn lockset(key: &[u8], want: Want, token: i64, deadline: u64) -> Vec<Bytes> {
    let (kind, limit): (&'static [u8], u32) = match want {
        Want::Lease => (b"lease", 1),
        Want::Semaphore { limit } => (b"semaphore", limit),
    };
    vec![
        Bytes::from_static(b"LOCKSET"),
        Bytes::copy_from_slice(key),
        Bytes::from_static(kind),
        num(limit as i64),
        num(token),
        num(clock::mono_to_wall(deadline)),
    ]
}

pub fn lockdrop(key: &[u8], token: i64) -> Vec<Bytes> {
    vec![Bytes::from_static(b"LOCKDROP"), Bytes::copy_from_slice(key), num(token)]
}

pub fn fenceset(key: &[u8], token: i64, value: &[u8], deadline: u64) -> Vec<Bytes> {
    let wall = if deadline == 0 { 0 } else { clock::mono_to_wall(deadline) };
    vec![Bytes::from_static(b"FENCESET"), Bytes::copy_from_slice(key), num(token), Bytes::copy_from_slice(value), num(wall)]
}

/// Moves the wall-clock deadline inside a LOCKSET or FENCESET record by `by_ms` (other records are left alone): a
/// replica applies its primary's lock records on its own clock, keeping each holder's remaining time (see
/// `replication::replica`).
pub fn shift_deadline(args: &mut [Bytes], by_ms: i64) {
    let at = match args.first().map(|a| a.to_ascii_uppercase()) {
        Some(name) if name == b"LOCKSET" => 5,
        Some(name) if name == b"FENCESET" => 4,
        _ => return,
    };
    let Some(deadline) = args.get(at).and_then(|a| std::str::from_utf8(a).ok()?.parse::<i64>().ok()) else { return };
    if deadline != 0 && by_ms != 0 {
        args[at] = num(deadline.saturating_add(by_ms));
    }
}
