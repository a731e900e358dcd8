"""Connection commands: PING, ECHO, SELECT, CLIENT *, RESET, QUIT."""

import pytest
import redis

from helpers import ClosedError, Map, encode, wait_until


def test_ping_echo(r):
    assert r.ping() is True
    assert r.echo("hello") == b"hello"
    assert r.echo(b"\x00\r\n") == b"\x00\r\n"


def test_select(server):
    with server.raw() as c:
        c.send(encode("SET", "k", "db0") + encode("SELECT", "15") + encode("GET", "k")
               + encode("SET", "k", "db15") + encode("SELECT", "0") + encode("GET", "k"))
        c.expect(b"+OK\r\n+OK\r\n$-1\r\n+OK\r\n+OK\r\n$3\r\ndb0\r\n")
        c.send(encode("SELECT", "16"))
        c.expect(b"-ERR DB index is out of range\r\n")
        c.send(encode("SELECT", "-1"))
        c.expect(b"-ERR DB index is out of range\r\n")
        c.send(encode("SELECT", "x"))
        c.expect(b"-ERR value is not an integer or out of range\r\n")
        c.send(encode("CONFIG", "GET", "databases"))
        c.expect(b"*2\r\n$9\r\ndatabases\r\n$2\r\n16\r\n")


def test_redis_py_db_option(server):
    for proto in (2, 3):
        c = server.client(db=3, protocol=proto)
        try:
            c.set("k", f"p{proto}")
            assert c.client_info()["db"] in (3, "3")
        finally:
            c.close()
    c0 = server.client()
    try:
        assert c0.get("k") is None
    finally:
        c0.close()


def test_client_id_setname_getname(r):
    cid = r.client_id()
    assert isinstance(cid, int) and cid > 0
    assert r.client_getname() is None
    assert r.client_setname("my-conn") is True
    assert r.client_getname() in (b"my-conn", "my-conn")
    with pytest.raises(redis.ResponseError,
                       match="Client names cannot contain spaces, newlines or special characters"):
        r.client_setname("bad name")
    assert r.client_getname() in (b"my-conn", "my-conn")


def test_client_setname_empty_clears(server):
    with server.raw() as c:
        c.send(encode("CLIENT", "SETNAME", "x") + encode("CLIENT", "SETNAME", "")
               + encode("CLIENT", "GETNAME"))
        c.expect(b"+OK\r\n+OK\r\n$-1\r\n")


def test_client_info_and_list(r):
    r.client_setname("lister")
    info = r.client_info()
    assert int(info["id"]) == r.client_id()
    assert info["name"] == "lister"
    assert "addr" in info and info["addr"].startswith("127.0.0.1:")
    clients = r.client_list()
    assert any(c["name"] == "lister" and int(c["id"]) == int(info["id"]) for c in clients)
    mine = r.client_list(client_id=[r.client_id()])
    assert len(mine) == 1 and mine[0]["name"] == "lister"
    assert all("addr" in c and "id" in c for c in r.client_list(_type="normal"))


def test_client_info_raw_format(server):
    with server.raw() as c:
        c.send(encode("CLIENT", "SETNAME", "rawname") + encode("CLIENT", "INFO"))
        c.expect(b"+OK\r\n")
        line = c.read_reply()
        assert isinstance(line, bytes) and line.endswith(b"\n")
        fields = dict(kv.split(b"=", 1) for kv in line.strip().split(b" "))
        assert fields[b"name"] == b"rawname"
        assert fields[b"db"] == b"0"
        assert int(fields[b"id"]) > 0
        assert fields[b"addr"].startswith(b"127.0.0.1:")
        c.send(encode("CLIENT", "LIST", "TYPE", "foo"))
        c.expect(b"-ERR Unknown client type 'foo'\r\n")


