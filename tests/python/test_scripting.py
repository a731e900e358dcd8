"""Lua scripting: EVAL/EVALSHA/*_RO, SCRIPT, FUNCTION/FCALL, conversions, sandbox, libraries, BUSY/KILL, and
redis-py's Lock (which is built on EVALSHA scripts). Runs against ruvio and redis-server (RUVIO_TEST_TARGET=redis)
to prove the expectations are Redis's."""

import multiprocessing
import threading
import time

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError, NoScriptError, ResponseError

from conftest import IS_REDIS
from helpers import wait_until


def err(excinfo) -> str:
    return str(excinfo.value)


# ----- EVAL basics and the Lua -> reply conversion -----

def test_eval_conversions(r):
    assert r.eval("return 1", 0) == 1
    assert r.eval("return 3.99", 0) == 3  # numbers are truncated
    assert r.eval("return -2.5", 0) == -2
    assert r.eval("return 'x'", 0) == b"x"
    assert r.eval("return {1, 2, {3, 'four'}}", 0) == [1, 2, [3, b"four"]]
    assert r.eval("return {1, 2, nil, 4}", 0) == [1, 2]  # arrays stop at the first nil
    assert r.eval("return nil", 0) is None
    assert r.eval("return {ok = 'FINE'}", 0) in (b"FINE", "FINE", True)
    assert r.eval("return redis.status_reply('PONG')", 0) in (b"PONG", "PONG", True)
    assert r.eval("return KEYS[1] .. ARGV[1] .. #KEYS .. #ARGV", 1, "k", "a", "b") == b"ka12"


def test_eval_booleans_resp2_rules(server):
    c = server.client(protocol=2)
    assert c.eval("return true", 0) == 1
    assert c.eval("return false", 0) is None
    c.close()


def test_error_replies(r):
    with pytest.raises(ResponseError) as e:
        r.eval("return redis.error_reply('MY_CODE something bad')", 0)
    assert err(e) == "MY_CODE something bad"
    with pytest.raises(ResponseError) as e:
        r.eval("return {err = 'ERR custom'}", 0)
    assert err(e) == "custom" or err(e) == "ERR custom"
    with pytest.raises(ResponseError) as e:
        r.eval("error('boom')", 0)
    assert err(e).startswith("user_script:1: boom script: ")
    assert "on @user_script:1." in err(e)


def test_redis_call_and_pcall(r):
    r.set("s", "1")
    assert r.eval("redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])", 1, "k", "v") == b"v"
    assert r.eval("return redis.call('incrby', KEYS[1], 5)", 1, "s") == 6
    assert r.eval("return redis.call('get', 'missing')", 0) is None
    assert r.eval("return type(redis.call('get', 'missing'))", 0) == b"boolean"
    assert r.eval("return redis.call('ping')", 0) in (b"PONG", "PONG", True)
    assert r.eval("return type(redis.call('ping'))", 0) == b"table"
    # pcall returns the error as a table; call raises it.
    assert r.eval("local e = redis.pcall('incr', 'k'); return e.err", 0) == b"ERR value is not an integer or out of range"
    with pytest.raises(ResponseError) as e:
        r.eval("redis.call('incr', 'k')", 0)
    assert err(e).startswith("value is not an integer or out of range script:")
    with pytest.raises(ResponseError) as e:
        r.eval("redis.call('nosuchcommand')", 0)
    assert err(e).startswith("Unknown Redis command called from script")
    with pytest.raises(ResponseError) as e:
        r.eval("redis.call('get')", 0)
    assert err(e).startswith("Wrong number of args calling Redis command from script")
    with pytest.raises(ResponseError) as e:
        r.eval("redis.call({})", 0)
    assert err(e).startswith("Lua redis lib command arguments must be strings or integers")
    # Numbers are passed as their Lua text.
    assert r.eval("redis.call('set', 'num', 42); return redis.call('get', 'num')", 0) == b"42"


