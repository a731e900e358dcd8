"""RESP2/RESP3 encoding and an incremental (sans-I/O) reply parser shared by the sync and asyncio clients.

Reply types become Python values:

=====================  ===========================================================
RESP                   Python
=====================  ===========================================================
simple string ``+``    ``str``
bulk string ``$``      ``bytes`` (``str`` with ``decode_responses=True``)
verbatim ``=``         like a bulk string, without its ``txt:`` prefix
integer ``:``, ``(``   ``int``
double ``,``           ``float``
boolean ``#``          ``bool``
null ``_``, ``$-1``    ``None``
array ``*``            ``list``
map ``%``              ``dict``
set ``~``              ``set`` (a ``list`` when an element is not hashable)
push ``>``             :class:`PushMessage` (a ``list``)
error ``-``, ``!``     a :class:`~ruvio.exceptions.ResponseError` *instance* (raised by the client when it is the
                       whole reply; kept as a value inside EXEC's array)
attribute ``|``        skipped
=====================  ===========================================================
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple, Union

from .exceptions import DataError, InvalidResponse, response_error

EncodableT = Union[bytes, bytearray, memoryview, str, int, float]


class PushMessage(List[Any]):
    """A RESP3 push (``>``): pub/sub messages and other out-of-band data."""


def _arg(value: EncodableT) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bool):
        raise DataError("a bool is not a valid argument; send b'1'/b'0' or an int explicitly")
    if isinstance(value, int):
        return str(value).encode("ascii")
    if isinstance(value, float):
        return repr(value).encode("ascii")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise DataError(f"invalid argument of type {type(value).__name__}: {value!r}")


def encode_command(args: Sequence[EncodableT]) -> bytes:
    """One command as a RESP multibulk."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = _arg(a)
        out.append(b"$%d\r\n" % len(b))
        out.append(b)
        out.append(b"\r\n")
    return b"".join(out)


def encode_many(commands: Sequence[Sequence[EncodableT]]) -> bytes:
    """Several commands back to back (a pipeline)."""
    return b"".join(encode_command(c) for c in commands)


class _Incomplete(Exception):
    """Raised inside the parser when the buffer ends mid-reply. A fresh instance each time: re-raising one shared
    instance would chain every raise's traceback onto it and keep all those frames alive."""


class NeedMore:
    """Returned by :meth:`Parser.get` when the buffer does not hold a whole reply yet."""

    def __repr__(self) -> str:
        return "NEED_MORE"


NEED_MORE = NeedMore()


class Typed:
    """A reply with its exact RESP type, from a ``Parser(typed=True)`` (used by tools and the conformance runner
    to tell apart what the natural Python values fold together: simple vs bulk vs verbatim strings, integers vs
    big numbers, arrays vs pushes, map entries in wire order).

    ``kind``: nil, simple, error, integer, bulk, array, map, set, double, boolean, verbatim, bignumber, push.
    ``value``: str (simple, error text), bytes (bulk), int, float, bool, None, a list of Typed (array, set, push),
    a list of (Typed, Typed) pairs (map), ``(format, bytes)`` (verbatim).
    """

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: Any) -> None:
        self.kind = kind
        self.value = value

    def __repr__(self) -> str:
        return f"Typed({self.kind!r}, {self.value!r})"


