//! Time. Deadlines (key expiry, lease TTLs) run on a monotonic clock so a wall-clock jump can neither expire nor
//! revive anything; wall-clock time is used only at the edges (EXPIREAT arguments, TTL persistence, TIME).

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Where the monotonic clock starts: far enough above zero that instants before the process started (the times of
/// records replayed from the log, deadlines already past) still map to distinct values, and `0` can still mean
/// "no deadline".
const MONO_ORIGIN_MS: u64 = 1 << 40;

/// Milliseconds on the monotonic clock, counted from the first call in this process plus [`MONO_ORIGIN_MS`].
pub fn mono_ms() -> u64 {
    origin().elapsed().as_millis() as u64 + MONO_ORIGIN_MS
}

/// Milliseconds since the Unix epoch, on the wall clock.
pub fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Microseconds since the Unix epoch, on the wall clock.
pub fn wall_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// Converts an absolute wall-clock time (Unix ms) to the monotonic clock. Times already past map to the past (and
/// so count as expired), keeping their order, down to about 35 years back; older ones map to 1.
pub fn wall_to_mono(wall_deadline_ms: i64) -> u64 {
    let delta = wall_deadline_ms.saturating_sub(wall_ms());
    let now = mono_ms();
    if delta >= 0 {
        now.saturating_add(delta as u64)
    } else {
        now.saturating_sub(delta.unsigned_abs()).max(1)
    }
}

/// Converts a monotonic deadline to Unix ms, for persistence, replication and EXPIRETIME.
pub fn mono_to_wall(mono_deadline: u64) -> i64 {
    let now = mono_ms();
    wall_ms().saturating_add(mono_deadline as i64 - now as i64)
}
