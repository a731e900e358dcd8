"""The asyncio client :class:`Ruvio`, its :class:`Pipeline` and :class:`PubSub` (same surface as the blocking ones,
with ``await``)."""

from __future__ import annotations

import asyncio
import ssl as _ssl
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Sequence, Set, TypeVar

from .. import _commands as c
from .._commands import Cmd, KeyT
from .._options import DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ConnectionOptions, parse_url
from .._resp import EncodableT, encode_command, encode_many
from ..client import _SUB_KINDS, _message, command_timeout_for
from ..connection import DEFAULT
from ..exceptions import (
    ConnectionError, ExecAbortError, PubSubError, ReadOnlyError, ResponseError, TimeoutError, WatchError,
)
from ._commands import AsyncCommands
from .connection import Connection, ConnectionPool

if TYPE_CHECKING:  # pragma: no cover
    from .lock import Lock

T = TypeVar("T")
_RETRY_PAUSE = 0.05


class Ruvio(AsyncCommands):
    """The asyncio client: ``r = ruvio.asyncio.Ruvio("127.0.0.1", 6379)``, then ``await r.lease(...)``.

    Same options as :class:`ruvio.Ruvio`. Each command borrows a connection from the pool, so many tasks can use
    one client concurrently. Use a client from one event loop only. ``await r.aclose()`` (or ``async with``)
    closes its connections.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 6379,
        *,
        username: Optional[str] = None,
        password: Optional[str] = None,
        db: int = 0,
        client_name: Optional[str] = None,
        protocol: int = 3,
        connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT,
        command_timeout: Optional[float] = DEFAULT_COMMAND_TIMEOUT,
        ssl: bool = False,
        ssl_context: Optional[_ssl.SSLContext] = None,
        ssl_ca_certs: Optional[str] = None,
        ssl_certfile: Optional[str] = None,
        ssl_keyfile: Optional[str] = None,
        ssl_check_hostname: bool = True,
        ssl_cert_reqs: str = "required",
        decode_responses: bool = False,
        durability_replicas: Optional[int] = None,
        max_connections: Optional[int] = None,
        pool_timeout: Any = DEFAULT,
        connection_pool: Optional[ConnectionPool] = None,
    ) -> None:
        if connection_pool is None:
            options = ConnectionOptions(
                host=host, port=port, username=username, password=password, db=db, client_name=client_name,
                protocol=protocol, connect_timeout=connect_timeout, command_timeout=command_timeout, ssl=ssl,
                ssl_context=ssl_context, ssl_ca_certs=ssl_ca_certs, ssl_certfile=ssl_certfile,
                ssl_keyfile=ssl_keyfile, ssl_check_hostname=ssl_check_hostname, ssl_cert_reqs=ssl_cert_reqs,
                decode_responses=decode_responses, durability_replicas=durability_replicas,
            )
            connection_pool = ConnectionPool(options, max_connections=max_connections, pool_timeout=pool_timeout)
        self.connection_pool = connection_pool
        self.options = connection_pool.options

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> "Ruvio":
        """As :meth:`ruvio.Ruvio.from_url`."""
        kw = parse_url(url)
        kw.update(kwargs)
        return cls(**kw)

    async def _run(self, cmd: Cmd[T]) -> T:
        return cmd.parse(await self._execute(cmd))

    async def _execute(self, cmd: Cmd[Any]) -> Any:
        pool = self.connection_pool
        timeout = command_timeout_for(self.options, cmd)
        limit = self.options.command_timeout
        deadline = time.monotonic() + (limit if limit is not None else DEFAULT_COMMAND_TIMEOUT)
        resent_unsent = False
        while True:
            try:
                conn = await pool.get_connection()
            except (ConnectionError, TimeoutError):
                if (cmd.retry_safe or pool.discovers) and time.monotonic() < deadline:
                    await asyncio.sleep(_RETRY_PAUSE)
                    continue
                raise
            try:
                await conn.send_command(cmd.args)
                reply = await conn.read_reply(timeout)
            except (ConnectionError, TimeoutError) as e:
                pool.release(conn)
                if pool.discovers:
                    pool.reset()
                if not e.sent and not resent_unsent:
                    resent_unsent = True
                    continue
                if cmd.retry_safe and isinstance(e, ConnectionError) and time.monotonic() < deadline:
                    await asyncio.sleep(_RETRY_PAUSE)
                    continue
                raise
            except BaseException:
                conn.disconnect()
                pool.release(conn)
                raise
            if isinstance(reply, ReadOnlyError):
                conn.disconnect()
                pool.release(conn)
                if pool.discovers:
                    pool.reset()
                    if time.monotonic() < deadline:
                        await asyncio.sleep(_RETRY_PAUSE)
                        continue
                raise reply
            pool.release(conn)
            if isinstance(reply, ResponseError):
                raise reply
            return reply

    def pipeline(self, transaction: bool = True) -> "Pipeline":
        """An asyncio :class:`Pipeline` (``await pipe.execute()``)."""
        return Pipeline(self, transaction)

    async def transaction(
        self, func: Callable[["Pipeline"], Awaitable[Any]], *watches: KeyT, max_tries: int = 100
    ) -> List[Any]:
        """As :meth:`ruvio.Ruvio.transaction`, with an ``async`` ``func``."""
        for _ in range(max_tries):
            async with self.pipeline(True) as pipe:
                try:
                    if watches:
                        await pipe.watch(*watches)
                    await func(pipe)
                    return await pipe.execute()
                except WatchError:
                    continue
        raise WatchError(f"transaction gave up after {max_tries} tries")

    def pubsub(self, ignore_subscribe_messages: bool = False) -> "PubSub":
        """An asyncio :class:`PubSub` on its own connection."""
        return PubSub(self.connection_pool, ignore_subscribe_messages)

    def lock(
        self,
        key: KeyT,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        auto_renew: bool = True,
        max_hold_ms: Optional[int] = None,
        safety_margin_ms: Optional[int] = None,
        on_lost: Optional[Callable[[str], Any]] = None,
        cancel_on_loss: bool = True,
    ) -> "Lock":
        """``async with r.lock("job", 30_000) as held:`` (``held`` is None when not acquired). With
        ``cancel_on_loss`` (default) the task running the block is cancelled when the lock is lost, and the
        block ends with :class:`~ruvio.LockLostError`. See :mod:`ruvio.asyncio.lock`."""
        from .lock import Lock

        return Lock(self, key, ttl_ms, wait_ms=wait_ms, auto_renew=auto_renew, max_hold_ms=max_hold_ms,
                    safety_margin_ms=safety_margin_ms, on_lost=on_lost, cancel_on_loss=cancel_on_loss)

    def semaphore_lock(
        self,
        key: KeyT,
        limit: int,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        auto_renew: bool = True,
        max_hold_ms: Optional[int] = None,
        safety_margin_ms: Optional[int] = None,
        on_lost: Optional[Callable[[str], Any]] = None,
        cancel_on_loss: bool = True,
    ) -> "Lock":
        """Like :meth:`lock`, for one slot of a semaphore of ``limit`` slots."""
        from .lock import Lock

        return Lock(self, key, ttl_ms, limit=limit, wait_ms=wait_ms, auto_renew=auto_renew,
                    max_hold_ms=max_hold_ms, safety_margin_ms=safety_margin_ms, on_lost=on_lost,
                    cancel_on_loss=cancel_on_loss)

    async def aclose(self) -> None:
        """Closes the pool's connections (new ones open on demand)."""
        await self.connection_pool.disconnect()

    async def close(self) -> None:
        """Alias of :meth:`aclose`."""
        await self.aclose()

    async def __aenter__(self) -> "Ruvio":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<ruvio.asyncio.Ruvio {self.options.host}:{self.options.port} db={self.options.db}>"


