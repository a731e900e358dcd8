//! Time. Deadlines (key expiry, lease TTLs) run on a monotonic clock so a wall-clock jump can neither expire nor
//! revive anything; wall-clock time is used only at the edges (EXPIREAT arguments, TTL persistence, TIME).

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A reading of the monotonic clock (CLOCK_MONOTONIC, the clock `Instant` reads on Linux) in nanoseconds. Every
/// command of every client is dated and timed with one: the difference of two is one subtraction, where `Instant`'s
/// normalises seconds and nanoseconds (two of those per command were 3% of a pipelined command's instructions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u64);

impl Stamp {
    pub fn now() -> Stamp {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec for the call to fill; CLOCK_MONOTONIC always exists on Linux.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        Stamp(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// The time from `earlier` to this reading (zero if `earlier` is later).
    pub fn since(self, earlier: Stamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

fn origin() -> Stamp {
    static ORIGIN: OnceLock<Stamp> = OnceLock::new();
    *ORIGIN.get_or_init(Stamp::now)
}

/// Where the monotonic clock starts: far enough above zero that instants before the process started (the times of
/// records replayed from the log, deadlines already past) still map to distinct values, and `0` can still mean
/// "no deadline".
const MONO_ORIGIN_MS: u64 = 1 << 40;

/// Milliseconds on the monotonic clock, counted from the first call in this process plus [`MONO_ORIGIN_MS`].
pub fn mono_ms() -> u64 {
    mono_ms_at(Stamp::now())
}

/// [`mono_ms`] at `t` (a reading already taken: the connection reads the clock once per command and derives both
/// the command's time and its duration from it).
pub fn mono_ms_at(t: Stamp) -> u64 {
    t.0.saturating_sub(origin().0) / 1_000_000 + MONO_ORIGIN_MS
}

/// Milliseconds since the Unix epoch, on the wall clock.
pub fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Microseconds since the Unix epoch, on the wall clock.
pub fn wall_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// The Unix-ms instant a TTL argument names (`amount` in s or ms, counted from `wall_now` or absolute), or None
/// when Redis would answer "invalid expire time": the unit conversion or the addition to now overflows 64 bits. Every
/// command that takes a TTL checks it here, so no deadline can wrap to a negative time in the log or in EXPIRETIME.
pub fn ttl_to_wall(amount: i64, millis: bool, absolute: bool, wall_now: i64) -> Option<i64> {
    let ms = if millis { amount } else { amount.checked_mul(1000)? };
    if absolute { Some(ms) } else { wall_now.checked_add(ms) }
}

/// Converts an absolute wall-clock time (Unix ms) to the monotonic clock. Times already past map to the past (and
/// so count as expired), keeping their order, down to about 35 years back; older ones map to 1.
pub fn wall_to_mono(wall_deadline_ms: i64) -> u64 {
    wall_deadline_ms.saturating_sub(wall_offset()).max(1) as u64
}

/// Converts a monotonic deadline to Unix ms, for persistence, replication and EXPIRETIME.
pub fn mono_to_wall(mono_deadline: u64) -> i64 {
    (mono_deadline as i64).saturating_add(wall_offset())
}

/// Wall ms minus monotonic ms, as last adopted. Both conversions use this one value so that a deadline converted in
/// and back out is exact (PEXPIREAT then PEXPIRETIME). It is re-read when the wall clock has moved by more than a
/// second against the monotonic one (a clock step), so conversions follow the wall clock at the boundary while
/// deadlines already set stay on the monotonic clock.
static WALL_OFFSET: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(i64::MIN);

fn wall_offset() -> i64 {
    use std::sync::atomic::Ordering;
    let fresh = wall_ms() - mono_ms() as i64;
    let cached = WALL_OFFSET.load(Ordering::Relaxed);
    if cached == i64::MIN || (fresh - cached).abs() > 1000 {
        WALL_OFFSET.store(fresh, Ordering::Relaxed);
        fresh
    } else {
        cached
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_trip_exactly() {
        for delta in [-5_000_000i64, -1, 0, 1, 999, 123_456_789] {
            let wall = wall_ms() + delta;
            assert_eq!(mono_to_wall(wall_to_mono(wall)), wall);
        }
        let later = wall_ms() + 10_000;
        assert!(wall_to_mono(later) > mono_ms());
        assert!(wall_to_mono(wall_ms() - 10) <= mono_ms());
    }
}
