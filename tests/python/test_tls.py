"""TLS with redis-py (ssl=True): the server's tls-port, client certificates (tls-auth-clients), a plain client on the
TLS port. Runs against redis-server too (RUVIO_TEST_TARGET=redis), except the LEASE step. Certificates are made by
scripts/gen-test-certs.sh (the openssl CLI) in a temporary folder."""

from __future__ import annotations

import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

from conftest import IS_REDIS, REPO_ROOT, _free_port


@pytest.fixture(scope="module")
def certs():
    d = Path(tempfile.mkdtemp(prefix="ruvio-tls-certs-"))
    subprocess.run(["bash", str(REPO_ROOT / "scripts" / "gen-test-certs.sh"), str(d)], check=True, capture_output=True)
    return d


def tls_args(certs: Path, port: int, *extra: str) -> list[str]:
    return ["--tls-port", str(port), "--tls-cert-file", str(certs / "server.crt"), "--tls-key-file", str(certs / "server.key"),
            "--tls-ca-cert-file", str(certs / "ca.crt"), *extra]


def client(certs: Path, port: int, cert: str | None = "client") -> redis.Redis:
    kw = {}
    if cert:
        kw = {"ssl_certfile": str(certs / f"{cert}.crt"), "ssl_keyfile": str(certs / f"{cert}.key")}
    return redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(certs / "ca.crt"), socket_timeout=5, **kw)


def test_redis_py_over_tls_with_client_certificates(server_factory, certs):
    port = _free_port()
    server_factory(*tls_args(certs, port))
    r = client(certs, port)
    assert r.ping() is True
    assert r.set("k", "over tls") is True and r.get("k") == b"over tls"
    if not IS_REDIS:
        token = r.execute_command("LEASE", "lock:tls", 10000)
        assert isinstance(token, int) and token > 0
        assert r.execute_command("RELEASE", "lock:tls", token) == 1
    # tls-auth-clients yes (the default): a certificate of an unknown CA, or none, is refused.
    for cert in ("untrusted-client", None):
        with pytest.raises((redis.ConnectionError, ssl.SSLError)):
            client(certs, port, cert).ping()
    r.close()


def test_tls_auth_clients_optional_and_no(server_factory, certs):
    port = _free_port()
    srv = server_factory(*tls_args(certs, port, "--tls-auth-clients", "optional"))
    assert client(certs, port, None).ping() is True
    with pytest.raises((redis.ConnectionError, ssl.SSLError)):
        client(certs, port, "untrusted-client").ping()
    admin = srv.client()
    assert admin.config_get("tls-auth-clients") == {"tls-auth-clients": "optional"}
    assert admin.config_set("tls-auth-clients", "no") is True
    # With no certificate asked for, even an untrusted one is never looked at.
    assert client(certs, port, "untrusted-client").ping() is True


def test_a_plain_client_on_the_tls_port_gets_a_close_not_a_hang(server_factory, certs):
    port = _free_port()
    server_factory(*tls_args(certs, port))
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        data = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except ConnectionResetError:
            pass
    assert b"PONG" not in data
    assert time.monotonic() - started < 3
