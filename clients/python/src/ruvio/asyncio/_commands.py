"""The typed command methods of the asyncio client (shared by :class:`ruvio.asyncio.Ruvio` and a pipeline's
``immediate`` view). Kept in step with ``ruvio/_sync_commands.py``: same names, arguments and docs, ``async``."""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple, TypeVar

from .. import _commands as c
from .._commands import Cmd, KeyT, ListedLock, LockInfo, ValueT
from .._resp import EncodableT

T = TypeVar("T")


class AsyncCommands:
    """Command methods. Subclasses provide :meth:`_run`."""

    async def _run(self, cmd: Cmd[T]) -> T:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- any command ------------------------------------------------------------------------------------------
    async def execute_command(self, *args: EncodableT) -> Any:
        """Sends any command and returns its reply as Python values (see :mod:`ruvio._resp` for the mapping).
        An error reply raises :class:`~ruvio.ResponseError`."""
        return await self._run(c.execute(*args))

    # -- locks ------------------------------------------------------------------------------------------------
    async def lease(self, key: KeyT, ttl_ms: int, wait_ms: Optional[int] = None) -> Optional[int]:
        """``LEASE key ttl_ms [WAIT wait_ms]``: the fencing token when you now hold the lock, ``None`` when someone
        else holds it (or, with ``wait_ms``, the wait ran out; ``wait_ms=0`` waits without limit).

        Never retried after an ambiguous failure: a :class:`~ruvio.ConnectionError` or :class:`~ruvio.TimeoutError`
        with ``sent=True`` means the grant may have happened (it then frees itself when its TTL ends)."""
        return await self._run(c.lease(key, ttl_ms, wait_ms))

    async def semaphore(self, key: KeyT, limit: int, ttl_ms: int, wait_ms: Optional[int] = None) -> Optional[int]:
        """``SEMAPHORE key limit ttl_ms [WAIT wait_ms]``: the token of your slot, or ``None`` when all ``limit``
        slots are taken. Never retried after an ambiguous failure (see :meth:`lease`)."""
        return await self._run(c.semaphore(key, limit, ttl_ms, wait_ms))

    async def renew(self, key: KeyT, token: int, ttl_ms: int) -> bool:
        """``RENEW key token ttl_ms``: True when ``token`` still holds ``key`` and its deadline moved to now +
        ``ttl_ms``; False when it no longer holds it. Retried on a fresh connection after a connection loss."""
        return await self._run(c.renew(key, token, ttl_ms))

    async def release(self, key: KeyT, token: int) -> bool:
        """``RELEASE key token``: True when released, False if the token no longer matches. Retried on a fresh
        connection after a connection loss (safe: it carries the token)."""
        return await self._run(c.release(key, token))

    async def ifgt(self, key: KeyT, token: int, value: ValueT, px_ms: Optional[int] = None) -> bool:
        """``IFGT key token value [PX px_ms]``: a fenced write. True when written, False when a higher token
        already wrote ``key``."""
        return await self._run(c.ifgt(key, token, value, px_ms))

    async def lock_info(self, key: KeyT) -> Optional[LockInfo]:
        """``LOCKINFO key``: kind, limit, holders (token, remaining_ms) and waiters, or ``None`` without a lock."""
        return await self._run(c.lock_info(key))

    async def locks(self, cursor: int = 0, match: Optional[str] = None,
              count: Optional[int] = None) -> Tuple[int, List[ListedLock]]:
        """``LOCKS cursor [MATCH match] [COUNT count]``: (next cursor, locks of this page), each lock with its
        holders' tokens, grant times and clients. Continue with the returned cursor until it is 0 (as SCAN)."""
        return await self._run(c.locks(cursor, match, count))

    async def scan_locks(self, match: Optional[str] = None, count: Optional[int] = None) -> AsyncIterator[ListedLock]:
        """Every lock (matching ``match``), iterating ``LOCKS`` to the end."""
        cursor = 0
        while True:
            cursor, page = await self.locks(cursor, match, count)
            for lock in page:
                yield lock
            if cursor == 0:
                return

    # -- everyday commands ------------------------------------------------------------------------------------
    async def ping(self) -> bool:
        """``PING``: True on ``PONG``."""
        return await self._run(c.ping())

    async def echo(self, value: ValueT) -> Any:
        """``ECHO value``."""
        return await self._run(c.echo(value))

    async def get(self, key: KeyT) -> Any:
        """``GET key``: the value (bytes, or str with ``decode_responses``), ``None`` when missing."""
        return await self._run(c.get(key))

    async def set(
        self,
        key: KeyT,
        value: ValueT,
        ex: Optional[int] = None,
        px: Optional[int] = None,
        nx: bool = False,
        xx: bool = False,
        keepttl: bool = False,
        get: bool = False,
    ) -> Any:
        """``SET``: True when set, ``None`` when NX/XX prevented it; with ``get=True`` the old value."""
        return await self._run(c.set(key, value, ex, px, nx, xx, keepttl, get))

    async def delete(self, *keys: KeyT) -> int:
        """``DEL``: how many keys were removed."""
        return await self._run(c.delete(*keys))

    async def exists(self, *keys: KeyT) -> int:
        """``EXISTS``: how many of the keys exist."""
        return await self._run(c.exists(*keys))

    async def expire(self, key: KeyT, seconds: int) -> bool:
        """``EXPIRE``: True when the timeout was set."""
        return await self._run(c.expire(key, seconds))

    async def pexpire(self, key: KeyT, ms: int) -> bool:
        """``PEXPIRE``: True when the timeout was set."""
        return await self._run(c.pexpire(key, ms))

    async def ttl(self, key: KeyT) -> int:
        """``TTL``: seconds left, -1 without expiry, -2 when missing."""
        return await self._run(c.ttl(key))

    async def pttl(self, key: KeyT) -> int:
        """``PTTL``: milliseconds left, -1 without expiry, -2 when missing."""
        return await self._run(c.pttl(key))

    async def incr(self, key: KeyT, amount: int = 1) -> int:
        """``INCR``/``INCRBY``: the new value."""
        return await self._run(c.incr(key, amount))

    async def decr(self, key: KeyT, amount: int = 1) -> int:
        """``DECR``/``DECRBY``: the new value."""
        return await self._run(c.decr(key, amount))

    async def mget(self, *keys: KeyT) -> List[Any]:
        """``MGET``: values in key order, ``None`` for missing keys."""
        return await self._run(c.mget(*keys))

    async def mset(self, mapping: Mapping[KeyT, ValueT]) -> bool:
        """``MSET``: True."""
        return await self._run(c.mset(mapping))

    async def keys(self, pattern: KeyT = "*") -> List[Any]:
        """``KEYS pattern``."""
        return await self._run(c.keys(pattern))

    async def type(self, key: KeyT) -> str:
        """``TYPE``: ``string``, ``lease``, ``semaphore``, ``none``..."""
        return await self._run(c.type_(key))

    async def publish(self, channel: KeyT, message: ValueT) -> int:
        """``PUBLISH``: how many subscriptions received the message."""
        return await self._run(c.publish(channel, message))

    async def dbsize(self) -> int:
        """``DBSIZE``."""
        return await self._run(c.dbsize())

    async def flushdb(self) -> bool:
        """``FLUSHDB``: True."""
        return await self._run(c.flushdb())

    async def client_id(self) -> int:
        """``CLIENT ID`` of the connection that ran it."""
        return await self._run(c.client_id())

    async def client_getname(self) -> Optional[str]:
        """``CLIENT GETNAME`` of the connection that ran it."""
        return await self._run(c.client_getname())

    async def hello(self) -> Dict[str, Any]:
        """``HELLO`` (without arguments): the server's description as a dict."""
        return await self._run(c.hello())

    async def info(self, section: Optional[str] = None) -> Dict[str, Any]:
        """``INFO [section]`` parsed into a dict (numbers converted)."""
        return await self._run(c.info(section))
