"""MULTI / EXEC / DISCARD / WATCH."""

import pytest
import redis

from helpers import encode, wait_until


def test_multi_exec_redis_py(r):
    with r.pipeline(transaction=True) as p:
        p.set("a", "1")
        p.incr("a")
        p.get("a")
        p.get("missing")
        assert p.execute() == [True, 2, b"2", None]


def test_pipeline_without_transaction(r):
    with r.pipeline(transaction=False) as p:
        for i in range(100):
            p.set(f"k{i}", i)
        p.mget([f"k{i}" for i in range(100)])
        res = p.execute()
    assert res[:100] == [True] * 100
    assert res[100] == [str(i).encode() for i in range(100)]


def test_multi_raw_bytes(server):
    with server.raw() as c:
        c.send(encode("MULTI") + encode("SET", "a", "1") + encode("INCR", "a") + encode("EXEC"))
        c.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:2\r\n")
        c.send(encode("MULTI") + encode("EXEC"))
        c.expect(b"+OK\r\n*0\r\n")
        c.send(encode("MULTI") + encode("SET", "a", "x") + encode("DISCARD") + encode("GET", "a"))
        c.expect(b"+OK\r\n+QUEUED\r\n+OK\r\n$1\r\n2\r\n")


def test_transaction_errors(server):
    with server.raw() as c:
        c.send(encode("EXEC"))
        c.expect(b"-ERR EXEC without MULTI\r\n")
        c.send(encode("DISCARD"))
        c.expect(b"-ERR DISCARD without MULTI\r\n")
        c.send(encode("MULTI") + encode("MULTI"))
        c.expect(b"+OK\r\n-ERR MULTI calls can not be nested\r\n")
        c.send(encode("WATCH", "x"))
        c.expect(b"-ERR WATCH inside MULTI is not allowed\r\n")
        c.send(encode("DISCARD"))
        c.expect(b"+OK\r\n")


def test_execabort_after_queued_error(server):
    with server.raw() as c:
        c.send(encode("MULTI") + encode("SET", "a", "1") + encode("foo") + encode("SET", "b")
               + encode("EXEC"))
        c.expect(b"+OK\r\n+QUEUED\r\n"
                 b"-ERR unknown command 'foo', with args beginning with: \r\n"
                 b"-ERR wrong number of arguments for 'set' command\r\n"
                 b"-EXECABORT Transaction discarded because of previous errors.\r\n")
        c.send(encode("EXISTS", "a"))
        c.expect(b":0\r\n")  # nothing ran
        c.send(encode("EXEC"))
        c.expect(b"-ERR EXEC without MULTI\r\n")  # the transaction is over


def test_execabort_redis_py(r):
    with r.pipeline(transaction=True) as p:
        p.set("a", "1")
        p.execute_command("NOSUCHCOMMAND")
        with pytest.raises(redis.exceptions.ResponseError):
            p.execute()
    assert r.exists("a") == 0


def test_runtime_error_inside_exec_does_not_abort(server):
    with server.raw() as c:
        c.send(encode("SET", "s", "abc") + encode("MULTI") + encode("INCR", "s") + encode("SET", "b", "1")
               + encode("EXEC"))
        c.expect(b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n"
                 b"-ERR value is not an integer or out of range\r\n+OK\r\n")
        c.send(encode("GET", "b"))
        c.expect(b"$1\r\n1\r\n")


def test_commands_inside_multi_are_queued_not_run(server):
    with server.raw() as a, server.raw() as b:
        a.send(encode("MULTI") + encode("SET", "k", "1"))
        a.expect(b"+OK\r\n+QUEUED\r\n")
        b.send(encode("GET", "k"))
        b.expect(b"$-1\r\n")
        a.send(encode("EXEC"))
        a.expect(b"*1\r\n+OK\r\n")
        b.send(encode("GET", "k"))
        b.expect(b"$1\r\n1\r\n")


def test_watch_aborts_when_other_client_writes(r, r2):
    r.set("k", "1")
    with r.pipeline() as p:
        p.watch("k")
        assert p.get("k") == b"1"  # immediate mode after WATCH
        r2.set("k", "2")
        p.multi()
        p.set("k", "3")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("k") == b"2"


def test_watch_succeeds_without_interference(r):
    r.set("k", "1")
    with r.pipeline() as p:
        p.watch("k")
        cur = int(p.get("k"))
        p.multi()
        p.set("k", cur + 1)
        assert p.execute() == [True]
    assert r.get("k") == b"2"


def test_watch_missing_key_then_created(r, r2):
    with r.pipeline() as p:
        p.watch("newkey")
        r2.set("newkey", "x")
        p.multi()
        p.set("newkey", "y")
        with pytest.raises(redis.WatchError):
            p.execute()


