//! How a lock guard acquires, renews and gives up, and the renewal timetable both guards follow.

use std::time::{Duration, Instant};

/// How [`Client::acquire`](crate::Client::acquire) takes a lock and how its guard keeps it.
///
/// ```
/// use std::time::Duration;
/// use ruvio_client::LockOptions;
///
/// let options = LockOptions::new(Duration::from_secs(30))   // the lease's TTL
///     .wait(Duration::from_secs(5))                          // queue up to 5 s for it
///     .max_hold(Duration::from_secs(600));                   // never keep it longer than 10 min
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    pub(crate) ttl: Duration,
    pub(crate) wait: Option<Duration>,
    pub(crate) auto_renew: bool,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) safety_margin: Option<Duration>,
}

impl LockOptions {
    /// Grants of `ttl` (at least 1 ms), renewed in the background every `ttl / 3`, no waiting, no cap.
    pub fn new(ttl: Duration) -> LockOptions {
        LockOptions { ttl: ttl.max(Duration::from_millis(1)), wait: None, auto_renew: true, max_hold: None, safety_margin: None }
    }

    /// Waits up to `wait` in the server's queue when the lock is taken (`LEASE ... WAIT`); a zero duration
    /// does not wait.
    pub fn wait(mut self, wait: Duration) -> LockOptions {
        self.wait = Some(wait);
        self
    }

    /// Turns background renewal off: the guard then only signals loss when the first grant runs out.
    pub fn no_renew(mut self) -> LockOptions {
        self.auto_renew = false;
        self
    }

    /// Caps the total time the lock is kept, counted from the acquire call: renewals never extend past it, so
    /// a stuck process cannot hold the lock forever. Loss is signalled a safety margin before the cap.
    pub fn max_hold(mut self, cap: Duration) -> LockOptions {
        self.max_hold = Some(cap);
        self
    }

    /// How long before the server-side deadline the guard gives up and signals loss when no renewal has
    /// succeeded; default `ttl / 5`. It covers the client's clock running slower than the server's and the
    /// time the caller needs to react.
    pub fn safety_margin(mut self, margin: Duration) -> LockOptions {
        self.safety_margin = Some(margin);
        self
    }

    pub(crate) fn ttl_ms(&self) -> u64 {
        self.ttl.as_millis().max(1) as u64
    }

    fn margin(&self) -> Duration {
        self.safety_margin.unwrap_or(self.ttl / 5).min(self.ttl)
    }
}

/// Why a guard says its lock is lost. Once lost, a guard never renews again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossReason {
    /// No renewal succeeded in time: the grant runs out within the safety margin (server paused or
    /// unreachable, network down). The lock may still be held for that margin, but the guard cannot promise it.
    Expired,
    /// The server answered `RENEW` with 0: the grant had already ended.
    Rejected,
    /// The [`LockOptions::max_hold`] cap has been reached.
    MaxHoldReached,
    /// The guard released the lock (explicitly or by being dropped).
    Released,
}

/// When to renew and when to give up, measured on the client's monotonic clock.
///
/// A grant's server-side deadline is at least `sent + ttl`, where `sent` is when the request left: the server
/// cannot have started the TTL before receiving it. So `sent + ttl` is a safe local estimate, and loss is
/// declared `safety_margin` before it.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    options: LockOptions,
    deadline: Instant,
    cap: Option<Instant>,
    last_granted: Instant,
    retry_at: Option<Instant>,
    /// The current grant ends at the cap: there is nothing left to renew.
    at_cap: bool,
}

impl Schedule {
    pub fn new(options: LockOptions, sent: Instant) -> Schedule {
        let cap = options.max_hold.map(|c| sent + c);
        let uncapped = sent + options.ttl;
        let at_cap = cap.is_some_and(|c| c <= uncapped);
        let deadline = cap.map_or(uncapped, |c| c.min(uncapped));
        Schedule { options, deadline, cap, last_granted: sent, retry_at: None, at_cap }
    }

    /// True when a grant that waited in the queue came back so late that the estimate from the send time is
    /// too pessimistic to work with; the caller then renews at once to learn a fresh deadline.
    pub fn needs_confirmation(&self, now: Instant) -> bool {
        self.options.wait.is_some() && now >= self.last_granted + self.options.ttl / 3
    }

