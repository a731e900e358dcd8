"""Keyspace and expiry commands through redis-py (sync and asyncio, RESP2 and RESP3)."""

import time

import pytest
import redis

from helpers import wait_until


def test_del_unlink_exists(r):
    r.mset({"a": "1", "b": "2", "c": "3"})
    assert r.exists("a", "b", "missing") == 2
    assert r.exists("a", "a", "a") == 3  # counted per argument
    assert r.delete("a", "missing") == 1
    assert r.unlink("b", "c", "c") == 2
    assert r.exists("a", "b", "c") == 0
    assert r.delete("nothing") == 0


def test_type(r):
    r.set("s", "v")
    assert r.type("s") == b"string"
    assert r.type("missing") == b"none"


def test_keys_glob(r):
    for k in ("hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo", "other", "h\\llo"):
        r.set(k, "1")
    assert sorted(r.keys("*")) == sorted([b"hello", b"hallo", b"hxllo", b"hllo", b"heeeello",
                                          b"h*llo", b"other", b"h\\llo"])
    assert sorted(r.keys("h?llo")) == [b"h*llo", b"h\\llo", b"hallo", b"hello", b"hxllo"]
    assert sorted(r.keys("h*llo")) == [b"h*llo", b"h\\llo", b"hallo", b"heeeello", b"hello",
                                       b"hllo", b"hxllo"]
    assert sorted(r.keys("h[ae]llo")) == [b"hallo", b"hello"]
    assert sorted(r.keys("h[^e]llo")) == [b"h*llo", b"h\\llo", b"hallo", b"hxllo"]
    assert sorted(r.keys("h[a-b]llo")) == [b"hallo"]
    assert r.keys("h\\*llo") == [b"h*llo"]
    assert r.keys("nomatch*") == []
    assert r.keys("other") == [b"other"]


def test_keys_pathological_pattern_is_fast(r):
    r.set("a" * 300, "1")
    start = time.monotonic()
    assert r.keys("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b") == []
    assert time.monotonic() - start < 3


def test_scan_options(r):
    r.mset({f"user:{i}": i for i in range(50)})
    r.mset({f"item:{i}": i for i in range(30)})
    seen, cursor = set(), 0
    for _ in range(1000):
        cursor, keys = r.scan(cursor, match="user:*", count=7)
        seen.update(keys)
        if cursor == 0:
            break
    assert cursor == 0
    assert seen == {f"user:{i}".encode() for i in range(50)}
    assert set(r.scan_iter(count=1000)) == set(r.keys("*"))
    assert set(r.scan_iter(_type="string", count=100)) == set(r.keys("*"))
    assert list(r.scan_iter(_type="list", count=100)) == []
    assert set(r.scan_iter(match="item:1*")) == {b"item:1"} | {f"item:{i}".encode() for i in range(10, 20)}
    with pytest.raises(redis.ResponseError, match="invalid cursor"):
        r.execute_command("SCAN", "abc")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SCAN", "0", "COUNT", "0")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SCAN", "0", "BOGUS", "1")


def test_scan_empty_db(r):
    cursor, seen = 0, []
    for _ in range(10_000):  # Redis answers "0" at once; any terminating iteration is fine
        cursor, keys = r.scan(cursor)
        seen += keys
        if cursor == 0:
            break
    assert cursor == 0 and seen == []


def test_scan_full_iteration_with_concurrent_changes(r):
    stable = {f"stable:{i}".encode() for i in range(1000)}
    r.mset({k: "1" for k in stable})
    removed_midway = {f"gone:{i}".encode() for i in range(200)}
    r.mset({k: "1" for k in removed_midway})
    seen, cursor, step = set(), 0, 0
    for step in range(1, 10_000):
        cursor, keys = r.scan(cursor, count=10)
        seen.update(keys)
        # churn: add and remove keys while the iteration runs (forces resizes in hash tables)
        r.mset({f"temp:{step}:{j}": "x" for j in range(5)})
        if step > 1:
            r.delete(*[f"temp:{step - 1}:{j}" for j in range(5)])
        if step == 5:
            r.delete(*removed_midway)
        if cursor == 0:
            break
    assert cursor == 0, "SCAN did not terminate"
    missing = stable - seen
    assert not missing, f"{len(missing)} keys present for the whole scan were never returned"


