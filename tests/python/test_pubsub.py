"""Pub/Sub: redis-py (sync/asyncio, RESP2/RESP3) and exact bytes."""

import asyncio
import time

import pytest

from helpers import Push, encode, wait_until

SUBSCRIBED_MODE_ERROR = (b"-ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / "
                         b"PING / QUIT / RESET are allowed in this context\r\n")


def next_message(p, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = p.get_message(timeout=0.2)
        if m is not None:
            return m
    raise AssertionError("no pub/sub message arrived")


def test_subscribe_publish(r, r2):
    p = r.pubsub()
    try:
        p.subscribe("ch1", "ch2")
        assert next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"ch1", "data": 1}
        assert next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"ch2", "data": 2}
        assert r2.publish("ch1", "hello") == 1
        assert r2.publish("nobody", "x") == 0
        assert next_message(p) == {"type": "message", "pattern": None, "channel": b"ch1",
                                   "data": b"hello"}
        assert r2.publish("ch2", b"\x00\r\n") == 1
        assert next_message(p)["data"] == b"\x00\r\n"
        p.unsubscribe("ch1")
        m = next_message(p)
        assert m["type"] == "unsubscribe" and m["channel"] == b"ch1" and m["data"] == 1
        assert r2.publish("ch1", "x") == 0
    finally:
        p.close()


def test_psubscribe(r, r2):
    p = r.pubsub()
    try:
        p.psubscribe("news.*")
        assert next_message(p) == {"type": "psubscribe", "pattern": None, "channel": b"news.*",
                                   "data": 1}
        p.subscribe("news.tech")
        next_message(p)
        # a client subscribed by channel and pattern gets the message twice
        assert r2.publish("news.tech", "a") == 2
        msgs = [next_message(p), next_message(p)]
        kinds = sorted(m["type"] for m in msgs)
        assert kinds == ["message", "pmessage"]
        pm = [m for m in msgs if m["type"] == "pmessage"][0]
        assert pm == {"type": "pmessage", "pattern": b"news.*", "channel": b"news.tech", "data": b"a"}
        assert r2.publish("news.sport", "b") == 1
        assert next_message(p)["channel"] == b"news.sport"
        assert r2.publish("other", "c") == 0
    finally:
        p.close()


def test_pubsub_introspection(r, r2, server):
    subs = [server.client(protocol=2).pubsub() for _ in range(3)]
    try:
        subs[0].subscribe("a", "b")
        subs[1].subscribe("a")
        subs[2].psubscribe("p*", "q*")
        subs[1].psubscribe("p*")
        # NUMPAT counts distinct patterns server-wide, not subscriptions
        wait_until(lambda: r.pubsub_numpat() == 2
                   and r.pubsub_numsub("a", "b") == [(b"a", 2), (b"b", 1)], msg="subscriptions")
        assert sorted(r.pubsub_channels()) == [b"a", b"b"]
        assert r.pubsub_channels("a*") == [b"a"]
        assert r.pubsub_numsub("a", "b", "c") == [(b"a", 2), (b"b", 1), (b"c", 0)]
        assert r.pubsub_numsub() == []
        assert r2.publish("a", "x") == 2
        assert r2.publish("pa", "x") == 2  # p* counted once per subscriber pattern
    finally:
        for s in subs:
            s.close()
    wait_until(lambda: r.pubsub_channels() == [] and r.pubsub_numpat() == 0, msg="cleanup")


