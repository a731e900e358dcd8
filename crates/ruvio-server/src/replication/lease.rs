//! The write lease: a primary managed by `ruvio coordinator` answers a durable write only while a majority of the
//! coordinators reach it (docs/coordinator.md, "The write lease").
//!
//! Each coordinator that sees this node as its group's primary sends `REPLICATION LEASE <epoch> <ms> <id> <of>`
//! with every probe; the lease from coordinator `id` lasts `ms` on this node's monotonic clock. The lease holds
//! while more than half of the `of` coordinators have an unexpired one. Once a node has been leased it requires a
//! lease from then on (kept in `replication.state`, so a restarted primary waits for its coordinators), until an
//! operator takes over (`REPLICATION LEASE OFF`, or a manual `REPLICAOF NO ONE` without an epoch).
//!
//! A coordinator of a group with a durability level also names its durability set D (`... DURABLE addr...`): a
//! replica's fsyncs count for durable writes only once a majority of the coordinators leasing this node name it, so
//! every replica that acknowledged a durable write is one the coordinators' failover rule counts on (a replica
//! that caught up but is not in their agreed D yet does not count).
//!
//! Safety does not rest on the lease (the promises of a failover fence the old primary, docs/replication.md); the
//! lease makes a primary cut off from its coordinators stop answering durable writes before a failover begins.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The most coordinators a lease may name, and the most replicas in a durability set (bounds on what the network
/// can make this node store).
pub const MAX_COORDINATORS: u64 = 15;
pub const MAX_DURABILITY_SET: usize = 64;

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
    leases: Vec<Lease>,
    /// A durable write was refused for want of the lease and that was logged: further refusals are not, until the
    /// lease is valid again (one log line per episode, not one per write).
    refusing: bool,
}

/// One coordinator's lease.
struct Lease {
    coordinator: u64,
    until: Instant,
    /// The durability set it names (host:port of each replica), if its group has a durability level.
    durable: Option<Vec<String>>,
}

impl Inner {
    fn holders(&self, now: Instant) -> usize {
        self.leases.iter().filter(|l| l.until > now).count()
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

    /// A durable write was refused because the lease is not valid: why, in words, the first time in an episode;
    /// `None` while the episode goes on (it ends when the lease is valid again, or is no longer required).
    pub fn note_refusal(&self) -> Option<String> {
        let mut inner = self.inner.lock();
        if std::mem::replace(&mut inner.refusing, true) {
            return None;
        }
        let now = Instant::now();
        let needed = inner.coordinators / 2 + 1;
        let ended: Vec<String> = inner
            .leases
            .iter()
            .filter(|l| l.until <= now)
            .map(|l| format!("coordinator {}'s ended {:.1} s ago", l.coordinator, (now - l.until).as_secs_f64()))
            .collect();
        Some(if inner.leases.is_empty() {
            "no coordinator has leased this primary since it started (a primary once leased waits for its              coordinators; REPLICATION LEASE OFF takes over by hand)"
                .to_string()
        } else {
            format!(
                "{} of {} coordinator(s) lease this primary, {needed} needed{}{}",
                inner.holders(now),
                inner.coordinators,
                if ended.is_empty() { "" } else { "; " },
                ended.join(", ")
            )
        })
    }

    /// Coordinator `id` of `coordinators` leases this node for `ms`, naming durability set `durable`. Returns
    /// true when this made the lease required (the caller persists that), and true when it ended an episode of
    /// refused durable writes (the lease is valid again).
    pub fn grant(&self, id: u64, coordinators: usize, ms: u64, durable: Option<Vec<String>>) -> (bool, bool) {
        let until = Instant::now() + Duration::from_millis(ms);
        let mut recovered = false;
        let newly_required = {
            let mut inner = self.inner.lock();
            inner.coordinators = coordinators;
            match inner.leases.iter_mut().find(|l| l.coordinator == id) {
                Some(l) => (l.until, l.durable) = (until, durable),
                None => inner.leases.push(Lease { coordinator: id, until, durable }),
            }
            inner.leases.retain(|l| l.coordinator <= coordinators as u64);
            let newly = !std::mem::replace(&mut inner.required, true);
            if inner.refusing && inner.valid(Instant::now()) {
                inner.refusing = false;
                recovered = true;
            }
            newly
        };
        self.renewed.notify_waiters();
        (newly_required, recovered)
    }

    /// Requires a lease (from the state file) or stops requiring one (an operator took over). Returns whether it
    /// changed.
    pub fn set_required(&self, required: bool) -> bool {
        let changed = {
            let mut inner = self.inner.lock();
            if !required {
                inner.refusing = false;
            }
            std::mem::replace(&mut inner.required, required) != required
        };
        if changed {
            self.renewed.notify_waiters();
        }
        changed
    }

    /// This node stopped being a primary: leases it held were for that role and end now.
    pub fn drop_leases(&self) {
        self.inner.lock().leases.clear();
    }

    /// Whether replica `addr` (host:port) counts for durable writes: always without coordinators, or when their
    /// leases name no durability set; otherwise only when a majority of the coordinators named it in their last
    /// lease. Expired leases still say which replicas count (D changes only by promotions and resets, both behind a
    /// new epoch); whether a durable write may be answered is the lease's validity, checked apart.
    pub fn counts(&self, addr: &str) -> bool {
        let inner = self.inner.lock();
        if !inner.required || inner.leases.iter().all(|l| l.durable.is_none()) {
            return true;
        }
        let naming = inner.leases.iter().filter(|l| l.durable.as_ref().is_some_and(|d| d.iter().any(|a| a == addr)));
        naming.count() > inner.coordinators / 2
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
        l.grant(1, 3, 60_000, None);
        assert!(!l.valid(), "one coordinator of three is not a majority");
        l.grant(1, 3, 60_000, None);
        assert!(!l.valid(), "the same coordinator twice counts once");
        l.grant(2, 3, 60_000, None);
        assert!(l.valid());
        l.grant(3, 3, 0, None);
        assert_eq!(l.status().holders, 2);
        l.drop_leases();
        assert!(!l.valid(), "still required after the leases ended");
        l.grant(1, 1, 60_000, None);
        assert!(l.valid(), "one coordinator of one");
        assert!(l.set_required(false));
        l.drop_leases();
        assert!(l.valid());
    }

    #[test]
    fn a_replica_counts_for_durability_once_a_majority_of_coordinators_name_it() {
        let l = WriteLease::default();
        let d = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(l.counts("r:1"), "no coordinators: every replica counts");
        l.grant(1, 3, 60_000, None);
        l.grant(2, 3, 60_000, None);
        assert!(l.counts("r:1"), "coordinators that name no durability set: every replica counts");
        l.grant(1, 3, 60_000, d(&["r:1", "r:2"]));
        assert!(!l.counts("r:1") && !l.counts("r:3"), "named by one coordinator of three");
        l.grant(2, 3, 60_000, d(&["r:1"]));
        assert!(l.counts("r:1") && !l.counts("r:2"));
        l.drop_leases();
        l.grant(1, 3, 60_000, d(&[]));
        assert!(!l.counts("r:1"));
    }

    #[test]
    fn a_waiter_is_woken_by_the_lease_that_makes_it_valid() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let l = std::sync::Arc::new(WriteLease::default());
            l.grant(1, 3, 60_000, None);
            let waiter = tokio::spawn({
                let l = l.clone();
                async move { l.wait_valid().await }
            });
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished());
            l.grant(2, 3, 60_000, None);
            tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("woken").unwrap();
        });
    }
}
