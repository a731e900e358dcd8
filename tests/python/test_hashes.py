"""Hash commands (HSET, HGET, ... HSCAN, HRANDFIELD): replies, errors, WRONGTYPE, RESP2 and RESP3, encodings.

Runs against ruvio by default and against redis-server with RUVIO_TEST_TARGET=redis, which proves the tests
themselves: every expectation here is Redis's behaviour unless the test is marked ruvio_only.
"""

from __future__ import annotations

import re

import pytest
import redis

from helpers import NULL, Error, Map, Simple, wait_until

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def err(r, *args) -> str:
    """The error text a command answers (fails if it does not answer an error)."""
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


@pytest.fixture
def small_limits(server):
    """Packed hashes hold at most 4 fields of at most 8 bytes during the test; the previous limits come back after."""
    c = server.client()
    before = {k: c.config_get(k)[k] for k in ("hash-max-listpack-entries", "hash-max-listpack-value")}
    c.config_set("hash-max-listpack-entries", 4)
    c.config_set("hash-max-listpack-value", 8)
    try:
        yield
    finally:
        for k, v in before.items():
            c.config_set(k, v)
        c.close()


# ---- setting and reading ----------------------------------------------------------------------------------------

def test_hset_hget_and_friends(r):
    assert r.hset("h", "a", "1") == 1
    assert r.hset("h", mapping={"a": "2", "b": "3", "c": ""}) == 2  # a existed: only b and c are new
    assert r.hget("h", "a") == b"2"
    assert r.hget("h", "c") == b""
    assert r.hget("h", "missing") is None
    assert r.hget("nokey", "a") is None
    assert r.hmget("h", ["a", "missing", "b"]) == [b"2", None, b"3"]
    assert r.hmget("nokey", ["a", "b"]) == [None, None]
    assert r.hgetall("h") == {b"a": b"2", b"b": b"3", b"c": b""}
    assert r.hgetall("nokey") == {}
    assert r.hlen("h") == 3
    assert r.hlen("nokey") == 0
    assert sorted(r.hkeys("h")) == [b"a", b"b", b"c"]
    assert sorted(r.hvals("h")) == [b"", b"2", b"3"]
    assert r.hkeys("nokey") == [] and r.hvals("nokey") == []
    assert r.hexists("h", "a") is True
    assert r.hexists("h", "zz") is False
    assert r.hexists("nokey", "a") is False
    assert r.hstrlen("h", "b") == 1
    assert r.hstrlen("h", "c") == 0
    assert r.hstrlen("h", "missing") == 0
    assert r.hstrlen("nokey", "a") == 0
    assert r.type("h") == b"hash"


def test_hset_same_field_twice_in_one_call_counts_once_and_keeps_the_last(r):
    assert r.execute_command("HSET", "h", "f", "1", "f", "2", "g", "3") == 2
    assert r.hgetall("h") == {b"f": b"2", b"g": b"3"}


def test_hkeys_hvals_hgetall_keep_insertion_order_while_packed(r):
    fields = [f"f{i}" for i in range(10)]
    for i, f in enumerate(fields):
        r.hset("h", f, str(i))
    assert r.hkeys("h") == [f.encode() for f in fields]
    assert r.hvals("h") == [str(i).encode() for i in range(10)]
    assert list(r.hgetall("h").keys()) == [f.encode() for f in fields]


def test_binary_fields_and_values(r):
    field, value = b"\x00\xff\r\nf", b"\r\n\x00v\xfe"
    assert r.hset("h", field, value) == 1
    assert r.hget("h", field) == value
    assert r.hgetall("h") == {field: value}
    big = bytes(range(256)) * 40
    r.hset("h", "big", big)
    assert r.hget("h", "big") == big
    assert r.hstrlen("h", "big") == len(big)


def test_hmset_answers_ok(r):
    assert r.execute_command("HMSET", "h", "a", "1", "b", "2") in (True, b"OK", "OK")
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2"}


def test_hsetnx(r):
    assert r.hsetnx("h", "a", "1") == 1
    assert r.hsetnx("h", "a", "2") == 0
    assert r.hget("h", "a") == b"1"
    assert r.hsetnx("h", "b", "3") == 1
    assert r.hlen("h") == 2