class _Pinned(AsyncCommands):
    def __init__(self, pipe: "Pipeline") -> None:
        self._pipe = pipe

    async def _run(self, cmd: Cmd[T]) -> T:
        conn = await self._pipe._pinned_connection()
        reply = await conn.call(cmd.args, timeout=command_timeout_for(self._pipe.client.options, cmd))
        if isinstance(reply, ResponseError):
            raise reply
        return cmd.parse(reply)


class Pipeline:
    """As :class:`ruvio.Pipeline`; queuing methods are plain calls, :meth:`execute` is awaited."""

    def __init__(self, client: Ruvio, transaction: bool = True) -> None:
        self.client = client
        self.transaction = transaction
        self._queue: List[Cmd[Any]] = []
        self._conn: Optional[Connection] = None
        self._watching = False
        self.immediate = _Pinned(self)

    async def _pinned_connection(self) -> Connection:
        if self._conn is None:
            self._conn = await self.client.connection_pool.get_connection()
        return self._conn

    def __len__(self) -> int:
        return len(self._queue)

    async def __aenter__(self) -> "Pipeline":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.reset()

    def __getattr__(self, name: str) -> Callable[..., "Pipeline"]:
        builder = c.PIPELINE_COMMANDS.get(name)
        if builder is None:
            raise AttributeError(name)
        b: Callable[..., Cmd[Any]] = builder  # type: ignore[assignment]

        def queue(*args: Any, **kwargs: Any) -> "Pipeline":
            self._queue.append(b(*args, **kwargs))
            return self

        return queue

    def execute_command(self, *args: EncodableT) -> "Pipeline":
        """Queues any command."""
        self._queue.append(c.execute(*args))
        return self

    async def watch(self, *keys: KeyT) -> None:
        """``WATCH`` now on the pipeline's own connection."""
        await self.immediate.execute_command("WATCH", *keys)
        self._watching = True

    async def unwatch(self) -> None:
        """``UNWATCH`` now."""
        if self._conn is not None:
            await self.immediate.execute_command("UNWATCH")
        self._watching = False

    def multi(self) -> None:
        """Marks the start of the transaction's queue (for redis-py habits)."""
        self.transaction = True

    async def reset(self) -> None:
        """Drops the queue and gives the connection back (after UNWATCH when watching)."""
        self._queue = []
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._watching and conn.connected:
                try:
                    r = await conn.call(["UNWATCH"])
                    if isinstance(r, ResponseError):
                        conn.disconnect()
                except (ConnectionError, TimeoutError):
                    pass
            self.client.connection_pool.release(conn)
        self._watching = False

    async def execute(self, raise_on_error: bool = True) -> List[Any]:
        """As :meth:`ruvio.Pipeline.execute`."""
        queue = self._queue
        try:
            cmds: List[Sequence[EncodableT]] = [q.args for q in queue]
            if self.transaction:
                cmds = [["MULTI"], *cmds, ["EXEC"]]
            if not cmds:
                return []
            conn = await self._pinned_connection()
            block = [q for q in queue if q.block_ms is not None]
            timeout = self.client.options.command_timeout
            if block and timeout is not None and not self.transaction:
                timeout = None if any(q.block_ms == 0 for q in block) else \
                    timeout + sum(q.block_ms or 0 for q in block) / 1000.0
            await conn.send_packed(encode_many(cmds))
            replies = [await conn.read_reply(timeout) for _ in cmds]
            if self.transaction:
                queued = replies[1:-1]
                result = replies[-1]
                if isinstance(replies[0], ResponseError):
                    raise replies[0]
                if isinstance(result, ResponseError):
                    firsts = [r for r in queued if isinstance(r, ResponseError)]
                    if firsts:
                        raise ExecAbortError(f"{result}: {firsts[0]}")
                    raise result
                if result is None:
                    raise WatchError("a watched key changed: the transaction did not run")
                replies = list(result)
            out = []
            for q, r in zip(queue, replies):
                if isinstance(r, ResponseError):
                    if raise_on_error:
                        raise r
                    out.append(r)
                else:
                    out.append(q.parse(r))
            return out
        finally:
            self._watching = False
            await self.reset()


