//! The I/O workers: one OS thread per core, each running a single-threaded tokio runtime that owns the connections
//! handed to it.
//!
//! A connection stays on one thread for its whole life, and an idle worker sleeps in epoll_wait like Redis's event
//! loop instead of being parked and unparked by a work-stealing scheduler; how many workers run is a setting
//! (`io-threads`), because every worker executes under the one store lock and more of them soon only contend.
//! Work that must be shared (the store) sits behind that lock, held only for the short execution of commands.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::runtime::Handle;

use crate::shared::Shared;

pub struct Workers {
    handles: Vec<Handle>,
    next: AtomicUsize,
    threads: parking_lot::Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// Stack of the I/O threads and of their blocking pools, where scripts run (EXEC runs one on its I/O thread):
/// the Lua VM and the Rust code it calls recurse (nested tables converted to a reply, cjson and cmsgpack nesting,
/// each bounded), and an unoptimised build needs several times the stack per level of an optimised one. 2 MiB,
/// the default, overflowed within those bounds.
const SCRIPT_STACK_SIZE: usize = 16 << 20;

impl Workers {
    /// Starts `n` workers (at least one). Each runs until the server shuts down and its connections have closed.
    pub fn start(shared: &Arc<Shared>, n: usize) -> std::io::Result<Arc<Workers>> {
        let mut handles = Vec::new();
        let mut threads = Vec::new();
        for i in 0..n.max(1) {
            let (tx, rx) = std::sync::mpsc::channel();
            let shared = shared.clone();
            let thread = std::thread::Builder::new().name(format!("ruvio-io-{i}")).stack_size(SCRIPT_STACK_SIZE).spawn(move || {
                let at_park = shared.clone();
                let built = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .thread_stack_size(SCRIPT_STACK_SIZE)
                    .on_thread_park(move || at_park.aof.before_park(&at_park))
                    .build();
                let rt = match built {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let _ = tx.send(Ok(rt.handle().clone()));
                rt.block_on(async move {
                    let mut shutdown = shared.shutdown.subscribe();
                    let _ = shutdown.wait_for(|s| *s).await;
                    // Give this worker's connections the moment they need to write their last replies.
                    for _ in 0..200 {
                        if shared.clients.lock().is_empty() {
                            break;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                });
            })?;
            let handle = rx.recv().map_err(|_| std::io::Error::other("worker thread died at start"))??;
            handles.push(handle);
            threads.push(thread);
        }
        Ok(Arc::new(Workers { handles, next: AtomicUsize::new(0), threads: parking_lot::Mutex::new(threads) }))
    }

    /// The runtime the next connection goes to (round robin).
    pub fn next(&self) -> &Handle {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        &self.handles[i]
    }

    /// Waits (blocking) for every worker thread to finish; call after shutdown.
    pub fn join(&self) {
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}