def test_watch_raw_cases(server):
    with server.raw() as a, server.raw() as b:
        # own writes between WATCH and MULTI also invalidate it
        a.send(encode("SET", "k", "1") + encode("WATCH", "k") + encode("SET", "k", "2")
               + encode("MULTI") + encode("GET", "k") + encode("EXEC"))
        a.expect(b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n*-1\r\n")
        # UNWATCH clears
        a.send(encode("WATCH", "k"))
        a.expect(b"+OK\r\n")
        b.send(encode("SET", "k", "3"))
        b.expect(b"+OK\r\n")
        a.send(encode("UNWATCH") + encode("MULTI") + encode("GET", "k") + encode("EXEC"))
        a.expect(b"+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n$1\r\n3\r\n")
        # EXEC clears the watch set even when it aborted
        a.send(encode("WATCH", "k"))
        a.expect(b"+OK\r\n")
        b.send(encode("SET", "k", "4"))
        b.expect(b"+OK\r\n")
        a.send(encode("MULTI") + encode("EXEC"))
        a.expect(b"+OK\r\n*-1\r\n")
        b.send(encode("SET", "k", "5"))
        b.expect(b"+OK\r\n")
        a.send(encode("MULTI") + encode("EXEC"))
        a.expect(b"+OK\r\n*0\r\n")
        # DISCARD clears the watch set too
        a.send(encode("WATCH", "k") + encode("MULTI") + encode("DISCARD"))
        a.expect(b"+OK\r\n+OK\r\n+OK\r\n")
        b.send(encode("SET", "k", "6"))
        b.expect(b"+OK\r\n")
        a.send(encode("MULTI") + encode("EXEC"))
        a.expect(b"+OK\r\n*0\r\n")
        # a write that does not change the value still counts; so do DEL / EXPIRE / INCR
        for writer in (encode("SET", "k", "6"), encode("DEL", "k"), encode("SET", "k", "1"),
                       encode("EXPIRE", "k", "100"), encode("INCR", "k"), encode("APPEND", "k", "x"),
                       encode("RENAME", "k", "k2"), encode("FLUSHDB")):
            a.send(encode("SET", "k", "1") + encode("WATCH", "k"))
            a.expect(b"+OK\r\n+OK\r\n")
            b.send(writer)
            b.read_reply()
            a.send(encode("MULTI") + encode("PING") + encode("EXEC"))
            a.expect(b"+OK\r\n+QUEUED\r\n*-1\r\n")
        # reads and failed writes do not
        a.send(encode("SET", "k", "1") + encode("WATCH", "k"))
        a.expect(b"+OK\r\n+OK\r\n")
        b.send(encode("GET", "k") + encode("SET", "k", "z", "NX") + encode("EXISTS", "k"))
        b.expect(b"$1\r\n1\r\n$-1\r\n:1\r\n")
        a.send(encode("MULTI") + encode("PING") + encode("EXEC"))
        a.expect(b"+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n")


def test_watch_other_db_not_affected(server):
    with server.raw() as a, server.raw() as b:
        a.send(encode("WATCH", "k"))
        a.expect(b"+OK\r\n")
        b.send(encode("SELECT", "1") + encode("SET", "k", "x"))
        b.expect(b"+OK\r\n+OK\r\n")
        a.send(encode("MULTI") + encode("PING") + encode("EXEC"))
        a.expect(b"+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n")


def test_watch_aborts_when_watched_key_expires(server):
    with server.raw() as a:
        a.send(encode("SET", "k", "v", "PX", "100") + encode("WATCH", "k"))
        a.expect(b"+OK\r\n+OK\r\n")
        probe = server.client()
        try:  # wait until the key is logically expired; do not touch it from this client
            wait_until(lambda: probe.pttl("k") == -2, timeout=5, msg="key to expire")
        finally:
            probe.close()
        a.send(encode("MULTI") + encode("SET", "k", "new") + encode("EXEC"))
        a.expect(b"+OK\r\n+QUEUED\r\n*-1\r\n")
        a.send(encode("EXISTS", "k"))
        a.expect(b":0\r\n")


def test_watch_aborts_when_expiry_happens_untouched(server):
    """Nobody accesses the key: EXEC itself must notice that it expired after WATCH."""
    import time
    with server.raw() as a:
        a.send(encode("SET", "k", "v", "PX", "150") + encode("WATCH", "k"))
        a.expect(b"+OK\r\n+OK\r\n")
        time.sleep(0.3)
        a.send(encode("MULTI") + encode("PING") + encode("EXEC"))
        a.expect(b"+OK\r\n+QUEUED\r\n*-1\r\n")


@pytest.mark.parametrize("proto", [2, 3])
def test_watch_redis_py_transaction_helper(server, r2, proto):
    r = server.client(protocol=proto)
    r.set("counter", "0")
    calls = []

    def incr(pipe):
        calls.append(1)
        v = int(pipe.get("counter"))
        if len(calls) == 1:
            r2.set("counter", "100")  # force one retry
        pipe.multi()
        pipe.set("counter", v + 1)

    try:
        r.transaction(incr, "counter")
        assert len(calls) == 2
        assert r.get("counter") == b"101"
    finally:
        r.close()
