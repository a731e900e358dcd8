"""The asyncio client and lock helper: the task doing the work is cancelled if the lock is lost.

    RUVIO_PORT=6379 python examples/asyncio_lock.py
"""

import asyncio
import os

import ruvio
import ruvio.asyncio


async def main() -> None:
    r = ruvio.asyncio.Ruvio("127.0.0.1", int(os.environ.get("RUVIO_PORT", "6379")))
    try:
        async with r.lock("job:async-report", 2_000) as held:
            if held is None:
                print("someone else runs it")
                return
            for step in range(3):
                await r.ifgt("report:async", held.token, f"step {step}")
                await asyncio.sleep(1)  # renewals keep the 2 s lease alive meanwhile
            print("done with token", held.token, "after", held.renewals, "renewals")
    except ruvio.LockLostError as e:
        print("the lock was lost and the work cancelled:", e.reason)
    finally:
        await r.aclose()


asyncio.run(main())
