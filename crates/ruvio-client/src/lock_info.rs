//! What `LOCKINFO` tells about a lock or semaphore.

use bytes::Bytes;
use ruvio_protocol::Value;

use crate::error::{Error, Result};
use crate::from_value::{elements, pairs, FromValue};
use crate::Token;

/// Which command created the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockKind {
    /// A single-holder lock from `LEASE`.
    Lease,
    /// A counted lock from `SEMAPHORE`.
    Semaphore,
    /// A kind this client version does not know, as the server named it.
    Other(String),
}

/// One current holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// The holder's fencing token.
    pub token: Token,
    /// Milliseconds until the holder's grant expires, as the server saw it when answering.
    pub remaining_ms: i64,
}

/// The answer of `LOCKINFO key` ([`Client::lock_info`](crate::Client::lock_info)); read the same from a RESP3
/// map or a RESP2 flat array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// Lease or semaphore.
    pub kind: LockKind,
    /// How many holders are allowed at once (1 for a lease).
    pub limit: i64,
    /// The current holders.
    pub holders: Vec<LockHolder>,
    /// How many clients wait for it (`LEASE ... WAIT`, `SEMAPHORE ... WAIT`).
    pub waiters: i64,
}

fn field_name(v: &Value) -> Option<String> {
    v.as_bytes().map(|b| String::from_utf8_lossy(b).to_ascii_lowercase())
}

impl FromValue for LockHolder {
    fn from_value(v: Value) -> Result<Self> {
        // Either a [token, remaining] pair or named fields.
        let items = elements(v.clone())?;
        if items.len() == 2 && items[0].as_i64().is_some() {
            let mut it = items.into_iter();
            return Ok(LockHolder {
                token: i64::from_value(it.next().expect("two items"))?,
                remaining_ms: i64::from_value(it.next().expect("two items"))?,
            });
        }
        let (mut token, mut remaining_ms) = (None, None);
        for (k, v) in pairs(v)? {
            match field_name(&k).as_deref() {
                Some("token") => token = Some(i64::from_value(v)?),
                Some("remaining" | "remaining_ms" | "ttl" | "pttl" | "ttl_ms") => remaining_ms = Some(i64::from_value(v)?),
                _ => {}
            }
        }
        match (token, remaining_ms) {
            (Some(token), Some(remaining_ms)) => Ok(LockHolder { token, remaining_ms }),
            _ => Err(Error::type_error("LOCKINFO holder without token and remaining time")),
        }
    }
}

impl FromValue for LockInfo {
    fn from_value(v: Value) -> Result<Self> {
        let mut info = LockInfo { kind: LockKind::Lease, limit: 1, holders: Vec::new(), waiters: 0 };
        let mut seen_kind = false;
        for (k, v) in pairs(v)? {
            match field_name(&k).as_deref() {
                Some("kind" | "type") => {
                    seen_kind = true;
                    let name = String::from_value(v)?;
                    info.kind = match name.to_ascii_lowercase().as_str() {
                        "lease" | "lock" => LockKind::Lease,
                        "semaphore" => LockKind::Semaphore,
                        _ => LockKind::Other(name),
                    };
                }
                Some("limit") => info.limit = Option::<i64>::from_value(v)?.unwrap_or(1),
                Some("holders") => info.holders = Vec::from_value(v)?,
                Some("waiters") => {
                    info.waiters = match v {
                        Value::Integer(n) => n,
                        other => elements(other)?.len() as i64,
                    }
                }
                _ => {}
            }
        }
        if !seen_kind {
            return Err(Error::type_error("LOCKINFO reply without a kind"));
        }
        Ok(info)
    }
}

/// One holder as `LOCKS` lists it: [`LockHolder`]'s fields plus when it was granted and to which client.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedHolder {
    /// The holder's fencing token.
    pub token: Token,
    /// Milliseconds until the holder's grant expires.
    pub remaining_ms: i64,
    /// When it was granted, Unix ms.
    pub granted_ms: i64,
    /// How long it has held the lock, ms.
    pub held_ms: i64,
    /// `CLIENT ID` of the connection it was granted to; `None` when the node did not grant it since it started.
    pub client_id: Option<i64>,
    /// That connection's `CLIENT SETNAME` name at grant time, if any.
    pub client_name: Option<String>,
    /// That connection's address (`ip:port`), if known.
    pub client_addr: Option<String>,
}

/// One lock as `LOCKS` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedLock {
    /// The lock's key.
    pub key: Vec<u8>,
    /// Lease or semaphore.
    pub kind: LockKind,
    /// How many holders are allowed at once (1 for a lease).
    pub limit: i64,
    /// The current holders.
    pub holders: Vec<ListedHolder>,
    /// How many clients wait for it.
    pub waiters: i64,
}

/// One page of `LOCKS cursor ...` ([`Client::locks`](crate::Client::locks)): the cursor to continue from (0: the
/// iteration is over) and the locks of this page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocksPage {
    /// Where the next call continues; 0 when the iteration is complete.
    pub cursor: u64,
    /// The locks of this page (possibly none).
    pub locks: Vec<ListedLock>,
}

impl FromValue for ListedHolder {
    fn from_value(v: Value) -> Result<Self> {
        let mut h = ListedHolder { token: 0, remaining_ms: 0, granted_ms: 0, held_ms: 0, client_id: None, client_name: None, client_addr: None };
        let mut seen_token = false;
        for (k, v) in pairs(v)? {
            match field_name(&k).as_deref() {
                Some("token") => {
                    h.token = i64::from_value(v)?;
                    seen_token = true;
                }
                Some("remaining_ms") => h.remaining_ms = i64::from_value(v)?,
                Some("granted_ms") => h.granted_ms = i64::from_value(v)?,
                Some("held_ms") => h.held_ms = i64::from_value(v)?,
                Some("client_id") => h.client_id = Option::from_value(v)?,
                Some("client_name") => h.client_name = Option::from_value(v)?,
                Some("client_addr") => h.client_addr = Option::from_value(v)?,
                _ => {}
            }
        }
        if !seen_token {
            return Err(Error::type_error("LOCKS holder without a token"));
        }
        Ok(h)
    }
}

impl FromValue for ListedLock {
    fn from_value(v: Value) -> Result<Self> {
        let mut lock = ListedLock { key: Vec::new(), kind: LockKind::Lease, limit: 1, holders: Vec::new(), waiters: 0 };
        for (k, v) in pairs(v)? {
            match field_name(&k).as_deref() {
                Some("key") => lock.key = Bytes::from_value(v)?.to_vec(),
                Some("kind") => {
                    let name = String::from_value(v)?;
                    lock.kind = match name.as_str() {
                        "lease" => LockKind::Lease,
                        "semaphore" => LockKind::Semaphore,
                        _ => LockKind::Other(name),
                    };
                }
                Some("limit") => lock.limit = i64::from_value(v)?,
                Some("holders") => lock.holders = Vec::from_value(v)?,
                Some("waiters") => lock.waiters = i64::from_value(v)?,
                _ => {}
            }
        }
        Ok(lock)
    }
}

impl FromValue for LocksPage {
    fn from_value(v: Value) -> Result<Self> {
        let mut items = elements(v)?.into_iter();
        match (items.next(), items.next(), items.next()) {
            (Some(cursor), Some(locks), None) => {
                let cursor = String::from_value(cursor)?;
                let cursor = cursor.parse().map_err(|_| Error::type_error("LOCKS cursor is not a number"))?;
                Ok(LocksPage { cursor, locks: Vec::from_value(locks)? })
            }
            _ => Err(Error::type_error("LOCKS reply is not [cursor, locks]")),
        }
    }
}
