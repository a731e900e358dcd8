"""Server commands: INFO, CONFIG, TIME, DBSIZE, WAIT, CLUSTER, COMMAND; slow subscribers."""

import socket
import time

import pytest
import redis

from helpers import ClosedError, Map, encode, wait_until


def test_info_sections(r):
    info = r.info()
    assert "redis_version" in info
    assert info["redis_mode"] == "standalone"
    assert "connected_clients" in info
    server = r.info("server")
    assert "redis_version" in server
    assert "connected_clients" not in server
    all_info = r.info("all")
    assert "redis_version" in all_info
    assert r.info("nosuchsection") == {}


def test_info_raw_text(server):
    with server.raw() as c:
        c.send(encode("INFO"))
        text = c.read_reply()
        assert isinstance(text, bytes)
        assert text.startswith(b"# Server\r\n")
        assert b"\r\nredis_version:" in text
        assert b"# Clients\r\n" in text
        assert b"# Keyspace\r\n" in text
        assert b"\nrole:master\r\n" in text or b"\r\nrole:master" in text
        for line in text.split(b"\r\n"):
            assert line == b"" or line.startswith(b"# ") or b":" in line, line
        c.send(encode("SET", "a", "1") + encode("info", "keyspace"))
        c.expect(b"+OK\r\n")
        ks = c.read_reply()
        assert ks.startswith(b"# Keyspace\r\n")
        assert b"db0:keys=1,expires=0,avg_ttl=" in ks
        c.send(encode("INFO", "SERVER", "clients"))
        both = c.read_reply()
        assert b"# Server\r\n" in both and b"# Clients\r\n" in both and b"# Keyspace" not in both


def test_config_get_set(r):
    assert list(r.config_get("save")) == ["save"]
    assert r.config_get("no-such-param") == {}
    many = r.config_get("maxmemory*")
    assert "maxmemory" in many and len(many) >= 2
    assert all(k.startswith("maxmemory") for k in many)
    assert r.config_get("databases") == {"databases": "16"}
    assert r.config_set("timeout", 300) is True
    assert r.config_get("timeout") == {"timeout": "300"}
    assert r.config_set("timeout", 0) is True
    assert r.config_get("timeout") == {"timeout": "0"}
    with pytest.raises(redis.ResponseError,
                       match="Unknown option or number of arguments for CONFIG SET - 'no-such-param'"):
        r.config_set("no-such-param", "1")


def test_config_get_multiple_and_bytes(server):
    with server.raw() as c:
        c.send(encode("CONFIG", "GET", "timeout", "databases"))
        reply = c.read_reply()
        assert isinstance(reply, list) and len(reply) == 4
        assert dict(zip(reply[0::2], reply[1::2])) == {b"timeout": b"0", b"databases": b"16"}
        c.send(encode("CONFIG", "GET", "appendonly"))  # redis-benchmark reads it
        reply = c.read_reply()
        assert reply[0] == b"appendonly" and reply[1] in (b"yes", b"no")
        c.call("HELLO", "3")
        c.send(encode("CONFIG", "GET", "timeout", "databases"))
        m = c.read_reply()
        assert isinstance(m, Map) and m.as_dict() == {b"timeout": b"0", b"databases": b"16"}


def test_time(r):
    secs, usecs = r.time()
    assert abs(secs - time.time()) < 5
    assert 0 <= usecs < 1_000_000


def test_time_raw(server):
    with server.raw() as c:
        c.send(encode("TIME"))
        reply = c.read_reply()
        assert isinstance(reply, list) and len(reply) == 2
        assert all(isinstance(x, bytes) and x.isdigit() for x in reply)


def test_dbsize_wait(r):
    assert r.dbsize() == 0
    r.set("a", 1)
    assert r.dbsize() == 1
    assert r.execute_command("WAIT", 0, 0) == 0


def test_cluster_disabled(server):
    with server.raw() as c:
        for cmd in (encode("CLUSTER", "INFO"), encode("CLUSTER", "NODES"), encode("CLUSTER", "SLOTS"),
                    encode("READONLY"), encode("READWRITE")):
            c.send(cmd)
            c.expect(b"-ERR This instance has cluster support disabled\r\n")
        c.assert_open()


