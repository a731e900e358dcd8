//! What made each LSN durable: the local fsync (persistence publishes it) and the fsync acknowledgements of
//! replicas (replication links publish them). A connection that needs its writes durable before it answers waits
//! for "LSN x is fsynced here and on n replicas"; each publication wakes exactly the waiters it satisfies (a
//! broadcast would wake every waiting client on every fsync).

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// What a waiter needs: `lsn` fsynced locally and acknowledged as fsynced by `replicas` replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub lsn: u64,
    pub replicas: usize,
}

#[derive(Default)]
pub struct Durability {
    /// The last LSN fsynced locally.
    local: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each connected replica's last fsynced LSN, by the replica's link id.
    replicas: Vec<(u64, u64)>,
    waiters: Vec<(Need, oneshot::Sender<()>)>,
}

impl Inner {
    fn replicas_at(&self, lsn: u64) -> usize {
        self.replicas.iter().filter(|(_, fsynced)| *fsynced >= lsn).count()
    }

    fn met(&self, local: u64, need: Need) -> bool {
        local >= need.lsn && (need.replicas == 0 || self.replicas_at(need.lsn) >= need.replicas)
    }

    fn wake_satisfied(&mut self, local: u64) {
        let mut i = 0;
        while i < self.waiters.len() {
            if self.met(local, self.waiters[i].0) {
                let (_, tx) = self.waiters.swap_remove(i);
                let _ = tx.send(());
            } else {
                i += 1;
            }
        }
    }
}

impl Durability {
    pub fn local(&self) -> u64 {
        self.local.load(Ordering::Acquire)
    }

    /// Persistence fsynced everything up to `lsn`.
    pub fn publish_local(&self, lsn: u64) {
        if self.local.fetch_max(lsn, Ordering::AcqRel) >= lsn {
            return;
        }
        let mut inner = self.inner.lock();
        if !inner.waiters.is_empty() {
            // Read again under the lock a waiter checks under, so no wake-up is missed.
            let local = self.local();
            inner.wake_satisfied(local);
        }
    }

    /// A replica replaced its history with its primary's snapshot: what is fsynced here starts again at `lsn`.
    pub fn reset_local(&self, lsn: u64) {
        self.local.store(lsn, Ordering::Release);
    }

    /// Replica `link` reports everything up to `fsynced` on its disk. Acknowledgements never go backwards.
    pub fn publish_replica(&self, link: u64, fsynced: u64) {
        let mut inner = self.inner.lock();
        match inner.replicas.iter_mut().find(|(id, _)| *id == link) {
            Some((_, at)) if *at >= fsynced => return,
            Some((_, at)) => *at = fsynced,
            None => inner.replicas.push((link, fsynced)),
        }
        let local = self.local();
        inner.wake_satisfied(local);
    }

    /// Replica `link` disconnected: its acknowledgements no longer count for later writes.
    pub fn replica_gone(&self, link: u64) {
        self.inner.lock().replicas.retain(|(id, _)| *id != link);
    }

    /// How many replicas acknowledged `lsn` as fsynced.
    pub fn replicas_at(&self, lsn: u64) -> usize {
        self.inner.lock().replicas_at(lsn)
    }

    /// Waits until `need` is met. Dropping the future withdraws nothing but the wait itself.
    pub async fn wait(&self, need: Need) {
        let rx = {
            let mut inner = self.inner.lock();
            if inner.met(self.local(), need) {
                return;
            }
            let (tx, rx) = oneshot::channel();
            inner.waiters.push((need, tx));
            rx
        };
        let _ = rx.await;
    }

    /// Waiters whose sender went away (a connection that stopped waiting) are dropped at the next publication;
    /// this drops them now (for a caller that gave up on a timeout).
    pub fn forget_abandoned(&self) {
        self.inner.lock().waiters.retain(|(_, tx)| !tx.is_closed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn ready(f: &mut std::pin::Pin<&mut impl Future<Output = ()>>) -> bool {
        matches!(f.as_mut().poll(&mut Context::from_waker(Waker::noop())), Poll::Ready(()))
    }

    #[test]
    fn a_waiter_is_woken_only_when_local_and_replica_durability_both_reach_it() {
        let d = Durability::default();
        let mut w = pin!(d.wait(Need { lsn: 10, replicas: 2 }));
        assert!(!ready(&mut w));
        d.publish_local(10);
        assert!(!ready(&mut w));
        d.publish_replica(1, 12);
        assert!(!ready(&mut w));
        d.publish_replica(2, 9);
        assert!(!ready(&mut w));
        d.publish_replica(2, 10);
        assert!(ready(&mut w));
    }

    #[test]
    fn acknowledgements_of_a_replica_that_left_no_longer_count() {
        let d = Durability::default();
        d.publish_local(5);
        d.publish_replica(7, 5);
        assert_eq!(d.replicas_at(5), 1);
        d.replica_gone(7);
        assert_eq!(d.replicas_at(5), 0);
        let mut w = pin!(d.wait(Need { lsn: 5, replicas: 1 }));
        assert!(!ready(&mut w));
        d.publish_replica(8, 4);
        d.publish_replica(8, 3); // late, older: ignored
        assert_eq!(d.replicas_at(4), 1);
        assert!(!ready(&mut w));
    }

    #[test]
    fn local_only_needs_ignore_replicas() {
        let d = Durability::default();
        d.publish_local(3);
        let mut w = pin!(d.wait(Need { lsn: 3, replicas: 0 }));
        assert!(ready(&mut w));
        let mut later = pin!(d.wait(Need { lsn: 4, replicas: 0 }));
        assert!(!ready(&mut later));
        d.publish_local(4);
        assert!(ready(&mut later));
    }
}