class Parser:
    """Incremental RESP2/RESP3 parser: :meth:`feed` bytes, then :meth:`get` replies one at a time."""

    def __init__(self, decode_responses: bool = False, encoding: str = "utf-8", typed: bool = False) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.decode_responses = decode_responses
        self.encoding = encoding
        self.typed = typed

    def feed(self, data: bytes) -> None:
        if self._pos > 65536 and self._pos > len(self._buf) // 2:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def reset(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def has_data(self) -> bool:
        return self._pos < len(self._buf)

    def get(self) -> Any:
        """The next whole reply, or :data:`NEED_MORE`."""
        start = self._pos
        try:
            return self._parse()
        except _Incomplete:
            self._pos = start
            return NEED_MORE

    def _line(self) -> bytes:
        end = self._buf.find(b"\r\n", self._pos)
        if end < 0:
            if len(self._buf) - self._pos > 1 << 20:
                raise InvalidResponse("RESP header line longer than 1 MB")
            raise _Incomplete()
        line = bytes(self._buf[self._pos : end])
        self._pos = end + 2
        return line

    def _blob(self, n: int) -> bytes:
        end = self._pos + n
        if len(self._buf) < end + 2:
            raise _Incomplete()
        data = bytes(self._buf[self._pos : end])
        if self._buf[end : end + 2] != b"\r\n":
            raise InvalidResponse("bulk string not followed by CRLF")
        self._pos = end + 2
        return data

    def _str(self, data: bytes) -> Union[bytes, str]:
        if self.decode_responses:
            try:
                return data.decode(self.encoding)
            except UnicodeDecodeError:
                return data
        return data

    @staticmethod
    def _int(raw: bytes) -> int:
        try:
            if not raw or raw.strip() != raw or b"_" in raw:
                raise ValueError
            return int(raw)
        except ValueError:
            raise InvalidResponse(f"not an integer in RESP header: {raw!r}") from None

    def _parse(self) -> Any:
        line = self._line()
        if not line:
            raise InvalidResponse("empty RESP line")
        t = line[0]
        rest = line[1:]
        typed = self.typed
        if t == 43:  # +
            text = rest.decode("utf-8", "replace")
            return Typed("simple", text) if typed else text
        if t == 45:  # -
            text = rest.decode("utf-8", "replace")
            return Typed("error", text) if typed else response_error(text)
        if t == 58:  # :
            n = self._int(rest)
            return Typed("integer", n) if typed else n
        if t == 36:  # $
            n = self._int(rest)
            if n < 0:
                return Typed("nil", None) if typed else None
            data = self._blob(n)
            return Typed("bulk", data) if typed else self._str(data)
        if t == 42 or t == 62 or t == 126:  # * > ~
            n = self._int(rest)
            if n < 0:
                return Typed("nil", None) if typed else None
            items = [self._parse() for _ in range(n)]
            if typed:
                return Typed({42: "array", 62: "push", 126: "set"}[t], items)
            if t == 62:
                return PushMessage(items)
            if t == 126:
                try:
                    return set(items)
                except TypeError:
                    return items
            return items
        if t == 37:  # %
            n = self._int(rest)
            if n < 0:
                raise InvalidResponse(f"negative map length {line!r}")
            if typed:
                return Typed("map", [(self._parse(), self._parse()) for _ in range(n)])
            out = {}
            for _ in range(n):
                k = self._parse()
                v = self._parse()
                out[_hashable(k)] = v
            return out
        if t == 95:  # _
            if rest:
                raise InvalidResponse(f"invalid RESP3 null {line!r}")
            return Typed("nil", None) if typed else None
        if t == 35:  # #
            if rest not in (b"t", b"f"):
                raise InvalidResponse(f"invalid RESP3 boolean {line!r}")
            return Typed("boolean", rest == b"t") if typed else rest == b"t"
        if t == 44:  # ,
            text = rest.decode("ascii", "replace").lower()
            try:
                d = float(text)
            except ValueError:
                raise InvalidResponse(f"invalid RESP3 double {line!r}") from None
            return Typed("double", d) if typed else d
        if t == 40:  # (
            n = self._int(rest)
            return Typed("bignumber", n) if typed else n
        if t == 33:  # !
            text = self._blob(self._int(rest)).decode("utf-8", "replace")
            return Typed("error", text) if typed else response_error(text)
        if t == 61:  # =
            data = self._blob(self._int(rest))
            if len(data) < 4 or data[3:4] != b":":
                raise InvalidResponse(f"verbatim string without a format prefix: {data[:20]!r}")
            return Typed("verbatim", (data[:3].decode("ascii", "replace"), data[4:])) if typed else self._str(data[4:])
        if t == 124:  # | attribute: read and drop, the real reply follows
            n = self._int(rest)
            for _ in range(2 * n):
                self._parse()
            return self._parse()
        raise InvalidResponse(f"unknown RESP type byte {chr(t)!r} in {line[:100]!r}")


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _hashable(x)) for k, x in v.items())
    if isinstance(v, set):
        return frozenset(v)
    return v


def pairs_to_dict(value: Any) -> Any:
    """A RESP2 flat ``[k, v, k, v]`` array as a dict (a RESP3 map is returned as is)."""
    if isinstance(value, list):
        it = iter(value)
        return {_hashable(k): v for k, v in zip(it, it)}
    return value


def as_text(value: Any) -> Any:
    """bytes to str (utf-8); anything else unchanged."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value


__all__: Tuple[str, ...] = ("PushMessage", "Parser", "Typed", "NEED_MORE", "encode_command", "encode_many", "EncodableT")
