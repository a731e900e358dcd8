//! Work driven by the clock rather than by a command: active expiry of keys, and the lock timer.
//!
//! Both change the data by themselves (a DEL for an expired key, a lock drop for an ended lease), so both commit
//! what they logged to the journal at once: persistence and replicas learn of it now, not with the next write.

use std::sync::Arc;
use std::time::Duration;

use crate::clock;
use crate::shared::Shared;

/// Removes expired keys without waiting for reads, `hz` times a second, a bounded slice of the keyspace each time.
pub async fn active_expiry(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let hz = shared.config.read().hz.max(1);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(1000 / hz)) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        shared.stats.used_memory.store(crate::commands::info::rss_bytes(), std::sync::atomic::Ordering::Relaxed);
        let now = clock::mono_ms();
        // Bounded wait: a long script holds the store lock, and this runtime also accepts connections.
        let Some(mut store) = shared.store.try_lock_for(Duration::from_millis(10)) else { continue };
        store.set_now(now);
        let mut removed = 0;
        for db in 0..store.dbs.len() {
            removed += store.dbs[db].active_expire(now, 16);
        }
        if removed > 0 {
            store.settle();
            shared.after_command(&mut store, now);
            shared.commit_log(&mut store);
        }
    }
}

/// The lock timer: removes holders the moment their TTL ends and hands the lock to the next waiter.
///
/// The keyspace's active expiry samples keys `hz` times a second, which would leave a waiter stalled for up to a
/// cycle after a lease ran out. This task instead sleeps until the earliest holder deadline (kept in
/// `LockState::timers`), or until a command sets an earlier one and notifies `Shared::lock_timer`.
pub async fn lock_timer(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let next = {
            // Bounded wait: a long script holds the store lock, and this runtime also accepts connections.
            let Some(mut store) = shared.store.try_lock_for(Duration::from_millis(10)) else {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            };
            let now = clock::mono_ms();
            store.set_now(now);
            // A replica's holders end when its primary's records say so.
            if store.replica {
                None
            } else {
                let next = crate::locks::engine::expire_due(&mut store, now);
                // The drops go to the journal now, so replicas see a lease end when it ends, not with the next write.
                shared.commit_log(&mut store);
                next
            }
        };
        let sleep = match next {
            Some(deadline) => Duration::from_millis(deadline.saturating_sub(clock::mono_ms())),
            // Nothing scheduled: only a notification can bring work.
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.lock_timer.notified() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}
