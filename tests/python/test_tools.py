"""redis-cli and redis-benchmark (Debian's redis-tools) against the server under test."""

import shutil
import subprocess

import pytest

from helpers import encode

CLI = shutil.which("redis-cli")
BENCH = shutil.which("redis-benchmark")


@pytest.fixture(scope="module", autouse=True)
def _tools_installed():
    # Not a skip: scripts/test.sh installs redis-tools, so a missing tool is a failure.
    assert CLI, "redis-cli not found (install redis-tools)"
    assert BENCH, "redis-benchmark not found (install redis-tools)"


def cli(server, *args, stdin=None, timeout=30):
    extra = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run([CLI, "-h", "127.0.0.1", "-p", str(server.port), *args],
                          capture_output=True, timeout=timeout, **extra)


def test_cli_one_shot(server):
    p = cli(server, "set", "a", "b")
    assert p.returncode == 0 and p.stdout == b"OK\n", p
    p = cli(server, "get", "a")
    assert p.returncode == 0 and p.stdout == b"b\n", p
    p = cli(server, "incr", "n")
    assert p.stdout == b"1\n"
    p = cli(server, "get", "missing")
    assert p.returncode == 0 and p.stdout == b"\n", p
    p = cli(server, "ping")
    assert p.stdout == b"PONG\n"
    p = cli(server, "mget", "a", "missing")
    assert p.stdout == b"b\n\n"
    p = cli(server, "nosuchcmd")
    assert b"ERR unknown command 'nosuchcmd'" in p.stdout + p.stderr
    p = cli(server, "dbsize")
    assert p.stdout == b"2\n"


def test_cli_resp3_one_shot(server):
    p = cli(server, "-3", "set", "a", "b")
    assert p.returncode == 0 and p.stdout == b"OK\n", p
    p = cli(server, "-3", "get", "a")
    assert p.stdout == b"b\n", p
    p = cli(server, "-3", "config", "get", "databases")
    assert p.returncode == 0 and p.stdout == b"databases 16\n", p  # a map prints "key value"
    p = cli(server, "config", "get", "databases")
    assert p.returncode == 0 and p.stdout == b"databases\n16\n", p  # RESP2: flat array
    p = cli(server, "-3", "hello", "3")
    assert p.returncode == 0 and b"proto\n3\n" in p.stdout.replace(b" ", b"\n"), p


def test_cli_tty_style_output(server):
    p = cli(server, "--no-raw", "get", "missing")
    assert p.stdout == b"(nil)\n", p
    p = cli(server, "--no-raw", "incr", "n")
    assert p.stdout == b"(integer) 1\n", p
    p = cli(server, "--no-raw", "-3", "get", "missing")
    assert p.stdout == b"(nil)\n", p


def test_cli_pipe_mass_insert(server):
    n = 10_000
    data = b"".join(encode("SET", f"key:{i}", f"value:{i}") for i in range(n))
    p = cli(server, "--pipe", stdin=data, timeout=60)
    assert p.returncode == 0, p
    out = p.stdout + p.stderr
    assert b"errors: 0, replies: 10000" in out, out
    p = cli(server, "dbsize")
    assert p.stdout == b"10000\n"
    p = cli(server, "get", "key:9999")
    assert p.stdout == b"value:9999\n"


def test_cli_pipe_inline_protocol(server):
    data = "".join(f"SET inline:{i} {i}\r\n" for i in range(500)).encode()
    p = cli(server, "--pipe", stdin=data, timeout=60)
    assert p.returncode == 0, p
    assert b"errors: 0, replies: 500" in p.stdout + p.stderr


def test_cli_interactive_via_stdin(server):
    p = cli(server, stdin=b"set a 1\nget a\nincr a\nfoo\nping\nquit\n")
    assert p.returncode == 0, p
    lines = p.stdout.split(b"\n")
    assert lines[:3] == [b"OK", b"1", b"2"], p.stdout
    assert b"ERR unknown command 'foo'" in p.stdout
    assert b"PONG" in p.stdout


def test_cli_interactive_resp3_via_stdin(server):
    p = cli(server, "-3", stdin=b"set a 1\nget a\nget missing\nconfig get save\n")
    assert p.returncode == 0, p
    assert p.stdout.startswith(b"OK\n1\n"), p.stdout


def test_cli_info_and_scan(server):
    cli(server, "mset", "a", "1", "b", "2", "c", "3")
    p = cli(server, "info", "server")
    assert b"redis_version:" in p.stdout
    p = cli(server, "--scan", "--pattern", "*")
    assert sorted(p.stdout.split()) == [b"a", b"b", b"c"]


def test_cli_with_password(server_factory):
    srv = server_factory("--requirepass", "pw")
    p = subprocess.run([CLI, "-h", "127.0.0.1", "-p", str(srv.port), "ping"],
                       capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert b"NOAUTH Authentication required." in p.stdout + p.stderr
    p = subprocess.run([CLI, "-h", "127.0.0.1", "-p", str(srv.port), "--no-auth-warning", "-a", "pw",
                        "ping"], capture_output=True, timeout=30)
    assert p.stdout == b"PONG\n", p


def _bench(server, *extra):
    p = subprocess.run([BENCH, "-h", "127.0.0.1", "-p", str(server.port),
                        "-t", "ping,set,get,incr,mset", "-n", "2000", "-c", "10", "-q", *extra],
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p
    out = p.stdout.decode("utf-8", "replace").replace("\r", "\n")
    results = [line.strip() for line in out.split("\n") if "requests per second" in line]
    for name in ("PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"):
        assert any(line.startswith(name + ":") for line in results), (name, out)
    return results


def test_benchmark(server):
    _bench(server)


def test_benchmark_pipelined(server):
    _bench(server, "-P", "16")


def test_cli_interactive_tty(server):
    """A real interactive session on a pseudo-terminal: redis-cli fetches COMMAND DOCS at start
    (for hints/help); a malformed reply would crash it."""
    import os
    import pty
    import select
    import time

    master, slave = pty.openpty()
    env = dict(os.environ, TERM="dumb", HOME=str(server.dir))  # dumb: no cursor queries
    proc = subprocess.Popen([CLI, "-h", "127.0.0.1", "-p", str(server.port)], stdin=slave,
                            stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    buf = b""

    def read_until(token: bytes, timeout: float = 10.0):
        nonlocal buf
        deadline = time.monotonic() + timeout
        while token not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"redis-cli never printed {token!r}; screen: {buf[-500:]!r}")
            ready, _, _ = select.select([master], [], [], left)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"redis-cli exited; screen: {buf[-500:]!r}")
                buf += chunk
        idx = buf.index(token) + len(token)
        seen, buf = buf[:idx], buf[idx:]
        return seen

    try:
        prompt = f"127.0.0.1:{server.port}>".encode()
        read_until(prompt)
        os.write(master, b"set greeting hello\r")
        read_until(b"OK")
        read_until(prompt)
        os.write(master, b"get greeting\r")
        read_until(b'"hello"')
        read_until(prompt)
        os.write(master, b"incr counter\r")
        read_until(b"(integer) 1")
        os.write(master, b"help get\r")
        read_until(prompt)
        os.write(master, b"quit\r")
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        os.close(master)
    assert server.client().get("greeting") == b"hello"
