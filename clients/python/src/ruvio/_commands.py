"""Commands as data: each builder returns a :class:`Cmd` (its arguments and how to read its reply), shared by the
sync client, the asyncio client and pipelines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ._resp import EncodableT, as_text, pairs_to_dict
from .exceptions import DataError, InvalidResponse

T = TypeVar("T")
KeyT = Union[str, bytes]
ValueT = Union[str, bytes, int, float]


def _identity(v: Any) -> Any:
    return v


@dataclass(frozen=True)
class Cmd(Generic[T]):
    """One command: ``args`` to send, ``parse`` for its reply.

    ``retry_safe``: may be sent again after an ambiguous failure (RENEW, RELEASE: they carry the token).
    ``block_ms``: the server may hold the reply this long (``WAIT``); ``0`` means without limit.
    """

    args: Sequence[EncodableT]
    parse: Callable[[Any], T]
    retry_safe: bool = False
    block_ms: Optional[int] = None


@dataclass(frozen=True)
class LockHolder:
    """One holder of a lease or semaphore: its fencing ``token`` and the server's ``remaining_ms``."""

    token: int
    remaining_ms: int


@dataclass(frozen=True)
class LockInfo:
    """``LOCKINFO``: ``kind`` is ``"lease"`` or ``"semaphore"``; ``limit`` 1 for a lease."""

    kind: str
    limit: int
    holders: List[LockHolder]
    waiters: int


@dataclass(frozen=True)
class ListedHolder:
    """A holder as ``LOCKS`` lists it: ``token``, ``remaining_ms``, when it was granted (``granted_ms``, Unix ms),
    ``held_ms``, and the client it was granted to (``client_id``, ``client_name``, ``client_addr``; ``None`` when the
    server did not grant it since it started, or no name was set)."""

    token: int
    remaining_ms: int
    granted_ms: int
    held_ms: int
    client_id: Optional[int]
    client_name: Optional[str]
    client_addr: Optional[str]


@dataclass(frozen=True)
class ListedLock:
    """A lock as ``LOCKS`` lists it."""

    key: bytes
    kind: str
    limit: int
    holders: List[ListedHolder]
    waiters: int


