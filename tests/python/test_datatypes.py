"""Lists, sets, sorted sets, bitmaps and the blocking pops (issue 33): replies, errors, WRONGTYPE, RESP2 and RESP3.

Runs against ruvio by default and against redis-server with RUVIO_TEST_TARGET=redis, which proves the tests
themselves: every expectation here is Redis 7.0's behaviour.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from helpers import wait_until

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def pairs(v):
    """WITHSCORES replies as tuples (redis-py gives tuples under RESP2, lists under RESP3)."""
    return [tuple(x) for x in v]


def err(r, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


# ---- sorted sets ------------------------------------------------------------------------------------------------

def test_zadd_options_and_replies(r):
    assert r.zadd("z", {"a": 1, "b": 2}) == 2
    assert r.zadd("z", {"a": 5}, nx=True) == 0
    assert r.zscore("z", "a") == 1.0
    assert r.zadd("z", {"a": 5, "c": 3}, xx=True) == 0
    assert r.zscore("z", "c") is None and r.zscore("z", "a") == 5.0
    assert r.zadd("z", {"a": 4, "b": 3}, gt=True, ch=True) == 1  # only b rises
    assert pairs(r.zrange("z", 0, -1, withscores=True)) == [(b"b", 3.0), (b"a", 5.0)]
    assert r.zadd("z", {"a": 1}, incr=True) == 6.0
    assert r.zadd("z", {"a": 1}, incr=True, lt=True) is None
    assert err(r, "ZADD", "z", "NX", "XX", "1", "a") == "XX and NX options at the same time are not compatible"
    assert err(r, "ZADD", "z", "GT", "LT", "1", "a") == "GT, LT, and/or NX options at the same time are not compatible"
    assert err(r, "ZADD", "z", "INCR", "1", "a", "2", "b") == "INCR option supports a single increment-element pair"
    assert err(r, "ZADD", "z", "1", "a", "2") == "syntax error"
    assert err(r, "ZADD", "z", "nan", "a") == "value is not a valid float"
    r.zadd("inf", {"x": float("inf")})
    assert err(r, "ZINCRBY", "inf", "-inf", "x") == "resulting score is not a number (NaN)"
    r.set("s", "v")
    assert err(r, "ZADD", "s", "1", "a") == WRONGTYPE


def test_scores_are_written_as_redis_writes_them(server):
    with server.raw() as c:
        c.call("ZADD", "z", "0.1", "a", "inf", "b", "-inf", "c", "1e20", "d", "3", "e")
        assert c.call("ZSCORE", "z", "a") == b"0.10000000000000001"
        assert c.call("ZSCORE", "z", "b") == b"inf"
        assert c.call("ZSCORE", "z", "c") == b"-inf"
        assert c.call("ZSCORE", "z", "d") == b"1e+20"
        assert c.call("ZSCORE", "z", "e") == b"3"
        assert c.call("ZRANGE", "z", "0", "0", "WITHSCORES") == [b"c", b"-inf"]


def test_zrange_forms(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zrange("z", 1, 2) == [b"b", b"c"]
    assert r.zrange("z", 0, 1, desc=True) == [b"e", b"d"]
    assert r.zrangebyscore("z", "(1", 3) == [b"b", b"c"]
    assert r.zrevrangebyscore("z", "+inf", "(3") == [b"e", b"d"]
    assert r.zrangebyscore("z", "-inf", "+inf", start=1, num=2) == [b"b", b"c"]
    assert r.execute_command("ZRANGE", "z", "(5", "2", "BYSCORE", "REV") == [b"d", b"c", b"b"]
    r.zadd("lex", {"a": 0, "b": 0, "c": 0, "d": 0})
    assert r.zrangebylex("lex", "[b", "(d") == [b"b", b"c"]
    assert r.zrevrangebylex("lex", "+", "[c") == [b"d", b"c"]
    assert r.zlexcount("lex", "-", "+") == 4
    assert r.zcount("z", "(1", "+inf") == 4
    assert r.zrank("z", "c") == 2 and r.zrevrank("z", "c") == 2 and r.zrank("z", "zz") is None
    assert r.zrangestore("dst", "z", 0, 1) == 2
    assert r.zrange("dst", 0, -1) == [b"a", b"b"]
    assert err(r, "ZRANGEBYSCORE", "z", "x", "1") == "min or max is not a float"
    assert err(r, "ZRANGEBYLEX", "z", "a", "b") == "min or max not valid string range item"
    assert err(r, "ZRANGE", "z", "0", "1", "LIMIT", "0", "1") == "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    assert err(r, "ZRANGE", "lex", "-", "+", "BYLEX", "WITHSCORES") == "syntax error, WITHSCORES not supported in combination with BYLEX"


def test_zrem_and_ranges_removal_delete_emptied_keys(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zrem("z", "a", "nope") == 1
    assert r.zremrangebyscore("z", 2, 2) == 1
    assert r.zremrangebyrank("z", 0, 0) == 1
    assert r.zremrangebylex("z", "-", "+") == 1
    assert r.exists("z") == 0


def test_pops_and_mpop(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zpopmin("z") in ([(b"a", 1.0)], [b"a", 1.0])  # RESP3 without a count: one flat pair
    assert pairs(r.zpopmax("z", 5)) == [(b"c", 3.0), (b"b", 2.0)]
    assert r.exists("z") == 0
    assert err(r, "ZPOPMIN", "z", "-1") == "value is out of range, must be positive"
    r.zadd("z2", {"x": 1, "y": 2})
    key, items = r.zmpop(2, ["z", "z2"], max=True, count=10)
    assert (key, [(m, float(s)) for m, s in items]) == (b"z2", [(b"y", 2.0), (b"x", 1.0)])
    assert r.zmpop(1, ["z"], min=True) is None
    assert err(r, "ZMPOP", "0", "z", "MIN") == "numkeys should be greater than 0"
    assert err(r, "ZMPOP", "1", "z", "MIN", "COUNT", "0") == "count should be greater than 0"


def test_set_operations_on_sorted_sets(r):
    r.zadd("a", {"x": 1, "y": 2})
    r.zadd("b", {"y": 10, "z": 20})
    r.sadd("s", "x")
    assert r.zunionstore("u", {"a": 2, "b": 1}) == 3
    assert pairs(r.zrange("u", 0, -1, withscores=True)) == [(b"x", 2.0), (b"y", 14.0), (b"z", 20.0)]
    assert r.zinterstore("i", ["a", "b"], aggregate="MAX") == 1
    assert r.zscore("i", "y") == 10.0
    assert pairs(r.zunion(["a", "s"], withscores=True)) == [(b"x", 2.0), (b"y", 2.0)]  # ties ordered by member
    assert r.zdiff(["a", "b"]) == [b"x"]
    assert r.zintercard(2, ["a", "b"]) == 1
    assert err(r, "ZUNIONSTORE", "d", "0", "a") == "at least 1 input key is needed for 'zunionstore' command"
    assert err(r, "ZUNION", "2", "a", "b", "WEIGHTS", "1", "x") == "weight value is not a float"
    assert r.zinterstore("gone", ["a", "nokey"]) == 0 and r.exists("gone") == 0


def test_zrandmember_and_zscan(r):
    members = {f"m{i}": i for i in range(300)}
    r.zadd("z", members)
    picks = r.zrandmember("z", 10)
    assert len(picks) == 10 and len(set(picks)) == 10
    assert len(r.zrandmember("z", -500)) == 500
    seen = {}
    cursor = 0
    while True:
        cursor, items = r.zscan("z", cursor, count=50)
        seen.update(items)
        if cursor == 0:
            break
    assert seen == {k.encode(): float(v) for k, v in members.items()}


def test_zset_encodings_and_config(r):
    r.zadd("small", {"a": 1})
    assert r.object("encoding", "small") == b"listpack"
    r.zadd("big", {f"m{i}": i for i in range(200)})
    assert r.object("encoding", "big") == b"skiplist"
    assert r.config_get("zset-max-listpack-entries") == {"zset-max-listpack-entries": "128"}
    assert r.type("big") == b"zset"


# ---- lists --------------------------------------------------------------------------------------------------------

def test_list_basics(r):
    assert r.rpush("l", "a", "b", "c") == 3
    assert r.lpush("l", "z") == 4
    assert r.lrange("l", 0, -1) == [b"z", b"a", b"b", b"c"]
    assert r.llen("l") == 4 and r.lindex("l", -1) == b"c" and r.lindex("l", 10) is None
    assert r.lset("l", 1, "A") is True
    assert err(r, "LSET", "l", "10", "x") == "index out of range"
    assert err(r, "LSET", "nokey", "0", "x") == "no such key"
    assert r.linsert("l", "before", "b", "ins") == 5
    assert r.linsert("l", "after", "nope", "x") == -1
    assert r.lpushx("nokey", "x") == 0 and r.exists("nokey") == 0
    assert r.lrem("l", 0, "ins") == 1
    assert r.ltrim("l", 1, -2) is True
    assert r.lrange("l", 0, -1) == [b"A", b"b"]
    assert r.lpop("l") == b"A"
    assert r.rpop("l", 5) == [b"b"]
    assert r.exists("l") == 0
    assert r.lpop("l", 2) is None
    assert err(r, "LPOP", "l", "-1") == "value is out of range, must be positive"
    r.set("s", "v")
    assert err(r, "LPUSH", "s", "x") == WRONGTYPE
    assert r.type("nokey") == b"none"


def test_lpos_lmove_lmpop(r):
    r.rpush("l", "a", "b", "c", "b", "b")
    assert r.lpos("l", "b") == 1
    assert r.lpos("l", "b", rank=-1) == 4
    assert r.lpos("l", "b", count=0) == [1, 3, 4]
    assert r.lpos("l", "b", rank=2, maxlen=3) is None
    assert "RANK can't be zero" in err(r, "LPOS", "l", "b", "RANK", "0")
    assert r.lmove("l", "m", "LEFT", "RIGHT") == b"a"
    assert r.rpoplpush("l", "m") == b"b"
    assert r.lrange("m", 0, -1) == [b"b", b"a"]
    assert r.lmpop(2, "none", "l", direction="RIGHT", count=2) == [b"l", [b"b", b"c"]]
    assert r.type("m") == b"list" and r.object("encoding", "m") == b"quicklist"


def test_long_list_across_chunks_matches_a_model(r):
    """A list of many 8 KB chunks (short, mid-size, empty and 5 KB elements) against a Python list: every
    index, range, insert, set, removal and trim reaches the right element whichever chunk holds it."""
    import random
    rnd = random.Random(33)
    sizes = [0, 1, 11, 12, 127, 128, 200, 4096, 4097, 5000]

    def elem(i):
        return (b"e%d:" % i) + b"x" * rnd.choice(sizes[:7] if rnd.random() < 0.97 else sizes)

    model = []
    for batch in range(12):
        items = [elem(batch * 1000 + i) for i in range(1000)]
        if batch % 3 == 2:
            assert r.lpush("big", *items) == len(model) + len(items)
            model[:0] = list(reversed(items))
        else:
            assert r.rpush("big", *items) == len(model) + len(items)
            model.extend(items)
    for step in range(300):
        n = len(model)
        i = rnd.randrange(n)
        op = step % 6
        if op == 0:
            assert r.lindex("big", i) == model[i] and r.lindex("big", i - n) == model[i]
        elif op == 1:
            e = elem(100_000 + step)
            assert r.lset("big", i, e) is True
            model[i] = e
        elif op == 2:
            e = elem(200_000 + step)
            assert r.linsert("big", "before", model[i], e) == n + 1
            model.insert(model.index(model[i]), e)
        elif op == 3:
            target = model[i]
            count = rnd.choice([0, 1, -1, 2])
            want = [j for j, x in enumerate(model) if x == target]
            drop = want if count == 0 else (want[:count] if count > 0 else want[count:])
            assert r.lrem("big", count, target) == len(drop)
            for j in reversed(drop):
                del model[j]
        elif op == 4:
            a = rnd.randrange(n)
            assert r.lrange("big", a, a + 150) == model[a:a + 151]
            assert r.lrange("big", -a - 1, -1) == model[-a - 1:]
        else:
            assert r.lpos("big", model[i]) == model.index(model[i])
    assert r.lpop("big", 2500) == model[:2500] and r.rpop("big", 2500) == model[-2500:][::-1]
    model = model[2500:-2500]
    assert r.ltrim("big", 1234, -4321) is True
    model = model[1234:len(model) - 4320]
    assert r.llen("big") == len(model)
    assert r.lrange("big", 0, -1) == model


@pytest.mark.ruvio_only
def test_a_long_list_is_packed(r):
    """12-byte elements cost about 13 bytes each (one boundary byte), as Redis's listpack nodes (14); the slot
    layout before took 16."""
    for batch in range(100):
        r.rpush("packed", *[b"value:%06d" % i for i in range(batch * 1000, batch * 1000 + 1000)])
    per_element = r.memory_usage("packed") / 100_000
    assert 13.0 <= per_element < 13.5, per_element
    assert r.lindex("packed", 54_321) == b"value:054321"
    assert r.object("encoding", "packed") == b"quicklist"


# ---- sets ---------------------------------------------------------------------------------------------------------

def test_set_basics(r):
    assert r.sadd("s", "1", "2", "3", "2") == 3
    assert r.object("encoding", "s") == b"intset"
    assert r.smembers("s") == {b"1", b"2", b"3"}
    assert r.sadd("s", "x") == 1
    assert r.object("encoding", "s") == b"hashtable"
    assert r.sismember("s", "x") is True or r.sismember("s", "x") == 1
    assert r.smismember("s", ["1", "nope"]) in ([1, 0], [True, False])
    assert r.scard("s") == 4
    assert r.srem("s", "x", "nope") == 1
    assert r.smove("s", "t", "1") is True
    assert r.smembers("t") == {b"1"}
    assert len(r.srandmember("s", -10)) == 10
    assert len(r.srandmember("s", 10)) == 2
    popped = r.spop("s", 5)
    assert set(popped) == {b"2", b"3"} and r.exists("s") == 0
    r.sadd("a", "x", "y", "z")
    r.sadd("b", "y", "z", "w")
    assert r.sinter("a", "b") == {b"y", b"z"}
    assert r.sunion("a", "b") == {b"x", b"y", b"z", b"w"}
    assert r.sdiff("a", "b") == {b"x"}
    assert r.sinterstore("d", "a", "b") == 2
    assert r.sintercard(2, ["a", "b"], limit=1) == 1
    assert err(r, "SINTERCARD", "3", "a", "b") == "Number of keys can't be greater than number of args"
    cursor, items = r.sscan("a", 0)
    assert cursor == 0 and set(items) == {b"x", b"y", b"z"}


# ---- bitmaps and LCS ---------------------------------------------------------------------------------------------

def test_bit_commands(r):
    assert r.setbit("b", 7, 1) == 0
    assert r.setbit("b", 7, 0) == 1
    assert r.setbit("b", 100, 1) == 0
    assert r.strlen("b") == 13
    assert r.getbit("b", 100) == 1 and r.getbit("b", 100000) == 0
    assert err(r, "SETBIT", "b", "-1", "1") == "bit offset is not an integer or out of range"
    assert err(r, "SETBIT", "b", str(4 * 1024**3), "1") == "bit offset is not an integer or out of range"
    assert err(r, "SETBIT", "b", "0", "2") == "bit is not an integer or out of range"
    r.set("s", "foobar")
    assert r.bitcount("s") == 26
    assert r.bitcount("s", 1, 1) == 6
    assert r.execute_command("BITCOUNT", "s", "5", "30", "BIT") == 17
    assert r.bitpos("s", 1) == 1
    r.set("ones", b"\xff\xff")
    assert r.bitpos("ones", 0) == 16
    assert r.bitpos("ones", 0, 0, -1) == -1
    r.set("x", b"\x0f")
    r.set("y", b"\xf0\x01")
    assert r.bitop("OR", "o", "x", "y") == 2 and r.get("o") == b"\xff\x01"
    assert r.bitop("NOT", "n", "x") == 1 and r.get("n") == b"\xf0"
    assert err(r, "BITOP", "NOT", "n", "x", "y") == "BITOP NOT must be called with a single source key."


def test_bitfield(r):
    assert r.execute_command("BITFIELD", "f", "SET", "i8", "0", "100", "GET", "u4", "0", "INCRBY", "i8", "0", "100") == [0, 6, -56]
    assert r.execute_command("BITFIELD", "f", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "-200") == [-128]
    assert r.execute_command("BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "5") == [None]
    assert r.execute_command("BITFIELD", "f", "SET", "u8", "#1", "255", "GET", "u8", "8") == [0, 255]
    assert r.execute_command("BITFIELD_RO", "f", "GET", "u8", "8") == [255]
    assert err(r, "BITFIELD", "f", "GET", "u64", "0") == "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
    assert err(r, "BITFIELD_RO", "f", "SET", "u8", "0", "1") == "BITFIELD_RO only supports the GET subcommand"


def test_lcs(r):
    r.mset({"a": "ohmytext", "b": "mynewtext"})
    assert r.lcs("a", "b") == b"mytext"
    assert r.lcs("a", "b", len=True) == 6


# ---- keyspace commands on the new types -------------------------------------------------------------------------

def test_keyspace_commands_know_the_new_types(r):
    r.rpush("l", "a")
    r.sadd("s", "a")
    r.zadd("z", {"a": 1})
    assert sorted(r.scan(0, _type="zset", count=1000)[1]) == [b"z"]
    assert r.copy("z", "z2") is True and r.zscore("z2", "a") == 1.0
    assert r.rename("l", "l2") is True and r.lrange("l2", 0, -1) == [b"a"]
    assert r.move("s", 1) is True
    assert r.memory_usage("z") > 0
    for name in ("list-max-listpack-size", "set-max-intset-entries", "zset-max-listpack-value"):
        assert name in r.config_get(name)
    r.config_set("set-max-intset-entries", 600)
    assert r.config_get("set-max-intset-entries") == {"set-max-intset-entries": "600"}
    r.config_set("set-max-intset-entries", 512)


# ---- blocking -----------------------------------------------------------------------------------------------------

def blocked_count(server) -> int:
    c = server.client()
    try:
        return int(c.info("clients")["blocked_clients"])
    finally:
        c.close()


def test_blpop_serves_waiters_first_come_first_served(server):
    results = {}

    def waiter(name):
        c = server.client()
        results[name] = c.blpop(["q", "other"], timeout=5)
        c.close()

    threads = []
    for name in ("first", "second"):
        t = threading.Thread(target=waiter, args=(name,))
        t.start()
        threads.append(t)
        wait_until(lambda n=len(threads): blocked_count(server) == n, msg="waiter blocked")
    c = server.client()
    c.rpush("q", "one", "two")
    for t in threads:
        t.join(5)
    assert results == {"first": (b"q", b"one"), "second": (b"q", b"two")}
    assert c.exists("q") == 0
    c.close()


def test_blocking_pops_time_out_and_do_not_block_in_multi(server):
    c = server.client()
    start = time.monotonic()
    assert c.blpop("nothing", timeout=0.2) is None
    assert c.bzpopmin("nothing", timeout=0.2) is None
    assert time.monotonic() - start >= 0.35
    p = c.pipeline(transaction=True)
    p.blpop("nothing", timeout=0)
    p.execute_command("BLMOVE", "nothing", "dst", "LEFT", "LEFT", "0")
    assert p.execute() == [None, None]
    assert err(c, "BLPOP", "q", "-1") == "timeout is negative"
    assert err(c, "BLPOP", "q", "x") == "timeout is not a float or out of range"
    c.close()


def test_blmove_and_bzpopmax_are_woken(server):
    out = {}

    def move():
        c = server.client()
        out["move"] = c.blmove("src", "dst", 5, "RIGHT", "LEFT")
        c.close()

    def zpop():
        c = server.client()
        out["zpop"] = c.bzpopmax(["zq"], timeout=5)
        c.close()

    threads = [threading.Thread(target=move), threading.Thread(target=zpop)]
    for t in threads:
        t.start()
    wait_until(lambda: blocked_count(server) == 2, msg="both blocked")
    c = server.client()
    c.rpush("src", "a", "b")
    c.zadd("zq", {"low": 1, "high": 2})
    for t in threads:
        t.join(5)
    assert out == {"move": b"b", "zpop": (b"zq", b"high", 2.0)}
    assert c.lrange("dst", 0, -1) == [b"b"] and c.lrange("src", 0, -1) == [b"a"]
    c.close()


def test_client_unblock_ends_a_wait_with_the_timeout_reply_or_an_error(server):
    out = {}

    def waiter(name, cmd):
        c = server.client()
        out[name + "-id"] = c.client_id()
        try:
            out[name] = c.execute_command(*cmd)
        except redis.ResponseError as e:
            out[name] = str(e)
        c.close()

    t = threading.Thread(target=waiter, args=("a", ("BLPOP", "nothing", "0")))
    t.start()
    wait_until(lambda: blocked_count(server) == 1, msg="blocked")
    c = server.client()
    assert c.client_unblock(out["a-id"]) == 1
    t.join(5)
    assert out["a"] is None
    t = threading.Thread(target=waiter, args=("b", ("BZPOPMIN", "nothing", "0")))
    t.start()
    wait_until(lambda: blocked_count(server) == 1, msg="blocked")
    assert c.client_unblock(out["b-id"], error=True) == 1
    t.join(5)
    assert out["b"] == "UNBLOCKED client unblocked via CLIENT UNBLOCK"
    assert c.client_unblock(out["b-id"]) == 0  # gone / not waiting
    assert c.client_unblock(c.client_id()) == 0
    c.close()


# ---- keyspace notifications --------------------------------------------------------------------------------------

def collect(p, n, timeout=5.0):
    """The next n pmessages as (channel, data)."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = p.get_message(timeout=0.2)
        if m and m["type"] == "pmessage":
            out.append((m["channel"], m["data"]))
    return out