def test_command_count_info_docs(r):
    n = r.command_count()
    assert isinstance(n, int) and n > 20
    info = r.execute_command("COMMAND", "INFO", "get")
    # redis-py parses COMMAND INFO into {name: {...}}
    assert list(info) == ["get"]
    assert info["get"]["arity"] == 2
    # (COMMAND DOCS is checked over a raw socket: redis-py applies its COMMAND parser to it)


def test_command_subcommands_check_arity_like_redis(server):
    with server.raw() as c:
        c.send(encode("COMMAND", "COUNT", "x"))
        c.expect(b"-ERR wrong number of arguments for 'command|count' command\r\n")
        for bad in (("COMMAND", "GETKEYS"), ("COMMAND", "GETKEYS", "get")):
            c.send(encode(*bad))
            c.expect(b"-ERR wrong number of arguments for 'command|getkeys' command\r\n")
        c.send(encode("COMMAND", "GETKEYS", "set", "a"))  # SET itself needs 3 arguments
        c.expect(b"-ERR Invalid number of arguments specified for command\r\n")
        c.send(encode("COMMAND", "GETKEYS", "nosuch", "a"))
        c.expect(b"-ERR Invalid command specified\r\n")
        c.send(encode("COMMAND", "GETKEYS", "ping", "x"))
        c.expect(b"-ERR The command has no key arguments\r\n")
        c.send(encode("COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"))
        c.expect(b"*2\r\n$1\r\na\r\n$1\r\nb\r\n")
        c.send(encode("COMMAND", "HELP", "x"))
        c.expect(b"-ERR wrong number of arguments for 'command|help' command\r\n")
        c.send(encode("COMMAND", "LIST", "FILTERBY", "nosuch", "x"))
        c.expect(b"-ERR syntax error\r\n")
        c.send(encode("COMMAND", "LIST", "FILTERBY", "PATTERN", "getd*"))
        c.expect(b"*1\r\n$6\r\ngetdel\r\n")
        c.send(encode("COMMAND", "LIST", "FILTERBY", "ACLCAT", "transaction"))
        assert sorted(c.read_reply()) == [b"discard", b"exec", b"multi", b"unwatch", b"watch"]
        c.send(encode("COMMAND", "LIST", "FILTERBY", "MODULE", "x"))
        c.expect(b"*0\r\n")
        c.assert_open()


def test_config_old_names_are_aliases(r):
    assert r.config_get("slave-read-only") == {"slave-read-only": "yes"}
    assert r.config_get("*read-only") == {"replica-read-only": "yes", "slave-read-only": "yes"}
    assert r.config_set("slave-read-only", "yes") is True


def test_command_raw(server):
    with server.raw() as c:
        c.send(encode("COMMAND", "INFO", "get", "nosuchcmd"))
        reply = c.read_reply()
        assert len(reply) == 2 and reply[1] is not None
        get = reply[0]
        assert get[0] == b"get" and get[1] == 2  # name and arity
        assert get[3:6] == [1, 1, 1]  # first key, last key, step
        from helpers import NULL
        assert reply[1] is NULL
        c.send(encode("COMMAND", "INFO", "set"))
        assert c.read_reply()[0][1] == -3
        c.send(encode("COMMAND", "DOCS", "get"))
        docs = c.read_reply()
        assert isinstance(docs, list) and docs[0] == b"get"
        c.send(encode("COMMAND", "DOCS"))  # what interactive redis-cli sends at startup
        alldocs = c.read_reply(timeout=10)
        assert isinstance(alldocs, list) and len(alldocs) % 2 == 0
        assert b"get" in alldocs[0::2] and b"set" in alldocs[0::2]
        c.call("HELLO", "3")
        c.send(encode("COMMAND", "DOCS", "get"))
        docs3 = c.read_reply()  # redis-cli reads this at startup: it must be well formed
        assert isinstance(docs3, Map) and docs3[0][0] == b"get"
        c.send(encode("COMMAND", "COUNT"))
        count = c.read_reply()
        c.send(encode("COMMAND"))
        table = c.read_reply(timeout=10)
        assert isinstance(table, list) and len(table) == count
        names = {e[0] for e in table}
        assert {b"get", b"set", b"ping", b"multi", b"subscribe"} <= names
        c.assert_open()