def test_commands_not_allowed_from_scripts(r):
    for body in ["return redis.call('eval', 'return 1', 0)", "return redis.call('multi')",
                 "return redis.call('subscribe', 'ch')", "return redis.call('script', 'flush')"]:
        with pytest.raises(ResponseError) as e:
            r.eval(body, 0)
        assert err(e).startswith("This Redis command is not allowed from script"), body


def test_compile_error(r):
    with pytest.raises(ResponseError) as e:
        r.eval("return 1 +", 0)
    assert err(e) == "Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"


def test_numkeys_errors(r):
    with pytest.raises(ResponseError) as e:
        r.eval("return 1", 2, "onlyone")
    assert err(e) == "Number of keys can't be greater than number of args"
    with pytest.raises(ResponseError) as e:
        r.eval("return 1", -1)
    assert err(e) == "Number of keys can't be negative"


# ----- EVALSHA and SCRIPT -----

def test_evalsha_and_script_cache(r):
    r.script_flush()
    body = "return 'cached ' .. ARGV[1]"
    sha = r.script_load(body)
    assert sha == "f52b4e4ffb37b4f4b5b5f9b55b1e6c6e4bd4e1b7" or len(sha) == 40
    assert r.evalsha(sha, 0, "x") == b"cached x"
    assert r.evalsha(sha.upper(), 0, "y") == b"cached y"
    assert r.script_exists(sha, "0" * 40) == [True, False]
    r.script_flush()
    with pytest.raises(NoScriptError) as e:
        r.evalsha(sha, 0)
    assert err(e) == "No matching script. Please use EVAL."
    # EVAL caches what it runs.
    r.eval(body, 0, "z")
    assert r.script_exists(sha) == [True]


def test_sha1hex_matches_script_load(r):
    sha = r.script_load("return 1")
    assert r.eval("return redis.sha1hex(ARGV[1])", 0, "return 1") == sha.encode()
    assert r.eval("return redis.sha1hex('')", 0) == b"da39a3ee5e6b4b0d3255bfef95601890afd80709"


def test_script_kill_when_idle(r):
    with pytest.raises(ResponseError) as e:
        r.script_kill()
    assert err(e).endswith("No scripts in execution right now.")


# ----- read-only scripts -----

def test_eval_ro(r):
    r.set("ro", "v")
    assert r.eval_ro("return redis.call('get', KEYS[1])", 1, "ro") == b"v"
    with pytest.raises(ResponseError) as e:
        r.eval_ro("return redis.call('set', KEYS[1], 'x')", 1, "ro")
    assert err(e).startswith("Write commands are not allowed from read-only scripts.")
    sha = r.script_load("return redis.call('get', KEYS[1])")
    assert r.evalsha_ro(sha, 1, "ro") == b"v"
    # A shebang script with flags: no-writes refuses writes even under EVAL.
    with pytest.raises(ResponseError) as e:
        r.eval("#!lua flags=no-writes\nreturn redis.call('set', 'ro', 'x')", 0)
    assert err(e).startswith("Write commands are not allowed from read-only scripts.")
    with pytest.raises(ResponseError) as e:
        r.eval_ro("#!lua\nreturn 1", 0)
    assert err(e) == "Can not execute a script with write flag using *_ro command."
    assert r.get("ro") == b"v"


# ----- sandbox -----

def test_globals_are_protected(r):
    with pytest.raises(ResponseError) as e:
        r.eval("x = 1", 0)
    assert "Attempt to modify a readonly table" in err(e)
    with pytest.raises(ResponseError) as e:
        r.eval("return undefined_thing", 0)
    assert "Script attempted to access nonexistent global variable 'undefined_thing'" in err(e)
    with pytest.raises(ResponseError) as e:
        r.eval("redis.call = nil", 0)
    assert "Attempt to modify a readonly table" in err(e)
    with pytest.raises(ResponseError) as e:
        r.eval("string.leak = 1", 0)
    assert "Attempt to modify a readonly table" in err(e)
    with pytest.raises(ResponseError):
        r.eval("rawset(_G, 'leak', 1)", 0)
    with pytest.raises(ResponseError):
        r.eval("return leak", 0)