def test_resp2_subscribed_mode_restrictions(server):
    with server.raw() as c:
        c.send(encode("SUBSCRIBE", "c1"))
        c.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nc1\r\n:1\r\n")
        c.send(encode("GET", "a"))
        c.expect(SUBSCRIBED_MODE_ERROR % b"get")
        c.send(encode("SET", "a", "b"))
        c.expect(SUBSCRIBED_MODE_ERROR % b"set")
        c.send(encode("CLIENT", "ID"))
        c.expect(SUBSCRIBED_MODE_ERROR % b"client|id")
        c.send(encode("PING"))
        c.expect(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")
        c.send(encode("PING", "hi"))
        c.expect(b"*2\r\n$4\r\npong\r\n$2\r\nhi\r\n")
        c.send(encode("PSUBSCRIBE", "p*"))
        c.expect(b"*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:2\r\n")
        c.send(encode("SUBSCRIBE", "c2", "c3"))
        c.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nc2\r\n:3\r\n*3\r\n$9\r\nsubscribe\r\n$2\r\nc3\r\n:4\r\n")
        c.send(encode("SUBSCRIBE", "c2"))  # already subscribed: confirmed again, count unchanged
        c.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nc2\r\n:4\r\n")
        with server.raw() as pub:
            pub.send(encode("PUBLISH", "c1", "m1") + encode("PUBLISH", "px", "m2"))
            pub.expect(b":1\r\n:1\r\n")
        c.expect(b"*3\r\n$7\r\nmessage\r\n$2\r\nc1\r\n$2\r\nm1\r\n")
        c.expect(b"*4\r\n$8\r\npmessage\r\n$2\r\np*\r\n$2\r\npx\r\n$2\r\nm2\r\n")
        c.send(encode("PUNSUBSCRIBE"))
        c.expect(b"*3\r\n$12\r\npunsubscribe\r\n$2\r\np*\r\n:3\r\n")
        c.send(encode("PUNSUBSCRIBE"))  # no patterns left: nil channel
        c.expect(b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:3\r\n")
        c.send(encode("UNSUBSCRIBE", "c1"))
        c.expect(b"*3\r\n$11\r\nunsubscribe\r\n$2\r\nc1\r\n:2\r\n")
        c.send(encode("UNSUBSCRIBE"))
        reply = c.read_reply() + c.read_reply()
        assert sorted([reply[1], reply[4]]) == [b"c2", b"c3"]
        assert reply[0] == reply[3] == b"unsubscribe"
        assert sorted([reply[2], reply[5]]) == [0, 1]
        # back to normal mode
        c.send(encode("GET", "a"))
        c.expect(b"$-1\r\n")
        c.send(encode("UNSUBSCRIBE"))
        c.expect(b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n")
        c.send(encode("PING"))
        c.expect(b"+PONG\r\n")


def test_resp2_subscribed_quit_and_reset(server):
    with server.raw() as c:
        c.send(encode("SUBSCRIBE", "c1") + encode("RESET") + encode("GET", "x"))
        c.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nc1\r\n:1\r\n+RESET\r\n$-1\r\n")
        with server.raw() as pub:
            pub.send(encode("PUBLISH", "c1", "m"))
            pub.expect(b":0\r\n")
    with server.raw() as c:
        c.send(encode("SUBSCRIBE", "c1") + encode("QUIT"))
        c.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nc1\r\n:1\r\n+OK\r\n")
        assert c.expect_closed() == b""


def test_resp3_push_messages(server):
    with server.raw() as c:
        c.call("HELLO", "3")
        c.send(encode("SUBSCRIBE", "c1"))
        c.expect(b">3\r\n$9\r\nsubscribe\r\n$2\r\nc1\r\n:1\r\n")
        c.send(encode("PSUBSCRIBE", "c*"))
        c.expect(b">3\r\n$10\r\npsubscribe\r\n$2\r\nc*\r\n:2\r\n")
        # in RESP3 normal commands keep working while subscribed
        c.send(encode("SET", "a", "1") + encode("GET", "a") + encode("PING") + encode("GET", "nope"))
        c.expect(b"+OK\r\n$1\r\n1\r\n+PONG\r\n_\r\n")
        with server.raw() as pub:
            pub.send(encode("PUBLISH", "c1", "hello"))
            pub.expect(b":2\r\n")
        msgs = [c.read_reply(), c.read_reply()]
        assert all(isinstance(m, Push) for m in msgs)
        assert [b"message", b"c1", b"hello"] in msgs
        assert [b"pmessage", b"c*", b"c1", b"hello"] in msgs
        c.send(encode("UNSUBSCRIBE", "c1"))
        c.expect(b">3\r\n$11\r\nunsubscribe\r\n$2\r\nc1\r\n:1\r\n")
        c.send(encode("PUNSUBSCRIBE"))
        c.expect(b">3\r\n$12\r\npunsubscribe\r\n$2\r\nc*\r\n:0\r\n")
        c.send(encode("UNSUBSCRIBE"))
        c.expect(b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n")


def test_publish_raw_counts(server):
    with server.raw() as s1, server.raw() as s2, server.raw() as pub:
        s1.send(encode("SUBSCRIBE", "x"))
        s1.read_reply()
        s2.send(encode("PSUBSCRIBE", "*"))
        s2.read_reply()
        pub.send(encode("PUBLISH", "x", "1") + encode("PUBLISH", "y", "2"))
        pub.expect(b":2\r\n:1\r\n")
        pub.send(encode("PUBSUB", "NUMPAT") + encode("PUBSUB", "NUMSUB", "x", "y")
                 + encode("PUBSUB", "CHANNELS"))
        pub.expect(b":1\r\n*4\r\n$1\r\nx\r\n:1\r\n$1\r\ny\r\n:0\r\n*1\r\n$1\r\nx\r\n")
        pub.send(encode("PUBSUB", "FOO"))
        pub.expect(b"-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n")


def test_message_order_preserved(r, r2):
    p = r.pubsub(ignore_subscribe_messages=True)
    try:
        p.subscribe("seq")
        wait_until(lambda: r2.pubsub_numsub("seq")[0][1] == 1, msg="subscription")
        with r2.pipeline(transaction=False) as pipe:
            for i in range(200):
                pipe.publish("seq", str(i))
            assert pipe.execute() == [1] * 200
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 200 and time.monotonic() < deadline:
            m = p.get_message(timeout=0.2)
            if m:
                got.append(int(m["data"]))
        assert got == list(range(200))
    finally:
        p.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("proto", [2, 3])
async def test_asyncio_pubsub_native(server, proto):
    sub = server.async_client(protocol=proto)
    pub = server.async_client(protocol=proto)
    p = sub.pubsub()
    try:
        await p.subscribe("achan")
        await p.psubscribe("a*")

        async def reader():
            out = []
            while len(out) < 4:
                m = await p.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if m:
                    out.append((m["type"], m["data"]))
            return out

        task = asyncio.create_task(reader())
        for _ in range(100):
            if (await pub.pubsub_numsub("achan"))[0][1] == 1 and await pub.pubsub_numpat() == 1:
                break
            await asyncio.sleep(0.02)
        assert await pub.publish("achan", "one") == 2
        assert await pub.publish("achan", "two") == 2
        got = await asyncio.wait_for(task, timeout=10)
        assert sorted(got) == sorted([("message", b"one"), ("pmessage", b"one"),
                                      ("message", b"two"), ("pmessage", b"two")])
    finally:
        await p.aclose()
        await sub.aclose()
        await pub.aclose()


def test_sharded_pubsub_is_a_namespace_of_its_own(r, r2, server):
    """SSUBSCRIBE/SPUBLISH (Redis 7; without a cluster one namespace beside the channels'): `smessage`, shard channels
    counted apart in confirmations, PUBSUB SHARDCHANNELS/SHARDNUMSUB, CLIENT LIST ssub=."""
    p = r.pubsub()
    try:
        p.subscribe("ch")
        assert next_message(p)["data"] == 1
        p.ssubscribe("ch", "orders")
        assert next_message(p) == {"type": "ssubscribe", "pattern": None, "channel": b"ch", "data": 1}
        assert next_message(p) == {"type": "ssubscribe", "pattern": None, "channel": b"orders", "data": 2}
        assert r2.spublish("orders", "o1") == 1
        assert next_message(p) == {"type": "smessage", "pattern": None, "channel": b"orders", "data": b"o1"}
        # PUBLISH reaches the channel subscription only, SPUBLISH the shard one only.
        assert r2.publish("ch", "plain") == 1
        assert next_message(p)["type"] == "message"
        assert r2.spublish("ch", "sharded") == 1
        assert next_message(p) == {"type": "smessage", "pattern": None, "channel": b"ch", "data": b"sharded"}
        assert sorted(r2.pubsub_shardchannels()) == [b"ch", b"orders"] and r2.pubsub_shardchannels("o*") == [b"orders"]
        assert r2.pubsub_shardnumsub("orders", "none") == [(b"orders", 1), (b"none", 0)]
        assert r2.pubsub_channels() == [b"ch"]
        assert any("ssub=2" in line and "sub=1" in line for line in r2.execute_command("CLIENT", "LIST").decode().splitlines())
        p.sunsubscribe("orders")
        assert next_message(p) == {"type": "sunsubscribe", "pattern": None, "channel": b"orders", "data": 1}
        assert r2.spublish("orders", "x") == 0
    finally:
        p.close()
    wait_until(lambda: r2.pubsub_shardchannels() == [], msg="shard subscriptions dropped with the connection")