def test_client_kill(server, r):
    victim = server.raw()
    try:
        victim.send(encode("CLIENT", "ID"))
        vid = victim.read_reply()
        assert r.client_kill_filter(_id=str(vid)) == 1
        assert victim.expect_closed() == b""
        assert r.client_kill_filter(_id="999999999") == 0
    finally:
        victim.close()
    victim = server.raw()
    try:
        victim.send(encode("CLIENT", "INFO"))
        info = victim.read_reply()
        addr = dict(kv.split(b"=", 1) for kv in info.strip().split(b" "))[b"addr"].decode()
        assert r.client_kill(addr) is True
        assert victim.expect_closed() == b""
    finally:
        victim.close()
    with pytest.raises(redis.ResponseError, match="No such client"):
        r.client_kill("127.0.0.1:1")


def test_client_help_and_unknown_subcommand(server):
    with server.raw() as c:
        c.send(encode("CLIENT", "HELP"))
        reply = c.read_reply()
        assert isinstance(reply, list) and len(reply) > 4
        assert reply[0].startswith(b"CLIENT <subcommand>")
        c.send(encode("CLIENT", "FOO"))
        c.expect(b"-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n")
        c.send(encode("CLIENT", "foo", "bar"))
        c.expect(b"-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n")
        c.assert_open()
        c.send(encode("CONFIG", "FOO"))
        c.expect(b"-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n")
        c.send(encode("CLIENT"))
        c.expect(b"-ERR wrong number of arguments for 'client' command\r\n")
        c.assert_open()


def test_client_unknown_subcommand_redis_py(r):
    with pytest.raises(redis.ResponseError, match=r"unknown subcommand 'FOO'. Try CLIENT HELP."):
        r.execute_command("CLIENT", "FOO")
    assert r.ping() is True


def test_reset(server):
    with server.raw() as c:
        c.send(encode("SET", "k", "v") + encode("SELECT", "1") + encode("CLIENT", "SETNAME", "x")
               + encode("MULTI") + encode("SET", "k", "in-multi"))
        c.expect(b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n")
        c.send(encode("RESET"))
        c.expect(b"+RESET\r\n")
        c.send(encode("CLIENT", "GETNAME") + encode("GET", "k") + encode("EXEC"))
        c.expect(b"$-1\r\n$1\r\nv\r\n-ERR EXEC without MULTI\r\n")
        # RESET also clears WATCH and leaves RESP3
        c.send(encode("HELLO", "3"))
        assert isinstance(c.read_reply(), Map)
        c.send(encode("WATCH", "k") + encode("RESET"))
        c.expect(b"+OK\r\n+RESET\r\n")
        with server.raw() as other:
            other.send(encode("SET", "k", "changed"))
            other.expect(b"+OK\r\n")
        c.send(encode("MULTI") + encode("GET", "k") + encode("EXEC"))
        c.expect(b"+OK\r\n+QUEUED\r\n*1\r\n$7\r\nchanged\r\n")


def test_quit(server):
    with server.raw() as c:
        c.send(encode("SET", "q", "1") + encode("QUIT") + encode("SET", "q", "2"))
        c.expect(b"+OK\r\n+OK\r\n")
        assert c.expect_closed() == b""
    with server.raw() as c:
        c.send(encode("GET", "q"))
        c.expect(b"$1\r\n1\r\n")
    with server.raw() as c:
        c.send(b"quit\r\n")
        c.expect(b"+OK\r\n")
        c.expect_closed()


def test_many_connections(server):
    conns = [server.raw() for _ in range(100)]
    try:
        for i, c in enumerate(conns):
            c.send(encode("SET", f"c{i}", str(i)))
        for c in conns:
            c.expect(b"+OK\r\n")
    finally:
        for c in conns:
            c.close()
    cl = server.client()
    try:
        assert cl.dbsize() == 100
        wait_until(lambda: int(cl.info("clients")["connected_clients"]) <= 2, timeout=5,
                   msg="closed connections to be noticed")
    finally:
        cl.close()
