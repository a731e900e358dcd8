"""Lock-cycle load driver for bench/python_client_locks.sh.

    python lock_cycle.py --client ruvio|redis-py --flavor sync|asyncio --port P [--clients 50] [--keys 10000]
                         [--seconds 10] [--ttl 10000]

ruvio:    t = r.lease(key, ttl); if t: r.release(key, t)                                   (this package)
redis-py: r.set(key, tok, nx=True, px=ttl); if ok: r.evalsha(<compare-and-delete>, 1, key, tok)

CLIENTS callers (threads sharing one client, or asyncio tasks sharing one client) run cycles on random keys out of
KEYS for SECONDS; a cycle whose acquire is refused counts as a cycle of one round trip. Prints one line of
key=value fields: cycles, cycles_per_sec, refused, p50_us, p99_us, client_cpu_s (user+system of this process).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import threading
import time
import uuid
from typing import Any, List

CAD = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def pct(lat: List[float], p: float) -> float:
    if not lat:
        return 0.0
    lat.sort()
    return lat[min(len(lat) - 1, int(len(lat) * p))] * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", choices=["ruvio", "redis-py"], required=True)
    ap.add_argument("--flavor", choices=["sync", "asyncio"], required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--ttl", type=int, default=10000)
    a = ap.parse_args()
    keys = [f"bench:lock:{i}" for i in range(a.keys)]
    lat: List[List[float]] = [[] for _ in range(a.clients)]
    refused = [0] * a.clients
    t0 = os.times()

    if a.flavor == "sync":
        if a.client == "ruvio":
            import ruvio

            r: Any = ruvio.Ruvio("127.0.0.1", a.port)

            def cycle(key: str) -> bool:
                t = r.lease(key, a.ttl)
                if t is None:
                    return False
                r.release(key, t)
                return True
        else:
            import redis

            r = redis.Redis("127.0.0.1", a.port)
            sha = r.script_load(CAD)

            def cycle(key: str) -> bool:
                tok = uuid.uuid4().hex
                if not r.set(key, tok, nx=True, px=a.ttl):
                    return False
                r.evalsha(sha, 1, key, tok)
                return True

        stop = time.monotonic() + a.seconds

        def worker(i: int) -> None:
            rnd = random.Random(i)
            mine = lat[i]
            while time.monotonic() < stop:
                s = time.perf_counter()
                if not cycle(keys[rnd.randrange(a.keys)]):
                    refused[i] += 1
                mine.append(time.perf_counter() - s)

        start = time.monotonic()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
    else:
        async def run() -> float:
            if a.client == "ruvio":
                import ruvio.asyncio

                ar: Any = ruvio.asyncio.Ruvio("127.0.0.1", a.port)

                async def acycle(key: str) -> bool:
                    t = await ar.lease(key, a.ttl)
                    if t is None:
                        return False
                    await ar.release(key, t)
                    return True
            else:
                import redis.asyncio

                ar = redis.asyncio.Redis(host="127.0.0.1", port=a.port)
                sha = await ar.script_load(CAD)

                async def acycle(key: str) -> bool:
                    tok = uuid.uuid4().hex
                    if not await ar.set(key, tok, nx=True, px=a.ttl):
                        return False
                    await ar.evalsha(sha, 1, key, tok)
                    return True

            stop = time.monotonic() + a.seconds

            async def worker(i: int) -> None:
                rnd = random.Random(i)
                mine = lat[i]
                while time.monotonic() < stop:
                    s = time.perf_counter()
                    if not await acycle(keys[rnd.randrange(a.keys)]):
                        refused[i] += 1
                    mine.append(time.perf_counter() - s)

            start = time.monotonic()
            await asyncio.gather(*(worker(i) for i in range(a.clients)))
            elapsed = time.monotonic() - start
            await ar.aclose()
            return elapsed

        elapsed = asyncio.run(run())
    t1 = os.times()
    all_lat = [x for xs in lat for x in xs]
    cycles = len(all_lat)
    print(f"cycles={cycles} cycles_per_sec={cycles / elapsed:.0f} refused={sum(refused)} "
          f"p50_us={pct(all_lat, 0.5):.0f} p99_us={pct(all_lat, 0.99):.0f} "
          f"client_cpu_s={(t1.user - t0.user) + (t1.system - t0.system):.2f}")


if __name__ == "__main__":
    main()
