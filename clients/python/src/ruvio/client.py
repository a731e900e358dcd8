"""The blocking client :class:`Ruvio`, its :class:`Pipeline` and :class:`PubSub`."""

from __future__ import annotations

import ssl as _ssl
import time
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, TypeVar,
)

from . import _commands as c
from ._commands import Cmd, KeyT
from ._options import DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ConnectionOptions, parse_url
from ._resp import EncodableT, as_text, encode_command, encode_many
from ._sync_commands import SyncCommands
from .connection import DEFAULT, Connection, ConnectionPool
from .exceptions import (
    ConnectionError, ExecAbortError, PubSubError, ReadOnlyError, ResponseError, TimeoutError, WatchError,
)

if TYPE_CHECKING:  # pragma: no cover
    from .lock import Lock

T = TypeVar("T")
_RETRY_PAUSE = 0.05


def command_timeout_for(options: ConnectionOptions, cmd: Cmd[Any]) -> Optional[float]:
    """The reply timeout for ``cmd``: the command timeout, plus the time the server may keep it waiting."""
    base = options.command_timeout
    if cmd.block_ms is None:
        return base
    if cmd.block_ms == 0 or base is None:
        return None
    return base + cmd.block_ms / 1000.0


class Ruvio(SyncCommands):
    """A thread-safe blocking client with a connection pool.

    ``Ruvio("127.0.0.1", 6379)`` or ``Ruvio.from_url("redis://:secret@host:6379/0")``. Every method takes a
    connection from the pool for the duration of one command, so one client can be shared by all threads.

    Options: ``username``/``password`` (AUTH), ``db``, ``client_name``, ``protocol`` (3, the default, falls back to
    2 when the server lacks RESP3), ``connect_timeout`` (TCP connect plus handshake, default 5 s),
    ``command_timeout`` (each reply, default 10 s; ``None`` waits forever), ``ssl`` and the ``ssl_*`` options
    (or ``ssl_context``), ``decode_responses`` (bulk strings as ``str``), ``durability_replicas`` (sends
    ``CLIENT DURABILITY REPLICAS n`` on every connection), ``max_connections`` and ``pool_timeout``.
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
        self._closers: List[Callable[[], None]] = []

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> "Ruvio":
        """A client from ``redis://[[username]:password@]host[:port][/db][?option=value]`` (``rediss://`` for TLS);
        keyword arguments override the URL's."""
        kw = parse_url(url)
        kw.update(kwargs)
        return cls(**kw)

    # -- running commands -------------------------------------------------------------------------------------
    def _run(self, cmd: Cmd[T]) -> T:
        return cmd.parse(self._execute(cmd))

    def _execute(self, cmd: Cmd[Any]) -> Any:
        pool = self.connection_pool
        timeout = command_timeout_for(self.options, cmd)
        limit = self.options.command_timeout
        deadline = time.monotonic() + (limit if limit is not None else DEFAULT_COMMAND_TIMEOUT)
        resent_unsent = False
        while True:
            try:
                conn = pool.get_connection()
            except (ConnectionError, TimeoutError):
                # Nothing was sent. RENEW/RELEASE (and, with discovery, anything) ride out a restart/failover.
                if (cmd.retry_safe or pool.discovers) and time.monotonic() < deadline:
                    time.sleep(_RETRY_PAUSE)
                    continue
                raise
            try:
                conn.send_command(cmd.args)
                reply = conn.read_reply(timeout)
            except (ConnectionError, TimeoutError) as e:
                pool.release(conn)
                if pool.discovers:
                    pool.reset()
                if not e.sent and not resent_unsent:
                    resent_unsent = True  # the request never left: sending it again is safe
                    continue
                if cmd.retry_safe and isinstance(e, ConnectionError) and time.monotonic() < deadline:
                    time.sleep(_RETRY_PAUSE)
                    continue
                raise
            except BaseException:
                conn.disconnect()
                pool.release(conn)
                raise
            if isinstance(reply, ReadOnlyError):
                # A replica answered: the command did not run. Drop the connection; with discovery, find the
                # primary again and resend (safe for every command, since nothing happened).
                conn.disconnect()
                pool.release(conn)
                if pool.discovers:
                    pool.reset()
                    if time.monotonic() < deadline:
                        time.sleep(_RETRY_PAUSE)
                        continue
                raise reply
            pool.release(conn)
            if isinstance(reply, ResponseError):
                raise reply
            return reply

    # -- helpers ----------------------------------------------------------------------------------------------
    def pipeline(self, transaction: bool = True) -> "Pipeline":
        """A :class:`Pipeline`: commands are queued and sent together by ``execute()``; with ``transaction``
        (default) wrapped in MULTI/EXEC."""
        return Pipeline(self, transaction)

    def transaction(
        self, func: Callable[["Pipeline"], Any], *watches: KeyT, max_tries: int = 100
    ) -> List[Any]:
        """Optimistic transaction: WATCHes ``watches``, calls ``func(pipe)`` (read through ``pipe.immediate``,
        queue writes on ``pipe``), runs EXEC, and starts over when a watched key changed (at most ``max_tries``)."""
        for _ in range(max_tries):
            with self.pipeline(True) as pipe:
                try:
                    if watches:
                        pipe.watch(*watches)
                    func(pipe)
                    return pipe.execute()
                except WatchError:
                    continue
        raise WatchError(f"transaction gave up after {max_tries} tries")

    def pubsub(self, ignore_subscribe_messages: bool = False) -> "PubSub":
        """A :class:`PubSub` on its own connection."""
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
    ) -> "Lock":
        """A :class:`~ruvio.lock.Lock` helper: ``with r.lock("job", 30_000) as held:`` (``held`` is None when
        the lock was not acquired). See :mod:`ruvio.lock`."""
        from .lock import Lock

        return Lock(self, key, ttl_ms, wait_ms=wait_ms, auto_renew=auto_renew, max_hold_ms=max_hold_ms,
                    safety_margin_ms=safety_margin_ms, on_lost=on_lost)

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
    ) -> "Lock":
        """Like :meth:`lock`, for one slot of a semaphore of ``limit`` slots."""
        from .lock import Lock

        return Lock(self, key, ttl_ms, limit=limit, wait_ms=wait_ms, auto_renew=auto_renew,
                    max_hold_ms=max_hold_ms, safety_margin_ms=safety_margin_ms, on_lost=on_lost)

    def close(self) -> None:
        """Closes the pool's connections (and stops a Sentinel watcher). The client can still be used: it opens
        new connections on demand."""
        for closer in self._closers:
            closer()
        self.connection_pool.disconnect()

    def __enter__(self) -> "Ruvio":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ruvio.Ruvio {self.options.host}:{self.options.port} db={self.options.db}>"


