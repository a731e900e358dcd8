//! The I/O workers: one OS thread per core, each running a single-threaded tokio runtime that owns the connections
//! handed to it.
//!
//! A connection stays on one thread for its whole life, and an idle worker sleeps in epoll_wait like Redis's event
//! loop instead of being parked and unparked by a work-stealing scheduler; how many workers run is a setting
//! (`io-threads`), because every worker executes under the one store lock and more of them soon only contend.
//! Work that must be shared (the store) sits behind that lock, held only for the short execution of commands.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
                crate::os::precise_sleeps();
                let at_park = shared.clone();
                let built = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .thread_stack_size(SCRIPT_STACK_SIZE)
                    .on_thread_park(move || {
                        // Decided before the group commit takes its flag down: a commit has replies waiting.
                        let pause = COALESCING.with_borrow_mut(|c| c.at_park(Instant::now(), at_park.aof.group_commit_pending()));
                        at_park.aof.before_park(&at_park);
                        if let Some(pause) = pause {
                            std::thread::sleep(pause);
                        }
                        COALESCING.with_borrow_mut(|c| c.waiting_from(Instant::now()));
                    })
                    .on_thread_unpark(|| COALESCING.with_borrow_mut(|c| c.at_unpark(Instant::now())))
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

// ----- pausing before an idle wait under load -----
//
// With many clients and a worker that is fast enough to go idle between their requests, each request that arrives
// while the worker sleeps in epoll_wait makes the client's send pay for waking it (on this 2-core VM a few
// microseconds of the client's CPU), and the worker wakes for that one connection, serves it, and sleeps again:
// about one epoll_wait and one sleep per request batch, against Redis's one per five to fifteen (measured in
// docs/benchmarks.md, "How often the worker sleeps"). The client, slowed by the wake-ups, sends less; the worker
// goes idle sooner; the pattern holds. Pausing briefly before the wait, when the worker is serving many clients and
// its last wait was short, lets the requests that arrive meanwhile be read in one round, and nobody pays to wake
// the worker. Only pipelining clients see a pause (a few microseconds on a round trip that carries several
// commands each); a lone client, a few clients, clients that send one command at a time (lock traffic: with 10
// such clients a pause cost 15% of their throughput), a round whose replies wait for the log and a worker busy
// nearly all the time (which has no idle time to give) never pause.
//
// How long: a fraction of the time the worker takes to serve one round of its active connections (one read each),
// so the latency the pause adds stays a small share of the clients' round trip however many they are. A pause has a
// fixed cost, the sleep itself: on this paravirtualised VM about 13 us of the server's CPU (a timer to program and a
// context switch each way; `nanosleep` of 0 us costs as much), so a 50-client `-P 16` load that paused 20 us
// spent about a tenth of its CPU on pauses; the longer pause there gathers more requests per sleep.

/// The shortest and longest pause of a loaded worker before it waits for its sockets ...
const PAUSE_MIN: Duration = Duration::from_micros(20);
const PAUSE_MAX: Duration = Duration::from_micros(100);
/// ... which is this fraction (1/n) of the time it took to serve one round of its active connections.
const PAUSE_SHARE_OF_ROUND: u32 = 8;
/// How many of a worker's connections must have run commands in the current or last window for it to pause.
const LOADED_CONNECTIONS: u32 = 8;
const ACTIVE_WINDOW: Duration = Duration::from_millis(1);
/// A wait shorter than this found requests already there: the worker was not idle.
const WAIT_FOUND_WORK: Duration = Duration::from_micros(3);
/// A wait longer than this means the clients leave the worker idle for long: pausing would only add latency.
const WAIT_LONG: Duration = Duration::from_micros(500);
/// Commands per read the connections must have averaged in the current or last window (pipelining).
const PIPELINED: u64 = 4;
/// A worker busy for more than this share of the last window does not pause: it has no idle time to give.
const BUSY_AT_MOST: f64 = 0.9;
/// Of this many parks in a row, the last one does not pause, so its wait shows whether the worker still goes idle
/// (a saturated worker's wait returns at once, and pausing stops).
const PROBE_EVERY: u32 = 16;

/// Whether `batches` reads averaged at least [`PIPELINED`] commands each.
fn pipelined(batches: u64, commands: u64) -> bool {
    batches > 0 && commands >= PIPELINED * batches
}

thread_local! {
    static COALESCING: RefCell<Coalescing> = RefCell::new(Coalescing::default());
}

