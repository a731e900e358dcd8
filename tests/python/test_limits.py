"""requirepass, unauthenticated parser limits, maxclients and idle timeout."""

import os
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from helpers import ClosedError, Map, encode, wait_until

PW = ["--requirepass", "pw"]


@pytest.mark.server_config(*PW)
def test_noauth_before_auth(server):
    with server.raw() as c:
        for cmd in (encode("PING"), encode("GET", "a"), encode("SET", "a", "b"), b"PING\r\n",
                    encode("CLIENT", "ID"), encode("SELECT", "1"), encode("DEL", "a")):
            c.send(cmd)
            c.expect(b"-NOAUTH Authentication required.\r\n")
        c.send(encode("AUTH", "wrong"))
        c.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        c.send(encode("AUTH", "default", "wrong"))
        c.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        c.send(encode("AUTH", "nosuchuser", "pw"))
        c.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        c.send(encode("GET", "a"))
        c.expect(b"-NOAUTH Authentication required.\r\n")
        c.send(encode("AUTH", "pw"))
        c.expect(b"+OK\r\n")
        c.send(encode("SET", "a", "b") + encode("GET", "a"))
        c.expect(b"+OK\r\n$1\r\nb\r\n")


@pytest.mark.server_config(*PW)
def test_auth_with_default_user(server):
    with server.raw() as c:
        c.send(encode("AUTH", "default", "pw") + encode("PING"))
        c.expect(b"+OK\r\n+PONG\r\n")


@pytest.mark.server_config(*PW)
def test_unknown_command_and_arity_checked_before_auth(server):
    with server.raw() as c:
        c.send(encode("foo", "bar"))
        c.expect(b"-ERR unknown command 'foo', with args beginning with: 'bar' \r\n")
        c.send(encode("GET"))
        c.expect(b"-ERR wrong number of arguments for 'get' command\r\n")
        c.send(encode("AUTH"))
        c.expect(b"-ERR wrong number of arguments for 'auth' command\r\n")


@pytest.mark.server_config(*PW)
def test_allowed_before_auth_quit_reset_hello(server):
    with server.raw() as c:
        c.send(encode("RESET"))
        c.expect(b"+RESET\r\n")
        c.send(encode("HELLO", "3"))
        line = c.read_reply()
        assert line.startswith("NOAUTH HELLO must be called with the client already authenticated")
        c.send(encode("HELLO", "3", "AUTH", "default", "wrong"))
        c.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        c.send(encode("HELLO", "3", "AUTH", "default", "pw"))
        reply = c.read_reply()
        assert isinstance(reply, Map) and reply.as_dict()[b"proto"] == 3
        c.send(encode("GET", "missing"))
        c.expect(b"_\r\n")
    with server.raw() as c:
        c.send(encode("QUIT"))
        c.expect(b"+OK\r\n")
        assert c.expect_closed() == b""


@pytest.mark.server_config(*PW)
def test_reset_drops_authentication(server):
    with server.raw() as c:
        c.send(encode("AUTH", "pw") + encode("PING"))
        c.expect(b"+OK\r\n+PONG\r\n")
        c.send(encode("RESET") + encode("PING"))
        c.expect(b"+RESET\r\n-NOAUTH Authentication required.\r\n")


@pytest.mark.server_config(*PW)
def test_unauthenticated_multibulk_limit(server):
    with server.raw() as c:
        c.send(b"*11\r\n")
        c.expect(b"-ERR Protocol error: unauthenticated multibulk length\r\n")
        assert c.expect_closed() == b""
    with server.raw() as c:  # 10 arguments are still fine
        c.send(encode("DEL", *[f"k{i}" for i in range(9)]))
        c.expect(b"-NOAUTH Authentication required.\r\n")
        c.send(encode("AUTH", "pw") + encode("DEL", *[f"k{i}" for i in range(20)]))
        c.expect(b"+OK\r\n:0\r\n")  # limit is lifted after AUTH


