"""Every public command method of the blocking client, in RESP3 (default) and RESP2, against a real ruvio."""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

import ruvio
from servers import Server


@pytest.fixture(params=[3, 2], ids=["resp3", "resp2"])
def r(request: pytest.FixtureRequest, server: Server) -> Iterator[ruvio.Ruvio]:
    c = ruvio.Ruvio("127.0.0.1", server.port, protocol=request.param)
    yield c
    c.close()


def test_negotiated_protocol(server: Server) -> None:
    for proto in (2, 3):
        c = ruvio.Ruvio("127.0.0.1", server.port, protocol=proto)
        conn = c.connection_pool.get_connection()
        assert conn.protocol == proto
        c.connection_pool.release(conn)
        hello = c.execute_command("HELLO")
        if proto == 3:
            assert hello[b"proto"] == 3  # a map
        else:
            assert hello[hello.index(b"proto") + 1] == 2  # a flat array
        c.close()


def test_lease_release_renew(r: ruvio.Ruvio, key: str) -> None:
    t1 = r.lease(key, 30_000)
    assert isinstance(t1, int) and t1 > 0
    assert r.lease(key, 30_000) is None
    assert r.renew(key, t1, 30_000) is True
    assert r.renew(key, t1 + 1, 30_000) is False
    assert r.type(key) == "lease"
    assert 0 < r.pttl(key) <= 30_000
    assert r.release(key, t1) is True
    assert r.release(key, t1) is False
    assert r.renew(key, t1, 30_000) is False  # never revived
    t2 = r.lease(key, 30_000)
    assert t2 is not None and t2 > t1  # tokens only grow
    assert r.release(key, t2)


def test_lease_expires(r: ruvio.Ruvio, key: str) -> None:
    t1 = r.lease(key, 50)
    assert t1 is not None
    deadline = time.monotonic() + 10
    t2 = None
    while t2 is None and time.monotonic() < deadline:
        time.sleep(0.02)
        t2 = r.lease(key, 30_000)
    assert t2 is not None and t2 > t1
    assert r.renew(key, t1, 1000) is False


def test_lease_wait(r: ruvio.Ruvio, server: Server, key: str) -> None:
    holder = r.lease(key, 30_000)
    assert holder is not None
    other = ruvio.Ruvio("127.0.0.1", server.port)
    got: list = []
    t = threading.Thread(target=lambda: got.append(other.lease(key, 30_000, wait_ms=20_000)))
    t.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        info = r.lock_info(key)
        if info is not None and info.waiters == 1:
            break
        time.sleep(0.02)
    assert r.lock_info(key).waiters == 1  # type: ignore[union-attr]
    assert r.release(key, holder)
    t.join(20)
    assert len(got) == 1 and isinstance(got[0], int) and got[0] > holder
    assert other.release(key, got[0])
    # a wait that runs out answers None
    again = r.lease(key, 30_000)
    assert other.lease(key, 30_000, wait_ms=50) is None
    assert r.release(key, again)  # type: ignore[arg-type]
    other.close()


def test_semaphore(r: ruvio.Ruvio, key: str) -> None:
    tokens = [r.semaphore(key, 3, 30_000) for _ in range(3)]
    assert all(isinstance(t, int) for t in tokens)
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    assert r.semaphore(key, 3, 30_000) is None
    assert r.semaphore(key, 3, 30_000, wait_ms=30) is None
    info = r.lock_info(key)
    assert info is not None
    assert info.kind == "semaphore" and info.limit == 3 and info.waiters == 0
    assert [h.token for h in info.holders] == tokens
    assert all(0 < h.remaining_ms <= 30_000 for h in info.holders)
    with pytest.raises(ruvio.ResponseError) as e:
        r.semaphore(key, 4, 30_000)
    assert e.value.code == "ERR" and "semaphore limit is 3, not 4" in str(e.value)
    assert r.renew(key, tokens[0], 30_000)
    for t in tokens:
        assert r.release(key, t)
    assert r.lock_info(key) is None


