"""The blocking lock helper: renew in the background, stop when the lock is lost, fence every write.

    RUVIO_PORT=6379 python examples/lock_helper.py
"""

import os
import time

import ruvio

r = ruvio.Ruvio("127.0.0.1", int(os.environ.get("RUVIO_PORT", "6379")))

with r.lock("job:nightly-report", 3_000, wait_ms=5_000, max_hold_ms=60_000,
            on_lost=lambda reason: print("lost:", reason)) as held:
    if held is None:
        raise SystemExit("someone else runs it")
    print("holding with token", held.token)
    for chunk in range(5):
        if held.is_lost():
            break  # someone else may hold the lock now: stop writing
        # Fence every write with the token: a stale holder's write is refused by the store.
        assert r.ifgt("report:body", held.token, f"chunk {chunk}")
        time.sleep(1)  # five seconds of work with a 3 s TTL: the helper renews about every second
    print("renewed", held.renewals, "times, lost:", held.is_lost())
print("released:", held.loss_reason)
