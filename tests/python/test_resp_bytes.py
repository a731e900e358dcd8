"""Exact-byte protocol tests over a raw TCP socket, RESP2 and (after HELLO 3) RESP3."""

import pytest

from helpers import NULL, Map, Verbatim, encode

HELLO_KEYS = {b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"}


@pytest.fixture
def c(server):
    conn = server.raw()
    yield conn
    conn.close()


@pytest.fixture
def c3(server):
    conn = server.raw()
    conn.cmd("HELLO", "3")
    reply = conn.read_reply()
    assert isinstance(reply, Map)
    yield conn
    conn.close()


# -- basics, RESP2 -------------------------------------------------------------------------

def test_ping_echo(c):
    c.send(encode("PING"))
    c.expect(b"+PONG\r\n")
    c.send(encode("PING", "hello"))
    c.expect(b"$5\r\nhello\r\n")
    c.send(encode("ECHO", "hi there"))
    c.expect(b"$8\r\nhi there\r\n")
    c.send(encode("ECHO", ""))
    c.expect(b"$0\r\n\r\n")


def test_get_missing_and_set_get(c):
    c.send(encode("GET", "missing"))
    c.expect(b"$-1\r\n")
    c.send(encode("SET", "k", "value"))
    c.expect(b"+OK\r\n")
    c.send(encode("GET", "k"))
    c.expect(b"$5\r\nvalue\r\n")
    c.send(encode("MGET", "k", "missing"))
    c.expect(b"*2\r\n$5\r\nvalue\r\n$-1\r\n")


def test_incr_and_integer_edges(c):
    c.send(encode("INCR", "n"))
    c.expect(b":1\r\n")
    c.send(encode("INCRBY", "n", "-5"))
    c.expect(b":-4\r\n")
    c.send(encode("SET", "big", "9223372036854775807"))
    c.expect(b"+OK\r\n")
    c.send(encode("INCR", "big"))
    c.expect(b"-ERR increment or decrement would overflow\r\n")
    c.send(encode("GET", "big"))
    c.expect(b"$19\r\n9223372036854775807\r\n")
    c.send(encode("SET", "small", "-9223372036854775808"))
    c.expect(b"+OK\r\n")
    c.send(encode("DECR", "small"))
    c.expect(b"-ERR increment or decrement would overflow\r\n")
    c.send(encode("INCRBY", "small", "-1"))
    c.expect(b"-ERR increment or decrement would overflow\r\n")
    c.send(encode("DECRBY", "small", "1"))
    c.expect(b"-ERR increment or decrement would overflow\r\n")
    c.send(encode("INCRBY", "small", "9223372036854775807"))
    c.expect(b":-1\r\n")
    c.send(encode("DECRBY", "x", "-9223372036854775808"))
    c.expect(b"-ERR decrement would overflow\r\n")
    c.send(encode("INCRBY", "x", "9223372036854775808"))
    c.expect(b"-ERR value is not an integer or out of range\r\n")


@pytest.mark.parametrize("stored", [b"abc", b"01", b"+1", b"-0", b" 1", b"1 ", b"1.0", b"",
                                    b"99999999999999999999", b"0x10"])
def test_incr_rejects_non_canonical_integers(c, stored):
    c.send(encode("SET", "v", stored))
    c.expect(b"+OK\r\n")
    c.send(encode("INCR", "v"))
    c.expect(b"-ERR value is not an integer or out of range\r\n")


@pytest.mark.parametrize("arg", [b"01", b"+1", b"1.5", b"", b" 1"])
def test_incrby_rejects_non_canonical_increment(c, arg):
    c.send(encode("INCRBY", "v", arg))
    c.expect(b"-ERR value is not an integer or out of range\r\n")


def test_incr_accepts_canonical_edge_values(c):
    for stored, after in [(b"0", b"1"), (b"-1", b"0"), (b"-9223372036854775808", b"-9223372036854775807"),
                          (b"9223372036854775806", b"9223372036854775807")]:
        c.send(encode("SET", "v", stored) + encode("INCR", "v"))
        c.expect(b"+OK\r\n:" + after + b"\r\n")


def test_unknown_command_texts(c):
    c.send(encode("foo", "bar"))
    c.expect(b"-ERR unknown command 'foo', with args beginning with: 'bar' \r\n")
    c.send(encode("foo"))
    c.expect(b"-ERR unknown command 'foo', with args beginning with: \r\n")
    c.send(encode("foo", "a", "b c"))
    c.expect(b"-ERR unknown command 'foo', with args beginning with: 'a' 'b c' \r\n")
    c.assert_open()


def test_unknown_command_name_is_truncated(c):
    name = b"x" * 300
    c.send(encode(name, b"y" * 300))
    c.expect(b"-ERR unknown command '" + b"x" * 128 + b"', with args beginning with: '"
             + b"y" * 128 + b"' \r\n")


def test_wrong_number_of_arguments(c):
    c.send(encode("GET"))
    c.expect(b"-ERR wrong number of arguments for 'get' command\r\n")
    c.send(encode("get", "a", "b"))
    c.expect(b"-ERR wrong number of arguments for 'get' command\r\n")
    c.send(encode("SET", "a"))
    c.expect(b"-ERR wrong number of arguments for 'set' command\r\n")
    c.send(encode("MSET", "a", "1", "b"))
    c.expect(b"-ERR wrong number of arguments for 'mset' command\r\n")
    c.send(encode("CONFIG", "GET"))
    c.expect(b"-ERR wrong number of arguments for 'config|get' command\r\n")
    c.send(encode("CLIENT", "ID", "x"))
    c.expect(b"-ERR wrong number of arguments for 'client|id' command\r\n")
    c.assert_open()


def test_case_insensitive_command_names(c):
    for name in ("ping", "PiNg", "PING"):
        c.send(encode(name))
        c.expect(b"+PONG\r\n")
    c.send(encode("sEt", "K", "v") + encode("gEt", "K") + encode("get", "k"))
    c.expect(b"+OK\r\n$1\r\nv\r\n$-1\r\n")  # keys stay case-sensitive
    c.send(encode("config", "get", "databases"))
    c.expect(b"*2\r\n$9\r\ndatabases\r\n$2\r\n16\r\n")


def test_config_get_save_resp2_array(c):
    # (the value of `save` depends on the server's persistence defaults: only its shape is checked)
    c.send(encode("CONFIG", "GET", "save"))
    c.expect(b"*2\r\n$4\r\nsave\r\n$")
    c.buf = b"$" + c.buf
    assert isinstance(c.read_reply(), bytes)
    c.send(encode("CONFIG", "GET", "databases"))
    c.expect(b"*2\r\n$9\r\ndatabases\r\n$2\r\n16\r\n")
    c.send(encode("CONFIG", "GET", "no-such-parameter"))
    c.expect(b"*0\r\n")


def test_inline_commands(c):
    c.send(b"PING\r\n")
    c.expect(b"+PONG\r\n")
    c.send(b"SET a b\r\n")
    c.expect(b"+OK\r\n")
    c.send(b"GET a\r\n")
    c.expect(b"$1\r\nb\r\n")
    c.send(b"ping\n")  # bare LF is accepted for inline commands
    c.expect(b"+PONG\r\n")
    c.send(b"SET q \"a b\\r\\n\\x41\"\r\nGET q\r\n")  # quoting and escapes
    c.expect(b"+OK\r\n$6\r\na b\r\nA\r\n")
    c.send(b"ECHO 'single quoted'\r\n")
    c.expect(b"$13\r\nsingle quoted\r\n")
    c.send(b"  SET   sp   v  \r\nGET sp\r\n")  # extra blanks between arguments
    c.expect(b"+OK\r\n$1\r\nv\r\n")
    c.send(b"\r\n\r\nPING\r\n")  # empty lines are ignored
    c.expect(b"+PONG\r\n")


def test_inline_unbalanced_quotes_is_protocol_error(c):
    c.send(b"ECHO \"unbalanced\r\n")
    c.expect(b"-ERR Protocol error: unbalanced quotes in request\r\n")
    assert c.expect_closed() == b""


def test_pipelining_one_send(c):
    payload = b"".join([
        encode("SET", "p1", "1"),
        encode("INCR", "p1"),
        b"PING\r\n",
        encode("GET", "p1"),
        encode("DEL", "p1"),
        encode("GET", "p1"),
        encode("ECHO", "end"),
    ])
    c.send(payload)
    c.expect(b"+OK\r\n:2\r\n+PONG\r\n$1\r\n2\r\n:1\r\n$-1\r\n$3\r\nend\r\n")


def test_pipelining_many_commands(c):
    n = 2000
    c.send(b"".join(encode("INCR", "ctr") for _ in range(n)))
    expected = b"".join(b":%d\r\n" % i for i in range(1, n + 1))
    c.expect(expected, timeout=20)


def test_pipelining_split_across_sends(c):
    data = encode("SET", "split", "x" * 1000) + encode("GET", "split")
    for i in range(0, len(data), 7):
        c.send(data[i:i + 7])
    c.expect(b"+OK\r\n$1000\r\n" + b"x" * 1000 + b"\r\n")


def test_binary_safe_keys_and_values(c):
    key = b"k\r\n\x00\xff key"
    value = b"\x00\r\n$3\r\n*1\r\n\xfe\x00end"
    c.send(encode("SET", key, value))
    c.expect(b"+OK\r\n")
    c.send(encode("GET", key))
    c.expect(b"$%d\r\n" % len(value) + value + b"\r\n")
    c.send(encode("STRLEN", key))
    c.expect(b":%d\r\n" % len(value))
    c.send(encode("EXISTS", b"k\r\n\x00\xff key", b"k"))
    c.expect(b":1\r\n")
    c.send(encode("ECHO", b"\x00\x01\r\n"))
    c.expect(b"$4\r\n\x00\x01\r\n\r\n")


def test_empty_and_negative_multibulk_are_ignored(c):
    c.send(b"*0\r\n")
    c.send(b"*-1\r\n")
    c.send(encode("PING"))
    c.expect(b"+PONG\r\n")


def test_hello_default_resp2_flat_array(c):
    c.send(encode("HELLO"))
    reply = c.read_reply()
    assert isinstance(reply, list) and not isinstance(reply, Map)
    assert len(reply) % 2 == 0
    fields = dict(zip(reply[0::2], reply[1::2]))
    # clients look fields up by name: the 7 Redis fields must be there (extra ones are harmless)
    assert HELLO_KEYS <= set(fields), fields
    assert fields[b"proto"] == 2
    assert isinstance(fields[b"id"], int) and fields[b"id"] > 0
    assert fields[b"mode"] == b"standalone"
    assert fields[b"role"] == b"master"
    assert fields[b"modules"] == []
    c.send(encode("HELLO", "2"))
    reply2 = c.read_reply()
    assert dict(zip(reply2[0::2], reply2[1::2]))[b"proto"] == 2


def test_hello_3_reply_is_map(c):
    c.send(encode("HELLO", "3"))
    head = c.read_exact(1)
    assert head == b"%"
    c.buf = head + c.buf
    reply = c.read_reply()
    assert isinstance(reply, Map)
    keys = [k for k, _ in reply]
    assert HELLO_KEYS <= set(keys), keys  # extra fields are harmless, missing ones are not
    assert len(keys) == len(set(keys))
    d = reply.as_dict()
    assert d[b"proto"] == 3 and type(d[b"proto"]) is int
    assert type(d[b"id"]) is int and d[b"id"] > 0
    assert isinstance(d[b"server"], bytes) and isinstance(d[b"version"], bytes)
    assert d[b"mode"] == b"standalone"
    assert d[b"role"] == b"master"
    assert d[b"modules"] == []
    # the id matches CLIENT ID
    c.send(encode("CLIENT", "ID"))
    assert c.read_reply() == d[b"id"]


def test_hello_unsupported_versions(c):
    for v in ("4", "1", "0"):
        c.send(encode("HELLO", v))
        c.expect(b"-NOPROTO unsupported protocol version\r\n")
    c.send(encode("HELLO", "x"))
    c.expect(b"-ERR Protocol version is not an integer or out of range\r\n")
    c.assert_open()


def test_hello_setname(c):
    c.send(encode("HELLO", "2", "SETNAME", "myname"))
    reply = c.read_reply()
    assert isinstance(reply, list)
    c.send(encode("CLIENT", "GETNAME"))
    c.expect(b"$6\r\nmyname\r\n")


# -- RESP3 ---------------------------------------------------------------------------------

def test_resp3_null_and_basics(c3):
    c3.send(encode("GET", "missing"))
    c3.expect(b"_\r\n")
    c3.send(encode("PING"))
    c3.expect(b"+PONG\r\n")
    c3.send(encode("SET", "a", "b") + encode("GET", "a") + encode("INCR", "n"))
    c3.expect(b"+OK\r\n$1\r\nb\r\n:1\r\n")
    c3.send(encode("MGET", "a", "missing"))
    c3.expect(b"*2\r\n$1\r\nb\r\n_\r\n")
    c3.send(encode("SET", "x", "y", "GET"))
    c3.expect(b"_\r\n")
    c3.send(encode("foo", "bar"))
    c3.expect(b"-ERR unknown command 'foo', with args beginning with: 'bar' \r\n")


def test_resp3_config_get_is_map(c3):
    c3.send(encode("CONFIG", "GET", "save"))
    c3.expect(b"%1\r\n$4\r\nsave\r\n$")
    c3.buf = b"$" + c3.buf
    assert isinstance(c3.read_reply(), bytes)
    c3.send(encode("CONFIG", "GET", "databases"))
    c3.expect(b"%1\r\n$9\r\ndatabases\r\n$2\r\n16\r\n")
    c3.send(encode("CONFIG", "GET", "no-such-parameter"))
    c3.expect(b"%0\r\n")


def test_resp3_info_is_verbatim(c3):
    c3.send(encode("INFO", "server"))
    reply = c3.read_reply()
    assert isinstance(reply, Verbatim)
    assert reply.fmt == b"txt"
    assert b"# Server" in reply


def test_resp3_incrbyfloat_is_bulk(c3):
    c3.send(encode("INCRBYFLOAT", "f", "1.5"))
    c3.expect(b"$3\r\n1.5\r\n")


def test_resp3_overflow_error(c3):
    c3.send(encode("SET", "big", "9223372036854775807") + encode("INCR", "big"))
    c3.expect(b"+OK\r\n-ERR increment or decrement would overflow\r\n")


def test_reset_returns_to_resp2(c3):
    c3.send(encode("RESET"))
    c3.expect(b"+RESET\r\n")
    c3.send(encode("GET", "missing"))
    c3.expect(b"$-1\r\n")


def test_hello_3_then_2(c3):
    c3.send(encode("HELLO", "2"))
    reply = c3.read_reply()
    assert isinstance(reply, list) and not isinstance(reply, Map)
    c3.send(encode("GET", "missing"))
    c3.expect(b"$-1\r\n")


def test_resp3_inline(c3):
    c3.send(b"GET missing\r\nCONFIG GET databases\r\n")
    c3.expect(b"_\r\n%1\r\n$9\r\ndatabases\r\n$2\r\n16\r\n")


def test_resp3_binary_and_exists(c3):
    c3.send(encode("SET", b"\x00\r\n", b"\r\n\x00") + encode("GET", b"\x00\r\n"))
    c3.expect(b"+OK\r\n$3\r\n\r\n\x00\r\n")
    c3.send(encode("EXISTS", b"\x00\r\n"))
    c3.expect(b":1\r\n")


def test_exec_nil_reply_resp2_and_resp3(server):
    for proto, nil in ((2, b"*-1\r\n"), (3, b"_\r\n")):
        with server.raw() as a, server.raw() as b:
            if proto == 3:
                a.call("HELLO", "3")
            a.send(encode("WATCH", "w"))
            a.expect(b"+OK\r\n")
            b.send(encode("SET", "w", "1"))
            b.expect(b"+OK\r\n")
            a.send(encode("MULTI") + encode("SET", "w", "2") + encode("EXEC"))
            a.expect(b"+OK\r\n+QUEUED\r\n" + nil)
            a.send(encode("GET", "w"))
            a.expect(b"$1\r\n1\r\n")


def test_get_reply_types_resp3_for_nulls(c3):
    c3.send(encode("CLIENT", "GETNAME"))
    c3.expect(b"_\r\n")
    c3.send(encode("GETDEL", "missing"))
    c3.expect(b"_\r\n")
    c3.send(encode("RANDOMKEY"))
    assert c3.read_reply() is NULL


def test_large_pipelined_replies_with_backpressure(c):
    """Many big replies requested at once: the server must keep writing as the client reads."""
    value = b"v" * 10_000
    c.send(encode("SET", "big", value))
    c.expect(b"+OK\r\n")
    n = 3000  # ~30 MB of replies, far beyond the socket buffers
    c.send(encode("GET", "big") * n + encode("PING"))
    one = b"$10000\r\n" + value + b"\r\n"
    for _ in range(n):
        c.expect(one, timeout=30)
    c.expect(b"+PONG\r\n")


def test_large_request_value(c):
    value = bytes(range(256)) * (8 * 4096)  # 8 MiB
    c.send(encode("SET", "huge", value))
    c.expect(b"+OK\r\n", timeout=30)
    c.send(encode("STRLEN", "huge") + encode("GETRANGE", "huge", "1048576", "1048579"))
    c.expect(b":8388608\r\n$4\r\n\x00\x01\x02\x03\r\n")