def test_rename_renamenx(r):
    r.set("a", "1", ex=100)
    assert r.rename("a", "b") is True
    assert r.get("b") == b"1" and r.exists("a") == 0
    assert r.ttl("b") > 0  # TTL moves with the value
    r.set("c", "3")
    assert r.rename("b", "c") is True  # overwrites
    assert r.get("c") == b"1"
    assert r.ttl("c") > 0
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.rename("missing", "x")
    r.set("d", "4")
    assert r.renamenx("c", "d") is False
    assert r.renamenx("c", "e") is True
    assert r.get("e") == b"1"
    assert r.rename("e", "e") is True
    assert r.renamenx("e", "e") is False
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.renamenx("missing", "x")


def test_copy(r, server):
    r.set("src", "v", ex=100)
    assert r.copy("src", "dst") is True
    assert r.get("dst") == b"v"
    assert r.ttl("dst") > 0
    r.set("src", "v2")
    assert r.copy("src", "dst") is False
    assert r.get("dst") == b"v"
    assert r.copy("src", "dst", replace=True) is True
    assert r.get("dst") == b"v2"
    assert r.copy("missing", "x") is False
    assert r.copy("src", "src", destination_db=1) is True
    other = server.client(db=1)
    try:
        assert other.get("src") == b"v2"
    finally:
        other.close()
    with pytest.raises(redis.ResponseError, match="source and destination objects are the same"):
        r.copy("src", "src")


def test_move_swapdb_select(r, server):
    db1 = server.client(db=1)
    try:
        r.set("k", "v")
        assert r.move("k", 1) is True
        assert r.exists("k") == 0
        assert db1.get("k") == b"v"
        r.set("k", "other")
        assert r.move("k", 1) is False  # already exists in target
        assert r.get("k") == b"other"
        assert r.move("missing", 1) is False
        with pytest.raises(redis.ResponseError, match="source and destination objects are the same"):
            r.move("k", 0)
        with pytest.raises(redis.ResponseError, match="DB index is out of range"):
            r.move("k", 16)
        assert r.swapdb(0, 1) is True
        assert r.get("k") == b"v"
        assert db1.get("k") == b"other"
        with pytest.raises(redis.ResponseError, match="DB index is out of range"):
            r.swapdb(0, 16)
        with pytest.raises(redis.ResponseError, match="invalid first DB index"):
            r.execute_command("SWAPDB", "a", "1")
    finally:
        db1.close()


def test_randomkey_dbsize_flush(r, server):
    assert r.randomkey() is None
    assert r.dbsize() == 0
    r.mset({"a": "1", "b": "2", "c": "3"})
    assert r.dbsize() == 3
    assert r.randomkey() in {b"a", b"b", b"c"}
    db1 = server.client(db=1)
    try:
        db1.set("x", "1")
        assert r.flushdb() is True
        assert r.dbsize() == 0
        assert db1.dbsize() == 1
        r.set("a", "1")
        assert r.flushall() is True
        assert r.dbsize() == 0 and db1.dbsize() == 0
        r.set("a", "1")
        assert r.flushdb(asynchronous=True) is True
        assert r.dbsize() == 0
        r.set("a", "1")
        assert r.execute_command("FLUSHALL", "SYNC") in (True, b"OK", "OK")
        assert r.dbsize() == 0
        with pytest.raises(redis.ResponseError, match="^syntax error$"):
            r.execute_command("FLUSHDB", "BOGUS")
    finally:
        db1.close()


def test_touch(r):
    r.mset({"a": "1", "b": "2"})
    assert r.touch("a", "b", "missing") == 2


def test_expire_family_basic(r):
    r.set("k", "v")
    assert r.ttl("k") == -1 and r.pttl("k") == -1
    assert r.expiretime("k") == -1 and r.pexpiretime("k") == -1
    assert r.ttl("missing") == -2 and r.pttl("missing") == -2
    assert r.expiretime("missing") == -2 and r.pexpiretime("missing") == -2
    assert r.expire("k", 100) is True
    assert 98 <= r.ttl("k") <= 100
    assert r.pexpire("k", 200_000) is True
    assert 190_000 <= r.pttl("k") <= 200_000
    at = int(time.time()) + 300
    assert r.expireat("k", at) is True
    assert r.expiretime("k") == at
    assert r.pexpiretime("k") == at * 1000
    pat = int(time.time() * 1000) + 400_000
    assert r.pexpireat("k", pat) is True
    assert r.pexpiretime("k") == pat
    assert r.expiretime("k") == pat // 1000 or r.expiretime("k") == (pat + 500) // 1000
    assert r.persist("k") is True
    assert r.ttl("k") == -1
    assert r.persist("k") is False
    assert r.persist("missing") is False
    assert r.expire("missing", 100) is False
    assert r.pexpire("missing", 100) is False