    /// When a guard's worker must next act, seen at `now`: `Ok(wake)`, wait until then (for a renewal, or to
    /// signal loss); `Err(reason)`, the lock is lost now.
    pub fn wake_at(&self, now: Instant) -> Result<Instant, LossReason> {
        let loss_at = self.loss_at();
        if now >= loss_at {
            return Err(self.expiry_reason());
        }
        Ok(self.next_renewal().map_or(loss_at, |r| r.min(loss_at)))
    }

    /// True when a renewal is due at `now`.
    pub fn renewal_due(&self, now: Instant) -> bool {
        self.next_renewal().is_some_and(|r| r <= now)
    }

    /// When loss must be signalled unless a renewal succeeds first.
    pub fn loss_at(&self) -> Instant {
        self.deadline.checked_sub(self.options.margin()).unwrap_or(self.deadline)
    }

    /// The next renewal attempt, if there is one to make.
    pub fn next_renewal(&self) -> Option<Instant> {
        if !self.options.auto_renew || self.at_cap {
            return None;
        }
        let at = self.retry_at.unwrap_or(self.last_granted + self.options.ttl / 3);
        Some(at.min(self.loss_at()))
    }

    /// The TTL to ask for in a renewal sent `now`: the configured one, shortened so as not to pass the cap.
    pub fn renewal_ttl_ms(&self, now: Instant) -> u64 {
        let ttl = match self.cap {
            Some(cap) => self.options.ttl.min(cap.saturating_duration_since(now)),
            None => self.options.ttl,
        };
        ttl.as_millis().max(1) as u64
    }

    /// A renewal sent at `sent` for `ttl_ms` succeeded.
    pub fn renewed(&mut self, sent: Instant, ttl_ms: u64) {
        self.deadline = self.deadline.max(sent + Duration::from_millis(ttl_ms));
        // Only the cap makes a renewal ask for less than the configured TTL.
        self.at_cap = self.cap.is_some() && ttl_ms < self.options.ttl_ms();
        self.last_granted = sent;
        self.retry_at = None;
    }

    /// A renewal attempt failed without an answer; try again soon, well before loss.
    pub fn failed(&mut self, now: Instant) {
        let pause = (self.options.ttl / 20).clamp(Duration::from_millis(10), Duration::from_millis(500));
        self.retry_at = Some(now + pause);
    }

    /// Why the lock is lost when `loss_at` passes.
    pub fn expiry_reason(&self) -> LossReason {
        if self.at_cap {
            LossReason::MaxHoldReached
        } else {
            LossReason::Expired
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn renews_at_a_third_and_gives_up_a_margin_early() {
        let t0 = Instant::now();
        let mut s = Schedule::new(LockOptions::new(MS * 300), t0);
        assert_eq!(s.next_renewal(), Some(t0 + MS * 100));
        assert_eq!(s.loss_at(), t0 + MS * 240);
        assert_eq!(s.renewal_ttl_ms(t0), 300);
        s.renewed(t0 + MS * 100, 300);
        assert_eq!(s.loss_at(), t0 + MS * 340);
        assert_eq!(s.next_renewal(), Some(t0 + MS * 200));
        s.failed(t0 + MS * 200);
        assert_eq!(s.next_renewal(), Some(t0 + MS * 215), "retries soon after a failure");
        assert_eq!(s.expiry_reason(), LossReason::Expired);
    }

    #[test]
    fn the_cap_shortens_the_last_renewal_and_ends_renewing() {
        let t0 = Instant::now();
        let mut s = Schedule::new(LockOptions::new(MS * 300).max_hold(MS * 500), t0);
        s.renewed(t0 + MS * 100, s.renewal_ttl_ms(t0 + MS * 100));
        assert!(s.next_renewal().is_some());
        let ttl = s.renewal_ttl_ms(t0 + MS * 300);
        assert_eq!(ttl, 200);
        s.renewed(t0 + MS * 300, ttl);
        assert_eq!(s.next_renewal(), None);
        assert_eq!(s.loss_at(), t0 + MS * 440);
        assert_eq!(s.expiry_reason(), LossReason::MaxHoldReached);
    }

    #[test]
    fn no_renew_and_late_waited_grants() {
        let t0 = Instant::now();
        assert_eq!(Schedule::new(LockOptions::new(MS * 300).no_renew(), t0).next_renewal(), None);
        let waited = Schedule::new(LockOptions::new(MS * 300).wait(MS * 1000), t0);
        assert!(!waited.needs_confirmation(t0 + MS * 50));
        assert!(waited.needs_confirmation(t0 + MS * 150));
        assert!(!Schedule::new(LockOptions::new(MS * 300), t0).needs_confirmation(t0 + MS * 150));
    }
}
