//! What both lock guards' background workers share: the worker's state and its renew and release steps, written
//! once (see [`crate::methods`] for how one text serves the blocking and the async client). Each guard keeps
//! only its own waiting: a thread on a channel, or a tokio task in `select!`.

use crate::lock_options::{LossReason, Schedule};
use crate::Token;

/// Where a guard publishes that its lock is lost: the first reason sticks, later ones (a release after an
/// expiry) do not rewrite history.
pub(crate) trait Loss {
    fn raise(&self, reason: LossReason);
}

/// The background worker of a guard: renews `token`'s grant of `key` on its own client, by `schedule`, and
/// raises `loss` when the grant is lost or released.
pub(crate) struct Renewer<C, L> {
    pub client: C,
    pub key: String,
    pub token: Token,
    pub schedule: Schedule,
    pub loss: L,
}

/// Writes `renew` and `release` for `Renewer<$client, $loss>`: `renewer_methods!(Client, LossSignal)` for the
/// blocking guard, `renewer_methods!(Client, watch::Sender<..>, async await)` for the async one.
macro_rules! renewer_methods {
    ($client:ty, $loss:ty $(, $async:ident $aw:ident)?) => {
        impl $crate::renewal::Renewer<$client, $loss> {
            /// One renewal attempt, never running past the loss deadline. False once the lock is known lost.
            $($async)? fn renew(&mut self) -> bool {
                let sent = std::time::Instant::now();
                let ttl_ms = self.schedule.renewal_ttl_ms(sent);
                self.client.hard_deadline = Some(self.schedule.loss_at().into());
                let answer = self.client.renew(&self.key, self.token, ttl_ms)$(.$aw)?;
                self.client.hard_deadline = None;
                match answer {
                    Ok(1) => {
                        self.schedule.renewed(sent, ttl_ms);
                        true
                    }
                    Ok(_) => {
                        self.loss.raise($crate::lock_options::LossReason::Rejected);
                        false
                    }
                    Err(_) => {
                        self.schedule.failed(std::time::Instant::now());
                        true
                    }
                }
            }

            $($async)? fn release(&mut self) -> $crate::error::Result<i64> {
                // Raised first: from the moment RELEASE may have reached the server, the lock cannot be relied on.
                self.loss.raise($crate::lock_options::LossReason::Released);
                self.client.release(&self.key, self.token)$(.$aw)?
            }
        }
    };
}

pub(crate) use renewer_methods;
