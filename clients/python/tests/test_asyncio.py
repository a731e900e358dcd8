"""The asyncio client: the same surface as the blocking one, its pipeline, pub/sub, timeouts, reconnects and the
async lock helper (loss cancels the task)."""

from __future__ import annotations

import asyncio
import inspect
import time

import pytest

import ruvio
import ruvio.asyncio
from ruvio._sync_commands import SyncCommands
from ruvio.asyncio._commands import AsyncCommands
from servers import Server


def test_same_surface_as_the_blocking_client() -> None:
    sync = {n: inspect.signature(f) for n, f in vars(SyncCommands).items() if not n.startswith("_")}
    asyn = {n: inspect.signature(f) for n, f in vars(AsyncCommands).items() if not n.startswith("_")}
    assert sync.keys() == asyn.keys()
    for name, sig in sync.items():
        method = getattr(AsyncCommands, name)
        if inspect.isasyncgenfunction(method):
            # An iterating method (scan_locks) is an async generator there, as redis-py's scan_iter: `async for`
            # over an AsyncIterator[T] where the blocking client returns an Iterator[T]; otherwise the same.
            assert str(sig) == str(asyn[name]).replace("AsyncIterator[", "Iterator["), name
        else:
            assert str(sig) == str(asyn[name]), name
            assert inspect.iscoroutinefunction(method), name
    for name in ("pipeline", "transaction", "pubsub", "lock", "semaphore_lock", "from_url"):
        assert hasattr(ruvio.Ruvio, name) and hasattr(ruvio.asyncio.Ruvio, name)


@pytest.mark.asyncio
@pytest.mark.parametrize("protocol", [3, 2])
async def test_commands(server: Server, key: str, protocol: int) -> None:
    async with ruvio.asyncio.Ruvio("127.0.0.1", server.port, protocol=protocol) as r:
        assert await r.ping()
        t1 = await r.lease(key, 30_000)
        assert isinstance(t1, int)
        assert await r.lease(key, 30_000) is None
        assert await r.renew(key, t1, 30_000) is True
        info = await r.lock_info(key)
        assert info is not None and info.kind == "lease" and info.holders[0].token == t1
        assert await r.release(key, t1) is True
        assert await r.release(key, t1) is False
        s = await r.semaphore(key + ":s", 2, 30_000)
        assert s is not None and s > t1
        assert await r.ifgt(key + ":f", s, "v") is True
        assert await r.ifgt(key + ":f", t1, "old") is False
        assert await r.get(key + ":f") == b"v"
        assert await r.execute_command("SET", key, "x") == "OK"
        with pytest.raises(ruvio.ResponseError) as e:
            await r.incr(key)
        assert e.value.code == "ERR"
        # many tasks share one client
        n = await asyncio.gather(*(r.incr(key + ":n") for _ in range(100)))
        assert sorted(n) == list(range(1, 101))


@pytest.mark.asyncio
async def test_lease_wait(server: Server, key: str) -> None:
    r = ruvio.asyncio.Ruvio("127.0.0.1", server.port)
    holder = await r.lease(key, 30_000)
    waiter = asyncio.ensure_future(r.lease(key, 30_000, wait_ms=20_000))
    for _ in range(500):
        info = await r.lock_info(key)
        if info is not None and info.waiters == 1:
            break
        await asyncio.sleep(0.02)
    assert await r.release(key, holder)  # type: ignore[arg-type]
    got = await asyncio.wait_for(waiter, 20)
    assert got is not None and got > holder  # type: ignore[operator]
    await r.aclose()


@pytest.mark.asyncio
async def test_pipeline_transaction_watch(server: Server, key: str) -> None:
    r = ruvio.asyncio.Ruvio("127.0.0.1", server.port)
    pipe = r.pipeline(transaction=False)
    pipe.set(key, 1).incr(key).get(key)
    assert await pipe.execute() == [True, 2, b"2"]
    async with r.pipeline() as tx:
        await tx.watch(key)
        value = int(await tx.immediate.get(key))
        await r.incr(key)
        tx.set(key, value + 10)
        with pytest.raises(ruvio.WatchError):
            await tx.execute()

    async def add(p: ruvio.asyncio.Pipeline) -> None:
        v = int(await p.immediate.get(key))
        p.set(key, v + 10)

    assert await r.transaction(add, key) == [True]
    assert await r.get(key) == b"13"
    await r.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("protocol", [3, 2])
async def test_pubsub(server: Server, key: str, protocol: int) -> None:
    r = ruvio.asyncio.Ruvio("127.0.0.1", server.port, protocol=protocol)
    ps = r.pubsub(ignore_subscribe_messages=True)
    await ps.subscribe(key)
    await ps.psubscribe(key + "*")
    assert await ps.get_message(timeout=0.2) is None
    assert await r.publish(key, "hi") == 2
    m1 = await ps.get_message(timeout=5)
    m2 = await ps.get_message(timeout=5)
    assert m1 == {"type": "message", "pattern": None, "channel": key.encode(), "data": b"hi"}
    assert m2 is not None and m2["type"] == "pmessage" and m2["pattern"] == (key + "*").encode()
    await ps.aclose()
    await r.aclose()


@pytest.mark.asyncio
async def test_timeout_and_reconnect(own_server: Server, key: str) -> None:
    r = ruvio.asyncio.Ruvio("127.0.0.1", own_server.port, command_timeout=1.0, connect_timeout=1.0)
    assert await r.ping()
    own_server.sigstop()
    try:
        t0 = time.monotonic()
        with pytest.raises(ruvio.TimeoutError) as e:
            await r.get(key)
        assert e.value.sent and time.monotonic() - t0 < 8
    finally:
        own_server.sigcont()
    assert await r.ping()
    token = await r.lease(key, 60_000)
    own_server.restart()
    assert await r.ping()  # reconnected
    assert await r.release(key, token) is True  # type: ignore[arg-type]
    await r.aclose()