/// One worker's view of its load, updated at each park and unpark of its runtime.
#[derive(Debug, Default)]
struct Coalescing {
    /// The last wait that was not preceded by a pause was short but not instant: the worker idles between requests.
    idles_briefly: bool,
    /// The wait in progress follows a pause (it returns at once and says nothing about the load).
    paused: bool,
    pauses_in_a_row: u32,
    waiting_since: Option<Instant>,
    window_started: Option<Instant>,
    /// Counts windows, so a connection counts itself once per window (`note_connection_ran`).
    window: u64,
    active: u32,
    active_before: u32,
    /// Reads run and the commands they carried in this window (a saturated worker's window lasts until it parks).
    batches: u64,
    commands: u64,
    pipelined_before: bool,
    /// When the runtime last woke, and how long it has run in this window.
    running_since: Option<Instant>,
    busy: Duration,
    /// The share of the last window the worker ran.
    busy_before: f64,
    /// The pause the last window's load calls for ([`pause_for_round`]).
    pause: Duration,
}

/// The pause for a worker that ran `batches` reads in `busy` time with `active` connections: a share of one round,
/// within [`PAUSE_MIN`] and [`PAUSE_MAX`].
fn pause_for_round(busy: Duration, batches: u64, active: u32) -> Duration {
    if batches == 0 {
        return PAUSE_MIN;
    }
    let per_read = busy / batches.min(u32::MAX as u64) as u32;
    (per_read.saturating_mul(active) / PAUSE_SHARE_OF_ROUND).clamp(PAUSE_MIN, PAUSE_MAX)
}

impl Coalescing {
    /// At a park: how long to pause before waiting, if at all.
    fn at_park(&mut self, now: Instant, commit_pending: bool) -> Option<Duration> {
        if let Some(since) = self.running_since.take() {
            self.busy += now.duration_since(since);
        }
        match self.window_started {
            Some(t) if now.duration_since(t) <= ACTIVE_WINDOW => {}
            started => {
                let length = started.map_or(Duration::ZERO, |t| now.duration_since(t));
                let busy = std::mem::take(&mut self.busy);
                self.busy_before = if length.is_zero() { 1.0 } else { busy.as_secs_f64() / length.as_secs_f64() };
                self.window += 1;
                self.window_started = Some(now);
                self.active_before = std::mem::take(&mut self.active);
                self.pause = pause_for_round(busy, self.batches, self.active_before);
                self.pipelined_before = pipelined(std::mem::take(&mut self.batches), std::mem::take(&mut self.commands));
            }
        }
        let pipelined = self.pipelined_before || pipelined(self.batches, self.commands);
        let loaded = self.active.max(self.active_before) >= LOADED_CONNECTIONS && pipelined && self.busy_before <= BUSY_AT_MOST;
        let probe = self.pauses_in_a_row + 1 >= PROBE_EVERY;
        self.paused = loaded && self.idles_briefly && !probe && !commit_pending;
        self.pauses_in_a_row = if self.paused { self.pauses_in_a_row + 1 } else { 0 };
        self.paused.then_some(self.pause.max(PAUSE_MIN))
    }

    /// The runtime is about to wait for its sockets.
    fn waiting_from(&mut self, now: Instant) {
        self.waiting_since = Some(now);
    }

    /// The wait ended: judge from it, unless a pause came first.
    fn at_unpark(&mut self, now: Instant) {
        self.running_since = Some(now);
        if let (false, Some(since)) = (self.paused, self.waiting_since) {
            let waited = now.duration_since(since);
            self.idles_briefly = (WAIT_FOUND_WORK..=WAIT_LONG).contains(&waited);
        }
    }

    fn connection_ran(&mut self, seen: &mut u64, commands: usize) {
        self.batches += 1;
        self.commands += commands as u64;
        if *seen != self.window {
            *seen = self.window;
            self.active += 1;
        }
    }
}

