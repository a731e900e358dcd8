//! Lock operations on the store: grant, renew, release, expiry and waking waiters.

use crate::store::Store;

/// Called when a lock key disappeared (expired, deleted, flushed, renamed away): the next waiters may be granted.
pub fn on_lock_gone(_store: &mut Store, _db: usize, _key: &[u8], _now: u64) {}

/// INFO `# Locks`.
pub fn info_section(store: &mut Store, out: &mut String) {
    use std::fmt::Write;
    let s = &store.locks.stats;
    let _ = write!(
        out,
        "lock_grants:{}\r\nlock_renewals:{}\r\nlock_releases:{}\r\nlock_expirations:{}\r\nlock_waits:{}\r\nlock_wait_timeouts:{}\r\n",
        s.grants, s.renewals, s.releases, s.expirations, s.waits, s.wait_timeouts
    );
}