def test_ifgt(r: ruvio.Ruvio, key: str) -> None:
    assert r.ifgt(key, 100, "v100") is True
    assert r.get(key) == b"v100"
    assert r.ifgt(key, 99, "old") is False
    assert r.get(key) == b"v100"
    assert r.ifgt(key, 100, "again", px_ms=60_000) is True
    assert 0 < r.pttl(key) <= 60_000
    assert r.ifgt(key, 101, b"\x00\xff") is True
    assert r.get(key) == b"\x00\xff"


def test_lock_info_lease(r: ruvio.Ruvio, key: str) -> None:
    assert r.lock_info(key) is None
    t = r.lease(key, 30_000)
    info = r.lock_info(key)
    assert info == ruvio.LockInfo("lease", 1, [ruvio.LockHolder(t, info.holders[0].remaining_ms)], 0)  # type: ignore
    assert r.release(key, t)  # type: ignore[arg-type]


def test_lock_errors_carry_codes(r: ruvio.Ruvio, key: str) -> None:
    r.set(key, "a string")
    for call in (lambda: r.lease(key, 1000), lambda: r.renew(key, 1, 1000), lambda: r.release(key, 1),
                 lambda: r.semaphore(key, 2, 1000), lambda: r.lock_info(key)):
        with pytest.raises(ruvio.ResponseError) as e:
            call()
        assert e.value.code == "WRONGTYPE"
        assert str(e.value) == "WRONGTYPE Operation against a key holding the wrong kind of value"
    with pytest.raises(ruvio.ResponseError) as e:
        r.lease(key + ":x", 0)
    assert str(e.value) == "ERR invalid ttl_ms: must be between 1 and 2592000000 (30 days)"
    with pytest.raises(ruvio.DataError):
        r.lease(key, "10")  # type: ignore[arg-type]
    t = r.lease(key + ":y", 1000)
    with pytest.raises(ruvio.ResponseError) as e:
        r.incr(key + ":y")
    assert e.value.code == "WRONGTYPE"
    r.release(key + ":y", t)  # type: ignore[arg-type]


def test_strings_and_keys(r: ruvio.Ruvio, key: str) -> None:
    assert r.ping() is True
    assert r.echo("hi") == b"hi"
    assert r.get(key) is None
    assert r.set(key, "v") is True
    assert r.set(key, "w", nx=True) is None
    assert r.set(key, "w", xx=True, px=50_000) is True
    assert r.set(key, "z", get=True) == b"w"
    assert r.set(key + ":ex", 1, ex=100) is True
    assert 0 < r.ttl(key + ":ex") <= 100
    assert r.exists(key, key + ":ex", key + ":none") == 2
    assert r.expire(key, 100) is True and r.pexpire(key, 100_000) is True
    assert r.incr(key + ":n") == 1 and r.incr(key + ":n", 5) == 6
    assert r.decr(key + ":n") == 5 and r.decr(key + ":n", 5) == 0
    assert r.mset({key + ":a": "1", key + ":b": 2}) is True
    assert r.mget(key + ":a", key + ":b", key + ":c") == [b"1", b"2", None]
    assert sorted(r.keys(key + ":*")) == sorted(k.encode() for k in
                                              [key + ":ex", key + ":n", key + ":a", key + ":b"])
    assert r.type(key) == "string" and r.type(key + ":none") == "none"
    assert r.delete(key, key + ":ex", key + ":none") == 2
    assert r.ttl(key) == -2 and r.pttl(key + ":a") == -1
    assert isinstance(r.dbsize(), int)
    assert isinstance(r.client_id(), int)
    assert r.client_getname() is None
    assert r.hello()["server"] == "ruvio"
    info = r.info("locks")
    assert "lock_grants" in info and isinstance(info["lock_grants"], int)
    assert r.publish(key, "nobody") == 0


