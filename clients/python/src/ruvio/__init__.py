"""Ruvio's Python client: any Redis-protocol command, plus fencing-token locks.

>>> import ruvio
>>> r = ruvio.Ruvio("127.0.0.1", 6379)                  # doctest: +SKIP
>>> token = r.lease("job:nightly-report", 30_000)       # doctest: +SKIP

The asyncio client with the same surface is :mod:`ruvio.asyncio`; Sentinel-protocol failover discovery is
:mod:`ruvio.sentinel`.
"""

from ._commands import ListedHolder, ListedLock, LockHolder, LockInfo
from ._options import ConnectionOptions
from ._resp import PushMessage
from .client import Pipeline, PubSub, Ruvio
from .connection import Connection, ConnectionPool
from .exceptions import (
    AuthenticationError,
    BusyLoadingError,
    ConnectionError,
    DataError,
    ExecAbortError,
    InvalidResponse,
    LockError,
    LockLostError,
    NoPermissionError,
    PrimaryNotFoundError,
    PubSubError,
    ReadOnlyError,
    ResponseError,
    RuvioError,
    TimeoutError,
    WatchError,
)
from .lock import HeldLock, Lock
from .sentinel import Sentinel

__version__ = "0.1.0"

Redis = Ruvio
"""Alias for code written against redis-py."""

from_url = Ruvio.from_url

__all__ = [
    "Ruvio",
    "Redis",
    "from_url",
    "Pipeline",
    "PubSub",
    "Lock",
    "HeldLock",
    "LockInfo",
    "LockHolder",
    "ListedLock",
    "ListedHolder",
    "Sentinel",
    "Connection",
    "ConnectionPool",
    "ConnectionOptions",
    "PushMessage",
    "RuvioError",
    "ConnectionError",
    "TimeoutError",
    "AuthenticationError",
    "PrimaryNotFoundError",
    "ResponseError",
    "ReadOnlyError",
    "NoPermissionError",
    "ExecAbortError",
    "BusyLoadingError",
    "DataError",
    "InvalidResponse",
    "WatchError",
    "PubSubError",
    "LockError",
    "LockLostError",
    "__version__",
]