@pytest.mark.parametrize("name", ["os", "io", "loadfile", "dofile", "require", "print", "module", "setfenv", "getfenv", "debug", "newproxy"])
def test_dangerous_globals_absent(r, name):
    with pytest.raises(ResponseError) as e:
        r.eval(f"return type({name})", 0)
    assert f"nonexistent global variable '{name}'" in err(e)


def test_locals_do_not_leak_between_scripts(r):
    assert r.eval("local x = 5; return x", 0) == 5
    with pytest.raises(ResponseError):
        r.eval("return x", 0)


# ----- libraries -----

def test_cjson(r):
    assert r.eval("return cjson.encode({1, 2, {a = 1}})", 0) == b'[1,2,{"a":1}]'
    assert r.eval("return cjson.encode({})", 0) == b"{}"
    assert r.eval("return cjson.encode('a/b')", 0) == b'"a\\/b"'
    assert r.eval("return cjson.encode(cjson.decode('{\"a\":[1,2.5,\"x\",true]}'))", 0) == b'{"a":[1,2.5,"x",true]}'
    assert r.eval("return cjson.decode('[1,2,null]')[3] == cjson.null", 0) == 1
    assert r.eval("return cjson.encode(1/3)", 0) == b"0.33333333333333"
    with pytest.raises(ResponseError):
        r.eval("return cjson.decode('{bad')", 0)


def test_cmsgpack(r):
    assert r.eval("return cmsgpack.pack({1, 2})", 0) == b"\x92\x01\x02"
    assert r.eval("return cmsgpack.pack('abc', true, nil, -1)", 0) == b"\xa3abc\xc3\xc0\xff"
    assert r.eval("return cmsgpack.pack(300)", 0) == b"\xcd\x01\x2c"
    assert r.eval("local t = cmsgpack.unpack(cmsgpack.pack({a = 'x', b = {1, 2, 3}})); return t.a .. #t.b", 0) == b"x3"
    assert r.eval("local a, b = cmsgpack.unpack(cmsgpack.pack(1, 'two')); return {a, b}", 0) == [1, b"two"]


def test_bit(r):
    assert r.eval("return bit.band(7, 3)", 0) == 3
    assert r.eval("return bit.bor(1, 2, 4)", 0) == 7
    assert r.eval("return bit.bxor(5, 3)", 0) == 6
    assert r.eval("return bit.lshift(1, 4)", 0) == 16
    assert r.eval("return bit.rshift(-1, 28)", 0) == 15
    assert r.eval("return bit.arshift(-16, 2)", 0) == -4
    assert r.eval("return bit.tohex(255)", 0) == b"000000ff"
    assert r.eval("return bit.tohex(255, -4)", 0) == b"00FF"
    assert r.eval("return bit.tobit(4294967297)", 0) == 1
    assert r.eval("return bit.bnot(0)", 0) == -1


def test_struct(r):
    assert r.eval("return struct.pack('>I2', 258)", 0) == b"\x01\x02"
    assert r.eval("return struct.pack('<i4', -2)", 0) == b"\xfe\xff\xff\xff"
    assert r.eval("return {struct.unpack('>I2I2', struct.pack('>I2I2', 1, 2))}", 0) == [1, 2, 5]
    assert r.eval("return struct.size('>I2I4b')", 0) == 7
    assert r.eval("return {struct.unpack('s', struct.pack('s', 'hey'))}", 0) == [b"hey", 5]


# ----- RESP3 inside scripts -----

