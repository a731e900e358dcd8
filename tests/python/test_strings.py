"""String commands through redis-py (sync and asyncio, RESP2 and RESP3)."""

import time

import pytest
import redis

from helpers import wait_until


def test_get_set_basic(r):
    assert r.get("missing") is None
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.set("k", b"\x00\xff\r\n") is True
    assert r.get("k") == b"\x00\xff\r\n"
    assert r.set("empty", "") is True
    assert r.get("empty") == b""
    assert r.exists("empty") == 1


def test_set_nx_xx(r):
    assert r.set("k", "1", xx=True) is None
    assert r.get("k") is None
    assert r.set("k", "1", nx=True) is True
    assert r.set("k", "2", nx=True) is None
    assert r.get("k") == b"1"
    assert r.set("k", "3", xx=True) is True
    assert r.get("k") == b"3"


def test_set_get_option(r):
    assert r.set("k", "1", get=True) is None
    assert r.get("k") == b"1"
    assert r.set("k", "2", get=True) == b"1"
    assert r.get("k") == b"2"
    # NX + GET (allowed since 7.0): returns the old value and does not write
    assert r.set("k", "3", nx=True, get=True) == b"2"
    assert r.get("k") == b"2"
    assert r.set("k", "4", xx=True, get=True) == b"2"
    assert r.get("k") == b"4"
    assert r.set("fresh", "x", xx=True, get=True) is None
    assert r.exists("fresh") == 0


def test_set_expiry_options(r):
    r.set("ex", "v", ex=100)
    assert 98 <= r.ttl("ex") <= 100
    r.set("px", "v", px=100_000)
    assert 98_000 <= r.pttl("px") <= 100_000
    at = int(time.time()) + 200
    r.set("exat", "v", exat=at)
    assert r.expiretime("exat") == at
    pat = int(time.time() * 1000) + 300_000
    r.set("pxat", "v", pxat=pat)
    assert r.pexpiretime("pxat") == pat
    # a plain SET clears the TTL, KEEPTTL keeps it
    r.set("ex", "w", keepttl=True)
    assert 90 <= r.ttl("ex") <= 100
    assert r.get("ex") == b"w"
    r.set("ex", "z")
    assert r.ttl("ex") == -1


def test_set_in_the_past_deletes(r):
    r.set("k", "v")
    r.set("k", "v2", pxat=1)
    assert r.get("k") is None
    assert r.exists("k") == 0


def test_set_invalid_options(r):
    for kw, msg in [
        (dict(ex=0), "invalid expire time in 'set' command"),
        (dict(ex=-5), "invalid expire time in 'set' command"),
        (dict(px=0), "invalid expire time in 'set' command"),
    ]:
        with pytest.raises(redis.ResponseError, match=msg):
            r.set("k", "v", **kw)
    for args in (("NX", "XX"), ("EX", "10", "PX", "100"), ("KEEPTTL", "EX", "10"),
                 ("EX",), ("EX", "10", "EXAT", "10"), ("BOGUS",), ("GET", "GET", "XX", "NX")):
        with pytest.raises(redis.ResponseError, match="^syntax error$"):
            r.execute_command("SET", "k", "v", *args)
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        r.execute_command("SET", "k", "v", "EX", "abc")
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'set' command"):
        r.execute_command("SET", "k", "v", "EX", "9223372036854775807")
    assert r.exists("k") == 0


def test_set_option_case_insensitive(r):
    assert r.execute_command("SET", "k", "v", "ex", "100", "nx") in (True, b"OK", "OK")
    assert r.ttl("k") > 0


def test_setnx_setex_psetex(r):
    assert r.setnx("k", "1") is True
    assert r.setnx("k", "2") is False
    assert r.get("k") == b"1"
    assert r.setex("se", 100, "v") is True
    assert 98 <= r.ttl("se") <= 100
    assert r.psetex("pse", 100_000, "v") is True
    assert 98_000 <= r.pttl("pse") <= 100_000
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'setex' command"):
        r.setex("se", 0, "v")
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'psetex' command"):
        r.psetex("se", -1, "v")


def test_getset_getdel(r):
    assert r.getset("k", "1") is None
    assert r.getset("k", "2") == b"1"
    r.expire("k", 100)
    assert r.getset("k", "3") == b"2"
    assert r.ttl("k") == -1  # GETSET discards the TTL
    assert r.getdel("k") == b"3"
    assert r.exists("k") == 0
    assert r.getdel("k") is None


def test_getex(r):
    assert r.getex("missing", ex=10) is None
    r.set("k", "v")
    assert r.getex("k") == b"v"
    assert r.ttl("k") == -1
    assert r.getex("k", ex=100) == b"v"
    assert 98 <= r.ttl("k") <= 100
    assert r.getex("k", px=200_000) == b"v"
    assert r.pttl("k") > 150_000
    at = int(time.time()) + 500
    assert r.getex("k", exat=at) == b"v"
    assert r.expiretime("k") == at
    pat = int(time.time() * 1000) + 600_000
    assert r.getex("k", pxat=pat) == b"v"
    assert r.pexpiretime("k") == pat
    assert r.getex("k", persist=True) == b"v"
    assert r.ttl("k") == -1
    for args in (("EX", "10", "PX", "10"), ("PERSIST", "EX", "1"), ("FOO",)):
        with pytest.raises(redis.ResponseError, match="^syntax error$"):
            r.execute_command("GETEX", "k", *args)
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'getex' command"):
        r.execute_command("GETEX", "k", "EX", "0")


