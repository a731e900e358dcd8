"""Connection options, timeouts, reconnects and retries, against real servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import uuid

import pytest

import ruvio
from ruvio._options import parse_url
from servers import Server, _tempdir, free_port, start_redis, start_ruvio


def test_url_parsing() -> None:
    assert parse_url("redis://localhost") == {"host": "localhost"}
    assert parse_url("redis://u:p%40ss@h:7000/3?client_name=w1&command_timeout=2.5&protocol=2") == {
        "host": "h", "port": 7000, "username": "u", "password": "p@ss", "db": 3, "client_name": "w1",
        "command_timeout": 2.5, "protocol": 2}
    assert parse_url("rediss://:secret@h:6380")["ssl"] is True
    assert parse_url("redis://h/?durability_replicas=1&decode_responses=true") == {
        "host": "h", "durability_replicas": 1, "decode_responses": True}
    with pytest.raises(ruvio.DataError):
        parse_url("http://h")
    with pytest.raises(ruvio.DataError):
        parse_url("redis://h/?nonsense=1")


def test_auth_db_name_from_url() -> None:
    s = start_ruvio(password="s3cret")
    try:
        with pytest.raises(ruvio.AuthenticationError):
            ruvio.Ruvio("127.0.0.1", s.port, password="wrong").ping()
        with pytest.raises(ruvio.AuthenticationError):  # HELLO 3 without credentials: refused at connect
            ruvio.Ruvio("127.0.0.1", s.port).get("k")
        with pytest.raises(ruvio.ResponseError) as e:  # RESP2 has no handshake: the command is refused
            ruvio.Ruvio("127.0.0.1", s.port, protocol=2).get("k")
        assert e.value.code == "NOAUTH"
        r = ruvio.from_url(f"redis://default:s3cret@127.0.0.1:{s.port}/2?client_name=worker-7")
        r.set("k", "in db 2")
        assert r.client_getname() == "worker-7"
        r0 = ruvio.Ruvio("127.0.0.1", s.port, password="s3cret", protocol=2, client_name="two")
        assert r0.get("k") is None  # db 0
        assert r0.client_getname() == "two"
        assert ruvio.Ruvio("127.0.0.1", s.port, password="s3cret", db=2).get("k") == b"in db 2"
        r.close()
        r0.close()
    finally:
        s.stop()


def test_unreachable_server_is_an_error_not_a_hang() -> None:
    port = free_port()  # nothing listens there
    r = ruvio.Ruvio("127.0.0.1", port, connect_timeout=2)
    t0 = time.monotonic()
    with pytest.raises(ruvio.ConnectionError) as e:
        r.ping()
    assert e.value.sent is False
    assert time.monotonic() - t0 < 5


def test_paused_server_times_out(own_server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", own_server.port, command_timeout=1.0, connect_timeout=1.0)
    assert r.ping()
    own_server.sigstop()
    try:
        t0 = time.monotonic()
        with pytest.raises(ruvio.TimeoutError) as e:
            r.get(key)
        assert e.value.sent is True  # fate unknown
        assert 0.9 < time.monotonic() - t0 < 8
        # A new connection to a paused server: the kernel accepts, the handshake times out.
        fresh = ruvio.Ruvio("127.0.0.1", own_server.port, connect_timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises(ruvio.TimeoutError):
            fresh.ping()
        assert time.monotonic() - t0 < 8
    finally:
        own_server.sigcont()
    assert r.ping()  # the timed-out connection was dropped; a new one works


def test_lease_is_not_retried_after_a_timeout(own_server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", own_server.port, command_timeout=1.0)
    grants_before = r.info("locks")["lock_grants"]
    own_server.sigstop()
    try:
        with pytest.raises(ruvio.TimeoutError) as e:
            r.lease(key, 30_000)
        assert e.value.sent
    finally:
        own_server.sigcont()
    # The request was in the server's socket: it ran once after SIGCONT (the grant is "lost" until its TTL).
    deadline = time.monotonic() + 10
    while r.lock_info(key) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    info = r.lock_info(key)
    assert info is not None and len(info.holders) == 1
    assert r.info("locks")["lock_grants"] == grants_before + 1  # exactly one grant: no retry


def test_reconnects_after_restart(own_server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", own_server.port)
    token = r.lease(key, 60_000)
    assert token is not None
    own_server.restart()
    assert r.ping()  # the stale idle connection is noticed and replaced
    info = r.lock_info(key)  # the lease survived the restart (append-only log)
    assert info is not None and info.holders[0].token == token
    assert r.release(key, token) is True
    r.close()


def test_release_rides_out_a_restart(own_server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", own_server.port, command_timeout=10)
    token = r.lease(key, 60_000)
    assert token is not None
    own_server.stop()
    restarter = threading.Timer(0.5, own_server.start)
    restarter.start()
    try:
        assert r.release(key, token) is True  # refused connections are retried for RELEASE/RENEW
    finally:
        restarter.join()
    # LEASE is not retried when the server refuses connections: the error surfaces at once.
    own_server.stop()
    with pytest.raises(ruvio.ConnectionError) as e:
        r.lease(key, 1000)
    assert e.value.sent is False
    own_server.start()


def test_durability_option_is_sent_and_its_error_surfaced(server: Server) -> None:
    # The option goes out as CLIENT DURABILITY REPLICAS n on connect. This server has no replicas, so a write on a
    # connection that needs one is refused before it runs, with the server's own error.
    r = ruvio.Ruvio("127.0.0.1", server.port, durability_replicas=1)
    assert r.ping()
    with pytest.raises(ruvio.ResponseError) as e:
        r.lease(f"durable-{uuid.uuid4().hex}", 1000)
    assert "NOREPLICAS" in str(e.value)
    r2 = ruvio.from_url(f"redis://127.0.0.1:{server.port}?durability_replicas=0", protocol=2)
    assert r2.lease(f"durable-{uuid.uuid4().hex}", 1000) is not None


def test_resp2_fallback_when_server_lacks_hello() -> None:
    s = start_redis("--rename-command", "HELLO", "")
    try:
        r = ruvio.Ruvio("127.0.0.1", s.port, client_name="fallback")  # asks for RESP3
        assert r.set("k", "v") is True and r.get("k") == b"v"
        conn = r.connection_pool.get_connection()
        assert conn.protocol == 2
        r.connection_pool.release(conn)
        assert r.client_getname() == "fallback"
        assert r.execute_command("CONFIG", "GET", "port") == [b"port", str(s.port).encode()]
        r.close()
    finally:
        s.stop()


def test_readonly_replica() -> None:
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    try:
        r = ruvio.Ruvio("127.0.0.1", replica.port)
        assert r.ping()
        with pytest.raises(ruvio.ReadOnlyError) as e:
            r.set("k", "v")
        assert e.value.code == "READONLY"
        assert r.connection_pool._created == 0  # the connection was dropped, not returned
        r.close()
    finally:
        replica.stop()
        primary.stop()


@pytest.fixture(scope="module")
def tls_files() -> str:
    """A test CA and a certificate it signed for 127.0.0.1 (scripts/gen-test-certs.sh, the openssl CLI). A CA and a
    separate leaf, not one self-signed certificate: rustls (ruvio) refuses a CA certificate used as a server's."""
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is needed for the TLS test")
    d = _tempdir("ruvio-py-tls-")
    script = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "gen-test-certs.sh")
    subprocess.run(["bash", script, d], check=True, capture_output=True)
    return d