def test_setresp_3(server):
    c = server.client(protocol=3)
    assert c.eval("redis.setresp(3); return redis.call('get', 'nope') == nil", 0) is True
    assert c.eval("return {double = 1.5}", 0) == 1.5
    assert c.eval("redis.setresp(3); return true", 0) is True
    assert c.eval("return {map = {a = 1}}", 0) == {b"a": 1}
    with pytest.raises(ResponseError) as e:
        c.eval("redis.setresp(4)", 0)
    assert err(e).startswith("RESP version must be 2 or 3.")
    c.close()


def test_misc_redis_api(r):
    assert r.eval("return redis.replicate_commands()", 0) == 1
    assert r.eval("redis.set_repl(redis.REPL_ALL); return 1", 0) == 1
    assert r.eval("redis.log(redis.LOG_WARNING, 'from a test'); return 1", 0) == 1
    assert r.eval("return type(redis.REDIS_VERSION)", 0) == b"string"


# ----- scripts and the lock commands (ruvio only) -----

@pytest.mark.ruvio_only
def test_script_fences_its_write_with_lease_and_ifgt(r):
    script = """
    local token = redis.call('lease', KEYS[1], ARGV[1])
    if not token then return false end
    redis.call('ifgt', KEYS[2], token, ARGV[2])
    return token
    """
    # Inside a script the token is an exact decimal string (Lua numbers are doubles; docs/scripting.md).
    t = r.eval(script, 2, "lk", "data", 60000, "written")
    assert isinstance(t, bytes) and int(t) > 0
    assert r.get("data") == b"written"
    assert r.eval(script, 2, "lk", "data", 60000, "again") is None  # held: the script backs off
    # LEASE ... WAIT inside a script does not block: it answers at once.
    assert r.eval("return redis.call('lease', KEYS[1], 1000, 'WAIT', 5000)", 1, "lk") is None
    assert r.eval("return redis.call('release', KEYS[1], ARGV[1])", 1, "lk", t) == 1


# ----- BUSY, SCRIPT KILL, threshold -----

@pytest.mark.server_config("--busy-reply-threshold", "200")
def test_busy_and_script_kill(server):
    runner = server.client(protocol=2)
    other = server.client(protocol=2)
    assert other.config_get("lua-time-limit") == {"lua-time-limit": "200"}
    result = {}

    def run():
        try:
            runner.eval("local i = 0; while true do i = i + 1 end", 0)
        except ResponseError as e:
            result["err"] = str(e)

    t = threading.Thread(target=run)
    t.start()
    got_busy = []

    def busy():
        try:
            other.get("x")
            return False
        except ResponseError as e:
            got_busy.append(str(e))
            return str(e).startswith("BUSY")

    wait_until(busy, timeout=30)
    assert got_busy[-1] == "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    assert other.script_kill() is True
    t.join(30)
    assert not t.is_alive()
    assert result["err"].startswith("Script killed by user with SCRIPT KILL...")
    assert other.ping() is True
    runner.close()
    other.close()


@pytest.mark.server_config("--busy-reply-threshold", "200")
def test_unkillable_after_write(server):
    runner = server.client(protocol=2)
    other = server.client(protocol=2)
    t = threading.Thread(target=lambda: _swallow(lambda: runner.eval(
        "redis.call('set', 'w', '1'); local s = redis.call('time')[1]; while true do "
        "if tonumber(redis.call('time')[1]) > s + 2 then return 1 end end", 0)))
    t.start()

    def busy():
        try:
            other.get("x")
            return False
        except ResponseError as e:
            return str(e).startswith("BUSY")

    wait_until(busy, timeout=30)
    with pytest.raises(ResponseError) as e:
        other.script_kill()
    assert err(e).startswith("UNKILLABLE Sorry the script already executed write commands against the dataset.")
    t.join(60)
    runner.close()
    other.close()


def _swallow(f):
    try:
        f()
    except Exception:
        pass


# ----- functions -----

