"""Running Ruvio as a service (issue 36): Debian's stock redis.conf, refused directives, maxmemory with noeviction,
logfile/pidfile/log-format json, --help/--version, INFO server's fields and the start-up line, and systemd's
readiness protocol (NOTIFY_SOCKET). Every test starts a real `ruvio` process and talks to it over TCP."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, ServerProcess, _free_port, _ping_ok
from helpers import NULL, Error, encode

pytestmark = pytest.mark.ruvio_only

STOCK_REDIS_CONF = Path("/etc/redis/redis.conf")


def ruvio_bin() -> str:
    return os.environ.get("RUVIO_BIN") or str(REPO_ROOT / "target" / "release" / "ruvio")


def start(args: list[str], cwd: Path, env: dict | None = None) -> tuple[subprocess.Popen, int]:
    """Starts `ruvio` with args plus a free port; returns once it answers PING (or fails with its output)."""
    port = _free_port()
    log = open(cwd / "stderr.log", "ab")
    proc = subprocess.Popen([ruvio_bin(), *args, "--port", str(port)], cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=env)
    log.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ruvio exited with {proc.returncode}:\n{(cwd / 'stderr.log').read_text()}")
        if _ping_ok(port):
            return proc, port
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("ruvio did not start:\n" + (cwd / "stderr.log").read_text())


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def info(port: int, section: str) -> dict[str, str]:
    from helpers import RawConn
    with RawConn(port) as c:
        c.send(encode("INFO", section))
        text = bytes(c.read_reply()).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line and not line.startswith("#"))


def stock_conf(tmp: Path) -> Path:
    """Debian's redis.conf as apt installs it, with the one change the issue allows: `daemonize no` (Ruvio runs under
    a supervisor)."""
    assert STOCK_REDIS_CONF.is_file(), "apt's redis-server package provides /etc/redis/redis.conf (scripts/test.sh installs it)"
    text = STOCK_REDIS_CONF.read_text()
    assert re.search(r"^daemonize yes$", text, re.M), "the stock file daemonizes"
    conf = tmp / "redis.conf"
    conf.write_text(re.sub(r"^daemonize yes$", "daemonize no", text, flags=re.M))
    return conf


def test_debian_stock_redis_conf_starts_ruvio_with_one_warning(tmp_path: Path) -> None:
    conf = stock_conf(tmp_path)
    data = tmp_path / "data"
    # Flags override the file, as with redis-server: the stock dir, logfile and pidfile are the system's.
    proc, port = start([conf.as_posix(), "--dir", data.as_posix(), "--logfile", "", "--pidfile", ""], tmp_path)
    try:
        log = (tmp_path / "stderr.log").read_text()
        warnings = [line for line in log.splitlines() if "WARN" in line]
        assert len(warnings) == 1, log
        ignored = warnings[0].split("):", 1)[1].strip().split(", ")
        # Every stock directive Ruvio does not act on is named, each once.
        for name in ["tcp-backlog", "rdbcompression", "dbfilename", "repl-diskless-sync", "lazyfree-lazy-eviction",
                     "jemalloc-bg-thread"]:
            assert name in ignored, (name, ignored)
        assert len(ignored) == len(set(ignored))
        # Settings Ruvio acts on are not in the list (acllog-max-len became one with ACL LOG's bound).
        assert "acllog-max-len" not in ignored, ignored
        assert "ERROR" not in log
        # Values from the file are in effect.
        import redis
        r = redis.Redis(port=port, socket_timeout=5)
        assert r.config_get("hash-max-listpack-entries") == {"hash-max-listpack-entries": "512"}
        # The data types' parameters and keyspace notifications are parameters now (issue 33), not ignored.
        assert r.config_get("zset-max-listpack-entries") == {"zset-max-listpack-entries": "128"}
        assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": ""}
        assert r.config_get("appendonly") == {"appendonly": "no"}
        assert r.set("k", "v") and r.get("k") == b"v"
        r.close()
        server = info(port, "server")
        assert server["config_file"] == conf.as_posix()
        assert server["process_id"] == str(proc.pid)
        assert os.path.samefile(server["executable"], ruvio_bin())
        assert server["dir"] == data.as_posix()
        assert server["appendfsync"] == "everysec" and server["appendonly"] == "no"
        # The start-up line says the same, in one line.
        line = next(l for l in log.splitlines() if "starting: pid" in l)
        assert f"pid {proc.pid}," in line and f"config_file {conf.as_posix()}," in line
        assert f"dir {data.as_posix()}," in line and "appendonly no, appendfsync everysec" in line
    finally:
        stop(proc)


@pytest.mark.parametrize("directive, why", [
    ("daemonize yes", "supervisor"),
    ("maxmemory-policy allkeys-lru", "never evicts"),
    ("replica-serve-stale-data no", "even with its link down"),
])
def test_a_directive_ruvio_cannot_honour_refuses_to_start_naming_it(tmp_path: Path, directive: str, why: str) -> None:
    conf = tmp_path / "ruvio.conf"
    conf.write_text(f"port 0\ntcp-backlog 511\n{directive}\n")
    out = subprocess.run([ruvio_bin(), "--config", conf.as_posix(), "--dir", (tmp_path / "d").as_posix()],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out
    assert f"{conf.as_posix()}:3" in out.stderr and directive.split()[0] in out.stderr and why in out.stderr, out.stderr


def test_an_unknown_directive_still_refuses(tmp_path: Path) -> None:
    out = subprocess.run([ruvio_bin(), "--no-such-directive", "1", "--dir", (tmp_path / "d").as_posix()],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "no-such-directive" in out.stderr, out


def test_maxmemory_noeviction_refuses_writes_with_redis_oom_error(server_factory) -> None:
    # 1mb is far below any process's resident set: every denyoom command is refused once memory is sampled.
    srv = server_factory("--maxmemory", "1mb", "--maxmemory-policy", "noeviction", "--hz", "100")
    with srv.raw() as c:
        deadline = time.monotonic() + 5
        while True:
            c.send(encode("SET", "k", "v"))
            reply = c.read_reply()
            if not isinstance(reply, bytes) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert isinstance(reply, Error) and str(reply) == "OOM command not allowed when used memory > 'maxmemory'.", reply
        c.send(encode("LEASE", "lock", "1000"))
        assert str(c.read_reply()) == "OOM command not allowed when used memory > 'maxmemory'."
        # Reads and deletes still run, so memory can come down.
        c.send(encode("GET", "k"))
        assert c.read_reply() is NULL  # the refused SET never ran
        c.send(encode("DEL", "k"))
        assert c.read_reply() == 0
        c.send(encode("INFO", "memory"))
        assert b"\r\nmaxmemory:1048576\r\n" in c.read_reply()
        c.send(encode("CONFIG", "SET", "maxmemory", "0"))
        assert c.read_reply() == b"OK"
        c.send(encode("SET", "k", "v"))
        assert c.read_reply() == b"OK"


def _voluntary_switches(pid: int) -> int:
    """Times the process's threads went to sleep (each sleep is a wake-up later), from /proc."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total


