"""One asyncio connection (:class:`Connection`) and the pool of them (:class:`ConnectionPool`)."""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
import sys
import time
from collections import deque
from typing import Any, Awaitable, Callable, Deque, Dict, Optional, Sequence, Tuple

from .._options import ConnectionOptions
from .._resp import NEED_MORE, EncodableT, Parser, PushMessage, as_text, encode_command, pairs_to_dict
from ..connection import DEFAULT, auth_error, handshake_commands, hello_unsupported, role_of
from ..exceptions import ConnectionError, InvalidResponse, ResponseError, TimeoutError

AsyncResolver = Callable[[], Awaitable[Tuple[str, int]]]

if sys.version_info >= (3, 11):

    async def _read_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
        async with asyncio.timeout(seconds):  # cheaper than wait_for: no extra task per read
            return await reader.read(65536)

else:  # pragma: no cover - Python 3.9/3.10

    async def _read_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
        return await asyncio.wait_for(reader.read(65536), timeout=seconds)


class Connection:
    """A single asyncio connection. Used by one task at a time (the pool sees to it)."""

    def __init__(
        self,
        options: ConnectionOptions,
        resolver: Optional[AsyncResolver] = None,
        require_primary: bool = False,
    ) -> None:
        self.options = options
        self.resolver = resolver
        self.require_primary = require_primary
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._parser = Parser(options.decode_responses, options.encoding)
        self.protocol = options.protocol
        self.server_info: Dict[str, Any] = {}
        self.address: Tuple[str, int] = (options.host, options.port)
        self.generation = 0
        self.pushes: Deque[PushMessage] = deque(maxlen=10000)
        self.keep_pushes = False

    @property
    def connected(self) -> bool:
        """True while the connection is open."""
        return self._writer is not None

    async def connect(self) -> None:
        """Opens the connection (TLS when configured) and runs the handshake within ``connect_timeout``."""
        if self._writer is not None:
            return
        timeout = self.options.connect_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        host, port = (await self.resolver()) if self.resolver else (self.options.host, self.options.port)
        self.address = (host, port)
        ctx = self.options.make_ssl_context()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ctx, server_hostname=host if ctx else None),
                timeout=None if deadline is None else max(0.001, deadline - time.monotonic()),
            )
        except asyncio.TimeoutError:
            raise TimeoutError(f"connect to {host}:{port} timed out after {timeout}s") from None
        except (OSError, ssl.SSLError) as e:
            raise ConnectionError(f"cannot connect to {host}:{port}: {e}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            except OSError:
                pass
        self._reader, self._writer = reader, writer
        self._parser.reset()
        try:
            await self._handshake(deadline)
        except BaseException:
            self.disconnect()
            raise

    def _remaining(self, deadline: Optional[float]) -> Optional[float]:
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"handshake with {self.address[0]}:{self.address[1]} timed out", sent=True)
        return left

    async def _handshake(self, deadline: Optional[float]) -> None:
        protocol = self.options.protocol
        cmds = handshake_commands(self.options, protocol)
        if protocol == 3:
            reply = await self.call(cmds[0], timeout=self._remaining(deadline))
            if isinstance(reply, ResponseError):
                if not hello_unsupported(reply):
                    raise auth_error(reply) or reply
                protocol = 2
                cmds = handshake_commands(self.options, 2)
            else:
                self.server_info = {str(as_text(k)): as_text(v) for k, v in pairs_to_dict(reply).items()}
                cmds = cmds[1:]
        self.protocol = protocol
        if cmds:
            await self.send_packed(b"".join(encode_command(c) for c in cmds))
            first_error: Optional[ResponseError] = None
            for _ in cmds:
                r = await self.read_reply(timeout=self._remaining(deadline))
                if isinstance(r, ResponseError) and first_error is None:
                    first_error = r
            if first_error is not None:
                raise auth_error(first_error) or first_error
        if self.require_primary:
            role = await self.call(["ROLE"], timeout=self._remaining(deadline))
            name = str(self.server_info.get("role", "master")) if isinstance(role, ResponseError) else role_of(role)
            if name != "master":
                raise ConnectionError(f"{self.address[0]}:{self.address[1]} is a {name}, not the primary")

    def disconnect(self) -> None:
        """Closes the connection (idempotent)."""
        writer, self._writer, self._reader = self._writer, None, None
        self._parser.reset()
        if writer is not None:
            try:
                writer.close()
            except (OSError, RuntimeError):
                pass

    def is_stale(self) -> bool:
        """True when the server closed the idle connection or sent something unexpected."""
        if self._writer is None or self._reader is None:
            return True
        if self._writer.is_closing() or self._reader.at_eof():
            return True
        if self._reader.exception() is not None:
            return True
        # The loop may not have run since the server closed the socket (or sent something unexpected): ask the
        # kernel whether anything is waiting on an idle connection.
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            try:
                readable, _, _ = select.select([sock.fileno()], [], [], 0)
            except (OSError, ValueError):
                return True
            if readable and not self.keep_pushes:
                return True
        return False

    async def send_packed(self, data: bytes) -> None:
        """Writes already-encoded commands."""
        if self._writer is None:
            await self.connect()
        writer = self._writer
        assert writer is not None
        try:
            writer.write(data)
            if writer.transport.get_write_buffer_size() > 1 << 16:
                await asyncio.wait_for(writer.drain(), timeout=self.options.command_timeout)
        except asyncio.TimeoutError:
            self.disconnect()
            raise TimeoutError(f"sending to {self.address[0]}:{self.address[1]} timed out", sent=True) from None
        except (OSError, RuntimeError) as e:
            self.disconnect()
            raise ConnectionError(
                f"connection to {self.address[0]}:{self.address[1]} lost while sending: {e}") from None

    async def send_command(self, args: Sequence[EncodableT]) -> None:
        """Encodes and writes one command."""
        await self.send_packed(encode_command(args))

    async def read_reply(self, timeout: Any = DEFAULT, idle_ok: bool = False) -> Any:
        """The next reply (errors returned as ResponseError values). Same rules as the blocking connection."""
        if timeout is DEFAULT:
            timeout = self.options.command_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            reply = self._parser.get()
            if reply is not NEED_MORE:
                if isinstance(reply, PushMessage) and not self.keep_pushes:
                    self.pushes.append(reply)
                    continue
                return reply
            reader = self._reader
            if reader is None:
                raise ConnectionError("not connected", sent=True)
            try:
                if deadline is None:
                    data = await reader.read(65536)
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise asyncio.TimeoutError
                    data = await _read_within(reader, left)
            except asyncio.TimeoutError:
                if idle_ok:
                    raise TimeoutError("no message", sent=False) from None
                self.disconnect()
                raise TimeoutError(
                    f"no reply from {self.address[0]}:{self.address[1]} within {timeout}s", sent=True) from None
            except asyncio.CancelledError:
                # The reply is still coming: this connection cannot be reused.
                self.disconnect()
                raise
            except (OSError, ssl.SSLError) as e:
                self.disconnect()
                raise ConnectionError(
                    f"connection to {self.address[0]}:{self.address[1]} lost: {e}", sent=True) from None
            if not data:
                self.disconnect()
                raise ConnectionError(
                    f"connection to {self.address[0]}:{self.address[1]} closed by the server", sent=True)
            try:
                self._parser.feed(data)
            except InvalidResponse:
                self.disconnect()
                raise

    async def call(self, args: Sequence[EncodableT], timeout: Any = DEFAULT) -> Any:
        """Sends one command and reads its reply (errors returned as values)."""
        await self.send_command(args)
        try:
            return await self.read_reply(timeout)
        except InvalidResponse:
            self.disconnect()
            raise

    def __repr__(self) -> str:
        return f"<ruvio.asyncio.Connection {self.address[0]}:{self.address[1]} {'open' if self._writer else 'closed'}>"


