"""Raw-socket helpers: exact-byte reads and a small RESP2/RESP3 parser for tests."""

from __future__ import annotations

import os
import socket
import time


class Simple(bytes):
    """+simple string"""


class Error(str):
    """-error (text without the leading '-' and CRLF)"""


class Map(list):
    """%map kept as a list of (key, value) pairs (keeps order and duplicates visible)."""

    def as_dict(self):
        return dict(self)


class Set(list):
    """~set"""


class Push(list):
    """>push"""


class Verbatim(bytes):
    """=verbatim string; .fmt holds the 3-letter format"""

    fmt: bytes = b""


class Double(float):
    """,double"""


class _Null:
    def __repr__(self):
        return "NULL"


NULL = _Null()  # RESP3 '_' (and RESP2 $-1 / *-1, distinguishable via .last_raw)


class ClosedError(Exception):
    pass


class RawConn:
    """A plain TCP connection to the server under test on 127.0.0.1."""

    def __init__(self, port: int, timeout: float = 5.0):
        self.port = port
        self.timeout = timeout
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""

    # -- basics --------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def cmd(self, *args) -> None:
        """Send one command encoded as a RESP multibulk."""
        self.send(encode(*args))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"timed out; buffered so far: {self.buf[:300]!r}")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError(f"timed out; buffered so far: {self.buf[:300]!r}") from None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise ClosedError(f"connection closed; buffered: {self.buf[:300]!r}")
        self.buf += chunk

    def read_exact(self, n: int, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def expect(self, expected: bytes, timeout: float | None = None) -> None:
        """Read exactly len(expected) bytes and compare."""
        try:
            got = self.read_exact(len(expected), timeout)
        except (ClosedError, TimeoutError) as e:
            raise AssertionError(f"expected {expected!r}, got {self.buf!r} ({e})") from None
        assert got == expected, f"expected {expected!r}\n     got {got!r}"

    def _line(self, deadline: float) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill(deadline)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read_reply(self, timeout: float | None = None):
        deadline = time.monotonic() + (timeout or self.timeout)
        return self._parse(deadline)

    def _parse(self, deadline: float):
        line = self._line(deadline)
        if not line:
            raise AssertionError("empty RESP line")
        t, rest = line[:1], line[1:]
        if t == b"+":
            return Simple(rest)
        if t == b"-":
            return Error(rest.decode("utf-8", "replace"))
        if t == b":":
            return int(rest)
        if t == b"_":
            return NULL
        if t == b"#":
            assert rest in (b"t", b"f"), line
            return rest == b"t"
        if t == b",":
            return Double(float(rest))
        if t == b"(":
            return int(rest)
        if t in (b"$", b"=", b"!"):
            n = int(rest)
            if n < 0:
                return NULL
            while len(self.buf) < n + 2:
                self._fill(deadline)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            if t == b"=":
                v = Verbatim(data[4:])
                v.fmt = data[:3]
                return v
            if t == b"!":
                return Error(data.decode("utf-8", "replace"))
            return data
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return NULL
            items = [self._parse(deadline) for _ in range(n)]
            return {b"*": list, b"~": Set, b">": Push}[t](items)
        if t in (b"%", b"|"):
            n = int(rest)
            pairs = Map()
            for _ in range(n):
                k = self._parse(deadline)
                v = self._parse(deadline)
                pairs.append((k, v))
            if t == b"|":  # attribute: skip, return the real reply that follows
                return self._parse(deadline)
            return pairs
        raise AssertionError(f"unknown RESP type byte in line {line!r}")

    def call(self, *args):
        self.cmd(*args)
        return self.read_reply()

    def expect_closed(self, timeout: float = 5.0) -> bytes:
        """Wait (bounded) until the server closes the connection; returns leftover bytes."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._fill(deadline)
            except ClosedError:
                return self.buf
            except TimeoutError:
                raise AssertionError(
                    f"connection still open after {timeout}s; got {self.buf[:300]!r}") from None
            if len(self.buf) > 10_000_000:
                raise AssertionError("server keeps sending data instead of closing")

    def assert_open(self) -> None:
        """The connection is still usable: a PING round-trip works."""
        self.send(b"*1\r\n$4\r\nPING\r\n")
        self.expect(b"+PONG\r\n")

    def no_data_for(self, seconds: float) -> bytes:
        """Read for `seconds`; returns what arrived (b'' if nothing). Raises ClosedError on EOF."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self._fill(deadline)
        except TimeoutError:
            pass
        out, self.buf = self.buf, b""
        return out


def encode(*args) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a).encode()
        elif isinstance(a, str):
            a = a.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


def wait_until(pred, timeout: float = 5.0, interval: float = 0.02, msg: str = "condition"):
    """Bounded poll: returns pred()'s truthy value or fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {msg}")
        time.sleep(interval)


def proc_kib(pid: int, file: str, field: str) -> int:
    """A "Field:   N kB" line of /proc/PID/FILE (status, smaps_rollup), in KiB."""
    with open(f"/proc/{pid}/{file}") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/{file}")


def rss_kib(pid: int) -> int:
    return proc_kib(pid, "status", "VmRSS")


def random_bytes(n: int) -> bytes:
    return os.urandom(n)
