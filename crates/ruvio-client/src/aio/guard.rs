//! The async lock guard: a tokio task renews the grant and publishes loss on a watch channel.

use std::future::Future;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, Instant};

use super::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::lock_options::{LossReason, Schedule};
use crate::options::ClientBuilder;
use crate::renewal::{renewer_methods, Loss};
use crate::Token;

type ReleaseReply = oneshot::Sender<Result<i64>>;

/// A held lock (or semaphore slot) that renews itself, from [`Client::acquire`] or
/// [`Client::acquire_semaphore`]. It behaves as the blocking [`LockGuard`](crate::LockGuard) does (renewal at
/// about TTL/3 on its own connection, loss raised from the monotonic clock a safety margin before the
/// deadline, optional hold cap), with a tokio task in place of the thread and loss published on a
/// [`watch`] channel:
///
/// ```no_run
/// # async fn demo(db: &mut ruvio_client::aio::Client) -> Result<(), ruvio_client::Error> {
/// use std::time::Duration;
/// use ruvio_client::LockOptions;
///
/// if let Some(guard) = db.acquire("job:nightly-report", LockOptions::new(Duration::from_secs(30))).await? {
///     tokio::select! {
///         _ = async { /* the protected work, fenced with guard.token() */ } => {}
///         reason = guard.lost() => eprintln!("lock lost: {reason:?}"),
///     }
///     guard.release().await?;
/// }
/// # Ok(()) }
/// ```
///
/// **Drop** cannot await: dropping the guard without [`LockGuard::release`] tells the task to stop renewing and
/// send one best-effort `RELEASE` (errors ignored). The task needs the runtime to keep running for that; if
/// the runtime shuts down first, the lock frees itself when its TTL ends.
#[derive(Debug)]
pub struct LockGuard {
    key: String,
    token: Token,
    loss: watch::Receiver<Option<LossReason>>,
    control: Option<mpsc::UnboundedSender<ReleaseReply>>,
    task: Option<JoinHandle<()>>,
}

impl LockGuard {
    /// Spawns the renewal task; never fails (a `Result` as the blocking guard's thread start returns).
    pub(crate) fn start(opts: ClientBuilder, key: &str, token: Token, schedule: Schedule) -> Result<LockGuard> {
        let (loss_tx, loss) = watch::channel(None);
        let (control, inbox) = mpsc::unbounded_channel();
        let renewer = Renewer { client: Client::lazy(opts), key: key.to_string(), token, schedule, loss: loss_tx };
        let task = tokio::spawn(renewer.run(inbox));
        Ok(LockGuard { key: key.to_string(), token, loss, control: Some(control), task: Some(task) })
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
        self.loss.borrow().is_some()
    }

    /// A receiver of the loss state: `None` while held, then the reason, set once.
    pub fn loss(&self) -> watch::Receiver<Option<LossReason>> {
        self.loss.clone()
    }

    /// Completes when the lock is lost, with the reason. It does not borrow the guard, so it can race the work
    /// in `tokio::select!` while the guard stays usable.
    pub fn lost(&self) -> impl Future<Output = LossReason> + Send + 'static {
        let mut rx = self.loss.clone();
        async move {
            match rx.wait_for(|r| r.is_some()).await {
                Ok(r) => r.expect("waited for Some"),
                // The task is gone, so nothing renews any more.
                Err(_) => LossReason::Expired,
            }
        }
    }

    /// Stops renewal and releases the lock: `1` released, `0` the token no longer held it.
    pub async fn release(mut self) -> Result<i64> {
        let stopped = || Error::new(ErrorKind::Io, "the renewal task has stopped");
        let (reply, answer) = oneshot::channel();
        let sent = self.control.take().is_some_and(|c| c.send(reply).is_ok());
        let result = if sent { answer.await.unwrap_or_else(|_| Err(stopped())) } else { Err(stopped()) };
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        result
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // Closing the channel tells the task to release and stop.
        self.control.take();
    }
}

type Renewer = crate::renewal::Renewer<Client, watch::Sender<Option<LossReason>>>;

impl Loss for watch::Sender<Option<LossReason>> {
    fn raise(&self, reason: LossReason) {
        self.send_if_modified(|r| {
            if r.is_some() {
                return false;
            }
            *r = Some(reason);
            true
        });
    }
}

renewer_methods!(Client, watch::Sender<Option<LossReason>>, async await);

impl Renewer {
    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<ReleaseReply>) {
        loop {
            let wake = match self.schedule.wake_at(Instant::now().into_std()) {
                Ok(wake) => Instant::from_std(wake),
                Err(reason) => {
                    self.loss.raise(reason);
                    break;
                }
            };
            tokio::select! {
                msg = inbox.recv() => {
                    let result = self.release().await;
                    if let Some(reply) = msg {
                        let _ = reply.send(result);
                    }
                    return;
                }
                _ = sleep_until(wake) => {}
            }
            if self.schedule.renewal_due(std::time::Instant::now()) && !self.renew().await {
                break;
            }
        }
        // Lost: renew no more, but still honour an explicit release (it answers 0 if the grant is gone).
        let msg = inbox.recv().await;
        let result = self.release().await;
        if let Some(reply) = msg {
            let _ = reply.send(result);
        }
    }
}
