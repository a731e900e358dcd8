"""Fixtures for the black-box Redis-compatibility suite.

The suite talks to a real server process over 127.0.0.1 only.

Target selection (environment):
  RUVIO_TEST_TARGET=redis  -> redis-server --port P --dir TMP --save '' --appendonly no [extra]
  otherwise (default)      -> $RUVIO_BIN server --port P --dir TMP [extra]
                              (RUVIO_BIN defaults to <repo>/target/release/ruvio)

Extra configuration is always given as redis-server style "--name value" pairs, which
ruvio accepts in the same form, e.g. ("--requirepass", "pw").

Fixtures:
  server          the module's shared default server (state flushed before each test), or a
                  dedicated server when the test carries @pytest.mark.server_config(...)
  server_factory  start extra servers with any config inside a test
  r               redis-py client, parametrized over sync/asyncio x RESP2/RESP3
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff

REPO_ROOT = Path(__file__).resolve().parents[2]
TARGET = os.environ.get("RUVIO_TEST_TARGET", "ruvio").strip().lower() or "ruvio"
IS_REDIS = TARGET == "redis"
STARTUP_TIMEOUT = 10.0


def _die_with_parent() -> None:
    """In the child: get SIGKILL if the test runner dies, so no server outlives a killed run."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ping_ok(port: int) -> bool:
    """One connect + PING attempt. NOAUTH also proves the server is serving."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.settimeout(0.5)
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            data = b""
            deadline = time.monotonic() + 1.0
            while b"\r\n" not in data and time.monotonic() < deadline:
                chunk = s.recv(256)
                if not chunk:
                    return False
                data += chunk
            return data.startswith(b"+PONG") or data.startswith(b"-NOAUTH")
    except OSError:
        return False


class ServerProcess:
    """A started server process listening on 127.0.0.1:port inside a fresh temp dir."""

    def __init__(self, extra_args: tuple[str, ...] = ()):
        self.extra_args = tuple(str(a) for a in extra_args)
        self.dir = Path(tempfile.mkdtemp(prefix="ruvio-compat-py-"))
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "server.log"
        self.password: str | None = None
        args = list(self.extra_args)
        for i, a in enumerate(args[:-1]):
            if a == "--requirepass":
                self.password = args[i + 1]

    # -- command line -------------------------------------------------------------------
    def command(self, port: int) -> list[str]:
        if IS_REDIS:
            exe = shutil.which("redis-server")
            if not exe:
                raise RuntimeError("RUVIO_TEST_TARGET=redis but redis-server is not installed")
            return [exe, "--port", str(port), "--dir", str(self.dir),
                    "--save", "", "--appendonly", "no", *self.extra_args]
        exe = os.environ.get("RUVIO_BIN") or str(REPO_ROOT / "target" / "release" / "ruvio")
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise RuntimeError(f"ruvio binary not found or not executable: {exe} "
                               "(build it with `cargo build --release` or set RUVIO_BIN)")
        return [exe, "server", "--port", str(port), "--dir", str(self.dir), *self.extra_args]

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> "ServerProcess":
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> "ServerProcess":
        last_error = ""
        for _attempt in range(3):  # a free port can be taken between probe and bind: retry
            port = _free_port()
            cmd = self.command(port)
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(cmd, cwd=self.dir, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            log.close()
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if _ping_ok(port):
                    # guard against having reached another process on a just-reused port:
                    # a server of ours that failed to bind exits right away
                    time.sleep(0.05)
                    if self.proc.poll() is not None:
                        break
                    self.port = port
                    return self
                time.sleep(0.05)
            last_error = self.log_tail()
            self._terminate()
        raise RuntimeError(f"server did not become ready: {self.command(0)}\n{last_error}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _terminate(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def stop(self) -> None:
        self._terminate()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    # Test clients never retry: a retry after a dropped connection would hide server bugs.
    def client(self, **kw) -> redis.Redis:
        kw.setdefault("socket_timeout", 10)
        kw.setdefault("retry", redis.retry.Retry(NoBackoff(), 0))
        if self.password is not None:
            kw.setdefault("password", self.password)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def async_client(self, **kw) -> redis.asyncio.Redis:
        kw.setdefault("socket_timeout", 10)
        kw.setdefault("retry", redis.asyncio.retry.Retry(NoBackoff(), 0))
        if self.password is not None:
            kw.setdefault("password", self.password)
        return redis.asyncio.Redis(host="127.0.0.1", port=self.port, **kw)

    def raw(self, timeout: float = 5.0):
        from helpers import RawConn
        return RawConn(self.port, timeout=timeout)

    def reset_state(self) -> None:
        """FLUSHALL between tests on the shared server (raw socket, short timeout, no retry)."""
        from helpers import RawConn
        with RawConn(self.port, timeout=5) as c:
            c.send(b"*1\r\n$8\r\nFLUSHALL\r\n")
            c.expect(b"+OK\r\n")


def pytest_collection_modifyitems(config, items):
    if not IS_REDIS:
        return
    skip = pytest.mark.skip(reason="ruvio-only behaviour (RUVIO_TEST_TARGET=redis)")
    for item in items:
        if item.get_closest_marker("ruvio_only"):
            item.add_marker(skip)


def pytest_report_header(config):
    if IS_REDIS:
        return "target: redis-server (RUVIO_TEST_TARGET=redis)"
    exe = os.environ.get("RUVIO_BIN") or str(REPO_ROOT / "target" / "release" / "ruvio")
    return f"target: ruvio ({exe})"


@pytest.fixture(scope="module")
def shared_server():
    srv = ServerProcess().start()
    yield srv
    srv.stop()


@pytest.fixture
def server_factory():
    started: list[ServerProcess] = []

    def make(*args: str) -> ServerProcess:
        srv = ServerProcess(tuple(args)).start()
        started.append(srv)
        return srv

    yield make
    crashed = [s for s in started if s.proc is not None and s.proc.poll() is not None]
    for s in started:
        s.stop()
    assert not crashed, "server process died during the test"


@pytest.fixture
def server(request, shared_server, server_factory):
    marker = request.node.get_closest_marker("server_config")
    if marker is not None:
        srv = server_factory(*marker.args)
    else:
        if getattr(shared_server, "broken", None):
            pytest.fail(f"shared server unusable since an earlier test: {shared_server.broken}")
        if not shared_server.alive():
            shared_server.broken = "process died"
            pytest.fail("shared server died earlier:\n" + shared_server.log_tail())
        try:
            shared_server.reset_state()
        except Exception as e:  # hung or misbehaving: fail this and later tests fast
            shared_server.broken = f"FLUSHALL failed: {e}"
            raise
        srv = shared_server
    yield srv
    assert srv.alive(), "server process died during the test:\n" + srv.log_tail()


# ---------------------------------------------------------------------------------------
# redis-py clients: sync and asyncio, RESP2 and RESP3.
# The asyncio client is wrapped so the same (synchronous) test body drives it: every
# coroutine returned by the real asyncio client is run to completion on a private loop.


class _SyncProxy:
    def __init__(self, target, loop: asyncio.AbstractEventLoop):
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)

    def _wrap(self, value):
        if inspect.isawaitable(value):
            value = self._loop.run_until_complete(_await(value))
        elif inspect.isasyncgen(value):  # e.g. scan_iter: drain it into a list
            value = self._loop.run_until_complete(_collect(value))
        if isinstance(value, (redis.asyncio.client.Pipeline, redis.asyncio.client.PubSub)):
            return _SyncProxy(value, self._loop)
        return value

    def __getattr__(self, name):
        attr = getattr(self._target, name)
        if callable(attr):
            def call(*a, **kw):
                return self._wrap(attr(*a, **kw))
            return call
        return attr

    def __setattr__(self, name, value):
        setattr(self._target, name, value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.reset()


async def _await(aw):
    return await aw


async def _collect(agen):
    return [item async for item in agen]


class AsyncAsSync(_SyncProxy):
    """redis.asyncio.Redis driven from synchronous test code."""

    def __init__(self, client: redis.asyncio.Redis):
        super().__init__(client, asyncio.new_event_loop())

    def pipeline(self, transaction: bool = True, shard_hint=None):
        return _SyncProxy(self._target.pipeline(transaction=transaction, shard_hint=shard_hint),
                          self._loop)

    def pubsub(self, **kw):
        return _SyncProxy(self._target.pubsub(**kw), self._loop)

    def close(self):
        try:
            self._loop.run_until_complete(self._target.aclose())
        finally:
            self._loop.close()


CLIENT_KINDS = [("sync", 2), ("sync", 3), ("async", 2), ("async", 3)]


@pytest.fixture(params=CLIENT_KINDS, ids=[f"{k}-resp{p}" for k, p in CLIENT_KINDS])
def r(request, server):
    kind, proto = request.param
    if kind == "sync":
        client = server.client(protocol=proto)
    else:
        client = AsyncAsSync(server.async_client(protocol=proto))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def r2(server):
    """A second plain sync RESP2 client (e.g. to write behind a WATCH)."""
    c = server.client(protocol=2)
    yield c
    c.close()