@pytest.mark.parametrize("kind", ["redis", "ruvio"])
def test_tls(tls_files: str, kind: str) -> None:
    """TLS against a tls-port: redis-server's and ruvio's."""
    port = free_port()
    ca = os.path.join(tls_files, "ca.crt")
    cert, keyf = os.path.join(tls_files, "server.crt"), os.path.join(tls_files, "server.key")
    start = start_redis if kind == "redis" else start_ruvio
    s = start("--tls-port", str(port), "--tls-cert-file", cert, "--tls-key-file", keyf,
              "--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
    try:
        r = ruvio.Ruvio("127.0.0.1", port, ssl=True, ssl_ca_certs=ca)
        assert r.set("k", "over tls") is True and r.get("k") == b"over tls"
        u = ruvio.from_url(f"rediss://127.0.0.1:{port}/0", ssl_ca_certs=ca, protocol=2)
        assert u.get("k") == b"over tls"
        # An untrusted certificate is refused.
        bad = ruvio.Ruvio("127.0.0.1", port, ssl=True)
        with pytest.raises(ruvio.ConnectionError):
            bad.ping()
        # Plain TCP to the TLS port fails within the timeout instead of hanging.
        plain = ruvio.Ruvio("127.0.0.1", port, connect_timeout=2)
        with pytest.raises((ruvio.ConnectionError, ruvio.TimeoutError)):
            plain.ping()
        r.close()
        u.close()
    finally:
        s.stop()


@pytest.mark.parametrize("kind", ["redis", "ruvio"])
def test_tls_client_certificate(tls_files: str, kind: str) -> None:
    """tls-auth-clients yes: ssl_certfile/ssl_keyfile signed by the server's CA get in; without them, refused."""
    port = free_port()
    f = lambda name: os.path.join(tls_files, name)
    start = start_redis if kind == "redis" else start_ruvio
    s = start("--tls-port", str(port), "--tls-cert-file", f("server.crt"), "--tls-key-file", f("server.key"),
              "--tls-ca-cert-file", f("ca.crt"), "--tls-auth-clients", "yes")
    try:
        r = ruvio.Ruvio("127.0.0.1", port, ssl=True, ssl_ca_certs=f("ca.crt"), ssl_certfile=f("client.crt"),
                        ssl_keyfile=f("client.key"))
        assert r.ping() is True
        for cert in ("untrusted-client", None):
            kw = {"ssl_certfile": f(f"{cert}.crt"), "ssl_keyfile": f(f"{cert}.key")} if cert else {}
            bad = ruvio.Ruvio("127.0.0.1", port, ssl=True, ssl_ca_certs=f("ca.crt"), **kw)
            with pytest.raises(ruvio.ConnectionError):
                bad.ping()
            bad.close()
        r.close()
    finally:
        s.stop()


def test_pool_cap_and_wait(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port, max_connections=1, pool_timeout=0.3)
    held = r.connection_pool.get_connection()
    t0 = time.monotonic()
    with pytest.raises(ruvio.ConnectionError):
        r.ping()  # the only connection is taken: wait pool_timeout, then fail
    assert 0.25 < time.monotonic() - t0 < 5
    threading.Timer(0.1, lambda: r.connection_pool.release(held)).start()
    r2 = ruvio.Ruvio(connection_pool=r.connection_pool)
    r.connection_pool.pool_timeout = 5.0
    assert r2.ping()  # waits for the connection to come back
    r.close()


def test_pool_after_fork(server: Server, key: str) -> None:
    r = ruvio.Ruvio("127.0.0.1", server.port)
    parent_id = r.client_id()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: must not reuse the parent's socket
        try:
            child_id = r.client_id()
            os.write(wfd, str(child_id).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    child_id = int(os.read(rfd, 100) or b"0")
    os.waitpid(pid, 0)
    assert child_id and child_id != parent_id
    assert r.client_id() == parent_id  # the parent's connection is intact
    r.close()