def test_keyspace_notifications(server):
    c = server.client()
    assert c.config_get("notify-keyspace-events") == {"notify-keyspace-events": ""}
    assert err(c, "CONFIG", "SET", "notify-keyspace-events", "Q").startswith("CONFIG SET failed")
    c.config_set("notify-keyspace-events", "KEA")
    try:
        assert c.config_get("notify-keyspace-events") == {"notify-keyspace-events": "AKE"}
        sub = server.client().pubsub()
        sub.psubscribe("__key*__:*")
        assert sub.get_message(timeout=2)["type"] == "psubscribe"
        c.rpush("l", "a")
        c.lpop("l")
        c.zadd("z", {"m": 1})
        c.set("k", "v", px=50)
        got = collect(sub, 10)
        assert got[:4] == [(b"__keyspace@0__:l", b"rpush"), (b"__keyevent@0__:rpush", b"l"), (b"__keyspace@0__:l", b"lpop"), (b"__keyevent@0__:lpop", b"l")]
        assert got[4:6] == [(b"__keyspace@0__:l", b"del"), (b"__keyevent@0__:del", b"l")]  # popped dry: deleted
        assert got[6:8] == [(b"__keyspace@0__:z", b"zadd"), (b"__keyevent@0__:zadd", b"z")]
        assert got[8:10] == [(b"__keyspace@0__:k", b"set"), (b"__keyevent@0__:set", b"k")]
        assert (b"__keyevent@0__:expired", b"k") in collect(sub, 4)  # after `expire`, then on expiry
        # LMPOP and ZMPOP notify the pop they did, as Redis does (`rpop`, `zpopmax`), not their own names.
        c.rpush("l3", "a", "b")
        assert c.lmpop(1, "l3", direction="RIGHT") == [b"l3", [b"b"]]
        c.zadd("z3", {"m": 1, "n": 2})
        assert c.zmpop(1, ["z3"], max=True) == [b"z3", [[b"n", b"2"]]]
        assert collect(sub, 8) == [
            (b"__keyspace@0__:l3", b"rpush"), (b"__keyevent@0__:rpush", b"l3"),
            (b"__keyspace@0__:l3", b"rpop"), (b"__keyevent@0__:rpop", b"l3"),
            (b"__keyspace@0__:z3", b"zadd"), (b"__keyevent@0__:zadd", b"z3"),
            (b"__keyspace@0__:z3", b"zpopmax"), (b"__keyevent@0__:zpopmax", b"z3"),
        ]
        # Only the classes asked for: E with lists only.
        c.config_set("notify-keyspace-events", "El")
        c.sadd("s", "x")
        c.rpush("l2", "x")
        assert collect(sub, 1) == [(b"__keyevent@0__:rpush", b"l2")]
        sub.close()
    finally:
        c.config_set("notify-keyspace-events", "")
        c.close()


