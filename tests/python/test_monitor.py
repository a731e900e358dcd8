"""MONITOR over TCP, in Redis 7.0's shapes: line format, order (transactions, scripts, blocked commands),
redaction of passwords, admin commands hidden, ACL category, and the output bound that disconnects a monitor which
does not keep up. Runs against redis-server too (RUVIO_TEST_TARGET=redis), except the tests marked ruvio_only."""

from __future__ import annotations

import re
import socket
import subprocess
import time

import pytest

from helpers import ClosedError, Error, RawConn, encode, wait_until

LINE = re.compile(rb"^(\d+)\.(\d{6}) \[(\d+) ([^\]]+)\] (.*)$")


def start_monitor(server) -> RawConn:
    m = server.raw()
    m.cmd("MONITOR")
    assert m.read_reply() == b"OK"
    return m


def next_line(m: RawConn, timeout: float = 5.0) -> tuple[int, bytes, bytes]:
    """One monitor line: (db, origin, the quoted arguments)."""
    line = m.read_reply(timeout)
    match = LINE.match(bytes(line))
    assert match, f"not a monitor line: {line!r}"
    assert abs(int(match.group(1)) - time.time()) < 60
    return int(match.group(3)), match.group(4), match.group(5)


def args_of(m: RawConn) -> bytes:
    return next_line(m)[2]


def test_monitor_shows_each_command_with_time_db_and_address(server) -> None:
    m = start_monitor(server)
    with server.raw() as c:
        c.call("SET", "foo", "bar")
        c.call("SELECT", "3")
        c.call("GET", "we\"ird\r\nkey\x00")
        port = c.sock.getsockname()[1]
        db, origin, args = next_line(m)
        assert (db, origin, args) == (0, f"127.0.0.1:{port}".encode(), b'"SET" "foo" "bar"')
        # Shown after it ran, so in the database it selected (Redis does the same).
        assert next_line(m) == (3, origin, b'"SELECT" "3"')
        # Arguments are quoted as Redis's sdscatrepr does: no raw CR/LF can break the line.
        assert next_line(m) == (3, origin, b'"GET" "we\\"ird\\r\\nkey\\x00"')
    m.close()


def test_monitor_orders_transactions_and_hides_refused_commands(server) -> None:
    m = start_monitor(server)
    with server.raw() as c:
        assert c.call("MULTI") == b"OK"
        assert c.call("SET", "foo", "bar") == b"QUEUED"
        c.call("EXEC")
        assert args_of(m) == b'"MULTI"'
        assert args_of(m) == b'"SET" "foo" "bar"'
        assert args_of(m) == b'"EXEC"'
        # An unknown command is refused before it runs: not shown; the EXEC that fails with EXECABORT is.
        c.call("MULTI")
        assert isinstance(c.call("NOSUCHCOMMAND", "x"), Error)
        assert isinstance(c.call("EXEC"), Error)
        assert args_of(m) == b'"MULTI"'
        assert args_of(m) == b'"EXEC"'
    m.close()


def test_monitor_shows_script_commands_after_their_script(server) -> None:
    m = start_monitor(server)
    with server.raw() as c:
        c.call("SELECT", "2")
        assert args_of(m) == b'"SELECT" "2"'
        c.call("EVAL", "redis.call('set', KEYS[1], ARGV[1]) return 1", "1", "foo", "bar")
        db, origin, args = next_line(m)
        assert (db, args.split(b" ")[0]) == (2, b'"EVAL"') and origin.startswith(b"127.0.0.1:")
        assert next_line(m) == (2, b"lua", b'"set" "foo" "bar"')
        c.call("SELECT", "0")
    m.close()


def test_monitor_shows_a_blocked_command_once(server) -> None:
    m = start_monitor(server)
    with server.raw() as b, server.raw() as c:
        b.cmd("BLPOP", "mylist", "0")
        wait_until(lambda: b"blpop" in bytes(c.call("CLIENT", "LIST")) and b"flags=b" in bytes(c.call("CLIENT", "LIST")),
                   msg="BLPOP blocked")
        c.call("LPUSH", "mylist", "1")
        assert b.read_reply() == [b"mylist", b"1"]
        c.call("LPUSH", "mylist", "2")
        seen = []
        while len(seen) < 3:
            a = args_of(m)
            if not a.startswith(b'"CLIENT"'):
                seen.append(a)
        assert seen == [b'"BLPOP" "mylist" "0"', b'"LPUSH" "mylist" "1"', b'"LPUSH" "mylist" "2"']
    m.close()


def test_monitor_redacts_passwords_and_hides_admin_commands(server) -> None:
    m = start_monitor(server)
    with server.raw() as c:
        assert isinstance(c.call("AUTH", "not-real"), Error)
        assert isinstance(c.call("AUTH", "someone", "not-a-password"), Error)
        assert isinstance(c.call("HELLO", "2", "AUTH", "someone", "not-a-password"), Error)
        c.call("CONFIG", "GET", "maxmemory")  # admin: never shown
        c.call("PING")
        assert args_of(m) == b'"AUTH" "(redacted)"'
        assert args_of(m) == b'"AUTH" "(redacted)" "(redacted)"'
        assert args_of(m) == b'"HELLO" "2" "AUTH" "(redacted)" "(redacted)"'
        assert args_of(m) == b'"PING"'
    m.close()