@pytest.mark.parametrize("persistence", [(), ("--appendonly", "no")], ids=["appendonly-everysec", "appendonly-no"])
def test_an_idle_server_wakes_about_as_often_as_redis(server_factory, persistence: tuple[str, ...]) -> None:
    # Redis wakes 10 times a second when idle (hz 10). Ruvio's log writer used to come round every 2 ms whether or
    # not anything was committed (about 500 wake-ups a second, half a percent of a core doing nothing); it now
    # sleeps once everything is written and fsynced, and the next commit wakes it.
    srv = server_factory(*persistence)
    with srv.raw() as c:
        for i in range(100):
            c.send(encode("SET", f"k{i}", "v"))
            assert c.read_reply() == b"OK"
    # Past everysec's fsync of those writes, and the writer's quiet round after it.
    time.sleep(1.5)
    before = _voluntary_switches(srv.proc.pid)
    time.sleep(2.0)
    per_second = (_voluntary_switches(srv.proc.pid) - before) / 2.0
    assert per_second < 100, f"{per_second} wake-ups a second while idle"
    # Still serving and persisting: a write after the quiet spell is acknowledged and readable.
    with srv.raw() as c:
        c.send(encode("SET", "after", "idle"))
        assert c.read_reply() == b"OK"
        c.send(encode("GET", "after"))
        assert c.read_reply() == b"idle"