def test_expire_in_the_past_deletes(r):
    for cmd, arg in (("EXPIRE", -1), ("PEXPIRE", 0), ("EXPIREAT", 1), ("PEXPIREAT", 1)):
        r.set("k", "v")
        assert r.execute_command(cmd, "k", arg) in (1, True)
        assert r.exists("k") == 0
        assert r.get("k") is None


def test_expire_nx_xx_gt_lt(r):
    r.set("k", "v")
    assert r.expire("k", 100, xx=True) is False  # no TTL yet
    assert r.expire("k", 100, gt=True) is False  # no TTL counts as infinite
    assert r.ttl("k") == -1
    assert r.expire("k", 100, nx=True) is True
    assert r.expire("k", 200, nx=True) is False
    assert r.expire("k", 200, xx=True) is True
    assert r.expire("k", 100, gt=True) is False
    assert r.expire("k", 300, gt=True) is True
    assert r.expire("k", 400, lt=True) is False
    assert r.expire("k", 50, lt=True) is True
    assert 45 <= r.ttl("k") <= 50
    r.set("p", "v")
    assert r.expire("p", 100, lt=True) is True  # infinite > 100
    assert r.pexpire("p", 50_000, lt=True) is True
    assert r.pexpireat("p", int(time.time() * 1000) + 10_000_000, gt=True) is True
    assert r.expireat("p", int(time.time()) + 10, xx=True) is True
    assert r.expireat("p", int(time.time()) + 10, nx=True) is False
    with pytest.raises(redis.ResponseError,
                       match="NX and XX, GT or LT options at the same time are not compatible"):
        r.execute_command("EXPIRE", "k", "10", "NX", "XX")
    with pytest.raises(redis.ResponseError,
                       match="NX and XX, GT or LT options at the same time are not compatible"):
        r.execute_command("EXPIRE", "k", "10", "NX", "GT")
    with pytest.raises(redis.ResponseError, match="GT and LT options at the same time are not compatible"):
        r.execute_command("EXPIRE", "k", "10", "GT", "LT")
    with pytest.raises(redis.ResponseError, match="Unsupported option FOO"):
        r.execute_command("EXPIRE", "k", "10", "FOO")


def test_expire_invalid_values(r):
    r.set("k", "v")
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        r.execute_command("EXPIRE", "k", "abc")
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'expire' command"):
        r.execute_command("EXPIRE", "k", "9223372036854775807")
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'pexpire' command"):
        r.execute_command("PEXPIRE", "k", "9223372036854775807")
    assert r.ttl("k") == -1


def test_expired_key_invisible_everywhere(r):
    r.mset({"live": "1"})
    r.set("dying", "v", px=30)
    wait_until(lambda: r.pttl("dying") == -2, timeout=5, msg="expiry")
    assert r.exists("dying") == 0
    assert r.get("dying") is None
    assert r.keys("*") == [b"live"]
    assert set(r.scan_iter()) == {b"live"}
    assert r.type("dying") == b"none"
    assert r.dbsize() <= 2
    assert r.randomkey() == b"live"
    assert r.setnx("dying", "new") is True


def test_active_expiry_reclaims_untouched_keys(r):
    r.mset({f"tmp:{i}": "v" for i in range(100)})
    for i in range(100):
        r.pexpire(f"tmp:{i}", 10)
    r.set("keep", "1")
    # never read the keys: the server's background expiry must remove them (DBSIZE counts them
    # until then, exactly like Redis)
    wait_until(lambda: r.dbsize() == 1, timeout=10, interval=0.1, msg="active expiry")


def test_info_keyspace_counts(r):
    r.set("a", "1")
    r.set("b", "1", ex=100)
    info = r.info("keyspace")
    assert info["db0"]["keys"] == 2
    assert info["db0"]["expires"] == 1
