"""redis-py's Sentinel support against `ruvio coordinator`.

Three coordinators watch a redis-server primary with two redis-server replicas (Ruvio has no replication yet;
the coordinator speaks to redis-server through the same commands). `Sentinel(...).master_for(name)` must find
the primary through the coordinators and follow a failover after kill -9 of the primary, with no Ruvio-specific
code in the client.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis
from redis.sentinel import MasterNotFoundError, Sentinel

from conftest import REPO_ROOT, _die_with_parent, _free_port, _ping_ok

pytestmark = pytest.mark.ruvio_only

WAIT = 60.0


def ruvio_bin() -> str:
    exe = os.environ.get("RUVIO_BIN") or str(REPO_ROOT / "target" / "release" / "ruvio")
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        pytest.fail(f"ruvio binary not found: {exe} (set RUVIO_BIN or build with `cargo build --release`)")
    return exe


def redis_server() -> str:
    exe = shutil.which("redis-server")
    if not exe:
        pytest.fail("redis-server is required for the coordinator tests (apt-get install redis-server)")
    return exe


def wait_until(what: str, cond, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - the condition is retried until the deadline
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last error: {last!r})")


class Procs:
    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="ruvio-coordinator-py-"))
        self.procs: dict[str, subprocess.Popen] = {}

    def spawn(self, key: str, cmd: list[str], port: int) -> None:
        log = open(self.dir / f"{key}.log", "ab")
        self.procs[key] = subprocess.Popen(cmd, cwd=self.dir, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        log.close()
        wait_until(f"{key} on port {port}", lambda: self.procs[key].poll() is None and _ping_ok(port), 15)

    def redis(self, port: int, primary: int | None = None) -> None:
        d = self.dir / f"redis-{port}"
        d.mkdir(exist_ok=True)
        cmd = [redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
               "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"]
        if primary is not None:
            cmd += ["--replicaof", "127.0.0.1", str(primary)]
        self.spawn(f"redis-{port}", cmd, port)

    def coordinator(self, port: int, peers: list[int], primary: int) -> None:
        d = self.dir / f"coordinator-{port}"
        d.mkdir(exist_ok=True)
        conf = d / "coordinator.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {d}\n"
            f"coordinator-peers {' '.join(f'127.0.0.1:{p}' for p in peers)}\n"
            f"sentinel monitor mymaster 127.0.0.1 {primary} 2\n"
            # Coordinators log in to each other (a group of more than one refuses to start without it).
            "sentinel sentinel-user coordinators\nsentinel sentinel-pass test-peer-secret\n"
            "sentinel down-after-milliseconds mymaster 1000\n"
            "sentinel failover-timeout mymaster 10000\n")
        self.spawn(f"coordinator-{port}", [ruvio_bin(), "coordinator", "--config", str(conf)], port)

    def kill9(self, key: str) -> None:
        p = self.procs.pop(key)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}" for f in self.dir.glob("*.log"))

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def group():
    ps = Procs()
    try:
        primary, r1, r2 = _free_port(), _free_port(), _free_port()
        ps.redis(primary)
        ps.redis(r1, primary)
        ps.redis(r2, primary)
        coords = [_free_port() for _ in range(3)]
        for c in coords:
            ps.coordinator(c, coords, primary)
        yield ps, primary, [r1, r2], coords
    finally:
        ps.stop()


def test_master_for_finds_the_primary_and_follows_a_failover(group):
    ps, primary, replicas, coords = group
    sentinels = [("127.0.0.1", c) for c in coords]

    # Discovery, with RESP2 and RESP3 connections to the coordinators.
    for proto in (2, 3):
        s = Sentinel(sentinels, socket_timeout=2, sentinel_kwargs={"socket_timeout": 2, "protocol": proto})
        assert s.discover_master("mymaster") == ("127.0.0.1", primary)
        wait_until("both replicas discovered",
                   lambda: sorted(p for _, p in s.discover_slaves("mymaster")) == sorted(replicas))
        with pytest.raises(MasterNotFoundError):
            s.discover_master("nosuch")

    s = Sentinel(sentinels, socket_timeout=2, sentinel_kwargs={"socket_timeout": 2})
    m = s.master_for("mymaster", socket_timeout=2)
    m.set("before", "1")
    assert m.get("before") == b"1"
    # Let the replicas have it (asynchronous replication) so the failover keeps it.
    for r in replicas:
        wait_until(f"replica {r} has the key", lambda r=r: redis.Redis(port=r, socket_timeout=2).get("before") == b"1")

    ps.kill9(f"redis-{primary}")

    def write_through_sentinel():
        try:
            m.set("after", "2")
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError, MasterNotFoundError):
            return None
        addr = m.connection_pool.get_master_address()
        return addr if addr[1] != primary else None

    try:
        new = wait_until("a write through master_for after the failover", write_through_sentinel)
    except AssertionError:
        raise AssertionError("no failover seen by redis-py:\n" + ps.logs())
    assert new[1] in replicas
    assert m.get("before") == b"1"
    assert m.get("after") == b"2"
    assert redis.Redis(port=new[1], socket_timeout=2).role()[0] == b"master"
    other = next(r for r in replicas if r != new[1])
    wait_until("the other replica follows the new primary",
               lambda: redis.Redis(port=other, socket_timeout=2).role()[:3] == [b"slave", b"127.0.0.1", new[1]])
    # Every coordinator agrees.
    for c in coords:
        wait_until(f"coordinator {c} names the new primary",
                   lambda c=c: Sentinel([("127.0.0.1", c)], sentinel_kwargs={"socket_timeout": 2})
                   .discover_master("mymaster") == new)
