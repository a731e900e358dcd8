"""Malformed input: Redis replies once with a protocol error and closes the connection."""

import time

import pytest

from helpers import encode, rss_kib


def _assert_error_then_close(server, data: bytes, error: bytes):
    with server.raw() as c:
        c.send(data)
        c.expect(b"-ERR Protocol error: " + error + b"\r\n")
        leftover = c.expect_closed()
        assert leftover == b"", leftover
    with server.raw() as c:  # the server itself is fine
        c.assert_open()


@pytest.mark.parametrize("data,error", [
    (b"*abc\r\n", b"invalid multibulk length"),
    (b"*1 \r\n", b"invalid multibulk length"),
    (b"*+1\r\n$4\r\nPING\r\n", b"invalid multibulk length"),
    (b"*2147483648\r\n", b"invalid multibulk length"),
    (b"*99999999999999999999999\r\n", b"invalid multibulk length"),
    (b"*1\r\n$abc\r\n", b"invalid bulk length"),
    (b"*1\r\n$-1\r\n", b"invalid bulk length"),
    (b"*1\r\n$+4\r\nPING\r\n", b"invalid bulk length"),
    (b"*1\r\n$ 4\r\nPING\r\n", b"invalid bulk length"),
    (b"*1\r\n$536870913\r\n", b"invalid bulk length"),  # default proto-max-bulk-len 512mb
    (b"*1\r\nfoo\r\n", b"expected '$', got 'f'"),
    (b"*2\r\n$4\r\nECHO\r\n:5\r\n", b"expected '$', got ':'"),
    (b"ECHO \"abc\r\n", b"unbalanced quotes in request"),
    (b"ECHO 'abc\r\n", b"unbalanced quotes in request"),
    (b"ECHO \"abc\"def\r\n", b"unbalanced quotes in request"),
], ids=lambda v: repr(v)[2:30] if isinstance(v, bytes) else None)
def test_protocol_error_replies_and_closes(server, data, error):
    _assert_error_then_close(server, data, error)


def test_commands_before_protocol_error_are_answered(server):
    with server.raw() as c:
        c.send(encode("SET", "a", "1") + encode("INCR", "a") + b"*abc\r\n" + encode("INCR", "a"))
        c.expect(b"+OK\r\n:2\r\n-ERR Protocol error: invalid multibulk length\r\n")
        c.expect_closed()
    with server.raw() as c:
        c.send(encode("GET", "a"))
        c.expect(b"$1\r\n2\r\n")  # the INCR after the bad header never ran


def test_header_without_crlf_over_64kb(server):
    _assert_error_then_close(server, b"*" + b"1" * 70000, b"too big mbulk count string")


def test_bulk_header_without_crlf_over_64kb(server):
    _assert_error_then_close(server, b"*1\r\n$" + b"1" * 70000, b"too big bulk count string")


def test_inline_request_over_64kb(server):
    _assert_error_then_close(server, b"A" * 70000, b"too big inline request")


def test_inline_request_under_64kb_is_fine(server):
    with server.raw() as c:
        c.send(b"ECHO " + b"z" * 60000 + b"\r\n")
        c.expect(b"$60000\r\n" + b"z" * 60000 + b"\r\n")


@pytest.mark.parametrize("data", [b"POST / HTTP/1.1\r\n", b"Host: x\r\n",
                                  b"POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                                  b"host: localhost\r\n"])
def test_http_requests_close_connection_silently(server, data):
    with server.raw() as c:
        c.send(data)
        leftover = c.expect_closed()
        assert leftover == b"", leftover
    with server.raw() as c:
        c.assert_open()


def test_post_after_valid_commands(server):
    with server.raw() as c:
        c.send(encode("PING"))
        c.expect(b"+PONG\r\n")
        c.send(b"POST / HTTP/1.1\r\nHost: a\r\n\r\n")
        assert c.expect_closed() == b""


def test_max_multibulk_count_accepted_without_allocation(server):
    """*2147483647 (INT_MAX) is a legal header; the server must not allocate for it."""
    before = rss_kib(server.pid)
    conns = []
    try:
        for _ in range(20):
            c = server.raw()
            c.send(b"*2147483647\r\n$100000\r\n" + b"x" * 10)
            conns.append(c)
        for _ in range(20):
            c = server.raw()
            c.send(b"*2000000\r\n")
            conns.append(c)
        with server.raw() as other:
            other.assert_open()
            other.send(encode("SET", "k", "v") + encode("GET", "k"))
            other.expect(b"+OK\r\n$1\r\nv\r\n")
        time.sleep(0.2)
        grown_mib = (rss_kib(server.pid) - before) / 1024
        assert grown_mib < 256, f"server RSS grew by {grown_mib:.0f} MiB for 40 idle headers"
        for c in conns[:3]:  # nothing was answered and the connections are still open
            assert c.no_data_for(0.1) == b""
    finally:
        for c in conns:
            c.close()
    with server.raw() as other:
        other.assert_open()


def test_partial_command_then_complete(server):
    with server.raw() as c:
        c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhel")
        assert c.no_data_for(0.2) == b""
        c.send(b"lo\r\n")
        c.expect(b"+OK\r\n")
        c.send(encode("GET", "k"))
        c.expect(b"$5\r\nhello\r\n")


@pytest.mark.server_config("--proto-max-bulk-len", "1mb")
def test_bulk_over_proto_max_bulk_len(server):
    _assert_error_then_close(server, b"*2\r\n$4\r\nECHO\r\n$2000000\r\n", b"invalid bulk length")
    _assert_error_then_close(server, b"*1\r\n$1048577\r\n", b"invalid bulk length")
    with server.raw() as c:  # exactly the limit is accepted
        value = b"v" * (1024 * 1024)
        c.send(encode("SET", "big", value))
        c.expect(b"+OK\r\n")
        c.send(encode("STRLEN", "big"))
        c.expect(b":1048576\r\n")


def test_connection_reset_mid_command_is_harmless(server):
    for _ in range(10):
        c = server.raw()
        c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc")
        c.close()
    with server.raw() as c:
        c.assert_open()
        c.send(encode("EXISTS", "k"))
        c.expect(b":0\r\n")