def test_lowercase_and_handshakes_of_common_clients(server):
    """What ioredis / redis-rs / StackExchange.Redis send first must not break the connection."""
    with server.raw() as c:
        c.send(encode("client", "setname", "x") + encode("info") + encode("select", "0")
               + encode("CLIENT", "SETINFO", "LIB-NAME", "t") + encode("echo", "done"))
        assert c.read_reply() == b"OK"
        assert b"redis_version:" in c.read_reply()
        assert c.read_reply() == b"OK"
        c.read_reply()  # OK on 7.2+/ruvio, an error reply on 7.0; either way not fatal
        assert c.read_reply() == b"done"


# ---------------------------------------------------------------------------------------

@pytest.mark.server_config("--client-output-buffer-limit", "pubsub 1mb 512kb 0")
def test_slow_subscriber_is_disconnected(server):
    slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # before connect: small window
    slow.settimeout(10)
    slow.connect(("127.0.0.1", server.port))
    try:
        slow.sendall(encode("CLIENT", "ID"))
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += slow.recv(100)
        slow_id = int(reply[1:-2])
        slow.sendall(encode("SUBSCRIBE", "slow"))
        pub = server.client(protocol=2)
        try:
            wait_until(lambda: pub.pubsub_numsub("slow")[0][1] == 1, msg="subscription")
            payload = b"x" * 10_000
            for _ in range(6000):  # at most 60 MB, far above the 1 MB limit plus socket buffers
                if pub.publish("slow", payload) == 0:
                    break
            wait_until(lambda: pub.pubsub_numsub("slow")[0][1] == 0, timeout=10,
                       msg="slow subscriber to be dropped")
            wait_until(lambda: not pub.client_list(client_id=[slow_id]), timeout=10,
                       msg="slow subscriber to leave CLIENT LIST")
            assert pub.ping() is True
            assert pub.set("still", "up") is True
        finally:
            pub.close()
        # the subscriber's connection ends (after whatever was already in flight)
        total, deadline = 0, time.monotonic() + 30
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"slow subscriber connection not closed ({total} bytes read)")
            try:
                chunk = slow.recv(1 << 16)
            except ConnectionResetError:
                break
            if not chunk:
                break
            total += len(chunk)
        assert total < 60_000_000
    finally:
        slow.close()
    with server.raw() as c:
        c.assert_open()


@pytest.mark.server_config("--client-output-buffer-limit", "pubsub 0 0 0")
def test_pubsub_limit_zero_means_unlimited(server):
    sub = server.raw()
    try:
        sub.send(encode("SUBSCRIBE", "c"))
        sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n")
        pub = server.client()
        try:
            for _ in range(300):  # ~3 MB unread: no limit, so the subscriber stays
                assert pub.publish("c", b"y" * 10_000) == 1
        finally:
            pub.close()
        sub.expect(b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$10000\r\n", timeout=10)
    finally:
        sub.close()


def test_argument_errors_match_redis(server):
    with server.raw() as c:
        c.send(encode("CONFIG", "SET", "timeout", "0", "hz"))
        c.expect(b"-ERR syntax error\r\n")
        c.send(encode("PUBSUB", "CHANNELS", "a", "b"))
        c.expect(b"-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n")
        c.send(encode("CLIENT", "NO-EVICT", "maybe"))
        c.expect(b"-ERR syntax error\r\n")
        c.send(encode("CLIENT", "NO-EVICT", "off"))
        c.expect(b"+OK\r\n")
        c.send(encode("WAIT", "0", "soon"))
        c.expect(b"-ERR timeout is not an integer or out of range\r\n")
        c.send(encode("SHUTDOWN", "ABORT"))
        c.expect(b"-ERR No shutdown in progress.\r\n")
        c.send(encode("PING"))
        c.expect(b"+PONG\r\n")


def test_expired_keys_counts_lazy_and_active_expiry(server):
    c = server.client(protocol=2)
    try:
        c.config_resetstat()
        assert c.info("stats")["expired_keys"] == 0
        c.set("lazy", "v", px=30)
        c.set("active", "v", px=30)
        time.sleep(0.1)
        assert c.get("lazy") is None  # found expired on access
        # the other one goes by active expiry, without being read
        wait_until(lambda: c.info("stats")["expired_keys"] == 2, timeout=10, msg="both expirations counted")
        assert c.dbsize() == 0
    finally:
        c.close()