def test_monitor_is_an_admin_command_in_acl_terms(server) -> None:
    with server.raw() as c:
        for cat in ("admin", "dangerous", "slow"):
            assert b"monitor" in c.call("ACL", "CAT", cat), cat
        assert c.call("ACL", "SETUSER", "watcher", "on", ">pw", "+@all", "-@admin", "~*") == b"OK"
        assert c.call("AUTH", "watcher", "pw") == b"OK"
        reply = c.call("MONITOR")
        assert isinstance(reply, Error) and reply.startswith("NOPERM"), reply
        c.call("PING")
        assert c.call("PING") == b"PONG", "the refused client is not in monitor mode"
    with server.raw() as c:
        c.call("ACL", "DELUSER", "watcher")


def test_monitor_inside_multi_is_refused_as_redis_does(server) -> None:
    with server.raw() as c:
        c.call("MULTI")
        assert c.call("MONITOR") == b"QUEUED"
        assert c.call("EXEC") == [Error("ERR MONITOR isn't allowed for DENY BLOCKING client")]
        assert c.call("SET", "still", "normal") == b"OK"


@pytest.mark.ruvio_only
def test_reset_leaves_monitor_mode(server) -> None:
    """RESET's documentation says it exits monitor mode; redis-server 7.0.15 keeps the flag (checked here with
    RUVIO_TEST_TARGET=redis), Ruvio does what the documentation says."""
    m = start_monitor(server)
    m.cmd("RESET")
    assert m.read_reply() == b"RESET"
    with server.raw() as c:
        c.call("SET", "after", "reset")
        assert b"flags=O" not in bytes(c.call("CLIENT", "LIST"))
    assert m.no_data_for(0.3) == b""
    m.close()


def test_redis_cli_monitor_prints_the_commands(server) -> None:
    proc = subprocess.Popen(["redis-cli", "-p", str(server.port), "monitor"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "OK"
        with server.raw() as c:
            c.call("SET", "from-cli", "v 1")
            port = c.sock.getsockname()[1]
        line = proc.stdout.readline().strip()
        assert re.fullmatch(rf'\d+\.\d{{6}} \[0 127\.0\.0\.1:{port}\] "SET" "from-cli" "v 1"', line), line
    finally:
        proc.kill()
        proc.wait()


def slow_monitor(server) -> tuple[RawConn, bytes]:
    """A monitor whose socket buffers are small and which never reads again, and its client id."""
    m = RawConn.__new__(RawConn)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", server.port))
    s.settimeout(5)
    m.port, m.timeout, m.sock, m.buf = server.port, 5.0, s, b""
    client_id = str(m.call("CLIENT", "ID")).encode()
    m.cmd("MONITOR")
    assert m.read_reply() == b"OK"
    return m, client_id


def flood_until_gone(server, monitor_id: bytes) -> None:
    value = "x" * 64 * 1024
    with server.raw(timeout=10) as c:
        for _ in range(400):
            c.call("SET", "big", value)
            if b"id=" + monitor_id + b" " not in bytes(c.call("CLIENT", "LIST")):
                return
        raise AssertionError("the monitor that never reads was not disconnected")


def test_a_monitor_that_does_not_keep_up_is_disconnected_by_the_normal_limit(server) -> None:
    with server.raw() as c:
        old = c.call("CONFIG", "GET", "client-output-buffer-limit")[1]
        assert c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0") == b"OK"
    try:
        m, client_id = slow_monitor(server)
        with server.raw() as c:
            assert re.search(rb"id=" + client_id + rb" [^\n]*flags=O", bytes(c.call("CLIENT", "LIST")))
        flood_until_gone(server, client_id)
        m.close()
    finally:
        with server.raw() as c:
            c.call("CONFIG", "SET", "client-output-buffer-limit", old)


@pytest.mark.ruvio_only
def test_without_a_normal_limit_a_monitor_gets_the_pubsub_limit(server) -> None:
    """Redis leaves a normal client (a monitor) unbounded by default; Ruvio bounds a monitor by the pubsub class."""
    with server.raw() as c:
        old = c.call("CONFIG", "GET", "client-output-buffer-limit")[1]
        assert c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0 pubsub 1mb 0 0") == b"OK"
    try:
        m, client_id = slow_monitor(server)
        with server.raw() as c:
            assert re.search(rb"id=" + client_id + rb" [^\n]*flags=O", bytes(c.call("CLIENT", "LIST")))
        flood_until_gone(server, client_id)
        with pytest.raises((ClosedError, ConnectionResetError, TimeoutError, OSError)):
            for _ in range(1000):
                m.read_exact(64 * 1024, timeout=5)
        m.close()
    finally:
        with server.raw() as c:
            c.call("CONFIG", "SET", "client-output-buffer-limit", old)