class PubSub:
    """As :class:`ruvio.PubSub`, with ``await``; :meth:`listen` is an async iterator."""

    def __init__(self, pool: ConnectionPool, ignore_subscribe_messages: bool = False) -> None:
        self._pool = pool
        self.ignore_subscribe_messages = ignore_subscribe_messages
        self._conn: Optional[Connection] = None
        self.channels: Set[Any] = set()
        self.patterns: Set[Any] = set()

    async def _connection(self) -> Connection:
        if self._conn is None:
            conn = self._pool.make_connection()
            conn.keep_pushes = True
            await conn.connect()
            self._conn = conn
            again: List[List[EncodableT]] = []
            if self.channels:
                again.append(["SUBSCRIBE", *self.channels])
            if self.patterns:
                again.append(["PSUBSCRIBE", *self.patterns])
            if again:
                await conn.send_packed(encode_many(again))
        return self._conn

    @property
    def subscribed(self) -> bool:
        """True while at least one channel or pattern is subscribed."""
        return bool(self.channels or self.patterns)

    async def _send(self, *args: EncodableT) -> None:
        conn = await self._connection()
        try:
            await conn.send_packed(encode_command(args))
        except (ConnectionError, TimeoutError):
            self._conn = None
            await (await self._connection()).send_packed(encode_command(args))

    async def subscribe(self, *channels: KeyT) -> None:
        """``SUBSCRIBE``; the confirmations arrive as messages."""
        await self._send("SUBSCRIBE", *channels)
        self.channels.update(channels)

    async def psubscribe(self, *patterns: KeyT) -> None:
        """``PSUBSCRIBE``."""
        await self._send("PSUBSCRIBE", *patterns)
        self.patterns.update(patterns)

    async def unsubscribe(self, *channels: KeyT) -> None:
        """``UNSUBSCRIBE`` the channels, or all without arguments."""
        await self._send("UNSUBSCRIBE", *channels)
        if channels:
            self.channels.difference_update(channels)
        else:
            self.channels.clear()

    async def punsubscribe(self, *patterns: KeyT) -> None:
        """``PUNSUBSCRIBE`` the patterns, or all without arguments."""
        await self._send("PUNSUBSCRIBE", *patterns)
        if patterns:
            self.patterns.difference_update(patterns)
        else:
            self.patterns.clear()

    async def get_message(self, timeout: Optional[float] = 0.0) -> Optional[Dict[str, Any]]:
        """The next message, waiting up to ``timeout`` seconds (``None``: until one arrives)."""
        if self._conn is None and not self.subscribed:
            raise PubSubError("subscribe to something before reading messages")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            conn = await self._connection()
            left = None if deadline is None else max(0.000001, deadline - time.monotonic())
            try:
                reply = await conn.read_reply(timeout=left, idle_ok=True)
            except TimeoutError:
                return None
            except ConnectionError:
                self._conn = None
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                await asyncio.sleep(_RETRY_PAUSE)
                continue
            if isinstance(reply, ResponseError):
                raise reply
            if isinstance(reply, list) and reply:
                msg = _message(reply)
                if msg["type"] in _SUB_KINDS and self.ignore_subscribe_messages:
                    continue
                return msg
            if deadline is not None and time.monotonic() >= deadline:
                return None

    async def listen(self) -> AsyncIterator[Dict[str, Any]]:
        """Yields messages as they arrive, while subscribed."""
        while self.subscribed or self._conn is not None:
            msg = await self.get_message(timeout=None)
            if msg is not None:
                yield msg
            if not self.subscribed and msg is not None and msg["type"] in _SUB_KINDS and msg["data"] == 0:
                return

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        self.channels.clear()
        self.patterns.clear()
        if conn is not None:
            conn.disconnect()

    async def __aenter__(self) -> "PubSub":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