def test_execute_command_types(server: Server, key: str) -> None:
    r3 = ruvio.Ruvio("127.0.0.1", server.port)
    r2 = ruvio.Ruvio("127.0.0.1", server.port, protocol=2)
    r3.set(key, "x")
    for c in (r2, r3):
        assert c.execute_command("SET", key, "x") == "OK"  # simple string -> str
        assert c.execute_command("GET", key) == b"x"
        assert c.execute_command("GET", key + ":missing") is None
        assert c.execute_command("INCRBY", key + ":n", 2) >= 2
        assert c.execute_command("INCRBYFLOAT", key + f":f{id(c)}", "1.5") == b"1.5"
        assert c.execute_command("ECHO", b"\x00\xff") == b"\x00\xff"
        with pytest.raises(ruvio.ResponseError) as e:
            c.execute_command("NOSUCHCOMMAND", "a")
        assert e.value.code == "ERR" and "unknown command" in str(e.value)
    cfg3 = r3.execute_command("CONFIG", "GET", "maxclients")
    cfg2 = r2.execute_command("CONFIG", "GET", "maxclients")
    assert cfg3 == {b"maxclients": b"10000"}  # RESP3 map -> dict
    assert cfg2 == [b"maxclients", b"10000"]  # RESP2 flat array -> list
    assert isinstance(r3.execute_command("CLIENT", "INFO"), bytes)  # verbatim -> its text
    d = ruvio.Ruvio("127.0.0.1", server.port, decode_responses=True)
    d.set(key, "ü")
    assert d.get(key) == "ü"
    for c in (r2, r3, d):
        c.close()


def test_connection_reused(server: Server) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    first = r.client_id()
    for _ in range(20):
        assert r.client_id() == first
    r.close()


def test_thread_safe_pool(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port, max_connections=4)
    errors: list = []

    def work() -> None:
        try:
            for _ in range(50):
                r.incr(key)
                t = r.lease(key + ":lock:" + threading.current_thread().name, 5_000)
                assert t is not None
                assert r.release(key + ":lock:" + threading.current_thread().name, t)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, name=f"t{i}") for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert r.get(key) == b"800"
    assert r.connection_pool._created <= 4
    r.close()


def test_no_objects_leak_per_command(server: Server, key: str) -> None:
    """Regression: the parser once re-raised one shared exception instance, whose traceback grew by a few frames
    per command (a leak, and long garbage-collection pauses)."""
    import gc

    r = ruvio.Ruvio("127.0.0.1", server.port)
    r.set(key, "v")
    for _ in range(100):
        r.get(key)
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(5000):
        r.get(key)
        t = r.lease(key + ":l", 10_000)
        r.release(key + ":l", t)  # type: ignore[arg-type]
    gc.collect()
    assert len(gc.get_objects()) - before < 500
    r.close()


def test_locks_lists_holders_with_their_clients(own_server: Server) -> None:
    worker = ruvio.Ruvio("127.0.0.1", own_server.port, client_name="report-worker")
    admin = ruvio.Ruvio("127.0.0.1", own_server.port, protocol=2)
    token = worker.lease("job:report", 30_000)
    slot = admin.semaphore("upstream:billing", 4, 15_000)
    admin.set("plain", "v")
    locks = sorted(admin.scan_locks(), key=lambda lock: lock.key)
    assert [lock.key for lock in locks] == [b"job:report", b"upstream:billing"]
    [h] = locks[0].holders
    assert (h.token, h.client_id, h.client_name) == (token, worker.client_id(), "report-worker")
    assert h.client_addr is not None and h.client_addr.startswith("127.0.0.1:")
    assert locks[0].kind == "lease" and locks[1].kind == "semaphore" and locks[1].limit == 4
    assert [x.token for x in locks[1].holders] == [slot] and locks[1].holders[0].client_name is None
    cursor, page = worker.locks(0, match="job:*", count=1000)
    assert cursor == 0 and [lock.key for lock in page] == [b"job:report"]
    worker.close()
    admin.close()


@pytest.mark.asyncio
async def test_asyncio_locks(own_server: Server) -> None:
    import ruvio.asyncio  # noqa: F401
    r = ruvio.asyncio.Ruvio("127.0.0.1", own_server.port)
    token = await r.lease("async:lock", 30_000)
    found = [lock async for lock in r.scan_locks(match="async:*")]
    assert [(lock.key, [h.token for h in lock.holders]) for lock in found] == [(b"async:lock", [token])]
    await r.aclose()
