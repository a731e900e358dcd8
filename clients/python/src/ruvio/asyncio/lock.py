"""The asyncio lock helper: ``async with r.lock(key, ttl_ms) as held:``.

As the blocking helper (:mod:`ruvio.lock`): acquire (optionally waiting), renew about every TTL/3 in a background
task, signal loss from the monotonic clock a safety margin before the server-side deadline when no renewal has
succeeded (or as soon as ``RENEW`` answers 0), cap the total hold time, release on exit (a lost lock's release
returns False and does not raise).

Loss is exposed as ``held.lost`` (an ``asyncio.Event``; ``await held.wait_lost()``), ``held.loss_reason`` and
the optional ``on_lost(reason)`` callback (a plain function, or one returning an awaitable, which is scheduled).
With ``cancel_on_loss=True`` (the default) the task that entered the ``async with`` is cancelled on loss, and the
block then ends with :class:`~ruvio.LockLostError` instead of ``CancelledError`` (a cancellation that came from
elsewhere as well still propagates as ``CancelledError``).

The renewal task runs on the client's event loop: code that blocks the loop (CPU-bound work without ``await``)
also stops renewal and the loss signal, as it stops everything else on that loop.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional, Set, Type

from .. import _commands as c
from .._commands import KeyT
from .._schedule import EXPIRED, MAX_HOLD, REJECTED, RELEASED, Schedule
from ..exceptions import ConnectionError, LockError, LockLostError, ResponseError, RuvioError, TimeoutError
from .connection import Connection

if TYPE_CHECKING:  # pragma: no cover
    from .client import Ruvio

__all__ = ["Lock", "HeldLock", "EXPIRED", "REJECTED", "MAX_HOLD", "RELEASED"]

_background: Set["asyncio.Task[Any]"] = set()


class HeldLock:
    """A lock you hold (asyncio): ``key``, ``token``, ``lost``, :meth:`wait_lost`, :meth:`release`."""

    def __init__(
        self,
        client: "Ruvio",
        key: KeyT,
        token: int,
        ttl_ms: int,
        schedule: Schedule,
        on_lost: Optional[Callable[[str], Any]],
        owner: Optional["asyncio.Task[Any]"],
    ) -> None:
        self.client = client
        self.key = key
        self.token = token
        self.ttl_ms = ttl_ms
        self.lost = asyncio.Event()
        self.loss_reason: Optional[str] = None
        self.lost_at: Optional[float] = None
        """When loss was signalled, on the monotonic clock (``time.monotonic()``)."""
        self.renewals = 0
        self._schedule = schedule
        self._on_lost = on_lost
        self._owner = owner
        self.cancelled_owner = False
        self._stop = asyncio.Event()
        self._task: Optional["asyncio.Task[None]"] = None
        self._conn: Optional[Connection] = None

    def is_lost(self) -> bool:
        """True once the lock is lost (also checks the local deadline directly)."""
        if not self.lost.is_set() and time.monotonic() >= self._schedule.loss_at():
            self._signal(self._schedule.loss_reason())
        return self.lost.is_set()

    async def wait_lost(self) -> str:
        """Waits until the lock is lost; returns the reason."""
        await self.lost.wait()
        return self.loss_reason or EXPIRED

    def remaining(self) -> float:
        """Seconds until the local loss deadline; <= 0 once lost."""
        return 0.0 if self.lost.is_set() else self._schedule.loss_at() - time.monotonic()

    def _signal(self, reason: str) -> None:
        if self.lost.is_set():
            return
        self.loss_reason = reason
        self.lost_at = time.monotonic()
        self.lost.set()
        self._stop.set()
        if reason == RELEASED:
            return
        if self._owner is not None and not self._owner.done():
            self.cancelled_owner = True
            self._owner.cancel()
        if self._on_lost is not None:
            try:
                r = self._on_lost(reason)
                if inspect.isawaitable(r):
                    t = asyncio.ensure_future(r)
                    _background.add(t)
                    t.add_done_callback(_background.discard)
            except Exception:
                import logging

                logging.getLogger("ruvio.lock").exception("on_lost callback raised")

    def _start(self) -> None:
        self._task = asyncio.ensure_future(self._renew_loop())

    async def _renew_loop(self) -> None:
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
                    await self._renew_once(now)
                    continue
                wake = s.loss_at() if nxt is None else min(nxt, s.loss_at())
                try:
                    await asyncio.wait_for(self._stop.wait(), timeout=max(0.0, wake - time.monotonic()))
                except asyncio.TimeoutError:
                    pass
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.disconnect()

    async def _renew_once(self, now: float) -> None:
        s = self._schedule
        ttl_ms = s.renewal_ttl_ms(now)
        timeout = max(0.01, s.loss_at() - now)
        sent = time.monotonic()
        try:
            if self._conn is None:
                self._conn = self.client.connection_pool.make_connection()
            conn = self._conn
            await asyncio.wait_for(conn.connect(), timeout=timeout)
            reply = await conn.call(c.renew(self.key, self.token, ttl_ms).args, timeout=max(0.01, s.loss_at() - time.monotonic()))
        except (ConnectionError, TimeoutError, OSError, asyncio.TimeoutError):
            if self._conn is not None:
                self._conn.disconnect()
            s.failed(time.monotonic())
            return
        if isinstance(reply, ResponseError):
            if self._conn is not None:
                self._conn.disconnect()
            s.failed(time.monotonic())
            return
        if reply == 1:
            if not self.lost.is_set():
                s.renewed(sent, ttl_ms)
                self.renewals += 1
        else:
            self._signal(REJECTED)

    async def stop_renewing(self) -> None:
        """Stops the background renewal."""
        self._owner = None
        self._stop.set()
        t = self._task
        if t is not None and not t.done() and t is not asyncio.current_task():
            t.cancel()
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass

    async def release(self) -> bool:
        """Stops renewing and sends ``RELEASE``: True when released, False when already lost or released."""
        was_lost = self.lost.is_set()
        await self.stop_renewing()
        if was_lost and self.loss_reason == RELEASED:
            return False
        try:
            ok = await self.client.release(self.key, self.token)
        except RuvioError:
            if was_lost or self.lost.is_set():
                return False
            self._signal(RELEASED)
            raise
        self._signal(RELEASED)
        return ok and not was_lost

    def __repr__(self) -> str:
        state = f"lost ({self.loss_reason})" if self.lost.is_set() else "held"
        return f"<ruvio.asyncio.HeldLock {self.key!r} token={self.token} {state}>"


class Lock:
    """Returned by :meth:`ruvio.asyncio.Ruvio.lock`; use with ``async with`` or :meth:`acquire`."""

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
        cancel_on_loss: bool = True,
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
        self.cancel_on_loss = cancel_on_loss
        self.held: Optional[HeldLock] = None

    async def acquire(self, cancel_task: Optional["asyncio.Task[Any]"] = None) -> Optional[HeldLock]:
        """Takes the lock: a :class:`HeldLock` or None. ``cancel_task`` is cancelled on loss (``async with``
        passes the current task when ``cancel_on_loss`` is on)."""
        ttl = self.ttl_ms if self.max_hold_ms is None else max(1, min(self.ttl_ms, self.max_hold_ms))
        sent = time.monotonic()
        if self.limit is None:
            token = await self.client.lease(self.key, ttl, self.wait_ms)
        else:
            token = await self.client.semaphore(self.key, self.limit, ttl, self.wait_ms)
        if token is None:
            return None
        schedule = Schedule(ttl, sent, auto_renew=self.auto_renew, max_hold_ms=self.max_hold_ms,
                            safety_margin_ms=self.safety_margin_ms, waited=bool(self.wait_ms))
        held = HeldLock(self.client, self.key, token, self.ttl_ms, schedule, self.on_lost, cancel_task)
        held._start()
        return held

    async def __aenter__(self) -> Optional[HeldLock]:
        if self.held is not None:
            raise LockError("this Lock is already entered; create one per `async with`")
        owner = asyncio.current_task() if self.cancel_on_loss else None
        self.held = await self.acquire(owner)
        return self.held

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        held, self.held = self.held, None
        if held is None:
            return
        held._owner = None  # no cancellation from here on
        cancelled_by_us = held.cancelled_owner
        if cancelled_by_us and exc is None:
            # The block finished just as the lock was lost: the cancellation we asked for is still pending.
            # Take it here, so that it does not hit the release below, and report the loss.
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError as pending:
                exc = pending
        try:
            await held.release()
        except RuvioError:
            if exc is None:
                raise
        if cancelled_by_us and isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if sys.version_info >= (3, 11) and task is not None:
                if task.uncancel() > 0:
                    return  # someone else cancelled the task as well: let CancelledError through
            raise LockLostError(
                f"lock {held.key!r} lost ({held.loss_reason}); the block was cancelled", held.loss_reason
            ) from exc