class _Pinned(SyncCommands):
    """The command methods on one connection held by a pipeline (used between WATCH and EXEC)."""

    def __init__(self, pipe: "Pipeline") -> None:
        self._pipe = pipe

    def _run(self, cmd: Cmd[T]) -> T:
        conn = self._pipe._pinned_connection()
        reply = conn.call(cmd.args, timeout=command_timeout_for(self._pipe.client.options, cmd))
        if isinstance(reply, ResponseError):
            raise reply
        return cmd.parse(reply)


class Pipeline:
    """Queued commands sent in one write, replies read together by :meth:`execute`.

    Every command method of :class:`Ruvio` is available and returns the pipeline (so calls chain);
    ``execute()`` returns the parsed replies in order. With ``transaction=True`` the queue runs inside
    MULTI/EXEC. For optimistic locking, :meth:`watch` keys first, read them through :attr:`immediate`
    (runs at once on the pipeline's own connection), then queue writes; ``execute()`` raises
    :class:`~ruvio.WatchError` when a watched key changed.

    Pipelines are never retried: after a connection loss the queued commands' fate is unknown.
    """

    def __init__(self, client: Ruvio, transaction: bool = True) -> None:
        self.client = client
        self.transaction = transaction
        self._queue: List[Cmd[Any]] = []
        self._conn: Optional[Connection] = None
        self._watching = False
        self.immediate = _Pinned(self)

    def _pinned_connection(self) -> Connection:
        if self._conn is None:
            self._conn = self.client.connection_pool.get_connection()
        return self._conn

    def __len__(self) -> int:
        return len(self._queue)

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.reset()

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

    def watch(self, *keys: KeyT) -> None:
        """``WATCH`` now, on the pipeline's own connection (kept until :meth:`execute` or :meth:`reset`)."""
        self.immediate.execute_command("WATCH", *keys)
        self._watching = True

    def unwatch(self) -> None:
        """``UNWATCH`` now."""
        if self._conn is not None:
            self.immediate.execute_command("UNWATCH")
        self._watching = False

    def multi(self) -> None:
        """Marks the start of the transaction's queue (for redis-py habits; queuing already does this)."""
        self.transaction = True

    def reset(self) -> None:
        """Drops the queue and gives the connection back (after UNWATCH when watching)."""
        self._queue = []
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._watching and conn.connected:
                try:
                    r = conn.call(["UNWATCH"])
                    if isinstance(r, ResponseError):
                        conn.disconnect()
                except (ConnectionError, TimeoutError):
                    pass
            self.client.connection_pool.release(conn)
        self._watching = False

    def execute(self, raise_on_error: bool = True) -> List[Any]:
        """Sends the queue and returns the replies. A transaction whose watched key changed raises
        :class:`~ruvio.WatchError`; a queued command the server refused raises :class:`~ruvio.ExecAbortError`.
        Error replies of single commands raise the first one (``raise_on_error``) or are returned in place."""
        queue = self._queue
        try:
            conn = self._pinned_connection()
            cmds: List[Sequence[EncodableT]] = [q.args for q in queue]
            if self.transaction:
                cmds = [["MULTI"], *cmds, ["EXEC"]]
            if not cmds:
                return []
            block = [q for q in queue if q.block_ms is not None]
            timeout = self.client.options.command_timeout
            if block and timeout is not None and not self.transaction:
                timeout = None if any(q.block_ms == 0 for q in block) else \
                    timeout + sum(q.block_ms or 0 for q in block) / 1000.0
            conn.send_packed(encode_many(cmds))
            replies = [conn.read_reply(timeout) for _ in cmds]
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
            self.reset()