class ConnectionPool:
    """A pool of asyncio connections, for use from one event loop. Same rules as :class:`ruvio.ConnectionPool`."""

    def __init__(
        self,
        options: ConnectionOptions,
        max_connections: Optional[int] = None,
        pool_timeout: Any = DEFAULT,
        resolver: Optional[AsyncResolver] = None,
        require_primary: bool = False,
    ) -> None:
        self.options = options
        self.max_connections = max_connections
        self.pool_timeout: Optional[float] = options.command_timeout if pool_timeout is DEFAULT else pool_timeout
        self.resolver = resolver
        self.require_primary = require_primary
        self._idle: Deque[Connection] = deque()
        self._created = 0
        self._generation = 0
        self._waiters: Deque["asyncio.Future[None]"] = deque()

    @property
    def discovers(self) -> bool:
        """True when each new connection asks for the primary's address (Sentinel discovery)."""
        return self.resolver is not None

    def make_connection(self) -> Connection:
        """A new, not yet connected connection with the pool's options (and discovery)."""
        return Connection(self.options, resolver=self.resolver, require_primary=self.require_primary)

    def _wake_one(self) -> None:
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(None)
                return

    async def get_connection(self) -> Connection:
        """A connected connection for the caller's exclusive use; give it back with :meth:`release`."""
        deadline = None if self.pool_timeout is None else time.monotonic() + self.pool_timeout
        conn: Optional[Connection] = None
        while True:
            if self._idle:
                conn = self._idle.pop()
                break
            if self.max_connections is None or self._created < self.max_connections:
                self._created += 1
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ConnectionError(
                    f"no free connection in the pool (max_connections={self.max_connections}) "
                    f"within {self.pool_timeout}s")
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await asyncio.wait_for(fut, timeout=left)
            except asyncio.TimeoutError:
                pass
        try:
            if conn is None:
                conn = self.make_connection()
                conn.generation = self._generation
            elif conn.is_stale():
                conn.disconnect()
            await conn.connect()
        except BaseException:
            self._created -= 1
            if conn is not None:
                conn.disconnect()
            self._wake_one()
            raise
        return conn

    def release(self, conn: Connection) -> None:
        """Gives a connection back (a broken or outdated one is closed instead)."""
        if conn.connected and conn.generation == self._generation:
            self._idle.append(conn)
        else:
            conn.disconnect()
            self._created -= 1
        self._wake_one()

    def reset(self) -> None:
        """Closes idle connections and retires those in use: the next command opens a fresh one."""
        self._generation += 1
        idle, self._idle = self._idle, deque()
        self._created -= len(idle)
        for c in idle:
            c.disconnect()
        for _ in range(len(self._waiters)):
            self._wake_one()

    async def disconnect(self) -> None:
        """Closes every idle connection."""
        self.reset()