@pytest.mark.server_config(*PW)
def test_unauthenticated_bulk_limit(server):
    with server.raw() as c:
        c.send(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n")
        c.expect(b"-ERR Protocol error: unauthenticated bulk length\r\n")
        assert c.expect_closed() == b""
    with server.raw() as c:  # 16 KB exactly is fine
        c.send(encode("AUTH", "p" * 16384))
        c.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        c.send(encode("AUTH", "pw") + encode("SET", "big", "v" * 100000) + encode("STRLEN", "big"))
        c.expect(b"+OK\r\n+OK\r\n:100000\r\n")


@pytest.mark.server_config(*PW)
def test_redis_py_with_password(server):
    for proto in (2, 3):
        c = server.client(protocol=proto)
        assert c.set("x", "1") and c.incr("x") >= 2
        c.close()
    no_retry = Retry(NoBackoff(), 0)  # auth errors are ConnectionErrors: don't retry them
    bad = redis.Redis(host="127.0.0.1", port=server.port, password="nope", socket_timeout=5,
                      retry=no_retry)
    with pytest.raises(redis.AuthenticationError):
        bad.ping()
    bad.close()
    noauth = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=5, protocol=2,
                         retry=no_retry)
    with pytest.raises(redis.AuthenticationError):
        noauth.ping()
    noauth.close()


@pytest.mark.server_config("--maxclients", "2")
def test_maxclients(server):
    a, b = server.raw(), server.raw()
    try:
        a.assert_open()
        b.assert_open()
        with server.raw() as c:
            c.expect(b"-ERR max number of clients reached\r\n")
            assert c.expect_closed() == b""
        a.close()

        def third_works():
            with server.raw() as c:
                try:
                    c.send(encode("PING"))
                    return c.read_reply(timeout=2) == b"PONG"
                except (ClosedError, OSError):
                    return False
        wait_until(third_works, timeout=10, interval=0.1, msg="a slot to free up")
        b.assert_open()
    finally:
        a.close()
        b.close()


def _server_side_timer(server_port, client_port):
    """(timer kind, clock ticks until it fires) of the server's end of a loopback connection, from /proc/net/tcp;
    kind 2 is the keepalive timer."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        local, remote = int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)
        if local == server_port and remote == client_port:
            kind, when = f[5].split(":")
            return int(kind, 16), int(when, 16)
    raise AssertionError(f"no server socket for client port {client_port} in /proc/net/tcp")


@pytest.mark.server_config("--tcp-keepalive", "60")
def test_tcp_keepalive_probes_idle_clients(server):
    ticks = os.sysconf("SC_CLK_TCK")
    with server.raw() as c:
        c.call("PING")
        kind, when = _server_side_timer(server.port, c.sock.getsockname()[1])
        assert kind == 2, "keepalive timer not armed on the server's socket"
        assert 50 * ticks < when <= 60 * ticks
        c.call("CONFIG", "SET", "tcp-keepalive", "0")
        with server.raw() as fresh:  # the setting applies to connections accepted after it, as in Redis
            fresh.call("PING")
            assert _server_side_timer(server.port, fresh.sock.getsockname()[1])[0] == 0


@pytest.mark.server_config("--timeout", "1")
def test_idle_timeout_disconnects(server):
    idle = server.raw()
    sub = server.raw()
    try:
        idle.assert_open()
        sub.send(encode("SUBSCRIBE", "ch"))
        sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
        start = time.monotonic()
        assert idle.expect_closed(timeout=10) == b""
        assert time.monotonic() - start < 10
        # pub/sub clients are exempt from the idle timeout (as in Redis)
        while time.monotonic() - start < 3.0:
            time.sleep(0.1)
        sub.send(encode("PING"))
        sub.expect(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")
        with server.raw() as fresh:
            fresh.assert_open()
    finally:
        for c in (idle, sub):
            c.close()
