"""One blocking connection (:class:`Connection`) and the thread-safe pool of them (:class:`ConnectionPool`)."""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from ._options import ConnectionOptions
from ._resp import NEED_MORE, EncodableT, Parser, PushMessage, encode_command, pairs_to_dict, as_text
from .exceptions import (
    AuthenticationError,
    ConnectionError,
    InvalidResponse,
    ResponseError,
    TimeoutError,
)


class _Default:
    pass


class _Pid:
    """This process's id, refreshed after fork() (so the pool need not ask the kernel on every command)."""

    value = os.getpid()

    @classmethod
    def refresh(cls) -> None:
        cls.value = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_Pid.refresh)


DEFAULT: Any = _Default()
"""Use the connection's configured command timeout."""

Resolver = Callable[[], Tuple[str, int]]


def handshake_commands(options: ConnectionOptions, protocol: int) -> List[List[EncodableT]]:
    """The commands that prepare a new connection, in order (the first is HELLO when ``protocol`` is 3)."""
    cmds: List[List[EncodableT]] = []
    if protocol == 3:
        hello: List[EncodableT] = ["HELLO", 3]
        if options.password is not None:
            hello += ["AUTH", options.username or "default", options.password]
        if options.client_name:
            hello += ["SETNAME", options.client_name]
        cmds.append(hello)
    else:
        if options.password is not None:
            if options.username:
                cmds.append(["AUTH", options.username, options.password])
            else:
                cmds.append(["AUTH", options.password])
        if options.client_name:
            cmds.append(["CLIENT", "SETNAME", options.client_name])
    if options.db:
        cmds.append(["SELECT", options.db])
    if options.durability_replicas is not None:
        cmds.append(["CLIENT", "DURABILITY", "REPLICAS", options.durability_replicas])
    return cmds


def hello_unsupported(err: ResponseError) -> bool:
    """True when HELLO's error means: this server only speaks RESP2 (fall back)."""
    text = str(err).lower()
    return err.code == "NOPROTO" or "unknown command" in text


def auth_error(err: ResponseError) -> Optional[AuthenticationError]:
    """The AuthenticationError for a refused-credentials reply, else None."""
    if err.code in ("WRONGPASS", "NOAUTH") or "invalid password" in str(err).lower():
        return AuthenticationError(str(err))
    return None


def role_of(reply: Any) -> str:
    """The role word from a ROLE reply (``master``, ``slave``, ``sentinel``)."""
    if isinstance(reply, list) and reply:
        return str(as_text(reply[0]))
    raise InvalidResponse(f"unexpected ROLE reply {reply!r}")


