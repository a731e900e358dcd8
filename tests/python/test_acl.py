"""ACL users with redis-py (issue 35): a lock-only user, AUTH with a user name, HELLO ... AUTH, ACL LOG, key and
channel patterns, requirepass as the default user's password, and the @coordination category no user has by
default. Runs against redis-server too (RUVIO_TEST_TARGET=redis), except what is Ruvio's own (marked)."""

from __future__ import annotations

import os

import pytest
import redis

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
