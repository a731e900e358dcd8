"""Failover discovery through the Sentinel protocol, tested against Debian's redis-sentinel and redis-server
(the Ruvio coordinator, which will speak the same protocol, does not exist yet)."""

from __future__ import annotations

import time
from typing import Iterator, Tuple

import pytest

import ruvio
import ruvio.asyncio
from ruvio.sentinel import Sentinel, SentinelConnectionPool
from servers import Server, free_port, start_redis, start_sentinel

SERVICE = "locks"


@pytest.fixture()
def cluster() -> Iterator[Tuple[Server, Server, Server]]:
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    sentinel = start_sentinel(primary.port, SERVICE)
    try:
        yield primary, replica, sentinel
    finally:
        for s in (sentinel, replica, primary):
            s.stop()


def wait_until(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def force_failover(sent: ruvio.Ruvio) -> None:
    """SENTINEL FAILOVER, repeated while Sentinel answers that no replica is good enough yet (it learns the
    replica's state from INFO every few seconds)."""
    deadline = time.monotonic() + 40
    while True:
        try:
            assert sent.execute_command("SENTINEL", "FAILOVER", SERVICE) == "OK"
            return
        except ruvio.ResponseError as e:
            if time.monotonic() > deadline or e.code not in ("NOGOODSLAVE", "INPROG"):
                raise
            time.sleep(0.2)


def test_discovery_and_failover(cluster: Tuple[Server, Server, Server]) -> None:
    primary, replica, sentinel = cluster
    dead = free_port()  # a coordinator that is down is skipped
    s = Sentinel([("127.0.0.1", dead), ("127.0.0.1", sentinel.port)])
    assert s.discover_primary(SERVICE) == ("127.0.0.1", primary.port)
    assert s.sentinels[0] == ("127.0.0.1", sentinel.port)  # the one that answered is asked first next time
    with pytest.raises(ruvio.PrimaryNotFoundError):
        s.discover_primary("no-such-service")

    r = s.primary_for(SERVICE, command_timeout=5.0)
    assert r.set("before", "1") is True
    direct_replica = ruvio.Ruvio("127.0.0.1", replica.port)
    wait_until(lambda: direct_replica.get("before") == b"1", 20, "replication to the replica")

    # Sentinel must know the replica before it can fail over to it.
    sent = ruvio.Ruvio("127.0.0.1", sentinel.port, protocol=2)
    wait_until(lambda: any(b"master_link_down_since_seconds" not in b" ".join(x if isinstance(x, bytes) else b""
                                                                              for x in rep)
                           for rep in sent.execute_command("SENTINEL", "REPLICAS", SERVICE)),
               20, "sentinel to see the replica")
    force_failover(sent)
    wait_until(lambda: s.primary_address(SERVICE) == ("127.0.0.1", replica.port), 30, "the failover")
    pool = r.connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.watcher is not None
    wait_until(lambda: pool.watcher.switches >= 1, 10, "the client to hear +switch-master")  # type: ignore[union-attr]

    # The client keeps working and writes land on the new primary: the old connection is dropped (connection
    # loss, -READONLY or +switch-master) and discovery finds the new primary.
    deadline = time.monotonic() + 30
    while True:
        try:
            assert r.set("after", "2") is True
            break
        except (ruvio.ConnectionError, ruvio.TimeoutError, ruvio.ReadOnlyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert direct_replica.get("after") == b"2"  # the former replica is the primary now
    conn = r.connection_pool.get_connection()
    assert conn.address == ("127.0.0.1", replica.port)
    r.connection_pool.release(conn)
    r.close()
    direct_replica.close()
    sent.close()


def test_readonly_triggers_rediscovery(cluster: Tuple[Server, Server, Server]) -> None:
    """Demote the primary behind the client's back (REPLICAOF, no failover): the client's write gets -READONLY,
    drops the connection and rediscovers; while the coordinators still name the demoted node, the error
    surfaces (READONLY: the command did not run)."""
    primary, replica, sentinel = cluster
    s = Sentinel([("127.0.0.1", sentinel.port)])
    r = s.primary_for(SERVICE, command_timeout=1.0, watch=False)
    assert r.set("k", "v") is True
    direct = ruvio.Ruvio("127.0.0.1", primary.port, protocol=2)
    direct.execute_command("REPLICAOF", "127.0.0.1", str(replica.port))
    try:
        with pytest.raises((ruvio.ReadOnlyError, ruvio.ConnectionError)):
            r.set("k", "w")  # the coordinators still name the demoted node, which ROLE refuses
    finally:
        direct.execute_command("REPLICAOF", "NO", "ONE")
    wait_until(lambda: _writes(r), 20, "writes to work again once the node is primary again")
    r.close()
    direct.close()


def _writes(r: ruvio.Ruvio) -> bool:
    try:
        return r.set("k", "again") is True
    except (ruvio.ReadOnlyError, ruvio.ConnectionError, ruvio.TimeoutError):
        return False


@pytest.mark.asyncio
async def test_asyncio_discovery_and_failover(cluster: Tuple[Server, Server, Server]) -> None:
    import asyncio

    from ruvio.asyncio.sentinel import SentinelConnectionPool as AsyncPool

    primary, replica, sentinel = cluster
    s = ruvio.asyncio.Sentinel([("127.0.0.1", free_port()), ("127.0.0.1", sentinel.port)])
    assert await s.discover_primary(SERVICE) == ("127.0.0.1", primary.port)
    r = s.primary_for(SERVICE, command_timeout=5.0)
    assert await r.set("a", "1") is True
    assert await r.get("a") == b"1"
    sent = ruvio.Ruvio("127.0.0.1", sentinel.port, protocol=2)
    direct_replica = ruvio.Ruvio("127.0.0.1", replica.port)
    wait_until(lambda: direct_replica.get("a") == b"1", 20, "replication")
    wait_until(lambda: len(sent.execute_command("SENTINEL", "REPLICAS", SERVICE)) == 1, 20, "sentinel to see the replica")
    force_failover(sent)
    pool = r.connection_pool
    assert isinstance(pool, AsyncPool)
    for _ in range(300):  # the watcher task hears +switch-master (the loop must run for it: await, not block)
        if pool.switches >= 1:
            break
        await asyncio.sleep(0.1)
    assert pool.switches >= 1
    assert await r.set("after", "2") is True
    assert direct_replica.get("after") == b"2"
    await r.aclose()
    sent.close()
    direct_replica.close()


def test_primary_killed_client_follows_the_failover(cluster: Tuple[Server, Server, Server]) -> None:
    """kill -9 of the primary: the client's commands fail with connection errors (never hang), and once the
    coordinator has promoted the replica the client rediscovers it and works again, without a restart."""
    primary, replica, sentinel = cluster
    s = Sentinel([("127.0.0.1", sentinel.port)])
    r = s.primary_for(SERVICE, command_timeout=2.0, connect_timeout=1.0, watch=False)  # no +switch-master help
    assert r.set("k", "v") is True
    sent = ruvio.Ruvio("127.0.0.1", sentinel.port, protocol=2)
    wait_until(lambda: len(sent.execute_command("SENTINEL", "REPLICAS", SERVICE)) == 1, 20, "sentinel to see the replica")
    direct_replica = ruvio.Ruvio("127.0.0.1", replica.port)
    wait_until(lambda: direct_replica.get("k") == b"v", 20, "replication")
    primary.kill9()
    deadline = time.monotonic() + 60
    errors = 0
    while True:
        t0 = time.monotonic()
        try:
            assert r.set("after-kill", "1") is True
            break
        except (ruvio.ConnectionError, ruvio.TimeoutError, ruvio.ReadOnlyError):
            errors += 1
            assert time.monotonic() - t0 < 15  # an error within the timeouts, not a hang
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    # (errors may be 0: with discovery, a refused connection is retried within the command timeout)
    assert direct_replica.get("after-kill") == b"1"
    r.close()
    sent.close()
    direct_replica.close()