class Connection:
    """A single blocking connection. Not thread-safe: the pool hands it to one thread at a time.

    ``resolver`` (used by Sentinel discovery) is asked for the address at each connect; with ``require_primary``
    the connection confirms with ``ROLE`` (or HELLO's ``role`` when the server has no ROLE) that it reached a
    primary.
    """

    def __init__(
        self,
        options: ConnectionOptions,
        resolver: Optional[Resolver] = None,
        require_primary: bool = False,
    ) -> None:
        self.options = options
        self.resolver = resolver
        self.require_primary = require_primary
        self._sock: Optional[socket.socket] = None
        self._parser = Parser(options.decode_responses, options.encoding)
        self._timeout: Optional[float] = None
        self.protocol: int = options.protocol
        self.server_info: Dict[str, Any] = {}
        self.address: Tuple[str, int] = (options.host, options.port)
        self.generation = 0
        self.pid = _Pid.value
        self.pushes: Deque[PushMessage] = deque(maxlen=10000)
        self.keep_pushes = False

    # -- lifecycle -------------------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        """True while the socket is open."""
        return self._sock is not None

    def connect(self) -> None:
        """Opens the socket (TLS when configured) and runs the handshake, all within ``connect_timeout``."""
        if self._sock is not None:
            return
        host, port = self.resolver() if self.resolver else (self.options.host, self.options.port)
        self.address = (host, port)
        timeout = self.options.connect_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except socket.timeout:
            raise TimeoutError(f"connect to {host}:{port} timed out after {timeout}s") from None
        except OSError as e:
            raise ConnectionError(f"cannot connect to {host}:{port}: {e}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            ctx = self.options.make_ssl_context()
            if ctx is not None:
                sock = ctx.wrap_socket(sock, server_hostname=host)
        except socket.timeout:
            sock.close()
            raise TimeoutError(f"TLS handshake with {host}:{port} timed out") from None
        except (OSError, ssl.SSLError) as e:
            sock.close()
            raise ConnectionError(f"TLS handshake with {host}:{port} failed: {e}") from None
        self._sock = sock
        self._timeout = timeout
        self._parser.reset()
        try:
            self._handshake(deadline)
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

    def _handshake(self, deadline: Optional[float]) -> None:
        protocol = self.options.protocol
        cmds = handshake_commands(self.options, protocol)
        if protocol == 3:
            reply = self.call(cmds[0], timeout=self._remaining(deadline))
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
            self.send_packed(b"".join(encode_command(c) for c in cmds))
            first_error: Optional[ResponseError] = None
            for _ in cmds:
                r = self.read_reply(timeout=self._remaining(deadline))
                if isinstance(r, ResponseError) and first_error is None:
                    first_error = r
            if first_error is not None:
                raise auth_error(first_error) or first_error
        if self.require_primary:
            role = self.call(["ROLE"], timeout=self._remaining(deadline))
            if isinstance(role, ResponseError):
                name = str(self.server_info.get("role", "master"))
            else:
                name = role_of(role)
            if name != "master":
                raise ConnectionError(f"{self.address[0]}:{self.address[1]} is a {name}, not the primary")

    def disconnect(self) -> None:
        """Closes the socket (idempotent); the next send connects again."""
        sock, self._sock = self._sock, None
        self._parser.reset()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass

    def is_stale(self) -> bool:
        """True when the server closed the idle connection (a restart, an idle timeout) or sent something
        unexpected: either way it must not be used. Costs one ``select`` when the connection is healthy."""
        sock = self._sock
        if sock is None:
            return True
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        if not readable:
            return False
        try:
            sock.setblocking(False)
            try:
                data = sock.recv(1)
            finally:
                sock.settimeout(self._timeout)
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        except OSError:
            return True
        if data and self.keep_pushes:
            self._parser.feed(data)
            return False
        return True

    # -- I/O --------------------------------------------------------------------------------------------------
    def _settimeout(self, timeout: Optional[float]) -> None:
        if timeout != self._timeout and self._sock is not None:
            self._sock.settimeout(timeout)
            self._timeout = timeout

    def send_packed(self, data: bytes) -> None:
        """Writes already-encoded commands. Failing here means nothing (whole) reached the server."""
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        self._settimeout(self.options.command_timeout)
        try:
            self._sock.sendall(data)
        except socket.timeout:
            self.disconnect()
            raise TimeoutError(f"sending to {self.address[0]}:{self.address[1]} timed out", sent=True) from None
        except OSError as e:
            self.disconnect()
            raise ConnectionError(f"connection to {self.address[0]}:{self.address[1]} lost while sending: {e}") from None

    def send_command(self, args: Sequence[EncodableT]) -> None:
        """Encodes and writes one command."""
        self.send_packed(encode_command(args))

    def read_reply(self, timeout: Any = DEFAULT, idle_ok: bool = False) -> Any:
        """The next reply (an error reply is returned as a ResponseError instance, not raised).

        RESP3 pushes are kept in ``pushes`` and skipped, unless ``keep_pushes`` is set (pub/sub), then returned.
        ``timeout``: seconds, ``None`` for no limit, default the command timeout. A timeout closes the connection
        (its state is unknown), except with ``idle_ok`` (pub/sub: waiting for a message that may never come; a
        partly received reply stays buffered).
        """
        if timeout is DEFAULT:
            timeout = self.options.command_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        first = True
        while True:
            reply = self._parser.get()
            if reply is not NEED_MORE:
                if isinstance(reply, PushMessage) and not self.keep_pushes:
                    self.pushes.append(reply)
                    continue
                return reply
            sock = self._sock
            if sock is None:
                raise ConnectionError("not connected", sent=True)
            if deadline is None or first:
                # The whole timeout for the first read: the same value command after command, so the socket's
                # timeout is not changed (a system call) on every request.
                self._settimeout(timeout)
                first = False
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    if idle_ok:
                        raise TimeoutError("no message", sent=False)
                    self.disconnect()
                    raise TimeoutError(
                        f"no reply from {self.address[0]}:{self.address[1]} within {timeout}s", sent=True)
                self._settimeout(left)
            try:
                data = sock.recv(65536)
            except (socket.timeout, BlockingIOError):
                if idle_ok:
                    raise TimeoutError("no message", sent=False) from None
                self.disconnect()
                raise TimeoutError(
                    f"no reply from {self.address[0]}:{self.address[1]} within {timeout}s", sent=True) from None
            except OSError as e:
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

    def call(self, args: Sequence[EncodableT], timeout: Any = DEFAULT) -> Any:
        """Send one command and read its reply (errors returned as values)."""
        self.send_command(args)
        try:
            return self.read_reply(timeout)
        except InvalidResponse:
            self.disconnect()
            raise

    def __repr__(self) -> str:
        return f"<ruvio.Connection {self.address[0]}:{self.address[1]} {'open' if self._sock else 'closed'}>"


class ConnectionPool:
    """A thread-safe pool of :class:`Connection`.

    Idle connections are reused most-recently-used first and checked for a server-side close before each use
    (so a restarted server is reconnected to without sending anything twice). ``max_connections`` (default
    unlimited) caps open connections; a caller then waits up to ``pool_timeout`` seconds (default: the command
    timeout) for one to come back, else :class:`~ruvio.ConnectionError`. Safe after ``fork()``: a child process
    starts with an empty pool.
    """

    def __init__(
        self,
        options: ConnectionOptions,
        max_connections: Optional[int] = None,
        pool_timeout: Any = DEFAULT,
        resolver: Optional[Resolver] = None,
        require_primary: bool = False,
    ) -> None:
        self.options = options
        self.max_connections = max_connections
        self.pool_timeout: Optional[float] = options.command_timeout if pool_timeout is DEFAULT else pool_timeout
        self.resolver = resolver
        self.require_primary = require_primary
        self._cond = threading.Condition(threading.Lock())
        self._reset_state()

    def _reset_state(self) -> None:
        self._idle: Deque[Connection] = deque()
        self._created = 0
        self._generation = 0
        self._pid = _Pid.value

    @property
    def discovers(self) -> bool:
        """True when each new connection asks for the primary's address (Sentinel discovery)."""
        return self.resolver is not None

    def make_connection(self) -> Connection:
        """A new, not yet connected connection with the pool's options (and discovery)."""
        return Connection(self.options, resolver=self.resolver, require_primary=self.require_primary)

    def _check_pid(self) -> None:
        if self._pid != _Pid.value:
            self._cond = threading.Condition(threading.Lock())
            self._reset_state()

    def get_connection(self) -> Connection:
        """A connected connection for the caller's exclusive use; give it back with :meth:`release`."""
        with self._cond:
            self._check_pid()
            conn: Optional[Connection] = None
            deadline: Optional[float] = None
            while True:
                if self._idle:
                    conn = self._idle.pop()
                    break
                if self.max_connections is None or self._created < self.max_connections:
                    self._created += 1
                    break
                if deadline is None and self.pool_timeout is not None:
                    deadline = time.monotonic() + self.pool_timeout
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise ConnectionError(
                        f"no free connection in the pool (max_connections={self.max_connections}) "
                        f"within {self.pool_timeout}s")
                self._cond.wait(left)
            generation = self._generation
        try:
            if conn is None:
                conn = self.make_connection()
                conn.generation = generation
            elif conn.is_stale():
                conn.disconnect()
            conn.connect()
        except BaseException:
            with self._cond:
                self._created -= 1
                self._cond.notify()
            if conn is not None:
                conn.disconnect()
            raise
        return conn

    def release(self, conn: Connection) -> None:
        """Gives a connection back (a broken or outdated one is closed instead)."""
        with self._cond:
            if conn.pid != _Pid.value or self._pid != _Pid.value:
                return
            if conn.connected and conn.generation == self._generation:
                self._idle.append(conn)
            else:
                conn.disconnect()
                self._created -= 1
            self._cond.notify()

    def reset(self) -> None:
        """Closes idle connections and retires those in use (closed when given back): the next command opens a
        fresh connection (after a failover, that one rediscovers the primary)."""
        with self._cond:
            self._generation += 1
            idle, self._idle = self._idle, deque()
            self._created -= len(idle)
            self._cond.notify_all()
        for c in idle:
            c.disconnect()

    def disconnect(self) -> None:
        """Closes every idle connection (connections in use close when they are given back)."""
        self.reset()

    def __repr__(self) -> str:
        return f"<ruvio.ConnectionPool {self.options.host}:{self.options.port} open={self._created}>"
