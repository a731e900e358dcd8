//! fsync threads for `appendfsync always`: several fsyncs of the log may be in flight at once.
//!
//! Why: a client's write waits for an fsync that *starts after* its record was written. With one fsync at a time,
//! a record that arrives during an fsync waits for it to finish and then for a whole second one. Filesystems
//! batch concurrent fsyncs of one file into one journal commit, so with several threads a record's fsync starts
//! at once, and measured on this project's machines several concurrent fdatasyncs complete at many times the rate
//! of one after another.
//!
//! Correctness: the writer asks for "durable up to LSN n" only after the bytes up to n are written, and each
//! thread claims the highest requested LSN before it calls fdatasync, which flushes every byte written before it
//! started; so a success proves everything up to the claimed LSN is on disk. A failure bumps a generation so
//! that no fsync in flight at that moment publishes anything; the writer then writes the unconfirmed bytes again.

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::shared::Shared;

pub const THREADS: usize = 4;

#[derive(Default)]
struct State {
    file: Option<Arc<File>>,
    /// Highest LSN written and waiting to be made durable.
    requested: u64,
    /// Highest LSN some thread has started (or finished) an fsync for.
    claimed: u64,
    generation: u64,
    failure: Option<std::io::Error>,
    shutdown: bool,
}

#[derive(Default)]
pub struct Syncer {
    state: Mutex<State>,
    cv: Condvar,
}

impl Syncer {
    pub fn start(shared: &Arc<Shared>) -> Arc<Syncer> {
        let syncer = Arc::new(Syncer::default());
        for i in 0..THREADS {
            let (s, shared) = (syncer.clone(), shared.clone());
            let _ = std::thread::Builder::new().name(format!("ruvio-fsync-{i}")).spawn(move || s.run(&shared));
        }
        syncer
    }

    /// The file to fsync from now on (log rotation); LSNs requested later are in it.
    pub fn set_file(&self, file: Arc<File>) {
        self.state.lock().file = Some(file);
    }

    /// Asks for everything up to `lsn` (already written) to be made durable.
    pub fn request(&self, lsn: u64) {
        let mut s = self.state.lock();
        if lsn > s.requested {
            s.requested = lsn;
            if s.claimed < lsn {
                self.cv.notify_one();
            }
        }
    }

    /// A failed fsync, if one happened; the caller rewrites what was not confirmed, then requests again. Until
    /// then no thread starts another fsync.
    pub fn take_failure(&self, synced: u64) -> Option<std::io::Error> {
        let mut s = self.state.lock();
        let f = s.failure.take()?;
        s.requested = synced;
        s.claimed = synced;
        Some(f)
    }

    pub fn shutdown(&self) {
        self.state.lock().shutdown = true;
        self.cv.notify_all();
    }

    fn run(&self, shared: &Shared) {
        loop {
            let (file, target, generation) = {
                let mut s = self.state.lock();
                loop {
                    if s.shutdown {
                        return;
                    }
                    if s.requested > s.claimed && s.failure.is_none() && s.file.is_some() {
                        break;
                    }
                    self.cv.wait(&mut s);
                }
                s.claimed = s.requested;
                (s.file.clone().expect("checked"), s.requested, s.generation)
            };
            let result = file.sync_data();
            let mut s = self.state.lock();
            match result {
                Ok(()) if s.generation == generation => {
                    shared.aof.publish_synced(target);
                    shared.aof.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                    shared.aof.stats.last_fsync_ms.store(crate::clock::wall_ms(), Ordering::Relaxed);
                }
                Ok(()) => {}
                Err(e) => {
                    s.generation += 1;
                    s.failure = Some(e);
                }
            }
            // More may have been requested meanwhile: let another waiting thread take it.
            if s.requested > s.claimed {
                self.cv.notify_one();
            }
            drop(s);
            shared.aof.wake.notify_one();
        }
    }
}
