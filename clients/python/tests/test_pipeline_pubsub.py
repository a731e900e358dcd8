"""Pipelines, MULTI/EXEC with WATCH, and pub/sub (RESP2 and RESP3) of the blocking client."""

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


def test_pipeline_without_transaction(r: ruvio.Ruvio, key: str) -> None:
    pipe = r.pipeline(transaction=False)
    pipe.set(key, 1).incr(key).get(key).lease(key + ":l", 30_000).execute_command("PING")
    assert len(pipe) == 5
    out = pipe.execute()
    assert out[:3] == [True, 2, b"2"] and isinstance(out[3], int) and out[4] == "PONG"
    assert r.release(key + ":l", out[3])
    # errors: raised (first one) or returned in place
    pipe.incr(key).lease(key, 1000).get(key)
    with pytest.raises(ruvio.ResponseError) as e:
        pipe.execute()
    assert e.value.code == "WRONGTYPE"
    pipe.incr(key).lease(key, 1000).get(key)
    out = pipe.execute(raise_on_error=False)
    assert out[0] == 4 and isinstance(out[1], ruvio.ResponseError) and out[2] == b"4"
    assert r.pipeline().execute() == []


def test_transaction(r: ruvio.Ruvio, key: str) -> None:
    with r.pipeline() as pipe:
        out = pipe.set(key, "x").incr(key).get(key).execute(raise_on_error=False)
    assert out[0] is True and isinstance(out[1], ruvio.ResponseError) and out[2] == b"x"
    with r.pipeline() as pipe:
        pipe.execute_command("SET", key, "y").execute_command("NOSUCH")
        with pytest.raises(ruvio.ExecAbortError):
            pipe.execute()
    assert r.get(key) == b"x"  # nothing ran: the SET to "y" was discarded


def test_watch_conflict_and_transaction_helper(r: ruvio.Ruvio, server: Server, key: str) -> None:
    r.set(key, 10)
    other = ruvio.Ruvio("127.0.0.1", server.port)
    with r.pipeline() as pipe:
        pipe.watch(key)
        balance = int(pipe.immediate.get(key))
        other.incr(key)  # someone else changes it between WATCH and EXEC
        pipe.multi()
        pipe.set(key, balance + 5)
        with pytest.raises(ruvio.WatchError):
            pipe.execute()
    assert r.get(key) == b"11"
    # the helper retries until the watched key stayed still
    tries = []

    def add_five(pipe: ruvio.Pipeline) -> None:
        value = int(pipe.immediate.get(key))
        if not tries:
            other.incr(key)  # first try conflicts
        tries.append(value)
        pipe.set(key, value + 5)

    assert r.transaction(add_five, key) == [True]
    assert len(tries) == 2 and r.get(key) == b"17"
    other.close()


def test_pubsub(r: ruvio.Ruvio, key: str) -> None:
    ps = r.pubsub()
    ps.subscribe(key + ":news")
    ps.psubscribe(key + ":n*")
    assert ps.get_message(timeout=5) == {"type": "subscribe", "pattern": None, "channel": (key + ":news").encode(),
                                         "data": 1}
    assert ps.get_message(timeout=5)["type"] == "psubscribe"  # type: ignore[index]
    assert r.publish(key + ":news", "hello") == 2
    assert ps.get_message(timeout=5) == {"type": "message", "pattern": None, "channel": (key + ":news").encode(),
                                         "data": b"hello"}
    assert ps.get_message(timeout=5) == {"type": "pmessage", "pattern": (key + ":n*").encode(),
                                         "channel": (key + ":news").encode(), "data": b"hello"}
    assert ps.get_message(timeout=0.1) is None
    ps.unsubscribe()
    ps.punsubscribe()
    kinds = [ps.get_message(timeout=5)["type"] for _ in range(2)]  # type: ignore[index]
    assert kinds == ["unsubscribe", "punsubscribe"]
    assert r.publish(key + ":news", "nobody") == 0
    ps.close()


def test_pubsub_listen_in_a_thread(r: ruvio.Ruvio, key: str) -> None:
    ps = r.pubsub(ignore_subscribe_messages=True)
    ps.subscribe(key)
    got: list = []

    def reader() -> None:
        for msg in ps.listen():
            got.append(msg["data"])
            if len(got) == 3:
                return

    t = threading.Thread(target=reader)
    t.start()
    deadline = time.monotonic() + 10
    while r.execute_command("PUBSUB", "NUMSUB", key)[1] != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(3):
        r.publish(key, f"m{i}")
    t.join(10)
    assert got == [b"m0", b"m1", b"m2"]
    ps.close()


def test_pubsub_resubscribes_after_restart(own_server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", own_server.port)
    ps = r.pubsub(ignore_subscribe_messages=True)
    ps.subscribe(key)
    assert ps.get_message(timeout=0.5) is None
    own_server.restart()
    deadline = time.monotonic() + 20
    received = None
    while received is None and time.monotonic() < deadline:
        ps.get_message(timeout=0.05)  # notices the closed connection, reconnects, subscribes again
        if r.publish(key, "after restart") >= 1:
            received = ps.get_message(timeout=5)
    assert received is not None and received["data"] == b"after restart"
    ps.close()
    r.close()


def test_unwatch_and_pubsub_ping(r: ruvio.Ruvio, server: Server, key: str) -> None:
    other = ruvio.Ruvio("127.0.0.1", server.port)
    with r.pipeline() as pipe:
        pipe.watch(key)
        pipe.unwatch()
        other.set(key, "changed")  # no longer watched: EXEC runs
        pipe.multi()
        pipe.set(key, "mine")
        assert pipe.execute() == [True]
    assert r.get(key) == b"mine"
    ps = r.pubsub(ignore_subscribe_messages=True)
    ps.subscribe(key)
    ps.ping()
    msg = ps.get_message(timeout=5)
    assert msg is not None and msg["type"] == "pong"
    ps.close()
    other.close()
