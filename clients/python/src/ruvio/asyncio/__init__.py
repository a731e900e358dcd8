"""The asyncio client, with the same surface as the blocking one (as ``redis.asyncio`` mirrors ``redis``).

>>> import ruvio.asyncio
>>> r = ruvio.asyncio.Ruvio("127.0.0.1", 6379)            # doctest: +SKIP
>>> token = await r.lease("job:nightly-report", 30_000)   # doctest: +SKIP
"""

from .client import Pipeline, PubSub, Ruvio
from .connection import Connection, ConnectionPool
from .lock import HeldLock, Lock
from .sentinel import Sentinel

Redis = Ruvio
from_url = Ruvio.from_url

__all__ = ["Ruvio", "Redis", "from_url", "Pipeline", "PubSub", "Lock", "HeldLock", "Connection", "ConnectionPool",
           "Sentinel"]
