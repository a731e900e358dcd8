"""Every command the server lists, called with random arguments (keys, numbers at the edges, option words, random
bytes), alone, inside MULTI and through a script's redis.pcall, over RESP2 and RESP3: the server answers each one,
stays up, a replica ends with the same keyspace, and a restart after kill -9 (appendfsync always) gives back the same
keyspace.

A hostile client's view of the whole command table at once; write_log.rs checks the same property for well-formed
sequences of every write family. The seeds are fixed, so a failure can be replayed.
"""

from __future__ import annotations

import random
import signal
import time
import zlib

import pytest

from helpers import RawConn

pytestmark = pytest.mark.ruvio_only

# Left out: commands that end or change the connection, stop or reconfigure the server, or reach other servers;
# each has its own tests.
LEFT_OUT = {
    "shutdown", "debug", "monitor", "subscribe", "psubscribe", "ssubscribe", "sync", "psync", "replicaof",
    "slaveof", "client", "quit", "reset", "wait", "waitaof", "failover", "acl", "config", "save", "bgsave",
    "bgrewriteaof", "select", "multi", "exec", "discard", "replconf", "hello", "auth", "migrate",
    # One reply per channel named (or none): they would put the replies out of step with the calls.
    "unsubscribe", "punsubscribe", "sunsubscribe",
    # They empty what the checks compare.
    "flushdb", "flushall",
}
# Called only inside MULTI and scripts, where they do not block (alone, a zero timeout waits for ever).
BLOCKING = {"blpop", "brpop", "blmove", "brpoplpush", "blmpop", "bzpopmin", "bzpopmax", "bzmpop"}
KEYS = [b"k%d" % i for i in range(6)]
NUMBERS = [0, 1, -1, 2, 3, 10, -10, 2**31, 2**63 - 1, -(2**63), 2**64, 1.5, "inf", "-inf", "nan", "+inf"]
WORDS = b"""WITHSCORES LIMIT BYSCORE BYLEX REV COUNT MATCH TYPE NX XX GT LT CH INCR LEFT RIGHT BEFORE AFTER RANK
MAXLEN GET SET INCRBY OVERFLOW WRAP SAT FAIL u8 i64 u63 #1 AND OR XOR NOT BIT BYTE WEIGHTS AGGREGATE SUM MIN MAX
STORE EX PX KEEPTTL IDX LEN MINMATCHLEN WITHMATCHLEN (1 [a - + ( [""".split()


def random_argument(rnd: random.Random, keys: list[bytes] = KEYS) -> bytes:
    c = rnd.random()
    if c < 0.3:
        return rnd.choice(keys)
    if c < 0.5:
        return str(rnd.choice(NUMBERS)).encode()
    if c < 0.7:
        return rnd.choice(WORDS)
    if c < 0.85:
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(12)))
    return b"x" * rnd.choice([0, 1, 100, 5000])


def random_call(rnd: random.Random, names: list[bytes], keys: list[bytes] = KEYS) -> list[bytes]:
    return [rnd.choice(names)] + [random_argument(rnd, keys) for _ in range(rnd.randrange(8))]


def without_remaining(reply):
    """LOCKINFO without its `remaining_ms` figures, which move with time."""
    if isinstance(reply, dict):
        return {k: without_remaining(v) for k, v in reply.items() if k != b"remaining_ms"}
    if isinstance(reply, list):
        return [without_remaining(item) for item in reply]
    return reply


def value_of(r, k: bytes, t: str):
    """A key's value in a form that compares equal on two servers holding the same data (sets and hashes sorted,
    locks without their remaining time)."""
    if t == "string":
        return r.get(k)
    if t == "list":
        return r.lrange(k, 0, -1)
    if t == "set":
        return sorted(r.smembers(k))
    if t == "zset":
        return r.zrange(k, 0, -1, withscores=True)
    if t == "hash":
        return sorted(r.hgetall(k).items())
    return without_remaining(r.execute_command("LOCKINFO", k))


def keyspace(srv) -> dict[str, tuple]:
    """Every key of every database with its type and value; keys that expire within a minute are left out (they may
    expire between two looks), the others say whether they have a deadline."""
    out = {}
    for db in range(16):
        r = srv.client(db=db)
        for k in r.scan_iter(count=1000):
            ttl = r.pttl(k)
            if 0 <= ttl <= 60_000:
                continue
            t = r.type(k).decode()
            out[f"{db}:{k!r}"] = (t, repr(value_of(r, k, t)), ttl > 0)
    return out