def _check_int(name: str, v: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise DataError(f"{name} must be an int, not {type(v).__name__}")
    return v


def _opt_token(v: Any) -> Optional[int]:
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise InvalidResponse(f"expected a token (integer) or nil, got {v!r}")


def _bool01(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v == 1
    raise InvalidResponse(f"expected 0 or 1, got {v!r}")


def _ok(v: Any) -> bool:
    return bool(v == "OK" or v == b"OK")


def _int(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise InvalidResponse(f"expected an integer, got {v!r}")


def _opt_int(v: Any) -> Optional[int]:
    return None if v is None else _int(v)


def _key(k: Any) -> str:
    return str(as_text(k))


def parse_lock_info(v: Any) -> Optional[LockInfo]:
    """LOCKINFO's reply (RESP3 map or RESP2 flat array) as a :class:`LockInfo`, or None."""
    if v is None:
        return None
    fields = {_key(k): x for k, x in pairs_to_dict(v).items()}
    holders = []
    for h in fields.get("holders") or []:
        hf = {_key(k): x for k, x in pairs_to_dict(h).items()}
        holders.append(LockHolder(token=_int(hf["token"]), remaining_ms=_int(hf["remaining_ms"])))
    return LockInfo(
        kind=str(as_text(fields["kind"])),
        limit=_int(fields["limit"]),
        holders=holders,
        waiters=_int(fields["waiters"]),
    )


def _opt_text(v: Any) -> Optional[str]:
    return None if v is None else str(as_text(v))


def parse_locks(v: Any) -> Tuple[int, List[ListedLock]]:
    """LOCKS's reply: (next cursor, locks of this page)."""
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise InvalidResponse(f"expected [cursor, locks], got {v!r}")
    cursor, page = v
    locks = []
    for lock in page:
        f = {_key(k): x for k, x in pairs_to_dict(lock).items()}
        holders = []
        for h in f.get("holders") or []:
            hf = {_key(k): x for k, x in pairs_to_dict(h).items()}
            holders.append(ListedHolder(
                token=_int(hf["token"]), remaining_ms=_int(hf["remaining_ms"]), granted_ms=_int(hf["granted_ms"]),
                held_ms=_int(hf["held_ms"]), client_id=_opt_int(hf.get("client_id")),
                client_name=_opt_text(hf.get("client_name")), client_addr=_opt_text(hf.get("client_addr"))))
        key = f["key"]
        locks.append(ListedLock(key=key if isinstance(key, bytes) else str(key).encode(), kind=str(as_text(f["kind"])),
                                limit=_int(f["limit"]), holders=holders, waiters=_int(f["waiters"])))
    return int(as_text(cursor)), locks


# --- locks -----------------------------------------------------------------------------------------------------
def lease(key: KeyT, ttl_ms: int, wait_ms: Optional[int] = None) -> Cmd[Optional[int]]:
    args: List[EncodableT] = ["LEASE", key, _check_int("ttl_ms", ttl_ms)]
    if wait_ms is not None:
        args += ["WAIT", _check_int("wait_ms", wait_ms)]
    return Cmd(args, _opt_token, block_ms=wait_ms)


def semaphore(key: KeyT, limit: int, ttl_ms: int, wait_ms: Optional[int] = None) -> Cmd[Optional[int]]:
    args: List[EncodableT] = ["SEMAPHORE", key, _check_int("limit", limit), _check_int("ttl_ms", ttl_ms)]
    if wait_ms is not None:
        args += ["WAIT", _check_int("wait_ms", wait_ms)]
    return Cmd(args, _opt_token, block_ms=wait_ms)


def renew(key: KeyT, token: int, ttl_ms: int) -> Cmd[bool]:
    return Cmd(["RENEW", key, _check_int("token", token), _check_int("ttl_ms", ttl_ms)], _bool01, retry_safe=True)


def release(key: KeyT, token: int) -> Cmd[bool]:
    return Cmd(["RELEASE", key, _check_int("token", token)], _bool01, retry_safe=True)


def ifgt(key: KeyT, token: int, value: ValueT, px_ms: Optional[int] = None) -> Cmd[bool]:
    args: List[EncodableT] = ["IFGT", key, _check_int("token", token), value]
    if px_ms is not None:
        args += ["PX", _check_int("px_ms", px_ms)]
    return Cmd(args, _bool01)


def lock_info(key: KeyT) -> Cmd[Optional[LockInfo]]:
    return Cmd(["LOCKINFO", key], parse_lock_info)


def locks(cursor: int = 0, match: Optional[str] = None, count: Optional[int] = None) -> Cmd[Tuple[int, List[ListedLock]]]:
    args: List[EncodableT] = ["LOCKS", _check_int("cursor", cursor)]
    if match is not None:
        args += ["MATCH", match]
    if count is not None:
        args += ["COUNT", _check_int("count", count)]
    return Cmd(args, parse_locks)


# --- everyday commands -----------------------------------------------------------------------------------------
def execute(*args: EncodableT) -> Cmd[Any]:
    return Cmd(args, _identity)


def ping() -> Cmd[bool]:
    return Cmd(["PING"], lambda v: v in ("PONG", b"PONG"))


def echo(value: ValueT) -> Cmd[Any]:
    return Cmd(["ECHO", value], _identity)


def get(key: KeyT) -> Cmd[Any]:
    return Cmd(["GET", key], _identity)


def set(  # noqa: A001 - the command's name
    key: KeyT,
    value: ValueT,
    ex: Optional[int] = None,
    px: Optional[int] = None,
    nx: bool = False,
    xx: bool = False,
    keepttl: bool = False,
    get: bool = False,
) -> Cmd[Any]:
    args: List[EncodableT] = ["SET", key, value]
    if ex is not None:
        args += ["EX", ex]
    if px is not None:
        args += ["PX", px]
    if nx:
        args.append("NX")
    if xx:
        args.append("XX")
    if keepttl:
        args.append("KEEPTTL")
    if get:
        args.append("GET")
        return Cmd(args, _identity)
    return Cmd(args, lambda v: None if v is None else _ok(v))


def delete(*keys: KeyT) -> Cmd[int]:
    return Cmd(["DEL", *keys], _int)


def exists(*keys: KeyT) -> Cmd[int]:
    return Cmd(["EXISTS", *keys], _int)


def expire(key: KeyT, seconds: int) -> Cmd[bool]:
    return Cmd(["EXPIRE", key, seconds], _bool01)


def pexpire(key: KeyT, ms: int) -> Cmd[bool]:
    return Cmd(["PEXPIRE", key, ms], _bool01)


def ttl(key: KeyT) -> Cmd[int]:
    return Cmd(["TTL", key], _int)


def pttl(key: KeyT) -> Cmd[int]:
    return Cmd(["PTTL", key], _int)


def incr(key: KeyT, amount: int = 1) -> Cmd[int]:
    return Cmd(["INCRBY", key, amount] if amount != 1 else ["INCR", key], _int)


def decr(key: KeyT, amount: int = 1) -> Cmd[int]:
    return Cmd(["DECRBY", key, amount] if amount != 1 else ["DECR", key], _int)


def mget(*keys: KeyT) -> Cmd[List[Any]]:
    return Cmd(["MGET", *keys], list)


def mset(mapping: Mapping[KeyT, ValueT]) -> Cmd[bool]:
    args: List[EncodableT] = ["MSET"]
    for k, v in mapping.items():
        args += [k, v]
    return Cmd(args, _ok)


def keys(pattern: KeyT = "*") -> Cmd[List[Any]]:
    return Cmd(["KEYS", pattern], list)


def type_(key: KeyT) -> Cmd[str]:
    return Cmd(["TYPE", key], lambda v: str(as_text(v)))


def publish(channel: KeyT, message: ValueT) -> Cmd[int]:
    return Cmd(["PUBLISH", channel, message], _int)


def dbsize() -> Cmd[int]:
    return Cmd(["DBSIZE"], _int)


def flushdb() -> Cmd[bool]:
    return Cmd(["FLUSHDB"], _ok)


def client_id() -> Cmd[int]:
    return Cmd(["CLIENT", "ID"], _int)


def client_getname() -> Cmd[Optional[str]]:
    return Cmd(["CLIENT", "GETNAME"], lambda v: None if v is None else str(as_text(v)))


def hello() -> Cmd[Dict[str, Any]]:
    return Cmd(["HELLO"], lambda v: {_key(k): as_text(x) for k, x in pairs_to_dict(v).items()})


def _parse_info(v: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for line in str(as_text(v)).splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        k, _, x = line.partition(":")
        try:
            out[k] = int(x)
        except ValueError:
            try:
                out[k] = float(x)
            except ValueError:
                out[k] = x
    return out


def info(section: Optional[str] = None) -> Cmd[Dict[str, Any]]:
    return Cmd(["INFO"] if section is None else ["INFO", section], _parse_info)


# Names a Pipeline exposes (all the builders above).
PIPELINE_COMMANDS = {
    "lease": lease, "semaphore": semaphore, "renew": renew, "release": release, "ifgt": ifgt,
    "lock_info": lock_info, "locks": locks, "ping": ping, "echo": echo, "get": get, "set": set, "delete": delete,
    "exists": exists, "expire": expire, "pexpire": pexpire, "ttl": ttl, "pttl": pttl, "incr": incr,
    "decr": decr, "mget": mget, "mset": mset, "keys": keys, "type": type_, "publish": publish, "dbsize": dbsize,
    "flushdb": flushdb, "client_id": client_id, "client_getname": client_getname, "info": info,
}
