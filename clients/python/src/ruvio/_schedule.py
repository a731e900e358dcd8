"""When a lock helper renews and when it declares the lock lost, on the client's monotonic clock.

A grant's server-side deadline is at least ``sent + ttl``, where ``sent`` is when the request left (the server
cannot have started the TTL before receiving it), so ``sent + ttl`` is a safe local estimate; loss is declared a
safety margin (default TTL/5) before it. Renewals go out every TTL/3 and never extend past the hold cap.
"""

from __future__ import annotations

from typing import Optional

# Reasons a held lock reports when it is lost.
EXPIRED = "expired"            # no renewal succeeded in time: the grant runs out within the safety margin
REJECTED = "rejected"          # RENEW answered 0: the grant had already ended
MAX_HOLD = "max_hold_reached"  # the cap on the total hold time was reached
RELEASED = "released"          # released by its owner


class Schedule:
    def __init__(
        self,
        ttl_ms: int,
        sent: float,
        *,
        auto_renew: bool = True,
        max_hold_ms: Optional[int] = None,
        safety_margin_ms: Optional[int] = None,
        waited: bool = False,
    ) -> None:
        self.ttl = max(ttl_ms, 1) / 1000.0
        self.auto_renew = auto_renew
        self.margin = min(self.ttl, (safety_margin_ms / 1000.0) if safety_margin_ms is not None else self.ttl / 5)
        self.cap: Optional[float] = None if max_hold_ms is None else sent + max_hold_ms / 1000.0
        self.waited = waited
        self.last_granted = sent
        self.retry_at: Optional[float] = None
        self._set_deadline(sent + self.ttl)

    def _set_deadline(self, uncapped: float) -> None:
        if self.cap is not None and self.cap <= uncapped:
            self.deadline = self.cap
            self.at_cap = True
        else:
            self.deadline = uncapped
            self.at_cap = False

    def loss_at(self) -> float:
        """When to signal loss unless a renewal succeeds first."""
        return self.deadline - self.margin

    def loss_reason(self) -> str:
        return MAX_HOLD if self.at_cap else EXPIRED

    def needs_confirmation(self, now: float) -> bool:
        """A grant that waited in the queue may have come long after the request left: renew at once to learn a
        fresh deadline instead of working with a pessimistic one."""
        return self.waited and now >= self.last_granted + self.ttl / 3

    def next_renewal(self) -> Optional[float]:
        if not self.auto_renew or self.at_cap:
            return None
        at = self.retry_at if self.retry_at is not None else self.last_granted + self.ttl / 3
        return min(at, self.loss_at())

    def renewal_ttl_ms(self, now: float) -> int:
        ttl = self.ttl if self.cap is None else min(self.ttl, self.cap - now)
        return max(1, int(ttl * 1000))

    def renewed(self, sent: float, ttl_ms: int) -> None:
        self.waited = False
        self.last_granted = sent
        self.retry_at = None
        self._set_deadline(sent + ttl_ms / 1000.0)

    def failed(self, now: float) -> None:
        """A renewal attempt broke (timeout, connection): try again soon."""
        self.retry_at = now + min(self.ttl / 10, 0.25)
