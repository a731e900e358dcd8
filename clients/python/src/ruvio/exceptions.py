"""The exceptions the client raises. Names mirror redis-py's so that existing habits carry over.

``RuvioError``
  ``ConnectionError``      the connection could not be made or broke. ``sent`` tells whether the request may have
                           reached the server: then its fate is unknown (it may or may not have run).
    ``AuthenticationError``  the server refused the credentials.
    ``PrimaryNotFoundError`` no coordinator/Sentinel named a primary that confirmed its role.
  ``TimeoutError``         connect or reply timeout. ``sent`` as for ``ConnectionError``.
  ``ResponseError``        the server answered with an error; ``code`` is its first word (``ERR``, ``WRONGTYPE``...).
    ``ReadOnlyError``        ``READONLY``: the node is a replica (the client rediscovers the primary).
    ``NoPermissionError``, ``ExecAbortError``, ``BusyLoadingError``
  ``DataError``            an argument the client cannot encode.
  ``InvalidResponse``      bytes that are not RESP.
  ``WatchError``           a WATCHed key changed: the transaction did not run.
  ``PubSubError``          misuse of a pub/sub connection.
  ``LockError``            the lock helper was misused.
    ``LockLostError``        raised by the asyncio lock helper when it cancelled the work because the lock was lost.
"""

from __future__ import annotations

import builtins
from typing import Optional


class RuvioError(Exception):
    """Base class of every error this package raises."""


class ConnectionError(RuvioError, builtins.ConnectionError):
    """The connection could not be made, or broke.

    ``sent`` is True when the request may already have reached the server: the command's fate is then unknown.
    """

    def __init__(self, message: str = "", *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class TimeoutError(RuvioError, builtins.TimeoutError):
    """Connecting, or waiting for a reply, took longer than the configured timeout.

    ``sent`` is True when the request went out before the timeout: its fate is unknown.
    """

    def __init__(self, message: str = "", *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class AuthenticationError(ConnectionError):
    """The server refused the username/password (``WRONGPASS``, ``NOAUTH``)."""


class PrimaryNotFoundError(ConnectionError):
    """No coordinator (Sentinel) named a primary for the service that confirmed it is one."""


class ResponseError(RuvioError):
    """An error reply from the server. ``code`` is its first word (``ERR``, ``WRONGTYPE``, ``READONLY``, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        first = message.split(" ", 1)[0]
        self.code: str = first if first.isupper() else "ERR"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and str(other) == str(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, str(self)))


class ReadOnlyError(ResponseError):
    """``READONLY``: the node answering is a replica. The command did not run."""


class NoPermissionError(ResponseError):
    """``NOPERM``."""


class ExecAbortError(ResponseError):
    """``EXECABORT``: a queued command was rejected, the transaction did not run."""


class BusyLoadingError(ResponseError):
    """``LOADING``: the server is still loading its data."""


class DataError(RuvioError):
    """An argument of a type the client cannot send (for example a ``bool`` or ``None``)."""


class InvalidResponse(RuvioError):
    """The server sent bytes that are not valid RESP. The connection is closed."""


class WatchError(RuvioError):
    """A WATCHed key changed before EXEC: nothing in the transaction ran."""


class PubSubError(RuvioError):
    """A pub/sub connection was used wrongly (for example ``get_message`` before any subscription)."""


class LockError(RuvioError):
    """The lock helper was used wrongly (for example entered twice)."""


class LockLostError(LockError):
    """The lock was lost while the ``async with`` block ran, and the helper cancelled the block."""

    def __init__(self, message: str, reason: Optional[str] = None) -> None:
        super().__init__(message)
        self.reason = reason


_BY_CODE = {
    "READONLY": ReadOnlyError,
    "NOPERM": NoPermissionError,
    "EXECABORT": ExecAbortError,
    "LOADING": BusyLoadingError,
}


def response_error(message: str) -> ResponseError:
    """The ``ResponseError`` subclass for an error reply's text."""
    code = message.split(" ", 1)[0]
    return _BY_CODE.get(code, ResponseError)(message)


__all__ = [
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
    "response_error",
]
