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


def random_argument(rnd: random.Random) -> bytes:
    c = rnd.random()
    if c < 0.3:
        return rnd.choice(KEYS)
    if c < 0.5:
        return str(rnd.choice(NUMBERS)).encode()
    if c < 0.7:
        return rnd.choice(WORDS)
    if c < 0.85:
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(12)))
    return b"x" * rnd.choice([0, 1, 100, 5000])


def random_call(rnd: random.Random, names: list[bytes]) -> list[bytes]:
    return [rnd.choice(names)] + [random_argument(rnd) for _ in range(rnd.randrange(8))]


def without_remaining(reply):
    """LOCKINFO without its `remaining_ms` figures, which move with time."""
    if isinstance(reply, dict):
        return {k: without_remaining(v) for k, v in reply.items() if k != b"remaining_ms"}
    if isinstance(reply, list):
        return [without_remaining(item) for item in reply]
    return reply


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
            if t == "string":
                v = r.get(k)
            elif t == "list":
                v = r.lrange(k, 0, -1)
            elif t == "set":
                v = sorted(r.smembers(k))
            elif t == "zset":
                v = r.zrange(k, 0, -1, withscores=True)
            elif t == "hash":
                v = sorted(r.hgetall(k).items())
            else:
                v = without_remaining(r.execute_command("LOCKINFO", k))
            out[f"{db}:{k!r}"] = (t, repr(v), ttl > 0)
    return out


def settled_keyspace(srv, other) -> dict[str, tuple]:
    """The keyspace once `other` shows the same one (a replica catching up), within 10 s."""
    deadline = time.monotonic() + 10
    while True:
        mine, theirs = keyspace(srv), keyspace(other)
        if mine == theirs or time.monotonic() > deadline:
            return theirs
        time.sleep(0.1)


@pytest.mark.parametrize("seed,protocol", [(3301, 2), (3302, 3)])
def test_random_arguments_to_every_command_keep_the_server_up_and_replica_and_log_in_step(server_factory, seed, protocol):
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
    assert settled_keyspace(primary, replica) == live, "the replica holds what the primary holds"

    # kill -9, then a restart from the log: everything acknowledged is there.
    primary.proc.send_signal(signal.SIGKILL)
    primary.proc.wait(timeout=10)
    primary.proc = None
    primary.start()
    assert keyspace(primary) == live, "the log replays to the keyspace the clients were answered from"
