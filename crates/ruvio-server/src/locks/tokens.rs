//! Fencing tokens: positive signed 64-bit integers, strictly increasing across the whole server.
//!
//! Layout (bit 63 is always 0 so tokens stay positive in every language):
//!
//! ```text
//!  62        53 52                                   12 11          0
//! [ epoch: 10 ][ ms since 2025-01-01 UTC: 41 bits     ][ counter: 12 ]
//! ```
//!
//! - The epoch is raised at every failover, so a promoted replica's tokens are larger than anything the old primary
//!   could have issued, even grants that never reached the replica.
//! - The millisecond field is a floor taken from the wall clock: a restarted server starts above every token issued
//!   before the restart even if nothing was persisted (as long as the clock did not go back). Persistence adds a
//!   reserved high-water mark so that even a clock that went back cannot cause reuse.
//! - Within one ms up to 4096 tokens come from the counter; beyond that the sequence simply runs ahead of the clock
//!   (`max(last + 1, floor)`), which stays strictly increasing and catches up when the load drops.
//! - 41 bits of ms last until 2094; 10 bits of epoch allow 1023 failovers.

/// 2025-01-01T00:00:00Z in Unix ms.
pub const TIME_BASE_MS: i64 = 1_735_689_600_000;
pub const COUNTER_BITS: u32 = 12;
pub const TIME_BITS: u32 = 41;
pub const EPOCH_SHIFT: u32 = COUNTER_BITS + TIME_BITS;
pub const MAX_EPOCH: u16 = (1 << 10) - 1;

/// The wall-clock ms (Unix) in a token's time field: when it was issued, or slightly before that when the issuer
/// ran ahead of the clock under load.
pub fn issued_wall_ms(token: i64) -> i64 {
    ((token >> COUNTER_BITS) & ((1 << TIME_BITS) - 1)) + TIME_BASE_MS
}

/// Durably reserves tokens up to at least the given one (persistence's token state file, fsynced) and returns the
/// new end of the reservation, or why it could not.
pub type Reserver = std::sync::Arc<dyn Fn(i64) -> Result<i64, String> + Send + Sync>;

#[derive(Clone)]
pub struct TokenIssuer {
    epoch: u16,
    last: i64,
    /// No token above this may be issued before the reservation is extended on disk: after a crash the server
    /// restarts above it, so tokens never repeat even if the log lost their grants and the clock went back.
    /// `i64::MAX` when there is no persistence.
    reserved_until: i64,
    reserver: Option<Reserver>,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer").field("epoch", &self.epoch).field("last", &self.last).field("reserved_until", &self.reserved_until).finish()
    }
}

impl TokenIssuer {
    pub fn new(epoch: u16) -> Self {
        TokenIssuer { epoch: epoch.min(MAX_EPOCH), last: 0, reserved_until: i64::MAX, reserver: None }
    }

    /// Installs persistence's reservation: tokens up to `reserved_until` may be issued; beyond it `reserver` is
    /// called (synchronously, under the store lock) first.
    pub fn set_reservation(&mut self, reserved_until: i64, reserver: Reserver) {
        self.reserved_until = reserved_until;
        self.reserver = Some(reserver);
    }

    pub fn reserved_until(&self) -> i64 {
        self.reserved_until
    }

    /// Records a reservation extended in the background (never shrinks it).
    pub fn extend_reservation(&mut self, reserved_until: i64) {
        self.reserved_until = self.reserved_until.max(reserved_until);
    }

    pub fn epoch(&self) -> u16 {
        self.epoch
    }

    /// The largest token issued (or known to have been issued, after [`TokenIssuer::observe`]).
    pub fn last(&self) -> i64 {
        self.last
    }

    /// The smallest token the wall clock allows at `wall_ms`.
    pub fn floor(&self, wall_ms: i64) -> i64 {
        let ms = (wall_ms - TIME_BASE_MS).clamp(0, (1 << TIME_BITS) - 1);
        ((self.epoch as i64) << EPOCH_SHIFT) | (ms << COUNTER_BITS)
    }

    /// Issues the next token. Fails only when persistence cannot extend the token reservation on disk and the
    /// reserved range is used up; the caller then refuses the grant (`-MISCONF ...`).
    pub fn try_next(&mut self, wall_ms: i64) -> Result<i64, String> {
        let mut t = (self.last + 1).max(self.floor(wall_ms));
        if t > self.reserved_until {
            let extended = match &self.reserver {
                Some(reserve) => reserve(t),
                None => Ok(i64::MAX),
            };
            match extended {
                Ok(upto) => self.reserved_until = self.reserved_until.max(upto),
                // The disk refuses: stay inside what is already reserved, giving up the clock floor for now.
                Err(_) if self.last < self.reserved_until => t = self.last + 1,
                Err(e) => return Err(e),
            }
        }
        self.last = t;
        Ok(t)
    }

    /// Issues the next token; see [`TokenIssuer::try_next`], which callers should prefer when persistence is on.
    pub fn next(&mut self, wall_ms: i64) -> i64 {
        self.try_next(wall_ms).expect("token reservation exhausted and the disk refuses to extend it")
    }

    /// Records that `token` was issued (replayed from the log or learned from a peer), so later tokens exceed it.
    pub fn observe(&mut self, token: i64) {
        self.last = self.last.max(token);
    }

    /// Moves to a new epoch (failover). Tokens issued afterwards exceed every token of earlier epochs.
    pub fn set_epoch(&mut self, epoch: u16) {
        self.epoch = self.epoch.max(epoch.min(MAX_EPOCH));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The epoch a token was issued in.
    fn epoch_of(token: i64) -> u16 {
        (token >> EPOCH_SHIFT) as u16
    }

    #[test]
    fn strictly_increasing_even_in_bursts_and_clock_jumps() {
        let mut t = TokenIssuer::new(0);
        let now = TIME_BASE_MS + 1_000_000;
        let mut prev = 0;
        for i in 0..100_000 {
            let wall = if i % 1000 == 999 { now - 50_000 } else { now };
            let tok = t.next(wall);
            assert!(tok > prev && tok > 0);
            prev = tok;
        }
    }

    #[test]
    fn later_epoch_beats_everything_before() {
        let mut old = TokenIssuer::new(3);
        let far_future = TIME_BASE_MS + (1 << 40);
        let high = old.next(far_future);
        let mut new = TokenIssuer::new(4);
        assert!(new.next(TIME_BASE_MS) > high);
        assert_eq!(epoch_of(high), 3);
    }
}
