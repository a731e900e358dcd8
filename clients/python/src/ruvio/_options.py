"""Connection options shared by the sync and asyncio clients, and ``redis://`` / ``rediss://`` URL parsing."""

from __future__ import annotations

import ssl as _ssl
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional
from urllib.parse import parse_qs, unquote, urlparse

from .exceptions import DataError

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_COMMAND_TIMEOUT = 10.0


@dataclass(frozen=True)
class ConnectionOptions:
    """Everything needed to open and prepare one connection.

    ``protocol`` 3 (the default) sends ``HELLO 3`` and falls back to RESP2 when the server does not know HELLO or
    RESP3. ``durability_replicas`` sends ``CLIENT DURABILITY REPLICAS n`` on every connection (an error from the
    server makes the connection fail with that :class:`~ruvio.ResponseError`).
    """

    host: str = "127.0.0.1"
    port: int = 6379
    username: Optional[str] = None
    password: Optional[str] = None
    db: int = 0
    client_name: Optional[str] = None
    protocol: int = 3
    connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT
    command_timeout: Optional[float] = DEFAULT_COMMAND_TIMEOUT
    ssl: bool = False
    ssl_context: Optional[_ssl.SSLContext] = field(default=None, compare=False)
    ssl_ca_certs: Optional[str] = None
    ssl_certfile: Optional[str] = None
    ssl_keyfile: Optional[str] = None
    ssl_check_hostname: bool = True
    ssl_cert_reqs: str = "required"
    decode_responses: bool = False
    encoding: str = "utf-8"
    durability_replicas: Optional[int] = None

    def __post_init__(self) -> None:
        if self.protocol not in (2, 3):
            raise DataError(f"protocol must be 2 or 3, not {self.protocol!r}")
        if self.db < 0:
            raise DataError("db must be >= 0")
        if self.durability_replicas is not None and self.durability_replicas < 0:
            raise DataError("durability_replicas must be >= 0")

    def with_address(self, host: str, port: int) -> "ConnectionOptions":
        """The same options for another address."""
        return replace(self, host=host, port=port)

    def make_ssl_context(self) -> Optional[_ssl.SSLContext]:
        """The TLS context to wrap sockets with, or None without TLS."""
        if not self.ssl:
            return None
        if self.ssl_context is not None:
            return self.ssl_context
        ctx = _ssl.create_default_context(cafile=self.ssl_ca_certs)
        reqs = {"none": _ssl.CERT_NONE, "optional": _ssl.CERT_OPTIONAL, "required": _ssl.CERT_REQUIRED}
        if self.ssl_cert_reqs not in reqs:
            raise DataError("ssl_cert_reqs must be 'none', 'optional' or 'required'")
        if self.ssl_cert_reqs == "none":
            ctx.check_hostname = False
        else:
            ctx.check_hostname = self.ssl_check_hostname
        ctx.verify_mode = reqs[self.ssl_cert_reqs]
        if self.ssl_certfile:
            ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        return ctx


_BOOL = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def parse_url(url: str) -> Dict[str, Any]:
    """Keyword arguments for a client from ``redis://[[user]:password@]host[:port][/db][?option=value...]``.

    ``rediss://`` turns TLS on. Query options: ``db``, ``protocol``, ``client_name`` (or ``name``),
    ``connect_timeout``, ``command_timeout`` (or ``socket_timeout``), ``ssl_cert_reqs``, ``ssl_ca_certs``,
    ``decode_responses``, ``durability_replicas``.
    """
    u = urlparse(url)
    if u.scheme not in ("redis", "rediss", "ruvio", "ruvios"):
        raise DataError(f"unsupported URL scheme {u.scheme!r} (use redis:// or rediss://)")
    kw: Dict[str, Any] = {}
    if u.hostname:
        kw["host"] = unquote(u.hostname)
    if u.port:
        kw["port"] = u.port
    if u.username:
        kw["username"] = unquote(u.username)
    if u.password is not None:
        kw["password"] = unquote(u.password)
    if u.scheme in ("rediss", "ruvios"):
        kw["ssl"] = True
    path = u.path.lstrip("/")
    if path:
        try:
            kw["db"] = int(path)
        except ValueError:
            raise DataError(f"invalid database in URL: {path!r}") from None
    for name, values in parse_qs(u.query).items():
        v = values[-1]
        if name == "db":
            kw["db"] = int(v)
        elif name == "protocol":
            kw["protocol"] = int(v)
        elif name in ("client_name", "name"):
            kw["client_name"] = v
        elif name == "connect_timeout":
            kw["connect_timeout"] = float(v)
        elif name in ("command_timeout", "socket_timeout"):
            kw["command_timeout"] = float(v)
        elif name in ("ssl_cert_reqs", "ssl_ca_certs"):
            kw[name] = v
        elif name == "decode_responses":
            kw["decode_responses"] = _BOOL[v.lower()]
        elif name == "durability_replicas":
            kw["durability_replicas"] = int(v)
        else:
            raise DataError(f"unknown URL option {name!r}")
    return kw