def test_hdel_and_an_emptied_hash_is_deleted(r):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.hdel("h", "a", "missing", "a") == 1
    assert r.hdel("h", "missing") == 0
    assert r.hdel("nokey", "a") == 0
    assert r.hgetall("h") == {b"b": b"2", b"c": b"3"}
    assert r.hdel("h", "b", "c") == 2
    assert r.exists("h") == 0
    assert r.type("h") == b"none"


# ---- counters ---------------------------------------------------------------------------------------------------

def test_hincrby(r):
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrby("h", "n", -7) == -2
    assert r.hget("h", "n") == b"-2"
    r.hset("h", "max", str(2**63 - 1))
    assert r.hincrby("h", "max", 0) == 2**63 - 1
    assert err(r, "HINCRBY", "h", "max", "1") == "increment or decrement would overflow"
    r.hset("h", "min", str(-(2**63)))
    assert err(r, "HINCRBY", "h", "min", "-1") == "increment or decrement would overflow"
    r.hset("h", "s", "abc")
    assert err(r, "HINCRBY", "h", "s", "1") == "hash value is not an integer"
    r.hset("h", "sp", " 12")
    assert err(r, "HINCRBY", "h", "sp", "1") == "hash value is not an integer"
    assert err(r, "HINCRBY", "h", "n", "1.5") == "value is not an integer or out of range"
    assert err(r, "HINCRBY", "h", "n", "x") == "value is not an integer or out of range"
    assert r.hget("h", "n") == b"-2"
    # A failed HINCRBY on a missing key creates nothing.
    assert err(r, "HINCRBY", "fresh", "n", "x") == "value is not an integer or out of range"
    assert r.exists("fresh") == 0


def test_hincrbyfloat(r):
    assert r.hincrbyfloat("h", "f", 10.5) == 10.5
    assert r.hincrbyfloat("h", "f", 0.1) == pytest.approx(10.6)
    r.hset("h", "int", "3")
    assert r.hincrbyfloat("h", "int", 1.5) == 4.5
    assert r.hget("h", "int") == b"4.5"
    r.hset("h", "s", "abc")
    assert err(r, "HINCRBYFLOAT", "h", "s", "1") == "hash value is not a float"
    r.hset("h", "sp", "12 ")
    assert err(r, "HINCRBYFLOAT", "h", "sp", "1") == "hash value is not a float"
    assert err(r, "HINCRBYFLOAT", "h", "f", "x") == "value is not a valid float"
    assert err(r, "HINCRBYFLOAT", "h", "f", "inf") == "value is NaN or Infinity"
    assert err(r, "HINCRBYFLOAT", "fresh", "f", "nan") == "value is not a valid float"
    assert r.exists("fresh") == 0


def test_hincrbyfloat_result_text(server):
    # The reply (and the stored value) is the shortest decimal text, as Redis prints it.
    with server.raw() as c:
        assert c.call("HINCRBYFLOAT", "h", "g", "10.50") == b"10.5"
        assert c.call("HINCRBYFLOAT", "h", "g", "0.1") == b"10.6"
        assert c.call("HGET", "h", "g") == b"10.6"
        assert c.call("HINCRBYFLOAT", "h", "e", "5.0e3") == b"5000"
        assert c.call("HINCRBYFLOAT", "h", "e", "-5000") == b"0"
        assert c.call("HINCRBYFLOAT", "h", "big", "1e10") == b"10000000000"
        c.call("HSET", "h", "i", "9223372036854775806")
        assert c.call("HINCRBYFLOAT", "h", "i", "1") == b"9223372036854775807"


def test_hincrbyfloat_to_infinity_is_refused(r):
    r.hset("h", mapping={"f": "inf", "g": "-inf"})
    assert err(r, "HINCRBYFLOAT", "h", "f", "1") == "increment would produce NaN or Infinity"
    assert err(r, "HINCRBYFLOAT", "h", "g", "1") == "increment would produce NaN or Infinity"
    assert r.hget("h", "f") == b"inf"


# ---- HRANDFIELD -------------------------------------------------------------------------------------------------

def test_hrandfield_single_and_counts(r):
    data = {f"f{i}".encode(): f"v{i}".encode() for i in range(20)}
    r.hset("h", mapping=data)
    assert r.hrandfield("h") in data
    assert r.hrandfield("nokey") is None
    assert r.hrandfield("nokey", 3) == []
    assert r.hrandfield("h", 0) == []
    picked = r.hrandfield("h", 5)
    assert len(picked) == 5 and len(set(picked)) == 5 and set(picked) <= set(data)
    assert sorted(r.hrandfield("h", 100)) == sorted(data)  # at least the size: every field once
    repeats = r.hrandfield("h", -50)
    assert len(repeats) == 50 and set(repeats) <= set(data)
    # 200 picks with repeats out of 2 fields: both show up (the chance of not is 2 * 2**-200).
    r.hset("two", mapping={"x": "1", "y": "2"})
    assert set(r.hrandfield("two", -200)) == {b"x", b"y"}


