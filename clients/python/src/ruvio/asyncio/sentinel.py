"""Failover discovery through the Sentinel protocol, asyncio form (see :mod:`ruvio.sentinel` for the rules)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._options import ConnectionOptions
from .._resp import as_text
from ..exceptions import ConnectionError, PrimaryNotFoundError, ResponseError, RuvioError
from .client import PubSub, Ruvio
from .connection import Connection, ConnectionPool

__all__ = ["Sentinel", "SentinelConnectionPool"]

Address = Tuple[str, int]


class Sentinel:
    """As :class:`ruvio.sentinel.Sentinel`, with ``await`` (``primary_for`` itself is a plain call)."""

    def __init__(
        self,
        sentinels: Sequence[Address],
        sentinel_kwargs: Optional[Dict[str, Any]] = None,
        **connection_kwargs: Any,
    ) -> None:
        skw: Dict[str, Any] = {"connect_timeout": 1.0, "command_timeout": 1.0, "protocol": 2}
        skw.update(sentinel_kwargs or {})
        self._sentinel_options = [ConnectionOptions(host=h, port=p, **skw) for h, p in sentinels]
        self.connection_kwargs = connection_kwargs

    async def _ask(self, options: ConnectionOptions, *args: Any) -> Any:
        conn = Connection(options)
        try:
            await conn.connect()
            reply = await conn.call(list(args))
        finally:
            conn.disconnect()
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def primary_address(self, service_name: str) -> Address:
        """What the first coordinator that answers names as the primary (not confirmed)."""
        errors: List[str] = []
        for i, options in enumerate(list(self._sentinel_options)):
            try:
                reply = await self._ask(options, "SENTINEL", "get-master-addr-by-name", service_name)
            except (RuvioError, OSError) as e:
                errors.append(f"{options.host}:{options.port}: {e}")
                continue
            if reply is None:
                errors.append(f"{options.host}:{options.port}: no such service")
                continue
            if i and options in self._sentinel_options:
                self._sentinel_options.remove(options)
                self._sentinel_options.insert(0, options)
            return str(as_text(reply[0])), int(as_text(reply[1]))
        raise PrimaryNotFoundError(f"no coordinator named a primary for {service_name!r}: {'; '.join(errors)}")

    async def discover_primary(self, service_name: str) -> Address:
        """The confirmed primary (``ROLE``) of ``service_name``."""
        address = await self.primary_address(service_name)
        kw = dict(self.connection_kwargs)
        kw.setdefault("connect_timeout", 2.0)
        conn = Connection(ConnectionOptions(host=address[0], port=address[1], **kw), require_primary=True)
        try:
            await conn.connect()
        except ConnectionError as e:
            raise PrimaryNotFoundError(f"{address[0]}:{address[1]} named for {service_name!r}: {e}") from None
        finally:
            conn.disconnect()
        return address

    def primary_for(self, service_name: str, *, watch: bool = True, **client_kwargs: Any) -> Ruvio:
        """An asyncio client that always talks to the current primary of ``service_name``: it rediscovers on
        ``-READONLY``, on connection loss and (with ``watch``) on ``+switch-master``, which a background task
        started with the client's first connection listens for (stopped by ``aclose()``)."""
        kw = dict(self.connection_kwargs)
        kw.update(client_kwargs)
        max_connections = kw.pop("max_connections", None)
        options = ConnectionOptions(**kw)
        pool = SentinelConnectionPool(service_name, self, options, max_connections=max_connections, watch=watch)
        return Ruvio(connection_pool=pool)

    master_for = primary_for


class SentinelConnectionPool(ConnectionPool):
    """An asyncio pool whose every new connection discovers the primary first and confirms it with ROLE."""

    def __init__(
        self, service_name: str, sentinel: Sentinel, options: ConnectionOptions, watch: bool = True, **kw: Any
    ) -> None:
        self.service_name = service_name
        self.sentinel = sentinel
        self.watch = watch
        self.switches = 0
        """How many ``+switch-master`` announcements for the service the watcher acted on."""
        self._watcher: Optional["asyncio.Task[None]"] = None
        super().__init__(options, resolver=self._resolve, require_primary=True, **kw)

    async def _resolve(self) -> Address:
        return await self.sentinel.primary_address(self.service_name)

    async def get_connection(self) -> Connection:
        """As the base pool's, and starts the ``+switch-master`` watcher on first use."""
        if self.watch and (self._watcher is None or self._watcher.done()):
            self._watcher = asyncio.ensure_future(self._watch())
        return await super().get_connection()

    async def disconnect(self) -> None:
        """Closes the idle connections and stops the watcher."""
        w, self._watcher = self._watcher, None
        if w is not None:
            w.cancel()
            try:
                await w
            except (asyncio.CancelledError, Exception):
                pass
        await super().disconnect()

    async def _watch(self) -> None:
        while True:
            for options in list(self.sentinel._sentinel_options):
                ps = PubSub(ConnectionPool(options), ignore_subscribe_messages=True)
                try:
                    await ps.subscribe("+switch-master")
                    while True:
                        msg = await ps.get_message(timeout=1.0)
                        if msg is None and ps._conn is None:
                            break
                        if msg is None or msg["type"] != "message":
                            continue
                        words = str(as_text(msg["data"])).split()
                        if words and words[0] == self.service_name:
                            self.switches += 1
                            self.reset()
                except (RuvioError, OSError):
                    pass
                finally:
                    await ps.aclose()
            await asyncio.sleep(0.5)
