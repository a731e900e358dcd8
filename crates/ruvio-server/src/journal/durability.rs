//! What made each LSN durable: the local fsync (persistence publishes it) and the fsync acknowledgements of
//! replicas (replication links publish them). A connection that needs its writes durable before it answers waits
//! for "LSN x is fsynced here and on n replicas"; each publication wakes exactly the waiters it satisfies (a
//! broadcast would wake every waiting client on every fsync). WAIT and WAITAOF wait here too, on what replicas
//! received or fsynced.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// What a waiter needs: `lsn` fsynced locally (when `local`) and reached by `replicas` replicas, as `counted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub lsn: u64,
    pub local: bool,
    pub replicas: usize,
    pub counted: Counted,
}

/// Which of a replica's acknowledgements a waiter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Received (WAIT).
    Received,
    /// Fsynced on a replica with appendonly (WAITAOF).
    Fsynced,
    /// Fsynced on a replica with appendonly that counts for durable writes (one of the coordinators' durability
    /// set, when they name one: replication/lease.rs).
    Durable,
}

impl Need {
    /// A durable write: fsynced here and on `replicas` replicas that count for durability.
    pub fn durable(lsn: u64, replicas: usize) -> Need {
        Need { lsn, local: true, replicas, counted: Counted::Durable }
    }

    /// Fsynced here.
    pub fn local(lsn: u64) -> Need {
        Need::durable(lsn, 0)
    }
}

/// A connected replica's acknowledgements.
#[derive(Debug, Clone, Copy)]
struct Acked {
    link: u64,
    received: u64,
    /// None for a replica without appendonly: its fsyncs never count.
    fsynced: Option<u64>,
    /// Whether its fsyncs count for durable writes.
    durable: bool,
}

#[derive(Default)]
pub struct Durability {
    /// The last LSN fsynced locally.
    local: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each connected replica's acknowledgements.
    replicas: Vec<Acked>,
    waiters: Vec<(Need, oneshot::Sender<()>)>,
}

impl Inner {
    fn replicas_at(&self, lsn: u64, counted: Counted) -> usize {
        self.replicas
            .iter()
            .filter(|r| match counted {
                Counted::Received => r.received >= lsn,
                Counted::Fsynced => r.fsynced.is_some_and(|f| f >= lsn),
                Counted::Durable => r.durable && r.fsynced.is_some_and(|f| f >= lsn),
            })
            .count()
    }

    fn met(&self, local: u64, need: Need) -> bool {
        (!need.local || local >= need.lsn) && (need.replicas == 0 || self.replicas_at(need.lsn, need.counted) >= need.replicas)
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

    /// Replica `link` reports everything up to `received` received and, with appendonly (`fsynced` is Some), up to
    /// `fsynced` on its disk; `durable`: whether its fsyncs count for durable writes now. Acknowledgements never go
    /// backwards.
    pub fn publish_replica(&self, link: u64, received: u64, fsynced: Option<u64>, durable: bool) {
        let mut inner = self.inner.lock();
        match inner.replicas.iter_mut().find(|r| r.link == link) {
            Some(r) => {
                let before = (r.received, r.fsynced, r.durable);
                r.received = r.received.max(received);
                r.fsynced = fsynced.map(|f| f.max(r.fsynced.unwrap_or(0)));
                r.durable = durable;
                if (r.received, r.fsynced, r.durable) == before {
                    return;
                }
            }
            None => inner.replicas.push(Acked { link, received, fsynced, durable }),
        }
        let local = self.local();
        inner.wake_satisfied(local);
    }

    /// Whether replica `link`'s fsyncs count for durable writes changed (the coordinators' durability set did).
    pub fn set_durable(&self, link: u64, durable: bool) {
        let mut inner = self.inner.lock();
        let Some(r) = inner.replicas.iter_mut().find(|r| r.link == link) else { return };
        if std::mem::replace(&mut r.durable, durable) == durable {
            return;
        }
        let local = self.local();
        inner.wake_satisfied(local);
    }

    /// Replica `link` disconnected: its acknowledgements no longer count for later writes.
    pub fn replica_gone(&self, link: u64) {
        self.inner.lock().replicas.retain(|r| r.link != link);
    }

    /// How many replicas acknowledged `lsn` as `counted`.
    pub fn replicas_at(&self, lsn: u64, counted: Counted) -> usize {
        self.inner.lock().replicas_at(lsn, counted)
    }

    /// Whether `need` is met now.
    pub fn met(&self, need: Need) -> bool {
        self.inner.lock().met(self.local(), need)
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
        let mut w = pin!(d.wait(Need::durable(10, 2)));
        assert!(!ready(&mut w));
        d.publish_local(10);
        assert!(!ready(&mut w));
        d.publish_replica(1, 12, Some(12), true);
        assert!(!ready(&mut w));
        d.publish_replica(2, 10, Some(9), true);
        assert!(!ready(&mut w));
        d.publish_replica(2, 10, Some(10), true);
        assert!(ready(&mut w));
    }

    #[test]
    fn acknowledgements_of_a_replica_that_left_no_longer_count() {
        let d = Durability::default();
        d.publish_local(5);
        d.publish_replica(7, 5, Some(5), true);
        assert_eq!(d.replicas_at(5, Counted::Fsynced), 1);
        d.replica_gone(7);
        assert_eq!(d.replicas_at(5, Counted::Fsynced), 0);
        let mut w = pin!(d.wait(Need::durable(5, 1)));
        assert!(!ready(&mut w));
        d.publish_replica(8, 4, Some(4), true);
        d.publish_replica(8, 3, Some(3), true); // late, older: ignored
        assert_eq!(d.replicas_at(4, Counted::Fsynced), 1);
        assert!(!ready(&mut w));
    }

    #[test]
    fn local_only_needs_ignore_replicas() {
        let d = Durability::default();
        d.publish_local(3);
        let mut w = pin!(d.wait(Need::local(3)));
        assert!(ready(&mut w));
        let mut later = pin!(d.wait(Need::local(4)));
        assert!(!ready(&mut later));
        d.publish_local(4);
        assert!(ready(&mut later));
    }

    #[test]
    fn wait_counts_received_and_waitaof_counts_only_replicas_with_appendonly() {
        let d = Durability::default();
        let mut wait = pin!(d.wait(Need { lsn: 6, local: false, replicas: 2, counted: Counted::Received }));
        let mut waitaof = pin!(d.wait(Need { lsn: 6, local: false, replicas: 1, counted: Counted::Fsynced }));
        d.publish_replica(1, 6, None, true); // no appendonly: received counts, its fsyncs never do
        assert!(!ready(&mut wait) && !ready(&mut waitaof));
        d.publish_replica(2, 6, Some(5), true);
        assert!(ready(&mut wait), "two replicas received LSN 6; nothing local was needed");
        assert!(!ready(&mut waitaof));
        assert_eq!(d.replicas_at(6, Counted::Fsynced), 0);
        d.publish_replica(2, 7, Some(6), true);
        assert!(ready(&mut waitaof));
    }

    #[test]
    fn durable_writes_count_only_replicas_in_the_durability_set() {
        let d = Durability::default();
        d.publish_local(4);
        let mut w = pin!(d.wait(Need::durable(4, 1)));
        d.publish_replica(1, 4, Some(4), false);
        assert!(!ready(&mut w), "fsynced, but not one of the durability set");
        assert_eq!(d.replicas_at(4, Counted::Fsynced), 1, "WAITAOF counts it");
        d.set_durable(1, true);
        assert!(ready(&mut w));
    }
}