def test_hrandfield_on_a_hashtable(r, small_limits):
    data = {f"f{i}".encode(): f"v{i}".encode() for i in range(30)}
    r.hset("h", mapping=data)
    assert r.object("encoding", "h") == b"hashtable"
    for count in (1, 5, 10, 20, 29):  # few of many, and most of them: distinct fields either way
        picked = r.hrandfield("h", count)
        assert len(picked) == count and len(set(picked)) == count and set(picked) <= set(data), count
    assert sorted(r.hrandfield("h", 30)) == sorted(data)
    assert sorted(r.hrandfield("h", 31)) == sorted(data)
    repeats = r.hrandfield("h", -100)
    assert len(repeats) == 100 and set(repeats) <= set(data)
    assert r.hrandfield("h") in data
    pairs = r.hrandfield("h", 7, withvalues=True)
    flat = [x for p in pairs for x in p] if pairs and isinstance(pairs[0], list) else pairs
    assert len(flat) == 14 and all(data[f] == v for f, v in zip(flat[::2], flat[1::2]))


def test_hrandfield_withvalues(r):
    data = {f"f{i}".encode(): f"v{i}".encode() for i in range(10)}
    r.hset("h", mapping=data)
    # RESP2 answers [f, v, f, v, ...], RESP3 [[f, v], [f, v], ...] (redis-py passes either on).
    def pairs_of(reply):
        if reply and isinstance(reply[0], list):
            assert all(len(p) == 2 for p in reply)
            return [tuple(p) for p in reply]
        assert len(reply) % 2 == 0
        return list(zip(reply[::2], reply[1::2]))

    pairs = pairs_of(r.hrandfield("h", 3, withvalues=True))
    assert len(pairs) == 3 and len({f for f, _ in pairs}) == 3
    assert all(data[f] == v for f, v in pairs)
    pairs = pairs_of(r.hrandfield("h", -30, withvalues=True))
    assert len(pairs) == 30
    assert all(data[f] == v for f, v in pairs)