def test_blocking_commands_in_scripts(r):
    assert "not allowed from script" in err(r, "EVAL", "return redis.call('blpop', 'q', 0)", "0")
    assert "not allowed from script" in err(r, "EVAL", "return redis.call('bzpopmin', 'q', 0)", "0")
    # The multi-key forms run without waiting.
    assert r.execute_command("EVAL", "return redis.call('blmpop', 0, 1, 'q', 'left')", "0") is None
    r.rpush("q", "x")
    assert r.execute_command("EVAL", "return redis.call('blmpop', 0, 1, 'q', 'left')", "0") == [b"q", [b"x"]]


# ---- which check answers first (found by running random arguments against Ruvio and redis-server side by side) ----

def test_argument_checks_answer_in_redis_order(r, server):
    r.rpush("l", "a", "b")
    r.set("s", "v")
    # A pop count that is not a number is "out of range, must be positive", as a negative one (LPOP, RPOP, SPOP,
    # ZPOPMIN, ZPOPMAX), even for a missing key.
    for call in (("LPOP", "l", "x"), ("RPOP", "nokey", "x"), ("SPOP", "nokey", "x"), ("ZPOPMIN", "l", "x"),
                 ("ZPOPMAX", "nokey", "")):
        assert err(r, *call) == "value is out of range, must be positive", call
    # LPOS: the option's name before its value; COUNT and MAXLEN say their own message for any bad value.
    assert err(r, "LPOS", "l", "a", "FOO", "x") == "syntax error"
    assert err(r, "LPOS", "l", "a", "COUNT", "x") == "COUNT can't be negative"
    assert err(r, "LPOS", "l", "a", "MAXLEN", "x") == "MAXLEN can't be negative"
    assert err(r, "LPOS", "l", "a", "RANK", "x") == "value is not an integer or out of range"
    # LINDEX and LSET look at the key before the index.
    assert r.execute_command("LINDEX", "nokey", "x") is None
    assert err(r, "LINDEX", "s", "x") == WRONGTYPE
    assert err(r, "LINDEX", "l", "x") == "value is not an integer or out of range"
    assert err(r, "LSET", "nokey", "x", "v") == "no such key"
    assert err(r, "LSET", "s", "x", "v") == WRONGTYPE
    # BITPOS: a bit that is not a number, then one that is not 0 or 1.
    assert err(r, "BITPOS", "s", "x") == "value is not an integer or out of range"
    assert err(r, "BITPOS", "s", "2") == "The bit argument must be 1 or 0."
    # BITCOUNT reads start, end, then the unit; BITPOS start, the unit, then end.
    assert err(r, "BITCOUNT", "s", "0", "x", "FOO") == "value is not an integer or out of range"
    assert err(r, "BITPOS", "s", "1", "0", "x", "FOO") == "syntax error"
    # ZINTERCARD reads its count as ZINTER does; SINTERCARD has one message.
    assert err(r, "ZINTERCARD", "x", "k") == "value is not an integer or out of range"
    assert err(r, "ZINTERCARD", "0", "k") == "at least 1 input key is needed for 'zintercard' command"
    assert err(r, "ZINTERCARD", "3", "k") == "syntax error"
    assert err(r, "SINTERCARD", "x", "k") == "numkeys should be greater than 0"
    assert err(r, "SINTERCARD", "3", "k") == "Number of keys can't be greater than number of args"
    assert err(r, "ZINTERCARD", "2", "nokey", "s") == WRONGTYPE, "every key's type before a missing one answers 0"
    # EXPIRE and its kin read their options before the amount.
    assert err(r, "EXPIRE", "s", "x", "FOO") == "Unsupported option FOO"
    assert err(r, "PEXPIREAT", "s", "x", "NX", "XX") == "NX and XX, GT or LT options at the same time are not compatible"
    # SMOVE from a missing set moves nothing, whatever the destination holds.
    assert r.smove("nokey", "s", "m") is False
    r.sadd("set", "m")
    assert err(r, "SMOVE", "set", "s", "nothere") == WRONGTYPE
    # LCS looks at both keys' types before its options.
    lcs_type = "The specified keys must contain string values"
    assert err(r, "LCS", "l", "set", "FOO") == lcs_type
    assert err(r, "LCS", "nokey", "l", "FOO") == lcs_type
    assert err(r, "LCS", "nokey", "s", "FOO") == "syntax error"
    # ZUNION/ZINTER/ZDIFF, their STORE forms and ZINTERCARD check every key's type (a set is an input, a missing key
    # an empty one) before their options, then answer as a missing key makes them.
    r.zadd("z", {"m": 1})
    for call in (("ZDIFF", "2", "nokey", "l", "IDX"), ("ZINTER", "2", "set", "l", "FOO"),
                 ("ZUNION", "1", "s", "WEIGHTS", "x"), ("ZINTERSTORE", "d", "1", "l", "AGGREGATE", "FOO"),
                 ("ZUNIONSTORE", "d", "2", "z", "s", "WITHSCORES"), ("ZDIFFSTORE", "d", "1", "l", "WEIGHTS", "1"),
                 ("ZINTERCARD", "2", "nokey", "l", "LIMIT", "x"), ("ZINTERCARD", "1", "s", "FOO")):
        assert err(r, *call) == WRONGTYPE, call
    assert err(r, "ZINTER", "2", "nokey", "set", "FOO") == "syntax error"
    assert err(r, "ZUNION", "2", "z", "set", "WEIGHTS", "1", "x") == "weight value is not a float"
    assert err(r, "ZINTERCARD", "1", "nokey", "LIMIT", "x") == "LIMIT can't be negative"
    assert err(r, "ZINTERCARD", "1", "z", "WITHSCORES") == "syntax error"
    assert r.execute_command("ZINTERCARD", "2", "z", "nokey", "LIMIT", "1") == 0
    assert r.execute_command("ZINTERCARD", "2", "z", "set", "LIMIT", "0") == 1
    # INCRBYFLOAT checks the key's type and value before the increment.
    assert err(r, "INCRBYFLOAT", "l", "x") == WRONGTYPE
    r.set("word", "abc")
    assert err(r, "INCRBYFLOAT", "word", "1") == "value is not a valid float"
    # BITFIELD_RO parses every subcommand as BITFIELD does and refuses a write only after; OVERFLOW alone is fine.
    assert err(r, "BITFIELD_RO", "s", "INCRBY", "x", "0", "1") == \
        "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
    assert err(r, "BITFIELD_RO", "s", "SET", "i8", "0", "x") == "value is not an integer or out of range"
    assert err(r, "BITFIELD_RO", "s", "OVERFLOW", "FOO") == "Invalid OVERFLOW type specified"
    assert err(r, "BITFIELD_RO", "l", "SET", "i8", "0", "1") == "BITFIELD_RO only supports the GET subcommand"
    assert err(r, "BITFIELD_RO", "l", "GET", "i8", "0") == WRONGTYPE
    assert r.execute_command("BITFIELD_RO", "s", "OVERFLOW", "SAT") == []
    # An error quoting a client's bytes has them raw up to a NUL, CR/LF trimmed off its end and spaces inside.
    with server.raw() as c:
        for opt, shown in ((b"a\x00b\xff\r", b"a"), (b"\xfe\r\nb\xca\r", b"\xfe  b\xca"), (b"\r\nb", b"  b")):
            c.cmd("PEXPIREAT", "s", "1", opt)
            c.expect(b"-ERR Unsupported option " + shown + b"\r\n")
        c.cmd(b"no\xffcmd\r", b"a\x00b", b"x\ny")
        c.expect(b"-ERR unknown command 'no\xffcmd ', with args beginning with: 'a' 'x y' \r\n")
