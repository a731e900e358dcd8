"""What Redisson 3.52's locks rely on at the protocol level, pinned byte for byte (the full proof with the real
library is tests/libraries/java; this file is the fast regression net). Runs against ruvio and, with
RUVIO_TEST_TARGET=redis, against redis-server: the expectations are redis-server's."""

import time

from helpers import encode, wait_until

# Redisson's RFencedLock acquire script (3.52.0), returns {-1, token} when granted and {pttl, -1} when held.
FENCED_ACQUIRE = (
    "if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "local token = redis.call('incr', KEYS[2]);redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; "
    "return {redis.call('pttl', KEYS[1]), -1};"
)


def test_fenced_lock_script_returns_negative_integers_in_arrays(server):
    with server.raw() as c:
        c.cmd("EVAL", FENCED_ACQUIRE, 2, "f", "redisson_lock_token:{f}", 30000, "id:1")
        c.expect(b"*2\r\n:-1\r\n:1\r\n")
        c.cmd("EVAL", FENCED_ACQUIRE, 2, "f", "redisson_lock_token:{f}", 30000, "id:2")
        reply = c.read_exact(len(b"*2\r\n:"))
        assert reply == b"*2\r\n:"
        pttl = int(c._line(time.monotonic() + 5))
        assert 0 < pttl <= 30000
        c.expect(b":-1\r\n")


def test_publish_from_a_script_counts_and_delivers(server):
    # Redisson's unlock script: redis.call('publish', KEYS[2], ARGV[1]) after deleting the lock hash.
    with server.raw() as sub, server.raw() as c:
        sub.cmd("SUBSCRIBE", "redisson_lock__channel:{l}")
        sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$26\r\nredisson_lock__channel:{l}\r\n:1\r\n")
        c.cmd("EVAL", "redis.call('del', KEYS[1]); return redis.call('publish', KEYS[2], ARGV[1])", 2,
              "l", "redisson_lock__channel:{l}", "0")
        c.expect(b":1\r\n")
        sub.expect(b"*3\r\n$7\r\nmessage\r\n$26\r\nredisson_lock__channel:{l}\r\n$1\r\n0\r\n")


def test_ping_on_a_subscribed_resp2_connection(server):
    # Redisson PINGs every connection (pingConnectionInterval), pub/sub ones included.
    with server.raw() as c:
        c.cmd("SUBSCRIBE", "ch")
        c.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
        c.cmd("PING")
        c.expect(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")
        c.cmd("PING", "hi")
        c.expect(b"*2\r\n$4\r\npong\r\n$2\r\nhi\r\n")


def test_info_all_has_the_fields_synced_locks_read(server):
    # Non-single-server Redisson configs read connected_slaves and aof_enabled from INFO ALL to choose WAIT/WAITAOF.
    info = server.client().execute_command("INFO", "ALL")
    assert "connected_slaves" in info and info["connected_slaves"] == 0
    assert info["aof_enabled"] in (0, 1)


def test_wait_probe_and_waitaof_probe(server):
    # Redisson probes WAIT 0 0 and WAITAOF 0 0 0 in one pipeline; an error starting "ERR unknown command" (Redis
    # before 7.2) tells it the command is missing. Any other error would fail its locks.
    with server.raw() as c:
        c.send(encode("WAIT", 0, 0) + encode("WAITAOF", 0, 0, 0))
        c.expect(b":0\r\n")
        first = c.read_exact(1)
        if first == b"-":
            line = c._line(time.monotonic() + 5)
            assert line.startswith(b"ERR unknown command 'WAITAOF'"), line
        else:
            # [local, replicas]: local is 0 or 1 (Ruvio: 1 once everything it logged is fsynced, docs/commands.md;
            # Redis 7.2: once this connection's last write is), no replicas here.
            assert first == b"*"
            c.expect(b"2\r\n:")
            assert c.read_exact(1) in (b"0", b"1")
            c.expect(b"\r\n:0\r\n")


def test_client_list_shows_the_last_command(server):
    # The Redisson proof checks a synced lock's connection through CLIENT LIST's cmd= field.
    r = server.client(decode_responses=True)
    r.execute_command("WAIT", 0, 0)
    listing = r.execute_command("CLIENT", "LIST")
    # This connection's line: its last command before CLIENT LIST ran was WAIT (CLIENT LIST shows itself).
    assert any(" cmd=client|list " in line + " " for line in listing.splitlines()), listing
    with server.raw() as c:
        c.cmd("WAIT", 0, 0)
        c.expect(b":0\r\n")
        wait_until(lambda: any(" cmd=wait " in line + " " for line in
                               r.execute_command("CLIENT", "LIST").splitlines()), msg="cmd=wait in CLIENT LIST")
