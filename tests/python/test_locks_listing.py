"""LOCKS cursor [MATCH pattern] [COUNT n]: who holds which lock, without SCAN + LOCKINFO per key (issue 36).
Real server, raw RESP2 and RESP3 connections and redis-py."""

from __future__ import annotations

import time

import pytest

from helpers import NULL, Error, Map, encode

pytestmark = pytest.mark.ruvio_only


def all_locks(c, *extra) -> list[dict]:
    """Iterates LOCKS to the end (cursor 0), each lock as a dict of str -> value (holders as dicts too)."""
    cursor, out = b"0", []
    while True:
        c.send(encode("LOCKS", cursor, *extra))
        reply = c.read_reply()
        assert isinstance(reply, list) and len(reply) == 2, reply
        cursor, page = reply
        for lock in page:
            d = as_dict(lock)
            d["holders"] = [as_dict(h) for h in d["holders"]]
            out.append(d)
        if cursor == b"0":
            return out


def as_dict(v) -> dict:
    if isinstance(v, Map):
        return {k.decode(): val for k, val in v.as_dict().items()}
    assert isinstance(v, list) and len(v) % 2 == 0, v
    return {v[i].decode(): v[i + 1] for i in range(0, len(v), 2)}


@pytest.mark.parametrize("proto", [2, 3])
def test_locks_lists_holders_with_identity_at_grant_time(server, proto) -> None:
    with server.raw() as a, server.raw() as b, server.raw() as admin:
        for c in (a, b, admin):
            c.send(encode("HELLO", str(proto)))
            c.read_reply()
        a.send(encode("CLIENT", "SETNAME", "worker-a"))
        assert a.read_reply() == b"OK"
        a.send(encode("CLIENT", "ID"))
        a_id = a.read_reply()
        before = int(time.time() * 1000)
        a.send(encode("LEASE", "job:report", "30000"))
        lease_token = a.read_reply()
        b.send(encode("CLIENT", "ID"))
        b_id = b.read_reply()
        b.send(encode("SEMAPHORE", "upstream:billing", "3", "15000"))
        sem1 = b.read_reply()
        b.send(encode("SEMAPHORE", "upstream:billing", "3", "15000"))
        sem2 = b.read_reply()
        after = int(time.time() * 1000)
        admin.send(encode("SET", "plain", "value"))
        assert admin.read_reply() == b"OK"
        # A waiter on the lease (its reply comes later, on its own connection).
        with server.raw() as w:
            w.send(encode("LEASE", "job:report", "30000", "WAIT", "10000"))
            time.sleep(0.2)
            locks = {l["key"]: l for l in all_locks(admin)}
            assert set(locks) == {b"job:report", b"upstream:billing"}, "only lock keys, each once"

            lease = locks[b"job:report"]
            assert lease["kind"] == b"lease" and lease["limit"] == 1 and lease["waiters"] == 1
            [h] = lease["holders"]
            assert h["token"] == lease_token and 29_000 < h["remaining_ms"] <= 30_000
            assert before <= h["granted_ms"] <= after and 0 <= h["held_ms"] < 10_000
            assert h["client_id"] == a_id and h["client_name"] == b"worker-a"
            assert h["client_addr"].startswith(b"127.0.0.1:")

            sem = locks[b"upstream:billing"]
            assert sem["kind"] == b"semaphore" and sem["limit"] == 3 and sem["waiters"] == 0
            assert [x["token"] for x in sem["holders"]] == [sem1, sem2]
            assert all(x["client_id"] == b_id and x["client_name"] is NULL for x in sem["holders"])

            # The waiter is granted when the holder releases: LOCKS shows it under its own identity.
            w.send(encode("CLIENT", "ID"))
            a.send(encode("RELEASE", "job:report", str(lease_token)))
            assert a.read_reply() == 1
            w_token = w.read_reply()
            w_id = w.read_reply()
            [h] = [l for l in all_locks(admin, "MATCH", "job:*")][0]["holders"]
            assert h["token"] == w_token and h["client_id"] == w_id


def test_lockinfo_reply_is_unchanged(server) -> None:
    with server.raw() as c:
        c.send(encode("CLIENT", "SETNAME", "someone"))
        c.read_reply()
        c.send(encode("LEASE", "k", "30000"))
        token = c.read_reply()
        c.send(encode("LOCKINFO", "k"))
        info = c.read_reply()
        assert [info[0], info[1], info[2], info[3], info[4]] == [b"kind", b"lease", b"limit", 1, b"holders"]
        assert info[5][0][:3] == [b"token", token, b"remaining_ms"] and len(info[5][0]) == 4
        assert info[6:] == [b"waiters", 0] and len(info) == 8


def test_locks_cursor_visits_every_lock_once_and_match_filters(server) -> None:
    r = server.client()
    for i in range(300):
        assert r.execute_command("LEASE", f"lock:{i}", 60000) is not None
        r.set(f"other:{i}", "x")
    seen: list[bytes] = []
    with server.raw() as c:
        cursor = b"0"
        pages = 0
        while True:
            c.send(encode("LOCKS", cursor, "COUNT", "7"))
            cursor, page = c.read_reply()
            pages += 1
            seen += [as_dict(l)["key"] for l in page]
            if cursor == b"0":
                break
        assert pages > 1, "COUNT bounds a page"
        assert sorted(seen) == sorted(f"lock:{i}".encode() for i in range(300))
        matched = [l["key"] for l in all_locks(c, "MATCH", "lock:1?", "COUNT", "1000")]
        assert sorted(matched) == sorted(f"lock:{i}".encode() for i in range(10, 20))
        for bad, err in [(("LOCKS", "x"), "ERR invalid cursor"), (("LOCKS", "0", "COUNT", "0"), "ERR syntax error"),
                         (("LOCKS", "0", "MATCH"), "ERR syntax error"), (("LOCKS", "0", "TYPE", "lease"), "ERR syntax error")]:
            c.send(encode(*bad))
            reply = c.read_reply()
            assert isinstance(reply, Error) and str(reply) == err, (bad, reply)
    r.close()


def test_a_holder_gone_is_not_listed_and_grant_memory_is_pruned(server) -> None:
    r = server.client()
    for _ in range(3000):  # past the first prune (1024 remembered grants)
        t = r.execute_command("LEASE", "churn", 60000)
        assert r.execute_command("RELEASE", "churn", t) == 1
    t = r.execute_command("LEASE", "short", 100)
    time.sleep(0.3)
    with server.raw() as c:
        assert all_locks(c) == [], "released and expired holders are gone"
        c.send(encode("LEASE", "churn", "60000"))
        token = c.read_reply()
        c.send(encode("CLIENT", "ID"))
        cid = c.read_reply()
        [lock] = all_locks(c)
        assert lock["holders"][0]["token"] == token and lock["holders"][0]["client_id"] == cid
    r.close()
