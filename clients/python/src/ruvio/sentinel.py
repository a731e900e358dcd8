"""Failover discovery through the Sentinel protocol (what the Ruvio coordinator will speak).

>>> from ruvio.sentinel import Sentinel
>>> s = Sentinel([("10.0.0.1", 26379), ("10.0.0.2", 26379)])   # doctest: +SKIP
>>> r = s.primary_for("locks")                                   # doctest: +SKIP
>>> r.lease("job", 30_000)                                       # doctest: +SKIP

Discovery asks each coordinator in turn ``SENTINEL get-master-addr-by-name <service>``, connects to the answer
and confirms with ``ROLE`` that it is the primary (a server without ROLE is taken at its HELLO ``role``). The
client returned by :meth:`Sentinel.primary_for` discovers again whenever it opens a connection, and drops its
connections (so the next command rediscovers) on a ``-READONLY`` reply, on a connection loss, and, with
``watch=True`` (the default), when a coordinator announces ``+switch-master`` for the service. A command that got
``-READONLY`` did not run, so it is sent again to the new primary within the command timeout; anything else
follows the usual rule (LEASE and SEMAPHORE are never resent after an ambiguous failure).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._options import ConnectionOptions
from ._resp import as_text
from .client import PubSub, Ruvio
from .connection import Connection, ConnectionPool
from .exceptions import ConnectionError, PrimaryNotFoundError, ResponseError, RuvioError

__all__ = ["Sentinel", "SentinelConnectionPool"]

Address = Tuple[str, int]


class Sentinel:
    """The coordinators (Sentinels) to ask, and how to connect to them.

    ``sentinels``: ``[(host, port), ...]``. ``sentinel_kwargs``: connection options for the coordinators
    themselves (``password``, ``ssl``, timeouts...); by default short timeouts (1 s) so that a dead coordinator
    is skipped quickly. ``connection_kwargs`` are the defaults for the clients :meth:`primary_for` makes.
    """

    def __init__(
        self,
        sentinels: Sequence[Address],
        sentinel_kwargs: Optional[Dict[str, Any]] = None,
        **connection_kwargs: Any,
    ) -> None:
        skw: Dict[str, Any] = {"connect_timeout": 1.0, "command_timeout": 1.0, "protocol": 2}
        skw.update(sentinel_kwargs or {})
        self._sentinel_options = [ConnectionOptions(host=h, port=p, **skw) for h, p in sentinels]
        self._lock = threading.Lock()
        self.connection_kwargs = connection_kwargs

    @property
    def sentinels(self) -> List[Address]:
        """The coordinators, in the order they are asked."""
        with self._lock:
            return [(o.host, o.port) for o in self._sentinel_options]

    def _ask(self, options: ConnectionOptions, *args: Any) -> Any:
        conn = Connection(options)
        try:
            conn.connect()
            reply = conn.call(list(args))
        finally:
            conn.disconnect()
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def primary_address(self, service_name: str) -> Optional[Address]:
        """What the first coordinator that answers says is the primary of ``service_name`` (not confirmed)."""
        with self._lock:
            candidates = list(self._sentinel_options)
        errors: List[str] = []
        for i, options in enumerate(candidates):
            try:
                reply = self._ask(options, "SENTINEL", "get-master-addr-by-name", service_name)
            except (RuvioError, OSError) as e:
                errors.append(f"{options.host}:{options.port}: {e}")
                continue
            if reply is None:
                errors.append(f"{options.host}:{options.port}: no such service")
                continue
            host, port = str(as_text(reply[0])), int(as_text(reply[1]))
            if i:
                with self._lock:  # the one that answered goes first next time (as redis-py does)
                    if options in self._sentinel_options:
                        self._sentinel_options.remove(options)
                        self._sentinel_options.insert(0, options)
            return host, port
        raise PrimaryNotFoundError(f"no coordinator named a primary for {service_name!r}: {'; '.join(errors)}")

    def discover_primary(self, service_name: str, **connection_kwargs: Any) -> Address:
        """The confirmed primary of ``service_name``: asks the coordinators, then checks with ``ROLE``."""
        address = self.primary_address(service_name)
        assert address is not None
        kw = dict(self.connection_kwargs)
        kw.update(connection_kwargs)
        kw.setdefault("connect_timeout", 2.0)
        options = ConnectionOptions(host=address[0], port=address[1], **kw)
        conn = Connection(options, require_primary=True)
        try:
            conn.connect()
        except ConnectionError as e:
            raise PrimaryNotFoundError(f"{address[0]}:{address[1]} named for {service_name!r}: {e}") from None
        finally:
            conn.disconnect()
        return address

    def discover_master(self, service_name: str) -> Address:
        """redis-py's name for :meth:`discover_primary`."""
        return self.discover_primary(service_name)

    def primary_for(self, service_name: str, *, watch: bool = True, **client_kwargs: Any) -> Ruvio:
        """A :class:`~ruvio.Ruvio` that always talks to the current primary of ``service_name``."""
        kw = dict(self.connection_kwargs)
        kw.update(client_kwargs)
        max_connections = kw.pop("max_connections", None)
        pool_timeout = kw.pop("pool_timeout", None)
        options = ConnectionOptions(**kw)
        pool = SentinelConnectionPool(service_name, self, options, max_connections=max_connections,
                                      pool_timeout=pool_timeout if pool_timeout is not None else options.command_timeout)
        client = Ruvio(connection_pool=pool)
        if watch:
            watcher = _SwitchWatcher(self, service_name, pool)
            watcher.start()
            pool.watcher = watcher
            client._closers.append(watcher.stop)
        return client

    def master_for(self, service_name: str, **client_kwargs: Any) -> Ruvio:
        """redis-py's name for :meth:`primary_for`."""
        return self.primary_for(service_name, **client_kwargs)


class SentinelConnectionPool(ConnectionPool):
    """A pool whose every new connection discovers the primary first and confirms it with ROLE."""

    def __init__(self, service_name: str, sentinel: Sentinel, options: ConnectionOptions, **kw: Any) -> None:
        self.service_name = service_name
        self.sentinel = sentinel
        self.watcher: Optional[_SwitchWatcher] = None
        """The ``+switch-master`` listener (``watcher.switches`` counts the switches it acted on)."""
        super().__init__(options, resolver=self._resolve, require_primary=True, **kw)

    def _resolve(self) -> Address:
        address = self.sentinel.primary_address(self.service_name)
        assert address is not None
        return address


class _SwitchWatcher:
    """Listens on the coordinators for ``+switch-master`` and resets the pool when the service moves."""

    def __init__(self, sentinel: Sentinel, service_name: str, pool: ConnectionPool) -> None:
        self.sentinel = sentinel
        self.service_name = service_name
        self.pool = pool
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"ruvio-sentinel-watch:{service_name}", daemon=True)
        self.switches = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=3.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            for options in self.sentinel._sentinel_options:
                if self._stop.is_set():
                    return
                ps = PubSub(ConnectionPool(options), ignore_subscribe_messages=True)
                try:
                    ps.subscribe("+switch-master")  # raises when this coordinator is down: try the next
                    while not self._stop.is_set():
                        msg = ps.get_message(timeout=0.5)
                        if msg is None and ps._conn is None:
                            break  # the connection broke and did not come back: try the next coordinator
                        if msg is None or msg["type"] != "message":
                            continue
                        words = str(as_text(msg["data"])).split()
                        if words and words[0] == self.service_name:
                            self.switches += 1
                            self.pool.reset()
                except (RuvioError, OSError):
                    pass
                finally:
                    ps.close()
            self._stop.wait(0.5)