LIB = """#!lua name=mylib
local function myget(keys, args) return redis.call('get', keys[1]) end
local function myset(keys, args) return redis.call('set', keys[1], args[1]) end
redis.register_function{function_name = 'myget', callback = myget, flags = {'no-writes'}}
redis.register_function('myset', myset)
"""


def test_function_load_fcall_list_delete(r):
    r.function_flush()
    assert r.function_load(LIB) in (b"mylib", "mylib")
    with pytest.raises(ResponseError) as e:
        r.function_load(LIB)
    assert err(e) == "Library 'mylib' already exists"
    assert r.function_load(LIB, replace=True) in (b"mylib", "mylib")
    assert r.fcall("myset", 1, "fk", "fv") in (True, b"OK", "OK")
    assert r.fcall("myget", 1, "fk") == b"fv"
    assert r.fcall_ro("myget", 1, "fk") == b"fv"
    with pytest.raises(ResponseError) as e:
        r.fcall_ro("myset", 1, "fk", "x")
    assert err(e) == "Can not execute a script with write flag using *_ro command."
    with pytest.raises(ResponseError) as e:
        r.fcall("nosuch", 0)
    assert err(e) == "Function not found"
    listing = r.function_list()
    assert len(listing) == 1
    text = repr(listing)
    assert "mylib" in text and "myget" in text and "no-writes" in text
    dump = r.function_dump()
    r.function_flush()
    with pytest.raises(ResponseError):
        r.fcall("myget", 1, "fk")
    assert r.function_restore(dump) in (True, b"OK", "OK")
    assert r.fcall("myget", 1, "fk") == b"fv"
    assert r.function_delete("mylib") in (True, b"OK", "OK")
    with pytest.raises(ResponseError) as e:
        r.function_delete("mylib")
    assert err(e) == "Library not found"


def test_function_load_errors(r):
    r.function_flush()
    with pytest.raises(ResponseError) as e:
        r.function_load("return 1")
    assert err(e) == "Missing library metadata"
    with pytest.raises(ResponseError) as e:
        r.function_load("#!lua name=empty\nlocal x = 1")
    assert err(e) == "No functions registered"
    with pytest.raises(ResponseError) as e:
        r.function_load("#!lua name=calls\nredis.call('set', 'a', 'b')")
    assert err(e).startswith("Error registering functions: ")
    assert "Script attempted to access nonexistent global variable 'call'" in err(e)
    with pytest.raises(ResponseError) as e:
        r.function_restore(b"garbage")
    assert err(e) == "DUMP payload version or checksum are wrong"


# ----- INFO -----

def test_info_reports_scripting_memory(server):
    c = server.client(protocol=2)
    c.script_flush()
    c.eval("return 'info test'", 0)
    mem = c.info("memory")
    assert mem["used_memory_lua"] > 0
    assert mem["number_of_cached_scripts"] >= 1
    assert "used_memory_scripts" in mem or "used_memory_scripts_eval" in mem
    c.close()


# ----- effects replication visible to WATCH/MULTI (a script is atomic) -----

def test_script_is_atomic_with_many_clients(server):
    c = server.client(protocol=2)
    c.set("counter", 0)
    script = c.register_script("local v = tonumber(redis.call('get', KEYS[1])); redis.call('set', KEYS[1], v + 1); return v + 1")

    def work():
        cc = server.client(protocol=2)
        s = cc.register_script(script.script)
        for _ in range(200):
            s(keys=["counter"])
        cc.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert c.get("counter") == b"800"
    c.close()


# ----- redis-py Lock: its normal flows, built on EVALSHA scripts -----

def test_redis_py_lock_acquire_extend_release(server):
    c = server.client(protocol=2)
    lock = c.lock("resource", timeout=5, blocking=False)
    assert lock.acquire() is True
    assert lock.owned()
    assert c.lock("resource", blocking=False).acquire() is False
    assert lock.extend(10) is True
    assert 5000 < c.pttl("resource") <= 15000
    assert lock.reacquire() is True  # back to the lock's own timeout
    assert 4000 < c.pttl("resource") <= 5000
    lock.release()
    assert c.get("resource") is None
    with pytest.raises(LockError):
        lock.release()
    c.close()