def keyspace_once_equal(srv, expected: dict[str, tuple]) -> dict[str, tuple]:
    """`srv`'s keyspace once it equals `expected` (a replica catching up), or as it is after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        seen = keyspace(srv)
        if seen == expected or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


@pytest.mark.parametrize("seed,protocol", [(3301, 2), (3302, 3)])
def test_random_arguments_to_every_command_keep_the_server_up_and_replica_and_log_in_step(
        server_factory, seed, protocol):
    primary = server_factory("--appendonly", "yes", "--appendfsync", "always")
    replica = server_factory("--replicaof", "127.0.0.1", str(primary.port))
    listed = primary.client().command()
    assert len(listed) > 200, "COMMAND lists the command table"
    anywhere = sorted(name.encode() for name in listed if name.lower() not in LEFT_OUT)
    names = [n for n in anywhere if n.decode() not in BLOCKING]
    rnd = random.Random(seed)
    with RawConn(primary.port, timeout=10) as c:
        c.call(b"HELLO", str(protocol).encode())
        for _ in range(10_000):
            mode = rnd.random()
            if mode < 0.1:
                c.call(b"EVAL", b"return redis.pcall(unpack(ARGV))", b"0", *random_call(rnd, anywhere))
            elif mode < 0.15:
                assert c.call(b"MULTI") == b"OK"
                for _ in range(rnd.randrange(1, 4)):
                    c.call(*random_call(rnd, anywhere))
                c.call(b"EXEC")
            else:
                call = random_call(rnd, names)
                try:
                    c.call(*call)
                except TimeoutError:
                    raise AssertionError(f"no reply to {call}") from None
        assert c.call(b"PING") == b"PONG", "the connection still answers in order"
    assert primary.alive(), primary.log_tail()

    live = keyspace(primary)
    assert len({t for t, _, _ in live.values()}) >= 3, f"the run leaves keys of several types to compare: {live}"
    assert keyspace_once_equal(replica, live) == live, "the replica holds what the primary holds"

    # kill -9, then a restart from the log: everything acknowledged is there.
    primary.proc.send_signal(signal.SIGKILL)
    primary.proc.wait(timeout=10)
    primary.proc = None
    primary.start()
    assert keyspace(primary) == live, "the log replays to the keyspace the clients were answered from"


def secret_values(admin) -> dict[bytes, str]:
    """Every secret key's type, value and whether it has a deadline, as the default user sees them."""
    out = {}
    for k in sorted(admin.scan_iter("secret:*")):
        t = admin.type(k).decode()
        out[k] = (t, repr(value_of(admin, k, t)), admin.pttl(k) >= 0)
    return out


@pytest.mark.parametrize("rules,may_read,may_write", [
    (("~pub*",), False, False),
    (("~pub*", "%R~secret:*"), True, False),
    (("~pub*", "%W~secret:*"), False, True),
], ids=["no secret keys", "secret keys read-only", "secret keys write-only"])
def test_random_commands_of_a_restricted_user_never_read_or_change_what_its_key_rules_forbid(
        server_factory, rules, may_read, may_write):
    """Secret values are upper-case (SECRET-...), key names lower-case: a reply with SECRET in it read a secret."""
    srv = server_factory()
    admin = srv.client()
    admin.execute_command("ACL", "SETUSER", "u", "on", ">pw", "+@all", "&*", *rules)
    for i in range(3):
        admin.set(f"secret:s{i}", f"SECRET-s{i}")
        admin.rpush(f"secret:l{i}", f"SECRET-l{i}", "x")
        admin.sadd(f"secret:set{i}", f"SECRET-set{i}")
        admin.zadd(f"secret:z{i}", {f"SECRET-z{i}": 1})
        admin.hset(f"secret:h{i}", f"SECRET-hf{i}", f"SECRET-hv{i}")
    before = secret_values(admin)
    keys = [b"pub:a", b"pub:b", b"pub:c", *before, b"secret:*", b"*"]
    # SWAPDB names no key: Redis lets any user with the command swap whole databases, secret keys and all.
    anywhere = sorted(n.encode() for n in admin.command() if n.lower() not in LEFT_OUT | {"swapdb"})
    names = [n for n in anywhere if n.decode() not in BLOCKING]
    rnd = random.Random(zlib.crc32(" ".join(rules).encode()))
    read = []
    with RawConn(srv.port, timeout=10) as c:
        assert c.call(b"AUTH", b"u", b"pw") == b"OK"
        for _ in range(4000):
            mode = rnd.random()
            if mode < 0.1:
                call = [b"EVAL", b"return redis.pcall(unpack(ARGV))", b"0", *random_call(rnd, anywhere, keys)]
            elif mode < 0.15:
                call = [b"EVAL", b"return redis.pcall(ARGV[1], KEYS[1], ARGV[2])", b"1", rnd.choice(keys),
                        rnd.choice(anywhere), random_argument(rnd, keys)]
            else:
                call = random_call(rnd, names, keys)
            reply = c.call(*call)
            if b"SECRET" in repr(reply).encode():
                read.append((call, reply))
    assert may_read or not read, f"secrets read: {read[:3]}"
    if not may_write:
        assert secret_values(admin) == before, "a secret key changed"