def _message(msg: List[Any]) -> Dict[str, Any]:
    kind = str(as_text(msg[0])).lower()
    if kind == "pmessage":
        return {"type": kind, "pattern": msg[1], "channel": msg[2], "data": msg[3]}
    if kind == "pong":
        return {"type": kind, "pattern": None, "channel": None, "data": msg[1] if len(msg) > 1 else None}
    return {"type": kind, "pattern": None, "channel": msg[1], "data": msg[2] if len(msg) > 2 else None}


_SUB_KINDS = {"subscribe", "psubscribe", "unsubscribe", "punsubscribe"}


class PubSub:
    """Subscriptions on a dedicated connection (RESP3 pushes or RESP2 arrays, both handled).

    Messages are dicts like redis-py's: ``{"type": "message", "pattern": None, "channel": b"news", "data": b"hi"}``
    (``pmessage`` with the pattern; ``subscribe``/``unsubscribe`` confirmations with the count as ``data``,
    dropped with ``ignore_subscribe_messages``). If the connection breaks, the next read reconnects and
    subscribes again to every channel and pattern; messages published in between are lost (pub/sub has no
    history). Not thread-safe: one reader thread.
    """

    def __init__(self, pool: ConnectionPool, ignore_subscribe_messages: bool = False) -> None:
        self._pool = pool
        self.ignore_subscribe_messages = ignore_subscribe_messages
        self._conn: Optional[Connection] = None
        self.channels: Set[Any] = set()
        self.patterns: Set[Any] = set()

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = self._pool.make_connection()
            conn.keep_pushes = True
            conn.connect()
            self._conn = conn
            again: List[List[EncodableT]] = []
            if self.channels:
                again.append(["SUBSCRIBE", *self.channels])
            if self.patterns:
                again.append(["PSUBSCRIBE", *self.patterns])
            if again:
                conn.send_packed(encode_many(again))
        return self._conn

    @property
    def subscribed(self) -> bool:
        """True while at least one channel or pattern is subscribed."""
        return bool(self.channels or self.patterns)

    def _send(self, *args: EncodableT) -> None:
        conn = self._connection()
        try:
            conn.send_packed(encode_command(args))
        except (ConnectionError, TimeoutError):
            self._conn = None
            self._connection().send_packed(encode_command(args))

    def subscribe(self, *channels: KeyT) -> None:
        """``SUBSCRIBE``; the confirmations arrive as messages."""
        self._send("SUBSCRIBE", *channels)
        self.channels.update(channels)

    def psubscribe(self, *patterns: KeyT) -> None:
        """``PSUBSCRIBE``."""
        self._send("PSUBSCRIBE", *patterns)
        self.patterns.update(patterns)

    def unsubscribe(self, *channels: KeyT) -> None:
        """``UNSUBSCRIBE`` the channels, or all without arguments."""
        self._send("UNSUBSCRIBE", *channels)
        if channels:
            self.channels.difference_update(channels)
        else:
            self.channels.clear()

    def punsubscribe(self, *patterns: KeyT) -> None:
        """``PUNSUBSCRIBE`` the patterns, or all without arguments."""
        self._send("PUNSUBSCRIBE", *patterns)
        if patterns:
            self.patterns.difference_update(patterns)
        else:
            self.patterns.clear()

    def ping(self, message: Optional[KeyT] = None) -> None:
        """``PING`` on the subscribed connection; the answer arrives as a ``pong`` message (RESP2)."""
        self._send("PING", *([] if message is None else [message]))

    def get_message(self, timeout: Optional[float] = 0.0) -> Optional[Dict[str, Any]]:
        """The next message, waiting up to ``timeout`` seconds (``None``: until one arrives); ``None`` if none."""
        if self._conn is None and not self.subscribed:
            raise PubSubError("subscribe to something before reading messages")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            conn = self._connection()
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                reply = conn.read_reply(timeout=left if left is None or left > 0 else 0.000001, idle_ok=True)
            except TimeoutError:
                return None
            except ConnectionError:
                self._conn = None
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                time.sleep(_RETRY_PAUSE)
                continue
            if isinstance(reply, ResponseError):
                raise reply
            if isinstance(reply, list) and reply:
                msg = _message(reply)
                if msg["type"] in _SUB_KINDS and self.ignore_subscribe_messages:
                    continue
                return msg
            if isinstance(reply, str) and reply == "PONG":
                return {"type": "pong", "pattern": None, "channel": None, "data": None}
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def listen(self) -> Iterator[Dict[str, Any]]:
        """Yields messages as they arrive, while subscribed."""
        while self.subscribed or self._conn is not None:
            msg = self.get_message(timeout=None)
            if msg is not None:
                yield msg
            if not self.subscribed and msg is not None and msg["type"] in _SUB_KINDS and msg["data"] == 0:
                return

    def close(self) -> None:
        """Closes the connection (all subscriptions end)."""
        conn, self._conn = self._conn, None
        self.channels.clear()
        self.patterns.clear()
        if conn is not None:
            conn.disconnect()

    def __enter__(self) -> "PubSub":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