def test_mget_mset_msetnx(r):
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "missing") == [b"1", b"2", None]
    assert r.mget(["a"]) == [b"1"]
    assert r.msetnx({"c": "3", "a": "x"}) is False
    assert r.exists("c") == 0 and r.get("a") == b"1"
    assert r.msetnx({"c": "3", "d": "4"}) is True
    assert r.mget("c", "d") == [b"3", b"4"]
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'mset' command"):
        r.execute_command("MSET", "a", "1", "b")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'msetnx' command"):
        r.execute_command("MSETNX", "a")
    # later duplicates win
    r.execute_command("MSET", "dup", "1", "dup", "2")
    assert r.get("dup") == b"2"
    r.expire("a", 100)
    r.mset({"a": "new"})
    assert r.ttl("a") == -1


def test_incr_decr_family(r):
    assert r.incr("n") == 1
    assert r.incr("n", 10) == 11
    assert r.incrby("n", -20) == -9
    assert r.decr("n") == -10
    assert r.decrby("n", 5) == -15
    assert r.get("n") == b"-15"
    r.set("big", "9223372036854775807")
    with pytest.raises(redis.ResponseError, match="increment or decrement would overflow"):
        r.incr("big")
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        r.incr("s")
    r.set("t", "5")
    r.expire("t", 100)
    assert r.incr("t") == 6
    assert r.ttl("t") > 0  # INCR keeps the TTL


def test_incrbyfloat(r):
    assert r.incrbyfloat("f", 1.5) == 1.5
    assert r.incrbyfloat("f", "0.25") == 1.75
    assert r.get("f") == b"1.75"
    assert r.incrbyfloat("f", -1.75) == 0
    assert r.get("f") == b"0"
    r.set("i", "10")
    assert r.incrbyfloat("i", "5.0e3") == 5010
    assert r.get("i") == b"5010"
    r.set("p", "3.0")
    assert r.incrbyfloat("p", "1.1") == pytest.approx(4.1)
    assert r.get("p") == b"4.1"
    # Redis adds in long double: 1.1 + 2.2 is exactly 3.3 there, not 3.3000000000000003.
    r.set("q", "1.1")
    r.incrbyfloat("q", "2.2")
    assert r.get("q") == b"3.3"
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError, match="value is not a valid float"):
        r.incrbyfloat("s", 1)
    with pytest.raises(redis.ResponseError, match="value is not a valid float"):
        r.execute_command("INCRBYFLOAT", "f", "abc")
    with pytest.raises(redis.ResponseError, match="increment would produce NaN or Infinity"):
        r.execute_command("INCRBYFLOAT", "f", "inf")
    r.set("e", "5")
    r.expire("e", 100)
    r.incrbyfloat("e", 1)
    assert r.ttl("e") > 0


def test_append_strlen(r):
    assert r.append("a", "Hello") == 5
    assert r.append("a", " World") == 11
    assert r.get("a") == b"Hello World"
    assert r.strlen("a") == 11
    assert r.strlen("missing") == 0
    assert r.append("bin", b"\x00\r\n") == 3
    assert r.strlen("bin") == 3
    r.set("n", 10)
    assert r.append("n", 5) == 3
    assert r.incr("n") == 106


def test_getrange_substr(r):
    r.set("s", "This is a string")
    assert r.getrange("s", 0, 3) == b"This"
    assert r.getrange("s", -3, -1) == b"ing"
    assert r.getrange("s", 0, -1) == b"This is a string"
    assert r.getrange("s", 10, 100) == b"string"
    assert r.getrange("s", 5, 3) == b""
    assert r.getrange("s", 100, 200) == b""
    assert r.getrange("s", -100, 3) == b"This"
    assert r.getrange("missing", 0, -1) == b""
    assert r.substr("s", 0, 3) == b"This"
    assert r.substr("s", -6, -1) == b"string"
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        r.execute_command("GETRANGE", "s", "a", "1")


def test_setrange(r):
    assert r.setrange("s", 0, "Hello World") == 11
    assert r.setrange("s", 6, "Redis") == 11
    assert r.get("s") == b"Hello Redis"
    assert r.setrange("pad", 5, "x") == 6
    assert r.get("pad") == b"\x00\x00\x00\x00\x00x"
    assert r.setrange("none", 0, "") == 0
    assert r.exists("none") == 0
    assert r.setrange("s", 2, "") == 11
    with pytest.raises(redis.ResponseError, match="offset is out of range"):
        r.setrange("s", -1, "x")
    with pytest.raises(redis.ResponseError,
                       match=r"string exceeds maximum allowed size \(proto-max-bulk-len\)"):
        r.setrange("s", 512 * 1024 * 1024, "x")


def test_large_value_roundtrip(r):
    value = bytes(range(256)) * 4096  # 1 MiB, all byte values
    r.set("big", value)
    assert r.get("big") == value
    assert r.strlen("big") == len(value)


def test_expired_key_not_readable(r):
    r.set("k", "v", px=50)
    r.set("k2", "v", px=50)
    wait_until(lambda: r.get("k") is None, timeout=5, msg="key to expire")
    assert r.exists("k") == 0
    assert r.ttl("k") == -2
    assert r.pttl("k") == -2
    assert r.mget("k", "k2") == [None, None]
    assert r.append("k2", "x") == 1  # expired key is treated as missing
    assert r.ttl("k2") == -1
    assert r.incr("k") == 1