def test_logfile_pidfile_and_json_log_format(tmp_path: Path) -> None:
    logfile, pidfile = tmp_path / "ruvio.log", tmp_path / "ruvio.pid"
    proc, port = start(["--dir", (tmp_path / "d").as_posix(), "--logfile", logfile.as_posix(), "--pidfile",
                        pidfile.as_posix(), "--log-format", "json", "--tcp-backlog", "511"], tmp_path)
    try:
        assert pidfile.read_text().strip() == str(proc.pid)
    finally:
        stop(proc)
    assert proc.returncode == 0
    assert not pidfile.exists(), "the pidfile is removed at exit"
    assert (tmp_path / "stderr.log").read_text() == "", "everything went to the logfile"
    events = [json.loads(line) for line in logfile.read_text().splitlines()]
    assert all({"timestamp", "level", "message"} <= e.keys() for e in events), events
    messages = [e["message"] for e in events]
    assert any(m.startswith("Ruvio ") and "ready to accept connections" in m for m in messages), messages
    assert [e["level"] for e in events if "accepted but ignored" in e["message"]] == ["WARN"]


def test_help_and_version() -> None:
    out = subprocess.run([ruvio_bin(), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for p in ["--appendonly", "--appendfsync", "--replicaof", "--durability-timeout", "--requirepass", "--maxmemory",
              "contrib/ruvio.conf"]:
        assert p in out.stdout, p
    for flag in ["-v", "--version"]:
        out = subprocess.run([ruvio_bin(), flag], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0
        assert re.fullmatch(r"ruvio \d+\.\d+\.\d+ \(git (?:[0-9a-f]{7,40}|unknown)\)\n", out.stdout), out.stdout


def test_readiness_notification_arrives_once_connections_are_accepted(tmp_path: Path) -> None:
    """systemd's Type=notify protocol: the service sends READY=1 to the datagram socket named by NOTIFY_SOCKET.
    Here the test is the service manager."""
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path.as_posix())
    sock.settimeout(15)
    port = _free_port()
    env = {**os.environ, "NOTIFY_SOCKET": sock_path.as_posix()}
    proc = subprocess.Popen([ruvio_bin(), "--port", str(port), "--dir", (tmp_path / "d").as_posix()], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        message = sock.recv(4096).decode()
        assert "READY=1" in message.split("\n"), message
        # Ready means ready: a connection is accepted and served right away.
        assert _ping_ok(port)
        proc.send_signal(signal.SIGTERM)
        assert "STOPPING=1" in sock.recv(4096).decode().split("\n")
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        sock.close()


def test_contrib_ruvio_conf_starts_ruvio_and_names_every_parameter(tmp_path: Path) -> None:
    conf = REPO_ROOT / "contrib" / "ruvio.conf"
    text = conf.read_text()
    proc, port = start([conf.as_posix(), "--dir", (tmp_path / "d").as_posix()], tmp_path)
    try:
        log = (tmp_path / "stderr.log").read_text()
        assert "WARN" not in log and "ERROR" not in log, log
        import redis
        r = redis.Redis(port=port, socket_timeout=5, decode_responses=True)
        names = r.config_get("*").keys()
        r.close()
        # Every parameter is in the file, set or commented out ("# io-threads 1"), with its comment above it.
        named = set(re.findall(r"^(?:# )?([a-z][a-z0-9-]+) ", text, re.M))
        aliases = {"slave-read-only", "slaveof", "min-slaves-to-write", "min-slaves-max-lag", "hash-max-ziplist-entries",
                   "hash-max-ziplist-value", "lua-time-limit", "zset-max-ziplist-entries", "zset-max-ziplist-value",
                   "list-max-ziplist-size"}
        missing = sorted(set(names) - aliases - named)
        assert not missing, f"contrib/ruvio.conf lacks {missing}"
    finally:
        stop(proc)


def test_contrib_systemd_unit_uses_the_readiness_protocol() -> None:
    unit = (REPO_ROOT / "contrib" / "ruvio.service").read_text()
    assert re.search(r"^Type=notify$", unit, re.M)
    assert re.search(r"^ExecStart=\S*ruvio /etc/ruvio/ruvio.conf", unit, re.M)
