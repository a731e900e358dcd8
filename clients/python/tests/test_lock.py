"""The blocking lock helper: renewal over several TTLs, loss before the server-side deadline when the server is
paused, rejection, the hold cap, waiting, release semantics."""

from __future__ import annotations

import threading
import time

import pytest

import ruvio
from servers import Server


def test_renews_over_several_ttls(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    with r.lock(key, 1200) as held:
        assert held is not None
        assert isinstance(held.token, int)
        deadline = time.monotonic() + 4.0  # more than three TTLs
        while time.monotonic() < deadline:
            assert not held.is_lost()
            info = r.lock_info(key)
            assert info is not None and info.holders[0].token == held.token
            time.sleep(0.1)
        assert held.renewals >= 5  # about every TTL/3
        assert r.lease(key, 1000) is None  # still ours
    assert held.lost.is_set() and held.loss_reason == "released"
    assert r.lock_info(key) is None  # released on exit
    r.close()


def test_not_acquired_gives_none(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    t = r.lease(key, 30_000)
    with r.lock(key, 1000) as held:
        assert held is None
    assert r.release(key, t)  # type: ignore[arg-type]
    r.close()


def test_waits_for_the_lock(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    t = r.lease(key, 30_000)
    threading.Timer(0.3, lambda: r.release(key, t)).start()  # type: ignore[arg-type]
    with r.lock(key, 2000, wait_ms=20_000) as held:
        assert held is not None and held.token > t  # type: ignore[operator]
        time.sleep(1.0)
        assert not held.is_lost()
    r.close()


def test_loss_signalled_before_deadline_when_server_paused(own_server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", own_server.port, command_timeout=1.0)
    calls: list = []
    ttl_ms = 3000  # loss due 600 ms (TTL/5) before sent + ttl: room for a slow thread wake-up on a loaded machine
    sent = time.monotonic()
    lock = r.lock(key, ttl_ms, on_lost=lambda reason: calls.append((reason, time.monotonic())))
    held = lock.acquire()
    assert held is not None
    own_server.sigstop()
    try:
        assert held.wait_lost(timeout=15)
        assert held.loss_reason == "expired"
        # signalled before the server-side deadline, which is at least sent + ttl
        assert held.lost_at is not None and held.lost_at < sent + ttl_ms / 1000.0
        assert calls and calls[0][0] == "expired"
        # release after loss: False, no exception (the paused server cannot even answer)
        assert held.release() is False
    finally:
        own_server.sigcont()
    r.close()


def test_rejected_when_lock_taken_away(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    reasons: list = []
    with r.lock(key, 1500, on_lost=reasons.append) as held:
        assert held is not None
        r.delete(key)  # the lock is broken behind the holder's back
        assert held.wait_lost(timeout=5)
        assert held.loss_reason == "rejected" and reasons == ["rejected"]
    assert held.release() is False  # again after exit: still False, no exception
    r.close()


def test_max_hold_caps_the_hold(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    t0 = time.monotonic()
    with r.lock(key, 3000, max_hold_ms=2000) as held:
        assert held is not None
        assert held.wait_lost(timeout=15)
        assert held.loss_reason == "max_hold_reached"
        assert held.lost_at is not None and held.lost_at - t0 < 2.0  # signalled a margin (600 ms) before the cap
    # the server's deadline never went past the cap: the lock is gone soon after
    deadline = time.monotonic() + 5
    while r.lock_info(key) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert r.lock_info(key) is None
    r.close()


def test_no_renew(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    with r.lock(key, 500, auto_renew=False) as held:
        assert held is not None
        assert held.wait_lost(timeout=5)
        assert held.loss_reason == "expired" and held.renewals == 0
    r.close()


def test_semaphore_lock(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    with r.semaphore_lock(key, 2, 1500) as a, r.semaphore_lock(key, 2, 1500) as b:
        assert a is not None and b is not None and b.token > a.token
        with r.semaphore_lock(key, 2, 1500) as c:
            assert c is None
        time.sleep(2.5)
        assert not a.is_lost() and not b.is_lost()
        info = r.lock_info(key)
        assert info is not None and sorted(h.token for h in info.holders) == [a.token, b.token]
    assert r.lock_info(key) is None
    r.close()


def test_release_returns_true_once(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    held = r.lock(key, 5000).acquire()
    assert held is not None
    assert held.release() is True
    assert held.release() is False
    r.close()


def test_lock_entered_twice_is_an_error(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    lock = r.lock(key, 1000)
    with lock:
        with pytest.raises(ruvio.LockError):
            lock.__enter__()
    r.close()
