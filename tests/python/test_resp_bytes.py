"""Exact-byte protocol tests over a raw TCP socket, RESP2 and (after HELLO 3) RESP3."""

import time

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


# -- LRANGE's reply, written straight from the list's packed chunks (issue 33) ----------------------------------

def _lrange_model(model, start, stop):
    """Redis's LRANGE on a Python list: negative indexes count from the tail, out-of-range ends are clamped."""
    n = len(model)
    if start < 0:
        start = max(n + start, 0)
    if stop < 0:
        stop = n + stop
    stop = min(stop, n - 1)
    return [] if start > stop or start >= n else model[start:stop + 1]


def _bulks(items):
    return b"*%d\r\n" % len(items) + b"".join(b"$%d\r\n%s\r\n" % (len(e), e) for e in items)


def _expect_exact(conn, want, what):
    """Reads the reply to a command sent with a PING behind it, comparing as the bytes arrive: a wrong or short
    reply fails at once (the PONG fills in behind a short one), and says where without printing hundreds of KB."""
    want += b"+PONG\r\n"
    deadline = time.monotonic() + 10
    while True:
        got = conn.buf[:len(want)]
        if got != want[:len(got)] or len(got) == len(want):
            break
        conn._fill(deadline)
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(got))
        raise AssertionError(f"{what}: first difference at byte {at} of {len(want)}: "
                             f"got {got[max(at - 40, 0):at + 40]!r}, want {want[max(at - 40, 0):at + 40]!r}")
    conn.buf = conn.buf[len(want):]


def test_lrange_bytes_across_chunks_resp2_resp3_multi_and_eval(server):
    """LRANGE over a list of many packed chunks (empty, short, 127/128-byte, 4 KB and >4 KB elements, bytes that
    look like RESP) against a Python model, byte for byte: RESP2 and RESP3, inside MULTI/EXEC, and through EVAL
    (redis.call's Lua table returned as the script's reply, and read inside the script), for ranges with negative,
    reversed and out-of-range indexes. The reply is encoded straight from the chunks, so a wrong length, a skipped
    element or a chunk boundary read wrong shows here."""
    import random
    rnd = random.Random(3301)
    sizes = [0, 0, 1, 3, 9, 10, 99, 100, 127, 128, 129, 1000, 4095, 4096, 4097, 5000, 9000]

    def elem(i):
        size = rnd.choice(sizes) if rnd.random() < 0.25 else rnd.choice(sizes[:8])
        body = (b"%d:" % i + b"\r\n$*x" * (size // 5 + 1))[:size]
        return body

    model = []
    c2, c3 = server.raw(), server.raw()
    c3.send(encode("HELLO", "3"))
    assert isinstance(c3.read_reply(), Map)
    for batch in range(8):
        items = [elem(batch * 1000 + i) for i in range(300)]
        if batch % 3 == 1:
            c2.send(encode("LPUSH", "l", *items))
            model[:0] = list(reversed(items))
        else:
            c2.send(encode("RPUSH", "l", *items))
            model.extend(items)
        c2.expect(b":%d\r\n" % len(model))
    n = len(model)
    assert sum(len(e) for e in model) > 4 * 8192  # several chunks, whatever the elements drew
    ranges = [(0, -1), (0, 0), (-1, -1), (0, 99), (-100, -1), (5, 3), (n - 1, n + 5), (n, n + 10), (-n - 10, 2),
              (-n - 10, -n - 5), (-3, 2), (10, -n), (0, 9223372036854775807), (-9223372036854775808, -n + 1)]
    ranges += [(a, a + rnd.randrange(0, 400)) for a in (rnd.randrange(-n, n) for _ in range(25))]
    for start, stop in ranges:
        want = _bulks(_lrange_model(model, start, stop))
        for conn, proto in ((c2, "RESP2"), (c3, "RESP3")):
            conn.send(encode("LRANGE", "l", start, stop) + encode("PING"))
            _expect_exact(conn, want, f"{proto} LRANGE l {start} {stop}")
    for conn in (c2, c3):
        conn.send(encode("LRANGE", "missing", 0, -1))
        conn.expect(b"*0\r\n")

    # Inside MULTI: EXEC's array holds each LRANGE's reply as it is.
    picked = ranges[:4] + ranges[-4:]
    for conn, proto in ((c2, "RESP2"), (c3, "RESP3")):
        conn.send(encode("MULTI"))
        conn.expect(b"+OK\r\n")
        for start, stop in picked:
            conn.send(encode("LRANGE", "l", start, stop))
            conn.expect(b"+QUEUED\r\n")
        conn.send(encode("LLEN", "l") + encode("EXEC") + encode("PING"))
        conn.expect(b"+QUEUED\r\n")
        want = b"*%d\r\n" % (len(picked) + 1) + b"".join(_bulks(_lrange_model(model, a, b)) for a, b in picked)
        _expect_exact(conn, want + b":%d\r\n" % n, f"{proto} EXEC of LRANGEs")

    # Through EVAL: redis.call turns the reply into a Lua table (under either script protocol), returned as is,
    # and read element by element inside the script.
    ret = "return redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[2])"
    ret3 = "redis.setresp(3) " + ret
    inside = ("local t = redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[2]) local lens = {#t} "
              "for i = 1, #t do lens[#lens + 1] = #t[i] end return lens")
    for start, stop in ranges[:6] + ranges[-6:]:
        got = _lrange_model(model, start, stop)
        for conn, proto in ((c2, "RESP2"), (c3, "RESP3")):
            for script in (ret, ret3):
                conn.send(encode("EVAL", script, 1, "l", start, stop) + encode("PING"))
                _expect_exact(conn, _bulks(got), f"{proto} EVAL {script!r} {start} {stop}")
            conn.send(encode("EVAL", inside, 1, "l", start, stop) + encode("PING"))
            lens = [len(got)] + [len(e) for e in got]
            _expect_exact(conn, b"*%d\r\n" % len(lens) + b"".join(b":%d\r\n" % x for x in lens), f"{proto} EVAL lens")
    for conn in (c2, c3):
        conn.close()
