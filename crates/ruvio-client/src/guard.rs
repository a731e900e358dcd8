//! The blocking lock guard: a background thread renews the grant and raises the loss signal.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::lock_options::{LossReason, Schedule};
use crate::options::ClientBuilder;
use crate::renewal::{renewer_methods, Loss};
use crate::{Client, Token};

/// A shareable view of a guard's loss state: hand a clone to the code doing the protected work and have it
/// check [`LossSignal::is_lost`] (or block in [`LossSignal::wait_timeout`]).
#[derive(Debug, Clone, Default)]
pub struct LossSignal {
    state: Arc<(Mutex<Option<LossReason>>, Condvar)>,
}

impl LossSignal {
    /// True once the lock is lost (or released).
    pub fn is_lost(&self) -> bool {
        self.reason().is_some()
    }

    /// Why the lock is lost, once it is.
    pub fn reason(&self) -> Option<LossReason> {
        *self.state.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks until the lock is lost and says why.
    pub fn wait(&self) -> LossReason {
        let (lock, cv) = &*self.state;
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let guard = cv.wait_while(guard, |r| r.is_none()).unwrap_or_else(|p| p.into_inner());
        guard.expect("woken only once set")
    }

    /// Blocks until the lock is lost or `timeout` passes; `None` if it is still held.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<LossReason> {
        let (lock, cv) = &*self.state;
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = cv.wait_timeout_while(guard, timeout, |r| r.is_none()).unwrap_or_else(|p| p.into_inner());
        *guard
    }
}

enum Control {
    Release(mpsc::Sender<Result<i64>>),
}

/// A held lock (or semaphore slot) that renews itself, from [`Client::acquire`] or
/// [`Client::acquire_semaphore`].
///
/// - **Renewal**: a background thread, on its own connection (opened with the acquiring client's options),
///   sends `RENEW` about every TTL/3, unless [`LockOptions::no_renew`](crate::LockOptions::no_renew) was given.
/// - **Loss**: when no renewal has succeeded and the grant's deadline, estimated on this process's monotonic
///   clock from when the request was sent, comes within the safety margin, or when `RENEW` answers 0, the
///   [`LossSignal`] is raised and renewal stops for good. A paused or unreachable server therefore raises the
///   signal *before* the server could give the lock to someone else, as long as the clocks tick alike.
/// - **Fencing**: pass [`LockGuard::token`] to every write the lock protects (for example
///   [`Client::ifgt`]); the signal narrows the window of a stale holder, only the token closes it.
/// - **Release**: [`LockGuard::release`] stops renewal and sends `RELEASE`, answering 1 or 0.
/// - **Drop**: dropping the guard without releasing stops renewal and has the background thread send one
///   best-effort `RELEASE` (bounded by the command timeout, errors ignored). Drop itself does not block, so
///   if the process exits right after, the release may not happen; the lock then frees itself when its TTL
///   ends.
#[derive(Debug)]
pub struct LockGuard {
    key: String,
    token: Token,
    loss: LossSignal,
    control: Option<mpsc::Sender<Control>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Release")
    }
}

impl LockGuard {
    pub(crate) fn start(opts: ClientBuilder, key: &str, token: Token, schedule: Schedule) -> Result<LockGuard> {
        let loss = LossSignal::default();
        let (control, inbox) = mpsc::channel();
        let worker = Renewer { client: Client::lazy(opts), key: key.to_string(), token, schedule, loss: loss.clone() };
        let thread = thread::Builder::new()
            .name("ruvio-lock-renewal".to_string())
            .spawn(move || worker.run(inbox))
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start the renewal thread: {e}")))?;
        Ok(LockGuard { key: key.to_string(), token, loss, control: Some(control), thread: Some(thread) })
    }

    /// The fencing token of this grant.
    pub fn token(&self) -> Token {
        self.token
    }

    /// The lock's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// True once the lock is lost; stop the protected work then.
    pub fn is_lost(&self) -> bool {
        self.loss.is_lost()
    }

    /// A handle on the loss signal, for the code doing the work.
    pub fn loss_signal(&self) -> LossSignal {
        self.loss.clone()
    }

    /// Stops renewal and releases the lock: `1` released, `0` the token no longer held it (it had expired,
    /// or the release's first attempt got through before a dropped connection; see [`Client::release`]).
    pub fn release(mut self) -> Result<i64> {
        let (reply, answer) = mpsc::channel();
        let sent = self.control.take().map(|c| c.send(Control::Release(reply)).is_ok()).unwrap_or(false);
        let result = if sent {
            answer.recv().unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "the renewal thread has stopped")))
        } else {
            Err(Error::new(ErrorKind::Io, "the renewal thread has stopped"))
        };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        result
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // Closing the channel tells the thread to release and stop; it is not joined so Drop never blocks.
        self.control.take();
    }
}

type Renewer = crate::renewal::Renewer<Client, LossSignal>;

impl Loss for LossSignal {
    fn raise(&self, reason: LossReason) {
        let (lock, cv) = &*self.state;
        let mut r = lock.lock().unwrap_or_else(|p| p.into_inner());
        if r.is_none() {
            *r = Some(reason);
            cv.notify_all();
        }
    }
}

renewer_methods!(Client, LossSignal);

impl Renewer {
    fn run(mut self, inbox: mpsc::Receiver<Control>) {
        loop {
            let now = Instant::now();
            let wake = match self.schedule.wake_at(now) {
                Ok(wake) => wake,
                Err(reason) => {
                    self.loss.raise(reason);
                    break;
                }
            };
            match inbox.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(Control::Release(reply)) => {
                    let _ = reply.send(self.release());
                    return;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.release();
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.schedule.renewal_due(Instant::now()) && !self.renew() {
                break;
            }
        }
        // Lost: renew no more, but still honour an explicit release (it answers 0 if the grant is gone).
        match inbox.recv() {
            Ok(Control::Release(reply)) => {
                let _ = reply.send(self.release());
            }
            Err(_) => {
                let _ = self.release();
            }
        }
    }
}
