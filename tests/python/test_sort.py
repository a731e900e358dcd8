"""SORT and SORT_RO (issue 33: the Redis suite's `multi` and `scripting` units use them): ordering, BY / GET patterns,
LIMIT, ALPHA, STORE, errors, key extraction and the ACL's treatment of patterns.

Runs against ruvio by default and against redis-server with RUVIO_TEST_TARGET=redis, which proves the tests
themselves: every expectation here is Redis 7.0's behaviour.
"""

from __future__ import annotations

import pytest
import redis

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def err(r, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def test_sort_numeric_alpha_desc_limit(r):
    r.rpush("l", 3, 1, 10, 2)
    assert r.execute_command("SORT", "l") == [b"1", b"2", b"3", b"10"]
    assert r.execute_command("SORT", "l", "DESC") == [b"10", b"3", b"2", b"1"]
    assert r.execute_command("SORT", "l", "ALPHA") == [b"1", b"10", b"2", b"3"]
    assert r.execute_command("SORT", "l", "LIMIT", 1, 2) == [b"2", b"3"]
    assert r.execute_command("SORT", "l", "LIMIT", -5, 2) == [b"1", b"2"]
    assert r.execute_command("SORT", "l", "LIMIT", 10, 2) == []
    assert r.execute_command("SORT", "l", "LIMIT", 2, -1) == [b"3", b"10"]
    assert r.execute_command("SORT_RO", "l", "DESC", "LIMIT", 0, 1) == [b"10"]
    # Sets and sorted sets sort by value too (a sorted set's scores play no part unless nosort).
    r.sadd("s", 5, 4, 6)
    assert r.execute_command("SORT", "s") == [b"4", b"5", b"6"]
    r.zadd("z", {"30": 1, "10": 2, "20": 3})
    assert r.execute_command("SORT", "z") == [b"10", b"20", b"30"]
    assert r.execute_command("SORT", "missing") == []


def test_sort_by_and_get_patterns(r):
    r.rpush("l", "a", "b", "c")
    r.mset({"w_a": 3, "w_b": 1, "w_c": 2, "o_a": "A", "o_c": "C"})
    r.hset("h_a", mapping={"f": 20, "name": "ha"})
    r.hset("h_b", mapping={"f": 10, "name": "hb"})
    r.hset("h_c", mapping={"f": 30})
    assert r.execute_command("SORT", "l", "BY", "w_*") == [b"b", b"c", b"a"]
    assert r.execute_command("SORT", "l", "BY", "h_*->f", "DESC") == [b"c", b"a", b"b"]
    assert r.execute_command("SORT", "l", "BY", "w_*", "GET", "#", "GET", "o_*", "GET", "h_*->name") == [
        b"b", None, b"hb", b"c", b"C", None, b"a", b"A", b"ha"]
    # No `*` in the pattern: nothing to sort by, the list keeps its order (reversed by DESC), LIMIT still applies.
    assert r.execute_command("SORT", "l", "BY", "nosort") == [b"a", b"b", b"c"]
    assert r.execute_command("SORT", "l", "BY", "nosort", "DESC", "LIMIT", 0, 2) == [b"c", b"b"]
    # A sorted set under nosort keeps its score order.
    r.zadd("z", {"x": 3, "y": 1, "z": 2})
    assert r.execute_command("SORT", "z", "BY", "nosort") == [b"y", b"z", b"x"]
    assert r.execute_command("SORT", "z", "BY", "nosort", "DESC", "LIMIT", 1, 5) == [b"z", b"y"]
    # Missing weights sort first under ALPHA BY.
    r.mset({"n_a": "zz", "n_b": "aa"})
    assert r.execute_command("SORT", "l", "BY", "n_*", "ALPHA") == [b"c", b"b", b"a"]


def test_sort_errors(r):
    r.rpush("l", "1", "x")
    assert err(r, "SORT", "l") == "One or more scores can't be converted into double"
    assert r.execute_command("SORT", "l", "ALPHA") == [b"1", b"x"]
    assert err(r, "SORT", "l", "LIMIT", "a", 1) == "value is not an integer or out of range"
    assert err(r, "SORT", "l", "FOO") == "syntax error"
    assert err(r, "SORT", "l", "LIMIT", 1) == "syntax error"
    # SORT_RO has no STORE.
    assert err(r, "SORT_RO", "l", "STORE", "d") == "syntax error"
    r.set("str", "v")
    assert err(r, "SORT", "str") == WRONGTYPE
    r.rpush("bad", "1", "2")
    r.mset({"w_1": "1.5", "w_2": "nan"})
    assert err(r, "SORT", "bad", "BY", "w_*") == "One or more scores can't be converted into double"


def test_sort_store(r):
    r.rpush("l", 3, 1, 2)
    r.set("dst", "old string")
    assert r.execute_command("SORT", "l", "STORE", "dst") == 3
    assert r.type("dst") in (b"list", "list")
    assert r.lrange("dst", 0, -1) == [b"1", b"2", b"3"]
    # A missing GET value is stored as an empty string.
    r.set("o_1", "one")
    assert r.execute_command("SORT", "l", "GET", "o_*", "STORE", "dst") == 3
    assert r.lrange("dst", 0, -1) == [b"one", b"", b""]
    # An empty result deletes the destination.
    assert r.execute_command("SORT", "missing", "STORE", "dst") == 0
    assert r.exists("dst") == 0
    # A set without a sort is stored sorted bytewise (so a replica gets the same list).
    r.sadd("s", "b", "c", "a")
    assert r.execute_command("SORT", "s", "BY", "nosort", "STORE", "dst") == 3
    assert r.lrange("dst", 0, -1) == [b"a", b"b", b"c"]


def test_sort_keys_and_categories(r):
    assert [k if isinstance(k, bytes) else k.encode() for k in r.command_getkeys("SORT", "k", "LIMIT", "0", "1", "GET", "store", "STORE", "d")] == [b"k", b"d"]
    assert [k if isinstance(k, bytes) else k.encode() for k in r.command_getkeys("SORT_RO", "k", "BY", "x")] == [b"k"]
    assert {c if isinstance(c, bytes) else c.encode() for c in r.acl_cat("dangerous")} >= {b"sort", b"sort_ro"}
    for cat in ("list", "set", "sortedset"):
        assert b"sort" in {c if isinstance(c, bytes) else c.encode() for c in r.acl_cat(cat)}
    assert b"sort" not in {c if isinstance(c, bytes) else c.encode() for c in r.acl_cat("keyspace")}


def test_sort_acl_patterns_and_store_key(server):
    admin = server.client(protocol=2)
    admin.acl_setuser("sorter", enabled=True, passwords=["+pw"], keys=["k*"], commands=["+@all"])
    admin.rpush("k1", 2, 1)
    admin.set("kw_1", 1)
    c = server.client(protocol=2, username="sorter", password="pw")
    try:
        assert c.execute_command("SORT", "k1") == [b"1", b"2"]
        assert c.execute_command("SORT", "k1", "BY", "nosort") == [b"2", b"1"]
        assert err(c, "SORT", "k1", "BY", "kw_*") == "BY option of SORT denied due to insufficient ACL permissions."
        assert err(c, "SORT", "k1", "GET", "#") == "GET option of SORT denied due to insufficient ACL permissions."
        assert c.execute_command("SORT", "k1", "STORE", "kdst") == 2
        with pytest.raises(redis.exceptions.NoPermissionError):
            c.execute_command("SORT", "k1", "STORE", "other")
        assert admin.exists("other") == 0
    finally:
        c.close()
        admin.close()


def test_sort_in_scripts_and_multi(r):
    r.rpush("l", 3, 1, 2)
    assert r.eval("return redis.call('sort', KEYS[1])", 1, "l") == [b"1", b"2", b"3"]
    assert r.eval("return redis.call('sort', KEYS[1], 'STORE', KEYS[2])", 2, "l", "d") == 3
    # A set under nosort is sorted for a script (its own order is not reproducible).
    r.sadd("s", "c", "a", "b")
    assert r.eval("return redis.call('sort', KEYS[1], 'BY', 'nosort')", 1, "s") == [b"a", b"b", b"c"]
    p = r.pipeline(transaction=True)
    p.execute_command("SORT", "l", "DESC", "STORE", "d2")
    p.lrange("d2", 0, -1)
    assert p.execute() == [3, [b"3", b"2", b"1"]]