@pytest.mark.asyncio
async def test_lock_renews_and_releases(server: Server, key: str) -> None:
    r = ruvio.asyncio.Ruvio("127.0.0.1", server.port)
    async with r.lock(key, 1200) as held:
        assert held is not None
        await asyncio.sleep(4.0)  # more than three TTLs
        assert not held.is_lost() and held.renewals >= 5  # about every TTL/3
        info = await r.lock_info(key)
        assert info is not None and info.holders[0].token == held.token
    assert await r.lock_info(key) is None
    async with r.lock(key, 1000) as a:
        async with r.lock(key, 1000) as b:
            assert a is not None and b is None
    await r.aclose()


@pytest.mark.asyncio
async def test_lock_loss_cancels_the_work(own_server: Server, key: str) -> None:
    r = ruvio.asyncio.Ruvio("127.0.0.1", own_server.port, command_timeout=1.0)
    reasons: list = []
    ttl_ms = 1500
    sent = time.monotonic()
    steps = 0
    try:
        with pytest.raises(ruvio.LockLostError) as e:
            async with r.lock(key, ttl_ms, on_lost=reasons.append) as held:
                assert held is not None
                own_server.sigstop()
                for _ in range(1000):  # "work" that would take 100 s
                    await asyncio.sleep(0.1)
                    steps += 1
        lost_at = time.monotonic()
        assert e.value.reason == "expired" and reasons == ["expired"]
        assert lost_at - sent < 10 and steps < 100
        assert held.loss_reason == "expired"
    finally:
        own_server.sigcont()
    await r.aclose()


@pytest.mark.asyncio
async def test_lock_loss_without_cancel(server: Server, key: str) -> None:
    r = ruvio.asyncio.Ruvio("127.0.0.1", server.port)
    sent = time.monotonic()
    async with r.lock(key, 1500, cancel_on_loss=False) as held:
        assert held is not None
        await r.delete(key)
        reason = await asyncio.wait_for(held.wait_lost(), 5)
        assert reason == "rejected"
    assert await held.release() is False
    async with r.lock(key, 1000, max_hold_ms=700, cancel_on_loss=False) as held2:
        assert held2 is not None
        assert await asyncio.wait_for(held2.wait_lost(), 5) == "max_hold_reached"
    await r.aclose()
    assert time.monotonic() - sent < 30


@pytest.mark.asyncio
async def test_every_method_answers_like_the_blocking_client(own_server: Server) -> None:
    """The same calls through both clients (each on its own keys) give the same answers, tokens aside."""
    calls = [
        ("ping", ()), ("echo", ("hi",)), ("set", ("{k}", "v")), ("get", ("{k}",)), ("set", ("{k}", "w", None, None, True)),
        ("set", ("{k}", "x", None, 50_000, False, True)), ("set", ("{k}", "y", None, None, False, False, False, True)),
        ("exists", ("{k}", "{k}:none")), ("expire", ("{k}", 100)), ("ttl", ("{k}",)), ("pexpire", ("{k}", 100_000)),
        ("incr", ("{k}:n",)), ("incr", ("{k}:n", 5)), ("decr", ("{k}:n",)), ("decr", ("{k}:n", 2)),
        ("mset", ({"{k}:a": "1", "{k}:b": "2"},)), ("mget", ("{k}:a", "{k}:b", "{k}:c")), ("keys", ("{k}:a",)),
        ("type", ("{k}",)), ("publish", ("{k}", "m")), ("delete", ("{k}:a", "{k}:none")), ("pttl", ("{k}:b",)),
        ("client_getname", ()), ("execute_command", ("STRLEN", "{k}")), ("lease", ("{k}:l", 30_000)),
        ("lease", ("{k}:l", 30_000, 10)), ("semaphore", ("{k}:s", 1, 30_000)), ("semaphore", ("{k}:s", 1, 30_000, 10)),
        ("renew", ("{k}:l", 1, 1000)), ("release", ("{k}:l", 1)), ("ifgt", ("{k}:f", 5, "v")),
        ("ifgt", ("{k}:f", 4, "v", 1000)), ("lock_info", ("{k}:none",)),
    ]
    sync = ruvio.Ruvio("127.0.0.1", own_server.port)
    asyn = ruvio.asyncio.Ruvio("127.0.0.1", own_server.port)
    for name, args in calls:
        a = [x.replace("{k}", "sync") if isinstance(x, str) else
             ({k.replace("{k}", "sync"): v for k, v in x.items()} if isinstance(x, dict) else x) for x in args]
        b = [x.replace("{k}", "async") if isinstance(x, str) else
             ({k.replace("{k}", "async"): v for k, v in x.items()} if isinstance(x, dict) else x) for x in args]
        got_sync = getattr(sync, name)(*a)
        got_async = await getattr(asyn, name)(*b)
        if name == "keys":
            got_sync, got_async = [k.replace(b"sync", b"") for k in got_sync], [k.replace(b"async", b"") for k in got_async]
        if name in ("lease", "semaphore") and got_sync is not None:
            assert isinstance(got_async, int) and got_async > 0, name
            continue
        assert got_sync == got_async, (name, got_sync, got_async)
    assert (await asyn.lock_info("async:l")).kind == "lease"  # type: ignore[union-attr]
    assert isinstance(await asyn.client_id(), int) and (await asyn.hello())["server"] == "ruvio"
    assert "lock_grants" in await asyn.info("locks")
    assert await asyn.dbsize() > 0 and await asyn.flushdb() is True and await asyn.dbsize() == 0
    assert sync.flushdb() is True
    sync.close()
    await asyn.aclose()
