"""ACL users with redis-py (issue 35): a lock-only user, AUTH with a user name, HELLO ... AUTH, ACL LOG, key and
channel patterns, requirepass as the default user's password, and the @coordination category no user has by
default. Runs against redis-server too (RUVIO_TEST_TARGET=redis), except what is Ruvio's own (marked)."""

from __future__ import annotations

import os

import pytest
import redis

from helpers import Error

RUVIO = os.environ.get("RUVIO_TEST_TARGET", "ruvio") != "redis"


def text(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def client(srv, **kw) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=srv.port, socket_timeout=10, **kw)


def test_setuser_getuser_and_auth_with_a_user_name(server_factory):
    srv = server_factory()
    admin = client(srv)
    assert admin.acl_setuser("alice", enabled=True, passwords=["+pw"], keys=["cache:*"], commands=["+get", "+set", "+acl|whoami", "+ping"])
    u = admin.acl_getuser("alice")
    assert "on" in u["flags"]
    assert len(u["passwords"]) == 1 and u["passwords"][0] != "pw", "passwords are kept hashed"
    alice = client(srv, username="alice", password="pw")
    assert text(alice.acl_whoami()) == "alice"
    assert alice.set("cache:1", "v")
    assert alice.get("cache:1") == b"v"
    with pytest.raises(redis.exceptions.NoPermissionError):
        alice.get("other")
    with pytest.raises(redis.exceptions.NoPermissionError):
        alice.incr("cache:n")
    with pytest.raises(redis.exceptions.AuthenticationError):
        client(srv, username="alice", password="wrong").ping()
    assert "alice" in [text(u) for u in admin.acl_users()]
    log = admin.acl_log(count=100)
    assert any(e["reason"] == "command" and e["object"] == "incrby" and e["username"] == "alice" for e in log), log
    assert any(e["reason"] == "key" and e["object"] == "other" for e in log), log
    assert any(e["reason"] == "auth" for e in log), log
    # Deleting a user closes its connections.
    assert admin.acl_deluser("alice") == 1
    with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.AuthenticationError)):
        alice.ping()


