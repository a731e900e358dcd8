//! The token reservation file (`tokens.state` in the data folder): the fencing epoch and the end of the token range
//! the server may issue from. It is rewritten and fsynced *before* any token beyond the old end is issued, whatever
//! `appendfsync` says, so after any crash the server restarts above every token it ever issued, even when the log
//! lost the grants (`appendfsync no`) and the wall clock went back.
//!
//! Writes are rare: the range is extended ahead of need ([`RESERVE_AHEAD`]) by a background thread, so the
//! synchronous path (under the store lock) runs only if issuing outruns it.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::locks::tokens::{TokenIssuer, COUNTER_BITS};

pub const FILE_NAME: &str = "tokens.state";
const MAGIC: &[u8; 8] = b"RUVIOTOK";
const LEN: usize = 8 + 2 + 8 + 4;
/// How far past the current need a reservation reaches: 60 s of the token clock.
pub const RESERVE_AHEAD: i64 = 60_000 << COUNTER_BITS;
/// The background thread extends the reservation when less than this is left.
pub const EXTEND_WHEN_LEFT: i64 = 30_000 << COUNTER_BITS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenState {
    pub epoch: u16,
    pub reserved_until: i64,
}

fn encode(s: TokenState) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[0..8].copy_from_slice(MAGIC);
    b[8..10].copy_from_slice(&s.epoch.to_le_bytes());
    b[10..18].copy_from_slice(&s.reserved_until.to_le_bytes());
    let crc = crc32fast::hash(&b[..18]);
    b[18..22].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Reads the state file; `Ok(None)` when there is none (first start).
pub fn read(dir: &Path) -> Result<Option<TokenState>, String> {
    let path = dir.join(FILE_NAME);
    let b = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    if b.len() != LEN || &b[0..8] != MAGIC || crc32fast::hash(&b[..18]) != u32::from_le_bytes(b[18..22].try_into().unwrap()) {
        // Refusing is the only safe answer: starting without it could reissue tokens.
        return Err(format!("{} is corrupted (bad length, magic or checksum); it holds the fencing token high-water mark, so the server will not start without it. Restore it, or if you know no client still holds tokens from before, remove it", path.display()));
    }
    Ok(Some(TokenState {
        epoch: u16::from_le_bytes([b[8], b[9]]),
        reserved_until: i64::from_le_bytes(b[10..18].try_into().unwrap()),
    }))
}

/// Writes the state durably: temporary file, fsync, rename over the old one, fsync the folder.
pub fn write(dir: &Path, s: TokenState) -> io::Result<()> {
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(&encode(s))?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, dir.join(FILE_NAME))?;
    super::sync_dir(dir)
}

/// The reservation as the server keeps it: serializes writers (the synchronous path and the background thread)
/// and never lets the reservation shrink.
pub struct Reservation {
    dir: PathBuf,
    state: Mutex<TokenState>,
}

impl Reservation {
    pub fn new(dir: PathBuf, state: TokenState) -> Arc<Self> {
        Arc::new(Reservation { dir, state: Mutex::new(state) })
    }

    /// Durably reserves up to `upto`; returns the reservation's end.
    pub fn extend(&self, upto: i64, epoch: u16) -> Result<i64, String> {
        let mut st = self.state.lock();
        if upto <= st.reserved_until && epoch <= st.epoch {
            return Ok(st.reserved_until);
        }
        let next = TokenState { epoch: st.epoch.max(epoch), reserved_until: st.reserved_until.max(upto) };
        write(&self.dir, next).map_err(|e| format!("Errors writing to the token reservation file: {e}"))?;
        *st = next;
        Ok(next.reserved_until)
    }

    pub fn current(&self) -> TokenState {
        *self.state.lock()
    }

    /// Connects the issuer: tokens up to the current reservation are free; beyond it the issuer calls back here.
    pub fn install(self: &Arc<Self>, issuer: &mut TokenIssuer) {
        let me = self.clone();
        let epoch = issuer.epoch();
        let reserver: crate::locks::tokens::Reserver = Arc::new(move |needed| me.extend(needed + RESERVE_AHEAD, epoch));
        issuer.set_reservation(self.current().reserved_until, reserver);
    }

    /// What the reservation should reach now, if the background thread should extend it: the issuer's next token
    /// (its last one or the clock floor, whichever is higher) plus [`RESERVE_AHEAD`].
    pub fn wanted(issuer: &TokenIssuer, wall_ms: i64) -> Option<i64> {
        let next = issuer.last().max(issuer.floor(wall_ms));
        (issuer.reserved_until().saturating_sub(next) < EXTEND_WHEN_LEFT).then(|| next + RESERVE_AHEAD)
    }
}

/// Prepares the issuer at start-up: raises it above everything reserved before (so above every token ever issued),
/// then reserves a first range.
pub fn start(dir: &Path, issuer: &mut TokenIssuer, wall_ms: i64) -> Result<Arc<Reservation>, String> {
    let before = read(dir)?;
    if let Some(st) = before {
        issuer.set_epoch(st.epoch);
        issuer.observe(st.reserved_until);
    }
    let state = before.unwrap_or(TokenState { epoch: issuer.epoch(), reserved_until: 0 });
    let reservation = Reservation::new(dir.to_path_buf(), state);
    let first = issuer.last().max(issuer.floor(wall_ms)) + RESERVE_AHEAD;
    reservation.extend(first, issuer.epoch())?;
    reservation.install(issuer);
    Ok(reservation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::tokens::TIME_BASE_MS;

    #[test]
    fn restart_never_reissues_even_when_the_clock_goes_back() {
        let dir = std::env::temp_dir().join(format!("ruvio-tok-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let now = TIME_BASE_MS + 10_000_000;
        let mut highest = 0;
        for round in 0..5i64 {
            // Each "process": a fresh issuer that knows only what is on disk; the clock goes back each time.
            let mut issuer = TokenIssuer::new(0);
            start(&dir, &mut issuer, now - round * 3_600_000).unwrap();
            for i in 0..300_000i64 {
                // A clock that also jumps forward mid-run forces the synchronous path.
                let wall = now - round * 3_600_000 + if i == 150_000 { 120_000 } else { 0 };
                let t = issuer.try_next(wall).unwrap();
                assert!(t > highest, "round {round}: token {t} not above {highest}");
                highest = t;
            }
            assert!(read(&dir).unwrap().unwrap().reserved_until >= highest);
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
