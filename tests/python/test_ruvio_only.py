"""Behaviour specific to ruvio (skipped only when RUVIO_TEST_TARGET=redis)."""

import re

import pytest

from helpers import Map, encode

pytestmark = pytest.mark.ruvio_only


def test_info_identifies_ruvio(server):
    with server.raw() as c:
        c.send(encode("INFO", "server"))
        text = c.read_reply()
        assert b"\r\nserver_name:ruvio\r\n" in text
        assert re.search(rb"\r\nruvio_version:\S+\r\n", text)
        assert re.search(rb"\r\nredis_version:7\.\d+\.\d+\r\n", text)
        assert b"\r\nredis_mode:standalone\r\n" in text
        assert re.search(rb"\r\nrun_id:[0-9a-f]{40}\r\n", text)
        c.send(encode("INFO"))
        full = c.read_reply()
        assert b"\r\nrole:master\r\n" in full
        assert b"\r\nloading:0\r\n" in full
        assert b"# Keyspace\r\n" in full


def test_hello_server_is_ruvio(server):
    with server.raw() as c:
        c.send(encode("HELLO", "3"))
        reply = c.read_reply()
        assert isinstance(reply, Map)
        assert reply.as_dict()[b"server"] == b"ruvio"


def test_client_setinfo(server):
    with server.raw() as c:
        c.send(encode("CLIENT", "SETINFO", "LIB-NAME", "mylib")
               + encode("CLIENT", "SETINFO", "LIB-VER", "1.2.3"))
        c.expect(b"+OK\r\n+OK\r\n")
        c.send(encode("CLIENT", "INFO"))
        info = c.read_reply()
        assert b" lib-name=mylib " in info and b" lib-ver=1.2.3" in info


def test_redis_py_handshake_sets_lib_name(server):
    cl = server.client(protocol=3)
    try:
        info = cl.client_info()
        assert info.get("lib-name") == "redis-py"
    finally:
        cl.close()


def test_command_getkeys_knows_the_lock_commands(server):
    with server.raw() as c:
        c.send(encode("COMMAND", "GETKEYS", "LEASE", "lk", "100"))
        c.expect(b"*1\r\n$2\r\nlk\r\n")
        c.send(encode("COMMAND", "LIST", "FILTERBY", "ACLCAT", "lock"))
        assert {b"lease", b"renew", b"release", b"semaphore", b"ifgt"} <= set(c.read_reply())
