#!/usr/bin/env python3
"""Random arguments to the data-type commands, sent to Ruvio and to Debian's redis-server side by side: prints each
kind of difference in the replies (command, Ruvio's answer, Redis's answer) with the shortest call that showed it and
how often it came, most frequent first. A hand-run tool for finding where Ruvio answers other than Redis 7.0 does
(which check answers first, an error text); not a test, since some differences are chosen (docs/commands.md says
which) and calls with two faults at once are answered by whichever check each server makes first.

    tests/python/.venv/bin/python scripts/differential.py [--seed N] [--calls N]

Needs target/release/ruvio and redis-server. The arguments come from tests/python/test_random_commands.py.
"""
from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from helpers import RawConn  # noqa: E402
from test_random_commands import random_call  # noqa: E402

COMMANDS = """get set setnx setex psetex getset getdel getex mget mset msetnx append strlen incr decr incrby decrby
incrbyfloat setrange getrange substr lcs setbit getbit bitcount bitpos bitop bitfield bitfield_ro del unlink exists type
expire pexpire expireat pexpireat ttl pttl persist expiretime pexpiretime rename renamenx copy touch lpush rpush lpushx
rpushx lpop rpop lrange llen lindex lset linsert lrem ltrim lpos lmove rpoplpush lmpop sadd srem sismember smismember
scard smove sinter sunion sdiff sinterstore sunionstore sdiffstore sintercard zadd zincrby zrem zscore zmscore zcard
zcount zlexcount zrange zrangebyscore zrevrangebyscore zrangebylex zrevrangebylex zrevrange zrangestore zrank zrevrank
zremrangebyrank zremrangebyscore zremrangebylex zpopmin zpopmax zmpop zunion zinter zdiff zunionstore zinterstore
zdiffstore zintercard hset hsetnx hget hmget hdel hlen hstrlen hexists hincrby hincrbyfloat hkeys hvals hgetall
hmset""".split()
# Replies whose order is not defined: compared sorted.
UNORDERED = {b"sinter", b"sunion", b"sdiff", b"hkeys", b"hvals"}


def comparable(command: bytes, reply):
    if isinstance(reply, list) and command.lower() in UNORDERED:
        return sorted(map(repr, reply))
    if isinstance(reply, list) and command.lower() == b"hgetall":
        return sorted(zip(reply[0::2], reply[1::2]))
    return reply


def error_start(reply) -> str:
    """What names a kind of difference: the start of an error (not the option it names), or "a value"."""
    return repr(reply).split("option")[0][:34] if isinstance(reply, str) else "a value"


def start(argv: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            with RawConn(port, timeout=1) as c:
                if c.call(b"PING") == b"PONG":
                    return proc
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{argv[0]} did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--ports", type=int, nargs=2, default=(17490, 17491))
    opts = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ruvio-differential-"))
    ruvio_port, redis_port = opts.ports
    both = ["--dir", str(work), "--appendonly", "no"]
    servers = [
        start([str(REPO / "target/release/ruvio"), "--port", str(ruvio_port), *both], ruvio_port),
        start(["redis-server", "--port", str(redis_port), "--save", "", *both], redis_port),
    ]
    rnd = random.Random(opts.seed)
    names = [n.encode() for n in COMMANDS]
    kinds: dict[tuple, list] = {}
    try:
        with RawConn(ruvio_port, timeout=10) as ruvio, RawConn(redis_port, timeout=10) as redis:
            for _ in range(opts.calls):
                call = random_call(rnd, names)
                mine, theirs = ruvio.call(*call), redis.call(*call)
                if repr(comparable(call[0], mine)) == repr(comparable(call[0], theirs)):
                    continue
                kind = (call[0].lower(), *(error_start(x) for x in (mine, theirs)))
                seen = kinds.setdefault(kind, [call, mine, theirs, 0])
                seen[3] += 1
                if len(repr(call)) < len(repr(seen[0])):
                    seen[:3] = [call, mine, theirs]
    finally:
        for s in servers:
            s.terminate()
            s.wait()
        shutil.rmtree(work, ignore_errors=True)
    for call, mine, theirs, n in sorted(kinds.values(), key=lambda k: -k[3]):
        print(f"{n:6} {repr(call)[:150]}\n         ruvio: {repr(mine)[:140]}\n         redis: {repr(theirs)[:140]}")
    print(f"{opts.calls} calls, {sum(k[3] for k in kinds.values())} answered differently, {len(kinds)} kinds")


if __name__ == "__main__":
    main()
