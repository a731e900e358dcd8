//! The write lease: a primary managed by `ruvio coordinator` answers a durable write only while a majority of the
//! coordinators reach it (docs/coordinator.md, "The write lease").
//!
//! Each coordinator that sees this node as its group's primary sends `REPLICATION LEASE <epoch> <ms> <id> <of>`
//! with every probe; the lease from coordinator `id` lasts `ms` on this node's monotonic clock. The lease holds
//! while more than half of the `of` coordinators have an unexpired one. Once a node has been leased it requires a
//! lease from then on (kept in `replication.state`, so a restarted primary waits for its coordinators), until an
//! operator takes over (`REPLICATION LEASE OFF`, or a manual `REPLICAOF NO ONE` without an epoch).
//!
//! Safety does not rest on the lease (the promises of a failover fence the old primary, docs/replication.md); the
//! lease makes a primary cut off from its coordinators stop answering durable writes before a failover begins.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The most coordinators a lease may name (a bound on what the network can make this node store).
pub const MAX_COORDINATORS: u64 = 15;

#[derive(Default)]
pub struct WriteLease {
    inner: Mutex<Inner>,
    /// Signalled at every lease received: durable writes waiting for one look again.
    renewed: Notify,
}

#[derive(Default)]
struct Inner {
    required: bool,
    /// How many coordinators there are (as the last lease said).
    coordinators: usize,
    /// The end of each coordinator's lease.
    until: Vec<(u64, Instant)>,
}

impl Inner {
    fn holders(&self, now: Instant) -> usize {
        self.until.iter().filter(|(_, t)| *t > now).count()
    }

    fn valid(&self, now: Instant) -> bool {
        !self.required || self.holders(now) > self.coordinators / 2
    }
}

/// What INFO shows.
pub struct LeaseStatus {
    pub required: bool,
    pub valid: bool,
    /// Coordinators whose lease is running, and how many are needed.
    pub holders: usize,
    pub needed: usize,
}

impl WriteLease {
    pub fn required(&self) -> bool {
        self.inner.lock().required
    }

    /// Whether a durable write may be answered now.
    pub fn valid(&self) -> bool {
        self.inner.lock().valid(Instant::now())
    }

    /// Coordinator `id` of `coordinators` leases this node for `ms`. Returns true when this made the lease
    /// required (the caller persists that).
    pub fn grant(&self, id: u64, coordinators: usize, ms: u64) -> bool {
        let until = Instant::now() + Duration::from_millis(ms);
        let newly_required = {
            let mut inner = self.inner.lock();
            inner.coordinators = coordinators;
            match inner.until.iter_mut().find(|(c, _)| *c == id) {
                Some((_, t)) => *t = until,
                None => inner.until.push((id, until)),
            }
            inner.until.retain(|(c, _)| *c <= coordinators as u64);
            !std::mem::replace(&mut inner.required, true)
        };
        self.renewed.notify_waiters();
        newly_required
    }

    /// Requires a lease (from the state file) or stops requiring one (an operator took over). Returns whether it
    /// changed.
    pub fn set_required(&self, required: bool) -> bool {
        let changed = std::mem::replace(&mut self.inner.lock().required, required) != required;
        if changed {
            self.renewed.notify_waiters();
        }
        changed
    }

    /// This node stopped being a primary: leases it held were for that role and end now.
    pub fn drop_leases(&self) {
        self.inner.lock().until.clear();
    }

    /// Returns once the lease is valid (at once when it is).
    pub async fn wait_valid(&self) {
        loop {
            let renewed = self.renewed.notified();
            tokio::pin!(renewed);
            // Registered before the check, so a lease granted in between still wakes this waiter.
            renewed.as_mut().enable();
            if self.valid() {
                return;
            }
            renewed.await;
        }
    }

    pub fn status(&self) -> LeaseStatus {
        let inner = self.inner.lock();
        let now = Instant::now();
        LeaseStatus {
            required: inner.required,
            valid: inner.valid(now),
            holders: inner.holders(now),
            needed: if inner.required { inner.coordinators / 2 + 1 } else { 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_holds_with_a_majority_of_coordinators_and_ends_with_them() {
        let l = WriteLease::default();
        assert!(l.valid(), "not required until a coordinator leased the node");
        l.grant(1, 3, 60_000);
        assert!(!l.valid(), "one coordinator of three is not a majority");
        l.grant(1, 3, 60_000);
        assert!(!l.valid(), "the same coordinator twice counts once");
        l.grant(2, 3, 60_000);
        assert!(l.valid());
        l.grant(3, 3, 0);
        assert_eq!(l.status().holders, 2);
        l.drop_leases();
        assert!(!l.valid(), "still required after the leases ended");
        l.grant(1, 1, 60_000);
        assert!(l.valid(), "one coordinator of one");
        assert!(l.set_required(false));
        l.drop_leases();
        assert!(l.valid());
    }

    #[test]
    fn a_waiter_is_woken_by_the_lease_that_makes_it_valid() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let l = std::sync::Arc::new(WriteLease::default());
            l.grant(1, 3, 60_000);
            let waiter = tokio::spawn({
                let l = l.clone();
                async move { l.wait_valid().await }
            });
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished());
            l.grant(2, 3, 60_000);
            tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("woken").unwrap();
        });
    }
}