@pytest.mark.skipif(not RUVIO, reason="Ruvio's lock commands and its @lock category")
def test_a_lock_only_user_leases_and_releases_on_lock_keys_and_nothing_else(server_factory):
    srv = server_factory()
    admin = client(srv)
    admin.execute_command("ACL", "SETUSER", "locker", "on", ">lockpw", "~lock:*", "resetchannels", "+@lock", "+ping")
    r = client(srv, username="locker", password="lockpw", protocol=3)
    token = r.execute_command("LEASE", "lock:job", "10000")
    assert isinstance(token, int) and token > 0
    assert r.execute_command("RELEASE", "lock:job", token) == 1
    with pytest.raises(redis.exceptions.NoPermissionError, match="keys"):
        r.execute_command("LEASE", "other", "10000")
    with pytest.raises(redis.exceptions.NoPermissionError, match="'set'"):
        r.set("lock:x", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.publish("ch", "m")
    cats = [text(c) for c in admin.acl_cat()]
    assert "lock" in cats and "coordination" in cats
    assert "lease" in [text(c) for c in admin.acl_cat("lock")]


def test_hello_auth_and_requirepass_is_the_default_users_password(server_factory):
    srv = server_factory("--requirepass", "pw")
    with pytest.raises(redis.exceptions.AuthenticationError):
        client(srv).ping()
    r = client(srv, password="pw", protocol=3)
    assert r.ping()
    assert text(r.acl_whoami()) == "default"
    r.acl_setuser("bob", enabled=True, passwords=["+bobpw"], commands=["+@all"], keys=["*"])
    bob = client(srv, username="bob", password="bobpw", protocol=3)
    assert text(bob.acl_whoami()) == "bob"
    r.config_set("requirepass", "new")
    assert client(srv, password="new").ping()
    with pytest.raises(redis.exceptions.AuthenticationError):
        client(srv, password="pw").ping()


def test_channel_patterns(server_factory):
    srv = server_factory()
    admin = client(srv)
    admin.execute_command("ACL", "SETUSER", "sub", "on", ">p", "resetchannels", "&news.*", "+@pubsub")
    r = client(srv, username="sub", password="p")
    assert r.publish("news.today", "x") == 0
    with pytest.raises(redis.exceptions.NoPermissionError, match="channels"):
        r.publish("secret", "x")
    p = r.pubsub()
    with pytest.raises(redis.exceptions.NoPermissionError):
        p.subscribe("secret")
        p.get_message(timeout=5)


@pytest.mark.skipif(not RUVIO, reason="Ruvio's @coordination category")
def test_coordination_commands_are_refused_to_the_default_user_even_without_a_password(server_factory):
    srv = server_factory()
    r = client(srv)
    with pytest.raises(redis.exceptions.NoPermissionError, match="replication"):
        r.execute_command("REPLICATION", "PROMISE", "1023")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.execute_command("REPLICAOF", "NO", "ONE", "EPOCH", "5")
    # +@all does not include it; only an explicit +@coordination does.
    r.execute_command("ACL", "SETUSER", "ops", "on", ">o", "+@all", "~*")
    ops = client(srv, username="ops", password="o")
    with pytest.raises(redis.exceptions.NoPermissionError):
        ops.execute_command("REPLICATION", "PROMISE", "3")
    r.execute_command("ACL", "SETUSER", "ops", "+@coordination")
    assert ops.execute_command("REPLICATION", "PROMISE", "3")[0] == 3


@pytest.mark.skipif(not RUVIO, reason="Ruvio's aclfile round trip")
def test_acl_save_and_load_through_an_aclfile(server_factory, tmp_path):
    path = tmp_path / "users.acl"
    path.write_text("user default on nopass ~* &* +@all\nuser carol on >cpw ~c:* +get\n")
    srv = server_factory("--aclfile", str(path))
    admin = client(srv)
    assert client(srv, username="carol", password="cpw").get("c:1") is None
    admin.acl_setuser("dave", enabled=True, passwords=["+dpw"], commands=["+ping"])
    assert admin.acl_save()
    saved = path.read_text()
    assert "user dave on #" in saved and "dpw" not in saved, saved
    path.write_text("user default on nopass ~* &* +@all\n")
    assert admin.acl_load()
    assert sorted(text(u) for u in admin.acl_users()) == ["default"]


def test_commands_run_by_scripts_are_checked_against_the_callers_user(server_factory):
    """EVAL/FCALL's redis.call runs as the connection's user: Redis 7.0's script texts, logged with context lua."""
    srv = server_factory()
    admin = client(srv)
    admin.execute_command("ACL", "SETUSER", "scripter", "on", ">s", "~allowed:*", "+@scripting", "+get", "+set")
    r = client(srv, username="scripter", password="s")
    assert r.eval("return redis.call('set', KEYS[1], 'v')", 1, "allowed:1") == b"OK"
    with pytest.raises(redis.exceptions.ResponseError, match="^The user executing the script can't run this command or subcommand"):
        r.eval("return redis.call('incr', 'allowed:n')", 0)
    with pytest.raises(redis.exceptions.ResponseError, match="^The user executing the script can't access at least one of the keys"):
        r.eval("return redis.call('get', 'secret')", 0)
    # pcall sees the same error as a value, and nothing was written.
    assert r.eval("return redis.pcall('set', 'secret', 'x')['err']", 0).startswith(b"ERR The user executing the script can't access")
    assert admin.exists("secret") == 0 and admin.exists("allowed:n") == 0
    entry = admin.acl_log(count=10)
    assert any(e["context"] == "lua" and e["reason"] == "command" and e["object"] == "incr" for e in entry), entry
    assert any(e["context"] == "lua" and e["reason"] == "key" and e["object"] == "secret" for e in entry), entry
    # Functions too.
    admin.function_load("#!lua name=acltest\nredis.register_function('bump', function(keys) return redis.call('incr', keys[1]) end)")
    with pytest.raises(redis.exceptions.ResponseError, match="^The user executing the script can't run this command or subcommand"):
        r.fcall("bump", 1, "allowed:f")
    assert admin.exists("allowed:f") == 0


def test_channel_permissions_are_checked_when_queued_and_again_at_exec(server_factory):
    srv = server_factory()
    admin = client(srv)
    admin.execute_command("ACL", "SETUSER", "ps", "on", ">p", "~*", "resetchannels", "&ok:*", "+@all")
    r = client(srv, username="ps", password="p")
    conn = r.connection_pool.get_connection()
    try:
        # Refused when queued (NOPERM), so EXEC aborts.
        conn.send_command("MULTI")
        assert conn.read_response() == b"OK"
        conn.send_command("PUBLISH", "secret", "x")
        with pytest.raises(redis.exceptions.NoPermissionError, match="channels"):
            conn.read_response()
        conn.send_command("EXEC")
        with pytest.raises(redis.exceptions.ExecAbortError):
            conn.read_response()
        # Queued while allowed, revoked before EXEC: that command alone is refused with Redis's text, the rest runs.
        conn.send_command("MULTI")
        assert conn.read_response() == b"OK"
        conn.send_command("SET", "k", "1")
        assert conn.read_response() == b"QUEUED"
        conn.send_command("PUBLISH", "ok:1", "m")
        assert conn.read_response() == b"QUEUED"
        conn.send_command("INCR", "n")
        assert conn.read_response() == b"QUEUED"
        admin.execute_command("ACL", "SETUSER", "ps", "resetchannels", "-incr")
        conn.send_command("EXEC")
        replies = conn.read_response()
    finally:
        r.connection_pool.release(conn)
    assert replies[0] == b"OK"
    assert isinstance(replies[1], redis.exceptions.ResponseError) and str(replies[1]).startswith(
        "ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no "
        "longer allowed for the following reason: no permission to access one of the channels used as arguments"), replies
    assert isinstance(replies[2], redis.exceptions.ResponseError) and str(replies[2]).endswith(
        "no permission to execute the command or subcommand"), replies
    assert admin.get("k") == b"1" and admin.exists("n") == 0
    log = admin.acl_log(count=10)
    assert any(e["context"] == "multi" and e["reason"] == "channel" and e["object"] == "ok:1" for e in log), log


def test_subscribers_are_disconnected_when_their_channels_are_revoked(server_factory):
    srv = server_factory()
    admin = client(srv)
    admin.execute_command("ACL", "SETUSER", "sub", "on", ">p", "resetchannels", "&news", "&keep", "&tv.*", "+@all")
    subs = {}
    for name, how in [("revoked", ("subscribe", "news")), ("pattern", ("psubscribe", "tv.*")), ("kept", ("subscribe", "keep"))]:
        r = client(srv, username="sub", password="p", client_name=name)
        p = r.pubsub()
        getattr(p, how[0])(how[1])
        assert p.get_message(timeout=5)["type"] == how[0]
        subs[name] = (r, p)  # the client too: dropping it would close its pool, the subscriber's connection included
    # Still allowed (a literal rule kept, a new one added): nobody leaves.
    admin.execute_command("ACL", "SETUSER", "sub", "resetchannels", "&news", "&keep", "&tv.*", "&more")
    assert {"revoked", "pattern", "kept"} <= {c["name"] for c in admin.client_list()}
    admin.execute_command("ACL", "SETUSER", "sub", "resetchannels", "&keep")
    names = {c["name"] for c in admin.client_list()}
    assert "revoked" not in names and "pattern" not in names and "kept" in names, names
    # Deleting the user closes the rest.
    admin.acl_deluser("sub")
    assert "kept" not in {c["name"] for c in admin.client_list()}


def test_acl_dryrun(server_factory):
    srv = server_factory()
    r = client(srv)
    r.execute_command("ACL", "SETUSER", "dry", "on", "nopass", "+@all", "-incr", "%R~read*", "~rw*", "resetchannels", "&ch")
    assert r.execute_command("ACL", "DRYRUN", "dry", "GET", "read1") == b"OK"
    assert r.execute_command("ACL", "DRYRUN", "dry", "SET", "read1", "v") == b"This user has no permissions to access the 'read1' key"
    assert r.execute_command("ACL", "DRYRUN", "dry", "INCR", "rw1") == b"This user has no permissions to run the 'incr' command"
    assert r.execute_command("ACL", "DRYRUN", "dry", "PUBLISH", "other", "m") == b"This user has no permissions to access the 'other' channel"
    assert r.execute_command("ACL", "DRYRUN", "dry", "PUBLISH", "ch", "m") == b"OK"
    for args, msg in [(("nobody", "GET", "k"), "User 'nobody' not found"), (("dry", "NOSUCH", "k"), "Command 'NOSUCH' not found"),
                      (("dry", "SET", "k"), "wrong number of arguments for 'set' command")]:
        with pytest.raises(redis.exceptions.ResponseError, match=msg):
            r.execute_command("ACL", "DRYRUN", *args)
    assert r.exists("read1") == 0, "DRYRUN runs nothing"


def test_selectors(server_factory):
    """Redis 7 selectors: a command runs if the user's own rules or any one selector allows all of it."""
    srv = server_factory()
    admin = client(srv)
    admin.execute_command("ACL", "SETUSER", "sel", "on", ">p", "-@all", "resetkeys", "(+@write ~write:*)", "(+@read", "~read:*)")
    r = client(srv, username="sel", password="p")
    assert r.set("write:1", "v") and r.get("read:1") is None
    with pytest.raises(redis.exceptions.NoPermissionError, match="keys"):
        r.get("write:1")  # GET is in the second selector, write:1 only in the first: not additive
    with pytest.raises(redis.exceptions.NoPermissionError, match="'ping'"):
        r.ping()
    u = admin.acl_getuser("sel")
    sels = [s if isinstance(s, dict) else {text(k): text(v) for k, v in zip(s[::2], s[1::2])} for s in u["selectors"]]
    assert [(s["commands"], s["keys"]) for s in sels] == [("-@all +@write", "~write:*"), ("-@all +@read", "~read:*")], u
    line = [text(l) for l in admin.acl_list() if text(l).startswith("user sel ")][0]
    assert line.endswith("(~write:* resetchannels -@all +@write) (~read:* resetchannels -@all +@read)"), line
    # The furthest refusal is the one reported and logged (the later key).
    admin.execute_command("ACL", "SETUSER", "sel", "clearselectors", "+mget", "~key", "(+mget ~key ~other)")
    admin.acl_log_reset()
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.mget("key", "other", "third")
    assert admin.acl_log()[0]["object"] == "third"
    for bad, msg in [(["(on)"], "Syntax error"), (["(~a"], "Unmatched parenthesis"), (["~*", "~more"], "Adding a pattern after the")]:
        with pytest.raises(redis.exceptions.ResponseError, match=msg):
            admin.execute_command("ACL", "SETUSER", "sel", *bad)
    admin.execute_command("ACL", "SETUSER", "sel", "clearselectors")
    assert admin.acl_getuser("sel")["selectors"] == []


def test_first_argument_rules(server_factory):
    """`+select|0` (Redis 7.0's deprecated first-argument form): the command with that first argument only."""
    srv = server_factory()
    admin = client(srv)
    admin.execute_command("ACL", "SETUSER", "db0", "on", ">p", "-@all", "+acl|whoami", "+select|0")
    assert "+select|0" in text(admin.acl_getuser("db0")["commands"])
    r = client(srv, username="db0", password="p")
    assert r.execute_command("SELECT", "0")
    with pytest.raises(redis.exceptions.NoPermissionError, match="'select'"):
        r.execute_command("SELECT", "1")
    assert admin.execute_command("ACL", "DRYRUN", "db0", "SELECT", "1") == b"This user has no permissions to run the 'select' command"
    with pytest.raises(redis.exceptions.ResponseError, match="Unknown command or category name in ACL"):
        admin.execute_command("ACL", "SETUSER", "db0", "-select|0")
    # Allowing or refusing the whole command replaces the first-argument rule.
    admin.execute_command("ACL", "SETUSER", "db0", "+select", "-select")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.execute_command("SELECT", "0")


# Every command whose keys follow a count (Redis's `movablekeys`), with the counted keys naming one allowed key and
# one secret: the ACL must see every counted key, not only the first or the destination.
COUNTED_KEY_COMMANDS = [
    ("ZUNIONSTORE", "pub:dst", "2", "pub:z", "secret:z"),
    ("ZINTERSTORE", "pub:dst", "2", "pub:z", "secret:z"),
    ("ZDIFFSTORE", "pub:dst", "2", "pub:z", "secret:z"),
    ("ZUNION", "2", "pub:z", "secret:z"),
    ("ZINTER", "2", "pub:z", "secret:z"),
    ("ZDIFF", "2", "pub:z", "secret:z"),
    ("ZINTERCARD", "2", "pub:z", "secret:z"),
    ("SINTERCARD", "2", "pub:s", "secret:s"),
    ("LMPOP", "2", "pub:l", "secret:l", "LEFT"),
    ("ZMPOP", "2", "pub:empty", "secret:z", "MIN"),
    ("BLMPOP", "0.01", "2", "pub:l", "secret:l", "LEFT"),
    ("BZMPOP", "0.01", "2", "pub:empty", "secret:z", "MIN"),
    ("EVAL", "return 1", "2", "pub:z", "secret:z"),
]


@pytest.mark.parametrize("call", COUNTED_KEY_COMMANDS, ids=[c[0] for c in COUNTED_KEY_COMMANDS])
def test_every_counted_key_is_checked(server_factory, call):
    srv = server_factory()
    admin = client(srv)
    admin.zadd("secret:z", {"top secret": 1})
    admin.sadd("secret:s", "top secret")
    admin.rpush("secret:l", "top secret")
    admin.zadd("pub:z", {"public": 1})
    admin.execute_command("ACL", "SETUSER", "mallory", "on", ">pw", "~pub:*", "+@all")
    mallory = client(srv, username="mallory", password="pw")
    with pytest.raises(redis.exceptions.NoPermissionError):
        mallory.execute_command(*call)
    assert admin.exists("pub:dst") == 0, "nothing was stored from the secret key"
    assert admin.zrange("secret:z", 0, -1) == [b"top secret"] and admin.lrange("secret:l", 0, -1) == [b"top secret"]
    # The same command on allowed keys only runs.
    allowed = [a.replace("secret:", "pub:") for a in call]
    mallory.execute_command(*allowed)


def test_command_getkeys_lists_counted_keys_as_redis(server_factory):
    with server_factory().raw() as conn:
        _check_getkeys(conn)


def _check_getkeys(conn) -> None:
    def getkeys(*args):
        reply = conn.call("COMMAND", "GETKEYS", *args)
        return str(reply).removeprefix("ERR ") if isinstance(reply, Error) else [text(k) for k in reply]

    assert getkeys("ZUNIONSTORE", "d", "2", "a", "b") == ["d", "a", "b"]
    assert getkeys("ZUNION", "2", "a", "b", "WEIGHTS", "1", "2") == ["a", "b"]
    assert getkeys("BLMPOP", "0", "2", "a", "b", "LEFT") == ["a", "b"]
    assert getkeys("SINTERCARD", "1", "a", "LIMIT", "3") == ["a"]
    assert getkeys("EVAL", "return 1", "1", "a", "arg") == ["a"]
    for bad in (("ZUNION", "abc", "a"), ("ZUNION", "5", "a", "b"), ("ZUNION", "0", "a"), ("LMPOP", "-1", "a", "LEFT")):
        assert getkeys(*bad) == "Invalid arguments specified for command", bad
    assert getkeys("EVAL", "return 1", "5", "a") == [], "a script's bad count names no keys, as Redis answers"


# Read and write key permissions (%R~, %W~) per key, as Redis 7.0 derives them from each command's key
# specifications: reading a key's contents needs read permission, changing it write permission, both for a command
# that does both (LPOP, INCR, GETDEL), neither for one that only looks at its existence or size (EXISTS, STRLEN).
KEY_ACCESS_CASES = [
    (("LPUSH", "write:l", "x"), None),
    (("LPOP", "write:l"), "write:l"),
    (("LPOP", "rw:l"), None),
    (("GETDEL", "write:s"), "write:s"),
    (("INCR", "write:n"), "write:n"),
    (("INCR", "rw:n"), None),
    (("SET", "write:s", "v"), None),
    (("SET", "write:s", "v", "GET"), "write:s"),
    (("SET", "read:s", "v"), "read:s"),
    (("GET", "read:s"), None),
    (("GET", "write:s"), "write:s"),
    (("EXISTS", "write:s", "read:s"), None),
    (("STRLEN", "write:s"), None),
    (("EXISTS", "nothing"), "nothing"),
    (("COPY", "read:s", "write:c"), None),
    (("COPY", "write:s", "read:c"), "write:s"),
    (("LMOVE", "rw:l", "write:l2", "LEFT", "LEFT"), None),
    (("LMOVE", "read:l", "write:l2", "LEFT", "LEFT"), "read:l"),
    (("SINTERSTORE", "write:d", "read:a", "rw:b"), None),
    (("SINTERSTORE", "read:d", "read:a"), "read:d"),
    (("ZUNIONSTORE", "write:d", "2", "read:a", "write:b"), "write:b"),
    (("BITFIELD", "read:b", "GET", "u4", "0"), None),
    (("BITFIELD", "read:b", "SET", "u4", "0", "1"), "read:b"),
    (("BITFIELD", "write:b", "SET", "u4", "0", "1"), "write:b"),
    (("BITFIELD", "rw:b", "INCRBY", "u4", "0", "1"), None),
    (("SORT", "read:l", "STORE", "write:d"), None),
    (("SORT", "write:l", "STORE", "write:d"), "write:l"),
    (("RENAME", "rw:a", "write:b"), None),
    (("RENAME", "read:a", "write:b"), "read:a"),
    # A script's declared keys: Redis cannot tell what the script does with them, so EVAL, EVALSHA and FCALL assume
    # the worst (read and write); their _RO forms only read.
    (("EVAL", "return 1", "1", "rw:k"), None),
    (("EVAL", "return 1", "1", "read:k"), "read:k"),
    (("EVAL", "return 1", "2", "rw:k", "write:k"), "write:k"),
    (("EVAL_RO", "return 1", "1", "read:k"), None),
    (("EVAL_RO", "return 1", "1", "write:k"), "write:k"),
    (("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "1", "read:k"), "read:k"),
    (("EVALSHA_RO", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "1", "read:k"), None),
    (("FCALL", "f", "1", "read:k"), "read:k"),
    (("FCALL_RO", "f", "1", "read:k"), None),
]


@pytest.mark.parametrize("call,denied_key", KEY_ACCESS_CASES, ids=[" ".join(c[0][:2]) + (" ..." if len(c[0]) > 2 else "") for c in KEY_ACCESS_CASES])
def test_read_and_write_key_permissions_follow_what_the_command_does_to_each_key(server_factory, call, denied_key):
    admin = client(server_factory())
    admin.execute_command("ACL", "SETUSER", "split", "on", "nopass", "+@all", "%R~read*", "%W~write*", "~rw*")
    reply = text(admin.execute_command("ACL", "DRYRUN", "split", *call))
    expected = "OK" if denied_key is None else f"This user has no permissions to access the '{denied_key}' key"
    assert reply == expected


def test_sort_by_and_get_patterns_need_read_access_to_every_key(server_factory):
    srv = server_factory()
    admin = client(srv)
    admin.rpush("mylist", 1)
    admin.set("v1", 10)
    admin.execute_command("ACL", "SETUSER", "sorter", "on", ">pw", "+sort", "~mylist", "%W~*")
    sorter = client(srv, username="sorter", password="pw")
    with pytest.raises(redis.exceptions.ResponseError, match="BY option of SORT denied"):
        sorter.execute_command("SORT", "mylist", "BY", "v*")
    admin.execute_command("ACL", "SETUSER", "sorter", "resetkeys", "~mylist", "%R~*")
    assert sorter.execute_command("SORT", "mylist", "BY", "v*") == [b"1"]