def test_redis_py_lock_not_owned_after_expiry(server):
    c = server.client(protocol=2)
    lock = c.lock("short", timeout=0.2)
    assert lock.acquire(blocking=False)
    wait_until(lambda: c.get("short") is None, timeout=10)
    other = c.lock("short", timeout=5)
    assert other.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):
        lock.extend(1)
    with pytest.raises(LockNotOwnedError):
        lock.release()
    other.release()
    c.close()


def test_redis_py_lock_blocking_acquire(server):
    c = server.client(protocol=2)
    holder = c.lock("blk", timeout=0.5)
    assert holder.acquire()
    waiter = c.lock("blk", timeout=5, blocking_timeout=20, sleep=0.05)
    t0 = time.monotonic()
    assert waiter.acquire() is True  # gets it once the holder's timeout lapses
    assert time.monotonic() - t0 < 20
    waiter.release()
    timed_out = c.lock("blk2", timeout=30)
    assert timed_out.acquire()
    assert c.lock("blk2", blocking_timeout=0.3, sleep=0.05).acquire() is False
    timed_out.release()
    c.close()


def _contend(port: int, key: str, counter_key: str, rounds: int, q) -> None:
    c = redis.Redis(host="127.0.0.1", port=port, protocol=2)
    inside = 0
    for _ in range(rounds):
        with c.lock(key, timeout=10, blocking_timeout=60, sleep=0.01):
            # A read-modify-write that loses updates unless the lock excludes the other process.
            v = int(c.get(counter_key) or 0)
            time.sleep(0.001)
            c.set(counter_key, v + 1)
            inside += 1
    q.put(inside)
    c.close()


def test_redis_py_lock_two_processes_contending(server):
    c = server.client(protocol=2)
    c.delete("contended", "contended:count")
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(server.port, "contended", "contended:count", 40, q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(150)
        assert p.exitcode == 0
    assert sorted([q.get(timeout=5), q.get(timeout=5)]) == [40, 40]
    assert c.get("contended:count") == b"80"
    assert c.get("contended") is None
    c.close()


# ----- redis.acl_check_cmd -----

def test_acl_check_cmd_uses_the_callers_user(server):
    """redis.acl_check_cmd answers for the user of the connection running the script: its commands and keys;
    an unknown command is an error (Redis 7.0's texts)."""
    admin = server.client(protocol=2)
    admin.acl_setuser("scripter", enabled=True, passwords=["+pw"], keys=["xx"], commands=["+eval", "+set", "+function", "+fcall"])
    c = server.client(protocol=2, username="scripter", password="pw")
    try:
        assert c.eval("return redis.acl_check_cmd('set','xx',1)", 1, "xx") == 1
        assert c.eval("return redis.acl_check_cmd('hset','xx','f',1)", 1, "xx") is None
        assert c.eval("return redis.acl_check_cmd('set','yy',1)", 0) is None
        # Subcommands are checked as such.
        assert c.eval("return redis.acl_check_cmd('config','get','x')", 0) is None
        with pytest.raises(ResponseError) as e:
            c.eval("return redis.acl_check_cmd('invalid-cmd','arg')", 0)
        assert err(e).startswith("Invalid command passed to redis.acl_check_cmd()")
        with pytest.raises(ResponseError) as e:
            c.eval("return redis.acl_check_cmd()", 0)
        assert err(e).startswith("Please specify at least one argument for this redis lib call")
        # The default user (all commands, all keys) is allowed everything.
        assert admin.eval("return redis.acl_check_cmd('hset','yy','f',1)", 0) == 1
        assert admin.eval("return redis.acl_check_cmd('config','get','x')", 0) == 1
    finally:
        c.close()
        admin.close()