/// A connection runs `commands` it read on this worker; `seen` is the connection's own record of the last window it
/// was counted in.
pub(crate) fn note_connection_ran(seen: &mut u64, commands: usize) {
    COALESCING.with_borrow_mut(|c| c.connection_ran(seen, commands));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one park/unpark cycle, 50 us after the last: the first `conns` of 50 connections ran 16 pipelined
    /// commands each, then the wait lasted `waited`. Returns the pause chosen.
    fn cycle(c: &mut Coalescing, t: &mut Instant, conns: usize, waited: Duration, commit_pending: bool) -> Option<Duration> {
        cycle_of(c, t, conns, 16, waited, commit_pending)
    }

    fn cycle_of(c: &mut Coalescing, t: &mut Instant, conns: usize, commands: usize, waited: Duration, commit_pending: bool) -> Option<Duration> {
        thread_local!(static SEEN: RefCell<Vec<u64>> = RefCell::new(vec![0; 50]));
        SEEN.with_borrow_mut(|seen| seen[..conns].iter_mut().for_each(|s| c.connection_ran(s, commands)));
        *t += Duration::from_micros(50);
        let pause = c.at_park(*t, commit_pending);
        *t += pause.unwrap_or_default();
        c.waiting_from(*t);
        *t += waited;
        c.at_unpark(*t);
        pause
    }

    #[test]
    fn a_lone_client_or_a_few_never_wait_for_a_pause() {
        let (mut c, mut t) = (Coalescing::default(), Instant::now());
        for _ in 0..100 {
            assert_eq!(cycle(&mut c, &mut t, 1, Duration::from_micros(30), false), None);
        }
        for _ in 0..100 {
            assert_eq!(cycle(&mut c, &mut t, LOADED_CONNECTIONS as usize - 1, Duration::from_micros(30), false), None);
        }
    }

    #[test]
    fn many_clients_and_brief_idle_waits_pause_with_a_probe_every_so_often() {
        let (mut c, mut t) = (Coalescing::default(), Instant::now());
        // 50 us of work, then 20 us idle: once a window has been measured, the worker pauses.
        let warm_up = (0..100).position(|_| cycle(&mut c, &mut t, 50, Duration::from_micros(20), false).is_some());
        assert!(warm_up.is_some_and(|n| n > 1), "pauses after the first measured window, not before: {warm_up:?}");
        // Now the waits after pauses return at once; the probe's wait (also instant here) shows a worker that
        // finds work waiting, and the pauses stop.
        let pauses: Vec<bool> = (0..2 * PROBE_EVERY).map(|_| cycle(&mut c, &mut t, 50, Duration::ZERO, false).is_some()).collect();
        let run = pauses.iter().take_while(|p| **p).count();
        assert!(run >= 1 && run < PROBE_EVERY as usize, "{pauses:?}");
        assert!(pauses[run..].iter().all(|p| !p), "{pauses:?}");
    }

    #[test]
    fn clients_sending_one_command_at_a_time_never_wait_for_a_pause() {
        let (mut c, mut t) = (Coalescing::default(), Instant::now());
        let pauses = (0..100).filter(|_| cycle_of(&mut c, &mut t, 50, 1, Duration::from_micros(20), false).is_some()).count();
        assert_eq!(pauses, 0);
    }

    #[test]
    fn a_worker_busy_nearly_all_the_time_does_not_pause() {
        let (mut c, mut t) = (Coalescing::default(), Instant::now());
        // 50 us of work, then waits of 3 us: busy 94% of the time.
        let pauses = (0..100).filter(|_| cycle(&mut c, &mut t, 50, Duration::from_micros(3), false).is_some()).count();
        assert_eq!(pauses, 0);
    }

    #[test]
    fn long_waits_and_pending_group_commits_do_not_pause() {
        let (mut c, mut t) = (Coalescing::default(), Instant::now());
        cycle(&mut c, &mut t, 50, Duration::from_millis(2), false);
        assert_eq!(cycle(&mut c, &mut t, 50, Duration::from_micros(20), false), None, "the last wait was long");
        assert_eq!(cycle(&mut c, &mut t, 50, Duration::from_micros(20), true), None, "replies wait for the commit");
        assert_eq!(cycle(&mut c, &mut t, 50, Duration::from_micros(20), false), Some(PAUSE_MIN));
    }

    /// The pause the worker takes once it has settled into `conns` connections each sending 16 commands per read,
    /// `work` of running per round of them and waits a quarter as long (busy 80% of the time).
    fn settled_pause(conns: usize, work: Duration) -> Option<Duration> {
        let (mut c, mut t) = (Coalescing::default(), Instant::now());
        let mut seen = vec![0; conns];
        let mut last = None;
        for _ in 0..20 {
            seen.iter_mut().for_each(|s| c.connection_ran(s, 16));
            t += work;
            let pause = c.at_park(t, false);
            t += pause.unwrap_or_default();
            c.waiting_from(t);
            t += work / 4;
            c.at_unpark(t);
            last = pause.or(last);
        }
        last
    }

    #[test]
    fn the_pause_is_a_share_of_one_round_of_the_connections_within_bounds() {
        // 50 connections served in 400 us (8 us per read): an eighth of the round.
        assert_eq!(settled_pause(50, Duration::from_micros(400)), Some(Duration::from_micros(50)));
        // A quick round: the shortest pause.
        assert_eq!(settled_pause(50, Duration::from_micros(100)), Some(PAUSE_MIN));
        assert_eq!(settled_pause(10, Duration::from_micros(100)), Some(PAUSE_MIN));
        // A long round: the longest.
        assert_eq!(settled_pause(50, Duration::from_micros(1600)), Some(PAUSE_MAX));
        assert_eq!(pause_for_round(Duration::from_micros(800), 100, 50), Duration::from_micros(50));
        assert_eq!(pause_for_round(Duration::ZERO, 0, 50), PAUSE_MIN);
    }
}
