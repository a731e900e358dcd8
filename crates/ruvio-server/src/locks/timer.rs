//! The lock timer: removes holders the moment their TTL ends and hands the lock to the next waiter.
//!
//! The keyspace's active expiry samples keys `hz` times a second, which would leave a waiter stalled for up to a
//! cycle after a lease ran out. This task instead sleeps until the earliest holder deadline (kept in
//! `LockState::timers`), or until a command sets an earlier one and notifies `Shared::lock_timer`.

use std::sync::Arc;
use std::time::Duration;

use crate::clock;
use crate::shared::Shared;

pub async fn run(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let next = {
            // Bounded wait: a long script holds the store lock, and this runtime also accepts connections.
            let Some(mut store) = shared.store.try_lock_for(Duration::from_millis(10)) else {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            };
            let now = clock::mono_ms();
            store.now = now;
            // A replica's holders end when its primary's records say so.
            if store.replica { None } else { super::engine::expire_due(&mut store, now) }
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
