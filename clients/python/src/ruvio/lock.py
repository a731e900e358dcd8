"""The blocking lock helper: ``with r.lock(key, ttl_ms) as held:``.

On entry it takes the lock (``LEASE``, or ``SEMAPHORE`` for :meth:`~ruvio.Ruvio.semaphore_lock`), optionally
waiting in the server's queue (``wait_ms``). ``held`` is a :class:`HeldLock`, or ``None`` when the lock was not
acquired. While the block runs, a background thread renews the grant about every TTL/3 on its own connection.
Loss is signalled from the client's monotonic clock a safety margin (default TTL/5) *before* the server-side
deadline whenever no renewal has succeeded in time, or as soon as ``RENEW`` answers 0: ``held.lost`` (a
``threading.Event``) is set, ``held.loss_reason`` says why, and the optional ``on_lost(reason)`` callback runs
(in the renewal thread). ``max_hold_ms`` caps the total hold time. On exit the lock is released; releasing a lost
lock returns False and does not raise.

A thread cannot be interrupted: the work should check ``held.lost`` (or ``held.is_lost()``) between steps, and
fence its writes with ``held.token`` (``IFGT``, or a ``WHERE fence < token`` in your database).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional, Type

from . import _commands as c
from ._commands import KeyT
from ._schedule import EXPIRED, MAX_HOLD, REJECTED, RELEASED, Schedule
from .connection import Connection
from .exceptions import ConnectionError, LockError, ResponseError, RuvioError, TimeoutError

if TYPE_CHECKING:  # pragma: no cover
    from .client import Ruvio

__all__ = ["Lock", "HeldLock", "EXPIRED", "REJECTED", "MAX_HOLD", "RELEASED"]


class HeldLock:
    """A lock you hold: its ``key`` and fencing ``token``, the ``lost`` event, and :meth:`release`."""

    def __init__(
        self,
        client: "Ruvio",
        key: KeyT,
        token: int,
        ttl_ms: int,
        schedule: Schedule,
        on_lost: Optional[Callable[[str], Any]],
    ) -> None:
        self.client = client
        self.key = key
        self.token = token
        self.ttl_ms = ttl_ms
        self.lost = threading.Event()
        """Set when the lock is lost (or released)."""
        self.loss_reason: Optional[str] = None
        self.lost_at: Optional[float] = None
        """When loss was signalled, on the monotonic clock (``time.monotonic()``)."""
        """``"expired"``, ``"rejected"``, ``"max_hold_reached"`` or ``"released"``; None while held."""
        self._schedule = schedule
        self._on_lost = on_lost
        self._state = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._conn: Optional[Connection] = None
        self.renewals = 0
        """How many renewals succeeded."""

    # -- loss ---------------------------------------------------------------------------------------------------
    def is_lost(self) -> bool:
        """True once the lock is lost: stop working on what it protects. Also checks the local deadline, so it
        is exact even between two wake-ups of the renewal thread."""
        if not self.lost.is_set() and time.monotonic() >= self._schedule.loss_at():
            self._signal(self._schedule.loss_reason())
        return self.lost.is_set()

    def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the lock is lost (True) or ``timeout`` seconds pass (False)."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self.is_lost():
            now = time.monotonic()
            if end is not None and now >= end:
                return False
            step = self._schedule.loss_at() - now
            if end is not None:
                step = min(step, end - now)
            self.lost.wait(max(0.001, step))
        return True

    def remaining(self) -> float:
        """Seconds until the local loss deadline (the server's deadline minus the safety margin); <= 0 when lost."""
        return 0.0 if self.lost.is_set() else self._schedule.loss_at() - time.monotonic()

    def _signal(self, reason: str) -> None:
        with self._state:
            if self.lost.is_set():
                return
            self.loss_reason = reason
            self.lost_at = time.monotonic()
            self.lost.set()
        self._stop.set()
        if self._on_lost is not None and reason != RELEASED:
            try:
                self._on_lost(reason)
            except Exception:  # a callback's error must not kill the renewal thread silently
                import logging

                logging.getLogger("ruvio.lock").exception("on_lost callback raised")

    # -- renewal --------------------------------------------------------------------------------------------------
    def _start(self) -> None:
        self._thread = threading.Thread(target=self._renew_loop, name=f"ruvio-lock-renew:{self.key!r}", daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        s = self._schedule
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= s.loss_at():
                    self._signal(s.loss_reason())
                    return
                nxt = s.next_renewal()
                if s.needs_confirmation(now):
                    nxt = now
                if nxt is not None and now >= nxt:
                    self._renew_once(now)
                    continue
                wake = s.loss_at() if nxt is None else min(nxt, s.loss_at())
                self._stop.wait(max(0.0, wake - time.monotonic()))
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.disconnect()

    def _renew_once(self, now: float) -> None:
        s = self._schedule
        ttl_ms = s.renewal_ttl_ms(now)
        # The reply must come before the loss deadline; later it would be too late to matter.
        timeout = max(0.01, s.loss_at() - now)
        sent = time.monotonic()
        try:
            if self._conn is None or not self._conn.connected:
                # Connecting must not outlast the loss deadline either (a paused server accepts TCP but
                # never answers the handshake).
                pool = self.client.connection_pool
                ct = pool.options.connect_timeout
                self._conn = Connection(replace(pool.options, connect_timeout=timeout if ct is None else min(ct, timeout)),
                                        resolver=pool.resolver, require_primary=pool.require_primary)
            conn = self._conn
            conn.connect()
            reply = conn.call(c.renew(self.key, self.token, ttl_ms).args, timeout=timeout)
        except (ConnectionError, TimeoutError, OSError):
            if self._conn is not None:
                self._conn.disconnect()
            s.failed(time.monotonic())
            return
        if isinstance(reply, ResponseError):
            # READONLY after a failover, or another refusal: treat as a failed attempt; the deadline decides.
            if self._conn is not None:
                self._conn.disconnect()
            s.failed(time.monotonic())
            return
        if reply == 1:
            with self._state:
                if not self.lost.is_set():
                    s.renewed(sent, ttl_ms)
                    self.renewals += 1
        else:
            self._signal(REJECTED)

    # -- release --------------------------------------------------------------------------------------------------
    def stop_renewing(self) -> None:
        """Stops the background renewal (the lock is kept until its TTL ends or :meth:`release`)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=max(1.0, (self.client.options.command_timeout or 10.0)))

    def release(self) -> bool:
        """Stops renewing and sends ``RELEASE``. True when released; False when the lock was already lost or
        released (never raises for a lost lock)."""
        was_lost = self.lost.is_set()
        self.stop_renewing()
        if was_lost and self.loss_reason == RELEASED:
            return False
        try:
            ok = self.client.release(self.key, self.token)
        except RuvioError:
            if was_lost or self.lost.is_set():
                return False
            self._signal(RELEASED)
            raise
        self._signal(RELEASED)
        return ok and not was_lost

    def __repr__(self) -> str:
        state = f"lost ({self.loss_reason})" if self.lost.is_set() else "held"
        return f"<ruvio.HeldLock {self.key!r} token={self.token} {state}>"


class Lock:
    """The lock helper returned by :meth:`ruvio.Ruvio.lock` / :meth:`~ruvio.Ruvio.semaphore_lock`.

    Use it as a context manager, or call :meth:`acquire` and later ``held.release()``.
    """

    def __init__(
        self,
        client: "Ruvio",
        key: KeyT,
        ttl_ms: int,
        *,
        limit: Optional[int] = None,
        wait_ms: Optional[int] = None,
        auto_renew: bool = True,
        max_hold_ms: Optional[int] = None,
        safety_margin_ms: Optional[int] = None,
        on_lost: Optional[Callable[[str], Any]] = None,
    ) -> None:
        if ttl_ms < 1:
            raise LockError("ttl_ms must be at least 1")
        self.client = client
        self.key = key
        self.ttl_ms = ttl_ms
        self.limit = limit
        self.wait_ms = wait_ms
        self.auto_renew = auto_renew
        self.max_hold_ms = max_hold_ms
        self.safety_margin_ms = safety_margin_ms
        self.on_lost = on_lost
        self.held: Optional[HeldLock] = None

    def acquire(self) -> Optional[HeldLock]:
        """Takes the lock: a :class:`HeldLock` (renewing in the background), or None when it is taken (after
        waiting up to ``wait_ms`` when given). Not retried after an ambiguous failure (the error is raised)."""
        ttl = self.ttl_ms if self.max_hold_ms is None else max(1, min(self.ttl_ms, self.max_hold_ms))
        sent = time.monotonic()
        if self.limit is None:
            token = self.client.lease(self.key, ttl, self.wait_ms)
        else:
            token = self.client.semaphore(self.key, self.limit, ttl, self.wait_ms)
        if token is None:
            return None
        schedule = Schedule(ttl, sent, auto_renew=self.auto_renew, max_hold_ms=self.max_hold_ms,
                            safety_margin_ms=self.safety_margin_ms, waited=bool(self.wait_ms))
        held = HeldLock(self.client, self.key, token, self.ttl_ms, schedule, self.on_lost)
        held._start()
        return held

    def __enter__(self) -> Optional[HeldLock]:
        if self.held is not None:
            raise LockError("this Lock is already entered; create one per `with`")
        self.held = self.acquire()
        return self.held

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        held, self.held = self.held, None
        if held is None:
            return
        try:
            held.release()
        except RuvioError:
            if exc is None:
                raise