def test_hrandfield_errors(r):
    r.hset("h", "a", "1")
    assert err(r, "HRANDFIELD", "h", "x") == "value is not an integer or out of range"
    assert err(r, "HRANDFIELD", "h", "x", "foo") == "value is not an integer or out of range"
    assert err(r, "HRANDFIELD", "h", "1", "foo") == "syntax error"
    assert err(r, "HRANDFIELD", "h", "1", "withvalues", "x") == "syntax error"
    assert err(r, "HRANDFIELD", "h", "-9223372036854775808") == (
        "value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    # Checked before the key is looked up: a missing key or a string answers the same.
    for key in ("h", "nokey"):
        assert err(r, "HRANDFIELD", key, "-9223372036854775807", "WITHVALUES") == "value is out of range"
        assert err(r, "HRANDFIELD", key, "4611686018427387904", "WITHVALUES") == "value is out of range"
    assert r.hrandfield("nokey", -4611686018427387903, withvalues=True) == []


def test_hrandfield_withvalues_resp_shapes(server):
    with server.raw() as c:
        c.call("HSET", "h", "a", "1", "b", "2")
        flat = c.call("HRANDFIELD", "h", "2", "WITHVALUES")
        assert isinstance(flat, list) and len(flat) == 4
        assert dict(zip(flat[::2], flat[1::2])) == {b"a": b"1", b"b": b"2"}
        c.call("HELLO", "3")
        nested = c.call("HRANDFIELD", "h", "-3", "WITHVALUES")
        assert isinstance(nested, list) and len(nested) == 3
        for pair in nested:
            assert isinstance(pair, list) and not isinstance(pair, Map)
            assert pair in ([b"a", b"1"], [b"b", b"2"])
        single = c.call("HRANDFIELD", "h", "1")
        assert single in ([b"a"], [b"b"])
        assert c.call("HRANDFIELD", "nokey") is NULL


# ---- HSCAN ------------------------------------------------------------------------------------------------------

def full_hscan(r, key, **kw) -> dict:
    got = {}
    cursor = 0
    for _ in range(10_000):
        cursor, items = r.hscan(key, cursor, **kw)
        got.update(items)
        if cursor == 0:
            return got
    raise AssertionError("HSCAN did not finish")


def test_hscan_small_and_large(r):
    small = {f"f{i}".encode(): b"v" for i in range(5)}
    r.hset("small", mapping=small)
    cursor, items = r.hscan("small", 0, count=1)
    # A packed hash is returned whole in one call, whatever COUNT says.
    assert cursor == 0 and items == small
    large = {f"field:{i}".encode(): str(i).encode() for i in range(1000)}
    r.hset("large", mapping=large)
    assert full_hscan(r, "large") == large
    assert full_hscan(r, "large", count=7) == large
    matched = full_hscan(r, "large", match="field:1*")
    assert matched == {k: v for k, v in large.items() if k.startswith(b"field:1")}
    assert r.hscan("nokey", 0) == (0, {})


def test_hscan_returns_every_stable_field_while_others_change(r):
    stable = {f"stable:{i}".encode(): b"s" for i in range(600)}
    r.hset("h", mapping=stable)
    r.hset("h", mapping={f"churn:{i}": "c" for i in range(600)})
    seen = set()
    cursor, rounds = 0, 0
    while True:
        cursor, items = r.hscan("h", cursor, count=20)
        seen.update(items)
        r.hdel("h", *[f"churn:{rounds * 10 + j}" for j in range(10)])
        r.hset("h", mapping={f"new:{rounds}:{j}": "n" for j in range(10)})
        rounds += 1
        if cursor == 0:
            break
        assert rounds < 10_000
    assert set(stable) <= seen


def test_hscan_errors(r):
    r.hset("h", "a", "1")
    assert err(r, "HSCAN", "h", "x") == "invalid cursor"
    assert err(r, "HSCAN", "h", "18446744073709551616") == "invalid cursor"
    assert err(r, "HSCAN", "h", "0", "COUNT", "0") == "syntax error"
    assert err(r, "HSCAN", "h", "0", "COUNT", "x") == "value is not an integer or out of range"
    assert err(r, "HSCAN", "h", "0", "MATCH") == "syntax error"
    assert err(r, "HSCAN", "h", "0", "TYPE", "string") == "syntax error"
    assert err(r, "HSCAN", "h", "x", "COUNT", "0") == "invalid cursor"  # the cursor is checked first


def test_hscan_novalues(server):
    with server.raw() as c:
        info = c.call("INFO", "server")
        version = re.search(rb"redis_version:(\d+)\.(\d+)", info)
        if b"server_name:ruvio" not in info and (int(version[1]), int(version[2])) < (7, 4):
            pytest.skip("HSCAN NOVALUES is Redis 7.4 (the redis-server under test is older)")
        c.call("HSET", "h", *[x for i in range(300) for x in (f"f{i}", "v")])
        keys, cursor = [], b"0"
        for _ in range(1000):
            cursor, items = c.call("HSCAN", "h", cursor, "NOVALUES", "COUNT", "50")
            keys += items
            if cursor == b"0":
                break
        assert set(keys) == {f"f{i}".encode() for i in range(300)}
        c.call("HSET", "small", "a", "1")
        assert c.call("HSCAN", "small", "0", "NOVALUES") == [b"0", [b"a"]]
        assert c.call("HSCAN", "small", "0", "NOVALUES", "MATCH", "z*") == [b"0", []]


# ---- RESP2 / RESP3 shapes ---------------------------------------------------------------------------------------

def test_hgetall_is_a_map_in_resp3_and_a_flat_array_in_resp2(server):
    with server.raw() as c:
        c.call("HSET", "h", "a", "1", "b", "2")
        assert c.call("HGETALL", "h") == [b"a", b"1", b"b", b"2"]
        assert c.call("HGETALL", "nokey") == []
        assert c.call("HSCAN", "h", "0") == [b"0", [b"a", b"1", b"b", b"2"]]
        c.call("HELLO", "3")
        m = c.call("HGETALL", "h")
        assert isinstance(m, Map) and list(m) == [(b"a", b"1"), (b"b", b"2")]
        empty = c.call("HGETALL", "nokey")
        assert isinstance(empty, Map) and len(empty) == 0
        # HSCAN stays an array in RESP3.
        scan = c.call("HSCAN", "h", "0")
        assert scan == [b"0", [b"a", b"1", b"b", b"2"]] and not isinstance(scan[1], Map)
        assert c.call("HMGET", "h", "a", "zz") == [b"1", NULL]
        assert c.call("HGET", "h", "zz") is NULL
        assert c.call("HKEYS", "h") == [b"a", b"b"]


# ---- errors: arity and WRONGTYPE ----------------------------------------------------------------------------------

@pytest.mark.parametrize("args,name", [
    (("HSET", "h", "f"), "hset"),
    (("HSET", "h", "f", "v", "g"), "hset"),
    (("HMSET", "h", "f", "v", "g"), "hmset"),
    (("HGET", "h"), "hget"),
    (("HSETNX", "h", "f"), "hsetnx"),
    (("HDEL", "h"), "hdel"),
    (("HMGET", "h"), "hmget"),
    (("HINCRBY", "h", "f"), "hincrby"),
    (("HINCRBYFLOAT", "h", "f"), "hincrbyfloat"),
    (("HLEN",), "hlen"),
    (("HGETALL", "h", "x"), "hgetall"),
    (("HSCAN", "h"), "hscan"),
    (("HRANDFIELD",), "hrandfield"),
    (("HSTRLEN", "h"), "hstrlen"),
    (("HEXISTS", "h"), "hexists"),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_wrong_number_of_arguments(r, args, name):
    assert err(r, *args) == f"wrong number of arguments for '{name}' command"


HASH_COMMANDS_ON_A_STRING = [
    ("HSET", "s", "f", "v"), ("HMSET", "s", "f", "v"), ("HSETNX", "s", "f", "v"), ("HGET", "s", "f"),
    ("HMGET", "s", "f"), ("HGETALL", "s"), ("HKEYS", "s"), ("HVALS", "s"), ("HLEN", "s"), ("HSTRLEN", "s", "f"),
    ("HEXISTS", "s", "f"), ("HDEL", "s", "f"), ("HINCRBY", "s", "f", "1"), ("HINCRBYFLOAT", "s", "f", "1"),
    ("HRANDFIELD", "s"), ("HRANDFIELD", "s", "2"), ("HRANDFIELD", "s", "2", "WITHVALUES"), ("HSCAN", "s", "0"),
]


@pytest.mark.parametrize("args", HASH_COMMANDS_ON_A_STRING, ids=lambda a: " ".join(a))
def test_hash_commands_on_a_string_are_wrongtype(server, args):
    c = server.client()
    try:
        c.set("s", "v")
        assert err(c, *args) == WRONGTYPE
        assert c.get("s") == b"v"
    finally:
        c.close()


STRING_COMMANDS_ON_A_HASH = [
    ("GET", "h"), ("GETSET", "h", "v"), ("GETDEL", "h"), ("GETEX", "h", "PX", "10000"), ("APPEND", "h", "x"),
    ("INCR", "h"), ("DECR", "h"), ("INCRBY", "h", "2"), ("DECRBY", "h", "2"), ("INCRBYFLOAT", "h", "1.5"),
    ("STRLEN", "h"), ("GETRANGE", "h", "0", "1"), ("SETRANGE", "h", "0", "x"), ("SET", "h", "v", "GET"),
]


@pytest.mark.parametrize("args", STRING_COMMANDS_ON_A_HASH, ids=lambda a: " ".join(a))
def test_string_commands_on_a_hash_are_wrongtype(server, args):
    c = server.client()
    try:
        c.hset("h", "f", "v")
        assert err(c, *args) == WRONGTYPE
        assert c.hgetall("h") == {b"f": b"v"}
        assert c.ttl("h") == -1
    finally:
        c.close()


def test_set_replaces_a_hash_and_mget_skips_it(r):
    r.hset("h", "f", "v")
    r.set("plain", "p")
    assert r.mget("h", "plain") == [None, b"p"]
    assert r.setnx("h", "x") is False
    assert r.set("h", "x", nx=True) is None
    assert r.set("h", "s1") is True
    assert r.type("h") == b"string" and r.get("h") == b"s1"
    r.hset("h2", "f", "v")
    assert r.set("h2", "s2", ex=100) is True
    assert r.get("h2") == b"s2" and 0 < r.ttl("h2") <= 100
    r.hset("h3", "f", "v")
    r.mset({"h3": "s3"})
    assert r.get("h3") == b"s3"


# ---- generic commands on hashes -----------------------------------------------------------------------------------

def test_generic_commands_work_on_hashes(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.set("s", "v")
    assert r.exists("h") == 1
    assert r.type("h") == b"hash"
    assert r.object("encoding", "h") == b"listpack"
    assert r.expire("h", 100) is True
    assert 0 < r.ttl("h") <= 100
    r.hset("h", "c", "3")  # writes keep the deadline
    r.hincrby("h", "n", 1)
    r.hincrbyfloat("h", "x", 1.5)
    r.hdel("h", "c")
    assert 0 < r.ttl("h") <= 100
    assert r.persist("h") is True
    assert r.ttl("h") == -1
    assert r.rename("h", "h2") is True
    assert r.hgetall("h2") == {b"a": b"1", b"b": b"2", b"n": b"1", b"x": b"1.5"}
    assert r.copy("h2", "h3") is True
    r.hset("h3", "a", "changed")
    assert r.hget("h2", "a") == b"1"  # a copy, not a shared value
    assert r.hget("h3", "a") == b"changed"
    cursor, keys = r.scan(0, _type="hash", count=1000)
    assert sorted(keys) == [b"h2", b"h3"]
    cursor, keys = r.scan(0, _type="string", count=1000)
    assert keys == [b"s"]
    assert r.dbsize() == 3
    assert r.delete("h2", "h3") == 2
    assert r.exists("h2", "h3") == 0


def test_a_hash_expires(r):
    r.hset("h", "f", "v")
    assert r.pexpire("h", 50) is True
    wait_until(lambda: r.exists("h") == 0, timeout=10, msg="the hash to expire")
    assert r.hget("h", "f") is None
    assert r.hlen("h") == 0
    # An expired hash is gone: HSET starts a new one without the old fields or deadline.
    r.hset("h2", "old", "1")
    r.pexpire("h2", 30)
    wait_until(lambda: r.exists("h2") == 0, timeout=10, msg="the second hash to expire")
    assert r.hset("h2", "new", "2") == 1
    assert r.hgetall("h2") == {b"new": b"2"} and r.ttl("h2") == -1


def test_move_and_swapdb_carry_hashes(r):
    r.hset("h", "f", "v")
    assert r.move("h", 1) is True
    assert r.exists("h") == 0
    r.swapdb(0, 1)
    assert r.hgetall("h") == {b"f": b"v"}


def test_hashes_in_transactions_and_watch(server, r2):
    c = server.client()
    try:
        p = c.pipeline(transaction=True)
        p.hset("h", "a", "1").hincrby("h", "a", 5).hget("h", "a").hgetall("h").hdel("h", "a")
        assert p.execute() == [1, 6, b"6", {b"a": b"6"}, 1]
        assert c.exists("h") == 0
        c.hset("w", "f", "1")
        with c.pipeline(transaction=True) as p:
            p.watch("w")
            r2.hset("w", "f", "2")  # a write behind the WATCH
            p.multi()
            p.hset("w", "f", "3")
            with pytest.raises(redis.WatchError):
                p.execute()
        assert c.hget("w", "f") == b"2"
        # A no-op HDEL is no modification: the transaction goes through.
        with c.pipeline(transaction=True) as p:
            p.watch("w")
            r2.hdel("w", "missing")
            p.multi()
            p.hset("w", "f", "4")
            assert p.execute() == [0]
        assert c.hget("w", "f") == b"4"
    finally:
        c.close()


# ---- encodings ------------------------------------------------------------------------------------------------------

def test_encoding_switches_on_field_count_and_stays(r, small_limits):
    for i in range(4):
        r.hset("h", f"f{i}", "v")
    assert r.object("encoding", "h") == b"listpack"
    r.hset("h", "f0", "changed")  # replacing a field does not grow it
    assert r.object("encoding", "h") == b"listpack"
    r.hset("h", "f4", "v")
    assert r.object("encoding", "h") == b"hashtable"
    r.hdel("h", "f1", "f2", "f3", "f4")
    assert r.object("encoding", "h") == b"hashtable"  # never converted back
    assert r.hgetall("h") == {b"f0": b"changed"}


def test_encoding_switches_on_value_or_field_length(r, small_limits):
    r.hset("v", "f", "12345678")
    assert r.object("encoding", "v") == b"listpack"
    r.hset("v", "f", "123456789")
    assert r.object("encoding", "v") == b"hashtable"
    r.hset("k", "123456789", "v")
    assert r.object("encoding", "k") == b"hashtable"
    r.hincrbyfloat("n", "f", 1.5)
    assert r.object("encoding", "n") == b"listpack"
    r.hset("many", mapping={f"f{i}": "v" for i in range(5)})
    assert r.object("encoding", "many") == b"hashtable"
    assert r.hlen("many") == 5


def test_zero_entries_limit_makes_every_hash_a_table(server):
    c = server.client()
    before = c.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"]
    try:
        c.config_set("hash-max-listpack-entries", 0)
        c.hset("h", "a", "b")
        assert c.object("encoding", "h") == b"hashtable"
        assert c.hrandfield("h") == b"a"
        assert c.hscan("h", 0) == (0, {b"a": b"b"})
    finally:
        c.config_set("hash-max-listpack-entries", before)
        c.close()


def test_old_ziplist_names_are_aliases(server):
    c = server.client()
    before = c.config_get("hash-max-listpack-value")["hash-max-listpack-value"]
    try:
        c.config_set("hash-max-ziplist-value", 33)
        assert c.config_get("hash-max-listpack-value")["hash-max-listpack-value"] == "33"
        assert c.config_get("hash-max-ziplist-value")["hash-max-ziplist-value"] == "33"
    finally:
        c.config_set("hash-max-listpack-value", before)
        c.close()


def test_object_encoding_of_strings_and_missing_keys(r):
    r.set("i", "123")
    r.set("e", "short")
    r.set("raw", "x" * 45)
    assert r.object("encoding", "i") == b"int"
    assert r.object("encoding", "e") == b"embstr"
    assert r.object("encoding", "raw") == b"raw"
    r.append("e", "more")
    assert r.object("encoding", "e") == b"raw"
    assert r.object("encoding", "missing") is None
    assert err(r, "OBJECT", "ENCODING") == "wrong number of arguments for 'object|encoding' command"
    assert err(r, "OBJECT", "NOSUCH", "k").startswith("unknown subcommand 'NOSUCH'")


@pytest.mark.ruvio_only
def test_default_limits_are_redis_conf_values(server):
    # redis.conf ships 128 / 64 (redis-server's built-in default for entries is 512).
    c = server.client()
    try:
        assert c.config_get("hash-max-listpack-entries") == {"hash-max-listpack-entries": "128"}
        assert c.config_get("hash-max-listpack-value") == {"hash-max-listpack-value": "64"}
        c.hset("h", mapping={f"f{i}": "v" for i in range(128)})
        assert c.object("encoding", "h") == b"listpack"
        c.hset("h", "one-more", "v")
        assert c.object("encoding", "h") == b"hashtable"
    finally:
        c.close()


@pytest.mark.ruvio_only
def test_locks_and_hashes_do_not_mix(server):
    with server.raw() as c:
        c.call("HSET", "h", "f", "v")
        assert c.call("LEASE", "h", "10000") == Error(WRONGTYPE)
        assert c.call("SEMAPHORE", "h", "2", "10000") == Error(WRONGTYPE)
        token = c.call("LEASE", "lk", "10000")
        assert isinstance(token, int)
        for args in (("HSET", "lk", "f", "v"), ("HGET", "lk", "f"), ("HGETALL", "lk"), ("HDEL", "lk", "f"),
                     ("HINCRBY", "lk", "f", "1"), ("HSCAN", "lk", "0")):
            assert c.call(*args) == Error(WRONGTYPE), args
        assert c.call("OBJECT", "ENCODING", "lk") == b"lease"
        assert c.call("TYPE", "h") == Simple(b"hash")


@pytest.mark.ruvio_only
def test_command_table_knows_the_hash_commands(server):
    with server.raw() as c:
        names = set(c.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "hash"))
        assert names == {b"hset", b"hmset", b"hsetnx", b"hget", b"hmget", b"hgetall", b"hkeys", b"hvals", b"hlen",
                         b"hstrlen", b"hexists", b"hdel", b"hincrby", b"hincrbyfloat", b"hrandfield", b"hscan"}
        assert c.call("COMMAND", "GETKEYS", "HSET", "k", "f", "v") == [b"k"]
        info = c.call("COMMAND", "INFO", "hincrbyfloat")[0]
        assert info[0] == b"hincrbyfloat" and info[1] == 4
        assert re.search(rb"write", b" ".join(x for x in info[2]))
