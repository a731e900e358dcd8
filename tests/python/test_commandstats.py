"""INFO commandstats and errorstats as Redis 7.0 keeps them: calls, usec, rejected_calls and failed_calls per
command (subcommands as `config|get`), including the commands a script or EXEC ran; errors counted once where
they happen (a script's `redis.call` error that ends the script is not counted again). Every test here also
passes against redis-server (RUVIO_TEST_TARGET=redis)."""

from __future__ import annotations

import threading
import time

import pytest
import redis


def cmdstat(c: redis.Redis, name: str) -> dict[str, float]:
    """The `cmdstat_<name>` line ({} when the command has none); redis-py parses INFO's `a=1,b=2` values."""
    return c.info("commandstats").get(f"cmdstat_{name}", {})


def errorstat(c: redis.Redis, code: str) -> int:
    return int(c.info("errorstats").get(f"errorstat_{code}", {}).get("count", 0))


def total_errors(c: redis.Redis) -> int:
    return int(c.info("stats")["total_error_replies"])


@pytest.fixture
def c(server):
    client = server.client()
    client.config_resetstat()
    yield client
    client.config_set("maxmemory", "0")
    client.close()


def test_calls_failures_and_subcommands(c) -> None:
    c.set("k", "v")
    c.set("k", "w")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        c.lpush("k", "x")
    c.config_get("maxmemory")
    st = cmdstat(c, "set")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (2, 0, 0)
    assert st["usec"] >= 0 and abs(st["usec_per_call"] - st["usec"] / 2) < 0.01
    st = cmdstat(c, "lpush")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (1, 0, 1)
    assert cmdstat(c, "config|get")["calls"] == 1
    # Not in the default INFO, in INFO all and everything.
    assert not any(k.startswith("cmdstat_") for k in c.info())
    assert "cmdstat_set" in c.info("everything") and "cmdstat_set" in c.info("all")
    c.config_resetstat()
    assert cmdstat(c, "set") == {} and errorstat(c, "WRONGTYPE") == 0 and total_errors(c) == 0


def test_refused_commands_count_as_rejected_and_queued_ones_when_exec_runs_them(c) -> None:
    c.config_set("maxmemory", "1")
    with pytest.raises(redis.ResponseError, match="command not allowed when used memory"):
        c.set("k", "v")
    st = cmdstat(c, "set")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (0, 1, 0)
    assert errorstat(c, "OOM") == 1
    c.config_set("maxmemory", "0")
    c.config_resetstat()
    p = c.pipeline(transaction=True)
    p.set("a", "1")
    p.incr("a")
    p.lpush("a", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        p.execute()
    assert cmdstat(c, "set")["calls"] == 1
    assert cmdstat(c, "incrby")["calls"] == 1  # redis-py sends INCR as INCRBY
    st = cmdstat(c, "lpush")
    assert (st["calls"], st["failed_calls"]) == (1, 1)
    assert cmdstat(c, "exec")["calls"] == 1 and cmdstat(c, "multi")["calls"] == 1


def test_script_errors_are_counted_once_where_they_happen(c) -> None:
    # A command's error that ends the script: counted once (where the command failed), the script's call failed.
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        c.eval("return redis.call('select', 99)", 0)
    assert errorstat(c, "ERR") == 1 and total_errors(c) == 1
    st = cmdstat(c, "select")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (1, 0, 1)
    st = cmdstat(c, "eval")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (1, 0, 1)
    # Caught by pcall: still counted once, and the script itself did not fail.
    c.config_resetstat()
    assert c.eval("local t = redis.pcall('select', 99) if t['err'] then return 1 end return 0", 0) == 1
    assert errorstat(c, "ERR") == 1 and total_errors(c) == 1
    st = cmdstat(c, "eval")
    assert (st["calls"], st["failed_calls"]) == (1, 0)
    # A script's own error reply: counted once, when it is answered.
    c.config_resetstat()
    with pytest.raises(redis.ResponseError, match="MY_CODE"):
        c.eval("return redis.error_reply('MY_CODE custom')", 0)
    assert errorstat(c, "MY_CODE") == 1 and total_errors(c) == 1
    # A write refused inside a read-only script: the refused command is rejected, not called.
    c.config_resetstat()
    with pytest.raises(redis.ResponseError, match="Write commands are not allowed from read-only scripts"):
        c.eval_ro("return redis.call('set', KEYS[1], 'y')", 1, "x")
    st = cmdstat(c, "set")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (0, 1, 0)
    st = cmdstat(c, "eval_ro")
    assert (st["calls"], st["failed_calls"]) == (1, 1)
    assert errorstat(c, "ERR") == 1 and total_errors(c) == 1


def test_a_script_without_flags_is_refused_writes_over_maxmemory_command_by_command(c) -> None:
    c.config_set("maxmemory", "1")
    with pytest.raises(redis.ResponseError, match="command not allowed when used memory > 'maxmemory'"):
        c.eval("return redis.call('set', KEYS[1], 'y')", 1, "x")
    assert errorstat(c, "OOM") == 1 and total_errors(c) == 1
    st = cmdstat(c, "set")
    assert (st["calls"], st["rejected_calls"]) == (0, 1)
    # Reads still run.
    assert c.eval("return redis.call('get', KEYS[1])", 1, "x") is None
    c.config_set("maxmemory", "0")
    assert c.eval("return redis.call('set', KEYS[1], 'y')", 1, "x") == b"OK"


def test_a_command_that_waited_is_counted_when_it_is_answered(c, server) -> None:
    # A script that runs longer than the I/O thread waits for it on the spot (Ruvio then lets the client wait as for
    # a blocked command): its failure still counts. Counted at block time, it used to show failed_calls=0.
    slow_then_fail = "for i = 1, 3000000 do end return redis.call('select', 99)"
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        c.eval(slow_then_fail, 0)
    st = cmdstat(c, "eval")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (1, 0, 1)
    assert errorstat(c, "ERR") == 1 and total_errors(c) == 1
    # A blocked BLPOP ended by CLIENT UNBLOCK ... ERROR: one call, failed (Redis counts it on unblock).
    c.config_resetstat()
    waiter = server.client()
    waiter_id = waiter.client_id()
    outcome: list[BaseException | object] = []
    t = threading.Thread(target=lambda: outcome.append(_call(lambda: waiter.blpop(["cs:nothing"], timeout=10))))
    t.start()
    for _ in range(200):
        if any(cl["id"] == str(waiter_id) and cl["cmd"] == "blpop" for cl in c.client_list()):
            break
        time.sleep(0.01)
    assert c.client_unblock(waiter_id, error=True)
    t.join(10)
    assert isinstance(outcome[0], redis.ResponseError) and "UNBLOCKED" in str(outcome[0])
    st = cmdstat(c, "blpop")
    assert (st["calls"], st["rejected_calls"], st["failed_calls"]) == (1, 0, 1)
    assert errorstat(c, "UNBLOCKED") == 1
    # Timed out: one call, not failed.
    assert waiter.blpop(["cs:nothing"], timeout=0.05) is None
    st = cmdstat(c, "blpop")
    assert (st["calls"], st["failed_calls"]) == (2, 1)


def _call(f):
    try:
        return f()
    except BaseException as e:  # noqa: BLE001 - handed to the test thread to assert on
        return e
